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
//!   empty UDP datagram to the discard port (9) through the kernel, which resolves it first.

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
    let range = read("ip_local_port_range");
    let mut bounds = range.split_whitespace().filter_map(|p| p.parse::<u16>().ok());
    let (Some(lo), Some(hi)) = (bounds.next(), bounds.next()) else { return Ok(()) };
    if hi < *EPHEMERAL.start() || lo > *EPHEMERAL.end() {
        return Ok(());
    }
    let reserved = read("ip_local_reserved_ports");
    let covers = |r: &str| {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        matches!((a.trim().parse::<u16>(), b.trim().parse::<u16>()), (Ok(a), Ok(b)) if a <= *EPHEMERAL.start() && b >= *EPHEMERAL.end())
    };
    if reserved.trim().split(',').any(covers) {
        return Ok(());
    }
    Err(format!(
        "nic.share: the kernel's net.ipv4.ip_local_port_range ({lo}-{hi}) overlaps pronghorn's ephemeral ports {}-{}: \
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

fn socket2_addr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
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
    // SAFETY: plain socket calls on an fd this function owns.
    let fd = unsafe { real::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Vec::new();
    }
    // nlmsghdr (16 bytes) + ndmsg (12 bytes): a dump of every family's neighbours.
    let mut req = [0u8; 28];
    req[0..4].copy_from_slice(&28u32.to_ne_bytes());
    req[4..6].copy_from_slice(&libc::RTM_GETNEIGH.to_ne_bytes());
    req[6..8].copy_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let mut found = Vec::new();
    // SAFETY: `req` and `buf` are valid for their lengths.
    unsafe {
        if real::send(fd, req.as_ptr().cast(), req.len(), 0) == req.len() as isize {
            let mut buf = vec![0u8; 32 * 1024];
            'recv: loop {
                let n = real::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n <= 0 {
                    break;
                }
                let mut msgs = &buf[..n as usize];
                while msgs.len() >= 16 {
                    let len = u32::from_ne_bytes(msgs[0..4].try_into().unwrap()) as usize;
                    let ty = u16::from_ne_bytes(msgs[4..6].try_into().unwrap());
                    if len < 16 || len > msgs.len() || ty == libc::NLMSG_DONE as u16 || ty == libc::NLMSG_ERROR as u16 {
                        break 'recv;
                    }
                    if ty == libc::RTM_NEWNEIGH {
                        found.extend(neighbour(&msgs[16..len], ifindex));
                    }
                    msgs = &msgs[(len + 3) & !3..];
                }
            }
        }
        real::close(fd);
    }
    found
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
    let mut attrs = &body[12..];
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes(attrs[0..2].try_into().ok()?) as usize;
        let ty = u16::from_ne_bytes(attrs[2..4].try_into().ok()?);
        let value = attrs.get(4..len)?;
        match (ty, value.len()) {
            (NDA_DST, 4) => ip = Some(IpAddr::from(<[u8; 4]>::try_from(value).ok()?)),
            (NDA_DST, 16) => ip = Some(IpAddr::from(<[u8; 16]>::try_from(value).ok()?)),
            (NDA_LLADDR, 6) => mac = Some(MacAddr(value.try_into().ok()?)),
            _ => {}
        }
        attrs = attrs.get((len + 3) & !3..).unwrap_or(&[]);
    }
    Some((ip?, mac?))
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
