//! The DPDK backend: one port on any PMD, usually a virtual device (`net_af_xdp`,
//! `net_af_packet`) on a Linux interface, with one rx and one tx queue per shard of the process
//! (one [`DpdkNic`] each, sharing the port and its mempool).
//!
//! The port's tx offloads (IPv4, TCP and UDP checksums, TCP segmentation) are enabled wherever
//! the PMD offers them ([`DpdkOptions::offloads`]) and reported through [`Nic::offloads`]; each
//! frame then carries what DPDK reads per mbuf (`ol_flags`, header lengths, `tso_segsz`), and
//! frames to segment come from a second pool of mbufs that hold [`crate::TSO_MAX_FRAME`] bytes.
//!
//! [`DpdkNic::open`] does the whole slow path: it checks what commonly goes wrong (not root, the
//! interface missing, no hugepages) before touching DPDK, initialises the EAL once per process
//! (`--in-memory --no-pci`, a file prefix unique to this process, the caller's extra arguments),
//! and sets up the mempool, the port and its queues. Everything DPDK and libbpf print while doing
//! so is captured: on failure it is boiled down to one [`DpdkError`] line that names the cause and
//! the fix; on success it is kept in [`DpdkNic::setup_log`]. Dropping the last port stops and
//! closes it (which detaches the XDP program) and cleans the EAL up, runtime directory included.

use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use dpdk_sys as sys;

use crate::lane::{TxLane, TxQueue, TxSender};
use crate::share::QueueClaim;
use crate::xdp::{ObjectFile, Owner, XdpMaps};
use crate::{Link, MacAddr, Nic, NicStats, Offloads, PacketBuf, Segmentation, TSO_MAX_FRAME};

/// Which poll-mode driver serves the interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pmd {
    /// `net_af_xdp`: an AF_XDP socket on the interface (native XDP where the driver has it).
    AfXdp,
    /// `net_af_packet`: a PACKET_MMAP socket; slower, works everywhere.
    AfPacket,
    /// `net_tap`: a Linux tap interface (the lab's persistent one, or one DPDK creates), one
    /// `read`/`writev` per frame. It offers checksum and TCP segmentation offload (done in
    /// software inside the PMD, before the write), which makes it the lab's path for them.
    Tap,
}

impl Pmd {
    /// The DPDK driver name.
    pub fn driver(&self) -> &'static str {
        match self {
            Pmd::AfXdp => "net_af_xdp",
            Pmd::AfPacket => "net_af_packet",
            Pmd::Tap => "net_tap",
        }
    }

    /// The socket family of the PMD's queues (None: a tap's queues are `/dev/net/tun` fds).
    fn socket_domain(&self) -> Option<libc::c_int> {
        match self {
            Pmd::AfXdp => Some(libc::AF_XDP),
            Pmd::AfPacket => Some(libc::AF_PACKET),
            Pmd::Tap => None,
        }
    }

    /// Whether `link` (an fd's /proc/self/fd link) may be one of the PMD's queue fds.
    fn queue_fd_link(&self, link: &str) -> bool {
        match self {
            Pmd::Tap => link == TUN_DEVICE,
            Pmd::AfXdp | Pmd::AfPacket => link.starts_with("socket:"),
        }
    }

    /// Whether the PMD segments TCP over IPv6 where it offers `RTE_ETH_TX_OFFLOAD_TCP_TSO`:
    /// net_tap cuts frames with DPDK 22.11's librte_gso, which segments TCP over IPv4 only
    /// (an IPv6 frame goes out whole, larger than the MTU).
    fn segments_ipv6(&self) -> bool {
        !matches!(self, Pmd::Tap)
    }
}

/// What the fds of a tap's queues link to.
const TUN_DEVICE: &str = "/dev/net/tun";

impl std::str::FromStr for Pmd {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "af_xdp" | "net_af_xdp" => Ok(Pmd::AfXdp),
            "af_packet" | "net_af_packet" => Ok(Pmd::AfPacket),
            "tap" | "net_tap" => Ok(Pmd::Tap),
            _ => Err(format!("unknown pmd \"{s}\" (expected af_xdp, af_packet or tap)")),
        }
    }
}

impl std::fmt::Display for Pmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pmd::AfXdp => "af_xdp",
            Pmd::AfPacket => "af_packet",
            Pmd::Tap => "tap",
        })
    }
}

/// What to open.
#[derive(Clone, Debug)]
pub struct DpdkOptions {
    pub pmd: Pmd,
    /// The Linux interface the PMD attaches to.
    pub iface: String,
    /// Extra EAL arguments, appended after pronghorn's defaults.
    pub eal_args: Vec<String>,
    /// Mbufs in the pool (a power of two minus one is best for DPDK's ring).
    pub pool_size: u32,
    /// Rx ring descriptors. 2048 for af_xdp: as many as DPDK 22.11's af_xdp keeps on the
    /// fill ring (a bigger rx ring would wait for buffers), and twice the 1024 that the kernel
    /// overflowed (`rx_ring_full`) when an event loop's iteration let more frames than that in.
    pub rx_desc: u16,
    pub tx_desc: u16,
    /// Processes that share the interface, one queue each (`nic.queues`): this one claims the
    /// lowest free queue (see [`crate::share`]). 1: the interface is this process's alone.
    pub queues: u16,
    /// Queues this process drives, one per shard (`runtime.shards`): a run of consecutive
    /// queues of the `queues`, one AF_XDP socket each.
    pub shards: u16,
    /// af_xdp: what pronghorn's XDP program (`crate::xdp`) hands to the socket, the rest going
    /// to the kernel. None, or several ports on the interface (`queues` or `shards` above 1:
    /// DPDK 22.11 attaches an `xdp_prog` once per port and the second attach fails), leaves
    /// DPDK's default program, which hands the socket every frame of its queue.
    pub xdp_owner: Option<Owner>,
    /// The EAL's main lcore (`-l`), a CPU of the NIC's node (crate `topology`'s placement);
    /// None: the first CPU the process may run on.
    pub lcore: Option<u32>,
    /// The NUMA node whose hugepages hold the packet pool; None: the port's own socket id.
    pub pool_node: Option<u32>,
    /// Enable the tx offloads the PMD offers (`nic.offloads`); false: the stack computes every
    /// checksum and sends MSS-sized frames.
    pub offloads: bool,
    /// How long to wait for a queue of a shared interface to come free (see
    /// [`QueueClaim::first_free_run`]): a process that ends keeps its queue while it drains
    /// its connections (`runtime.exit_drain_ms`) and closes its port, and a server replacing
    /// its workers (nginx -s reload) starts the new ones meanwhile.
    pub claim_patience: std::time::Duration,
}

/// What a queue claim waits beyond the exit drain of the process it may replace: the port's
/// close (the EAL's cleanup, the AF_XDP sockets' teardown) on a loaded machine.
pub const CLAIM_PATIENCE_BEYOND_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

impl DpdkOptions {
    pub fn new(pmd: Pmd, iface: impl Into<String>) -> Self {
        Self {
            pmd,
            iface: iface.into(),
            eal_args: Vec::new(),
            pool_size: 8191,
            rx_desc: 2048,
            tx_desc: 1024,
            queues: 1,
            shards: 1,
            xdp_owner: None,
            lcore: None,
            pool_node: None,
            offloads: true,
            claim_patience: CLAIM_PATIENCE_BEYOND_DRAIN,
        }
    }

    /// What pronghorn's XDP program is to hand to the socket, when the port gets the program.
    fn filtered(&self) -> Option<&Owner> {
        let one_port = self.queues <= 1 && self.shards <= 1;
        self.xdp_owner.as_ref().filter(|_| self.pmd == Pmd::AfXdp && one_port)
    }

    /// The `--vdev` argument for this port. af_xdp gets `busy_budget=0`: with the PMD's default
    /// preferred busy polling the kernel defers the veth's NAPI work to the poller, and a
    /// process that sleeps on the socket between bursts (inline mode) saw every new connection
    /// wait ~2 ms (redis-benchmark -k 0: 1.7k rps; 21.9k with busy polling off; bulk and
    /// request/response throughput unchanged).
    ///
    /// Shard `k` gets a port of its own, `net_af_xdp<k>` on interface queue `queue`: one port
    /// with several queues (`queue_count`) needs an interface that reports combined channels,
    /// and a veth reports none (DPDK then allows one queue per port: "Bus (vdev) probe failed").
    ///
    /// `xdp_prog`: the path of the XDP program the port attaches instead of DPDK's default.
    fn vdev(&self, k: u16, queue: u16, xdp_prog: Option<&str>) -> String {
        match self.pmd {
            Pmd::AfXdp => {
                let prog = xdp_prog.map(|p| format!(",xdp_prog={p}")).unwrap_or_default();
                format!(
                    "{},iface={},start_queue={queue},queue_count=1,busy_budget=0{prog}",
                    self.port_name(k),
                    self.iface
                )
            }
            Pmd::AfPacket => format!("{},iface={},qpairs=1", self.port_name(k), self.iface),
            Pmd::Tap => format!("{},iface={}", self.port_name(k), self.iface),
        }
    }

    fn port_name(&self, k: u16) -> String {
        format!("{}{k}", self.pmd.driver())
    }
}

