//! Addresses between the standard library's types (the socket API's) and the wire's (the
//! stack's): an IPv4-mapped IPv6 address is the IPv4 address, as a dual-stack socket sees it.

use std::net::IpAddr;

use wire::IpAddress;

/// The stack's address of `a` (an IPv4-mapped IPv6 address as IPv4).
pub(super) fn to_ip(a: IpAddr) -> IpAddress {
    match a {
        IpAddr::V4(v4) => IpAddress::V4(v4.into()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddress::V4(v4.into()),
            None => IpAddress::V6(v6.into()),
        },
    }
}

/// The socket API's address of `a`.
pub(super) fn to_std(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::V4(v4) => IpAddr::V4(v4.into()),
        IpAddress::V6(v6) => IpAddr::V6(v6.into()),
    }
}

/// The unspecified address (0.0.0.0 or ::) of either family.
pub(super) fn is_unspecified(a: IpAddress) -> bool {
    match a {
        IpAddress::V4(v4) => v4.is_unspecified(),
        IpAddress::V6(v6) => v6.is_unspecified(),
    }
}
