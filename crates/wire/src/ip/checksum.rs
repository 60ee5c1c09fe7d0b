//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Every function here returns a *sum*: the 16-bit one's complement sum, folded, not yet
//! complemented. A checksum field holds the complement of the sum of everything it covers (with
//! the field itself zero), so:
//!
//! - to fill: `field = !combine(&[pseudo_header, data(segment_with_zero_field)])`;
//! - to verify: `combine(&[pseudo_header, data(segment)]) == 0xffff`.
//!
//! Partial sums combine only if each part starts at an even offset of the whole; the IP and TCP
//! headers are multiples of 4 bytes, so the parts this crate sums always do.

use crate::ip::{IpAddress, IpProtocol};
use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

/// Folds a wide one's complement accumulator to 16 bits (end-around carry), in four steps
/// without a branch: below 2^33, then 2^18, then 0x10001, then 0xffff at most.
#[inline]
const fn fold(sum: u64) -> u16 {
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Folds a 128-bit accumulator of 64-bit words to 64 bits (end-around carry).
#[inline]
const fn fold128(sum: u128) -> u64 {
    let (low, carry) = (sum as u64).overflowing_add((sum >> 64) as u64);
    // After a carry `low` is at most 2^64 - 2: adding it back cannot carry again.
    low + carry as u64
}

/// The one's complement sum of `bytes` read as 16-bit words in the machine's byte order (an odd
/// last byte padded with a zero byte), not folded. The sum of the words read in the machine's
/// order is the byte swap of their sum read big-endian (RFC 1071 section 2(B)), so this reads
/// 64-bit words straight from memory, as Linux's `csum_partial` does, and [`to_network`] swaps
/// once at the end. `2^16 = 1` modulo `2^16 - 1`, so a wider word is the sum of its 16-bit
/// halves; a 128-bit accumulator of 64-bit words cannot overflow.
#[inline]
fn sum_native(bytes: &[u8]) -> u64 {
    sum_native_onto(0, bytes)
}

/// [`sum_native`] added onto `sum` (a sum of fewer than 2^64 words already taken, e.g. a
/// pseudo-header's), so that a transport checksum folds once.
#[inline]
fn sum_native_onto(mut sum: u128, bytes: &[u8]) -> u64 {
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for w in b.chunks_exact(8) {
            sum += u128::from(u64::from_ne_bytes(w.try_into().unwrap()));
        }
    }
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        sum += u128::from(u64::from_ne_bytes(w.try_into().unwrap()));
    }
    let mut rest = words.remainder();
    if rest.len() >= 4 {
        sum += u128::from(u32::from_ne_bytes(rest[..4].try_into().unwrap()));
        rest = &rest[4..];
    }
    if rest.len() >= 2 {
        sum += u128::from(u16::from_ne_bytes([rest[0], rest[1]]));
        rest = &rest[2..];
    }
    if let Some(&last) = rest.first() {
        sum += u128::from(u16::from_ne_bytes([last, 0]));
    }
    fold128(sum)
}

/// A sum of words read in the machine's byte order, folded and turned into the network
/// (big-endian) order every other function here returns.
#[inline]
fn to_network(native: u64) -> u16 {
    u16::from_be(fold(native))
}

/// The one's complement sum of `data` read as big-endian 16-bit words, an odd last byte padded
/// with a zero byte.
pub fn data(data: &[u8]) -> u16 {
    to_network(sum_native(data))
}

/// The one's complement sum of an IPv4 header (`header`: 20 to 60 bytes, a multiple of 4, as its
/// IHL makes it): [`data`]'s answer for less work, the header's 32-bit words added in the
/// machine's byte order with no tail to handle, the common 20-byte header unrolled. Any other
/// length gets [`data`]'s sum.
#[inline]
pub fn ipv4_header(header: &[u8]) -> u16 {
    let word = |w: &[u8]| u64::from(u32::from_ne_bytes(w.try_into().unwrap()));
    let sum = if let Ok(h) = <&[u8; 20]>::try_from(header) {
        word(&h[0..4]) + word(&h[4..8]) + word(&h[8..12]) + word(&h[12..16]) + word(&h[16..20])
    } else if header.len() % 4 == 0 {
        header.chunks_exact(4).map(word).sum()
    } else {
        return data(header);
    };
    to_network(sum)
}

/// The sum a TCP or UDP checksum covers: the pseudo-header of `src_addr`, `dst_addr`,
/// `protocol` and the length of `segment`, and `segment` itself, in one pass (the
/// pseudo-header's words are added to the same accumulator, in the machine's byte order).
pub fn transport(src_addr: &IpAddress, dst_addr: &IpAddress, protocol: IpProtocol, segment: &[u8]) -> u16 {
    let length = segment.len() as u32;
    // The pseudo-header's protocol and length words, as a read of them in the machine's byte
    // order would give them (`to_be` swaps on a little-endian machine).
    let words = u64::from(u16::from(u8::from(protocol)).to_be())
        + u64::from(((length >> 16) as u16).to_be())
        + u64::from((length as u16).to_be());
    // At most eight 32-bit address words and three 16-bit words: below 2^36.
    let pseudo_header = address_native(src_addr) + address_native(dst_addr) + words;
    to_network(sum_native_onto(u128::from(pseudo_header), segment))
}