/// Why a port could not be opened: each variant displays as one line with the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    #[error("pronghorn needs root to drive a NIC through DPDK (hugepages, {pmd} sockets, XDP programs): run it as root, e.g. with sudo, or give the program (a server a wrapper starts as another user) the ambient capabilities dac_override, net_admin, net_raw, ipc_lock, sys_admin and bpf (docs/runtime.md, \"Privileges\")")]
    NotRoot { pmd: Pmd },
    #[error("interface \"{iface}\" does not exist in this network namespace: check `ip link`, or use the lab (`pronghorn lab up`, then `pronghorn lab exec a -- ...`)")]
    NoSuchInterface { iface: String },
    #[error("no free hugepages: reserve some with `echo 256 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages` (`pronghorn lab up` does this), or add \"--no-huge\" to eal_args")]
    NoHugepages,
    #[error(
        "a DPDK driver the EAL was asked for is not linked into pronghorn, which carries only {} (crates/dpdk-sys/src/drivers.rs: add it there and rebuild) (DPDK said: {detail})",
        sys::LINKED_DRIVERS.join(", ")
    )]
    DriverNotLinked { detail: String },
    #[error("DPDK rejected the EAL arguments {args:?}: {detail}; fix eal_args in the config")]
    BadEalArgs { args: Vec<String>, detail: String },
    #[error("DPDK failed to start: {detail}")]
    EalInit { detail: String },
    #[error("DPDK is already initialised in this process with another port; pronghorn drives one port per process")]
    AlreadyInitialized,
    #[error(transparent)]
    Queue(#[from] crate::share::ClaimError),
    #[error(
        "{pmd} cannot share interface \"{iface}\" between processes or shards (nic.queues = {queues}): use af_xdp"
    )]
    NotShareable { pmd: Pmd, iface: String, queues: u16 },
    #[error("{pmd} could not open interface \"{iface}\": {detail}")]
    Port { pmd: Pmd, iface: String, detail: String },
}

