//! The stats region: one file per accelerated process in the run directory (`/dev/shm` unless
//! `PRONGHORN_RUN_DIR` says otherwise), `pronghorn.<pid>.stats`, mode 0600, mapped by the
//! process and by `pronghorn ps`/`stat`/`lat`. The process copies its counters into it after a
//! stack pass (at most once a millisecond) with plain stores under a sequence counter: no lock
//! and no system call on the data path (principle 8). A reader maps it read-only and retries
//! while the counter is odd or moved.
//!
//! The layout is one `#[repr(C)]` struct of 64-bit words, [`Layout`]; the names of the
//! counters are the tables below, shared by writer and reader (both are built from this file;
//! `MAGIC` changes when the layout does).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::OnceLock;

/// "PHSTAT" and the layout's version.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PHSTAT16");

/// Shards a region has room for (`runtime.shards` is at most 64).
pub const MAX_SHARDS: usize = 64;

/// Counters of each shard, in [`Layout::shards`] order: (name, meaning). `nic_*` are the
/// port's own counters, refreshed when a reader asks (they cost the NIC driver a system call).
pub const SHARD_COUNTERS: &[(&str, &str)] = &[
    ("nic_rx_packets", "frames the NIC queue received"),
    ("nic_tx_packets", "frames the NIC queue sent"),
    ("nic_rx_bytes", "bytes the NIC queue received"),
    ("nic_tx_bytes", "bytes the NIC queue sent"),
    ("nic_imissed", "frames the NIC dropped: rx not drained fast enough"),
    ("nic_ierrors", "frames the NIC received in error"),
    ("nic_oerrors", "frames the NIC failed to send"),
    ("nic_rx_nombuf", "receptions that found no free packet buffer (the rx ring waits, then overflows)"),
    ("nic_rx_ring_full", "frames the kernel dropped: the AF_XDP rx ring was full (not in nic_imissed)"),
    ("nic_tx_invalid", "frames the kernel refused from the AF_XDP tx ring (not in nic_oerrors)"),
    ("xdp_redirected", "frames pronghorn's XDP program handed to the AF_XDP socket (the interface's)"),
    ("xdp_passed", "frames pronghorn's XDP program passed to the kernel: not pronghorn's (the interface's)"),
    ("xdp_no_socket", "frames pronghorn's XDP program passed to the kernel: pronghorn's, but no socket on the queue"),
    ("pool_in_use", "packet buffers in use (gauge)"),
    ("pool_size", "packet buffers in the pool"),
    ("rx_frames", "frames the shard took from its queue"),
    ("tx_frames", "frames the shard handed to its queue"),
    ("arp_replies", "ARP requests answered"),
    ("nd_adverts", "neighbor solicitations answered"),
    ("echo_replies", "pings answered"),
    ("drop_not_for_us", "frames dropped: for another host or group"),
    ("drop_malformed", "frames dropped: too short, bad lengths or fields"),
    ("drop_checksum", "frames dropped: bad IPv4 header or ICMP checksum"),
    ("drop_fragment", "frames dropped: IP fragments (not reassembled)"),
    ("drop_bad_source", "frames dropped: from a martian source (broadcast, multicast, loopback, ours, IPv4-mapped)"),
    ("drop_unhandled", "frames dropped: well formed, nothing here handles them"),
    ("drop_tx_full", "replies dropped: the NIC's tx queue was full"),
    ("tcp_in_segs", "TCP segments received"),
    ("tcp_out_segs", "TCP segments sent"),
    ("tcp_retrans_segs", "TCP segments retransmitted"),
    ("tcp_timeouts", "TCP retransmission timeouts"),
    ("tcp_loss_probes", "TCP tail loss probes sent"),
    ("tcp_loss_probe_recoveries", "TCP losses repaired by a tail loss probe alone"),
    ("tcp_rack_lost", "TCP segments RACK marked lost"),
    ("tcp_lost_retransmits", "TCP retransmissions RACK found lost"),
    ("tcp_in_csum_errors", "TCP segments with a bad checksum"),
    ("tcp_in_malformed", "TCP segments malformed"),
    ("tcp_out_rsts", "TCP resets sent"),
    ("tcp_active_opens", "connections opened by connect()"),
    ("tcp_passive_opens", "connections accepted by a listener"),
    ("tcp_syncookies_sent", "SYN cookies sent"),
    ("tcp_syncookies_recv", "SYN cookies validated"),
    ("tcp_syncookies_failed", "SYN cookies that did not validate"),
    ("tcp_listen_overflows", "SYNs dropped: accept queue full"),
    ("tcp_challenge_acks_skipped", "challenge ACKs not sent: the connection's rate limit (or the shard's budget)"),
    ("tcp_time_wait_entries", "connections that entered TIME-WAIT"),
    ("tcp_handed_off", "segments handed to another shard of the process"),
    ("udp_in_datagrams", "UDP datagrams received"),
    ("udp_out_datagrams", "UDP datagrams sent"),
    ("udp_in_csum_errors", "UDP datagrams with a bad checksum"),
    ("udp_no_ports", "UDP datagrams to a port nobody holds"),
    ("udp_rcvbuf_errors", "UDP datagrams dropped: receive buffer full"),
    ("udp_handed_off", "UDP datagrams handed to another shard of the process"),
    ("icmp_out_dest_unreachs", "ICMP port unreachable sent: UDP to a port nobody holds"),
    ("icmp_out_rate_limited", "ICMP errors not sent: over Linux's rate limits"),
    ("icmp_in_dest_unreachs", "ICMP destination unreachable received about UDP we sent"),
    ("pmtu_reductions", "path MTU reductions believed"),
    ("icmp_too_big_ignored", "ICMP too-big messages not believed"),
    ("tx_no_buffer", "frames not sent: no buffer in the pool"),
    ("tx_deferred", "times a connection's segments waited for a buffer (sent at a later pass)"),
    ("tx_queue_full", "frames not sent: the NIC's tx queue stayed full"),
    ("tx_no_route", "frames not sent: no route"),
    ("tx_unresolved", "frames dropped: the neighbor never answered"),
    ("tcp_abort_on_timeout", "connections given up: retransmissions, probes or keepalives unanswered"),
    ("tcp_abort_on_memory", "connections reset: more orphans than tcp.max_orphans, or no memory"),
    ("tcp_rcvq_drops", "TCP segments dropped: no memory (tcp.mem) for a receive ring"),
    ("tcp_ofo_drops", "out-of-order TCP segments dropped: no memory (tcp.mem) for a receive ring"),
    ("tcp_prune_called", "connections whose out-of-order data was pruned"),
    ("tcp_ofo_pruned", "out-of-order data dropped to free its ring"),
    ("tcp_memory_pressures", "times TCP memory went above tcp.mem's pressure"),
    ("tcp_listen_memory_drops", "SYNs dropped: no memory (tcp.mem) for a receive ring"),
    ("tcp_syns_left_unanswered", "SYNs to no listener left unanswered: it closed under 1 s before, or another process waited for the queue (a reload)"),
    ("tcp_time_wait_overflows", "connections that skipped TIME-WAIT: tcp.max_tw_buckets entries"),
    ("tcp_gro_merged", "TCP segments coalesced on receive into the one before them (software GRO; no Linux MIB)"),
    ("loopback_frames", "frames the shard sent to its own address and received itself, never on the NIC"),
    ("sockets", "sockets open: connections, listeners, UDP (gauge)"),
    ("time_wait", "TIME-WAIT entries (gauge)"),
    ("tcp_orphans", "connections closed by the application, still delivering (gauge)"),
    ("tcp_mem_pages", "TCP memory charged (bytes the rings hold), 4 KiB pages as tcp.mem counts them (gauge)"),
];

