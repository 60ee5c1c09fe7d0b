//! A segment's data as the connection reads it: one slice, or the data of consecutive
//! segments that the stack coalesced on receive (as Linux's GRO hands TCP one skb with the
//! others on its frag list), in sequence order, never copied to be joined. It owns trimming
//! (what is already acknowledged, what lies past the window), indexing (the urgent byte) and
//! the one copy of the data into the receive ring; it must not decide what is acceptable.

use crate::ring::Ring;

/// Consecutive pieces of data, seen as one byte string from `start` for `len` bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Payload<'a> {
    parts: &'a [&'a [u8]],
    start: usize,
    len: usize,
}

impl<'a> Payload<'a> {
    /// The concatenation of `parts`.
    pub(crate) fn new(parts: &'a [&'a [u8]]) -> Payload<'a> {
        Payload { parts, start: 0, len: parts.iter().map(|p| p.len()).sum() }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the segments it was made of (Linux's `gso_size`): the first piece's, which
    /// in a coalesced run is full-sized; at most what is left.
    pub(crate) fn piece(&self) -> usize {
        self.parts.first().map_or(0, |p| p.len()).min(self.len)
    }

    /// Without its first `n` bytes (at most all of them).
    pub(crate) fn skip(self, n: usize) -> Payload<'a> {
        let n = n.min(self.len);
        Payload { start: self.start + n, len: self.len - n, ..self }
    }

    /// Its first `n` bytes (at most all of them).
    pub(crate) fn truncate(self, n: usize) -> Payload<'a> {
        Payload { len: self.len.min(n), ..self }
    }

    /// The byte at `at`, if it has one.
    pub(crate) fn get(&self, at: usize) -> Option<u8> {
        if at >= self.len {
            return None;
        }
        let mut at = self.start + at;
        for part in self.parts {
            if at < part.len() {
                return Some(part[at]);
            }
            at -= part.len();
        }
        None
    }

    /// Copies it into `ring` at `off` bytes after the ring's head (the caller keeps it within
    /// the capacity).
    pub(crate) fn write_to(&self, ring: &mut Ring, mut off: usize) {
        let (mut skip, mut left) = (self.start, self.len);
        for part in self.parts {
            if left == 0 {
                break;
            }
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            let take = (part.len() - skip).min(left);
            ring.write_at(off, &part[skip..skip + take]);
            off += take;
            left -= take;
            skip = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> [&'static [u8]; 3] {
        [b"abcd", b"efgh", b"ij"]
    }

    #[test]
    fn trims_and_indexes_across_pieces() {
        let p = parts();
        let all = Payload::new(&p);
        assert_eq!((all.len(), all.piece()), (10, 4));
        let mid = all.skip(3).truncate(5);
        let bytes: Vec<u8> = (0..mid.len()).filter_map(|i| mid.get(i)).collect();
        assert_eq!(bytes, b"defgh");
        assert_eq!(mid.get(5), None);
        assert_eq!(all.skip(20).len(), 0);
    }

    #[test]
    fn writes_only_its_bytes_into_the_ring() {
        let p = parts();
        let mut ring = Ring::default();
        ring.ensure(16);
        Payload::new(&p).skip(2).truncate(7).write_to(&mut ring, 1);
        let mut out = [0u8; 8];
        ring.read_at(0, &mut out);
        assert_eq!(&out[1..], b"cdefghi");
    }
}
