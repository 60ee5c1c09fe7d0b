//! UDP (RFC 768), over IPv4 or IPv6 (RFC 8200 section 8.1: the checksum is mandatory there).

use crate::ip::{checksum, IpAddress, IpProtocol};
use crate::{be, Error, Result};

/// Byte offsets of the UDP header.
pub mod field {
    use crate::field::{Field, Rest};

    /// Source Port.
    pub const SOURCE_PORT: Field = 0..2;
    /// Destination Port.
    pub const DESTINATION_PORT: Field = 2..4;
    /// Length: header and data.
    pub const LENGTH: Field = 4..6;
    /// Checksum.
    pub const CHECKSUM: Field = 6..8;
    /// Data.
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of a UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps a buffer, checking the header and the Length field against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the header and Length bytes, and that Length >= 8.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let length = usize::from(self.len());
        if length < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if length > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source Port.
    pub fn src_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::SOURCE_PORT.start)
    }

    /// Destination Port.
    pub fn dst_port(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::DESTINATION_PORT.start)
    }

    /// Length (header and data).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::LENGTH.start)
    }

    /// Checksum (0: none was computed, allowed over IPv4 only).
    pub fn checksum(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Whether the checksum over the pseudo-header and Length bytes is right. A zero checksum
    /// ("none") is not right here; [`UdpRepr::parse`] decides what it means.
    pub fn verify_checksum(&self, src_addr: &IpAddress, dst_addr: &IpAddress) -> bool {
        let datagram = &self.buffer.as_ref()[..usize::from(self.len())];
        datagram_sum(datagram, src_addr, dst_addr) == 0xffff
    }
}

fn datagram_sum(datagram: &[u8], src_addr: &IpAddress, dst_addr: &IpAddress) -> u16 {
    checksum::transport(src_addr, dst_addr, IpProtocol::Udp, datagram)
}

impl<'a, T: AsRef<[u8]> + ?Sized> UdpPacket<&'a T> {
    /// The data: from the header to Length.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the Source Port.
    pub fn set_src_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::SOURCE_PORT.start, value);
    }

    /// Sets the Destination Port.
    pub fn set_dst_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::DESTINATION_PORT.start, value);
    }

    /// Sets the Length.
    pub fn set_len(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::LENGTH.start, value);
    }

    /// Sets the Checksum.
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// Computes and writes the checksum over the pseudo-header and Length bytes; a computed 0 is
    /// sent as 0xffff (0 means "none").
    pub fn fill_checksum(&mut self, src_addr: &IpAddress, dst_addr: &IpAddress) {
        self.set_checksum(0);
        let datagram = &self.buffer.as_ref()[..usize::from(self.len())];
        let value = !datagram_sum(datagram, src_addr, dst_addr);
        self.set_checksum(if value == 0 { 0xffff } else { value });
    }

    /// The data, writable: from the header to Length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The meaning of a UDP header; the data stays in the packet ([`UdpPacket::payload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source Port.
    pub src_port: u16,
    /// Destination Port.
    pub dst_port: u16,
}

