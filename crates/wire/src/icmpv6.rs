//! ICMP for IPv6 (RFC 4443) and the neighbor discovery messages of RFC 4861 that a host on
//! Ethernet needs: Neighbor Solicitation and Advertisement in full, Router Solicitation and
//! Advertisement enough to read (and ignore) them.
//!
//! The checksum covers the IPv6 pseudo-header, so parsing and emitting take the addresses.
//! Neighbor discovery's other rule, a Hop Limit of 255, is in the IPv6 header: the stack checks
//! it.

use crate::ethernet::EthernetAddress;
use crate::ip::{checksum, IpProtocol};
use crate::ipv6::{self, Ipv6Address, Ipv6Repr};
use crate::{be, Error, Result};

/// An ICMPv6 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Message {
    /// 1.
    DstUnreachable,
    /// 2.
    PktTooBig,
    /// 3.
    TimeExceeded,
    /// 4.
    ParamProblem,
    /// 128.
    EchoRequest,
    /// 129.
    EchoReply,
    /// 130: Multicast Listener Query.
    MldQuery,
    /// 131: Multicast Listener Report (version 1).
    MldReport,
    /// 133.
    RouterSolicit,
    /// 134.
    RouterAdvert,
    /// 135.
    NeighborSolicit,
    /// 136.
    NeighborAdvert,
    /// 137.
    Redirect,
    /// 143: Multicast Listener Report version 2.
    MldV2Report,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Icmpv6Message {
    fn from(value: u8) -> Self {
        use Icmpv6Message::*;
        match value {
            1 => DstUnreachable,
            2 => PktTooBig,
            3 => TimeExceeded,
            4 => ParamProblem,
            128 => EchoRequest,
            129 => EchoReply,
            130 => MldQuery,
            131 => MldReport,
            133 => RouterSolicit,
            134 => RouterAdvert,
            135 => NeighborSolicit,
            136 => NeighborAdvert,
            137 => Redirect,
            143 => MldV2Report,
            other => Unknown(other),
        }
    }
}

impl From<Icmpv6Message> for u8 {
    fn from(value: Icmpv6Message) -> Self {
        use Icmpv6Message::*;
        match value {
            DstUnreachable => 1,
            PktTooBig => 2,
            TimeExceeded => 3,
            ParamProblem => 4,
            EchoRequest => 128,
            EchoReply => 129,
            MldQuery => 130,
            MldReport => 131,
            RouterSolicit => 133,
            RouterAdvert => 134,
            NeighborSolicit => 135,
            NeighborAdvert => 136,
            Redirect => 137,
            MldV2Report => 143,
            Unknown(other) => other,
        }
    }
}