/// Counters of the whole process: (name, meaning).
pub const PROCESS_COUNTERS: &[(&str, &str)] = &[
    ("accelerated_listen", "listeners on the accelerated address"),
    ("accelerated_connect", "connect() calls into the accelerated subnet"),
    ("accepted", "connections accepted from the shards"),
    ("kernel_accepted", "connections accepted from the kernel socket beside a listener: local clients (nic.share)"),
    ("kernel_bind", "sockets bound elsewhere: left with the kernel"),
    ("kernel_connect", "connect() elsewhere: left with the kernel"),
    ("init_failed", "times the NIC failed to open"),
    ("accelerated_udp", "UDP sockets on the shard"),
    ("kernel_udp", "UDP sockets bound or sent elsewhere: left with the kernel"),
    ("sleeps", "threads put to sleep"),
    ("wakeups", "wakeups sent"),
    ("stack_thread_polls", "stack passes by stack threads"),
    ("inline_polls", "stack passes by application threads"),
    ("skipped_passes", "stack passes poll() left out: its thread had just made one, or was woken to a ready socket"),
    ("epoll_waits", "epoll_wait calls answered by the runtime (a look at a set of kernel fds only is the kernel's)"),
    ("epoll_events", "accelerated sockets those epoll_wait calls reported: per call, the ready connections one wait hands over"),
    (
        "roles_taken_from_accept_loop",
        "times a thread that waits on a connection took the NIC's driver role from an accept loop asleep (without waking it)",
    ),
    (
        "roles_given_back_to_accept_loop",
        "times the driver role went back to an accept loop asleep, without waking it, as the thread that held it left",
    ),
    ("panics_caught", "calls failed with EIO: an internal error (a panic) caught at the hooks"),
    (
        "wakeup_syscalls",
        "wakeups that needed a system call (futex or eventfd): the rest of wakeups found the thread awake",
    ),
    (
        "family_wakes",
        "wakes the driver sent to the threads of sharing children (runtime.share = \"family\"): a futex wake or an eventfd write each",
    ),
    ("family_wakes_idle", "family wakes after which the child's thread found nothing and slept again"),
    ("family_sleepers", "threads of sharing children registered asleep on their sockets now (gauge)"),
    ("lock_waits", "times a thread found the runtime's lock taken and waited for it"),
    ("lock_wait_us", "microseconds threads waited for the runtime's lock, all together"),
    ("lock_holds", "times the runtime's lock was taken and released, since pronghorn stat or lat first asked"),
    ("lock_hold_us", "microseconds the runtime's lock was held, all together, since pronghorn stat or lat first asked"),
    (
        "family_dead_processes",
        "processes of the family (runtime.share = \"family\") found dead without leaving it (kill -9, a crash, _exit): what they held given back",
    ),
    ("family_dead_lock_holders", "times a process of the family died holding the family's stack lock"),
    (
        "family_dead_mid_update",
        "of those, times it died inside a call on the shared stack: what the call was changing may be half done",
    ),
];

