//! Routing for one interface: its subnets (IPv4 and IPv6) and an optional default gateway per
//! family. `next_hop(dst)` answers which neighbor a packet for `dst` goes to; [`TTL`] is how
//! far a packet we originate may travel.
//!
//! It owns that small configuration and nothing else. It must not resolve link-layer addresses
//! (that is [`crate::shard::neighbor`]) or hold per-destination state; a lookup is a check
//! against a handful of prefixes, with no allocation.

use std::fmt;

use wire::{IpAddress, Ipv4Address, Ipv6Address};

/// Why a route could not be configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteError {
    /// A prefix longer than 32 (IPv4) or 128 (IPv6) bits.
    BadPrefix,
    /// The gateway is not on any configured subnet (nor IPv6 link-local), so it cannot be reached.
    GatewayNotOnLink,
    /// The gateway is not a unicast address.
    GatewayNotUnicast,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RouteError::BadPrefix => "prefix length too long for the address family",
            RouteError::GatewayNotOnLink => "gateway is not on a subnet of the interface",
            RouteError::GatewayNotUnicast => "gateway is not a unicast address",
        })
    }
}

impl std::error::Error for RouteError {}

/// The IPv4 TTL and IPv6 hop limit of every packet the stack sends (neighbor discovery aside,
/// which RFC 4861 pins at 255): Linux's `net.ipv4.ip_default_ttl` and
/// `net.ipv6.conf.*.hop_limit`.
pub const TTL: u8 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Subnet<A> {
    net: A,
    mask: A,
}

/// The routes of one interface.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    v4: Vec<Subnet<u32>>,
    v6: Vec<Subnet<u128>>,
    gateway_v4: Option<Ipv4Address>,
    gateway_v6: Option<Ipv6Address>,
}

fn mask4(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix as u32)
    }
}

fn mask6(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix as u32)
    }
}

impl Routes {
    /// No subnets, no gateways: nothing is routable.
    pub fn new() -> Self {
        Routes::default()
    }

    /// Adds the subnet of an interface address, e.g. `10.0.0.5/24` (the host bits are ignored).
    pub fn add_subnet(&mut self, addr: IpAddress, prefix_len: u8) -> Result<(), RouteError> {
        match addr {
            IpAddress::V4(a) => {
                if prefix_len > 32 {
                    return Err(RouteError::BadPrefix);
                }
                let mask = mask4(prefix_len);
                let s = Subnet { net: u32::from_be_bytes(a.0) & mask, mask };
                if !self.v4.contains(&s) {
                    self.v4.push(s);
                    // Longest prefix first, so the first match is the most specific.
                    self.v4.sort_by_key(|s| std::cmp::Reverse(s.mask));
                }
            }
            IpAddress::V6(a) => {
                if prefix_len > 128 {
                    return Err(RouteError::BadPrefix);
                }
                let mask = mask6(prefix_len);
                let s = Subnet { net: u128::from_be_bytes(a.0) & mask, mask };
                if !self.v6.contains(&s) {
                    self.v6.push(s);
                    self.v6.sort_by_key(|s| std::cmp::Reverse(s.mask));
                }
            }
        }
        Ok(())
    }

    /// Sets the default gateway of the address's family. It must be on-link: add the subnets first.
    pub fn set_gateway(&mut self, gateway: IpAddress) -> Result<(), RouteError> {
        match gateway {
            IpAddress::V4(g) => {
                if !g.is_unicast() || g.is_loopback() || self.is_directed_broadcast(g) {
                    return Err(RouteError::GatewayNotUnicast);
                }
                if !self.on_link_v4(g) {
                    return Err(RouteError::GatewayNotOnLink);
                }
                self.gateway_v4 = Some(g);
            }
            IpAddress::V6(g) => {
                if g.0[0] == 0xff || g.0 == [0; 16] || u128::from_be_bytes(g.0) == 1 {
                    return Err(RouteError::GatewayNotUnicast);
                }
                if !self.on_link_v6(g) {
                    return Err(RouteError::GatewayNotOnLink);
                }
                self.gateway_v6 = Some(g);
            }
        }
        Ok(())
    }

