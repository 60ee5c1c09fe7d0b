//! An interface shared with the kernel (`nic.share`): what the runtime does beyond the dedicated
//! case (docs/design-notes.md, "pronghorn's own XDP program").
//!
//! pronghorn's XDP program hands pronghorn only TCP and UDP to the ports its sockets hold and
//! to the ephemeral range [`EPHEMERAL`]; everything else is the kernel's. This module owns:
//! - the ports: the program's `ph_ports` map, kept as accelerated sockets bind and close
//!   ([`hold`], [`release`]: counted per port, several sockets may share one);
//! - the range: the kernel must not pick its own ephemeral ports there ([`check_port_range`]);
//! - the next hops: ARP and NDP answers go to the kernel, so the addresses a shard is resolving
//!   are read from the kernel's neighbour table (netlink RTM_GETNEIGH) and heard by the shard
//!   ([`resolve_next_hops`]); one the kernel does not know yet is made known by sending it an
//!   empty UDP datagram to the discard port (9) through the kernel, which resolves it first;
//! - the gateway, when the config names none: the kernel's default route's (netlink
//!   RTM_GETROUTE, [`kernel_gateways`]).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::RangeInclusive;
use std::sync::Mutex;

use nic::xdp::{Transport, XdpMaps};
use nic::{MacAddr, Nic};
use stack::shard::Shard;

use crate::real;

/// The local ports of pronghorn's outgoing connections on a shared interface: above Linux's
/// default `ip_local_port_range` (32768-60999).
pub const EPHEMERAL: RangeInclusive<u16> = 61000..=65535;

/// How often the kernel's neighbour table is read while a shard waits for a next hop.
const REFRESH_NS: u64 = 5_000_000;
/// How often the kernel is asked again to resolve the same next hop.
const ASK_AGAIN_NS: u64 = 1_000_000_000;

struct State {
    maps: Option<XdpMaps>,
    held: BTreeMap<(Transport, u16), u32>,
    ifindex: u32,
    last_refresh_ns: u64,
    asked: BTreeMap<IpAddr, u64>,
}

static STATE: Mutex<State> =
    Mutex::new(State { maps: None, held: BTreeMap::new(), ifindex: 0, last_refresh_ns: 0, asked: BTreeMap::new() });

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The port opened on interface `iface` with the program's `maps`: ports held from now on are
/// written there.
pub(crate) fn start(maps: XdpMaps, iface: &str) {
    let name = std::ffi::CString::new(iface).unwrap_or_default();
    let mut s = state();
    // SAFETY: a NUL-terminated name.
    s.ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    for &(t, port) in s.held.keys() {
        let _ = maps.own_port(t, port);
    }
    s.maps = Some(maps);
}

/// An accelerated socket holds local `port`: frames to it are pronghorn's.
pub(crate) fn hold(t: Transport, port: u16) {
    let mut s = state();
    let n = s.held.entry((t, port)).or_insert(0);
    *n += 1;
    if *n == 1 {
        if let Some(m) = &s.maps {
            let _ = m.own_port(t, port);
        }
    }
}

/// A socket that held local `port` is gone: with the last, frames to it are the kernel's again.
pub(crate) fn release(t: Transport, port: u16) {
    let mut s = state();
    let Some(n) = s.held.get_mut(&(t, port)) else { return };
    *n -= 1;
    if *n == 0 {
        s.held.remove(&(t, port));
        if let Some(m) = &s.maps {
            let _ = m.disown_port(t, port);
        }
    }
}

/// The kernel's `ip_local_port_range` must leave [`EPHEMERAL`] out, or `ip_local_reserved_ports`
/// must hold it: else the kernel's connections would take ports whose replies the program hands
/// to pronghorn.
pub(crate) fn check_port_range() -> Result<(), String> {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).unwrap_or_default();
    match ephemeral_range_conflict(&read("ip_local_port_range"), &read("ip_local_reserved_ports")) {
        None => Ok(()),
        Some(e) => Err(format!("nic.share: {e}")),
    }
}

