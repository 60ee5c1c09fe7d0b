//! IPv6 (RFC 8200): addresses and their neighbor-discovery mappings, the fixed header, and a walk
//! over the extension headers to the upper layer. Fragments are recognised, never reassembled.

use core::fmt;

use crate::ethernet::EthernetAddress;
use crate::ip::IpProtocol;
use crate::{be, Error, Result};

/// An IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ipv6Address(pub [u8; 16]);

impl Ipv6Address {
    /// `::`.
    pub const UNSPECIFIED: Ipv6Address = Ipv6Address([0; 16]);
    /// `::1`.
    pub const LOOPBACK: Ipv6Address = Ipv6Address::new(0, 0, 0, 0, 0, 0, 0, 1);
    /// `ff02::1`, all nodes on the link.
    pub const LINK_LOCAL_ALL_NODES: Ipv6Address = Ipv6Address::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
    /// `ff02::2`, all routers on the link.
    pub const LINK_LOCAL_ALL_ROUTERS: Ipv6Address = Ipv6Address::new(0xff02, 0, 0, 0, 0, 0, 0, 2);

    /// The address with these eight 16-bit segments.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(a: u16, b: u16, c: u16, d: u16, e: u16, f: u16, g: u16, h: u16) -> Self {
        let s = [a, b, c, d, e, f, g, h];
        let mut bytes = [0u8; 16];
        let mut i = 0;
        while i < 8 {
            bytes[2 * i] = (s[i] >> 8) as u8;
            bytes[2 * i + 1] = s[i] as u8;
            i += 1;
        }
        Ipv6Address(bytes)
    }

    /// The address in network order.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// The eight 16-bit segments.
    pub fn segments(&self) -> [u16; 8] {
        let mut s = [0u16; 8];
        for (i, seg) in s.iter_mut().enumerate() {
            *seg = u16::from_be_bytes([self.0[2 * i], self.0[2 * i + 1]]);
        }
        s
    }

    /// `::`.
    pub fn is_unspecified(&self) -> bool {
        self.0 == [0; 16]
    }

    /// `::1`.
    pub fn is_loopback(&self) -> bool {
        *self == Self::LOOPBACK
    }

    /// `ff00::/8`.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] == 0xff
    }

    /// Neither multicast nor unspecified.
    pub fn is_unicast(&self) -> bool {
        !(self.is_multicast() || self.is_unspecified())
    }

    /// An IPv4-mapped address, `::ffff:0:0/96` (RFC 4291 section 2.5.5.2): a socket API's
    /// name for an IPv4 peer, never meant to appear in an IPv6 header.
    pub fn is_ipv4_mapped(&self) -> bool {
        self.0[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
    }

    /// The IPv4-mapped address of `v4`, `::ffff:a.b.c.d`.
    pub const fn ipv4_mapped(v4: crate::Ipv4Address) -> Ipv6Address {
        let [a, b, c, d] = v4.0;
        Ipv6Address([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d])
    }

    /// Link-local unicast, `fe80::/10`.
    pub const fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// A solicited-node multicast address, `ff02::1:ff00:0/104`.
    pub fn is_solicited_node_multicast(&self) -> bool {
        self.0[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff]
    }

    /// The solicited-node multicast address of this address (RFC 4291 section 2.7.1):
    /// `ff02::1:ff` followed by its low 24 bits. Neighbor Solicitations for it go there.
    pub const fn solicited_node(&self) -> Ipv6Address {
        let mut bytes = [0u8; 16];
        bytes[0] = 0xff;
        bytes[1] = 0x02;
        bytes[11] = 0x01;
        bytes[12] = 0xff;
        bytes[13] = self.0[13];
        bytes[14] = self.0[14];
        bytes[15] = self.0[15];
        Ipv6Address(bytes)
    }

    /// The Ethernet address a multicast IPv6 address maps to (RFC 2464 section 7): `33:33`
    /// followed by its low 32 bits. Meaningless for a unicast address.
    pub const fn multicast_ethernet(&self) -> EthernetAddress {
        let b = self.0;
        EthernetAddress([0x33, 0x33, b[12], b[13], b[14], b[15]])
    }

    /// The link-local address formed from an Ethernet address by modified EUI-64 (RFC 4291
    /// appendix A, RFC 2464 section 5): `fe80::` and the MAC with `ff:fe` in the middle and the
    /// universal/local bit flipped.
    pub const fn link_local_from_ethernet(mac: EthernetAddress) -> Ipv6Address {
        let m = mac.0;
        Ipv6Address([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }
}

impl From<[u8; 16]> for Ipv6Address {
    fn from(bytes: [u8; 16]) -> Self {
        Ipv6Address(bytes)
    }
}

#[cfg(feature = "std")]
impl From<std::net::Ipv6Addr> for Ipv6Address {
    fn from(addr: std::net::Ipv6Addr) -> Self {
        Ipv6Address(addr.octets())
    }
}

#[cfg(feature = "std")]
impl From<Ipv6Address> for std::net::Ipv6Addr {
    fn from(addr: Ipv6Address) -> Self {
        std::net::Ipv6Addr::from(addr.0)
    }
}

impl fmt::Display for Ipv6Address {
    /// RFC 5952 text: lower-case hex, leading zeros dropped, the longest run (the first of equal
    /// ones) of two or more zero segments written `::`, and IPv4-mapped addresses as
    /// `::ffff:a.b.c.d`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.segments();
        if s[..5] == [0; 5] && s[5] == 0xffff {
            let b = self.0;
            return write!(f, "::ffff:{}.{}.{}.{}", b[12], b[13], b[14], b[15]);
        }
        // The longest run of zero segments.
        let (mut best_at, mut best_len) = (0, 0);
        let mut i = 0;
        while i < 8 {
            if s[i] == 0 {
                let at = i;
                while i < 8 && s[i] == 0 {
                    i += 1;
                }
                if i - at > best_len {
                    (best_at, best_len) = (at, i - at);
                }
            } else {
                i += 1;
            }
        }
        if best_len < 2 {
            best_len = 0;
            best_at = 8;
        }
        for (i, seg) in s.iter().enumerate() {
            if i == best_at {
                f.write_str("::")?;
            } else if i > best_at && i < best_at + best_len {
                continue;
            } else {
                if i != 0 && i != best_at + best_len {
                    f.write_str(":")?;
                }
                write!(f, "{seg:x}")?;
            }
        }
        Ok(())
    }
}

/// Byte offsets of the IPv6 fixed header.
pub mod field {
    use crate::field::{Field, Rest};

    /// Version (4 bits), Traffic Class (8 bits), Flow Label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload Length: everything after the fixed header, extension headers included.
    pub const PAYLOAD_LENGTH: Field = 4..6;
    /// Next Header.
    pub const NEXT_HEADER: usize = 6;
    /// Hop Limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source Address.
    pub const SOURCE_ADDRESS: Field = 8..24;
    /// Destination Address.
    pub const DESTINATION_ADDRESS: Field = 24..40;
    /// Payload.
    pub const PAYLOAD: Rest = 40..;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

fn address_at(data: &[u8], range: core::ops::Range<usize>) -> Ipv6Address {
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&data[range]);
    Ipv6Address(bytes)
}

/// A view of an IPv6 packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the fixed header and the payload length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed header and Payload Length bytes after it. Bytes
    /// past that (Ethernet padding) are ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || HEADER_LEN + usize::from(self.payload_len()) > len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (6 for a valid packet).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic Class.
    pub fn traffic_class(&self) -> u8 {
        (be::u16_at(self.buffer.as_ref(), 0) >> 4) as u8
    }

    /// Flow Label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), 0) & 0x000f_ffff
    }

    /// Payload Length.
    pub fn payload_len(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::PAYLOAD_LENGTH.start)
    }

    /// Next Header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop Limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source Address.
    pub fn src_addr(&self) -> Ipv6Address {
        address_at(self.buffer.as_ref(), field::SOURCE_ADDRESS)
    }

    /// Destination Address.
    pub fn dst_addr(&self) -> Ipv6Address {
        address_at(self.buffer.as_ref(), field::DESTINATION_ADDRESS)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Ipv6Packet<&'a T> {
    /// The payload (extension headers included), Payload Length bytes.
    pub fn payload(&self) -> &'a [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[HEADER_LEN..end]
    }

    /// Walks the extension headers of the payload to the upper layer; see [`upper_layer`].
    pub fn upper_layer(&self) -> Result<Ipv6UpperLayer> {
        upper_layer(self.next_header(), self.payload())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the version.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[0];
        *b = (*b & 0x0f) | (version << 4);
    }

    /// Sets the Traffic Class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let b = self.buffer.as_mut();
        b[0] = (b[0] & 0xf0) | (tc >> 4);
        b[1] = (b[1] & 0x0f) | (tc << 4);
    }

    /// Sets the Flow Label (the low 20 bits of `label`).
    pub fn set_flow_label(&mut self, label: u32) {
        let b = self.buffer.as_mut();
        let word = (be::u32_at(b, 0) & 0xfff0_0000) | (label & 0x000f_ffff);
        be::set_u32(b, 0, word);
    }

    /// Sets the Payload Length.
    pub fn set_payload_len(&mut self, len: u16) {
        be::set_u16(self.buffer.as_mut(), field::PAYLOAD_LENGTH.start, len);
    }

    /// Sets the Next Header.
    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        self.buffer.as_mut()[field::NEXT_HEADER] = next_header.into();
    }

    /// Sets the Hop Limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the Source Address.
    pub fn set_src_addr(&mut self, addr: Ipv6Address) {
        self.buffer.as_mut()[field::SOURCE_ADDRESS].copy_from_slice(&addr.0);
    }

    /// Sets the Destination Address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Address) {
        self.buffer.as_mut()[field::DESTINATION_ADDRESS].copy_from_slice(&addr.0);
    }

    /// The payload, writable, Payload Length bytes.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// The meaning of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source Address.
    pub src_addr: Ipv6Address,
    /// Destination Address.
    pub dst_addr: Ipv6Address,
    /// Next Header: the first extension header or the upper layer.
    pub next_header: IpProtocol,
    /// Payload Length (extension headers included).
    pub payload_len: usize,
    /// Hop Limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Reads the fixed header: checks the lengths and version 6.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Ipv6Packet<&T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Self::from_packet(packet))
    }

    fn from_packet<T: AsRef<[u8]> + ?Sized>(packet: &Ipv6Packet<&T>) -> Ipv6Repr {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
        }
    }

    /// Reads the header of a packet quoted in an ICMPv6 error: the fixed header must be whole but
    /// the payload length may run past the quote. Returns the header and the quoted bytes after
    /// it.
    pub(crate) fn parse_quoted(data: &[u8]) -> Result<(Ipv6Repr, &[u8])> {
        if data.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let packet = Ipv6Packet::new_unchecked(data);
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok((Self::from_packet(&packet), &data[HEADER_LEN..]))
    }

    /// Length of the header this emits.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole packet this describes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header (Traffic Class and Flow Label zero). The buffer must be at least
    /// [`HEADER_LEN`] bytes and `payload_len` at most 65535 (no jumbograms).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        debug_assert!(self.payload_len <= usize::from(u16::MAX));
        be::set_u32(packet.buffer.as_mut(), 0, 0x6000_0000);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

