//! The "rows" view kernels over the last dim share: the layout of each row's first
//! element and the step between a row's elements.

use tempra_tensor::Layout;

use crate::params::collapse;

/// Rows of a layout's last dim.
pub(crate) struct Rows {
    /// How many rows.
    pub(crate) count: usize,
    /// Elements per row.
    pub(crate) len: usize,
    /// Units between a row's elements.
    pub(crate) step: usize,
    /// The collapsed dims of the rows (every dim but the last).
    pub(crate) dims: Vec<usize>,
    /// Their strides.
    pub(crate) strides: Vec<usize>,
}

impl Rows {
    /// The rows of `layout` (a rank-0 layout is one row of one element).
    pub(crate) fn of(layout: &Layout) -> Self {
        let r = layout.rank();
        if r == 0 {
            return Self {
                count: 1,
                len: 1,
                step: 0,
                dims: Vec::new(),
                strides: Vec::new(),
            };
        }
        let (dims, strides) = collapse(&layout.dims()[..r - 1], &[&layout.strides()[..r - 1]]);
        Self {
            count: layout.dims()[..r - 1].iter().product(),
            len: layout.dims()[r - 1],
            step: layout.strides()[r - 1],
            dims,
            strides: strides.into_iter().next().unwrap_or_default(),
        }
    }
}