    /// Removes the default gateway of a family.
    pub fn clear_gateway(&mut self, ipv6: bool) {
        if ipv6 {
            self.gateway_v6 = None;
        } else {
            self.gateway_v4 = None;
        }
    }

    /// The all-ones host address of a configured subnet (prefixes up to /30; /31 and /32 have
    /// no broadcast address, RFC 3021).
    pub fn is_directed_broadcast(&self, dst: Ipv4Address) -> bool {
        let d = u32::from_be_bytes(dst.0);
        self.v4.iter().any(|s| s.mask.count_zeros() >= 2 && d & s.mask == s.net && d | s.mask == u32::MAX)
    }

    fn on_link_v4(&self, dst: Ipv4Address) -> bool {
        let d = u32::from_be_bytes(dst.0);
        // Limited broadcast, multicast and 169.254/16 (RFC 3927) are always on the link.
        dst.is_broadcast() || dst.is_multicast() || dst.is_link_local() || self.v4.iter().any(|s| d & s.mask == s.net)
    }

    fn on_link_v6(&self, dst: Ipv6Address) -> bool {
        let d = u128::from_be_bytes(dst.0);
        // Multicast (ff00::/8) and link-local (fe80::/10) are always on the link.
        dst.0[0] == 0xff || (dst.0[0] == 0xfe && dst.0[1] & 0xc0 == 0x80) || self.v6.iter().any(|s| d & s.mask == s.net)
    }

    /// Whether `dst` is reached directly on this link.
    pub fn is_on_link(&self, dst: IpAddress) -> bool {
        match dst {
            IpAddress::V4(a) => !unroutable_v4(a) && self.on_link_v4(a),
            IpAddress::V6(a) => !unroutable_v6(a) && self.on_link_v6(a),
        }
    }

    /// The neighbor a packet for `dst` is sent to: `dst` itself when on-link, the family's
    /// gateway otherwise, `None` when there is no route (no gateway, or an address that is never
    /// routed: unspecified, loopback).
    pub fn next_hop(&self, dst: IpAddress) -> Option<IpAddress> {
        match dst {
            IpAddress::V4(a) => {
                if unroutable_v4(a) {
                    None
                } else if self.on_link_v4(a) {
                    Some(dst)
                } else {
                    self.gateway_v4.map(IpAddress::V4)
                }
            }
            IpAddress::V6(a) => {
                if unroutable_v6(a) {
                    None
                } else if self.on_link_v6(a) {
                    Some(dst)
                } else {
                    self.gateway_v6.map(IpAddress::V6)
                }
            }
        }
    }
}

fn unroutable_v4(a: Ipv4Address) -> bool {
    a.is_unspecified() || a.is_loopback() || a.0[0] == 0
}