/// Defines a code enum with an `Unknown(u8)` catch-all and both conversions.
macro_rules! code_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $value:expr,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// Any other code.
            Unknown(u8),
        }

        impl From<u8> for $name {
            fn from(value: u8) -> Self {
                match value {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> Self {
                match value {
                    $($name::$variant => $value,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

code_enum! {
    /// The code of a Destination Unreachable message.
    Icmpv6DstUnreachable {
        /// 0.
        NoRoute = 0,
        /// 1.
        AdminProhibit = 1,
        /// 2.
        BeyondScope = 2,
        /// 3.
        AddrUnreachable = 3,
        /// 4.
        PortUnreachable = 4,
        /// 5.
        FailedPolicy = 5,
        /// 6.
        RejectRoute = 6,
    }
}

code_enum! {
    /// The code of a Time Exceeded message.
    Icmpv6TimeExceeded {
        /// 0.
        HopLimitExceeded = 0,
        /// 1.
        FragReassemExceeded = 1,
    }
}

code_enum! {
    /// The code of a Parameter Problem message.
    Icmpv6ParamProblem {
        /// 0: erroneous header field.
        ErroneousHdrField = 0,
        /// 1: unrecognized Next Header type.
        UnrecognizedNxtHdr = 1,
        /// 2: unrecognized IPv6 option.
        UnrecognizedOption = 2,
    }
}

/// Byte offsets of ICMPv6 messages.
pub mod field {
    use crate::field::{Field, Rest};

    /// Type.
    pub const TYPE: usize = 0;
    /// Code.
    pub const CODE: usize = 1;
    /// Checksum, over the pseudo-header and the whole message.
    pub const CHECKSUM: Field = 2..4;
    /// Identifier (echo).
    pub const ECHO_IDENTIFIER: Field = 4..6;
    /// Sequence Number (echo).
    pub const ECHO_SEQUENCE_NUMBER: Field = 6..8;
    /// MTU (Packet Too Big).
    pub const MTU: Field = 4..8;
    /// Pointer (Parameter Problem).
    pub const POINTER: Field = 4..8;
    /// Echo data, or the quoted packet of an error message.
    pub const DATA: Rest = 8..;

    /// Cur Hop Limit (Router Advertisement).
    pub const CUR_HOP_LIMIT: usize = 4;
    /// M and O flags (Router Advertisement).
    pub const ROUTER_FLAGS: usize = 5;
    /// Router Lifetime, seconds (Router Advertisement).
    pub const ROUTER_LIFETIME: Field = 6..8;
    /// Reachable Time, milliseconds (Router Advertisement).
    pub const REACHABLE_TIME: Field = 8..12;
    /// Retrans Timer, milliseconds (Router Advertisement).
    pub const RETRANS_TIMER: Field = 12..16;
    /// R, S and O flags (Neighbor Advertisement).
    pub const NEIGHBOR_FLAGS: usize = 4;
    /// Target Address (Neighbor Solicitation and Advertisement, Redirect).
    pub const TARGET_ADDRESS: Field = 8..24;

    /// Options of a Router Solicitation.
    pub const RS_OPTIONS: Rest = 8..;
    /// Options of a Router Advertisement.
    pub const RA_OPTIONS: Rest = 16..;
    /// Options of a Neighbor Solicitation or Advertisement.
    pub const NEIGHBOR_OPTIONS: Rest = 24..;
}

/// Length of the ICMPv6 header (type, code, checksum and four type-specific bytes).
pub const HEADER_LEN: usize = field::DATA.start;

/// A view of an ICMPv6 message. The buffer is the whole message (the upper-layer payload of the
/// IPv6 packet): the checksum covers all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    /// Wraps a buffer without checking it; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Self {
        Icmpv6Packet { buffer }
    }

    /// Wraps a buffer, checking its length for the message type; see [`check_len`].
    ///
    /// [`check_len`]: Icmpv6Packet::check_len
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the fixed part of its type: 8 bytes, 16 for a Router
    /// Advertisement, 24 for a Neighbor Solicitation or Advertisement. After this, the accessors
    /// of that type do not panic.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let min = match self.msg_type() {
            Icmpv6Message::RouterAdvert => field::RA_OPTIONS.start,
            Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert => field::NEIGHBOR_OPTIONS.start,
            _ => HEADER_LEN,
        };
        if len < min {
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
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(self.buffer.as_ref()[field::TYPE])
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

    /// MTU of a Packet Too Big message.
    pub fn pkt_too_big_mtu(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::MTU.start)
    }

    /// Pointer of a Parameter Problem message.
    pub fn param_problem_ptr(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::POINTER.start)
    }

    /// Cur Hop Limit of a Router Advertisement.
    pub fn current_hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::CUR_HOP_LIMIT]
    }

    /// Flags of a Router Advertisement.
    pub fn router_flags(&self) -> NdiscRouterFlags {
        NdiscRouterFlags(self.buffer.as_ref()[field::ROUTER_FLAGS])
    }

    /// Router Lifetime of a Router Advertisement, in seconds.
    pub fn router_lifetime(&self) -> u16 {
        be::u16_at(self.buffer.as_ref(), field::ROUTER_LIFETIME.start)
    }

    /// Reachable Time of a Router Advertisement, in milliseconds.
    pub fn reachable_time(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::REACHABLE_TIME.start)
    }

    /// Retrans Timer of a Router Advertisement, in milliseconds.
    pub fn retrans_time(&self) -> u32 {
        be::u32_at(self.buffer.as_ref(), field::RETRANS_TIMER.start)
    }

    /// Flags of a Neighbor Advertisement.
    pub fn neighbor_flags(&self) -> NdiscNeighborFlags {
        NdiscNeighborFlags(self.buffer.as_ref()[field::NEIGHBOR_FLAGS])
    }

    /// Target Address of a Neighbor Solicitation or Advertisement.
    pub fn target_addr(&self) -> Ipv6Address {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&self.buffer.as_ref()[field::TARGET_ADDRESS]);
        Ipv6Address(bytes)
    }

    /// Whether the checksum over the pseudo-header and the whole buffer is right.
    pub fn verify_checksum(&self, src_addr: &Ipv6Address, dst_addr: &Ipv6Address) -> bool {
        let data = self.buffer.as_ref();
        checksum::combine(&[
            checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::Icmpv6, data.len() as u32),
            checksum::data(data),
        ]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Icmpv6Packet<&'a T> {
    /// Everything after the 8-byte header: echo data, or the quoted packet of an error message.
    pub fn data(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// The options of a neighbor discovery message (empty for other types).
    pub fn ndisc_options(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let start = match self.msg_type() {
            Icmpv6Message::RouterSolicit => field::RS_OPTIONS.start,
            Icmpv6Message::RouterAdvert => field::RA_OPTIONS.start,
            Icmpv6Message::NeighborSolicit | Icmpv6Message::NeighborAdvert => field::NEIGHBOR_OPTIONS.start,
            _ => data.len(),
        };
        data.get(start..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    /// Sets the Type.
    pub fn set_msg_type(&mut self, value: Icmpv6Message) {
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

    /// Sets the four type-specific bytes after the checksum as one 32-bit value (echo identifier
    /// and sequence number, MTU, pointer, or the reserved field with its flags).
    pub fn set_word(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::MTU.start, value);
    }

    /// Sets the Target Address.
    pub fn set_target_addr(&mut self, addr: Ipv6Address) {
        self.buffer.as_mut()[field::TARGET_ADDRESS].copy_from_slice(addr.as_bytes());
    }

    /// Computes and writes the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src_addr: &Ipv6Address, dst_addr: &Ipv6Address) {
        self.set_checksum(0);
        let sum = message_sum(self.buffer.as_ref(), src_addr, dst_addr);
        self.set_checksum(!sum);
    }

    /// Everything after the 8-byte header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
}

fn message_sum(message: &[u8], src_addr: &Ipv6Address, dst_addr: &Ipv6Address) -> u16 {
    checksum::combine(&[
        checksum::pseudo_header_v6(src_addr, dst_addr, IpProtocol::Icmpv6, message.len() as u32),
        checksum::data(message),
    ])
}

/// The flags of a Router Advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NdiscRouterFlags(pub u8);

impl NdiscRouterFlags {
    /// M: addresses are available by DHCPv6.
    pub const MANAGED: u8 = 0x80;
    /// O: other configuration is available by DHCPv6.
    pub const OTHER: u8 = 0x40;

    /// Whether all of `flags` are set.
    pub const fn contains(&self, flags: u8) -> bool {
        self.0 & flags == flags
    }
}

/// The flags of a Neighbor Advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NdiscNeighborFlags(pub u8);

impl NdiscNeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: u8 = 0x80;
    /// S: sent in response to a Neighbor Solicitation.
    pub const SOLICITED: u8 = 0x40;
    /// O: override an existing cache entry.
    pub const OVERRIDE: u8 = 0x20;

    /// Whether all of `flags` are set.
    pub const fn contains(&self, flags: u8) -> bool {
        self.0 & flags == flags
    }

    /// R.
    pub const fn router(&self) -> bool {
        self.contains(Self::ROUTER)
    }

    /// S.
    pub const fn solicited(&self) -> bool {
        self.contains(Self::SOLICITED)
    }

    /// O.
    pub const fn override_(&self) -> bool {
        self.contains(Self::OVERRIDE)
    }
}

/// Option types of neighbor discovery (RFC 4861 section 4.6).
pub mod ndisc_option {
    /// Source Link-Layer Address.
    pub const SOURCE_LINK_LAYER_ADDR: u8 = 1;
    /// Target Link-Layer Address.
    pub const TARGET_LINK_LAYER_ADDR: u8 = 2;
    /// Prefix Information.
    pub const PREFIX_INFORMATION: u8 = 3;
    /// Redirected Header.
    pub const REDIRECTED_HEADER: u8 = 4;
    /// MTU.
    pub const MTU: u8 = 5;
}

/// One neighbor discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscOption<'a> {
    /// Source Link-Layer Address (an Ethernet address).
    SourceLinkLayerAddr(EthernetAddress),
    /// Target Link-Layer Address (an Ethernet address).
    TargetLinkLayerAddr(EthernetAddress),
    /// MTU.
    Mtu(u32),
    /// Any other option: its type and the bytes after the type and length.
    Unknown {
        /// Type.
        kind: u8,
        /// The option's bytes after the type and length octets.
        data: &'a [u8],
    },
}

