//! ICMP for IPv4 (RFC 792): echo, and the two error messages a host acts on, Destination
//! Unreachable (with the next-hop MTU of RFC 1191 for path MTU discovery) and Time Exceeded.
//!
//! An error message quotes the start of the datagram that provoked it: its IP header and at least
//! 8 bytes of its payload (Linux quotes more), enough for the stack to find the connection from
//! the addresses, the protocol and the ports.

use crate::ip::checksum;
use crate::ipv4::{self, Ipv4Repr};
use crate::{be, Error, Result};

/// An ICMPv4 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Message {
    /// 0.
    EchoReply,
    /// 3.
    DstUnreachable,
    /// 5.
    Redirect,
    /// 8.
    EchoRequest,
    /// 9.
    RouterAdvert,
    /// 10.
    RouterSolicit,
    /// 11.
    TimeExceeded,
    /// 12.
    ParamProblem,
    /// 13.
    Timestamp,
    /// 14.
    TimestampReply,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Icmpv4Message {
    fn from(value: u8) -> Self {
        match value {
            0 => Icmpv4Message::EchoReply,
            3 => Icmpv4Message::DstUnreachable,
            5 => Icmpv4Message::Redirect,
            8 => Icmpv4Message::EchoRequest,
            9 => Icmpv4Message::RouterAdvert,
            10 => Icmpv4Message::RouterSolicit,
            11 => Icmpv4Message::TimeExceeded,
            12 => Icmpv4Message::ParamProblem,
            13 => Icmpv4Message::Timestamp,
            14 => Icmpv4Message::TimestampReply,
            other => Icmpv4Message::Unknown(other),
        }
    }
}

impl From<Icmpv4Message> for u8 {
    fn from(value: Icmpv4Message) -> Self {
        match value {
            Icmpv4Message::EchoReply => 0,
            Icmpv4Message::DstUnreachable => 3,
            Icmpv4Message::Redirect => 5,
            Icmpv4Message::EchoRequest => 8,
            Icmpv4Message::RouterAdvert => 9,
            Icmpv4Message::RouterSolicit => 10,
            Icmpv4Message::TimeExceeded => 11,
            Icmpv4Message::ParamProblem => 12,
            Icmpv4Message::Timestamp => 13,
            Icmpv4Message::TimestampReply => 14,
            Icmpv4Message::Unknown(other) => other,
        }
    }
}

/// Why a destination is unreachable: the code of a Destination Unreachable message (RFC 792,
/// RFC 1122, RFC 1812).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4DstUnreachable {
    /// 0.
    NetUnreachable,
    /// 1.
    HostUnreachable,
    /// 2.
    ProtoUnreachable,
    /// 3.
    PortUnreachable,
    /// 4: fragmentation needed and DF set; the message carries the next-hop MTU.
    FragRequired,
    /// 5.
    SrcRouteFailed,
    /// 6.
    DstNetUnknown,
    /// 7.
    DstHostUnknown,
    /// 8.
    SrcHostIsolated,
    /// 9.
    NetProhibited,
    /// 10.
    HostProhibited,
    /// 11.
    NetUnreachToS,
    /// 12.
    HostUnreachToS,
    /// 13.
    CommProhibited,
    /// 14.
    HostPrecedViol,
    /// 15.
    PrecedCutoff,
    /// Any other code.
    Unknown(u8),
}

impl From<u8> for Icmpv4DstUnreachable {
    fn from(value: u8) -> Self {
        use Icmpv4DstUnreachable::*;
        match value {
            0 => NetUnreachable,
            1 => HostUnreachable,
            2 => ProtoUnreachable,
            3 => PortUnreachable,
            4 => FragRequired,
            5 => SrcRouteFailed,
            6 => DstNetUnknown,
            7 => DstHostUnknown,
            8 => SrcHostIsolated,
            9 => NetProhibited,
            10 => HostProhibited,
            11 => NetUnreachToS,
            12 => HostUnreachToS,
            13 => CommProhibited,
            14 => HostPrecedViol,
            15 => PrecedCutoff,
            other => Unknown(other),
        }
    }
}

