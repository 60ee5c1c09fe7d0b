//! What IPv4 and IPv6 share: protocol numbers, an address of either version, and the Internet
//! checksum.

use core::fmt;

use crate::ipv4::Ipv4Address;
use crate::ipv6::Ipv6Address;

pub mod checksum;

/// An IPv4 Protocol or IPv6 Next Header value (the IANA "Assigned Internet Protocol Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpProtocol {
    /// 0: IPv6 Hop-by-Hop Options.
    HopByHop,
    /// 1: ICMP.
    Icmp,
    /// 6: TCP.
    Tcp,
    /// 17: UDP.
    Udp,
    /// 43: Routing Header for IPv6.
    Ipv6Route,
    /// 44: Fragment Header for IPv6.
    Ipv6Frag,
    /// 58: ICMP for IPv6.
    Icmpv6,
    /// 59: No Next Header for IPv6.
    Ipv6NoNxt,
    /// 60: Destination Options for IPv6.
    Ipv6Opts,
    /// Any other number.
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        match value {
            0 => IpProtocol::HopByHop,
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            43 => IpProtocol::Ipv6Route,
            44 => IpProtocol::Ipv6Frag,
            58 => IpProtocol::Icmpv6,
            59 => IpProtocol::Ipv6NoNxt,
            60 => IpProtocol::Ipv6Opts,
            other => IpProtocol::Unknown(other),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        match value {
            IpProtocol::HopByHop => 0,
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Ipv6Route => 43,
            IpProtocol::Ipv6Frag => 44,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Ipv6NoNxt => 59,
            IpProtocol::Ipv6Opts => 60,
            IpProtocol::Unknown(other) => other,
        }
    }
}

/// An address of either IP version: what the TCP and UDP checksums need from the layer below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpAddress {
    /// IPv4.
    V4(Ipv4Address),
    /// IPv6.
    V6(Ipv6Address),
}

impl IpAddress {
    /// The address bytes in network order (4 or 16 of them).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IpAddress::V4(addr) => addr.as_bytes(),
            IpAddress::V6(addr) => addr.as_bytes(),
        }
    }
}

impl From<Ipv4Address> for IpAddress {
    fn from(addr: Ipv4Address) -> Self {
        IpAddress::V4(addr)
    }
}

impl From<Ipv6Address> for IpAddress {
    fn from(addr: Ipv6Address) -> Self {
        IpAddress::V6(addr)
    }
}

#[cfg(feature = "std")]
impl From<std::net::IpAddr> for IpAddress {
    fn from(addr: std::net::IpAddr) -> Self {
        match addr {
            std::net::IpAddr::V4(a) => IpAddress::V4(a.into()),
            std::net::IpAddr::V6(a) => IpAddress::V6(a.into()),
        }
    }
}

#[cfg(feature = "std")]
impl From<IpAddress> for std::net::IpAddr {
    fn from(addr: IpAddress) -> Self {
        match addr {
            IpAddress::V4(a) => std::net::IpAddr::V4(a.into()),
            IpAddress::V6(a) => std::net::IpAddr::V6(a.into()),
        }
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddress::V4(addr) => addr.fmt(f),
            IpAddress::V6(addr) => addr.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_numbers() {
        let known = [
            (0u8, IpProtocol::HopByHop),
            (1, IpProtocol::Icmp),
            (6, IpProtocol::Tcp),
            (17, IpProtocol::Udp),
            (43, IpProtocol::Ipv6Route),
            (44, IpProtocol::Ipv6Frag),
            (58, IpProtocol::Icmpv6),
            (59, IpProtocol::Ipv6NoNxt),
            (60, IpProtocol::Ipv6Opts),
        ];
        for (number, protocol) in known {
            assert_eq!(IpProtocol::from(number), protocol);
            assert_eq!(u8::from(protocol), number);
        }
        for number in 0..=255u8 {
            assert_eq!(u8::from(IpProtocol::from(number)), number);
        }
        assert_eq!(IpProtocol::from(50), IpProtocol::Unknown(50));
    }

    #[cfg(feature = "std")]
    #[test]
    fn address_display_and_std() {
        let v4 = IpAddress::V4(Ipv4Address([192, 0, 2, 1]));
        assert_eq!(v4.to_string(), "192.0.2.1");
        assert_eq!(v4.as_bytes(), &[192, 0, 2, 1]);
        let std_addr: std::net::IpAddr = v4.into();
        assert_eq!(std_addr, "192.0.2.1".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(IpAddress::from(std_addr), v4);
        let v6: IpAddress = "2001:db8::1".parse::<std::net::IpAddr>().unwrap().into();
        assert_eq!(v6.to_string(), "2001:db8::1");
        assert_eq!(v6.as_bytes().len(), 16);
    }
}