/// Where the extension headers of an IPv6 payload lead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6UpperLayer {
    /// The upper-layer header `protocol` starts `offset` bytes into the IPv6 payload; its length
    /// (for the pseudo-header) is the payload length minus `offset`. `Ipv6NoNxt` means nothing
    /// follows; ESP, AH and unassigned numbers come back as they are.
    Protocol {
        /// What the upper-layer header is.
        protocol: IpProtocol,
        /// Where it starts in the IPv6 payload.
        offset: usize,
    },
    /// A Fragment header starts `offset` bytes into the payload: the packet is a fragment.
    Fragment {
        /// Where the Fragment header starts in the IPv6 payload.
        offset: usize,
    },
}

/// Byte offsets shared by the extension headers this crate walks.
pub mod ext_field {
    /// Next Header.
    pub const NEXT_HEADER: usize = 0;
    /// Hdr Ext Len: the header length in 8-byte units, not counting the first 8 bytes.
    pub const HDR_EXT_LEN: usize = 1;
    /// Segments Left (Routing header).
    pub const SEGMENTS_LEFT: usize = 3;
    /// Options start here (Hop-by-Hop and Destination Options headers).
    pub const OPTIONS: usize = 2;
    /// Length of the Fragment header.
    pub const FRAGMENT_LEN: usize = 8;
}

