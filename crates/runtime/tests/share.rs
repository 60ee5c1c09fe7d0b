//! `[runtime] share`: the family arena is made when the config asks for it, before the first
//! shard, and not otherwise. This binary's global allocator is `arena::ScopedAlloc`, as in the
//! preloaded library (without it the arena is never made: a scope would place nothing).

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;

use config::Config;
use runtime::Accel;
use testkit::mem::{pair, MemConfig};

use common::done;

#[global_allocator]
static GLOBAL: arena::ScopedAlloc = arena::ScopedAlloc;

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// A runtime over the in-memory NIC with `runtime` as its `[runtime]` section, its shards
/// opened (a UDP socket bound on its address opens them).
fn opened(runtime: &str) {
    let toml =
        format!("[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\n{runtime}\n");
    let cfg = Config::parse(&toml, Path::new("share.toml")).unwrap();
    let (nic, _peer) = pair(MemConfig::default());
    let rt = Accel::with_nic(cfg, nic);
    // SAFETY: socket takes plain integers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    rt.socket_created(fd, libc::AF_INET, libc::SOCK_DGRAM, 0);
    done(rt.bind(fd, SocketAddr::V4(SocketAddrV4::new(OURS, 5000)))).unwrap();
}

/// One test: the family arena is process-wide, so the order matters.
#[test]
fn the_family_arena_is_made_when_share_is_family_and_not_before() {
    opened("");
    assert!(arena::family().is_none(), "share defaults to off: nothing is mapped");
    opened("share = \"off\"");
    assert!(arena::family().is_none());
    opened("share = \"family\"");
    assert!(arena::family().is_some(), "share = \"family\" made no arena");
}