/// Why the kernel's `ip_local_port_range` (`range`, the sysctl's text) and
/// `ip_local_reserved_ports` (`reserved`) would let the kernel take pronghorn's ephemeral ports
/// (61000-65535), with the sysctl that changes it; None when they do not (or `range` does not
/// parse). Also `pronghorn doctor`'s check.
pub fn ephemeral_range_conflict(range: &str, reserved: &str) -> Option<String> {
    let mut bounds = range.split_whitespace().filter_map(|p| p.parse::<u16>().ok());
    let (lo, hi) = (bounds.next()?, bounds.next()?);
    if hi < *EPHEMERAL.start() || lo > *EPHEMERAL.end() {
        return None;
    }
    let covers = |r: &str| {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        matches!((a.trim().parse::<u16>(), b.trim().parse::<u16>()), (Ok(a), Ok(b)) if a <= *EPHEMERAL.start() && b >= *EPHEMERAL.end())
    };
    if reserved.trim().split(',').any(covers) {
        return None;
    }
    Some(format!(
        "the kernel's net.ipv4.ip_local_port_range ({lo}-{hi}) overlaps pronghorn's ephemeral ports {}-{}: \
         lower it (sysctl -w net.ipv4.ip_local_port_range=\"32768 60999\") or reserve them \
         (sysctl -w net.ipv4.ip_local_reserved_ports={}-{})",
        EPHEMERAL.start(),
        EPHEMERAL.end(),
        EPHEMERAL.start(),
        EPHEMERAL.end()
    ))
}

/// After a stack pass of `shard`: the next hops it waits for, from the kernel's neighbour
/// table (at most every [`REFRESH_NS`]).
pub(crate) fn resolve_next_hops<N: Nic>(shard: &mut Shard<N>, now: u64) {
    let waiting = shard.unresolved_neighbors();
    if waiting.is_empty() {
        return;
    }
    let mut s = state();
    if now.saturating_sub(s.last_refresh_ns) < REFRESH_NS {
        return;
    }
    s.last_refresh_ns = now;
    let known = kernel_neighbours(s.ifindex);
    for ip in waiting {
        match known.iter().find(|(k, _)| *k == ip) {
            Some(&(_, mac)) => {
                s.asked.remove(&ip);
                shard.hear(ip, mac, now);
            }
            None => {
                let last = s.asked.get(&ip).copied();
                if last.map_or(true, |t| now.saturating_sub(t) >= ASK_AGAIN_NS) {
                    s.asked.insert(ip, now);
                    ask_kernel_to_resolve(ip);
                }
            }
        }
    }
}

/// An empty UDP datagram to `ip`'s discard port through the kernel: it resolves `ip` first.
fn ask_kernel_to_resolve(ip: IpAddr) {
    let to = socket2_addr(SocketAddr::new(ip, 9));
    let domain = if ip.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket calls on an fd this function owns; `to` is a valid sockaddr.
    unsafe {
        let fd = real::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return;
        }
        real::sendto(fd, std::ptr::null(), 0, 0, (&to.0 as *const libc::sockaddr_storage).cast(), to.1);
        real::close(fd);
    }
}

pub(crate) fn socket2_addr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage; the family's struct fits in it.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for a sockaddr_in (its purpose),
            // and `ss` is our local.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: 0,
            };
            // SAFETY: as above, for a sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// NUD states whose address can be used: reachable, stale, delay, probe, permanent, noarp.
const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x80 | 0x40;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

/// The kernel's neighbours on interface `ifindex` with a usable address (RTM_GETNEIGH dump).
fn kernel_neighbours(ifindex: u32) -> Vec<(IpAddr, MacAddr)> {
    let dump = netlink_dump(libc::RTM_GETNEIGH, libc::AF_UNSPEC as u8);
    messages(&dump, libc::RTM_NEWNEIGH).filter_map(|body| neighbour(body, ifindex)).collect()
}