/// The latency stages (`pronghorn lat`): (name, what is measured).
pub const STAGES: &[(&str, &str)] = &[
    ("rx->socket", "a frame taken from the NIC to its data in the socket buffer and its waiter woken (the stack pass)"),
    ("socket->read", "a socket becoming readable to the application's read of it"),
    ("write->tx", "an application write to the next burst handed to the NIC"),
    ("lock-wait", "a thread that found the runtime's lock taken, waiting for it (octave buckets of CPU ticks)"),
    ("lock-hold", "the runtime's lock held, from taking it to releasing it, since stat or lat first asked (octave buckets of CPU ticks)"),
];

/// Buckets of a latency histogram: values below 4 ns exactly, then four per power of two.
pub const BUCKETS: usize = 256;

/// The histogram bucket of `ns`.
pub fn bucket_of(ns: u64) -> usize {
    if ns < 4 {
        return ns as usize;
    }
    let msb = 63 - ns.leading_zeros() as usize;
    4 * (msb - 1) + ((ns >> (msb - 2)) & 3) as usize
}

/// The smallest value of bucket `b`.
pub fn bucket_floor(b: usize) -> u64 {
    if b < 4 {
        return b as u64;
    }
    let msb = b / 4 + 1;
    (4 + (b % 4) as u64) << (msb - 2)
}

/// The value below which `q` (0..1) of the histogram's samples fall: the upper end of the
/// bucket that holds that quantile (`None`: no samples).
pub fn quantile(hist: &[u64; BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (b, &n) in hist.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(if b + 1 < BUCKETS { bucket_floor(b + 1) - 1 } else { u64::MAX });
        }
    }
    None
}

/// The region's contents.
#[repr(C)]
pub struct Layout {
    pub magic: u64,
    /// Odd while the process writes; a reader retries while it is odd or moves.
    pub seq: AtomicU64,
    pub pid: u64,
    /// The process's start time (clock ticks after boot, /proc/PID/stat field 22): a region
    /// whose pid was reused by another process is stale.
    pub start_time: u64,
    pub uid: u64,
    pub shards: u64,
    /// 0: inline, 1: a stack thread per shard.
    pub dedicated: u64,
    pub iface: [u8; 16],
    pub pmd: [u8; 16],
    pub ipv4: [u8; 48],
    pub ipv6: [u8; 64],
    /// When the counters were last written (CLOCK_MONOTONIC ns).
    pub updated_ns: u64,
    pub process: [u64; PROCESS_COUNTERS.len()],
    pub latency: [[u64; BUCKETS]; STAGES.len()],
    pub shard: [[u64; SHARD_COUNTERS.len()]; MAX_SHARDS],
}

