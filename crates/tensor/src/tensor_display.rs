//! `Display` for tensors: a header and the values, nested by dim, long dims elided.

use std::fmt;

use crate::tensor::Tensor;

/// Dims longer than this print their first and last `EDGE` entries only.
const ELIDE_ABOVE: usize = 8;
const EDGE: usize = 3;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor[{}", self.dtype())?;
        for (i, d) in self.dims().iter().enumerate() {
            f.write_str(if i == 0 { "; " } else { ", " })?;
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        let values = match self.to_vec_f64() {
            Ok(v) => v,
            Err(e) => return write!(f, " <unreadable: {e}>"),
        };
        f.write_str("\n")?;
        let integer = matches!(
            self.dtype(),
            crate::DType::I32 | crate::DType::U32 | crate::DType::U8
        );
        write_nested(f, &values, self.dims(), 0, integer)
    }
}

fn write_value(f: &mut fmt::Formatter<'_>, v: f64, integer: bool) -> fmt::Result {
    if integer {
        write!(f, "{v}")
    } else {
        write!(f, "{v:.4}")
    }
}

/// Writes `values` (row-major over `dims`) as nested brackets, indenting by `depth`.
fn write_nested(
    f: &mut fmt::Formatter<'_>,
    values: &[f64],
    dims: &[usize],
    depth: usize,
    integer: bool,
) -> fmt::Result {
    let Some((&n, inner)) = dims.split_first() else {
        return write_value(f, values.first().copied().unwrap_or(0.0), integer);
    };
    let per = inner.iter().product::<usize>();
    f.write_str("[")?;
    let shown: Vec<usize> = if n > ELIDE_ABOVE {
        (0..EDGE).chain(n - EDGE..n).collect()
    } else {
        (0..n).collect()
    };
    for (k, &i) in shown.iter().enumerate() {
        if k > 0 {
            if inner.is_empty() {
                f.write_str(", ")?;
            } else {
                write!(f, ",\n{:width$}", "", width = depth + 1)?;
            }
        }
        if n > ELIDE_ABOVE && k == EDGE {
            f.write_str("...")?;
            if inner.is_empty() {
                f.write_str(", ")?;
            } else {
                write!(f, ",\n{:width$}", "", width = depth + 1)?;
            }
        }
        write_nested(
            f,
            &values[i * per..(i + 1) * per],
            inner,
            depth + 1,
            integer,
        )?;
    }
    f.write_str("]")
}
