//! pronghorn's XDP program (`crates/nic/bpf/pronghorn_xdp.c`, compiled by build.rs and embedded
//! here) and its maps: what the program hands to the AF_XDP socket and what it passes to the
//! kernel.
//!
//! The DPDK backend gives the program to DPDK 22.11's af_xdp PMD (`xdp_prog=<path>`, a memory
//! file: [`ObjectFile`]). The PMD loads it with libbpf, attaches it to the interface, finds
//! its `xsks_map` by name and puts each queue's socket in it. This module then finds the other
//! maps among the process's fds by name ([`XdpMaps::find`]) and writes what pronghorn owns
//! ([`Owner`]): its addresses, and on an interface shared with the kernel the ports it holds.
//! The program counts its verdicts per CPU ([`XdpMaps::verdicts`], `pronghorn stat`'s
//! `xdp_redirected` and `xdp_passed`).
//!
//! The structs below mirror the C ones byte for byte; the program's doc says what each verdict
//! is for.

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::MacAddr;

/// The compiled program (an ELF object for the BPF target).
pub const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pronghorn_xdp.o"));

const READY: u32 = 1;
const HAVE_V4: u32 = 2;
const HAVE_V6: u32 = 4;
const SHARE: u32 = 8;

/// The map names the program declares (BPF keeps the first 15 bytes of a name).
const CONFIG_MAP: &str = "ph_config";
const PORTS_MAP: &str = "ph_ports";
const VERDICTS_MAP: &str = "ph_verdicts";

/// What pronghorn owns on the interface: the frames the program hands to its socket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// The interface is shared with the kernel (`nic.share`): only TCP/UDP to the ports in the
    /// ports map or the ephemeral range are pronghorn's; ARP, NDP and ping are the kernel's.
    pub share: bool,
    /// Shared interface: the local ports pronghorn's outgoing connections use (inclusive).
    pub ephemeral: Option<(u16, u16)>,
}

/// `struct ph_config` of the program.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RawConfig {
    flags: u32,
    ipv4: [u8; 4],
    ipv6: [u8; 16],
    ipv6_link_local: [u8; 16],
    ephemeral_lo: u16,
    ephemeral_hi: u16,
    pad: u32,
}

impl RawConfig {
    fn new(owner: &Owner, mac: MacAddr) -> RawConfig {
        let mut c = RawConfig { flags: READY, ..RawConfig::default() };
        if let Some(a) = owner.ipv4 {
            c.flags |= HAVE_V4;
            c.ipv4 = a.octets();
        }
        if let Some(a) = owner.ipv6 {
            c.flags |= HAVE_V6;
            c.ipv6 = a.octets();
            c.ipv6_link_local = link_local(mac).octets();
        }
        if owner.share {
            c.flags |= SHARE;
        }
        if let Some((lo, hi)) = owner.ephemeral {
            (c.ephemeral_lo, c.ephemeral_hi) = (lo, hi);
        }
        c
    }
}

/// The link-local address the stack takes from the MAC (modified EUI-64, RFC 4291 appendix A).
fn link_local(mac: MacAddr) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
}

/// The transport of an owned port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    Tcp,
    Udp,
}

/// `struct ph_port_key` of the program.
#[repr(C)]
#[derive(Clone, Copy)]
struct PortKey {
    proto: u8,
    pad: u8,
    port: u16,
}

impl PortKey {
    fn new(t: Transport, port: u16) -> PortKey {
        let proto = match t {
            Transport::Tcp => libc::IPPROTO_TCP,
            Transport::Udp => libc::IPPROTO_UDP,
        } as u8;
        PortKey { proto, pad: 0, port }
    }
}

/// The program as a file DPDK can open by path: a memory file, `/proc/self/fd/N`, closed on
/// drop (DPDK reads it while the port's queues are set up).
pub struct ObjectFile(OwnedFd);