/// Where accelerated processes keep their stats regions and control sockets (`pronghorn ps`
/// looks there): `PRONGHORN_RUN_DIR`, or /dev/shm.
pub const ENV_RUN_DIR: &str = "PRONGHORN_RUN_DIR";

static RUN_DIR: OnceLock<String> = OnceLock::new();

/// The directory of regions and control sockets, as the process found it when its runtime
/// started (or now, in the CLI): later the environment may be another.
pub fn run_dir() -> PathBuf {
    PathBuf::from(RUN_DIR.get_or_init(|| std::env::var(ENV_RUN_DIR).unwrap_or_else(|_| "/dev/shm".into())))
}

pub fn stats_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("pronghorn.{pid}.stats"))
}

pub fn control_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("pronghorn.{pid}.ctl"))
}

/// `text` in a fixed field, cut if too long.
pub fn put_text(field: &mut [u8], text: &str) {
    field.fill(0);
    let n = text.len().min(field.len());
    field[..n].copy_from_slice(&text.as_bytes()[..n]);
}

pub fn get_text(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// A process's start time (field 22 of /proc/PID/stat, clock ticks after boot), `None` if there
/// is no such process. Without allocating, formatting or libc's stdio: a child just forked reads
/// its own to join the family, and every page it touches there is a fault (a heap page written
/// is a copy). With `std::fs::read_to_string(format!(..))` this read was three quarters of the
/// time a forked child spent in pronghorn's fork handling.
pub fn start_time_of(pid: u32) -> Option<u64> {
    let mut buf = [0u8; 1024];
    let stat = read_proc_stat(pid, &mut buf)?;
    stat_start_time(stat)
}

/// /proc/PID/stat of process (or thread) `pid`, read into `buf` with plain system calls: no
/// allocation, and the preloaded read and close are not in the way. `None` when there is no
/// such process.
pub(crate) fn read_proc_stat(pid: u32, buf: &mut [u8]) -> Option<&[u8]> {
    // "/proc/PID/stat" NUL-terminated (procfs refuses leading zeros).
    let mut path = [0u8; 32];
    path[.."/proc/".len()].copy_from_slice(b"/proc/");
    let mut digits = [0u8; 10];
    let (mut n, mut v) = (0, pid);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut at = "/proc/".len();
    for &d in digits[..n].iter().rev() {
        path[at] = d;
        at += 1;
    }
    path[at..at + "/stat".len()].copy_from_slice(b"/stat");
    // SAFETY: `path` is NUL-terminated (zero-filled past what was written); the fd is checked
    // and closed below.
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut len = 0;
    while len < buf.len() {
        let room = buf.len() - len;
        // SAFETY: the rest of `buf` is writable for `room` bytes.
        let got = unsafe { libc::syscall(libc::SYS_read, fd, buf[len..].as_mut_ptr(), room) };
        if got <= 0 {
            break;
        }
        len += got as usize;
        // A /proc file gives its text in one read when the buffer holds it: a short read is
        // its end (and saves the read that would return 0).
        if (got as usize) < room {
            break;
        }
    }
    // SAFETY: the fd opened above, closed once.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    Some(&buf[..len])
}

/// Field 22 of a /proc/PID/stat line. The command (field 2) may hold spaces and parentheses:
/// the fields are counted from its last ')'.
fn stat_start_time(stat: &[u8]) -> Option<u64> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let field = stat[close + 1..].split(|&b| b == b' ').filter(|f| !f.is_empty()).nth(22 - 3)?;
    std::str::from_utf8(field).ok()?.trim_end().parse().ok()
}

/// The writer's side: the process's own mapping.
pub struct Region {
    map: *mut Layout,
    path: PathBuf,
}

// SAFETY: the pointer is to a process-wide shared mapping (never unmapped) that this value alone
// writes, through `&mut self`; nothing in it is tied to the thread that made it.
unsafe impl Send for Region {}