impl<'a> NdiscOption<'a> {
    /// Reads the option at the start of `data`; returns it and the bytes after it. A length of
    /// zero, an option running past `data`, or a link-layer address or MTU option of the wrong
    /// length is `Err(Malformed)`.
    pub fn parse(data: &'a [u8]) -> Result<(NdiscOption<'a>, &'a [u8])> {
        if data.len() < 2 {
            return Err(Error::Malformed);
        }
        let len = usize::from(data[1]) * 8;
        if len == 0 || len > data.len() {
            return Err(Error::Malformed);
        }
        let (option, rest) = data.split_at(len);
        let body = &option[2..];
        let parsed = match option[0] {
            ndisc_option::SOURCE_LINK_LAYER_ADDR | ndisc_option::TARGET_LINK_LAYER_ADDR => {
                if len != 8 {
                    return Err(Error::Malformed);
                }
                let mut mac = [0u8; 6];
                mac.copy_from_slice(body);
                if option[0] == ndisc_option::SOURCE_LINK_LAYER_ADDR {
                    NdiscOption::SourceLinkLayerAddr(EthernetAddress(mac))
                } else {
                    NdiscOption::TargetLinkLayerAddr(EthernetAddress(mac))
                }
            }
            ndisc_option::MTU => {
                if len != 8 {
                    return Err(Error::Malformed);
                }
                NdiscOption::Mtu(be::u32_at(body, 2))
            }
            kind => NdiscOption::Unknown { kind, data: body },
        };
        Ok((parsed, rest))
    }

    /// Length of the option on the wire (a multiple of 8).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdiscOption::SourceLinkLayerAddr(_) | NdiscOption::TargetLinkLayerAddr(_) | NdiscOption::Mtu(_) => 8,
            NdiscOption::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option at the start of `buffer` (at least [`buffer_len`] bytes, an `Unknown`
    /// one padded with zeros) and returns the rest of the buffer.
    ///
    /// [`buffer_len`]: NdiscOption::buffer_len
    pub fn emit<'b>(&self, buffer: &'b mut [u8]) -> &'b mut [u8] {
        let len = self.buffer_len();
        let (option, rest) = buffer.split_at_mut(len);
        option.fill(0);
        option[1] = (len / 8) as u8;
        match *self {
            NdiscOption::SourceLinkLayerAddr(mac) => {
                option[0] = ndisc_option::SOURCE_LINK_LAYER_ADDR;
                option[2..8].copy_from_slice(&mac.0);
            }
            NdiscOption::TargetLinkLayerAddr(mac) => {
                option[0] = ndisc_option::TARGET_LINK_LAYER_ADDR;
                option[2..8].copy_from_slice(&mac.0);
            }
            NdiscOption::Mtu(mtu) => {
                option[0] = ndisc_option::MTU;
                be::set_u32(option, 4, mtu);
            }
            NdiscOption::Unknown { kind, data } => {
                option[0] = kind;
                option[2..2 + data.len()].copy_from_slice(data);
            }
        }
        rest
    }
}

