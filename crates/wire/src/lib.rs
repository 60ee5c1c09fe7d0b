//! Packet formats: the byte layout of every header pronghorn speaks, and nothing else.
//!
//! This crate owns the header formats (Ethernet, ARP, IPv4, IPv6 and its extension headers,
//! ICMPv4, ICMPv6 with neighbor discovery, UDP, TCP and its options), parsing them, emitting them,
//! and the Internet checksum. Each protocol has two layers:
//!
//! - a *view* (`Ipv4Packet<T>`) over any buffer `T: AsRef<[u8]>`: `new_checked` validates the
//!   lengths once, then every accessor is a bounds-safe read at a named offset (the offsets live in
//!   each module's `field` module, named after the RFC's fields). Setters exist only for
//!   `T: AsMut<[u8]>`.
//! - a *representation* (`Ipv4Repr`): the meaning of a header, checked by `parse` and written back
//!   by `emit`.
//!
//! What it must not do: keep state, allocate, perform I/O, or panic on any input bytes (the
//! parsers are fuzzed, see `fuzz/`). It knows nothing of connections, neighbors or routes; those
//! belong to the stack. There is no `unsafe` here.
//!
//! Checksums are verified on parse and filled on emit unless the caller passes `false`, which it
//! does when the NIC offloads them (then TCP and UDP emit the pseudo-header sum the NIC starts
//! from, and the IPv4 header checksum is left zero).

#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![warn(missing_docs)]

use core::fmt;

pub mod arp;
pub mod ethernet;
#[cfg(any(feature = "std", test))]
#[doc(hidden)]
pub mod fuzzing;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;

#[cfg(test)]
mod tests;

pub use arp::{ArpHardware, ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4DstUnreachable, Icmpv4Message, Icmpv4Packet, Icmpv4Repr, Icmpv4TimeExceeded};
pub use icmpv6::{
    Icmpv6DstUnreachable, Icmpv6Message, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr, Icmpv6TimeExceeded,
    NdiscNeighborFlags, NdiscOption, NdiscOptions, NdiscRepr, NdiscRouterFlags,
};
pub use ip::{checksum, IpAddress, IpProtocol};
pub use ipv4::{Ipv4Address, Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Address, Ipv6Packet, Ipv6Repr, Ipv6UpperLayer};
pub use tcp::{TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};

/// Why a packet could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the header (or a length field inside it) says it should.
    Truncated,
    /// A field holds a value the format forbids (a header length below the minimum, a malformed
    /// option, a wrong version).
    Malformed,
    /// A checksum does not match the data.
    Checksum,
    /// Well formed, but outside what pronghorn handles (a fragment, an ARP for another hardware
    /// type, an ICMP message type it does not interpret).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum mismatch",
            Error::Unsupported => "unsupported packet",
        })
    }
}

#[cfg(any(feature = "std", test))]
impl std::error::Error for Error {}

/// The result of a parse.
pub type Result<T> = core::result::Result<T, Error>;

/// Field offsets are byte ranges (`Field`) or "from here to the end" (`Rest`).
mod field {
    pub type Field = core::ops::Range<usize>;
    pub type Rest = core::ops::RangeFrom<usize>;
}

/// Big-endian reads and writes at fixed offsets. Callers have checked the lengths; an out-of-range
/// offset is a bug in this crate (or a view made with `new_unchecked` over a short buffer).
mod be {
    #[inline]
    pub fn u16_at(data: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([data[at], data[at + 1]])
    }

    #[inline]
    pub fn u32_at(data: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
    }

    #[inline]
    pub fn set_u16(data: &mut [u8], at: usize, value: u16) {
        data[at..at + 2].copy_from_slice(&value.to_be_bytes());
    }

    #[inline]
    pub fn set_u32(data: &mut [u8], at: usize, value: u32) {
        data[at..at + 4].copy_from_slice(&value.to_be_bytes());
    }
}
