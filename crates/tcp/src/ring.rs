//! A byte ring allocated on first use. An unallocated ring is an empty boxed slice (no heap).

/// Bytes `[head, head + len)` modulo the capacity are in use. Writes may also land beyond `len`
/// (out-of-order data) and be taken in later with [`Ring::extend`].
#[derive(Debug, Default)]
pub(crate) struct Ring {
    buf: Box<[u8]>,
    head: u32,
    len: u32,
}

impl Ring {
    /// Allocates `cap` bytes if not allocated yet.
    pub(crate) fn ensure(&mut self, cap: usize) {
        if self.buf.is_empty() && cap > 0 {
            self.buf = vec![0u8; cap].into_boxed_slice();
            self.head = 0;
        }
    }

    /// Frees the memory if the ring holds nothing.
    pub(crate) fn release(&mut self) {
        if self.len == 0 {
            self.buf = Box::default();
            self.head = 0;
        }
    }

    /// Drops the contents and the memory.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.release();
    }

    pub(crate) fn is_allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Writes `data` at `off` bytes after the head. The caller keeps `off + data.len()` within
    /// the capacity.
    pub(crate) fn write_at(&mut self, off: usize, data: &[u8]) {
        let cap = self.buf.len();
        debug_assert!(off + data.len() <= cap);
        let start = (self.head as usize + off) % cap;
        let first = data.len().min(cap - start);
        self.buf[start..start + first].copy_from_slice(&data[..first]);
        self.buf[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Reads `out.len()` bytes from `off` bytes after the head.
    pub(crate) fn read_at(&self, off: usize, out: &mut [u8]) {
        let cap = self.buf.len();
        debug_assert!(off + out.len() <= cap);
        if out.is_empty() {
            return;
        }
        let start = (self.head as usize + off) % cap;
        let first = out.len().min(cap - start);
        out[..first].copy_from_slice(&self.buf[start..start + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.buf[..rest]);
    }

    /// Appends as much of `data` as fits; returns how much.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.buf.len() - self.len as usize);
        self.write_at(self.len as usize, &data[..n]);
        self.len += n as u32;
        n
    }

    /// Counts `n` more bytes (already written with `write_at`) as in use.
    pub(crate) fn extend(&mut self, n: usize) {
        debug_assert!(self.len as usize + n <= self.buf.len());
        self.len += n as u32;
    }

    /// Removes `n` bytes at the head.
    pub(crate) fn pop(&mut self, n: usize) {
        debug_assert!(n <= self.len as usize);
        if n == 0 {
            return;
        }
        self.head = ((self.head as usize + n) % self.buf.len()) as u32;
        self.len -= n as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_wraps() {
        let mut ring = Ring::default();
        assert!(!ring.is_allocated());
        ring.ensure(8);
        assert_eq!(ring.push(b"abcdef"), 6);
        ring.pop(4);
        assert_eq!(ring.push(b"ghijklmn"), 6);
        assert_eq!(ring.len(), 8);
        let mut out = [0u8; 8];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"efghijkl");
        ring.pop(8);
        ring.write_at(3, b"xyz");
        ring.write_at(0, b"uvw");
        ring.extend(6);
        let mut out = [0u8; 6];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"uvwxyz");
        ring.pop(6);
        ring.release();
        assert!(!ring.is_allocated());
    }
}