/// One mbuf holding one frame. Dropping it returns it to its mempool.
///
/// Invariant (what the `unsafe` blocks on it rely on): the pointer is a single-segment mbuf of one
/// of the port's pools (frames, or frames to segment) that this value alone owns (the PMD handed it over in `rx_burst`, or the pool in
/// `alloc`; `tx_burst` forgets the ones the PMD took back), and its memory stays mapped while
/// the value lives: the pool is never freed, and the EAL's memory is kept when a port closes
/// with mbufs in use (`Port`'s drop).
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an mbuf is plain memory its owner alone touches (the type's invariant), so it may
// move to another thread: a tx lane's frames are staged by one thread and sent, or freed, by
// another. Freeing one from a thread that is not an EAL lcore puts it straight into the pool
// (no per-lcore cache), whose drivers ("lf_stack", "stack", the default ring: see
// `open_inner`) all take concurrent gets and puts from any threads.
unsafe impl Send for Mbuf {}

impl Mbuf {
    fn raw(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: the mbuf is ours alone and valid (the type's invariant); it is freed once, here.
        unsafe { sys::ph_pktmbuf_free(self.raw()) }
    }
}

impl PacketBuf for Mbuf {
    fn data(&self) -> &[u8] {
        // SAFETY: a valid single-segment mbuf (the type's invariant) holds `data_len` initialised
        // bytes at its data pointer (`ph_pktmbuf_set_len` keeps data_len within the buffer); the
        // slice borrows `self`, and nothing else reads or writes the mbuf while we own it.
        unsafe {
            let len = sys::ph_pktmbuf_data_len(self.raw()) as usize;
            std::slice::from_raw_parts(sys::ph_pktmbuf_data(self.raw()), len)
        }
    }
    fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `data`; `&mut self` makes this the only reference to the bytes.
        unsafe {
            let len = sys::ph_pktmbuf_data_len(self.raw()) as usize;
            std::slice::from_raw_parts_mut(sys::ph_pktmbuf_data(self.raw()), len)
        }
    }
    fn set_len(&mut self, len: usize) {
        // SAFETY: a valid mbuf we own (the type's invariant); the wrapper refuses a length beyond
        // the buffer, so data_len never points past it.
        let ok = len <= u16::MAX as usize && unsafe { sys::ph_pktmbuf_set_len(self.raw(), len as u16) } == 0;
        assert!(ok, "frame length {len} exceeds the mbuf's capacity {}", self.capacity());
    }
    fn capacity(&self) -> usize {
        // SAFETY: reads two fields of a valid mbuf (the type's invariant).
        unsafe { sys::ph_pktmbuf_capacity(self.raw()) as usize }
    }

    /// Reads the frame's headers for what DPDK needs: the IP version, the IPv4 header checksum
    /// (left zero by the stack), the TCP or UDP checksum (holding the pseudo-header sum) and
    /// the header lengths. A frame that is not IP asks for nothing.
    fn request_checksums(&mut self) {
        let Some((request, l3_len)) = checksum_request(self.data()) else { return };
        // SAFETY: a valid mbuf we own (the type's invariant); the wrapper writes its tx offload
        // fields only.
        unsafe { sys::ph_pktmbuf_request_tx(self.raw(), request, ETHERNET_HEADER, l3_len, 0, 0) };
    }

    fn request_segmentation(&mut self, seg: Segmentation) {
        let family = if seg.ipv4 { REQ_IPV4 | REQ_IP_CKSUM } else { REQ_IPV6 };
        let request = family | sys::ph_tx_request_PH_REQ_TCP_CKSUM | sys::ph_tx_request_PH_REQ_TCP_SEG;
        // SAFETY: as in `request_checksums`.
        unsafe { sys::ph_pktmbuf_request_tx(self.raw(), request, seg.l2_len, seg.l3_len, seg.l4_len, seg.mss) };
    }
}

const ETHERNET_HEADER: u16 = 14;
const REQ_IPV4: u32 = sys::ph_tx_request_PH_REQ_IPV4;
const REQ_IPV6: u32 = sys::ph_tx_request_PH_REQ_IPV6;
const REQ_IP_CKSUM: u32 = sys::ph_tx_request_PH_REQ_IP_CKSUM;

/// What a frame whose checksums are left to the NIC asks for (`ph_tx_request` bits) and its IP
/// header's length; None for a frame that is not IPv4 or IPv6 (or too short to be).
fn checksum_request(frame: &[u8]) -> Option<(u32, u16)> {
    let ethertype = u16::from_be_bytes(frame.get(12..14)?.try_into().ok()?);
    let ip = frame.get(usize::from(ETHERNET_HEADER)..)?;
    let (family, l3_len, protocol) = match ethertype {
        0x0800 => (REQ_IPV4 | REQ_IP_CKSUM, u16::from(ip.first()? & 0x0f) * 4, *ip.get(9)?),
        0x86dd => (REQ_IPV6, 40, *ip.get(6)?),
        _ => return None,
    };
    let l4 = match protocol {
        6 => sys::ph_tx_request_PH_REQ_TCP_CKSUM,
        17 => sys::ph_tx_request_PH_REQ_UDP_CKSUM,
        _ => 0,
    };
    Some((family | l4, l3_len))
}

/// The EAL of this process; cleaned up when the last port that uses it is dropped.
struct Eal {
    runtime_dir: String,
    /// Set when mbufs were still held by the caller as the port closed: the EAL's memory must
    /// then outlive us (the process exit frees it).
    keep_memory: std::cell::Cell<bool>,
}

static EAL_STARTED: AtomicBool = AtomicBool::new(false);

impl Drop for Eal {
    fn drop(&mut self) {
        if !self.keep_memory.get() {
            // SAFETY: the last port of the process is closed and no mbuf is held (else
            // keep_memory), so nothing uses the EAL's memory again; EAL_STARTED stays set, so no
            // DPDK call follows in this process.
            unsafe { sys::rte_eal_cleanup() };
        }
        // --in-memory still creates the runtime directory (empty with --no-telemetry); remove it.
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// Makes the EAL's memseg arrays (per memseg list, the descriptors of its memory segments and
/// the mask of those in use) shared mappings instead of private ones, right after the EAL
/// started and before anything else of DPDK runs. With `--in-memory` the EAL maps them private
/// and anonymous and fills them at start (four of 388 KiB here), so every fork copied their
/// page tables and every child that touched them copied pages; a server that forks per
/// connection paid that each time (bench/fork_cost.sh: about a quarter of what a fork costs once
/// the NIC is open). Shared, a child maps what it reads on demand, and it sees the segments as
/// the parent does, not a copy of them as they were at the fork. A mapping that is not
/// exactly one array (private, anonymous, starting at the array, about its size) is left as it
/// is, as is one whose remap fails: only forks cost more then.
fn share_memseg_arrays() {
    const MAX: usize = 16;
    let mut addr = [std::ptr::null_mut::<libc::c_void>(); MAX];
    let mut elements_len = [0usize; MAX];
    // SAFETY: the EAL is up; the arrays hold MAX entries, which the call is told.
    let n = unsafe { sys::ph_memseg_arrays(addr.as_mut_ptr(), elements_len.as_mut_ptr(), MAX as i32) };
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    for k in 0..usize::try_from(n).unwrap_or(0).min(MAX) {
        let Some(len) = private_anonymous_mapping_at(&maps, addr[k] as usize) else { continue };
        // The elements, then the used-mask (a bit per element and a word), rounded to pages.
        let want = elements_len[k];
        if len < want || len > want + want / 8 + 2 * page {
            continue;
        }
        // SAFETY: [addr, addr + len) is one private anonymous read-write mapping of the EAL's,
        // which no other thread touches yet (the ports are not set up).
        unsafe { remap_shared(addr[k], len) };
    }
}

/// The length of the mapping in `maps` (/proc/self/maps) that starts at `start`, when it is
/// private, anonymous and read-write.
fn private_anonymous_mapping_at(maps: &str, start: usize) -> Option<usize> {
    maps.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (range, perms, _offset, _dev, inode) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let (a, b) = range.split_once('-')?;
        let (a, b) = (usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?);
        (a == start && perms == "rw-p" && inode == "0" && f.next().is_none()).then_some(b - a)
    })
}

/// Replaces the private mapping [addr, addr + len) by a shared one (a memfd) with the same
/// bytes at the same address. On any failure the private mapping stays, unchanged.
///
/// # Safety
/// [addr, addr + len) must be one read-write mapping that nothing writes meanwhile.
unsafe fn remap_shared(addr: *mut libc::c_void, len: usize) -> bool {
    // SAFETY: a NUL-terminated name; the fd is checked.
    let fd = unsafe { libc::memfd_create(c"pronghorn-memsegs".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: `fd` is the memfd just made; the new mapping is checked, written within its
    // length, and unmapped below; MAP_FIXED replaces exactly [addr, addr + len), which the
    // caller vouches for, with the same bytes.
    let done = unsafe {
        let mut ok = libc::ftruncate(fd, len as libc::off_t) == 0;
        if ok {
            let copy = libc::mmap(std::ptr::null_mut(), len, rw, libc::MAP_SHARED, fd, 0);
            ok = copy != libc::MAP_FAILED;
            if ok {
                std::ptr::copy_nonoverlapping(addr.cast::<u8>(), copy.cast::<u8>(), len);
                ok = libc::mmap(addr, len, rw, libc::MAP_SHARED | libc::MAP_FIXED, fd, 0) == addr;
                libc::munmap(copy, len);
            }
        }
        ok
    };
    // SAFETY: the memfd made above (its mapping keeps the memory).
    unsafe { libc::close(fd) };
    done
}

/// The most frames one burst call moves.
const BURST_MAX: usize = 64;

/// The started port the queues of a process share; dropped with the last of them.
struct Port {
    id: u16,
    /// The process's pool, created with the first port and never freed (see [`Mbuf`]).
    pool: *mut sys::rte_mempool,
    /// The mbufs the pool was created with.
    pool_size: u32,
    /// The pool of mbufs for frames the NIC segments (null without segmentation offload),
    /// never freed either.
    tso_pool: *mut sys::rte_mempool,
    /// The tx offloads enabled on the port.
    offloads: Offloads,
    setup_log: String,
    eal: Rc<Eal>,
    /// The interface queues held (released last, after every port of the process closed).
    claim: Option<Rc<QueueClaim>>,
    /// The interface queue this port drives.
    iface_queue: u16,
    /// The maps of pronghorn's XDP program, when the port attached it.
    xdp: Option<Rc<XdpMaps>>,
}

/// One rx and one tx queue of a started DPDK port: what one shard drives.
pub struct DpdkNic {
    port: Rc<Port>,
    /// The port's queue (0..shards), not the interface's.
    queue: u16,
    mac: MacAddr,
    mtu: u16,
    rx_fd: Option<RawFd>,
    /// Frames dropped on receive because they spanned several mbufs (never expected at our MTU).
    rx_multiseg_dropped: u64,
    /// The tx queue (a copy of it drives the lane once detached).
    tx: DpdkTx,
    /// The tx queue, when detached ([`Nic::detach_tx`]): `tx_burst` stages into it.
    lane: Option<Arc<TxLane<Mbuf>>>,
    /// Mbufs taken from the pool ahead of need: the application's threads are not DPDK lcores,
    /// so the pool has no per-thread cache for them and each single alloc is a ring dequeue
    /// (0.5% of mariadbd's time in point_select); one dequeue per [`ALLOC_BATCH`] instead.
    spare: Vec<NonNull<sys::rte_mbuf>>,
}

/// Mbufs taken from the pool at a time for [`DpdkNic::alloc`].
const ALLOC_BATCH: usize = 32;

impl Drop for DpdkNic {
    fn drop(&mut self) {
        // The last frames out, and the queue let go of, before the port can close.
        if let Some(lane) = &self.lane {
            lane.close();
        }
        // Back to the pool before the port (and maybe the pool) goes.
        for m in self.spare.drain(..) {
            // SAFETY: a spare is an mbuf `alloc` took from the pool and has not handed out.
            unsafe { sys::ph_pktmbuf_free(m.as_ptr()) };
        }
    }
}

impl DpdkNic {
    /// Checks the environment, starts the EAL and sets up the port with one queue. See the
    /// module doc.
    pub fn open(opts: &DpdkOptions) -> Result<DpdkNic, DpdkError> {
        let opts = DpdkOptions { shards: 1, ..opts.clone() };
        Ok(DpdkNic::open_shards(&opts)?.pop().expect("one queue"))
    }

    /// Like [`DpdkNic::open`], with `opts.shards` queues: one `DpdkNic` per queue, in order.
    pub fn open_shards(opts: &DpdkOptions) -> Result<Vec<DpdkNic>, DpdkError> {
        precheck(opts)?;
        let shards = opts.shards.max(1);
        if (opts.queues > 1 || shards > 1) && opts.pmd != Pmd::AfXdp {
            return Err(DpdkError::NotShareable {
                pmd: opts.pmd.clone(),
                iface: opts.iface.clone(),
                queues: opts.queues.max(shards),
            });
        }
        let claim = QueueClaim::first_free_run(&opts.iface, opts.queues, shards, opts.claim_patience)?;
        if EAL_STARTED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError::AlreadyInitialized);
        }
        let program = match opts.filtered() {
            Some(_) => Some(ObjectFile::new().map_err(|e| DpdkError::Port {
                pmd: opts.pmd.clone(),
                iface: opts.iface.clone(),
                detail: format!("cannot write the XDP program to a memory file: {e}"),
            })?),
            None => None,
        };
        let turn = claim.setup_turn()?;
        if opts.pmd == Pmd::AfXdp {
            if let Some(_alone) = claim.last_out() {
                // A failure here shows as the attach's own, below.
                let _ = crate::xdp::detach_leftover(&opts.iface);
            }
        }
        let (result, log) = capture_stdio(|| open_inner(opts, claim.queue(), program.as_ref()));
        drop(turn);
        let claim = Rc::new(claim);
        let mut ports = result.map_err(|e| explain(e, opts, &log))?;
        if let (Some(owner), Some((port, (mac, _, _)))) = (opts.filtered(), ports.first_mut()) {
            port.xdp = Some(Rc::new(configure_program(owner, *mac).map_err(|detail| DpdkError::Port {
                pmd: opts.pmd.clone(),
                iface: opts.iface.clone(),
                detail,
            })?));
        }
        Ok(ports
            .into_iter()
            .map(|(mut port, (mac, mtu, rx_fd))| {
                port.setup_log = log.clone();
                port.claim = Some(Rc::clone(&claim));
                let tx = DpdkTx {
                    port: port.id,
                    queue: 0,
                    prepare: port.offloads != Offloads::default(),
                    refused: Arc::default(),
                };
                DpdkNic {
                    port: Rc::new(port),
                    queue: 0,
                    mac,
                    mtu,
                    rx_fd,
                    rx_multiseg_dropped: 0,
                    tx,
                    lane: None,
                    spare: Vec::new(),
                }
            })
            .collect())
    }

    /// What DPDK, libbpf and libxdp printed while the port was set up.
    pub fn setup_log(&self) -> &str {
        &self.port.setup_log
    }

    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// The interface queue this drives (0 unless the interface is shared or the process has
    /// several shards, see `share`).
    pub fn queue(&self) -> u16 {
        self.port.iface_queue
    }

    /// Whether other processes may drive other queues of the interface (`nic.queues` > 1).
    pub fn shared(&self) -> bool {
        self.port.claim.as_ref().is_some_and(|c| c.shared())
    }

    /// Mbufs free in the pool (for leak checks and `stat`).
    pub fn pool_available(&self) -> u32 {
        // SAFETY: the pool of a port we hold (`self.port`), never freed; the count is a read.
        unsafe { sys::rte_mempool_avail_count(self.port.pool) }
    }

    pub fn rx_multiseg_dropped(&self) -> u64 {
        self.rx_multiseg_dropped
    }

    /// The maps of pronghorn's XDP program, when the port attached it (see
    /// [`DpdkOptions::xdp_owner`]).
    pub fn xdp_maps(&self) -> Option<&XdpMaps> {
        self.port.xdp.as_deref()
    }
}

/// Finds the maps of the XDP program the port attached and tells it what pronghorn owns.
fn configure_program(owner: &Owner, mac: MacAddr) -> Result<XdpMaps, String> {
    let maps = XdpMaps::find(&fds_linked(|link| link == "anon_inode:bpf-map")).ok_or(
        "the XDP program is attached but its maps (ph_config, ph_ports, ph_verdicts) are not among this process's fds",
    )?;
    maps.configure(owner, mac).map_err(|e| format!("cannot write the XDP program's ph_config map: {e}"))?;
    Ok(maps)
}

impl Drop for Port {
    fn drop(&mut self) {
        // Closing detaches the XDP program, which the other processes on a shared interface still
        // use: then the port stays open and the process exit closes its socket.
        let _others_kept_out = match self.claim.as_ref().map(|c| c.last_out()) {
            Some(None) => {
                self.eal.keep_memory.set(true);
                return;
            }
            Some(Some(guard)) => Some(guard),
            None => None,
        };
        // libxdp chats about the detach on stderr. Keep that quiet.
        let port = self.id;
        // SAFETY: the port was started in `open_inner` and this is its only close (a Port is
        // dropped once; its DpdkNic, the only user of its queues, is gone).
        let ((), _) = capture_stdio(|| unsafe {
            sys::rte_eth_dev_stop(port);
            sys::rte_eth_dev_close(port);
        });
        // An mbuf the caller still holds must never point into freed memory: then the pool and
        // the EAL's memory stay until the process exits.
        // SAFETY: the process's pool, never freed; the count is a read.
        if unsafe { sys::rte_mempool_in_use_count(self.pool) } > 0 {
            self.eal.keep_memory.set(true);
        }
    }
}

/// A started port's tx queue: what [`DpdkNic::tx_burst`] drives, or, once detached, its
/// [`TxLane`] from whichever thread sends.
#[derive(Clone)]
struct DpdkTx {
    port: u16,
    queue: u16,
    /// Whether the port has tx offloads (frames go through `rte_eth_tx_prepare` first).
    prepare: bool,
    /// Frames `rte_eth_tx_prepare` refused (offload requests this PMD cannot honour), dropped
    /// and counted in `oerrors`; shared by the copies.
    refused: Arc<AtomicU64>,
}

// SAFETY: a port id and a queue number. DPDK's contract for every PMD is per queue: one thread
// at a time may drive a tx queue (here the lane's gate, or the NIC's `&mut self`), whichever
// thread that is, while another drives the port's rx queue (its pipeline model: rx and tx of a
// port on different lcores). For af_xdp in 22.11, checked in its source: tx touches the tx
// ring and the completion ring, rx the rx and fill rings; what they share, the mbufs' pool
// and the umem's buffer ring, takes concurrent use.
unsafe impl Send for DpdkTx {}

/// Staged frames a stack pass sends under the lock instead of leaving them to the lane's
/// sender (see [`DpdkNic::tx_burst`]).
const SEND_UNDER_LOCK: usize = 2 * BURST_MAX;

impl TxQueue<Mbuf> for DpdkTx {
    fn tx_burst(&mut self, bufs: &mut Vec<Mbuf>) -> usize {
        let mut total = 0;
        while total < bufs.len() {
            let chunk = &bufs[total..(total + BURST_MAX).min(bufs.len())];
            let mut raw = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST_MAX];
            for (slot, b) in raw.iter_mut().zip(chunk) {
                *slot = b.raw();
            }
            let mut ready = chunk.len();
            if self.prepare {
                // SAFETY: as below; tx_prepare reads and may adjust the mbufs' headers and
                // offload fields, and takes none of them.
                ready = unsafe { sys::ph_tx_prepare(self.port, self.queue, raw.as_mut_ptr(), ready as u16) } as usize;
            }
            // SAFETY: a started port's queue, driven by one thread at a time (`&mut self`:
            // the NIC's, or the lane's gate); `raw` holds chunk.len() >= ready valid mbufs we
            // own, and the PMD takes the first `sent` (forgotten below) and leaves the rest to us.
            let sent = unsafe { sys::ph_tx_burst(self.port, self.queue, raw.as_mut_ptr(), ready as u16) } as usize;
            total += sent;
            if sent == ready && ready < chunk.len() {
                // The frame after them asks for what this PMD cannot do: it goes, counted.
                drop(bufs.remove(total));
                self.refused.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if sent < chunk.len() {
                break;
            }
        }
        // The driver owns the sent mbufs now.
        for b in bufs.drain(..total) {
            std::mem::forget(b);
        }
        total
    }
}

impl Nic for DpdkNic {
    type Buf = Mbuf;

    fn rx_burst(&mut self, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let mut raw = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST_MAX];
        let want = max.min(BURST_MAX) as u16;
        // SAFETY: a started port and its queue, which only this DpdkNic polls (`&mut self`, not
        // Send); the PMD writes at most `want` <= BURST_MAX pointers into `raw`.
        let n = unsafe { sys::ph_rx_burst(self.port.id, self.queue, raw.as_mut_ptr(), want) } as usize;
        let mut kept = 0;
        for &m in &raw[..n] {
            let buf = Mbuf(NonNull::new(m).expect("PMD returned a null mbuf"));
            // SAFETY: a valid mbuf the PMD just handed over (now owned by `buf`).
            if unsafe { sys::ph_pktmbuf_nb_segs(m) } != 1 {
                self.rx_multiseg_dropped += 1;
                continue;
            }
            out.push(buf);
            kept += 1;
        }
        kept
    }

    fn tx_burst(&mut self, bufs: &mut Vec<Mbuf>) -> usize {
        let Some(lane) = &self.lane else {
            return self.tx.tx_burst(bufs);
        };
        let n = bufs.len();
        // A pass that makes many frames (a bulk sender) sends as it goes, under the lock, as
        // before: what the lane saves is a request's few frames and their kick.
        if lane.stage(bufs) >= SEND_UNDER_LOCK {
            lane.send();
        }
        n
    }

    fn alloc(&mut self) -> Option<Mbuf> {
        if self.spare.is_empty() {
            let mut raw = [std::ptr::null_mut::<sys::rte_mbuf>(); ALLOC_BATCH];
            // SAFETY: the pool of a port we hold; on success the pool fills all ALLOC_BATCH slots
            // of `raw` with mbufs that are ours, on failure none.
            let ok = unsafe { sys::ph_pktmbuf_alloc_bulk(self.port.pool, raw.as_mut_ptr(), ALLOC_BATCH as u32) } == 0;
            if !ok {
                // The pool is nearly empty: what is left goes one at a time.
                // SAFETY: the pool of a port we hold; a non-null result is an mbuf that is ours.
                return NonNull::new(unsafe { sys::ph_pktmbuf_alloc(self.port.pool) }).map(Mbuf);
            }
            // Popped from the end: hand them out in the pool's order.
            self.spare.extend(raw.iter().rev().filter_map(|&m| NonNull::new(m)));
        }
        self.spare.pop().map(Mbuf)
    }

    fn alloc_tso(&mut self) -> Option<Mbuf> {
        if self.port.tso_pool.is_null() {
            return None;
        }
        // SAFETY: the TSO pool of a port we hold (non-null: created with the offload, never
        // freed); a non-null result is an mbuf that is ours.
        NonNull::new(unsafe { sys::ph_pktmbuf_alloc(self.port.tso_pool) }).map(Mbuf)
    }

    fn offloads(&self) -> Offloads {
        self.port.offloads
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn mtu(&self) -> u16 {
        self.mtu
    }

    fn link(&self) -> Link {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: a valid port id; DPDK writes only the struct it is given, which outlives the call.
        unsafe { sys::rte_eth_link_get_nowait(self.port.id, &mut l) };
        Link { up: l.link_status() != 0, speed_mbps: l.link_speed }
    }

    fn stats(&self) -> NicStats {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: a valid port id; DPDK writes only the struct it is given, which outlives the call.
        unsafe { sys::rte_eth_stats_get(self.port.id, &mut s) };
        let xsk = self.rx_fd.and_then(xsk_statistics);
        let xdp = self.port.xdp.as_ref().map(|m| m.verdicts()).unwrap_or_default();
        NicStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors
                + self.tx.refused.load(Ordering::Relaxed)
                + self.lane.as_ref().map_or(0, |l| l.dropped()),
            rx_nombuf: s.rx_nombuf,
            rx_ring_full: xsk.map_or(0, |x| x.rx_ring_full),
            tx_invalid: xsk.map_or(0, |x| x.tx_invalid_descs),
            xdp_redirected: xdp.redirected,
            xdp_passed: xdp.passed,
            xdp_no_socket: xdp.no_socket,
        }
    }

    fn successor_waits(&self) -> bool {
        self.port.claim.as_ref().is_some_and(|c| c.successor_waits())
    }

    fn rx_interrupt_fd(&self) -> Option<RawFd> {
        self.rx_fd
    }

    fn detach_tx(&mut self) -> Option<Arc<dyn TxSender>> {
        if self.lane.is_some() {
            return None;
        }
        let lane = TxLane::new(Box::new(self.tx.clone()));
        self.lane = Some(lane.clone());
        Some(lane)
    }

    fn pool_usage(&self) -> Option<(u64, u64)> {
        // One count, not DPDK's avail and in-use counts: each walks the pool's 128 lcore caches
        // (the in-use count is the size less the avail count).
        let free = u64::from(self.pool_available());
        let size = u64::from(self.port.pool_size);
        // The spares are free as far as anyone who reads this is concerned.
        let spare = self.spare.len() as u64;
        Some((size.saturating_sub(free).saturating_sub(spare), size))
    }
}