/// The options of a neighbor discovery message, in order. Yields `Err` once and stops at the
/// first malformed option.
#[derive(Debug, Clone)]
pub struct NdiscOptions<'a> {
    rest: &'a [u8],
}

impl<'a> NdiscOptions<'a> {
    /// The options in `data` (e.g. [`Icmpv6Packet::ndisc_options`]).
    pub const fn new(data: &'a [u8]) -> Self {
        NdiscOptions { rest: data }
    }
}

impl<'a> Iterator for NdiscOptions<'a> {
    type Item = Result<NdiscOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match NdiscOption::parse(self.rest) {
            Ok((option, rest)) => {
                // Every option is at least 8 bytes, so this ends.
                self.rest = rest;
                Some(Ok(option))
            }
            Err(err) => {
                self.rest = &[];
                Some(Err(err))
            }
        }
    }
}

/// The meaning of a neighbor discovery message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdiscRepr<'a> {
    /// Router Solicitation.
    RouterSolicit {
        /// The Source Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
    /// Router Advertisement: the fixed fields and the raw options (all well formed; walk them
    /// with [`NdiscOptions`]).
    RouterAdvert {
        /// Cur Hop Limit.
        hop_limit: u8,
        /// M and O flags.
        flags: NdiscRouterFlags,
        /// Router Lifetime, seconds.
        router_lifetime: u16,
        /// Reachable Time, milliseconds.
        reachable_time: u32,
        /// Retrans Timer, milliseconds.
        retrans_time: u32,
        /// Options, emitted as they are.
        options: &'a [u8],
    },
    /// Neighbor Solicitation.
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Address,
        /// The Source Link-Layer Address option (absent in duplicate address detection).
        lladdr: Option<EthernetAddress>,
    },
    /// Neighbor Advertisement.
    NeighborAdvert {
        /// R, S and O.
        flags: NdiscNeighborFlags,
        /// The address whose link-layer address this advertises.
        target_addr: Ipv6Address,
        /// The Target Link-Layer Address option.
        lladdr: Option<EthernetAddress>,
    },
}

impl<'a> NdiscRepr<'a> {
    fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src_addr: &Ipv6Address,
        dst_addr: &Ipv6Address,
    ) -> Result<NdiscRepr<'a>> {
        // RFC 4861 section 6.1 and 7.1: code 0, every option of non-zero length.
        if packet.msg_code() != 0 {
            return Err(Error::Malformed);
        }
        let options = packet.ndisc_options();
        let mut source_lladdr = None;
        let mut target_lladdr = None;
        for option in NdiscOptions::new(options) {
            match option? {
                NdiscOption::SourceLinkLayerAddr(mac) => source_lladdr = Some(mac),
                NdiscOption::TargetLinkLayerAddr(mac) => target_lladdr = Some(mac),
                _ => {}
            }
        }
        match packet.msg_type() {
            Icmpv6Message::RouterSolicit => {
                if src_addr.is_unspecified() && source_lladdr.is_some() {
                    return Err(Error::Malformed);
                }
                Ok(NdiscRepr::RouterSolicit { lladdr: source_lladdr })
            }
            Icmpv6Message::RouterAdvert => Ok(NdiscRepr::RouterAdvert {
                hop_limit: packet.current_hop_limit(),
                flags: packet.router_flags(),
                router_lifetime: packet.router_lifetime(),
                reachable_time: packet.reachable_time(),
                retrans_time: packet.retrans_time(),
                options,
            }),
            Icmpv6Message::NeighborSolicit => {
                let target_addr = packet.target_addr();
                if target_addr.is_multicast() || (src_addr.is_unspecified() && source_lladdr.is_some()) {
                    return Err(Error::Malformed);
                }
                Ok(NdiscRepr::NeighborSolicit { target_addr, lladdr: source_lladdr })
            }
            Icmpv6Message::NeighborAdvert => {
                let target_addr = packet.target_addr();
                let flags = packet.neighbor_flags();
                if target_addr.is_multicast() || (dst_addr.is_multicast() && flags.solicited()) {
                    return Err(Error::Malformed);
                }
                Ok(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr: target_lladdr })
            }
            _ => Err(Error::Unsupported),
        }
    }

    fn buffer_len(&self) -> usize {
        let lladdr_len = |lladdr: &Option<EthernetAddress>| if lladdr.is_some() { 8 } else { 0 };
        match self {
            NdiscRepr::RouterSolicit { lladdr } => field::RS_OPTIONS.start + lladdr_len(lladdr),
            NdiscRepr::RouterAdvert { options, .. } => field::RA_OPTIONS.start + options.len(),
            NdiscRepr::NeighborSolicit { lladdr, .. } | NdiscRepr::NeighborAdvert { lladdr, .. } => {
                field::NEIGHBOR_OPTIONS.start + lladdr_len(lladdr)
            }
        }
    }

    fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) {
        packet.set_msg_code(0);
        let buffer = packet.buffer.as_mut();
        match *self {
            NdiscRepr::RouterSolicit { lladdr } => {
                buffer[field::TYPE] = Icmpv6Message::RouterSolicit.into();
                be::set_u32(buffer, field::MTU.start, 0);
                if let Some(mac) = lladdr {
                    NdiscOption::SourceLinkLayerAddr(mac).emit(&mut buffer[field::RS_OPTIONS]);
                }
            }
            NdiscRepr::RouterAdvert { hop_limit, flags, router_lifetime, reachable_time, retrans_time, options } => {
                buffer[field::TYPE] = Icmpv6Message::RouterAdvert.into();
                buffer[field::CUR_HOP_LIMIT] = hop_limit;
                buffer[field::ROUTER_FLAGS] = flags.0;
                be::set_u16(buffer, field::ROUTER_LIFETIME.start, router_lifetime);
                be::set_u32(buffer, field::REACHABLE_TIME.start, reachable_time);
                be::set_u32(buffer, field::RETRANS_TIMER.start, retrans_time);
                let start = field::RA_OPTIONS.start;
                buffer[start..start + options.len()].copy_from_slice(options);
            }
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => {
                buffer[field::TYPE] = Icmpv6Message::NeighborSolicit.into();
                be::set_u32(buffer, field::MTU.start, 0);
                buffer[field::TARGET_ADDRESS].copy_from_slice(target_addr.as_bytes());
                if let Some(mac) = lladdr {
                    let options = &mut buffer[field::NEIGHBOR_OPTIONS];
                    NdiscOption::SourceLinkLayerAddr(mac).emit(options);
                }
            }
            NdiscRepr::NeighborAdvert { flags, target_addr, lladdr } => {
                buffer[field::TYPE] = Icmpv6Message::NeighborAdvert.into();
                be::set_u32(buffer, field::MTU.start, u32::from(flags.0) << 24);
                buffer[field::TARGET_ADDRESS].copy_from_slice(target_addr.as_bytes());
                if let Some(mac) = lladdr {
                    let options = &mut buffer[field::NEIGHBOR_OPTIONS];
                    NdiscOption::TargetLinkLayerAddr(mac).emit(options);
                }
            }
        }
    }
}

