//! pronghorn's XDP program, run by the kernel on crafted frames (BPF_PROG_TEST_RUN): which
//! frames it hands to pronghorn and which to the kernel, on a dedicated and on a shared
//! interface, configured through `nic::xdp::XdpMaps` as the DPDK backend does.
//!
//! The test run has no AF_XDP socket in `xsks_map`, so a frame pronghorn owns is passed to the
//! kernel too (what happens after a crash): the verdict counters tell `no_socket` (ours) from
//! `passed` (the kernel's). Needs root (CAP_BPF); as another user each test says "skipped".
#![cfg(feature = "dpdk")]

use std::ffi::{c_char, c_int, c_void, CString};
use std::os::fd::RawFd;

use nic::xdp::{Owner, Transport, Verdicts, XdpMaps, OBJECT};
use nic::MacAddr;

#[link(name = "bpf")]
extern "C" {
    fn bpf_object__open_mem(buf: *const c_void, size: usize, opts: *const c_void) -> *mut c_void;
    fn bpf_object__load(obj: *mut c_void) -> c_int;
    fn bpf_object__find_program_by_name(obj: *const c_void, name: *const c_char) -> *mut c_void;
    fn bpf_program__fd(prog: *const c_void) -> c_int;
    fn bpf_object__find_map_fd_by_name(obj: *const c_void, name: *const c_char) -> c_int;
    fn bpf_object__close(obj: *mut c_void);
}

const XDP_PASS: u32 = 2;
const OUR_MAC: MacAddr = MacAddr([0x02, 0x99, 0, 0, 0, 1]);
const OURS4: [u8; 4] = [10, 99, 0, 1];
const PEER4: [u8; 4] = [10, 99, 0, 2];
const OURS6: &str = "fd99::1";
const PEER6: &str = "fd99::2";

/// The program loaded on its own (not attached), with its maps.
struct Loaded {
    obj: *mut c_void,
    prog: RawFd,
    maps: XdpMaps,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: the object `load` opened, closed once (the maps are our own dups of its fds).
        unsafe { bpf_object__close(self.obj) };
    }
}

fn load(test: &str) -> Option<Loaded> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("{test}: skipped (loading a BPF program needs root)");
        return None;
    }
    // SAFETY: libbpf reads OBJECT.len() bytes of the static object; null opts are the defaults.
    let obj = unsafe { bpf_object__open_mem(OBJECT.as_ptr().cast(), OBJECT.len(), std::ptr::null()) };
    assert!(!obj.is_null(), "libbpf cannot open the object: {}", std::io::Error::last_os_error());
    // SAFETY: `obj` is the non-null object just opened.
    assert_eq!(unsafe { bpf_object__load(obj) }, 0, "the verifier rejects the program");
    let name = CString::new("pronghorn_xdp").unwrap();
    // SAFETY: a loaded object and a NUL-terminated name.
    let prog = unsafe { bpf_object__find_program_by_name(obj, name.as_ptr()) };
    assert!(!prog.is_null(), "the object has no program pronghorn_xdp");
    // SAFETY: a program of the loaded object.
    let prog = unsafe { bpf_program__fd(prog) };
    assert!(prog >= 0);
    let fds: Vec<RawFd> = ["ph_config", "ph_ports", "ph_verdicts", "xsks_map"]
        .iter()
        .map(|n| {
            let n = CString::new(*n).unwrap();
            // SAFETY: a loaded object and a NUL-terminated name.
            unsafe { bpf_object__find_map_fd_by_name(obj, n.as_ptr()) }
        })
        .collect();
    let maps = XdpMaps::find(&fds).expect("the program's maps, found by name");
    Some(Loaded { obj, prog, maps })
}

impl Loaded {
    /// Runs the program on `frame`: which counter moved.
    fn verdict(&self, frame: &[u8]) -> &'static str {
        let before = self.maps.verdicts();
        let mut attr = TestRunAttr {
            prog_fd: self.prog as u32,
            data_size_in: frame.len() as u32,
            data_in: frame.as_ptr() as u64,
            repeat: 1,
            ..TestRunAttr::default()
        };
        // SAFETY: `attr` is the BPF_PROG_TEST_RUN layout with its size; the kernel reads
        // `data_size_in` bytes of `frame`, which outlives the call, and writes no output (null
        // data_out and ctx_out).
        let rc = unsafe {
            libc::syscall(libc::SYS_bpf, 10 /* BPF_PROG_TEST_RUN */, &mut attr, std::mem::size_of::<TestRunAttr>())
        };
        assert_eq!(rc, 0, "BPF_PROG_TEST_RUN: {}", std::io::Error::last_os_error());
        assert_eq!(attr.retval, XDP_PASS, "without a socket every frame goes to the kernel");
        let after = self.maps.verdicts();
        let moved = Verdicts {
            redirected: after.redirected - before.redirected,
            passed: after.passed - before.passed,
            no_socket: after.no_socket - before.no_socket,
        };
        match moved {
            Verdicts { redirected: 0, passed: 1, no_socket: 0 } => "kernel",
            Verdicts { redirected: 0, passed: 0, no_socket: 1 } => "pronghorn",
            other => panic!("one frame, one verdict: {other:?}"),
        }
    }
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C, align(8))]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    pad: u32,
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = OUR_MAC.0.to_vec();
    f.extend([0x02, 0x99, 0, 0, 0, 2]);
    f.extend(ethertype.to_be_bytes());
    f
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// An IPv4 packet (20-byte header) carrying `payload` as protocol `proto`.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x45, 0];
    p.extend(((20 + payload.len()) as u16).to_be_bytes());
    p.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
    p.extend(src);
    p.extend(dst);
    p.extend(payload);
    p
}

fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend((payload.len() as u16).to_be_bytes());
    p.extend([next, 64]);
    p.extend(src);
    p.extend(dst);
    p.extend(payload);
    p
}

/// A TCP or UDP header's first 8 bytes (ports, then zeros) and some padding.
fn ports(sport: u16, dport: u16) -> Vec<u8> {
    let mut p = sport.to_be_bytes().to_vec();
    p.extend(dport.to_be_bytes());
    p.extend([0; 16]);
    p
}

fn frame4(dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(ipv4(PEER4, dst, proto, payload));
    f
}

fn frame6(dst: &str, next: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(0x86dd);
    f.extend(ipv6(v6(PEER6), v6(dst), next, payload));
    f
}

fn arp() -> Vec<u8> {
    let mut f = eth(0x0806);
    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend([0x02, 0x99, 0, 0, 0, 2]);
    f.extend(PEER4);
    f.extend([0; 6]);
    f.extend(OURS4);
    f
}

/// A neighbour solicitation for our address, to its solicited-node group.
fn neighbour_solicitation() -> Vec<u8> {
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend(v6(OURS6));
    frame6("ff02::1:ff00:1", 58, &icmp)
}

fn ping4() -> Vec<u8> {
    frame4(OURS4, 1, &[8, 0, 0, 0, 0, 1, 0, 1])
}

/// ICMP port unreachable from the peer, quoting a UDP datagram we sent from `sport`.
fn port_unreachable4(sport: u16) -> Vec<u8> {
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend(ipv4(OURS4, PEER4, 17, &ports(sport, 53)[..8]));
    frame4(OURS4, 1, &icmp)
}

fn packet_too_big6(sport: u16) -> Vec<u8> {
    let mut icmp = vec![2, 0, 0, 0, 0, 0, 5, 0];
    icmp.extend(ipv6(v6(OURS6), v6(PEER6), 6, &ports(sport, 80)[..8]));
    frame6(OURS6, 58, &icmp)
}

const TCP: u8 = 6;
const UDP: u8 = 17;

fn owner(share: bool) -> Owner {
    Owner {
        ipv4: Some(OURS4.into()),
        ipv6: Some(OURS6.parse().unwrap()),
        share,
        ephemeral: share.then_some((61000, 61999)),
    }
}

#[test]
fn until_configured_every_frame_goes_to_the_kernel() {
    let Some(p) = load("until_configured_every_frame_goes_to_the_kernel") else { return };
    assert_eq!(p.verdict(&arp()), "kernel");
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(40000, 80))), "kernel");
    assert_eq!(p.verdict(&neighbour_solicitation()), "kernel");
}

#[test]
fn a_dedicated_interface_gives_pronghorn_its_addresses_and_arp_ndp_only() {
    let Some(p) = load("a_dedicated_interface_gives_pronghorn_its_addresses_and_arp_ndp_only") else { return };
    p.maps.configure(&owner(false), OUR_MAC).unwrap();
    assert_eq!(p.verdict(&arp()), "pronghorn");
    assert_eq!(p.verdict(&neighbour_solicitation()), "pronghorn");
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(40000, 80))), "pronghorn");
    assert_eq!(p.verdict(&frame4(OURS4, UDP, &ports(40000, 53))), "pronghorn");
    assert_eq!(p.verdict(&ping4()), "pronghorn");
    assert_eq!(p.verdict(&frame6(OURS6, TCP, &ports(40000, 80))), "pronghorn");
    assert_eq!(p.verdict(&frame6("fe80::99:ff:fe00:1", TCP, &ports(40000, 80))), "pronghorn", "our link-local");
    // Another host's traffic, and what pronghorn has no use for, is never handed to its socket.
    assert_eq!(p.verdict(&frame4([10, 99, 0, 3], TCP, &ports(40000, 80))), "kernel");
    assert_eq!(p.verdict(&frame4([10, 99, 0, 255], UDP, &ports(40000, 137))), "kernel");
    assert_eq!(p.verdict(&frame6("fd99::3", TCP, &ports(40000, 80))), "kernel");
    assert_eq!(p.verdict(&frame6("ff02::1", UDP, &ports(546, 547))), "kernel");
    assert_eq!(p.verdict(&eth(0x88cc)), "kernel", "LLDP");
    assert_eq!(p.verdict(&eth(0x0800)), "kernel", "no IPv4 header");
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &[])[..20]), "kernel", "a truncated IPv4 header");
}