/// The capabilities a process that is not root needs to open a port (`NIC_CAPABILITIES`),
/// all in its effective set: a server exec'd by a wrapper that dropped root and passed them on
/// as ambient capabilities (`setpriv --inh-caps=... --ambient-caps=...`).
fn has_nic_capabilities() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    NIC_CAPABILITIES.iter().all(|&(bit, _)| effective & (1 << bit) != 0)
}

/// What opening a port takes besides root's uid (number, name): the queue locks and run
/// directories root made (dac_override), AF_XDP sockets, the XDP program and its maps, locked
/// UMEM and hugepage memory.
pub const NIC_CAPABILITIES: [(u32, &str); 6] =
    [(1, "dac_override"), (12, "net_admin"), (13, "net_raw"), (14, "ipc_lock"), (21, "sys_admin"), (39, "bpf")];

/// The checks that turn the usual failures into one clear line before DPDK prints pages of log
/// (also run before the port is needed, to report them early).
pub fn precheck(opts: &DpdkOptions) -> Result<(), DpdkError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 && !has_nic_capabilities() {
        return Err(DpdkError::NotRoot { pmd: opts.pmd.clone() });
    }
    let name =
        CString::new(opts.iface.as_str()).map_err(|_| DpdkError::NoSuchInterface { iface: opts.iface.clone() })?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    if unsafe { libc::if_nametoindex(name.as_ptr()) } == 0 {
        return Err(DpdkError::NoSuchInterface { iface: opts.iface.clone() });
    }
    if let Some(vdev) = vdev_without_driver(&opts.eal_args) {
        let detail = format!("--vdev {vdev}: no net_ driver of that name");
        return Err(DpdkError::DriverNotLinked { detail });
    }
    let no_huge = opts.eal_args.iter().any(|a| a == "--no-huge");
    if !no_huge && free_hugepages() == 0 {
        return Err(DpdkError::NoHugepages);
    }
    Ok(())
}