impl ObjectFile {
    pub fn new() -> io::Result<ObjectFile> {
        // SAFETY: a NUL-terminated name; the fd is checked before use.
        let fd = unsafe { libc::memfd_create(c"pronghorn_xdp.o".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd nothing else owns.
        let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        io::Write::write_all(&mut &file, OBJECT)?;
        Ok(ObjectFile(file.into()))
    }

    pub fn path(&self) -> String {
        format!("/proc/self/fd/{}", self.0.as_raw_fd())
    }
}

/// The program's maps that pronghorn writes and reads (its own fds, duplicated from libbpf's).
///
/// Invariant: each map's key and value sizes are those of the Rust types used with it below
/// (checked by [`XdpMaps::find`]), so the kernel reads and writes only within them.
#[derive(Debug)]
pub struct XdpMaps {
    config: OwnedFd,
    ports: OwnedFd,
    verdicts: OwnedFd,
    /// Possible CPUs: a per-CPU map's lookup writes a value for each.
    cpus: usize,
}

impl XdpMaps {
    /// Finds the program's maps among `fds` (the BPF map fds libbpf opened in this process): by
    /// name, and only with the key and value sizes of the program's types (a map of another
    /// program by the same name is not ours to write).
    pub fn find(fds: &[RawFd]) -> Option<XdpMaps> {
        let (mut config, mut ports, mut verdicts) = (None, None, None);
        for &fd in fds {
            let Some(info) = map_info(fd) else { continue };
            let (slot, key, value) = match info.name().as_deref() {
                Some(CONFIG_MAP) => (&mut config, size_of::<u32>(), size_of::<RawConfig>()),
                Some(PORTS_MAP) => (&mut ports, size_of::<PortKey>(), size_of::<u32>()),
                Some(VERDICTS_MAP) => (&mut verdicts, size_of::<u32>(), size_of::<u64>()),
                _ => continue,
            };
            if slot.is_none() && (info.key_size as usize, info.value_size as usize) == (key, value) {
                *slot = dup_cloexec(fd);
            }
        }
        Some(XdpMaps { config: config?, ports: ports?, verdicts: verdicts?, cpus: possible_cpus() })
    }

    /// The same maps through fds of its own.
    pub fn try_clone(&self) -> io::Result<XdpMaps> {
        let dup = |fd: &OwnedFd| fd.try_clone();
        Ok(XdpMaps {
            config: dup(&self.config)?,
            ports: dup(&self.ports)?,
            verdicts: dup(&self.verdicts)?,
            cpus: self.cpus,
        })
    }

    /// Tells the program what pronghorn owns on an interface whose MAC is `mac`. Until then it
    /// passes everything to the kernel.
    pub fn configure(&self, owner: &Owner, mac: MacAddr) -> io::Result<()> {
        let raw = RawConfig::new(owner, mac);
        // SAFETY: the config map's key is a u32 and its value a RawConfig (checked by `find`).
        unsafe { update(&self.config, &0u32, &raw) }
    }

    /// Shared interface: frames to `port` go to pronghorn from now on.
    pub fn own_port(&self, t: Transport, port: u16) -> io::Result<()> {
        // SAFETY: the ports map's key is a PortKey and its value a u32 (checked by `find`).
        unsafe { update(&self.ports, &PortKey::new(t, port), &1u32) }
    }

    /// Shared interface: frames to `port` go to the kernel again.
    pub fn disown_port(&self, t: Transport, port: u16) -> io::Result<()> {
        let key = PortKey::new(t, port);
        let mut attr =
            ElemAttr { map_fd: self.ports.as_raw_fd() as u32, key: &key as *const _ as u64, ..ElemAttr::default() };
        // SAFETY: the delete layout; the kernel reads the ports map's key, a PortKey (checked by
        // `find`), from `key`, which outlives the call.
        match unsafe { bpf(BPF_MAP_DELETE_ELEM, &mut attr) } {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
            r => r,
        }
    }

    /// The program's verdicts so far, every CPU's.
    pub fn verdicts(&self) -> Verdicts {
        let mut sums = [0u64; 3];
        let mut per_cpu = vec![0u64; self.cpus];
        for (k, sum) in sums.iter_mut().enumerate() {
            let key = k as u32;
            let mut attr = ElemAttr {
                map_fd: self.verdicts.as_raw_fd() as u32,
                key: &key as *const u32 as u64,
                value: per_cpu.as_mut_ptr() as u64,
                ..ElemAttr::default()
            };
            // SAFETY: the lookup layout; the verdicts map has u32 keys and u64 values (checked by
            // `find`), and a per-CPU lookup writes one u64 per possible CPU: `per_cpu` holds
            // `self.cpus` of them, the kernel's count of possible CPUs (or CPU_SETSIZE, more).
            if unsafe { bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) }.is_ok() {
                *sum = per_cpu.iter().sum();
            }
        }
        Verdicts { redirected: sums[0], passed: sums[1], no_socket: sums[2] }
    }
}

/// What the program did with the frames it saw (`enum ph_verdict`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// Handed to pronghorn's socket on the frame's queue.
    pub redirected: u64,
    /// Not pronghorn's: passed to the kernel.
    pub passed: u64,
    /// pronghorn's, but the queue had no socket (the process was gone): passed to the kernel.
    pub no_socket: u64,
}

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// `union bpf_attr` for the `BPF_MAP_*_ELEM` commands.
#[repr(C, align(8))]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C, align(8))]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The start of `struct bpf_map_info` (the kernel fills up to `info_len` bytes).
#[repr(C, align(8))]
#[derive(Default)]
struct MapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; 16],
}