impl From<Icmpv4DstUnreachable> for u8 {
    fn from(value: Icmpv4DstUnreachable) -> Self {
        use Icmpv4DstUnreachable::*;
        match value {
            NetUnreachable => 0,
            HostUnreachable => 1,
            ProtoUnreachable => 2,
            PortUnreachable => 3,
            FragRequired => 4,
            SrcRouteFailed => 5,
            DstNetUnknown => 6,
            DstHostUnknown => 7,
            SrcHostIsolated => 8,
            NetProhibited => 9,
            HostProhibited => 10,
            NetUnreachToS => 11,
            HostUnreachToS => 12,
            CommProhibited => 13,
            HostPrecedViol => 14,
            PrecedCutoff => 15,
            Unknown(other) => other,
        }
    }
}

/// The code of a Time Exceeded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4TimeExceeded {
    /// 0: time to live exceeded in transit.
    TtlExpired,
    /// 1: fragment reassembly time exceeded.
    FragExpired,
    /// Any other code.
    Unknown(u8),
}

impl From<u8> for Icmpv4TimeExceeded {
    fn from(value: u8) -> Self {
        match value {
            0 => Icmpv4TimeExceeded::TtlExpired,
            1 => Icmpv4TimeExceeded::FragExpired,
            other => Icmpv4TimeExceeded::Unknown(other),
        }
    }
}

impl From<Icmpv4TimeExceeded> for u8 {
    fn from(value: Icmpv4TimeExceeded) -> Self {
        match value {
            Icmpv4TimeExceeded::TtlExpired => 0,
            Icmpv4TimeExceeded::FragExpired => 1,
            Icmpv4TimeExceeded::Unknown(other) => other,
        }
    }
}

/// Byte offsets of ICMPv4 messages.
pub mod field {
    use crate::field::{Field, Rest};

    /// Type.
    pub const TYPE: usize = 0;
    /// Code.
    pub const CODE: usize = 1;
    /// Checksum, over the whole message.
    pub const CHECKSUM: Field = 2..4;
    /// Identifier (echo).
    pub const ECHO_IDENTIFIER: Field = 4..6;
    /// Sequence Number (echo).
    pub const ECHO_SEQUENCE_NUMBER: Field = 6..8;
    /// Unused (Destination Unreachable, before the next-hop MTU).
    pub const UNUSED: Field = 4..6;
    /// Next-Hop MTU (Destination Unreachable, code 4: RFC 1191).
    pub const NEXT_HOP_MTU: Field = 6..8;
    /// Echo data, or the quoted datagram of an error message.
    pub const DATA: Rest = 8..;
}

/// Length of the ICMPv4 header (type, code, checksum and four type-specific bytes).
pub const HEADER_LEN: usize = field::DATA.start;

/// A view of an ICMPv4 message. The buffer is the whole message (the IPv4 payload): the checksum
/// covers all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv4Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the 8-byte header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 8-byte header.
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

    /// Type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum.
    pub fn checksum(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::CHECKSUM.start)
    }

    /// Identifier of an echo message.
    pub fn echo_ident(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::ECHO_IDENTIFIER.start)
    }

    /// Sequence Number of an echo message.
    pub fn echo_seq_no(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::ECHO_SEQUENCE_NUMBER.start)
    }

    /// Next-Hop MTU of a "fragmentation needed" Destination Unreachable (0 from routers older
    /// than RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::NEXT_HOP_MTU.start)
    }

    /// Whether the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv4Packet<&'a T> {
    /// Everything after the header: echo data, or the quoted datagram (its IP header and the
    /// start of its payload) of an error message.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the Type.
    pub fn set_msg_type(&mut self, value: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the Code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the Checksum.
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM.start, value);
    }

    /// Sets the echo Identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::ECHO_IDENTIFIER.start, value);
    }

    /// Sets the echo Sequence Number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::ECHO_SEQUENCE_NUMBER.start, value);
    }

    /// Sets the Unused field of Destination Unreachable to zero and the Next-Hop MTU.
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::UNUSED.start, 0);
        be::set_u16(self.buffer.as_mut(), field::NEXT_HOP_MTU.start, value);
    }

    /// Computes and writes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(!sum);
    }

    /// Everything after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

