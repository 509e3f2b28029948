//! Binding windows: the byte range of a buffer one storage binding covers.
//!
//! A binding starts at a multiple of the device's `min_storage_buffer_offset_alignment`
//! and spans at most `max_storage_buffer_binding_size` bytes (128 MiB on many adapters).
//! A tensor larger than that is bound in several windows by the ops that can split their
//! work (`linear` and `embedding` by weight rows, dense elementwise ops by element
//! ranges); other ops report [`crate::GpuError::TooLarge`].

use crate::error::{GpuError, Result};
use crate::memory::DeviceBlock;

/// One storage binding: `size` bytes of `block` from byte `offset`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BufferWindow<'a> {
    pub(crate) block: &'a DeviceBlock,
    pub(crate) offset: u64,
    pub(crate) size: u64,
}

/// The device's binding rules.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BindingRules {
    /// Binding offsets are multiples of this.
    pub(crate) align: u64,
    /// A binding spans at most this many bytes (a multiple of 4).
    pub(crate) max_size: u64,
}

impl BindingRules {
    /// The window covering bytes `start..end` of `block`: from `start` rounded down to the
    /// alignment, to `end` rounded up to 4. Returns the window and the byte offset of
    /// `start` inside it; an error when it exceeds the binding limit.
    pub(crate) fn window<'a>(
        &self,
        op: &'static str,
        what: &'static str,
        block: &'a DeviceBlock,
        start: u64,
        end: u64,
    ) -> Result<(BufferWindow<'a>, u64)> {
        let offset = start - start % self.align;
        let end = end
            .max(start + 1)
            .next_multiple_of(4)
            .min(block.size() as u64);
        let size = end.saturating_sub(offset).max(4);
        if size > self.max_size {
            return Err(GpuError::TooLarge {
                op,
                what,
                bytes: size,
                limit: self.max_size,
            });
        }
        Ok((
            BufferWindow {
                block,
                offset,
                size,
            },
            start - offset,
        ))
    }

    /// How many rows of `row_bytes` (starting anywhere) always fit one window, at least 1.
    pub(crate) fn rows_per_window(
        &self,
        op: &'static str,
        what: &'static str,
        row_bytes: u64,
    ) -> Result<u64> {
        // A window may start up to align-1 bytes before the first row and is rounded up
        // by up to 3 bytes at the end.
        let usable = self.max_size.saturating_sub(self.align + 4);
        let rows = usable / row_bytes.max(1);
        if rows == 0 {
            return Err(GpuError::TooLarge {
                op,
                what,
                bytes: row_bytes,
                limit: usable,
            });
        }
        Ok(rows)
    }
}
