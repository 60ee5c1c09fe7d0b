//! Ethernet II frames (IEEE 802.3 with an EtherType), without VLAN tags: a tagged frame parses with
//! `EtherType::Unknown(0x8100)`.

use core::fmt;

use crate::{be, Error, Result};

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address as bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Neither multicast nor broadcast.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The group bit (least significant bit of the first octet) is set. Broadcast is multicast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// ff:ff:ff:ff:ff:ff.
    pub const fn is_broadcast(&self) -> bool {
        let b = self.0;
        b[0] & b[1] & b[2] & b[3] & b[4] & b[5] == 0xff
    }

    /// The locally administered bit (second least significant bit of the first octet) is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(bytes: [u8; 6]) -> Self {
        EthernetAddress(bytes)
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// The EtherType field: what the frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// 0x0800.
    Ipv4,
    /// 0x0806.
    Arp,
    /// 0x86DD.
    Ipv6,
    /// Anything else, including VLAN tags (0x8100) and 802.3 length values (<= 1500).
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(other) => other,
        }
    }
}

/// Byte offsets of the Ethernet II header.
pub mod field {
    use crate::field::{Field, Rest};

    /// Destination address.
    pub const DESTINATION: Field = 0..6;
    /// Source address.
    pub const SOURCE: Field = 6..12;
    /// EtherType.
    pub const ETHERTYPE: Field = 12..14;
    /// Payload.
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length; accessors may panic if it is shorter than
    /// [`HEADER_LEN`].
    pub const fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer, checking that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Length of a frame whose payload is `payload_len` bytes.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut addr = [0; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(addr)
    }

    /// Source address.
    pub fn src_addr(&self) -> EthernetAddress {
        let mut addr = [0; 6];
        addr.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(addr)
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(be::u16_at(self.buffer.as_ref(), field::ETHERTYPE.start))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> EthernetFrame<&'a T> {
    /// The payload, including any padding up to the minimum frame size (the IP layer trims it).
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        be::set_u16(self.buffer.as_mut(), field::ETHERTYPE.start, ethertype.into());
    }

    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The meaning of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// What the payload is.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of `frame`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &EthernetFrame<&T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        Ok(EthernetRepr { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }

    /// Length of the header this emits.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into `frame`, which must be at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::ARP_REQUEST;

    #[test]
    fn address_classes() {
        let unicast = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        assert!(unicast.is_unicast() && !unicast.is_multicast() && !unicast.is_broadcast());
        assert!(unicast.is_local());
        let mcast = EthernetAddress([0x33, 0x33, 0xff, 0x00, 0x00, 0x01]);
        assert!(mcast.is_multicast() && !mcast.is_unicast() && !mcast.is_broadcast());
        let b = EthernetAddress::BROADCAST;
        assert!(b.is_broadcast() && b.is_multicast() && !b.is_unicast());
        assert_eq!(b.to_string(), "ff:ff:ff:ff:ff:ff");
        assert_eq!(unicast.to_string(), "52:54:00:12:34:56");
    }

    #[test]
    fn ethertype_round_trip() {
        for value in [0x0800u16, 0x0806, 0x86dd, 0x8100, 0x0000, 0xffff] {
            assert_eq!(u16::from(EtherType::from(value)), value);
        }
        assert_eq!(EtherType::from(0x8100), EtherType::Unknown(0x8100));
        assert_eq!(EtherType::from(0x86dd), EtherType::Ipv6);
    }

    #[test]
    fn parse_captured_arp_frame() {
        let frame = EthernetFrame::new_checked(&ARP_REQUEST[..]).unwrap();
        let repr = EthernetRepr::parse(&frame).unwrap();
        assert_eq!(repr.dst_addr, EthernetAddress::BROADCAST);
        assert_eq!(repr.src_addr, EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(repr.ethertype, EtherType::Arp);
        assert_eq!(frame.payload().len(), 28);
        assert_eq!(frame.payload()[..2], [0x00, 0x01]);
    }

    #[test]
    fn vlan_tag_is_unknown() {
        let mut bytes = [0u8; 18];
        bytes[12] = 0x81;
        bytes[13] = 0x00;
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame).unwrap().ethertype, EtherType::Unknown(0x8100));
    }

    #[test]
    fn round_trip() {
        let repr = EthernetRepr {
            src_addr: EthernetAddress([0x02, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([0x02, 0, 0, 0, 0, 2]),
            ethertype: EtherType::Ipv6,
        };
        let mut bytes = [0xaau8; HEADER_LEN + 3];
        let mut frame = EthernetFrame::new_unchecked(&mut bytes[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(b"abc");
        assert_eq!(bytes[..HEADER_LEN], [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd]);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(EthernetRepr::parse(&frame).unwrap(), repr);
        assert_eq!(frame.payload(), b"abc");
        assert_eq!(repr.header_len(), 14);
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            let bytes = [0u8; HEADER_LEN];
            assert_eq!(EthernetFrame::new_checked(&bytes[..len]), Err(Error::Truncated));
            let frame = EthernetFrame::new_unchecked(&bytes[..len]);
            assert_eq!(EthernetRepr::parse(&frame), Err(Error::Truncated));
        }
        assert!(EthernetFrame::new_checked(&[0u8; HEADER_LEN][..]).is_ok());
    }
}