/// The meaning of the ICMPv4 messages pronghorn handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo Request (ping).
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence Number.
        seq_no: u16,
        /// Data, echoed back in the reply.
        data: &'a [u8],
    },
    /// Echo Reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence Number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Destination Unreachable.
    DstUnreachable {
        /// The code.
        reason: Icmpv4DstUnreachable,
        /// Next-hop MTU for `FragRequired` (0 if the router did not say); 0 otherwise.
        next_hop_mtu: u16,
        /// The quoted IP header. Its `payload_len` is that of the original datagram, which may
        /// be longer than `data`; its checksum is not verified.
        header: Ipv4Repr,
        /// The quoted start of the original payload (8 bytes or more; the transport ports are in
        /// the first 4).
        data: &'a [u8],
    },
    /// Time Exceeded.
    TimeExceeded {
        /// The code.
        reason: Icmpv4TimeExceeded,
        /// The quoted IP header, as for `DstUnreachable`.
        header: Ipv4Repr,
        /// The quoted start of the original payload.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Reads a message: checks the length and (if `verify_checksum`) the checksum. Types other
    /// than the four above are `Err(Unsupported)`; an error message whose quoted IP header is
    /// cut short or not IPv4 is `Err(Truncated)` or `Err(Malformed)`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv4Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        match packet.msg_type() {
            Icmpv4Message::EchoRequest => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            Icmpv4Message::EchoReply => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            Icmpv4Message::DstUnreachable => {
                let reason = Icmpv4DstUnreachable::from(packet.msg_code());
                let next_hop_mtu = match reason {
                    Icmpv4DstUnreachable::FragRequired => packet.next_hop_mtu(),
                    _ => 0,
                };
                let (header, data) = Ipv4Repr::parse_quoted(packet.data())?;
                Ok(Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header, data })
            }
            Icmpv4Message::TimeExceeded => {
                let reason = Icmpv4TimeExceeded::from(packet.msg_code());
                let (header, data) = Ipv4Repr::parse_quoted(packet.data())?;
                Ok(Icmpv4Repr::TimeExceeded { reason, header, data })
            }
            _ => Err(Error::Unsupported),
        }
    }

    /// Length of the message this emits.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => HEADER_LEN + data.len(),
            Icmpv4Repr::DstUnreachable { data, .. } | Icmpv4Repr::TimeExceeded { data, .. } => {
                HEADER_LEN + ipv4::HEADER_LEN + data.len()
            }
        }
    }

    /// Writes the message into `packet`, which must hold at least [`buffer_len`] bytes; the
    /// checksum covers exactly that many. A quoted header is written by [`Ipv4Repr::emit`] (no
    /// options, its own checksum filled). Without `fill_checksum` the field is left zero.
    ///
    /// [`buffer_len`]: Icmpv4Repr::buffer_len
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>, fill_checksum: bool) {
        packet.set_checksum(0);
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => {
                emit_echo(packet, Icmpv4Message::EchoRequest, ident, seq_no, data)
            }
            Icmpv4Repr::EchoReply { ident, seq_no, data } => {
                emit_echo(packet, Icmpv4Message::EchoReply, ident, seq_no, data)
            }
            Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header, data } => {
                packet.set_msg_type(Icmpv4Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                let mtu = match reason {
                    Icmpv4DstUnreachable::FragRequired => next_hop_mtu,
                    _ => 0,
                };
                packet.set_next_hop_mtu(mtu);
                emit_quote(packet, &header, data);
            }
            Icmpv4Repr::TimeExceeded { reason, header, data } => {
                packet.set_msg_type(Icmpv4Message::TimeExceeded);
                packet.set_msg_code(reason.into());
                packet.set_next_hop_mtu(0);
                emit_quote(packet, &header, data);
            }
        }
        if fill_checksum {
            let sum = checksum::data(&packet.buffer.as_ref()[..self.buffer_len()]);
            packet.set_checksum(!sum);
        }
    }
}

