//! IPv4 (RFC 791). Options are skipped (the payload starts at the header length); fragments are
//! recognised ([`Ipv4Packet::is_fragment`]) so the stack can drop and count them, and never
//! reassembled.

use core::fmt;

use crate::ip::{checksum, IpProtocol};
use crate::{be, Error, Result};

/// An IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv4Address(pub [u8; 4]);

impl Ipv4Address {
    /// 0.0.0.0.
    pub const UNSPECIFIED: Ipv4Address = Ipv4Address([0; 4]);
    /// 255.255.255.255, the limited broadcast address.
    pub const BROADCAST: Ipv4Address = Ipv4Address([255; 4]);

    /// `a.b.c.d`.
    pub const fn new(a: u8, b: u8, c: u8, d: u8) -> Self {
        Ipv4Address([a, b, c, d])
    }

    /// The address in network order.
    pub const fn as_bytes(&self) -> &[u8; 4] {
        &self.0
    }

    /// 0.0.0.0.
    pub const fn is_unspecified(&self) -> bool {
        u32::from_be_bytes(self.0) == 0
    }

    /// 255.255.255.255.
    pub const fn is_broadcast(&self) -> bool {
        u32::from_be_bytes(self.0) == u32::MAX
    }

    /// 224.0.0.0/4.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0xf0 == 224
    }

    /// 127.0.0.0/8.
    pub const fn is_loopback(&self) -> bool {
        self.0[0] == 127
    }

    /// 169.254.0.0/16.
    pub const fn is_link_local(&self) -> bool {
        self.0[0] == 169 && self.0[1] == 254
    }

    /// Neither unspecified, broadcast nor multicast. (A subnet's directed broadcast address
    /// looks unicast here; only the stack knows the prefix.)
    pub const fn is_unicast(&self) -> bool {
        !(self.is_unspecified() || self.is_broadcast() || self.is_multicast())
    }
}

impl From<[u8; 4]> for Ipv4Address {
    fn from(bytes: [u8; 4]) -> Self {
        Ipv4Address(bytes)
    }
}

#[cfg(feature = "std")]
impl From<std::net::Ipv4Addr> for Ipv4Address {
    fn from(addr: std::net::Ipv4Addr) -> Self {
        Ipv4Address(addr.octets())
    }
}

#[cfg(feature = "std")]
impl From<Ipv4Address> for std::net::Ipv4Addr {
    fn from(addr: Ipv4Address) -> Self {
        std::net::Ipv4Addr::from(addr.0)
    }
}

impl fmt::Display for Ipv4Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{}.{}.{}.{}", b[0], b[1], b[2], b[3])
    }
}

/// Byte offsets of the IPv4 header.
pub mod field {
    use crate::field::Field;