/// The answer of the kernel to a NETLINK_ROUTE dump request of `request` for `family` (its
/// messages as they came, up to NLMSG_DONE); empty when the kernel cannot be asked. The
/// request's family header (ndmsg, rtmsg) is 12 bytes, the family first.
fn netlink_dump(request: u16, family: u8) -> Vec<u8> {
    // SAFETY: plain socket calls on an fd this function owns.
    let fd = unsafe { real::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Vec::new();
    }
    let mut req = [0u8; 28];
    req[0..4].copy_from_slice(&28u32.to_ne_bytes());
    req[4..6].copy_from_slice(&request.to_ne_bytes());
    req[6..8].copy_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    req[16] = family;
    let mut dump = Vec::new();
    // SAFETY: `req` and `buf` are valid for their lengths.
    unsafe {
        if real::send(fd, req.as_ptr().cast(), req.len(), 0) == req.len() as isize {
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                let n = real::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n <= 0 {
                    break;
                }
                let chunk = &buf[..n as usize];
                dump.extend_from_slice(chunk);
                if messages_end(chunk) {
                    break;
                }
            }
        }
        real::close(fd);
    }
    dump
}

/// Whether netlink messages `chunk` end the dump (NLMSG_DONE or NLMSG_ERROR), or cannot be read on.
fn messages_end(chunk: &[u8]) -> bool {
    split(chunk).any(|(ty, _)| ty == libc::NLMSG_DONE as u16 || ty == libc::NLMSG_ERROR as u16)
}

/// The bodies of the messages of type `ty` in a dump, up to its end.
fn messages(dump: &[u8], ty: u16) -> impl Iterator<Item = &[u8]> {
    split(dump)
        .take_while(|&(t, _)| t != libc::NLMSG_DONE as u16 && t != libc::NLMSG_ERROR as u16)
        .filter(move |&(t, _)| t == ty)
        .map(|(_, body)| body)
}

/// Netlink messages as (type, body); a header that does not fit ends them as an NLMSG_ERROR.
fn split(mut dump: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if dump.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes(dump[0..4].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(dump[4..6].try_into().unwrap());
        if len < 16 || len > dump.len() {
            dump = &[];
            return Some((libc::NLMSG_ERROR as u16, &[][..]));
        }
        let body = &dump[16..len];
        dump = dump.get((len + 3) & !3..).unwrap_or(&[]);
        Some((ty, body))
    })
}

/// The attributes (type, value) that follow a message body's `header` bytes.
fn attributes(body: &[u8], header: usize) -> impl Iterator<Item = (u16, &[u8])> {
    let mut attrs = body.get(header..).unwrap_or(&[]);
    std::iter::from_fn(move || {
        if attrs.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes(attrs[0..2].try_into().unwrap()) as usize;
        let ty = u16::from_ne_bytes(attrs[2..4].try_into().unwrap());
        let value = attrs.get(4..len)?;
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
        Some((ty, value))
    })
}

/// One RTM_NEWNEIGH message's body (ndmsg and its attributes), if it is a usable neighbour on
/// `ifindex`.
fn neighbour(body: &[u8], ifindex: u32) -> Option<(IpAddr, MacAddr)> {
    let ndm = body.get(..12)?;
    let index = i32::from_ne_bytes(ndm[4..8].try_into().ok()?);
    let state = u16::from_ne_bytes(ndm[8..10].try_into().ok()?);
    if index as u32 != ifindex || state & NUD_USABLE == 0 {
        return None;
    }
    let (mut ip, mut mac) = (None, None);
    for (ty, value) in attributes(body, 12) {
        match (ty, value.len()) {
            (NDA_DST, 4) => ip = Some(IpAddr::from(<[u8; 4]>::try_from(value).ok()?)),
            (NDA_DST, 16) => ip = Some(IpAddr::from(<[u8; 16]>::try_from(value).ok()?)),
            (NDA_LLADDR, 6) => mac = Some(MacAddr(value.try_into().ok()?)),
            _ => {}
        }
    }
    Some((ip?, mac?))
}

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_TABLE: u16 = 15;

