//! `Cursor`: bounds-checked little-endian reads over a byte slice, tracking the offset.

/// A read that ran past the end of the bytes: where it started and what it needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Truncated {
    /// Offset of the read.
    pub(crate) offset: usize,
    /// Bytes the read needed.
    pub(crate) needed: u64,
    /// Bytes that were left.
    pub(crate) left: usize,
}

impl Truncated {
    /// A message for errors: `needs N bytes, only M left (truncated file)`.
    pub(crate) fn message(&self) -> String {
        format!(
            "needs {} bytes but only {} are left (truncated file?)",
            self.needed, self.left
        )
    }
}

/// A forward-only reader over `bytes`. Every read checks the remaining length first, so
/// no read can go out of bounds whatever the file says.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// The current offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left after the current offset.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `len` bytes (a `u64` so that an unchecked file length can be passed
    /// straight in: it is compared before any conversion).
    pub(crate) fn take(&mut self, len: u64) -> Result<&'a [u8], Truncated> {
        let left = self.remaining();
        if len > left as u64 {
            return Err(Truncated {
                offset: self.pos,
                needed: len,
                left,
            });
        }
        let len = len as usize;
        let out = &self.bytes[self.pos..self.pos + len];
        self.pos += len;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        let bytes = self.take(N as u64)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Truncated> {
        Ok(self.array::<1>()?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, Truncated> {
        self.array().map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Truncated> {
        self.array().map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Truncated> {
        self.array().map(u64::from_le_bytes)
    }

    pub(crate) fn f32(&mut self) -> Result<f32, Truncated> {
        self.array().map(f32::from_le_bytes)
    }

    pub(crate) fn f64(&mut self) -> Result<f64, Truncated> {
        self.array().map(f64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_refuses_past_the_end() {
        let mut c = Cursor::new(&[1, 0, 0, 0, 2]);
        assert_eq!(c.u32().unwrap(), 1);
        assert_eq!(c.pos(), 4);
        let e = c.u32().unwrap_err();
        assert_eq!(
            e,
            Truncated {
                offset: 4,
                needed: 4,
                left: 1
            }
        );
        assert_eq!(c.pos(), 4, "a failed read consumes nothing");
        assert!(c.take(u64::MAX).is_err());
        assert_eq!(c.u8().unwrap(), 2);
        assert_eq!(c.remaining(), 0);
    }
}