fn unroutable_v6(a: Ipv6Address) -> bool {
    let v = u128::from_be_bytes(a.0);
    v == 0 || v == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddress {
        s.parse::<std::net::IpAddr>().unwrap().into()
    }

    fn routes() -> Routes {
        let mut r = Routes::new();
        r.add_subnet(ip("10.1.2.3"), 24).unwrap();
        r.add_subnet(ip("2001:db8:1::5"), 64).unwrap();
        r
    }

    #[test]
    fn on_link_goes_direct() {
        let r = routes();
        for d in [
            "10.1.2.1",
            "10.1.2.255",
            "255.255.255.255",
            "224.0.0.251",
            "169.254.9.9",
            "2001:db8:1::ffff",
            "fe80::1",
            "ff02::1:ff00:1",
        ] {
            assert_eq!(r.next_hop(ip(d)), Some(ip(d)), "{d}");
            assert!(r.is_on_link(ip(d)));
        }
    }

    #[test]
    fn off_link_needs_a_gateway() {
        let mut r = routes();
        assert_eq!(r.next_hop(ip("8.8.8.8")), None);
        assert_eq!(r.next_hop(ip("2001:db8:2::1")), None);
        r.set_gateway(ip("10.1.2.254")).unwrap();
        assert_eq!(r.next_hop(ip("8.8.8.8")), Some(ip("10.1.2.254")));
        assert_eq!(r.next_hop(ip("10.1.3.1")), Some(ip("10.1.2.254")));
        assert_eq!(r.next_hop(ip("2001:db8:2::1")), None, "no IPv6 gateway yet");
        // IPv6 gateways are usually link-local.
        r.set_gateway(ip("fe80::1")).unwrap();
        assert_eq!(r.next_hop(ip("2001:db8:2::1")), Some(ip("fe80::1")));
        assert!(!r.is_on_link(ip("2001:db8:2::1")));
        r.clear_gateway(false);
        assert_eq!(r.next_hop(ip("8.8.8.8")), None);
    }

    #[test]
    fn never_routed() {
        let mut r = routes();
        r.set_gateway(ip("10.1.2.254")).unwrap();
        r.set_gateway(ip("fe80::1")).unwrap();
        for d in ["0.0.0.0", "127.0.0.1", "0.1.2.3", "::", "::1"] {
            assert_eq!(r.next_hop(ip(d)), None, "{d}");
            assert!(!r.is_on_link(ip(d)));
        }
    }

    #[test]
    fn longest_prefix_and_multiple_subnets() {
        let mut r = routes();
        r.add_subnet(ip("172.16.0.1"), 12).unwrap();
        r.add_subnet(ip("10.0.0.0"), 8).unwrap();
        r.add_subnet(ip("10.0.0.0"), 8).unwrap();
        assert_eq!(r.v4.len(), 3);
        assert_eq!(r.v4[0].mask, mask4(24));
        assert_eq!(r.next_hop(ip("172.31.255.1")), Some(ip("172.31.255.1")));
        assert_eq!(r.next_hop(ip("10.200.0.1")), Some(ip("10.200.0.1")));
        r.add_subnet(ip("0.0.0.0"), 0).unwrap();
        assert_eq!(r.next_hop(ip("8.8.8.8")), Some(ip("8.8.8.8")), "a /0 puts everything on-link");
        r.add_subnet(ip("2001:db8::1"), 128).unwrap();
        assert_eq!(r.next_hop(ip("2001:db8::1")), Some(ip("2001:db8::1")));
    }

    #[test]
    fn bad_configuration() {
        let mut r = routes();
        assert_eq!(r.add_subnet(ip("10.0.0.1"), 33), Err(RouteError::BadPrefix));
        assert_eq!(r.add_subnet(ip("::1"), 129), Err(RouteError::BadPrefix));
        assert_eq!(r.set_gateway(ip("192.168.0.1")), Err(RouteError::GatewayNotOnLink));
        assert_eq!(r.set_gateway(ip("2001:db8:9::1")), Err(RouteError::GatewayNotOnLink));
        assert_eq!(r.set_gateway(ip("224.0.0.1")), Err(RouteError::GatewayNotUnicast));
        assert_eq!(r.set_gateway(ip("ff02::1")), Err(RouteError::GatewayNotUnicast));
        assert_eq!(r.set_gateway(ip("127.0.0.1")), Err(RouteError::GatewayNotUnicast));
        assert_eq!(r.set_gateway(ip("10.1.2.255")), Err(RouteError::GatewayNotUnicast), "directed broadcast");
        assert!(r.is_directed_broadcast(Ipv4Address::new(10, 1, 2, 255)));
        assert!(!r.is_directed_broadcast(Ipv4Address::new(10, 1, 2, 254)));
        r.add_subnet(ip("192.0.2.0"), 31).unwrap();
        assert!(!r.is_directed_broadcast(Ipv4Address::new(192, 0, 2, 1)), "a /31 has no broadcast");
        assert_eq!(r.set_gateway(ip("192.0.2.1")), Ok(()));
    }
}