    /// Version (high 4 bits) and IHL, the header length in 32-bit words (low 4 bits).
    pub const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN (low 2 bits), formerly Type of Service.
    pub const DSCP_ECN: usize = 1;
    /// Total Length: header and data, in bytes.
    pub const TOTAL_LENGTH: Field = 2..4;
    /// Identification.
    pub const IDENTIFICATION: Field = 4..6;
    /// Flags (reserved, DF, MF: the high 3 bits) and Fragment Offset (in 8-byte units).
    pub const FLAGS_FRAGMENT_OFFSET: Field = 6..8;
    /// Time to Live.
    pub const TIME_TO_LIVE: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header Checksum.
    pub const HEADER_CHECKSUM: Field = 10..12;
    /// Source Address.
    pub const SOURCE_ADDRESS: Field = 12..16;
    /// Destination Address.
    pub const DESTINATION_ADDRESS: Field = 16..20;
    /// Options start here and run to the header length.
    pub const OPTIONS: usize = 20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::OPTIONS;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer, checking the header length and total length against it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed header, the options (IHL) and the total length, and
    /// that IHL >= 5 and total length >= IHL * 4. After this, no accessor panics. Bytes past
    /// the total length (Ethernet padding) are allowed and ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated Services Code Point.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit Congestion Notification.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total Length.
    pub fn total_len(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::TOTAL_LENGTH.start)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::IDENTIFICATION.start)
    }

    fn flags_frag(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::FLAGS_FRAGMENT_OFFSET.start)
    }

    /// Don't Fragment.
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// More Fragments.
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Fragment Offset, in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & FRAG_OFFSET_MASK) << 3
    }

    /// Part of a fragmented datagram: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }

    /// Time to Live.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::TIME_TO_LIVE]
    }

    /// Protocol.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header Checksum.
    pub fn checksum(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::HEADER_CHECKSUM.start)
    }

    /// Source Address.
    pub fn src_addr(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        let at = field::SOURCE_ADDRESS.start;
        Ipv4Address([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// Destination Address.
    pub fn dst_addr(&self) -> Ipv4Address {
        let b = self.buffer.as_ref();
        let at = field::DESTINATION_ADDRESS.start;
        Ipv4Address([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    /// Whether the header checksum is right.
    pub fn verify_checksum(&self) -> bool {
        let header = &self.buffer.as_ref()[..usize::from(self.header_len())];
        checksum::ipv4_header(header) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv4Packet<&'a T> {
    /// The options (between the fixed header and the header length).
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::OPTIONS..usize::from(self.header_len())]
    }

    /// The payload: from the header length to the total length (padding excluded).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the version.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the header length in bytes (a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, len: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) & 0x0f);
    }

    /// Sets the DSCP.
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (dscp << 2);
    }

    /// Sets the ECN bits.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    /// Sets the Total Length.
    pub fn set_total_len(&mut self, len: u16) {
        be::set_u16(self.buffer.as_mut(), field::TOTAL_LENGTH.start, len);
    }

    /// Sets the Identification.
    pub fn set_ident(&mut self, ident: u16) {
        be::set_u16(self.buffer.as_mut(), field::IDENTIFICATION.start, ident);
    }

    fn set_flags_frag(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::FLAGS_FRAGMENT_OFFSET.start, value);
    }

    /// Clears the flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_flags_frag(0);
    }

    /// Sets or clears Don't Fragment.
    pub fn set_dont_frag(&mut self, value: bool) {
        let v = self.flags_frag();
        self.set_flags_frag(if value { v | FLAG_DF } else { v & !FLAG_DF });
    }

    /// Sets or clears More Fragments.
    pub fn set_more_frags(&mut self, value: bool) {
        let v = self.flags_frag();
        self.set_flags_frag(if value { v | FLAG_MF } else { v & !FLAG_MF });
    }

    /// Sets the fragment offset, in bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let v = self.flags_frag();
        self.set_flags_frag((v & !FRAG_OFFSET_MASK) | ((offset >> 3) & FRAG_OFFSET_MASK));
    }

    /// Sets the Time to Live.
    pub fn set_hop_limit(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TIME_TO_LIVE] = ttl;
    }

    /// Sets the Protocol.
    pub fn set_next_header(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.into();
    }

    /// Sets the Header Checksum.
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::HEADER_CHECKSUM.start, value);
    }

    /// Sets the Source Address.
    pub fn set_src_addr(&mut self, addr: Ipv4Address) {
        self.buffer.as_mut()[field::SOURCE_ADDRESS].copy_from_slice(&addr.0);
    }

    /// Sets the Destination Address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Address) {
        self.buffer.as_mut()[field::DESTINATION_ADDRESS].copy_from_slice(&addr.0);
    }

    /// Computes and writes the header checksum over the header length.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let sum = checksum::ipv4_header(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(!sum);
    }

    /// The payload, writable: from the header length to the total length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

/// The meaning of an IPv4 header, as far as pronghorn cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source Address.
    pub src_addr: Ipv4Address,
    /// Destination Address.
    pub dst_addr: Ipv4Address,
    /// Protocol.
    pub next_header: IpProtocol,
    /// Payload length: Total Length minus the header length.
    pub payload_len: usize,
    /// Time to Live.
    pub hop_limit: u8,
}