/// The first `--vdev` of `eal_args` whose device name (`net_null0,opt=..`) starts with `net_` and
/// with no linked `net_` driver's name, as the vdev bus matches them: asked before the EAL starts,
/// the answer does not depend on hugepages or root. Other names (aliases such as `eth_ring0`)
/// are left to the EAL.
fn vdev_without_driver(eal_args: &[String]) -> Option<&str> {
    let mut args = eal_args.iter();
    while let Some(arg) = args.next() {
        let device = match arg.strip_prefix("--vdev") {
            Some("") => args.next().map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        };
        let Some(name) = device.map(|d| d.split(',').next().unwrap_or(d)) else { continue };
        let linked = || sys::LINKED_DRIVERS.iter().any(|d| d.starts_with("net_") && name.starts_with(d));
        if name.starts_with("net_") && !linked() {
            return Some(name);
        }
    }
    None
}

/// Free hugepages of every size that no mapping has reserved yet, from sysfs (works in any
/// network namespace). `free_hugepages` counts pages another process has reserved but not
/// touched (`resv_hugepages`): a new process cannot have those, and an EAL that counted on them
/// failed later with an unclear message ("rte_service_init() failed").
pub fn free_hugepages() -> u64 {
    let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/hugepages") else { return 0 };
    let read = |d: &std::path::Path, name: &str| {
        std::fs::read_to_string(d.join(name)).ok().and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0)
    };
    dir.flatten().map(|e| e.path()).map(|d| read(&d, "free_hugepages").saturating_sub(read(&d, "resv_hugepages"))).sum()
}

/// How long an AF_XDP queue's setup is tried again while it fails ([`setup_rx_queue`]).
const XSK_SETUP_RETRY: std::time::Duration = std::time::Duration::from_secs(3);

/// Sets up the port's rx queue (a null rxconf: the defaults) and returns DPDK's code. On
/// af_xdp a failure is tried again for up to [`XSK_SETUP_RETRY`]: Linux detaches an AF_XDP
/// socket's buffer pool from its queue in deferred work, under the RTNL lock, after the socket
/// is released, so a process started just after the previous one on the interface was killed
/// (a restarted server) can find the queue still taken (the bind's EBUSY, which DPDK reports as
/// EINVAL). On a loaded machine that took long enough to fail lab tests that start a second
/// server right after the first. The PMD frees what a failed setup made, so a retry starts clean.
fn setup_rx_queue(port: u16, opts: &DpdkOptions, socket: i32, pool: *mut sys::rte_mempool) -> i32 {
    let deadline = std::time::Instant::now() + XSK_SETUP_RETRY;
    loop {
        // SAFETY: a configured port with one rx queue; a null rxconf asks for the defaults, and
        // `pool` is non-null (checked by the caller) and never freed.
        let rc = unsafe { sys::rte_eth_rx_queue_setup(port, 0, opts.rx_desc, socket as u32, std::ptr::null(), pool) };
        if rc == 0 || opts.pmd != Pmd::AfXdp || std::time::Instant::now() >= deadline {
            return rc;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Internal failure before it is explained with the captured log.
enum Failure {
    EalInit { errno: i32 },
    PortMissing,
    Port(String),
}

/// Per queue of the port: (queue, MAC, MTU, the socket that is readable when frames wait).
type QueueSetup = (MacAddr, u16, Option<RawFd>);

fn open_inner(
    opts: &DpdkOptions,
    queue: u16,
    program: Option<&ObjectFile>,
) -> Result<Vec<(Port, QueueSetup)>, Failure> {
    let prefix = format!("pronghorn-{}", std::process::id());
    let runtime_dir = this_eal_runtime_dir();
    debug_assert!(runtime_dir.ends_with(&format!("/dpdk/{prefix}")));
    // SAFETY: getuid takes no memory and cannot fail.
    if unsafe { libc::getuid() } != 0 {
        if let Some(parent) = std::path::Path::new(&runtime_dir).parent() {
            sweep_dead_runtime_dirs(parent, process_exists);
        }
    }
    let saved_affinity = current_affinity();
    // SAFETY: every `c` is below CPU_SETSIZE, the number of bits in the set.
    let first_cpu =
        (0..libc::CPU_SETSIZE as usize).find(|&c| unsafe { libc::CPU_ISSET(c, &saved_affinity) }).unwrap_or(0);
    let mut args: Vec<String> = vec![
        "pronghorn".into(),
        "--in-memory".into(),
        "--no-pci".into(),
        "--no-telemetry".into(),
        "--file-prefix".into(),
        prefix.clone(),
        "-l".into(),
        opts.lcore.map_or(first_cpu, |c| c as usize).to_string(),
    ];
    let shards = opts.shards.max(1);
    for k in 0..shards {
        args.extend(["--vdev".into(), opts.vdev(k, queue + k, program.map(ObjectFile::path).as_deref())]);
    }
    args.extend(opts.eal_args.iter().cloned());
    // af_packet opens its socket while the EAL probes the vdev, af_xdp at queue setup: look for
    // the PMD's sockets among everything opened from here on.
    let fds_at_start = fds_linked(|_| true);
    let mut fds_before = queue_fds(&opts.pmd);
    let cargs: Vec<CString> = args.iter().map(|a| CString::new(a.as_str()).unwrap_or_default()).collect();
    let mut argv: Vec<*mut libc::c_char> = cargs.iter().map(|a| a.as_ptr() as *mut libc::c_char).collect();
    argv.push(std::ptr::null_mut());
    // SAFETY: once per process (EAL_STARTED, checked by the caller); `argv` is a null-terminated
    // array of NUL-terminated strings (`cargs`) that outlive the call. getopt permutes the array,
    // never the strings, and the EAL copies the arguments it keeps (eal_save_args, strdup).
    let rc = unsafe { sys::rte_eal_init(cargs.len() as i32, argv.as_mut_ptr()) };
    // The EAL pins the calling thread to its main lcore; the application keeps the CPUs it had.
    // SAFETY: the kernel reads `size` bytes of the set it is given, which outlives the call.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &saved_affinity) };
    if rc < 0 {
        // SAFETY: reads this thread's rte_errno, which any thread may do.
        let errno = unsafe { sys::ph_errno() };
        // An EAL that fails after creating its run directory (a `--vdev` no linked driver
        // parses) leaves it behind, empty: this process's own, so it goes.
        let _ = std::fs::remove_dir(&runtime_dir);
        return Err(Failure::EalInit { errno });
    }
    let eal = Rc::new(Eal { runtime_dir, keep_memory: std::cell::Cell::new(false) });
    share_memseg_arrays();

    let mut pool: *mut sys::rte_mempool = std::ptr::null_mut();
    let mut tso_pool: *mut sys::rte_mempool = std::ptr::null_mut();
    let mut ports = Vec::with_capacity(usize::from(shards));
    for k in 0..shards {
        let name = CString::new(opts.port_name(k)).unwrap();
        let mut port: u16 = 0;
        // SAFETY: a NUL-terminated name and a u16 to write, both outliving the call.
        if unsafe { sys::rte_eth_dev_get_port_by_name(name.as_ptr(), &mut port) } != 0 {
            return Err(Failure::PortMissing);
        }
        let socket = match opts.pool_node {
            Some(node) => node as i32,
            // SAFETY: `port` is the id DPDK just gave for the vdev; this reads its NUMA node.
            None => unsafe { sys::rte_eth_dev_socket_id(port) },
        };
        // One pool for every port of the process.
        if pool.is_null() {
            let pool_name = CString::new("ph_pool").unwrap();
            // A LIFO pool: the mbuf freed last is the next one handed out, still in the cache.
            // The default ring pool is FIFO and the application threads are not lcores (no
            // per-lcore cache in front of it), so every frame sent went through the least
            // recently used of the pool's 8191 mbufs (18 MiB walked between two uses of one),
            // missing the cache on its header and data lines. The lock-free stack first: the
            // threads that use the pool are preemptible, and since the tx lane (`lane`) one of
            // them frees the sent mbufs outside the runtime's lock, so a spinlock ("stack")
            // preempted in one thread would keep the lock's holder spinning. Then "stack",
            // then the ring pool where neither driver is there.
            for driver in ["lf_stack", "stack"] {
                let ops = CString::new(driver).unwrap();
                // SAFETY: the EAL is up; NUL-terminated names that outlive the call; a null
                // result is checked (then the next driver is tried).
                pool = unsafe {
                    sys::rte_pktmbuf_pool_create_by_ops(
                        pool_name.as_ptr(),
                        opts.pool_size,
                        256,
                        0,
                        sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                        socket,
                        ops.as_ptr(),
                    )
                };
                if !pool.is_null() {
                    break;
                }
            }
            if pool.is_null() {
                // SAFETY: as above, with DPDK's default (ring) pool driver.
                pool = unsafe {
                    sys::rte_pktmbuf_pool_create(
                        pool_name.as_ptr(),
                        opts.pool_size,
                        256,
                        0,
                        sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                        socket,
                    )
                };
            }
            if pool.is_null() {
                return Err(Failure::Port(format!(
                    "cannot create a pool of {} mbufs: {} (reserve more hugepages)",
                    opts.pool_size,
                    // SAFETY: reads this thread's rte_errno.
                    rte_strerror(unsafe { sys::ph_errno() })
                )));
            }
        }
        // SAFETY: a valid port; the wrapper reads its rte_eth_dev_info.
        let offered = unsafe { sys::ph_eth_tx_offload_capa(port) };
        let tx_offloads = if opts.offloads { usable_tx_offloads(offered) } else { 0 };
        // SAFETY: a valid, stopped port; the wrapper configures one rx and one tx queue.
        let rc = unsafe { sys::ph_eth_configure(port, tx_offloads) };
        check(rc, "configure")?;
        let offloads = offloads_of(tx_offloads, &opts.pmd);
        if offloads.tx_tcp_segmentation && tso_pool.is_null() {
            tso_pool = create_tso_pool(socket)?;
        }
        // The PMDs of 22.11 have no rx interrupt, but the AF_XDP / AF_PACKET socket (a tap's
        // queue fd) is itself readable when frames wait: find the one the queue's setup created
        // (af_packet's, opened at probe, is new at the first; a tap's keep-alive fd, opened at
        // probe too, is not a queue's).
        if opts.pmd == Pmd::Tap {
            fds_before = queue_fds(&opts.pmd);
        }
        let rc = setup_rx_queue(port, opts, socket, pool);
        check(rc, "rx queue setup")?;
        // SAFETY: a configured port with one tx queue; a null txconf asks for the defaults.
        let rc = unsafe { sys::rte_eth_tx_queue_setup(port, 0, opts.tx_desc, socket as u32, std::ptr::null()) };
        check(rc, "tx queue setup")?;
        let now = queue_fds(&opts.pmd);
        let rx_fd = now
            .iter()
            .copied()
            .filter(|fd| !fds_before.contains(fd))
            .find(|&fd| opts.pmd.socket_domain().map_or(true, |d| socket_domain(fd) == Some(d)));
        fds_before = now;
        // SAFETY: a configured port whose queues are set up.
        let rc = unsafe { sys::rte_eth_dev_start(port) };
        if rc != 0 {
            // SAFETY: the port failed to start and is closed once, here; no Port owns it yet.
            unsafe { sys::rte_eth_dev_close(port) };
            return Err(Failure::Port(format!("start: {}", rte_strerror(-rc))));
        }
        let mut mac = sys::rte_ether_addr::default();
        // SAFETY: a valid port; DPDK writes only the address it is given, which outlives the call.
        unsafe { sys::rte_eth_macaddr_get(port, &mut mac) };
        let mut mtu: u16 = 1500;
        // SAFETY: a valid port; DPDK writes only the u16 it is given.
        unsafe { sys::rte_eth_dev_get_mtu(port, &mut mtu) };
        if opts.pmd == Pmd::Tap && offloads.tx_tcp_segmentation {
            // net_tap (22.11) refuses to segment a frame whose pieces, Ethernet header
            // included, exceed the port's MTU (`tso_segsz + l2_len + l3_len + l4_len > mtu`),
            // and DPDK caps the port's MTU at 1504 for its 1522-byte frames: the stack takes
            // the MTU less the Ethernet header, so that a full piece passes.
            mtu -= ETHERNET_HEADER;
        }
        let p = Port {
            id: port,
            pool,
            pool_size: opts.pool_size,
            tso_pool,
            offloads,
            setup_log: String::new(),
            eal: Rc::clone(&eal),
            claim: None,
            iface_queue: queue + k,
            xdp: None,
        };
        ports.push((p, (MacAddr(mac.addr_bytes), mtu, rx_fd)));
    }
    close_nic_fds_on_exec(&fds_at_start, opts.pmd.socket_domain());
    Ok(ports)
}

fn check(rc: i32, what: &str) -> Result<(), Failure> {
    if rc < 0 {
        Err(Failure::Port(format!("{what}: {}", rte_strerror(-rc))))
    } else {
        Ok(())
    }
}

fn rte_strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a non-null NUL-terminated string (static, or this thread's
    // buffer until its next call), copied here before anything else runs on the thread.
    unsafe { CStr::from_ptr(sys::rte_strerror(errno)) }.to_string_lossy().into_owned()
}

/// Turns an internal failure and the captured DPDK output into the one line a person reads.
fn explain(f: Failure, opts: &DpdkOptions, log: &str) -> DpdkError {
    let detail = last_error_line(log);
    let driver_missing = |log: &str| {
        log.contains("failed to parse device") || log.contains("no driver found") || log.contains("Cannot find driver")
    };
    match f {
        Failure::EalInit { errno } => {
            if driver_missing(log) {
                DpdkError::DriverNotLinked { detail }
            } else if errno == libc::EINVAL
                && (log.contains("Usage:") || log.contains("invalid") || log.contains("unrecognized"))
            {
                DpdkError::BadEalArgs { args: opts.eal_args.clone(), detail }
            } else if (log.contains("hugepage") && log.contains("Cannot"))
                || (!opts.eal_args.iter().any(|a| a == "--no-huge") && free_hugepages() == 0)
            {
                // The second: the pages the precheck saw free were taken before the EAL's
                // allocations (another process), which then fail wherever they come first
                // (`rte_service_init() failed`): the cause is still that none is free.
                DpdkError::NoHugepages
            } else {
                DpdkError::EalInit { detail: if detail.is_empty() { rte_strerror(errno) } else { detail } }
            }
        }
        Failure::PortMissing => {
            if driver_missing(log) || !log.contains(opts.pmd.driver()) {
                DpdkError::DriverNotLinked { detail }
            } else {
                DpdkError::Port { pmd: opts.pmd.clone(), iface: opts.iface.clone(), detail }
            }
        }
        Failure::Port(msg) => {
            let detail = if detail.is_empty() { msg } else { format!("{msg} ({detail})") };
            DpdkError::Port { pmd: opts.pmd.clone(), iface: opts.iface.clone(), detail }
        }
    }
}

/// The most telling line of DPDK's output: the last one that reads like an error.
fn last_error_line(log: &str) -> String {
    let lines: Vec<&str> = log.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    // getopt names the argument itself ("unrecognized option '--x'"): that beats EAL's summary.
    let getopt = ["unrecognized option", "invalid option", "requires an argument"];
    if let Some(l) = lines.iter().find(|l| getopt.iter().any(|g| l.contains(g))) {
        return l.to_string();
    }
    let is_error = |l: &&&str| {
        let lc = l.to_ascii_lowercase();
        (lc.contains("error")
            || lc.contains("fail")
            || lc.contains("cannot")
            || lc.contains("invalid")
            || lc.contains("unrecognized")
            || lc.contains("no such"))
            && !lc.starts_with("usage")
    };
    lines.iter().rev().find(is_error).or(lines.last()).map(|s| s.to_string()).unwrap_or_default()
}

fn current_affinity() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is an array of integers, for which all zeroes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most `size` bytes into the set it is given.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    set
}

/// The fds this process has open whose /proc/self/fd link (`socket:[N]`, `anon_inode:bpf-map`,
/// a path) `keep` accepts.
fn fds_linked(keep: impl Fn(&str) -> bool) -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()))
        .filter(|&fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| keep(&p.to_string_lossy())))
        .collect()
}