#[test]
fn a_shared_interface_gives_pronghorn_only_its_ports() {
    let Some(p) = load("a_shared_interface_gives_pronghorn_only_its_ports") else { return };
    p.maps.configure(&owner(true), OUR_MAC).unwrap();
    p.maps.own_port(Transport::Tcp, 6379).unwrap();
    p.maps.own_port(Transport::Udp, 5353).unwrap();
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(40000, 6379))), "pronghorn");
    assert_eq!(p.verdict(&frame6(OURS6, TCP, &ports(40000, 6379))), "pronghorn");
    assert_eq!(p.verdict(&frame4(OURS4, UDP, &ports(40000, 5353))), "pronghorn");
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(80, 61000))), "pronghorn", "a reply to our connection");
    assert_eq!(p.verdict(&frame6(OURS6, TCP, &ports(80, 61999))), "pronghorn");
    assert_eq!(p.verdict(&port_unreachable4(61500)), "pronghorn", "an error about our datagram");
    assert_eq!(p.verdict(&packet_too_big6(61500)), "pronghorn");
    // The kernel's: its ports, ARP, NDP, ping, errors about its own traffic, other hosts.
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(40000, 22))), "kernel", "ssh");
    assert_eq!(p.verdict(&frame4(OURS4, UDP, &ports(40000, 6379))), "kernel", "UDP is not TCP");
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(80, 62000))), "kernel", "past the ephemeral range");
    assert_eq!(p.verdict(&frame6(OURS6, TCP, &ports(40000, 22))), "kernel");
    assert_eq!(p.verdict(&arp()), "kernel");
    assert_eq!(p.verdict(&neighbour_solicitation()), "kernel");
    assert_eq!(p.verdict(&ping4()), "kernel");
    assert_eq!(p.verdict(&port_unreachable4(33000)), "kernel");
    assert_eq!(p.verdict(&packet_too_big6(33000)), "kernel");
    assert_eq!(p.verdict(&frame4([10, 99, 0, 3], TCP, &ports(40000, 6379))), "kernel");
    // A listener closed: its port is the kernel's again.
    p.maps.disown_port(Transport::Tcp, 6379).unwrap();
    p.maps.disown_port(Transport::Tcp, 6379).unwrap();
    assert_eq!(p.verdict(&frame4(OURS4, TCP, &ports(40000, 6379))), "kernel");
}

/// `union bpf_attr` for BPF_MAP_CREATE, up to the name.
#[repr(C, align(8))]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// A new BPF map of this process (closed with the returned fd).
fn create_map(name: &str, map_type: u32, key_size: u32, value_size: u32) -> std::os::fd::OwnedFd {
    let mut attr = MapCreateAttr { map_type, key_size, value_size, max_entries: 4, ..MapCreateAttr::default() };
    attr.map_name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: `attr` is the BPF_MAP_CREATE layout with its size; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(libc::SYS_bpf, 0 /* BPF_MAP_CREATE */, &mut attr, std::mem::size_of::<MapCreateAttr>())
    };
    assert!(fd >= 0, "BPF_MAP_CREATE {name}: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd nothing else owns.
    unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as RawFd) }
}

/// `XdpMaps` reads and writes through raw pointers to its Rust types: a map that bears the
/// program's name with other sizes (another program's) would have the kernel write past them
/// (a per-CPU lookup writes value_size bytes per CPU), so it is not taken.
#[test]
fn a_map_with_the_programs_name_but_other_sizes_is_not_taken() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("a_map_with_the_programs_name_but_other_sizes_is_not_taken: skipped (BPF maps need root)");
        return;
    }
    use std::os::fd::AsRawFd;
    const ARRAY: u32 = 2;
    const HASH: u32 = 1;
    const PERCPU_ARRAY: u32 = 6;
    let config = create_map("ph_config", ARRAY, 4, 48);
    let ports = create_map("ph_ports", HASH, 4, 4);
    let verdicts = create_map("ph_verdicts", PERCPU_ARRAY, 4, 8);
    let wide_verdicts = create_map("ph_verdicts", PERCPU_ARRAY, 4, 64);
    let fds = |v: &std::os::fd::OwnedFd| [config.as_raw_fd(), ports.as_raw_fd(), v.as_raw_fd()];
    assert!(XdpMaps::find(&fds(&verdicts)).is_some(), "the program's sizes");
    assert!(XdpMaps::find(&fds(&wide_verdicts)).is_none(), "a u64 buffer per CPU is too small for 64 bytes");
}