/// The meaning of the ICMPv6 messages pronghorn handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Destination Unreachable.
    DstUnreachable {
        /// The code.
        reason: Icmpv6DstUnreachable,
        /// The quoted IPv6 header (its `payload_len` is the original's, which may be longer
        /// than `data`).
        header: Ipv6Repr,
        /// The quoted bytes after that header (extension headers, then the upper layer).
        data: &'a [u8],
    },
    /// Packet Too Big: path MTU discovery (RFC 8201).
    PktTooBig {
        /// The MTU of the next hop.
        mtu: u32,
        /// The quoted IPv6 header.
        header: Ipv6Repr,
        /// The quoted bytes after it.
        data: &'a [u8],
    },
    /// Time Exceeded.
    TimeExceeded {
        /// The code.
        reason: Icmpv6TimeExceeded,
        /// The quoted IPv6 header.
        header: Ipv6Repr,
        /// The quoted bytes after it.
        data: &'a [u8],
    },
    /// Parameter Problem.
    ParamProblem {
        /// The code.
        reason: Icmpv6ParamProblem,
        /// Offset of the problem in the quoted packet.
        pointer: u32,
        /// The quoted IPv6 header.
        header: Ipv6Repr,
        /// The quoted bytes after it.
        data: &'a [u8],
    },
    /// Echo Request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence Number.
        seq_no: u16,
        /// Data.
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
    /// A neighbor discovery message.
    Ndisc(NdiscRepr<'a>),
}