/// Walks the extension headers at the start of `payload` (`next_header` is the fixed header's)
/// to the upper layer.
///
/// Hop-by-Hop Options (only first, RFC 8200 section 4.1), Routing (only with Segments Left 0:
/// pronghorn is a host, it never forwards) and Destination Options headers are skipped. Their
/// options are checked: an unknown option whose type says "discard" is `Err(Unsupported)`, as is
/// a Routing header with segments left. A Fragment header stops the walk with
/// [`Ipv6UpperLayer::Fragment`]. Headers that overrun the payload are `Err(Truncated)`,
/// malformed options or a misplaced Hop-by-Hop header `Err(Malformed)`.
pub fn upper_layer(next_header: IpProtocol, payload: &[u8]) -> Result<Ipv6UpperLayer> {
    let mut protocol = next_header;
    let mut offset = 0;
    loop {
        match protocol {
            IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts => {
                if protocol == IpProtocol::HopByHop && offset != 0 {
                    return Err(Error::Malformed);
                }
                let rest = &payload[offset..];
                if rest.len() < 8 {
                    return Err(Error::Truncated);
                }
                let len = (usize::from(rest[ext_field::HDR_EXT_LEN]) + 1) * 8;
                let header = rest.get(..len).ok_or(Error::Truncated)?;
                if protocol == IpProtocol::Ipv6Route {
                    if header[ext_field::SEGMENTS_LEFT] != 0 {
                        return Err(Error::Unsupported);
                    }
                } else {
                    check_options(&header[ext_field::OPTIONS..])?;
                }
                protocol = IpProtocol::from(header[ext_field::NEXT_HEADER]);
                // Each step moves on by at least 8 bytes, so the walk ends.
                offset += len;
            }
            IpProtocol::Ipv6Frag => {
                if payload.len() - offset < ext_field::FRAGMENT_LEN {
                    return Err(Error::Truncated);
                }
                return Ok(Ipv6UpperLayer::Fragment { offset });
            }
            _ => return Ok(Ipv6UpperLayer::Protocol { protocol, offset }),
        }
    }
}