/// The kernel's default gateways on interface `iface` (RTM_GETROUTE, main table, the lowest
/// metric of each family), for a shared interface whose config names none: IPv4 only inside
/// `subnet4` (the stack's gateway is on its subnet), IPv6 inside `subnet6` or link-local.
pub(crate) fn kernel_gateways(
    iface: &str,
    subnet4: Option<(std::net::Ipv4Addr, u8)>,
    subnet6: Option<(std::net::Ipv6Addr, u8)>,
) -> (Option<std::net::Ipv4Addr>, Option<std::net::Ipv6Addr>) {
    let name = std::ffi::CString::new(iface).unwrap_or_default();
    // SAFETY: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    let gateway = |family: libc::c_int| default_gateway(&netlink_dump(libc::RTM_GETROUTE, family as u8), ifindex);
    let v4 = subnet4.and_then(|(net, len)| match gateway(libc::AF_INET)? {
        IpAddr::V4(g) if len == 0 || (u32::from(g) ^ u32::from(net)) >> (32 - u32::from(len)) == 0 => Some(g),
        _ => None,
    });
    let v6 = subnet6.and_then(|(net, len)| match gateway(libc::AF_INET6)? {
        IpAddr::V6(g) if g.segments()[0] & 0xffc0 == 0xfe80 => Some(g),
        IpAddr::V6(g) if len == 0 || (u128::from(g) ^ u128::from(net)) >> (128 - u32::from(len)) == 0 => Some(g),
        _ => None,
    });
    (v4, v6)
}