/// The name the kernel keeps for pronghorn's program (its function's, below 16 bytes).
const PROGRAM_NAME: &str = "pronghorn_xdp";

// libbpf, which DPDK's af_xdp PMD needs and dpdk-sys's build links.
extern "C" {
    fn bpf_xdp_query_id(ifindex: libc::c_int, flags: libc::c_int, prog_id: *mut u32) -> libc::c_int;
    fn bpf_xdp_detach(ifindex: libc::c_int, flags: u32, opts: *const libc::c_void) -> libc::c_int;
    fn bpf_prog_get_fd_by_id(id: u32) -> libc::c_int;
}

/// Detaches the XDP program a pronghorn process that died left on interface `iface`, if one is
/// attached. The caller holds every queue of the interface (no other process of ours drives it),
/// so a program of ours attached there is a leftover: its cleanup helper (`pronghorn reap`)
/// detaches it too, after the death, but a server started at once (a restart, the next lab
/// test) could come first, and DPDK's attach (XDP_FLAGS_UPDATE_IF_NOEXIST) then failed:
/// "Failed to configure xdp socket". Another program (not named `pronghorn_xdp`) is someone
/// else's and stays. Returns whether one was detached.
pub fn detach_leftover(iface: &str) -> io::Result<bool> {
    let name = std::ffi::CString::new(iface).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated name that outlives the call.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as libc::c_int;
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut id = 0u32;
    // SAFETY: libbpf writes the attached program's id (0: none) into `id`, which outlives the call.
    let rc = unsafe { bpf_xdp_query_id(ifindex, 0, &mut id) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    if id == 0 || program_name(id).as_deref() != Some(PROGRAM_NAME) {
        return Ok(false);
    }
    // SAFETY: detaches whatever program the interface has (no options struct: null).
    let rc = unsafe { bpf_xdp_detach(ifindex, 0, std::ptr::null()) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(true)
}

/// The name of the BPF program with id `id` (None: gone, or not ours to open).
fn program_name(id: u32) -> Option<String> {
    // SAFETY: libbpf opens a new fd for the program (or fails, negative).
    let fd = unsafe { bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut info = ProgInfo::default();
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfo>() as u32,
        info: &mut info as *mut ProgInfo as u64,
    };
    // SAFETY: the info layout; the kernel writes at most `info_len` bytes into `info` (its
    // pointer fields are 0: nothing is copied through them), which outlives the call.
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.ok()?;
    let name = CStr::from_bytes_until_nul(&info.name).ok()?;
    Some(name.to_string_lossy().into_owned())
}

/// The start of `struct bpf_prog_info`, up to its name (the kernel fills up to `info_len` bytes).
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
}

/// The bpf(2) system call.
///
/// # Safety
/// `attr` is the `union bpf_attr` layout `cmd` reads, and every pointer in it is valid for what
/// the kernel reads or writes there: the map's key and value sizes (a per-CPU map's lookup
/// writes a value for each possible CPU), the info length.
unsafe fn bpf<A>(cmd: libc::c_long, attr: &mut A) -> io::Result<()> {
    // SAFETY: the caller's contract; the kernel reads size_of::<A>() bytes of `attr`.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut A, std::mem::size_of::<A>() as u32) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets `map[key] = value`.
///
/// # Safety
/// `K` and `V` have the map's key and value sizes.
unsafe fn update<K, V>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    let mut attr = ElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value as *const V as u64,
        ..ElemAttr::default()
    };
    // SAFETY: the update layout; the kernel reads key_size bytes of `key` and value_size bytes
    // of `value`, which are a K and a V (the caller's contract) living across the call.
    unsafe { bpf(BPF_MAP_UPDATE_ELEM, &mut attr) }
}