/// The fds this process has open that may be queues of `pmd`'s ports.
fn queue_fds(pmd: &Pmd) -> Vec<RawFd> {
    fds_linked(|link| pmd.queue_fd_link(link))
}

/// The tx offloads (`ph_tx_offload` bits) of those `offered` that the stack can use: the IPv4
/// header checksum, the TCP and UDP checksums (both or neither: the stack leaves both to the
/// NIC or neither), and TCP segmentation where the PMD does all three.
fn usable_tx_offloads(offered: u32) -> u32 {
    let ipv4 = sys::ph_tx_offload_PH_TX_IPV4_CKSUM;
    let l4 = sys::ph_tx_offload_PH_TX_TCP_CKSUM | sys::ph_tx_offload_PH_TX_UDP_CKSUM;
    let tso = sys::ph_tx_offload_PH_TX_TCP_TSO;
    let mut usable = offered & ipv4;
    if offered & l4 == l4 {
        usable |= l4;
    }
    if offered & tso != 0 && usable == ipv4 | l4 {
        usable |= tso;
    }
    usable
}

/// What the stack is told of the tx offloads enabled (`ph_tx_offload` bits) on a `pmd` port.
fn offloads_of(enabled: u32, pmd: &Pmd) -> Offloads {
    let has = |bit: u32| enabled & bit != 0;
    let tso = has(sys::ph_tx_offload_PH_TX_TCP_TSO);
    Offloads {
        tx_ipv4_checksum: has(sys::ph_tx_offload_PH_TX_IPV4_CKSUM),
        tx_l4_checksum: has(sys::ph_tx_offload_PH_TX_TCP_CKSUM),
        tx_tcp_segmentation: tso,
        tx_tcp6_segmentation: tso && pmd.segments_ipv6(),
        ..Offloads::default()
    }
}

/// Mbufs in the pool for frames the NIC segments (16 MiB): net_tap frees each in the tx burst
/// that writes it, a NIC when its tx ring is done with it; while all are in use the stack sends
/// MSS-sized frames.
const TSO_POOL_SIZE: u32 = 255;