/// Checks the TLV options of a Hop-by-Hop or Destination Options header (RFC 8200 section 4.2).
fn check_options(options: &[u8]) -> Result<()> {
    const PAD1: u8 = 0;
    let mut at = 0;
    while at < options.len() {
        let kind = options[at];
        if kind == PAD1 {
            at += 1;
            continue;
        }
        let len = usize::from(*options.get(at + 1).ok_or(Error::Malformed)?);
        let end = at + 2 + len;
        if end > options.len() {
            return Err(Error::Malformed);
        }
        // The two high bits of the type say what to do with an unrecognised option; PadN (1) and
        // Router Alert (5), the only ones a host meets, are "skip" (00).
        if kind >> 6 != 0 {
            return Err(Error::Unsupported);
        }
        at = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::IPV6_NS;

    const ETH: usize = crate::ethernet::HEADER_LEN;

    fn addr(s: &str) -> Ipv6Address {
        s.parse::<std::net::Ipv6Addr>().unwrap().octets().into()
    }

    #[test]
    fn address_helpers() {
        let ll = addr("fe80::5054:ff:fe12:3456");
        assert!(ll.is_link_local() && ll.is_unicast() && !ll.is_multicast());
        assert!(!addr("fec0::1").is_link_local());
        assert!(addr("febf::1").is_link_local());
        assert!(!addr("2001:db8::1").is_link_local());
        assert!(Ipv6Address::UNSPECIFIED.is_unspecified());
        assert!(!Ipv6Address::UNSPECIFIED.is_unicast());
        assert!(Ipv6Address::LOOPBACK.is_loopback());
        let mapped = Ipv6Address::ipv4_mapped(crate::Ipv4Address::new(10, 0, 0, 2));
        assert_eq!(mapped, addr("::ffff:10.0.0.2"));
        assert!(mapped.is_ipv4_mapped() && !addr("::10.0.0.2").is_ipv4_mapped());
        assert_eq!(Ipv6Address::LINK_LOCAL_ALL_NODES, addr("ff02::1"));
        assert_eq!(Ipv6Address::LINK_LOCAL_ALL_ROUTERS, addr("ff02::2"));

        let target = addr("2001:db8::12:3456:789a");
        let sn = target.solicited_node();
        assert_eq!(sn, addr("ff02::1:ff56:789a"));
        assert!(sn.is_solicited_node_multicast() && sn.is_multicast());
        assert!(!Ipv6Address::LINK_LOCAL_ALL_NODES.is_solicited_node_multicast());
        assert_eq!(sn.multicast_ethernet(), EthernetAddress([0x33, 0x33, 0xff, 0x56, 0x78, 0x9a]));
        assert_eq!(Ipv6Address::LINK_LOCAL_ALL_NODES.multicast_ethernet(), EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));

        let mac = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert_eq!(Ipv6Address::link_local_from_ethernet(mac), ll);
        assert_eq!(Ipv6Address::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe12, 0x3456), ll);
        assert_eq!(ll.segments(), [0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe12, 0x3456]);
    }

    #[test]
    fn display_matches_std() {
        let cases = [
            "::",
            "::1",
            "1::",
            "fe80::5054:ff:fe12:3456",
            "2001:db8::1:0:0:1",
            "2001:db8:0:1:1:1:1:1",
            "2001:0:0:1::1",
            "1:0:0:2:0:0:0:3",
            "ff02::1:ff00:2",
            "1:2:3:4:5:6:7:8",
            "::ffff:192.0.2.1",
            "::2:3:4:5:6:7:8",
            "1:2:3:4:5:6:7::",
        ];
        for case in cases {
            let std_addr: std::net::Ipv6Addr = case.parse().unwrap();
            let ours = Ipv6Address(std_addr.octets());
            assert_eq!(ours.to_string(), std_addr.to_string(), "{case}");
        }
        assert_eq!(addr("2001:db8:0:0:1:0:0:1").to_string(), "2001:db8::1:0:0:1");
    }

    #[cfg(feature = "std")]
    #[test]
    fn std_conversions() {
        let std_addr: std::net::Ipv6Addr = "2001:db8::7".parse().unwrap();
        let ours = Ipv6Address::from(std_addr);
        assert_eq!(ours, Ipv6Address::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7));
        assert_eq!(std::net::Ipv6Addr::from(ours), std_addr);
    }

    #[test]
    fn parse_captured_ns() {
        let packet = Ipv6Packet::new_checked(&IPV6_NS[ETH..]).unwrap();
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0);
        assert_eq!(packet.flow_label(), 0);
        assert_eq!(packet.payload_len(), 32);
        assert_eq!(packet.next_header(), IpProtocol::Icmpv6);
        assert_eq!(packet.hop_limit(), 255);
        assert_eq!(packet.src_addr(), addr("fe80::5054:ff:fe12:3456"));
        assert_eq!(packet.dst_addr(), addr("ff02::1:ff00:2"));
        assert_eq!(packet.payload().len(), 32);
        assert_eq!(packet.payload()[0], 135);
        assert_eq!(packet.upper_layer(), Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Icmpv6, offset: 0 }));
        let repr = Ipv6Repr::parse(&packet).unwrap();
        assert_eq!(
            repr,
            Ipv6Repr {
                src_addr: addr("fe80::5054:ff:fe12:3456"),
                dst_addr: addr("ff02::1:ff00:2"),
                next_header: IpProtocol::Icmpv6,
                payload_len: 32,
                hop_limit: 255,
            }
        );
    }

    #[test]
    fn truncated_and_wrong_version() {
        let good = &IPV6_NS[ETH..];
        for len in 0..good.len() {
            assert_eq!(Ipv6Packet::new_checked(&good[..len]), Err(Error::Truncated), "len {len}");
            let packet = Ipv6Packet::new_unchecked(&good[..len]);
            assert_eq!(Ipv6Repr::parse(&packet), Err(Error::Truncated));
        }
        let mut bytes = good.to_vec();
        bytes[0] = 0x40;
        let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&packet), Err(Error::Malformed));
    }

    #[test]
    fn round_trip_and_setters() {
        let repr = Ipv6Repr {
            src_addr: addr("2001:db8::1"),
            dst_addr: addr("2001:db8::2"),
            next_header: IpProtocol::Tcp,
            payload_len: 4,
            hop_limit: 64,
        };
        let mut bytes = [0xffu8; 44];
        let mut packet = Ipv6Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(b"tcp!");
        assert_eq!(bytes[..8], [0x60, 0, 0, 0, 0, 4, 6, 64]);
        let packet = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Ipv6Repr::parse(&packet).unwrap(), repr);
        assert_eq!(packet.payload(), b"tcp!");

        let mut packet = Ipv6Packet::new_unchecked(&mut bytes[..]);
        packet.set_traffic_class(0xb8);
        packet.set_flow_label(0x12345);
        assert_eq!(packet.version(), 6);
        assert_eq!(packet.traffic_class(), 0xb8);
        assert_eq!(packet.flow_label(), 0x12345);
        assert_eq!(bytes[..4], [0x6b, 0x81, 0x23, 0x45]);
    }

    /// Hop-by-Hop with Router Alert, Destination Options with PadN, Routing with no segments
    /// left, then `last` with 8 bytes of its own.
    fn chain(last: u8) -> std::vec::Vec<u8> {
        let mut p = std::vec::Vec::new();
        p.extend_from_slice(&[60, 0, 5, 2, 0, 0, 1, 0]); // HBH -> DestOpts: Router Alert, PadN(0)
        p.extend_from_slice(&[43, 1, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // -> Routing
        p.extend_from_slice(&[last, 0, 0, 0, 0, 0, 0, 0]); // Routing type 0, segments left 0
        p.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        p
    }

    #[test]
    fn extension_headers() {
        let p = chain(6);
        assert_eq!(
            upper_layer(IpProtocol::HopByHop, &p),
            Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Tcp, offset: 32 })
        );
        let p = chain(44);
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p), Ok(Ipv6UpperLayer::Fragment { offset: 32 }));
        // The fragment header itself is cut short.
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p[..36]), Err(Error::Truncated));
        // No extension headers at all.
        assert_eq!(
            upper_layer(IpProtocol::Udp, &[]),
            Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Udp, offset: 0 })
        );
        assert_eq!(
            upper_layer(IpProtocol::Ipv6NoNxt, &[]),
            Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Ipv6NoNxt, offset: 0 })
        );

        let p = chain(6);
        for len in 0..32 {
            assert_eq!(upper_layer(IpProtocol::HopByHop, &p[..len]), Err(Error::Truncated), "{len}");
        }

        // Hop-by-Hop after another header.
        let mut p = chain(0);
        p.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p), Err(Error::Malformed));

        // Segments left: this host would have to forward.
        let mut p = chain(6);
        p[27] = 1;
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p), Err(Error::Unsupported));

        // An unknown option of type "discard" (0x80 | 0x1e).
        let mut p = chain(6);
        p[8 + 2] = 0x9e;
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p), Err(Error::Unsupported));

        // An option that runs past its header.
        let mut p = chain(6);
        p[8 + 3] = 13;
        assert_eq!(upper_layer(IpProtocol::HopByHop, &p), Err(Error::Malformed));
        // An option type with no room for its length byte.
        let hbh = [59, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(upper_layer(IpProtocol::HopByHop, &hbh), Err(Error::Malformed));
        // Six Pad1 options are fine.
        let hbh = [59, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            upper_layer(IpProtocol::HopByHop, &hbh),
            Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Ipv6NoNxt, offset: 8 })
        );
    }

    #[test]
    fn long_chain_of_destination_options_terminates() {
        // 2000 empty Destination Options headers, each pointing to the next.
        let mut p = std::vec::Vec::new();
        for _ in 0..2000 {
            p.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(upper_layer(IpProtocol::Ipv6Opts, &p), Err(Error::Truncated));
        let n = p.len();
        p[n - 8..].copy_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
        assert_eq!(
            upper_layer(IpProtocol::Ipv6Opts, &p),
            Ok(Ipv6UpperLayer::Protocol { protocol: IpProtocol::Udp, offset: 16000 })
        );
    }
}