impl Ipv4Repr {
    /// Reads a header: checks the lengths, version 4 and (if `verify_checksum`) the header
    /// checksum. A fragment is `Err(Unsupported)`: check [`Ipv4Packet::is_fragment`] first to
    /// count them apart.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv4Packet<&T>, verify_checksum: bool) -> Result<Ipv4Repr> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        if packet.is_fragment() {
            return Err(Error::Unsupported);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len() - u16::from(packet.header_len())),
            hop_limit: packet.hop_limit(),
        })
    }

    /// Reads the header of a datagram quoted in an ICMP error: the header must be whole, but the
    /// total length may run past the quote (which holds only the start of the datagram), the
    /// checksum is not checked and fragments are allowed. Returns the header and the quoted bytes
    /// that follow it.
    pub(crate) fn parse_quoted(data: &[u8]) -> Result<(Ipv4Repr, &[u8])> {
        let packet = Ipv4Packet::new_unchecked(data);
        if data.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = packet.header_len();
        if packet.version() != 4 || header_len < HEADER_LEN as u8 {
            return Err(Error::Malformed);
        }
        if usize::from(header_len) > data.len() {
            return Err(Error::Truncated);
        }
        let payload_len = packet.total_len().checked_sub(u16::from(header_len)).ok_or(Error::Malformed)?;
        let repr = Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(payload_len),
            hop_limit: packet.hop_limit(),
        };
        Ok((repr, &data[usize::from(header_len)..]))
    }

    /// Length of the header this emits (no options).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole packet this describes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header: IHL 5, DSCP/ECN 0, Identification 0 with DF set (RFC 6864 allows any
    /// Identification on an atomic datagram), the fields of `self`, and the checksum if
    /// `fill_checksum` (else zero, for the NIC to fill). The buffer must be at least
    /// [`HEADER_LEN`] bytes and `payload_len` at most 65515.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>, fill_checksum: bool) {
        debug_assert!(self.payload_len <= usize::from(u16::MAX) - HEADER_LEN);
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(0);
        packet.set_ecn(0);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(0);
        packet.clear_flags();
        packet.set_dont_frag(true);
        packet.set_hop_limit(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        if fill_checksum {
            packet.fill_checksum();
        } else {
            packet.set_checksum(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{ICMP_ECHO_REQUEST, TCP_SYN};

    const ETH: usize = crate::ethernet::HEADER_LEN;

    #[test]
    fn address_classes() {
        assert!(Ipv4Address::UNSPECIFIED.is_unspecified());
        assert!(Ipv4Address::BROADCAST.is_broadcast());
        assert!(!Ipv4Address::BROADCAST.is_unicast());
        assert!(Ipv4Address::new(224, 0, 0, 251).is_multicast());
        assert!(Ipv4Address::new(239, 255, 255, 250).is_multicast());
        assert!(!Ipv4Address::new(240, 0, 0, 1).is_multicast());
        assert!(Ipv4Address::new(127, 0, 0, 1).is_loopback());
        assert!(Ipv4Address::new(169, 254, 1, 2).is_link_local());
        assert!(Ipv4Address::new(10, 0, 2, 15).is_unicast());
        assert_eq!(Ipv4Address::new(10, 0, 2, 15).to_string(), "10.0.2.15");
    }

    #[cfg(feature = "std")]
    #[test]
    fn std_conversions() {
        let std_addr = std::net::Ipv4Addr::new(192, 0, 2, 7);
        let addr = Ipv4Address::from(std_addr);
        assert_eq!(addr, Ipv4Address::new(192, 0, 2, 7));
        assert_eq!(std::net::Ipv4Addr::from(addr), std_addr);
    }

    #[test]
    fn parse_captured_ping() {
        let packet = Ipv4Packet::new_checked(&ICMP_ECHO_REQUEST[ETH..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.dscp(), 0);
        assert_eq!(packet.ecn(), 0);
        assert_eq!(packet.total_len(), 84);
        assert_eq!(packet.ident(), 0x4d2e);
        assert!(packet.dont_frag());
        assert!(!packet.more_frags());
        assert_eq!(packet.frag_offset(), 0);
        assert!(!packet.is_fragment());
        assert_eq!(packet.hop_limit(), 64);
        assert_eq!(packet.next_header(), IpProtocol::Icmp);
        assert_eq!(packet.checksum(), 0x6a1f);
        assert!(packet.verify_checksum());
        assert_eq!(packet.src_addr(), Ipv4Address::new(192, 168, 1, 10));
        assert_eq!(packet.dst_addr(), Ipv4Address::new(192, 168, 1, 1));
        assert_eq!(packet.options(), &[] as &[u8]);
        assert_eq!(packet.payload().len(), 64);
        assert_eq!(packet.payload()[0], 8);

        let repr = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(
            repr,
            Ipv4Repr {
                src_addr: Ipv4Address::new(192, 168, 1, 10),
                dst_addr: Ipv4Address::new(192, 168, 1, 1),
                next_header: IpProtocol::Icmp,
                payload_len: 64,
                hop_limit: 64,
            }
        );
    }

    #[test]
    fn padding_is_not_payload() {
        let mut bytes = TCP_SYN[ETH..].to_vec();
        bytes.extend_from_slice(&[0u8; 6]);
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.payload().len(), 40);
        assert_eq!(Ipv4Repr::parse(&packet, true).unwrap().payload_len, 40);
    }

    #[test]
    fn bad_checksum_rejected() {
        let mut bytes = ICMP_ECHO_REQUEST[ETH..].to_vec();
        bytes[8] = 63; // TTL changed without updating the checksum
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(!packet.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::Checksum));
        // Offloaded: the NIC already checked it.
        assert_eq!(Ipv4Repr::parse(&packet, false).unwrap().hop_limit, 63);
        // The incremental update repairs it.
        let fixed = checksum::update_u16(packet.checksum(), 0x4001, 0x3f01);
        bytes[10..12].copy_from_slice(&fixed.to_be_bytes());
        assert!(Ipv4Packet::new_checked(&bytes[..]).unwrap().verify_checksum());
    }

    #[test]
    fn bad_lengths_and_version() {
        let good = &ICMP_ECHO_REQUEST[ETH..];
        for len in 0..good.len() {
            assert_eq!(Ipv4Packet::new_checked(&good[..len]), Err(Error::Truncated), "len {len}");
            let packet = Ipv4Packet::new_unchecked(&good[..len]);
            assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::Truncated), "len {len}");
        }
        let mut bytes = good.to_vec();
        bytes[0] = 0x44; // IHL 4
        assert_eq!(Ipv4Packet::new_checked(&bytes[..]), Err(Error::Malformed));
        bytes[0] = 0x4f; // IHL 15: 60 bytes of header, but total length 84 is fine
        assert!(Ipv4Packet::new_checked(&bytes[..]).is_ok());
        bytes[0] = 0x45;
        bytes[2..4].copy_from_slice(&19u16.to_be_bytes()); // total length below header length
        assert_eq!(Ipv4Packet::new_checked(&bytes[..]), Err(Error::Malformed));
        let mut bytes = good.to_vec();
        bytes[0] = 0x65; // version 6
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, false), Err(Error::Malformed));
    }

    #[test]
    fn options_are_skipped() {
        // A header with one 4-byte option (NOP NOP NOP EOL), 4 bytes of payload.
        let repr = Ipv4Repr {
            src_addr: Ipv4Address::new(10, 0, 0, 1),
            dst_addr: Ipv4Address::new(10, 0, 0, 2),
            next_header: IpProtocol::Udp,
            payload_len: 8,
            hop_limit: 5,
        };
        let mut bytes = [0u8; 28];
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet, false);
        packet.set_header_len(24);
        bytes[20..24].copy_from_slice(&[1, 1, 1, 0]);
        bytes[24..28].copy_from_slice(b"data");
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum();
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.options(), &[1, 1, 1, 0]);
        assert_eq!(packet.payload(), b"data");
        let parsed = Ipv4Repr::parse(&packet, true).unwrap();
        assert_eq!(parsed.payload_len, 4);
        assert_eq!(parsed.next_header, IpProtocol::Udp);
    }

    #[test]
    fn fragments() {
        let mut bytes = ICMP_ECHO_REQUEST[ETH..].to_vec();
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_more_frags(true);
        packet.fill_checksum();
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.is_fragment() && packet.more_frags() && packet.dont_frag());
        assert_eq!(Ipv4Repr::parse(&packet, true), Err(Error::Unsupported));

        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        packet.set_more_frags(false);
        packet.set_frag_offset(1480);
        packet.fill_checksum();
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.is_fragment() && !packet.more_frags());
        assert_eq!(packet.frag_offset(), 1480);
        assert_eq!(bytes[6..8], [0x40, 0xb9]); // DF | 185
        assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..]), true), Err(Error::Unsupported));
    }

    #[test]
    fn round_trip() {
        let repr = Ipv4Repr {
            src_addr: Ipv4Address::new(192, 168, 1, 10),
            dst_addr: Ipv4Address::new(192, 168, 1, 1),
            next_header: IpProtocol::Tcp,
            payload_len: 40,
            hop_limit: 64,
        };
        assert_eq!(repr.buffer_len(), 60);
        let mut bytes = [0xa5u8; 60];
        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet, true);
        // Same header as the captured SYN but for Identification 0x1f6b: checksum differs by it.
        assert_eq!(bytes[..12], [0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0xb7, 0x60]);
        assert_eq!(checksum::update_u16(0x97f5, 0x1f6b, 0), 0xb760);
        let packet = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&packet, true).unwrap(), repr);

        let mut packet = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet, false);
        assert_eq!(packet.checksum(), 0);
    }
}