impl<'a> Icmpv6Repr<'a> {
    /// Reads a message sent from `src_addr` to `dst_addr`: checks the length, the checksum (if
    /// `verify_checksum`), and for neighbor discovery the code, the options and the address
    /// rules of RFC 4861 section 7.1 that do not need the IPv6 header (the stack checks Hop
    /// Limit 255). Other types (MLD, Redirect) are `Err(Unsupported)`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Icmpv6Packet<&'a T>,
        src_addr: &Ipv6Address,
        dst_addr: &Ipv6Address,
        verify_checksum: bool,
    ) -> Result<Icmpv6Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::Checksum);
        }
        match packet.msg_type() {
            Icmpv6Message::EchoRequest => Ok(Icmpv6Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            Icmpv6Message::EchoReply => Ok(Icmpv6Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data: packet.data(),
            }),
            Icmpv6Message::DstUnreachable => {
                let (header, data) = Ipv6Repr::parse_quoted(packet.data())?;
                let reason = Icmpv6DstUnreachable::from(packet.msg_code());
                Ok(Icmpv6Repr::DstUnreachable { reason, header, data })
            }
            Icmpv6Message::PktTooBig => {
                let (header, data) = Ipv6Repr::parse_quoted(packet.data())?;
                Ok(Icmpv6Repr::PktTooBig { mtu: packet.pkt_too_big_mtu(), header, data })
            }
            Icmpv6Message::TimeExceeded => {
                let (header, data) = Ipv6Repr::parse_quoted(packet.data())?;
                let reason = Icmpv6TimeExceeded::from(packet.msg_code());
                Ok(Icmpv6Repr::TimeExceeded { reason, header, data })
            }
            Icmpv6Message::ParamProblem => {
                let (header, data) = Ipv6Repr::parse_quoted(packet.data())?;
                Ok(Icmpv6Repr::ParamProblem {
                    reason: Icmpv6ParamProblem::from(packet.msg_code()),
                    pointer: packet.param_problem_ptr(),
                    header,
                    data,
                })
            }
            Icmpv6Message::RouterSolicit
            | Icmpv6Message::RouterAdvert
            | Icmpv6Message::NeighborSolicit
            | Icmpv6Message::NeighborAdvert => NdiscRepr::parse(packet, src_addr, dst_addr).map(Icmpv6Repr::Ndisc),
            _ => Err(Error::Unsupported),
        }
    }

    /// Length of the message this emits.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => HEADER_LEN + data.len(),
            Icmpv6Repr::DstUnreachable { data, .. }
            | Icmpv6Repr::PktTooBig { data, .. }
            | Icmpv6Repr::TimeExceeded { data, .. }
            | Icmpv6Repr::ParamProblem { data, .. } => HEADER_LEN + ipv6::HEADER_LEN + data.len(),
            Icmpv6Repr::Ndisc(ndisc) => ndisc.buffer_len(),
        }
    }

    /// Writes the message into `packet`, which must hold at least [`buffer_len`] bytes; the
    /// checksum (with the pseudo-header of `src_addr` and `dst_addr`) covers exactly that many.
    /// Without `fill_checksum` the field is left zero. An error message must fit the minimum
    /// MTU (RFC 4443 section 2.4): trimming the quote is the caller's job.
    ///
    /// [`buffer_len`]: Icmpv6Repr::buffer_len
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Icmpv6Packet<T>,
        src_addr: &Ipv6Address,
        dst_addr: &Ipv6Address,
        fill_checksum: bool,
    ) {
        packet.set_checksum(0);
        match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => {
                emit_simple(packet, Icmpv6Message::EchoRequest, 0, echo_word(ident, seq_no), data)
            }
            Icmpv6Repr::EchoReply { ident, seq_no, data } => {
                emit_simple(packet, Icmpv6Message::EchoReply, 0, echo_word(ident, seq_no), data)
            }
            Icmpv6Repr::DstUnreachable { reason, header, data } => {
                emit_error(packet, Icmpv6Message::DstUnreachable, reason.into(), 0, &header, data)
            }
            Icmpv6Repr::PktTooBig { mtu, header, data } => {
                emit_error(packet, Icmpv6Message::PktTooBig, 0, mtu, &header, data)
            }
            Icmpv6Repr::TimeExceeded { reason, header, data } => {
                emit_error(packet, Icmpv6Message::TimeExceeded, reason.into(), 0, &header, data)
            }
            Icmpv6Repr::ParamProblem { reason, pointer, header, data } => {
                emit_error(packet, Icmpv6Message::ParamProblem, reason.into(), pointer, &header, data)
            }
            Icmpv6Repr::Ndisc(ndisc) => ndisc.emit(packet),
        }
        if fill_checksum {
            let message = &packet.buffer.as_ref()[..self.buffer_len()];
            let sum = message_sum(message, src_addr, dst_addr);
            packet.set_checksum(!sum);
        }
    }
}

const fn echo_word(ident: u16, seq_no: u16) -> u32 {
    ((ident as u32) << 16) | seq_no as u32
}

fn emit_simple<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Icmpv6Packet<T>,
    msg_type: Icmpv6Message,
    code: u8,
    word: u32,
    data: &[u8],
) {
    packet.set_msg_type(msg_type);
    packet.set_msg_code(code);
    packet.set_word(word);
    packet.data_mut()[..data.len()].copy_from_slice(data);
}

