//! ARP (RFC 826) for IPv4 over Ethernet, the only pairing pronghorn resolves. The view reads
//! any hardware and protocol lengths; the representation accepts only Ethernet/IPv4.

use crate::ethernet::{EtherType, EthernetAddress};
use crate::ipv4::Ipv4Address;
use crate::{be, Error, Result};

/// The hardware type (htype).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpHardware {
    /// 1: Ethernet.
    Ethernet,
    /// Any other type.
    Unknown(u16),
}

impl From<u16> for ArpHardware {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpHardware::Ethernet,
            other => ArpHardware::Unknown(other),
        }
    }
}

impl From<ArpHardware> for u16 {
    fn from(value: ArpHardware) -> Self {
        match value {
            ArpHardware::Ethernet => 1,
            ArpHardware::Unknown(other) => other,
        }
    }
}

/// The operation (oper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1.
    Request,
    /// 2.
    Reply,
    /// Any other operation (RARP, InARP...).
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(value: ArpOperation) -> Self {
        match value {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

/// Byte offsets of the fixed part of an ARP packet; the four addresses follow, their lengths
/// given by HLEN and PLEN.
pub mod field {
    use crate::field::Field;

    /// Hardware type.
    pub const HTYPE: Field = 0..2;
    /// Protocol type (an EtherType).
    pub const PTYPE: Field = 2..4;
    /// Hardware address length.
    pub const HLEN: usize = 4;
    /// Protocol address length.
    pub const PLEN: usize = 5;
    /// Operation.
    pub const OPER: Field = 6..8;
    /// Sender hardware address (SHA), sender protocol address (SPA), target hardware address
    /// (THA), target protocol address (TPA) start here.
    pub const ADDRESSES: usize = 8;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = field::ADDRESSES + 2 * (6 + 4);

/// A view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps a buffer, checking that it holds the fixed part and the four addresses.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed part and the four addresses (HLEN and PLEN bytes
    /// each); trailing bytes (Ethernet padding) are ignored.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::ADDRESSES || len < self.tpa().end {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn sha(&self) -> core::ops::Range<usize> {
        let start = field::ADDRESSES;
        start..start + usize::from(self.hardware_len())
    }

    fn spa(&self) -> core::ops::Range<usize> {
        let start = self.sha().end;
        start..start + usize::from(self.protocol_len())
    }

    fn tha(&self) -> core::ops::Range<usize> {
        let start = self.spa().end;
        start..start + usize::from(self.hardware_len())
    }

    fn tpa(&self) -> core::ops::Range<usize> {
        let start = self.tha().end;
        start..start + usize::from(self.protocol_len())
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> ArpHardware {
        ArpHardware::from(be::u16_at(self.buffer.as_ref(), field::HTYPE.start))
    }

    /// Protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(be::u16_at(self.buffer.as_ref(), field::PTYPE.start))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(be::u16_at(self.buffer.as_ref(), field::OPER.start))
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.sha()]
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.spa()]
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tha()]
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tpa()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: ArpHardware) {
        be::set_u16(self.buffer.as_mut(), field::HTYPE.start, value.into());
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        be::set_u16(self.buffer.as_mut(), field::PTYPE.start, value.into());
    }

    /// Sets the hardware address length (set it before the addresses).
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length (set it before the addresses).
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, value: ArpOperation) {
        be::set_u16(self.buffer.as_mut(), field::OPER.start, value.into());
    }

    /// Sets the sender hardware address (HLEN bytes).
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let range = self.sha();
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the sender protocol address (PLEN bytes).
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let range = self.spa();
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target hardware address (HLEN bytes).
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let range = self.tha();
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target protocol address (PLEN bytes).
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let range = self.tpa();
        self.buffer.as_mut()[range].copy_from_slice(value);
    }
}

/// The meaning of an ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpRepr {
    /// ARP for IPv4 over Ethernet.
    EthernetIpv4 {
        /// Request, Reply, or another operation (which the stack ignores).
        operation: ArpOperation,
        /// Sender hardware address.
        source_hardware_addr: EthernetAddress,
        /// Sender protocol address.
        source_protocol_addr: Ipv4Address,
        /// Target hardware address (zero in a request).
        target_hardware_addr: EthernetAddress,
        /// Target protocol address.
        target_protocol_addr: Ipv4Address,
    },
}