/// The 32-bit words of an address read in the machine's byte order, summed (not folded): one
/// word for IPv4, four for IPv6, without a loop.
#[inline]
fn address_native(addr: &IpAddress) -> u64 {
    let word = |w: &[u8]| u64::from(u32::from_ne_bytes(w.try_into().unwrap()));
    match addr {
        IpAddress::V4(a) => word(&a.0),
        IpAddress::V6(a) => word(&a.0[0..4]) + word(&a.0[4..8]) + word(&a.0[8..12]) + word(&a.0[12..16]),
    }
}

/// The one's complement sum of partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    // Fewer than 2^48 partial sums of at most 2^16 - 1 fit in a u64.
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// Sum of the words of an address.
fn address_sum(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(2).map(|w| u64::from(u16::from_be_bytes([w[0], w[1]]))).sum()
}

/// What both pseudo-headers sum to: the address words, the protocol and the length's two words
/// (IPv4 carries the protocol and a 16-bit length, IPv6 three zero bytes, the next header and a
/// 32-bit length: the same words once summed).
fn pseudo_header_sum(src_addr: &[u8], dst_addr: &[u8], protocol: IpProtocol, length: u32) -> u16 {
    fold(
        address_sum(src_addr)
            + address_sum(dst_addr)
            + u64::from(u8::from(protocol))
            + u64::from(length >> 16)
            + u64::from(length & 0xffff),
    )
}

/// The sum of the IPv4 pseudo-header (RFC 793, RFC 768): source, destination, zero, protocol and
/// the upper-layer length.
pub fn pseudo_header_v4(src_addr: &Ipv4Address, dst_addr: &Ipv4Address, protocol: IpProtocol, length: u32) -> u16 {
    pseudo_header_sum(src_addr.as_bytes(), dst_addr.as_bytes(), protocol, length)
}

/// The sum of the IPv6 pseudo-header (RFC 8200 section 8.1): source, destination, the 32-bit
/// upper-layer length, three zero bytes and the next header.
pub fn pseudo_header_v6(src_addr: &Ipv6Address, dst_addr: &Ipv6Address, next_header: IpProtocol, length: u32) -> u16 {
    pseudo_header_sum(src_addr.as_bytes(), dst_addr.as_bytes(), next_header, length)
}

/// The pseudo-header sum for addresses of either version.
///
/// Both pseudo-headers sum to "the address words, the protocol and the length", so a mixed pair
/// (a caller bug) gives a wrong sum, never a panic.
pub fn pseudo_header(src_addr: &IpAddress, dst_addr: &IpAddress, protocol: IpProtocol, length: u32) -> u16 {
    pseudo_header_sum(src_addr.as_bytes(), dst_addr.as_bytes(), protocol, length)
}