fn emit_echo<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Icmpv4Packet<T>,
    msg_type: Icmpv4Message,
    ident: u16,
    seq_no: u16,
    data: &[u8],
) {
    packet.set_msg_type(msg_type);
    packet.set_msg_code(0);
    packet.set_echo_ident(ident);
    packet.set_echo_seq_no(seq_no);
    packet.data_mut()[..data.len()].copy_from_slice(data);
}

fn emit_quote<T: AsRef<[u8]> + AsMut<[u8]>>(packet: &mut Icmpv4Packet<T>, header: &Ipv4Repr, data: &[u8]) {
    let quote = packet.data_mut();
    header.emit(&mut ipv4::Ipv4Packet::new_unchecked(&mut quote[..ipv4::HEADER_LEN]), true);
    quote[ipv4::HEADER_LEN..ipv4::HEADER_LEN + data.len()].copy_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip::IpProtocol;
    use crate::ipv4::{Ipv4Address, Ipv4Packet};
    use crate::tests::{ICMP_ECHO_REQUEST, ICMP_PORT_UNREACHABLE};

    const IP: usize = crate::ethernet::HEADER_LEN + ipv4::HEADER_LEN;

    fn quoted_udp() -> Ipv4Repr {
        Ipv4Repr {
            src_addr: Ipv4Address::new(192, 168, 1, 10),
            dst_addr: Ipv4Address::new(192, 168, 1, 1),
            next_header: IpProtocol::Udp,
            payload_len: 37,
            hop_limit: 64,
        }
    }

    #[test]
    fn parse_captured_echo_request() {
        let packet = Icmpv4Packet::new_checked(&ICMP_ECHO_REQUEST[IP..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv4Message::EchoRequest);
        assert_eq!(packet.msg_code(), 0);
        assert_eq!(packet.checksum(), 0x8309);
        assert!(packet.verify_checksum());
        let repr = Icmpv4Repr::parse(&packet, true).unwrap();
        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = repr else {
            panic!("not an echo request: {repr:?}");
        };
        assert_eq!((ident, seq_no), (0x1c46, 1));
        assert_eq!(data.len(), 56);
        assert_eq!(data[16..], (0x10..0x38).collect::<std::vec::Vec<u8>>()[..]);

        // The reply Linux would send: same ident, seq_no and data, type 0.
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        let mut bytes = std::vec![0u8; reply.buffer_len()];
        reply.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(bytes[..8], [0, 0, 0x8b, 0x09, 0x1c, 0x46, 0, 1]);
        assert_eq!(bytes[8..], ICMP_ECHO_REQUEST[IP + 8..]);
    }

    #[test]
    fn parse_captured_port_unreachable() {
        let ip = Ipv4Packet::new_checked(&ICMP_PORT_UNREACHABLE[crate::ethernet::HEADER_LEN..]).unwrap();
        assert_eq!(ip.dscp(), 0x30);
        let packet = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(packet.checksum(), 0x808f);
        let repr = Icmpv4Repr::parse(&packet, true).unwrap();
        let Icmpv4Repr::DstUnreachable { reason, next_hop_mtu, header, data } = repr else {
            panic!("not a destination unreachable: {repr:?}");
        };
        assert_eq!(reason, Icmpv4DstUnreachable::PortUnreachable);
        assert_eq!(next_hop_mtu, 0);
        assert_eq!(header, quoted_udp());
        assert_eq!(data.len(), 37);
        // The quoted UDP ports: 41000 -> 53.
        assert_eq!(data[..4], [0xa0, 0x28, 0x00, 0x35]);
        assert_eq!(packet.data(), &ICMP_PORT_UNREACHABLE[IP + 8..]);
    }

    #[test]
    fn round_trip_every_variant() {
        let payload = [0x12u8, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0];
        let reprs = [
            Icmpv4Repr::EchoRequest { ident: 1, seq_no: 2, data: b"hello" },
            Icmpv4Repr::EchoReply { ident: 0xffff, seq_no: 0, data: &[] },
            Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::FragRequired,
                next_hop_mtu: 1400,
                header: quoted_udp(),
                data: &payload,
            },
            Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::Unknown(99),
                next_hop_mtu: 0,
                header: quoted_udp(),
                data: &payload,
            },
            Icmpv4Repr::TimeExceeded { reason: Icmpv4TimeExceeded::TtlExpired, header: quoted_udp(), data: &payload },
        ];
        for repr in reprs {
            let mut bytes = std::vec![0xeeu8; repr.buffer_len()];
            repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
            let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
            assert!(packet.verify_checksum());
            assert_eq!(Icmpv4Repr::parse(&packet, true).unwrap(), repr);
        }
    }

    #[test]
    fn frag_required_carries_mtu() {
        let repr = Icmpv4Repr::DstUnreachable {
            reason: Icmpv4DstUnreachable::FragRequired,
            next_hop_mtu: 1280,
            header: quoted_udp(),
            data: &[0; 8],
        };
        let mut bytes = [0u8; 36];
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), true);
        assert_eq!(bytes[..2], [3, 4]);
        assert_eq!(bytes[4..8], [0, 0, 0x05, 0x00]);
        assert_eq!(bytes[8], 0x45);
        assert_eq!(Icmpv4Packet::new_checked(&bytes[..]).unwrap().next_hop_mtu(), 1280);
    }

    #[test]
    fn bad_checksum_rejected() {
        let mut bytes = ICMP_ECHO_REQUEST[IP..].to_vec();
        bytes[7] = 2; // sequence number 2
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&packet, true), Err(Error::Checksum));
        assert!(matches!(Icmpv4Repr::parse(&packet, false), Ok(Icmpv4Repr::EchoRequest { seq_no: 2, .. })));
    }

    #[test]
    fn malformed_quotes_and_unsupported_types() {
        // A quote shorter than an IP header.
        let mut bytes = ICMP_PORT_UNREACHABLE[IP..IP + 8 + 19].to_vec();
        let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum();
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&packet, true), Err(Error::Truncated));
        // A quote that is not IPv4.
        let mut bytes = ICMP_PORT_UNREACHABLE[IP..].to_vec();
        bytes[8] = 0x65;
        let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum();
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv4Repr::parse(&packet, true), Err(Error::Malformed));
        // A timestamp request.
        let mut bytes = [13u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut packet = Icmpv4Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum();
        let packet = Icmpv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv4Message::Timestamp);
        assert_eq!(Icmpv4Repr::parse(&packet, true), Err(Error::Unsupported));
    }

    #[test]
    fn truncated() {
        for len in 0..HEADER_LEN {
            let packet = Icmpv4Packet::new_unchecked(&ICMP_ECHO_REQUEST[IP..IP + len]);
            assert_eq!(Icmpv4Repr::parse(&packet, false), Err(Error::Truncated));
        }
    }

    #[test]
    fn codes_round_trip() {
        for code in 0..=255u8 {
            assert_eq!(u8::from(Icmpv4DstUnreachable::from(code)), code);
            assert_eq!(u8::from(Icmpv4TimeExceeded::from(code)), code);
            assert_eq!(u8::from(Icmpv4Message::from(code)), code);
        }
    }
}