impl ArpRepr {
    /// Reads an Ethernet/IPv4 packet. Another hardware or protocol type is `Err(Unsupported)`;
    /// Ethernet/IPv4 with address lengths other than 6 and 4 is `Err(Malformed)`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &ArpPacket<&T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != ArpHardware::Ethernet || packet.protocol_type() != EtherType::Ipv4 {
            return Err(Error::Unsupported);
        }
        if packet.hardware_len() != 6 || packet.protocol_len() != 4 {
            return Err(Error::Malformed);
        }
        let mac = |bytes: &[u8]| {
            let mut mac = [0u8; 6];
            mac.copy_from_slice(bytes);
            EthernetAddress(mac)
        };
        let ip = |bytes: &[u8]| Ipv4Address([bytes[0], bytes[1], bytes[2], bytes[3]]);
        Ok(ArpRepr::EthernetIpv4 {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr()),
            source_protocol_addr: ip(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr()),
            target_protocol_addr: ip(packet.target_protocol_addr()),
        })
    }

    /// Length of the packet this emits.
    pub const fn buffer_len(&self) -> usize {
        match self {
            ArpRepr::EthernetIpv4 { .. } => ETHERNET_IPV4_LEN,
        }
    }

    /// Writes the packet; the buffer must hold at least [`ETHERNET_IPV4_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        match *self {
            ArpRepr::EthernetIpv4 {
                operation,
                source_hardware_addr,
                source_protocol_addr,
                target_hardware_addr,
                target_protocol_addr,
            } => {
                packet.set_hardware_type(ArpHardware::Ethernet);
                packet.set_protocol_type(EtherType::Ipv4);
                packet.set_hardware_len(6);
                packet.set_protocol_len(4);
                packet.set_operation(operation);
                packet.set_source_hardware_addr(source_hardware_addr.as_bytes());
                packet.set_source_protocol_addr(source_protocol_addr.as_bytes());
                packet.set_target_hardware_addr(target_hardware_addr.as_bytes());
                packet.set_target_protocol_addr(target_protocol_addr.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::ARP_REQUEST;

    const ETH: usize = crate::ethernet::HEADER_LEN;
    const GUEST: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

    #[test]
    fn parse_captured_request() {
        let packet = ArpPacket::new_checked(&ARP_REQUEST[ETH..]).unwrap();
        assert_eq!(packet.hardware_type(), ArpHardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), ArpOperation::Request);
        assert_eq!(packet.source_protocol_addr(), &[10, 0, 2, 15]);
        assert_eq!(packet.target_protocol_addr(), &[10, 0, 2, 2]);
        assert_eq!(
            ArpRepr::parse(&packet).unwrap(),
            ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_hardware_addr: GUEST,
                source_protocol_addr: Ipv4Address::new(10, 0, 2, 15),
                target_hardware_addr: EthernetAddress([0; 6]),
                target_protocol_addr: Ipv4Address::new(10, 0, 2, 2),
            }
        );
    }

    #[test]
    fn padded_request_parses() {
        // Ethernet pads the 42-byte frame to 60.
        let mut frame = ARP_REQUEST.to_vec();
        frame.resize(60, 0);
        let packet = ArpPacket::new_checked(&frame[ETH..]).unwrap();
        assert!(matches!(ArpRepr::parse(&packet), Ok(ArpRepr::EthernetIpv4 { operation: ArpOperation::Request, .. })));
    }

    #[test]
    fn reply_round_trip() {
        let me = EthernetAddress([0x52, 0x55, 0x0a, 0x00, 0x02, 0x02]);
        let reply = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: me,
            source_protocol_addr: Ipv4Address::new(10, 0, 2, 2),
            target_hardware_addr: GUEST,
            target_protocol_addr: Ipv4Address::new(10, 0, 2, 15),
        };
        let mut bytes = [0u8; ETHERNET_IPV4_LEN];
        reply.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(
            bytes,
            [
                0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02, 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 10, 0, 2, 2, 0x52, 0x54,
                0x00, 0x12, 0x34, 0x56, 10, 0, 2, 15
            ]
        );
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet).unwrap(), reply);
        assert_eq!(reply.buffer_len(), 28);
    }

    #[test]
    fn truncated() {
        let good = &ARP_REQUEST[ETH..];
        for len in 0..good.len() {
            assert_eq!(ArpPacket::new_checked(&good[..len]), Err(Error::Truncated), "{len}");
            let packet = ArpPacket::new_unchecked(&good[..len]);
            assert_eq!(ArpRepr::parse(&packet), Err(Error::Truncated), "{len}");
        }
    }

    #[test]
    fn other_types_rejected() {
        let good = &ARP_REQUEST[ETH..];
        let mut bytes = good.to_vec();
        bytes[1] = 6; // IEEE 802 hardware
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.hardware_type(), ArpHardware::Unknown(6));
        assert_eq!(ArpRepr::parse(&packet), Err(Error::Unsupported));

        let mut bytes = good.to_vec();
        bytes[2..4].copy_from_slice(&[0x86, 0xdd]); // IPv6 protocol
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet), Err(Error::Unsupported));

        // Ethernet/IPv4 claiming 8-byte hardware addresses: long enough, but wrong.
        let mut bytes = good.to_vec();
        bytes[4] = 8;
        bytes.resize(36, 0);
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.source_hardware_addr().len(), 8);
        assert_eq!(ArpRepr::parse(&packet), Err(Error::Malformed));
        // ...and without the room for them.
        assert_eq!(ArpPacket::new_checked(&bytes[..28]), Err(Error::Truncated));

        let mut bytes = good.to_vec();
        bytes[5] = 16; // plen 16
        assert_eq!(ArpPacket::new_checked(&bytes[..]), Err(Error::Truncated));
        bytes.resize(8 + 2 * (6 + 16), 0);
        let packet = ArpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(ArpRepr::parse(&packet), Err(Error::Malformed));
    }

    #[test]
    fn operation_codes() {
        for value in [0u16, 1, 2, 3, 4, 8, 9, 0xffff] {
            assert_eq!(u16::from(ArpOperation::from(value)), value);
            assert_eq!(u16::from(ArpHardware::from(value)), value);
        }
        assert_eq!(ArpOperation::from(3), ArpOperation::Unknown(3));
    }
}