impl MapInfo {
    fn name(&self) -> Option<String> {
        let name = CStr::from_bytes_until_nul(&self.name).ok()?;
        Some(name.to_string_lossy().into_owned())
    }
}

/// What the kernel says of the BPF map `fd` refers to (None: not a map).
fn map_info(fd: RawFd) -> Option<MapInfo> {
    let mut info = MapInfo::default();
    let mut attr = InfoAttr {
        bpf_fd: fd as u32,
        info_len: std::mem::size_of::<MapInfo>() as u32,
        info: &mut info as *mut MapInfo as u64,
    };
    // SAFETY: the info layout; the kernel writes at most `info_len` bytes into `info`, which
    // outlives the call (a fd that is not a BPF object fails with EBADF or EINVAL).
    unsafe { bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr) }.ok()?;
    Some(info)
}

fn dup_cloexec(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC makes a new fd that we own, or fails.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: a fresh fd nothing else owns.
    (new >= 0).then(|| unsafe { OwnedFd::from_raw_fd(new) })
}

/// CPUs the kernel may bring up (`/sys/devices/system/cpu/possible`, "0-3,8-11"): per-CPU maps
/// have a value for each.
fn possible_cpus() -> usize {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    parse_cpu_list(&text).unwrap_or(libc::CPU_SETSIZE as usize)
}

fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut last = None;
    for part in text.trim().split(',') {
        let hi = part.rsplit('-').next()?.parse::<usize>().ok()?;
        last = Some(last.map_or(hi, |l: usize| l.max(hi)));
    }
    last.map(|l| l + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_struct_matches_the_programs() {
        // struct ph_config: u32, u32, 16 + 16 bytes, two u16, u32 pad.
        assert_eq!(std::mem::size_of::<RawConfig>(), 48);
        assert_eq!(std::mem::size_of::<PortKey>(), 4);
    }

    #[test]
    fn the_config_says_what_pronghorn_owns() {
        let mac = MacAddr([0x02, 0, 0, 0, 0, 1]);
        let owner = Owner {
            ipv4: Some(Ipv4Addr::new(10, 99, 0, 1)),
            ipv6: Some("fd99::1".parse().unwrap()),
            ..Owner::default()
        };
        let c = RawConfig::new(&owner, mac);
        assert_eq!(c.flags, READY | HAVE_V4 | HAVE_V6);
        assert_eq!(c.ipv4, [10, 99, 0, 1]);
        assert_eq!(Ipv6Addr::from(c.ipv6_link_local), "fe80::ff:fe00:1".parse::<Ipv6Addr>().unwrap());
        let shared = Owner { share: true, ephemeral: Some((61000, 65535)), ipv6: None, ..owner };
        let c = RawConfig::new(&shared, mac);
        assert_eq!(c.flags, READY | HAVE_V4 | SHARE);
        assert_eq!((c.ephemeral_lo, c.ephemeral_hi), (61000, 65535));
        assert_eq!(c.ipv6_link_local, [0; 16]);
    }

    #[test]
    fn possible_cpus_reads_the_kernels_list() {
        assert_eq!(parse_cpu_list("0-3\n"), Some(4));
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn the_object_is_an_elf_for_bpf() {
        assert_eq!(&OBJECT[..4], b"\x7fELF");
        // e_machine (offset 18, little-endian) EM_BPF = 247.
        assert_eq!(u16::from_le_bytes([OBJECT[18], OBJECT[19]]), 247);
    }
}