/// The pool of mbufs that hold [`TSO_MAX_FRAME`] bytes after their headroom.
fn create_tso_pool(socket: i32) -> Result<*mut sys::rte_mempool, Failure> {
    let name = CString::new("ph_tso_pool").unwrap();
    let room = (sys::RTE_PKTMBUF_HEADROOM as usize + TSO_MAX_FRAME) as u16;
    // SAFETY: the EAL is up; a NUL-terminated name that outlives the call; a null result is
    // checked below.
    let pool = unsafe { sys::rte_pktmbuf_pool_create(name.as_ptr(), TSO_POOL_SIZE, 0, 0, room, socket) };
    if pool.is_null() {
        return Err(Failure::Port(format!(
            "cannot create a pool of {TSO_POOL_SIZE} mbufs of 64 KiB for TCP segmentation offload: {} (reserve more hugepages, or set nic.offloads = false)",
            // SAFETY: reads this thread's rte_errno.
            rte_strerror(unsafe { sys::ph_errno() })
        )));
    }
    Ok(pool)
}

/// Sets close-on-exec on the fds the port opened since `before`: its AF_XDP or AF_PACKET
/// sockets and the BPF maps and programs libxdp keeps. DPDK opens some without it, and a program
/// the server execs (a helper, perhaps after the server dropped root) must not inherit a
/// socket that receives and sends raw frames on the interface. Other fds opened meanwhile (by
/// the application's other threads) are left as they are.
fn close_nic_fds_on_exec(before: &[RawFd], domain: Option<libc::c_int>) {
    let nic_fds =
        fds_linked(|link| link.starts_with("socket:") || link.starts_with("anon_inode:bpf") || link == TUN_DEVICE);
    for fd in nic_fds.into_iter().filter(|fd| !before.contains(fd)) {
        if socket_domain(fd).is_some_and(|d| Some(d) != domain) {
            continue;
        }
        // SAFETY: F_GETFD and F_SETFD take and touch no memory; on an fd closed meanwhile they
        // fail with EBADF. Only the close-on-exec flag of a fd the port's setup opened changes.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// The kernel's counters of an AF_XDP socket (None for another socket: af_packet's).
fn xsk_statistics(fd: RawFd) -> Option<libc::xdp_statistics> {
    // SAFETY: xdp_statistics is plain integers; the kernel writes at most `len` bytes.
    let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `st` and the length into `len`, both of
    // which outlive the call; another socket's fd fails with ENOPROTOOPT.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut st as *mut libc::xdp_statistics).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(st)
}

fn socket_domain(fd: RawFd) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v` and the length into `len`.
    let rc = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_DOMAIN, &mut v as *mut _ as *mut libc::c_void, &mut len)
    };
    (rc == 0).then_some(v)
}

/// Runs `f` with the process's stdout and stderr sent to a memory file, and returns what was
/// written there. DPDK, libbpf and libxdp all print straight to these fds. What other threads
/// write meanwhile is captured too (and may interleave).
pub fn capture_stdio<R>(f: impl FnOnce() -> R) -> (R, String) {
    // SAFETY: a NUL-terminated name; the result is checked before use.
    let mem = unsafe { libc::memfd_create(c"pronghorn-dpdk-log".as_ptr(), libc::MFD_CLOEXEC) };
    if mem < 0 {
        return (f(), String::new());
    }
    // SAFETY: a fresh fd that nothing else owns: the File closes it.
    let mut file = unsafe { std::fs::File::from_raw_fd(mem) };
    // SAFETY: fflush(NULL) flushes every C stream; dup and dup2 take no memory, and fds 1 and 2
    // are the process's to redirect (a failed dup leaves -1, on which dup2 and close fail with
    // EBADF). `mem` stays open in `file` until after the redirection is undone.
    let saved = unsafe {
        libc::fflush(std::ptr::null_mut());
        let saved = (libc::dup(1), libc::dup(2));
        libc::dup2(mem, 1);
        libc::dup2(mem, 2);
        saved
    };
    let r = f();
    // SAFETY: as above; `saved` are the fds the dups made, closed once, here.
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::dup2(saved.0, 1);
        libc::dup2(saved.1, 2);
        libc::close(saved.0);
        libc::close(saved.1);
    }
    let mut bytes = Vec::new();
    let _ = std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0));
    let _ = file.read_to_end(&mut bytes);
    (r, String::from_utf8_lossy(&bytes).into_owned())
}

/// The directory the EAL of process `pid` keeps (even with `--in-memory`) when the process runs
/// as root (uid 0): removed when the port closes, or by whoever cleans up after the process
/// (the cleanup helper, which only a root process starts; `pronghorn doctor`).
pub fn runtime_dir_of(pid: u32) -> String {
    eal_runtime_dir(pid, 0, None)
}

/// The directory the EAL of process `pid` makes, as DPDK 22.11 chooses it
/// (`eal_create_runtime_dir`): under /var/run for uid 0, else under `$XDG_RUNTIME_DIR`, else
/// under /tmp. A server that runs as its own user with the NIC's capabilities (PostgreSQL under
/// setpriv) gets /tmp/dpdk/pronghorn-PID: its close must remove that one (until stop 36 the
/// port's close removed the /var/run path, and each such run left an empty directory in /tmp).
fn eal_runtime_dir(pid: u32, uid: libc::uid_t, xdg_runtime_dir: Option<&str>) -> String {
    let base = match (uid, xdg_runtime_dir) {
        (0, _) => "/var/run",
        (_, Some(xdg)) => xdg,
        (_, None) => "/tmp",
    };
    format!("{base}/dpdk/pronghorn-{pid}")
}

/// Removes the EAL directories that processes which were not root left in `parent` (the
/// `dpdk` directory of /tmp or of `$XDG_RUNTIME_DIR`) when they died without closing their
/// port (a signal, a crash): nobody else does, since only a root process has a cleanup helper
/// and `pronghorn doctor` looks under /var/run. A directory goes only when its name is
/// `pronghorn-<pid>`, that pid is gone (`alive` says no), no keeper carries its port on (a
/// `<dir>.keeper` file beside it or beside root's directory of that pid) and it is empty
/// (`remove_dir` fails otherwise). A pid reused by an unrelated process keeps its directory
/// until that one ends. Returns how many went.
fn sweep_dead_runtime_dirs(parent: &std::path::Path, alive: impl Fn(u32) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("pronghorn-")).and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let dir = entry.path();
        let keeper_beside = dir.with_file_name(format!("pronghorn-{pid}.keeper"));
        let keeper_of_root = format!("{}.keeper", runtime_dir_of(pid));
        if pid == std::process::id()
            || alive(pid)
            || keeper_beside.exists()
            || std::path::Path::new(&keeper_of_root).exists()
        {
            continue;
        }
        if std::fs::remove_dir(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether process `pid` exists (kill with signal 0: EPERM means it does, as another user's).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: kill with signal 0 sends nothing; it takes integers only.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// The directory the EAL of process `pid` makes when it runs as `uid` with this process's
/// environment (`$XDG_RUNTIME_DIR`): see [`runtime_dir_of`] for root's.
pub fn runtime_dir_for(pid: u32, uid: libc::uid_t) -> String {
    eal_runtime_dir(pid, uid, std::env::var("XDG_RUNTIME_DIR").ok().as_deref())
}

/// [`eal_runtime_dir`] of this process, as its EAL starts now.
fn this_eal_runtime_dir() -> String {
    // SAFETY: getuid takes no memory and cannot fail.
    runtime_dir_for(std::process::id(), unsafe { libc::getuid() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eal_directory_is_where_dpdk_puts_it_for_the_process_user() {
        assert_eq!(runtime_dir_of(7), "/var/run/dpdk/pronghorn-7");
        assert_eq!(eal_runtime_dir(7, 0, Some("/run/user/0")), "/var/run/dpdk/pronghorn-7", "root: /var/run");
        assert_eq!(eal_runtime_dir(7, 116, None), "/tmp/dpdk/pronghorn-7", "postgres under setpriv");
        assert_eq!(eal_runtime_dir(7, 1000, Some("/run/user/1000")), "/run/user/1000/dpdk/pronghorn-7");
    }

    #[test]
    fn the_empty_directories_of_dead_processes_are_swept_and_nothing_else() {
        let parent = std::env::temp_dir().join(format!("pronghorn-sweep-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        let me = std::process::id();
        let dirs = ["pronghorn-101", "pronghorn-102", "pronghorn-103", "pronghorn-104", "other-105", "pronghorn-x"];
        for d in dirs {
            std::fs::create_dir_all(parent.join(d)).unwrap();
        }
        std::fs::create_dir_all(parent.join(format!("pronghorn-{me}"))).unwrap();
        std::fs::write(parent.join("pronghorn-103").join("config"), b"x").unwrap();
        std::fs::write(parent.join("pronghorn-104.keeper"), b"4242").unwrap();
        let alive = |pid: u32| pid == 102;
        assert_eq!(sweep_dead_runtime_dirs(&parent, alive), 1);
        let left = |d: &str| parent.join(d).exists();
        assert!(!left("pronghorn-101"), "dead and empty: swept");
        assert!(left("pronghorn-102"), "alive");
        assert!(left("pronghorn-103"), "not empty");
        assert!(left("pronghorn-104"), "a keeper carries its port on");
        assert!(left("other-105") && left("pronghorn-x"), "not an EAL directory of ours");
        assert!(left(&format!("pronghorn-{me}")), "this process's own");
        assert_eq!(sweep_dead_runtime_dirs(&parent.join("missing"), alive), 0);
        std::fs::remove_dir_all(&parent).unwrap();
    }

    #[test]
    fn a_process_exists_while_it_runs_whoever_owns_it() {
        assert!(process_exists(std::process::id()));
        assert!(process_exists(1), "init: another user's process counts (EPERM)");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!process_exists(pid), "reaped");
    }

    #[test]
    fn only_a_private_anonymous_read_write_mapping_starting_there_is_taken_for_a_memseg_array() {
        let maps = "100000000-10002f000 rw-p 00000000 00:00 0 \n\
                    140000000-940000000 ---p 00000000 00:00 0 \n\
                    1180000000-1180061000 rw-p 00000000 00:00 0 \n\
                    1580200000-1580261000 rw-s 00000000 00:01 5385                   /memfd:pronghorn-memsegs (deleted)\n\
                    7f0000000000-7f0000010000 rw-p 00001000 fe:01 1234               /usr/lib/libx.so\n";
        assert_eq!(private_anonymous_mapping_at(maps, 0x1180000000), Some(0x61000));
        assert_eq!(private_anonymous_mapping_at(maps, 0x100000000), Some(0x2f000));
        // Inside a mapping but not at its start; not read-write; shared already; a file's.
        assert_eq!(private_anonymous_mapping_at(maps, 0x1180001000), None);
        assert_eq!(private_anonymous_mapping_at(maps, 0x140000000), None);
        assert_eq!(private_anonymous_mapping_at(maps, 0x1580200000), None);
        assert_eq!(private_anonymous_mapping_at(maps, 0x7f0000000000), None);
    }

    #[test]
    fn a_private_mapping_made_shared_keeps_its_bytes_and_is_shared_with_a_child() {
        let len = 3 * 4096;
        // SAFETY: a fresh private anonymous mapping, checked, written within its length.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(addr, libc::MAP_FAILED);
        let bytes = addr.cast::<u8>();
        // SAFETY: within the mapping.
        unsafe { (0..len).for_each(|i| *bytes.add(i) = (i % 251) as u8) };
        // SAFETY: the mapping is this test's alone.
        assert!(unsafe { remap_shared(addr, len) });
        // SAFETY: within the mapping.
        assert!((0..len).all(|i| unsafe { *bytes.add(i) } == (i % 251) as u8), "bytes changed by the remap");
        // SAFETY: the child writes one byte of the shared mapping and exits; no allocation.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: within the mapping; _exit has no preconditions.
            unsafe {
                *bytes.add(len - 1) = 7;
                libc::_exit(0);
            }
        }
        let mut status = 0;
        // SAFETY: `status` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        // SAFETY: within the mapping.
        assert_eq!(unsafe { *bytes.add(len - 1) }, 7, "the child's write did not reach the parent: still private");
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(addr, len) };
    }

    #[test]
    fn vdev_strings_name_the_interface() {
        let o = DpdkOptions::new(Pmd::AfXdp, "ph-a0");
        assert_eq!(o.vdev(0, 0, None), "net_af_xdp0,iface=ph-a0,start_queue=0,queue_count=1,busy_budget=0");
        assert_eq!(o.vdev(0, 3, None), "net_af_xdp0,iface=ph-a0,start_queue=3,queue_count=1,busy_budget=0");
        assert_eq!(o.vdev(1, 4, None), "net_af_xdp1,iface=ph-a0,start_queue=4,queue_count=1,busy_budget=0");
        assert_eq!(
            o.vdev(0, 0, Some("/proc/self/fd/7")),
            "net_af_xdp0,iface=ph-a0,start_queue=0,queue_count=1,busy_budget=0,xdp_prog=/proc/self/fd/7"
        );
        assert_eq!(o.port_name(0), "net_af_xdp0");
        let o = DpdkOptions::new(Pmd::AfPacket, "x");
        assert_eq!(o.vdev(0, 0, None), "net_af_packet0,iface=x,qpairs=1");
    }

    #[test]
    fn our_program_goes_where_one_port_drives_the_interface() {
        let owner = Owner { ipv4: Some([10, 99, 0, 1].into()), ..Owner::default() };
        let o = DpdkOptions { xdp_owner: Some(owner.clone()), ..DpdkOptions::new(Pmd::AfXdp, "ph-a0") };
        assert_eq!(o.filtered(), Some(&owner));
        assert_eq!(DpdkOptions { queues: 2, ..o.clone() }.filtered(), None, "another process attaches too");
        assert_eq!(DpdkOptions { shards: 2, ..o.clone() }.filtered(), None, "another port attaches too");
        assert_eq!(DpdkOptions { pmd: Pmd::AfPacket, ..o.clone() }.filtered(), None);
        assert_eq!(DpdkOptions { xdp_owner: None, ..o }.filtered(), None);
    }

    #[test]
    fn a_vdev_naming_a_driver_not_linked_in_is_found_before_the_eal_starts() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(vdev_without_driver(&args(&["--vdev", "net_null0"])), Some("net_null0"));
        assert_eq!(vdev_without_driver(&args(&["--no-huge", "--vdev=net_pcap1,iface=x"])), Some("net_pcap1"));
        assert_eq!(
            vdev_without_driver(&args(&["--vdev", "net_tap0,iface=t", "--vdev", "net_bond0"])),
            Some("net_bond0")
        );
        assert_eq!(vdev_without_driver(&args(&["--vdev", "net_virtio_user0,path=/dev/vhost-net"])), None);
        assert_eq!(vdev_without_driver(&args(&["--vdev", "net_af_xdp0,iface=a", "--vdev", "eth_ring0"])), None);
        assert_eq!(vdev_without_driver(&args(&["--vdev"])), None, "the EAL reports a --vdev without a device");
        assert_eq!(vdev_without_driver(&args(&["--vdevx", "net_null0"])), None);
    }

    #[test]
    fn pmd_names_parse() {
        assert_eq!("af_xdp".parse::<Pmd>(), Ok(Pmd::AfXdp));
        assert_eq!("net_af_packet".parse::<Pmd>(), Ok(Pmd::AfPacket));
        assert_eq!("tap".parse::<Pmd>(), Ok(Pmd::Tap));
        assert_eq!("net_tap".parse::<Pmd>(), Ok(Pmd::Tap));
        assert!("ixgbe".parse::<Pmd>().unwrap_err().contains("expected af_xdp, af_packet or tap"));
    }

    #[test]
    fn tap_queues_are_tun_fds() {
        let o = DpdkOptions::new(Pmd::Tap, "ph-t0");
        assert_eq!(o.vdev(0, 0, None), "net_tap0,iface=ph-t0");
        assert!(Pmd::Tap.queue_fd_link("/dev/net/tun") && !Pmd::Tap.queue_fd_link("socket:[1]"));
        assert!(Pmd::AfXdp.queue_fd_link("socket:[1]") && !Pmd::AfXdp.queue_fd_link("/dev/net/tun"));
    }

    #[test]
    fn offloads_are_used_where_the_stack_can() {
        let ipv4 = sys::ph_tx_offload_PH_TX_IPV4_CKSUM;
        let (tcp, udp) = (sys::ph_tx_offload_PH_TX_TCP_CKSUM, sys::ph_tx_offload_PH_TX_UDP_CKSUM);
        let tso = sys::ph_tx_offload_PH_TX_TCP_TSO;
        assert_eq!(usable_tx_offloads(ipv4 | tcp | udp | tso), ipv4 | tcp | udp | tso);
        // The stack leaves both L4 checksums to the NIC or neither.
        assert_eq!(usable_tx_offloads(ipv4 | tcp | tso), ipv4);
        assert_eq!(usable_tx_offloads(tcp | udp | tso), tcp | udp);
        assert_eq!(usable_tx_offloads(0), 0);
        let all = offloads_of(ipv4 | tcp | udp | tso, &Pmd::AfXdp);
        assert!(all.tx_ipv4_checksum && all.tx_l4_checksum && all.tx_tcp_segmentation && all.tx_tcp6_segmentation);
        let tap = offloads_of(ipv4 | tcp | udp | tso, &Pmd::Tap);
        assert!(tap.tx_tcp_segmentation && !tap.tx_tcp6_segmentation, "net_tap's GSO cuts IPv4 only");
        assert_eq!(offloads_of(0, &Pmd::Tap), Offloads::default());
    }

    #[test]
    fn checksum_requests_follow_the_headers() {
        let mut v4 = vec![0u8; 14 + 20 + 20];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[14] = 0x45;
        v4[14 + 9] = 6;
        let tcp = sys::ph_tx_request_PH_REQ_TCP_CKSUM;
        assert_eq!(checksum_request(&v4), Some((REQ_IPV4 | REQ_IP_CKSUM | tcp, 20)));
        v4[14] = 0x46; // IPv4 options: a 24-byte header
        v4[14 + 9] = 1; // ICMP: its checksum is the stack's
        assert_eq!(checksum_request(&v4), Some((REQ_IPV4 | REQ_IP_CKSUM, 24)));
        let mut v6 = vec![0u8; 14 + 40 + 8];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14 + 6] = 17;
        assert_eq!(checksum_request(&v6), Some((REQ_IPV6 | sys::ph_tx_request_PH_REQ_UDP_CKSUM, 40)));
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(checksum_request(&arp), None);
        assert_eq!(checksum_request(&v4[..14]), None, "too short to be IPv4");
    }

    #[test]
    fn last_error_line_prefers_errors_over_noise() {
        let log = "EAL: Detected CPU lcores: 2\nEAL: invalid parameters for --vdev\nEAL: Detected NUMA nodes: 1\n";
        assert_eq!(last_error_line(log), "EAL: invalid parameters for --vdev");
        assert_eq!(last_error_line("just this\n"), "just this");
        assert_eq!(last_error_line(""), "");
        let log = "pronghorn: unrecognized option '--bogus'\nEAL: Invalid 'command line' arguments.\nUsage: ...\n";
        assert_eq!(last_error_line(log), "pronghorn: unrecognized option '--bogus'");
    }
}