/// The new value of a checksum *field* after one 16-bit word it covers changed from `old` to
/// `new` (RFC 1624, equation 3: `HC' = ~(~HC + ~m + m')`).
pub fn update_u16(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

/// The new value of a checksum *field* after one 32-bit field it covers (at an even offset)
/// changed from `old` to `new`, e.g. an IPv4 address or a TCP sequence number.
pub fn update_u32(checksum: u16, old: u32, new: u32) -> u16 {
    !fold(
        u64::from(!checksum)
            + u64::from(!(old >> 16) as u16)
            + u64::from(!(old as u16))
            + u64::from(new >> 16)
            + u64::from(new & 0xffff),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obvious RFC 1071 loop over 16-bit words with a 32-bit accumulator.
    fn reference(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for pair in data.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            sum += u32::from(word);
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    fn pseudo_random(seed: u64, len: usize) -> std::vec::Vec<u8> {
        testkit::Rng::new(seed).bytes(len)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
    }

    #[test]
    fn matches_reference_at_every_length() {
        let bytes = pseudo_random(7, 300);
        for len in 0..bytes.len() {
            assert_eq!(data(&bytes[..len]), reference(&bytes[..len]), "len {len}");
        }
        let ones = [0xffu8; 64];
        assert_eq!(data(&ones), 0xffff);
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0x12]), 0x1200);
    }

    #[test]
    fn ipv4_header_sum_is_the_data_sum() {
        let bytes = pseudo_random(17, 64);
        for len in 0..=bytes.len() {
            assert_eq!(ipv4_header(&bytes[..len]), data(&bytes[..len]), "len {len}");
        }
        let ones = [0xffu8; 60];
        assert_eq!(ipv4_header(&ones[..20]), data(&ones[..20]));
        assert_eq!(ipv4_header(&ones), data(&ones));
    }

    #[test]
    fn combine_equals_whole() {
        let bytes = pseudo_random(11, 200);
        for split in (0..200).step_by(2) {
            assert_eq!(combine(&[data(&bytes[..split]), data(&bytes[split..])]), data(&bytes));
        }
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[]), 0);
    }

    #[test]
    fn fold_is_the_end_around_carry_sum() {
        // The loop it replaced, on the extremes and pseudo-random values of every width.
        let reference = |mut sum: u64| {
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            sum as u16
        };
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut values =
            std::vec![0, 1, 0xffff, 0x1_0000, 0x1_fffe, 0xffff_ffff, 0x1_ffff_fffe, u64::MAX, u64::MAX - 1];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for v in values {
            assert_eq!(fold(v), reference(v), "{v:#x}");
        }
    }

    #[test]
    fn large_buffers_of_ones_do_not_overflow() {
        // Every 64-bit word all ones: the accumulator's carries must all come back.
        let ones = std::vec![0xffu8; (1 << 21) + 3];
        assert_eq!(data(&ones), reference(&ones));
        assert_eq!(data(&ones[1..]), reference(&ones[1..]));
    }

    #[test]
    fn transport_equals_pseudo_header_and_data_combined() {
        let bytes = pseudo_random(13, 1600);
        let v4 = (IpAddress::V4(Ipv4Address([192, 0, 2, 1])), IpAddress::V4(Ipv4Address([198, 51, 100, 255])));
        let mut a6 = [0xffu8; 16];
        a6[0] = 0x20;
        let v6 = (IpAddress::V6(Ipv6Address(a6)), IpAddress::V6(Ipv6Address(pseudo_random(5, 16).try_into().unwrap())));
        for (src, dst) in [v4, v6] {
            for protocol in [IpProtocol::Tcp, IpProtocol::Udp] {
                for len in (0..bytes.len()).step_by(7) {
                    let segment = &bytes[..len];
                    let expected = combine(&[pseudo_header(&src, &dst, protocol, len as u32), data(segment)]);
                    assert_eq!(transport(&src, &dst, protocol, segment), expected, "{src} {len}");
                }
            }
        }
        // Lengths of 2^16 and more (IPv6 jumbograms) carry into the length's high word.
        let big = std::vec![0xa5u8; 70_001];
        let (src, dst) = v6;
        let expected = combine(&[pseudo_header(&src, &dst, IpProtocol::Tcp, 70_001), data(&big)]);
        assert_eq!(transport(&src, &dst, IpProtocol::Tcp, &big), expected);
    }

    #[test]
    fn pseudo_headers() {
        // 192.168.0.1 -> 192.168.0.199, TCP, 20 bytes:
        // c0a8 + 0001 + c0a8 + 00c7 + 0006 + 0014 = 0x18232 -> 0x8233.
        let src = Ipv4Address([192, 168, 0, 1]);
        let dst = Ipv4Address([192, 168, 0, 199]);
        assert_eq!(pseudo_header_v4(&src, &dst, IpProtocol::Tcp, 20), 0x8233);
        assert_eq!(pseudo_header(&IpAddress::V4(src), &IpAddress::V4(dst), IpProtocol::Tcp, 20), 0x8233);
        let mut src6 = [0u8; 16];
        src6[0] = 0xfe;
        src6[1] = 0x80;
        src6[15] = 1;
        let mut dst6 = [0u8; 16];
        dst6[0] = 0xff;
        dst6[1] = 0x02;
        dst6[15] = 1;
        // fe80 + 0001 + ff02 + 0001 + 003a + 0001 + 0000 (length 0x10000) = 0x1fdbf -> 0xfdc0.
        let (s, d) = (Ipv6Address(src6), Ipv6Address(dst6));
        assert_eq!(pseudo_header_v6(&s, &d, IpProtocol::Icmpv6, 0x1_0000), 0xfdc0);
        assert_eq!(pseudo_header(&IpAddress::V6(s), &IpAddress::V6(d), IpProtocol::Icmpv6, 0x1_0000), 0xfdc0);
    }

    #[test]
    fn incremental_updates_match_recomputation() {
        let mut bytes = pseudo_random(3, 64);
        let field = |b: &[u8]| !data(b);
        for round in 0..200u64 {
            let before = field(&bytes);
            let at = ((round as usize * 6) % 60) & !1;
            let old16 = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
            let new16 = (round as u16).wrapping_mul(0x9e37);
            bytes[at..at + 2].copy_from_slice(&new16.to_be_bytes());
            assert_eq!(update_u16(before, old16, new16), field(&bytes), "u16 round {round}");

            let before = field(&bytes);
            let old32 = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            let new32 = (round as u32).wrapping_mul(0x9e37_79b9);
            bytes[at..at + 4].copy_from_slice(&new32.to_be_bytes());
            assert_eq!(update_u32(before, old32, new32), field(&bytes), "u32 round {round}");
        }
    }
}