fn emit_error<T: AsRef<[u8]> + AsMut<[u8]>>(
    packet: &mut Icmpv6Packet<T>,
    msg_type: Icmpv6Message,
    code: u8,
    word: u32,
    header: &Ipv6Repr,
    data: &[u8],
) {
    emit_simple(packet, msg_type, code, word, &[]);
    let quote = packet.data_mut();
    header.emit(&mut ipv6::Ipv6Packet::new_unchecked(&mut quote[..ipv6::HEADER_LEN]));
    quote[ipv6::HEADER_LEN..ipv6::HEADER_LEN + data.len()].copy_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::IPV6_NS;

    const IP: usize = crate::ethernet::HEADER_LEN + ipv6::HEADER_LEN;
    const MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);

    fn addr(s: &str) -> Ipv6Address {
        s.parse::<std::net::Ipv6Addr>().unwrap().octets().into()
    }

    fn ns_addrs() -> (Ipv6Address, Ipv6Address) {
        (addr("fe80::5054:ff:fe12:3456"), addr("ff02::1:ff00:2"))
    }

    #[test]
    fn parse_captured_neighbor_solicitation() {
        let (src, dst) = ns_addrs();
        let packet = Icmpv6Packet::new_checked(&IPV6_NS[IP..]).unwrap();
        assert_eq!(packet.msg_type(), Icmpv6Message::NeighborSolicit);
        assert_eq!(packet.checksum(), 0x7220);
        assert!(packet.verify_checksum(&src, &dst));
        assert_eq!(packet.target_addr(), addr("fe80::2"));
        assert_eq!(packet.ndisc_options(), &[1, 1, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
        let repr = Icmpv6Repr::parse(&packet, &src, &dst, true).unwrap();
        assert_eq!(
            repr,
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: addr("fe80::2"), lladdr: Some(MAC) })
        );
        // The solicitation went to the target's solicited-node group.
        assert_eq!(addr("fe80::2").solicited_node(), dst);
        assert_eq!(dst.multicast_ethernet(), EthernetAddress([0x33, 0x33, 0xff, 0, 0, 2]));
    }

    #[test]
    fn checksum_depends_on_addresses() {
        let (src, dst) = ns_addrs();
        let packet = Icmpv6Packet::new_checked(&IPV6_NS[IP..]).unwrap();
        let other = addr("fe80::5054:ff:fe12:3457");
        assert_eq!(Icmpv6Repr::parse(&packet, &other, &dst, true), Err(Error::Checksum));
        let mut bytes = IPV6_NS[IP..].to_vec();
        bytes[31] ^= 0x01; // flip a bit of the link-layer address
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Err(Error::Checksum));
        assert!(Icmpv6Repr::parse(&packet, &src, &dst, false).is_ok());
    }

    #[test]
    fn neighbor_advertisement_answer() {
        // What this host answers to the captured solicitation, if it owns fe80::2.
        let (peer, _) = ns_addrs();
        let me = addr("fe80::2");
        let mac = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
        let repr = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: NdiscNeighborFlags(NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE),
            target_addr: me,
            lladdr: Some(mac),
        });
        assert_eq!(repr.buffer_len(), 32);
        let mut bytes = [0xffu8; 32];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &me, &peer, true);
        assert_eq!(bytes[..2], [136, 0]);
        assert_eq!(bytes[4..8], [0x60, 0, 0, 0]);
        assert_eq!(bytes[8..24], *me.as_bytes());
        assert_eq!(bytes[24..32], [2, 1, 0x02, 0, 0, 0, 0, 2]);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.verify_checksum(&me, &peer));
        let flags = packet.neighbor_flags();
        assert!(flags.solicited() && flags.override_() && !flags.router());
        assert_eq!(Icmpv6Repr::parse(&packet, &me, &peer, true).unwrap(), repr);

        // A solicited advertisement to a multicast address is invalid.
        let all_nodes = Ipv6Address::LINK_LOCAL_ALL_NODES;
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &me, &all_nodes, true);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &me, &all_nodes, true), Err(Error::Malformed));
    }

    #[test]
    fn round_trip_every_variant() {
        let src = addr("2001:db8::1");
        let dst = addr("2001:db8::2");
        let quoted =
            Ipv6Repr { src_addr: dst, dst_addr: src, next_header: IpProtocol::Udp, payload_len: 1452, hop_limit: 3 };
        let ra_options = [1u8, 1, 2, 0, 0, 0, 0, 1, 5, 1, 0, 0, 0, 0, 0x05, 0xdc];
        let quote = [0xa0u8, 0x28, 0, 0x35, 0x05, 0xac, 0x12, 0x34];
        let reprs = [
            Icmpv6Repr::EchoRequest { ident: 7, seq_no: 9, data: b"ping" },
            Icmpv6Repr::EchoReply { ident: 7, seq_no: 9, data: b"" },
            Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::PortUnreachable, header: quoted, data: &quote },
            Icmpv6Repr::PktTooBig { mtu: 1280, header: quoted, data: &quote },
            Icmpv6Repr::TimeExceeded { reason: Icmpv6TimeExceeded::HopLimitExceeded, header: quoted, data: &quote },
            Icmpv6Repr::ParamProblem {
                reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
                pointer: 6,
                header: quoted,
                data: &quote,
            },
            Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { lladdr: Some(MAC) }),
            Icmpv6Repr::Ndisc(NdiscRepr::RouterSolicit { lladdr: None }),
            Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
                hop_limit: 64,
                flags: NdiscRouterFlags(NdiscRouterFlags::OTHER),
                router_lifetime: 1800,
                reachable_time: 30_000,
                retrans_time: 1000,
                options: &ra_options,
            }),
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: addr("2001:db8::2"), lladdr: None }),
            Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
                flags: NdiscNeighborFlags(NdiscNeighborFlags::ROUTER),
                target_addr: addr("2001:db8::1"),
                lladdr: None,
            }),
        ];
        for repr in reprs {
            let mut bytes = std::vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst, true);
            let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
            assert!(packet.verify_checksum(&src, &dst), "{repr:?}");
            assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true).unwrap(), repr);
        }
    }

    #[test]
    fn router_advertisement_fields_and_options() {
        let src = addr("fe80::1");
        let dst = Ipv6Address::LINK_LOCAL_ALL_NODES;
        let options = [1u8, 1, 2, 0, 0, 0, 0, 1, 5, 1, 0, 0, 0, 0, 0x05, 0xdc];
        let repr = Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit: 64,
            flags: NdiscRouterFlags(NdiscRouterFlags::MANAGED),
            router_lifetime: 1800,
            reachable_time: 0,
            retrans_time: 0,
            options: &options,
        });
        let mut bytes = [0u8; 32];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst, true);
        assert_eq!(bytes[4..8], [64, 0x80, 0x07, 0x08]);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.current_hop_limit(), 64);
        assert!(packet.router_flags().contains(NdiscRouterFlags::MANAGED));
        assert_eq!(packet.router_lifetime(), 1800);
        let parsed: std::vec::Vec<_> = NdiscOptions::new(packet.ndisc_options()).collect();
        assert_eq!(
            parsed,
            [Ok(NdiscOption::SourceLinkLayerAddr(EthernetAddress([2, 0, 0, 0, 0, 1]))), Ok(NdiscOption::Mtu(1500)),]
        );
    }

    #[test]
    fn malformed_ndisc() {
        let (src, dst) = ns_addrs();
        let reparse = |bytes: &mut [u8], src: &Ipv6Address| {
            Icmpv6Packet::new_unchecked(&mut *bytes).fill_checksum(src, &dst);
            let packet = Icmpv6Packet::new_checked(&*bytes)?;
            Icmpv6Repr::parse(&packet, src, &dst, true).map(|_| ())
        };
        let good = IPV6_NS[IP..].to_vec();
        assert_eq!(reparse(&mut good.clone(), &src), Ok(()));

        let mut bytes = good.clone();
        bytes[1] = 1; // code 1
        assert_eq!(reparse(&mut bytes, &src), Err(Error::Malformed));
        let mut bytes = good.clone();
        bytes[25] = 0; // option length 0
        assert_eq!(reparse(&mut bytes, &src), Err(Error::Malformed));
        let mut bytes = good.clone();
        bytes[25] = 2; // option longer than the message
        assert_eq!(reparse(&mut bytes, &src), Err(Error::Malformed));
        let mut bytes = good.clone();
        bytes.push(1); // a lone option type byte
        assert_eq!(reparse(&mut bytes, &src), Err(Error::Malformed));
        let mut bytes = good.clone();
        bytes[8] = 0xff; // multicast target
        assert_eq!(reparse(&mut bytes, &src), Err(Error::Malformed));
        // Duplicate address detection (unspecified source) must not carry a source lladdr...
        let mut bytes = good.clone();
        assert_eq!(reparse(&mut bytes, &Ipv6Address::UNSPECIFIED), Err(Error::Malformed));
        // ...and is fine without one.
        let mut bytes = good[..24].to_vec();
        assert_eq!(reparse(&mut bytes, &Ipv6Address::UNSPECIFIED), Ok(()));
        // Unknown options are skipped.
        let mut bytes = good.clone();
        bytes.extend_from_slice(&[200, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(reparse(&mut bytes, &src), Ok(()));
        // A solicitation too short for its target address.
        for len in 0..24 {
            let packet = Icmpv6Packet::new_unchecked(&good[..len]);
            assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, false), Err(Error::Truncated));
        }
    }

    #[test]
    fn option_parse_edge_cases() {
        assert_eq!(NdiscOption::parse(&[]), Err(Error::Malformed));
        assert_eq!(NdiscOption::parse(&[1]), Err(Error::Malformed));
        assert_eq!(NdiscOption::parse(&[1, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        // A link-layer address option of 16 bytes is not Ethernet.
        assert_eq!(NdiscOption::parse(&[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        let (option, rest) = NdiscOption::parse(&[3, 1, 9, 9, 9, 9, 9, 9, 0xaa]).unwrap();
        assert_eq!(option, NdiscOption::Unknown { kind: 3, data: &[9; 6] });
        assert_eq!(rest, &[0xaa]);
        let mut it = NdiscOptions::new(&[2, 1, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(it.next(), Some(Ok(NdiscOption::TargetLinkLayerAddr(EthernetAddress([1, 2, 3, 4, 5, 6])))));
        assert_eq!(it.next(), Some(Err(Error::Malformed)));
        assert_eq!(it.next(), None);
        // Emit pads an unknown option to 8 bytes.
        let option = NdiscOption::Unknown { kind: 200, data: &[1, 2, 3, 4, 5, 6, 7] };
        assert_eq!(option.buffer_len(), 16);
        let mut buf = [0xffu8; 17];
        let rest = option.emit(&mut buf);
        assert_eq!(rest.len(), 1);
        assert_eq!(buf[..16], [200, 2, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn quoted_packet_too_short() {
        let src = addr("2001:db8::1");
        let dst = addr("2001:db8::2");
        let mut bytes = [0u8; 8 + 39];
        bytes[0] = 2; // Packet Too Big
        bytes[8] = 0x60;
        let mut packet = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum(&src, &dst);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Err(Error::Truncated));
        // An MLD query is not handled.
        let mut bytes = [0u8; 24];
        bytes[0] = 130;
        let mut packet = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum(&src, &dst);
        let packet = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&packet, &src, &dst, true), Err(Error::Unsupported));
    }

    #[test]
    fn codes_round_trip() {
        for code in 0..=255u8 {
            assert_eq!(u8::from(Icmpv6Message::from(code)), code);
            assert_eq!(u8::from(Icmpv6DstUnreachable::from(code)), code);
            assert_eq!(u8::from(Icmpv6TimeExceeded::from(code)), code);
            assert_eq!(u8::from(Icmpv6ParamProblem::from(code)), code);
        }
        assert_eq!(Icmpv6DstUnreachable::from(4), Icmpv6DstUnreachable::PortUnreachable);
    }
}