impl Region {
    /// Creates the region for this process (0600), replacing a stale one of a reused pid.
    pub fn create(path: &Path) -> io::Result<Region> {
        let _ = std::fs::remove_file(path);
        let file: File = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)?;
        let len = std::mem::size_of::<Layout>();
        file.set_len(len as u64)?;
        // SAFETY: a new shared mapping of `len` bytes of `file`, which set_len just made that
        // long (no address hint: the kernel chooses); the result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        let region = Region { map: map.cast(), path: path.to_path_buf() };
        // The file is all zeros: the magic goes last, so a reader never trusts a half-made one.
        let pid = std::process::id();
        // SAFETY: the mapping is `size_of::<Layout>()` bytes, page-aligned, zero-filled (a valid
        // Layout: integers only), and this process's only reference to it until `region` returns.
        let l = unsafe { &mut *region.map };
        l.pid = u64::from(pid);
        l.start_time = start_time_of(pid).unwrap_or(0);
        // SAFETY: geteuid takes no memory and cannot fail.
        l.uid = u64::from(unsafe { libc::geteuid() });
        fence(Ordering::Release);
        l.magic = MAGIC;
        Ok(region)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes under the sequence counter: `f` sees the region's contents.
    pub fn write(&mut self, f: impl FnOnce(&mut Layout)) {
        // SAFETY: the mapping `create` made, valid for the process's life; `&mut self`
        // makes this the only reference (readers are other processes, behind the sequence counter).
        let l = unsafe { &mut *self.map };
        let seq = l.seq.load(Ordering::Relaxed);
        l.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        f(l);
        l.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The latency histograms (only this process writes them; a torn read costs one sample).
    pub fn latency(&mut self) -> &mut [[u64; BUCKETS]; STAGES.len()] {
        // SAFETY: as in `write`: the mapping lives as long as the process, and `&mut self`
        // makes the borrow unique.
        unsafe { &mut (*self.map).latency }
    }

    /// Removes the file (the mapping stays valid until the process ends).
    pub fn remove(&self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A reader's copy of a region.
pub struct Snapshot {
    pub layout: Box<Layout>,
}

impl Snapshot {
    /// Reads the region at `path` consistently. Errors: no such file, no permission (the
    /// region is its owner's), not a regular file (a symbolic link or a FIFO that another user
    /// put in the shared run directory is neither followed nor waited on), not a region of this
    /// pronghorn's layout.
    pub fn read(path: &Path) -> io::Result<Snapshot> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)?;
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a regular file"));
        }
        let len = std::mem::size_of::<Layout>();
        if meta.len() != len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a stats region of this pronghorn version"));
        }
        // SAFETY: a read-only shared mapping of the `len` bytes the file has (checked above);
        // the result is checked against MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let src = map as *const Layout;
        // SAFETY: every field is an integer or an array of them: all zeros is a valid value.
        let mut out: Box<Layout> = Box::new(unsafe { std::mem::zeroed() });
        let mut ok = false;
        for _ in 0..10_000 {
            // SAFETY: `src` is the mapping, `len` = size_of::<Layout>() bytes, page-aligned.
            let before = unsafe { (*src).seq.load(Ordering::Acquire) };
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            // SAFETY: `len` bytes from the mapping into our own boxed Layout (separate memory); a
            // copy torn by the writer is still integers, and the sequence check below discards it.
            unsafe { std::ptr::copy_nonoverlapping(src as *const u8, (&mut *out as *mut Layout).cast::<u8>(), len) };
            fence(Ordering::Acquire);
            // SAFETY: as above: `src` is the mapping.
            if unsafe { (*src).seq.load(Ordering::Relaxed) } == before {
                ok = true;
                break;
            }
        }
        // SAFETY: the mapping made above, unmapped once; `src` is not used after.
        unsafe { libc::munmap(map, len) };
        if !ok {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "the region kept changing while read"));
        }
        let layout = out;
        if layout.magic != MAGIC {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a stats region of this pronghorn version"));
        }
        Ok(Snapshot { layout })
    }

    /// Whether the process that made the region still runs (same pid, same start time).
    pub fn alive(&self) -> bool {
        let pid = self.layout.pid as u32;
        start_time_of(pid).is_some_and(|t| self.layout.start_time == 0 || t == self.layout.start_time)
    }

    pub fn shard_count(&self) -> usize {
        (self.layout.shards as usize).min(MAX_SHARDS)
    }

    /// Counter `name` of shard `k`.
    pub fn shard_counter(&self, k: usize, name: &str) -> u64 {
        SHARD_COUNTERS.iter().position(|(n, _)| *n == name).map_or(0, |i| self.layout.shard[k][i])
    }

    /// Counter `name` summed over the shards.
    pub fn total(&self, name: &str) -> u64 {
        (0..self.shard_count()).map(|k| self.shard_counter(k, name)).sum()
    }

    pub fn process_counter(&self, name: &str) -> u64 {
        PROCESS_COUNTERS.iter().position(|(n, _)| *n == name).map_or(0, |i| self.layout.process[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_counted_from_the_last_parenthesis_of_the_command() {
        // Fields 3 to 22 after a command that holds spaces and parentheses.
        let line = b"4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 123 45 18446744073709551615\n";
        assert_eq!(stat_start_time(line), Some(987654));
        assert_eq!(stat_start_time(b"4242 (no closing parenthesis S 1"), None);
        assert_eq!(stat_start_time(b"4242 (short) S 1 2 3"), None);
    }

    #[test]
    fn a_start_time_read_without_allocating_is_the_one_proc_gives() {
        let pid = std::process::id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let expected: u64 = stat[stat.rfind(')').unwrap() + 2..].split(' ').nth(19).unwrap().parse().unwrap();
        assert_eq!(start_time_of(pid), Some(expected));
        // pid 1 has the smallest start time of all; no process has pid 0 in /proc.
        assert!(start_time_of(1).is_some_and(|t| t <= expected));
        assert_eq!(start_time_of(0), None);
        assert_eq!(start_time_of(u32::MAX), None);
    }

    #[test]
    fn buckets_hold_their_values_and_grow_by_quarters_of_a_power_of_two() {
        for v in [0u64, 1, 3, 4, 5, 7, 8, 9, 1000, 1_000_000, 123_456_789, u64::MAX / 3] {
            let b = bucket_of(v);
            assert!(bucket_floor(b) <= v, "{v}: bucket {b} starts at {}", bucket_floor(b));
            assert!(b + 1 == BUCKETS || v < bucket_floor(b + 1), "{v}: bucket {b} ends below it");
        }
        assert_eq!(bucket_of(u64::MAX), 251);
        assert_eq!(bucket_floor(bucket_of(1024)), 1024);
        assert_eq!(bucket_floor(bucket_of(1024) + 1), 1280);
    }

    #[test]
    fn quantiles_name_the_bucket_that_holds_the_rank() {
        let mut h = [0u64; BUCKETS];
        h[bucket_of(1000)] = 99;
        h[bucket_of(1_000_000)] = 1;
        assert_eq!(quantile(&h, 0.5), Some(bucket_floor(bucket_of(1000) + 1) - 1));
        assert_eq!(quantile(&h, 0.99), Some(bucket_floor(bucket_of(1000) + 1) - 1));
        assert_eq!(quantile(&h, 0.999), Some(bucket_floor(bucket_of(1_000_000) + 1) - 1));
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
    }

    #[test]
    fn a_region_reads_back_what_was_written_and_is_its_owners_alone() {
        let dir = std::env::temp_dir().join(format!("pronghorn-region-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = stats_path(&dir, 4242);
        let mut r = Region::create(&path).unwrap();
        r.write(|l| {
            l.shards = 2;
            put_text(&mut l.iface, "ph-a0");
            l.shard[1][SHARD_COUNTERS.iter().position(|(n, _)| *n == "tcp_in_segs").unwrap()] = 77;
        });
        let s = Snapshot::read(&path).unwrap();
        assert_eq!(s.layout.pid, u64::from(std::process::id()));
        assert_eq!(get_text(&s.layout.iface), "ph-a0");
        assert_eq!(s.shard_counter(1, "tcp_in_segs"), 77);
        assert_eq!(s.total("tcp_in_segs"), 77);
        assert!(s.alive());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        r.remove();
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Another user's symbolic link or FIFO in the shared run directory: a reader (root's
    /// `pronghorn ps`) neither follows the link nor blocks opening the FIFO.
    #[test]
    fn a_region_is_read_only_from_a_regular_file() {
        let dir = std::env::temp_dir().join(format!("pronghorn-region-kinds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let real = stats_path(&dir, 4243);
        let r = Region::create(&real).unwrap();
        assert!(Snapshot::read(&real).is_ok());
        let link = stats_path(&dir, 4244);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert!(Snapshot::read(&link).is_err(), "a symbolic link was followed");
        let fifo = stats_path(&dir, 4245);
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = Snapshot::read(&fifo).err().expect("a FIFO read as a region");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        r.remove();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
