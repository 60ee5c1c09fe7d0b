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

/// Folds a wide one's complement accumulator to 16 bits (end-around carry).
#[inline]
const fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The one's complement sum of `data` read as big-endian 16-bit words, an odd last byte padded
/// with a zero byte.
///
/// Sums 32-bit words into a 64-bit accumulator (2^16 = 1 modulo 2^16 - 1, so this is the same
/// sum) in blocks small enough never to overflow; the inner loop vectorises.
pub fn data(data: &[u8]) -> u16 {
    // 2^20 bytes is 2^18 words of at most 2^32 - 1: far below 2^64.
    const BLOCK: usize = 1 << 20;
    let mut sum: u64 = 0;
    for block in data.chunks(BLOCK) {
        let mut words = block.chunks_exact(4);
        let mut block_sum: u64 = 0;
        for w in &mut words {
            block_sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        }
        let rest = words.remainder();
        let mut tail = [0u8; 4];
        tail[..rest.len()].copy_from_slice(rest);
        block_sum += u64::from(u32::from_be_bytes(tail));
        // Folding keeps `sum` below 2^17 between blocks.
        sum = u64::from(fold(sum + block_sum));
    }
    fold(sum)
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
    fn combine_equals_whole() {
        let bytes = pseudo_random(11, 200);
        for split in (0..200).step_by(2) {
            assert_eq!(combine(&[data(&bytes[..split]), data(&bytes[split..])]), data(&bytes));
        }
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[]), 0);
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
