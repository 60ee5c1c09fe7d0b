//! Sequence-number arithmetic modulo 2^32 (RFC 9293 section 3.4): `a < b` means `b` is ahead of
//! `a` by less than 2^31.

#[inline]
pub(crate) fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[inline]
pub(crate) fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

#[inline]
pub(crate) fn gt(a: u32, b: u32) -> bool {
    lt(b, a)
}

#[inline]
pub(crate) fn ge(a: u32, b: u32) -> bool {
    le(b, a)
}

#[inline]
pub(crate) fn max(a: u32, b: u32) -> u32 {
    if gt(a, b) {
        a
    } else {
        b
    }
}

#[inline]
pub(crate) fn min(a: u32, b: u32) -> u32 {
    if lt(a, b) {
        a
    } else {
        b
    }
}

/// `lo <= x < lo + len`.
#[inline]
pub(crate) fn in_window(x: u32, lo: u32, len: u32) -> bool {
    x.wrapping_sub(lo) < len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_comparisons() {
        assert!(lt(1, 2) && !lt(2, 1) && !lt(2, 2));
        assert!(lt(u32::MAX, 0) && gt(0, u32::MAX));
        assert!(le(5, 5) && ge(5, 5));
        assert_eq!(max(u32::MAX - 1, 3), 3);
        assert_eq!(min(u32::MAX - 1, 3), u32::MAX - 1);
        assert!(in_window(2, u32::MAX, 4) && !in_window(3, u32::MAX, 4));
    }
}