impl UdpRepr {
    /// Reads a header sent from `src_addr` to `dst_addr`: checks the lengths, a non-zero
    /// destination port, and the checksum. A zero checksum means "none" over IPv4 and is
    /// accepted; over IPv6 it is `Err(Checksum)` even if `verify_checksum` is false.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &UdpPacket<&T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        verify_checksum: bool,
    ) -> Result<UdpRepr> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        match (packet.checksum(), src_addr) {
            (0, IpAddress::V4(_)) => {}
            (0, IpAddress::V6(_)) => return Err(Error::Checksum),
            _ if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) => return Err(Error::Checksum),
            _ => {}
        }
        Ok(UdpRepr { src_port: packet.src_port(), dst_port: packet.dst_port() })
    }

    /// Length of the header.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of a datagram with `payload_len` bytes of data.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header and copies `payload` after it; see [`emit_header`].
    ///
    /// [`emit_header`]: UdpRepr::emit_header
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        payload: &[u8],
        fill_checksum: bool,
    ) {
        let buffer = packet.buffer.as_mut();
        buffer[HEADER_LEN..HEADER_LEN + payload.len()].copy_from_slice(payload);
        self.emit_header(packet, src_addr, dst_addr, payload.len(), fill_checksum);
    }

    /// Writes the header of a datagram whose `payload_len` bytes of data are already in place
    /// after it. The buffer must hold at least [`buffer_len`] bytes and `payload_len` be at most
    /// 65527.
    ///
    /// With `fill_checksum` the checksum is computed; without it (transmit offload) the field
    /// gets the pseudo-header sum, which is what NICs finishing the checksum expect (DPDK's
    /// `RTE_MBUF_F_TX_UDP_CKSUM`, Linux's `CHECKSUM_PARTIAL`).
    ///
    /// [`buffer_len`]: UdpRepr::buffer_len
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src_addr: &IpAddress,
        dst_addr: &IpAddress,
        payload_len: usize,
        fill_checksum: bool,
    ) {
        debug_assert!(payload_len <= usize::from(u16::MAX) - HEADER_LEN);
        let length = (HEADER_LEN + payload_len) as u16;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(length);
        if fill_checksum {
            packet.fill_checksum(src_addr, dst_addr);
        } else {
            let sum = checksum::pseudo_header(src_addr, dst_addr, IpProtocol::Udp, length.into());
            packet.set_checksum(sum);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::{Ipv4Address, Ipv4Packet};
    use crate::ipv6::Ipv6Address;
    use crate::tests::UDP_DNS_QUERY;

    const IP: usize = crate::ethernet::HEADER_LEN + crate::ipv4::HEADER_LEN;

    fn v4_addrs() -> (IpAddress, IpAddress) {
        (IpAddress::V4(Ipv4Address::new(192, 168, 1, 10)), IpAddress::V4(Ipv4Address::new(192, 168, 1, 1)))
    }

    fn v6_addrs() -> (IpAddress, IpAddress) {
        (
            IpAddress::V6(Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            IpAddress::V6(Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)),
        )
    }

    #[test]
    fn parse_captured_dns_query() {
        let (src, dst) = v4_addrs();
        let packet = UdpPacket::new_checked(&UDP_DNS_QUERY[IP..]).unwrap();
        assert_eq!(packet.src_port(), 41000);
        assert_eq!(packet.dst_port(), 53);
        assert_eq!(packet.len(), 37);
        assert_eq!(packet.checksum(), 0x60af);
        assert!(packet.verify_checksum(&src, &dst));
        assert_eq!(packet.payload().len(), 29);
        assert_eq!(packet.payload()[..2], [0xab, 0xcd]);
        let repr = UdpRepr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(repr, UdpRepr { src_port: 41000, dst_port: 53 });
    }

    #[test]
    fn round_trip_v4_and_v6() {
        let repr = UdpRepr { src_port: 5353, dst_port: 9 };
        for (src, dst) in [v4_addrs(), v6_addrs()] {
            let mut bytes = [0u8; 13];
            repr.emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), &src, &dst, b"hello", true);
            assert_eq!(bytes[..6], [0x14, 0xe9, 0, 9, 0, 13]);
            let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
            assert_eq!(UdpRepr::parse(&packet, &src, &dst, true).unwrap(), repr);
            assert_eq!(packet.payload(), b"hello");
            // The other version's pseudo-header gives another sum.
            let (other_src, other_dst) = if src == v4_addrs().0 { v6_addrs() } else { v4_addrs() };
            assert!(!packet.verify_checksum(&other_src, &other_dst));
        }
    }

    #[test]
    fn zero_checksum() {
        let (src, dst) = v4_addrs();
        let mut bytes = UDP_DNS_QUERY[IP..].to_vec();
        bytes[6..8].copy_from_slice(&[0, 0]);
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert!(UdpRepr::parse(&packet, &src, &dst, true).is_ok());
        let (src, dst) = v6_addrs();
        assert_eq!(UdpRepr::parse(&packet, &src, &dst, true), Err(Error::Checksum));
        assert_eq!(UdpRepr::parse(&packet, &src, &dst, false), Err(Error::Checksum));
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose a payload word that makes the sum 0xffff, i.e. the checksum 0.
        let (src, dst) = v4_addrs();
        let repr = UdpRepr { src_port: 1, dst_port: 2 };
        let mut bytes = [0u8; 10];
        repr.emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &[0, 0], true);
        let value = UdpPacket::new_unchecked(&bytes[..]).checksum();
        // The checksum is the complement of the sum: adding it to the data makes the sum
        // 0xffff, so the new checksum computes to 0.
        let word = value;
        repr.emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), &src, &dst, &word.to_be_bytes(), true);
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.checksum(), 0xffff);
        assert!(packet.verify_checksum(&src, &dst));
        assert!(UdpRepr::parse(&packet, &src, &dst, true).is_ok());
    }

    #[test]
    fn offloaded_emit_writes_pseudo_header_sum() {
        let (src, dst) = v4_addrs();
        let repr = UdpRepr { src_port: 41000, dst_port: 53 };
        let payload = &UDP_DNS_QUERY[IP + 8..];
        let mut bytes = [0u8; 37];
        repr.emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), &src, &dst, payload, false);
        // c0a8 + 010a + c0a8 + 0101 + 0011 + 0025 = 0x18391 -> 0x8392
        assert_eq!(bytes[6..8], [0x83, 0x92]);
        // What the NIC does: complement of the sum of the datagram with that seed.
        let value = !checksum::data(&bytes);
        assert_eq!(value, 0x60af);
    }

    #[test]
    fn bad_checksum_and_lengths() {
        let (src, dst) = v4_addrs();
        let mut bytes = UDP_DNS_QUERY[IP..].to_vec();
        bytes[20] ^= 0x20; // one letter of the query name
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &src, &dst, true), Err(Error::Checksum));
        assert!(UdpRepr::parse(&packet, &src, &dst, false).is_ok());

        let good = &UDP_DNS_QUERY[IP..];
        for len in 0..good.len() {
            let packet = UdpPacket::new_unchecked(&good[..len]);
            assert_eq!(UdpRepr::parse(&packet, &src, &dst, true), Err(Error::Truncated), "{len}");
        }
        let mut bytes = good.to_vec();
        bytes[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(UdpPacket::new_checked(&bytes[..]), Err(Error::Malformed));
        let mut bytes = good.to_vec();
        bytes[2..4].copy_from_slice(&[0, 0]);
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(UdpRepr::parse(&packet, &src, &dst, false), Err(Error::Malformed));
    }

    #[test]
    fn length_shorter_than_ip_payload() {
        // Trailing bytes after UDP Length (a sender's bug or padding) are not payload.
        let (src, dst) = v4_addrs();
        let ip = Ipv4Packet::new_checked(&UDP_DNS_QUERY[crate::ethernet::HEADER_LEN..]).unwrap();
        let mut bytes = ip.payload().to_vec();
        bytes.extend_from_slice(&[0xde, 0xad]);
        let packet = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload().len(), 29);
        assert!(UdpRepr::parse(&packet, &src, &dst, true).is_ok());
    }
}