/// The gateway of the default route on `ifindex` with the lowest metric in a RTM_GETROUTE dump:
/// a unicast route of the main table to a zero-length destination with a gateway.
fn default_gateway(dump: &[u8], ifindex: u32) -> Option<IpAddr> {
    messages(dump, libc::RTM_NEWROUTE)
        .filter_map(|body| {
            let rtm = body.get(..12)?;
            let (dst_len, mut table, kind) = (rtm[1], u32::from(rtm[4]), rtm[7]);
            if dst_len != 0 || kind != libc::RTN_UNICAST {
                return None;
            }
            let (mut oif, mut gateway, mut metric) = (None, None, 0u32);
            for (ty, value) in attributes(body, 12) {
                match (ty, value.len()) {
                    (RTA_DST, _) => return None,
                    (RTA_OIF, 4) => oif = Some(u32::from_ne_bytes(value.try_into().ok()?)),
                    (RTA_GATEWAY, 4) => gateway = Some(IpAddr::from(<[u8; 4]>::try_from(value).ok()?)),
                    (RTA_GATEWAY, 16) => gateway = Some(IpAddr::from(<[u8; 16]>::try_from(value).ok()?)),
                    (RTA_PRIORITY, 4) => metric = u32::from_ne_bytes(value.try_into().ok()?),
                    (RTA_TABLE, 4) => table = u32::from_ne_bytes(value.try_into().ok()?),
                    _ => {}
                }
            }
            (oif == Some(ifindex) && table == u32::from(libc::RT_TABLE_MAIN)).then_some((metric, gateway?))
        })
        .min_by_key(|&(metric, _)| metric)
        .map(|(_, gateway)| gateway)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWNEIGH body: ndmsg, NDA_DST, NDA_LLADDR.
    fn body(ifindex: i32, state: u16, dst: &[u8], mac: &[u8]) -> Vec<u8> {
        let mut b = vec![if dst.len() == 4 { 2 } else { 10 }, 0, 0, 0];
        b.extend(ifindex.to_ne_bytes());
        b.extend(state.to_ne_bytes());
        b.extend([0, 1]);
        for (ty, v) in [(NDA_DST, dst), (NDA_LLADDR, mac)] {
            b.extend(((4 + v.len()) as u16).to_ne_bytes());
            b.extend(ty.to_ne_bytes());
            b.extend(v);
            b.resize((b.len() + 3) & !3, 0);
        }
        b
    }

    #[test]
    fn a_usable_neighbour_on_our_interface_is_read() {
        let mac = [2, 0, 0, 0, 0, 9];
        let v4 = body(7, 0x04, &[10, 99, 0, 2], &mac);
        assert_eq!(neighbour(&v4, 7), Some(("10.99.0.2".parse().unwrap(), MacAddr(mac))));
        let v6 = body(7, 0x02, &"fd99::2".parse::<std::net::Ipv6Addr>().unwrap().octets(), &mac);
        assert_eq!(neighbour(&v6, 7), Some(("fd99::2".parse().unwrap(), MacAddr(mac))));
        assert_eq!(neighbour(&v4, 8), None, "another interface");
        assert_eq!(neighbour(&body(7, 0x20, &[10, 99, 0, 2], &mac), 7), None, "failed");
        assert_eq!(neighbour(&v4[..20], 7), None, "cut short");
    }

    #[test]
    fn the_kernels_port_range_must_leave_ours_out_or_reserve_it() {
        assert_eq!(ephemeral_range_conflict("32768\t60999\n", "\n"), None, "Linux's default");
        let overlap = ephemeral_range_conflict("10000\t65000\n", "\n").expect("10000-65000 overlaps");
        assert!(overlap.contains("(10000-65000) overlaps pronghorn's ephemeral ports 61000-65535"), "{overlap}");
        assert_eq!(ephemeral_range_conflict("10000\t65000\n", "8080,61000-65535\n"), None, "reserved");
        assert!(ephemeral_range_conflict("10000 65000", "61000-65000").is_some(), "reserved in part");
        assert_eq!(ephemeral_range_conflict("", ""), None, "no such sysctl");
    }

    /// What Linux 6.18 answered to RTM_GETROUTE dumps in a namespace with eth-like veths
    /// pk-x0 (ifindex 3: 192.0.2.10/24 with default routes via 192.0.2.1 metric 100 and
    /// 192.0.2.254 metric 200, 203.0.113.0/24 via 192.0.2.5; 2001:db8::10/64 with a default
    /// route via fe80::1) and pk-x1 (ifindex 2: 198.51.100.10/24, default via 198.51.100.1
    /// metric 50), captured with a raw NETLINK_ROUTE socket.
    fn captured(hex: &str) -> Vec<u8> {
        let hex = hex.trim();
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn the_default_gateway_is_the_lowest_metric_default_route_of_the_interface() {
        let v4 = captured(include_str!("../testdata/rtm_getroute_v4.hex"));
        let v6 = captured(include_str!("../testdata/rtm_getroute_v6.hex"));
        assert_eq!(default_gateway(&v4, 3), Some("192.0.2.1".parse().unwrap()), "not metric 200's, nor pk-x1's 50");
        assert_eq!(default_gateway(&v4, 2), Some("198.51.100.1".parse().unwrap()));
        assert_eq!(default_gateway(&v6, 3), Some("fe80::1".parse().unwrap()));
        assert_eq!(default_gateway(&v6, 2), None, "pk-x1 has no IPv6 default route");
        assert_eq!(default_gateway(&v4, 9), None, "no such interface");
        for cut in 0..v4.len() {
            default_gateway(&v4[..cut], 3); // a dump cut anywhere is read as far as it goes
        }
    }

    #[test]
    fn ports_are_counted_per_holder() {
        hold(Transport::Tcp, 6379);
        hold(Transport::Tcp, 6379);
        release(Transport::Tcp, 6379);
        assert_eq!(state().held.get(&(Transport::Tcp, 6379)), Some(&1));
        release(Transport::Tcp, 6379);
        release(Transport::Tcp, 6379);
        assert!(!state().held.contains_key(&(Transport::Tcp, 6379)));
    }
}
