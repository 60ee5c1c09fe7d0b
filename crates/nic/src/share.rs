//! Several processes on one interface: each drives one of its queues, claimed with a lock file.
//!
//! A server with worker processes (nginx) runs one shard per worker, each on its own queue of the
//! same interface; the sender's per-flow hash (RSS on a NIC, the tx queue choice on a veth) spreads
//! connections over them. A queue is claimed by holding an exclusive `flock` on
//! `/run/pronghorn/queues/<netns>/<iface>.<queue>` for the life of the process: the kernel drops the
//! lock when the process dies however it dies, so a respawned worker finds the queue free.
//!
//! The XDP program the AF_XDP driver attaches is shared by every queue's socket, and closing a
//! DPDK port detaches it whatever else still uses it: only the last process on the interface may
//! close its port ([`QueueClaim::last_out`] tells, and keeps the others out while it closes).
//! A claimant that finds every queue taken and waits (a reload's new worker or new master)
//! marks that it waits, with an open-file read lock on `<iface>.successor`, for as long as it
//! waits: [`QueueClaim::successor_waits`] tells the holders, whose stack then leaves a SYN that
//! finds no listener unanswered instead of resetting it, so that the client's retransmission
//! reaches the successor. The kernel drops the mark with the waiter however it ends.
//! This module knows nothing of DPDK: it is the bookkeeping both the port and the cleanup helper
//! need.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where the lock files live (a directory per network namespace below it).
#[cfg(not(test))]
fn root() -> String {
    "/run/pronghorn/queues".into()
}

/// A directory per test (libtest names each test's thread after it): tests run in parallel,
/// and each removes its directory when done.
#[cfg(test)]
fn root() -> String {
    let test = std::thread::current().name().unwrap_or("test").replace("::", "-");
    std::env::temp_dir().join(format!("pronghorn-queues-test-{}-{test}", std::process::id())).display().to_string()
}

/// One claimed queue, or a run of consecutive queues (a process with several shards), held
/// until dropped (or the process ends).
#[derive(Debug)]
pub struct QueueClaim {
    iface: String,
    queues: u16,
    queue: u16,
    count: u16,
    _locks: Vec<File>,
    /// `<iface>.successor`, where waiting claimants mark that they wait (`None`: it could not be
    /// opened; then no successor is ever seen).
    successor: Option<File>,
}

/// Why no queue could be claimed: each displays as one line with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("all {queues} queue(s) of interface \"{iface}\" are driven by other processes ({holders}); give the interface more queues and set nic.queues to match (one per process that serves it)")]
    AllTaken { iface: String, queues: u16, holders: String },
    #[error("no {count} consecutive free queues among the {queues} of interface \"{iface}\" ({holders}; runtime.shards = {count} takes one per shard); give the interface more queues and raise nic.queues to match")]
    NoRun { iface: String, queues: u16, count: u16, holders: String },
    #[error("cannot create the queue lock {path}: {err}")]
    Lock { path: String, err: std::io::Error },
}

impl QueueClaim {
    /// Claims the lowest free queue of `iface`'s first `queues`, waiting up to `patience` for
    /// one to come free: a server replacing its workers (nginx -s reload) starts the new ones
    /// while the old ones finish, and a process closing its port holds every lock briefly.
    /// While a queue is held by a process that is exiting it waits longer, up to
    /// [`DYING_HOLDER_PATIENCE`]: a process killed by a signal drops its locks only when the
    /// kernel has closed its files, after its sockets' teardown, which waits for RCU and the
    /// network namespace's locks (seconds on a loaded machine); nginx does not respawn a
    /// worker that fails to start.
    pub fn first_free(iface: &str, queues: u16, patience: std::time::Duration) -> Result<QueueClaim, ClaimError> {
        QueueClaim::first_free_run(iface, queues, 1, patience)
    }

    /// Claims the lowest run of `count` consecutive free queues (one per shard of a process).
    pub fn first_free_run(
        iface: &str,
        queues: u16,
        count: u16,
        patience: std::time::Duration,
    ) -> Result<QueueClaim, ClaimError> {
        let queues = queues.max(1);
        let count = count.max(1);
        let give_up = std::time::Instant::now() + patience;
        // Held while this claimant waits: the holders see a successor (`successor_waits`).
        let mut waiting: Option<File> = None;
        loop {
            'start: for first in 0..queues.saturating_sub(count - 1) {
                let mut locks = Vec::new();
                for q in first..first + count {
                    match try_lock(iface, q)? {
                        Some(lock) => locks.push(lock),
                        None => continue 'start,
                    }
                }
                let successor = open_successor(iface);
                return Ok(QueueClaim {
                    iface: iface.to_string(),
                    queues,
                    queue: first,
                    count,
                    _locks: locks,
                    successor,
                });
            }
            if waiting.is_none() {
                waiting = mark_waiting(iface);
            }
            let now = std::time::Instant::now();
            if now >= give_up {
                let held = holders(iface, queues);
                if now < give_up + DYING_HOLDER_PATIENCE && held.iter().any(|h| h.exiting) {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    continue;
                }
                let holders = describe(&held);
                return Err(if count == 1 {
                    ClaimError::AllTaken { iface: iface.to_string(), queues, holders }
                } else {
                    ClaimError::NoRun { iface: iface.to_string(), queues, count, holders }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Whether another process waits to claim a queue of this interface (a reload's new
    /// worker or master waiting for the old one's queue): the kernel's answer to an
    /// open-file lock query (`F_OFD_GETLK`), one system call, nothing taken.
    pub fn successor_waits(&self) -> bool {
        let Some(file) = &self.successor else { return false };
        // SAFETY: all zeroes is a valid flock.
        let mut probe: libc::flock = unsafe { std::mem::zeroed() };
        probe.l_type = libc::F_WRLCK as libc::c_short;
        probe.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: F_OFD_GETLK reads and writes `probe`, ours; the fd is `file`'s.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut probe) };
        r == 0 && probe.l_type != libc::F_UNLCK as libc::c_short
    }

    /// The (first) queue this process drives.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// How many consecutive queues it drives, from `queue()`.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// Whether the interface is shared with other processes by configuration (more than one queue).
    pub fn shared(&self) -> bool {
        self.queues > 1
    }

    /// `Some(guard)` when no other process drives a queue of this interface: the guard holds
    /// every other queue's lock, so none starts while the caller closes its port (and detaches
    /// the XDP program). `None`: another process still uses the interface; leave the port open
    /// (the process exit closes its socket, and the program stays for the others).
    pub fn last_out(&self) -> Option<AllQueues> {
        lock_all_except(&self.iface, self.queues, Some(self.queue..self.queue + self.count))
    }
}

/// How much longer than its patience a claim waits while a queue's holder is exiting.
pub const DYING_HOLDER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// A queue's lock and a process that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    queue: u16,
    pid: u32,
    /// The process is on its way out: the lock goes when the kernel has closed its files.
    exiting: bool,
}

/// The holders of `iface`'s first `queues` queue locks (a lock file that cannot be read is left
/// out). /proc/locks names the process that took a lock, but an flock belongs to the open file,
/// and a process that inherited it holds it as well, after the taker has exited or exec'd (a
/// family's keeper holds its opener's queue that way): the processes with an fd of the file
/// whose fdinfo shows the lock are named instead, and the taker only when none can be seen
/// (another user's /proc/PID/fd is not readable without root, and a process in its exit has
/// given up its fd table before the kernel closes its files).
fn holders(iface: &str, queues: u16) -> Vec<Holder> {
    use std::os::unix::fs::MetadataExt;
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else { return Vec::new() };
    let mut found = Vec::new();
    for queue in 0..queues {
        let path = lock_path(iface, queue);
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let takers = flock_holders(&locks, major, minor, meta.ino());
        if takers.is_empty() {
            continue;
        }
        let mut pids = fd_holders(&path, major, minor, meta.ino());
        if pids.is_empty() {
            pids = takers;
        }
        found.extend(pids.into_iter().map(|pid| Holder { queue, pid, exiting: exiting(pid) }));
    }
    found
}

/// The processes with an fd of the file at `path` (`major:minor:inode`) whose fdinfo shows an
/// flock on it (a `lock:` line): those that hold it, whoever took it. Only looked at when a
/// claim gives up.
fn fd_holders(path: &std::path::Path, major: u32, minor: u32, ino: u64) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut pids = Vec::new();
    for pid in procs.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| target == path)
                && std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()))
                    .is_ok_and(|info| fdinfo_locks(&info, major, minor, ino))
        });
        if holds {
            pids.push(pid);
        }
    }
    pids
}

/// Whether a /proc/PID/fdinfo/FD text shows an flock on the file `major:minor:inode`:
/// `lock:\t1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF`.
fn fdinfo_locks(info: &str, major: u32, minor: u32, ino: u64) -> bool {
    let locks: String = info.lines().filter_map(|l| l.strip_prefix("lock:")).map(|l| format!("{l}\n")).collect();
    !flock_holders(&locks, major, minor, ino).is_empty()
}

/// The pids /proc/locks names as holding an flock on the file (`major:minor:inode`), waiters
/// (`->` lines) left out. A line: `3: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF`.
fn flock_holders(locks: &str, major: u32, minor: u32, ino: u64) -> Vec<u32> {
    let file = format!("{major:02x}:{minor:02x}:{ino}");
    locks
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "FLOCK", _, _, pid, f, ..] if *f == file => pid.parse().ok(),
                _ => None,
            }
        })
        .collect()
}

/// Whether `pid` is on its way out: one of its threads is in the kernel's exit (PF_EXITING)
/// and not yet a zombie. A process whose threads are all zombies has closed its files: a lock
/// that still names it is held by a process that inherited the fd, which may live on.
fn exiting(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .any(|stat| thread_exiting(&stat))
}

/// From a thread's /proc/.../stat: PF_EXITING in its flags (the ninth field) and its state not
/// zombie or dead.
fn thread_exiting(stat: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    // The command (field 2) is in parentheses and may hold spaces and parentheses itself.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let gone = matches!(fields.first(), Some(&"Z") | Some(&"X") | None);
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    !gone && flags & PF_EXITING != 0
}

/// "pid 12 holds queue 0, pid 34 (exiting) holds queue 1", for the claim's error.
fn describe(held: &[Holder]) -> String {
    if held.is_empty() {
        return "/proc/locks names no holder".into();
    }
    let each: Vec<String> = held
        .iter()
        .map(|h| {
            let command = std::fs::read_to_string(format!("/proc/{}/comm", h.pid)).unwrap_or_default();
            let command = match command.trim() {
                "" => String::new(),
                c => format!(" ({c})"),
            };
            let exiting = if h.exiting { " (exiting)" } else { "" };
            format!("pid {}{command}{exiting} holds queue {}", h.pid, h.queue)
        })
        .collect();
    each.join(", ")
}

/// Holds the interface's setup lock: processes that start together set their ports up one
/// at a time (two attaching the XDP program at once: one fails with "Failed to configure xdp
/// socket", seen with nginx's two workers).
pub struct SetupTurn {
    _lock: File,
}

impl QueueClaim {
    /// Waits for this interface's setup turn.
    pub fn setup_turn(&self) -> Result<SetupTurn, ClaimError> {
        let path = lock_path(&self.iface, "setup");
        let file = open_lock(&path)?;
        // SAFETY: flock takes no memory; the fd is `file`'s, open for the call.
        while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(ClaimError::Lock { path: path.display().to_string(), err });
            }
        }
        Ok(SetupTurn { _lock: file })
    }
}

/// Every queue lock of an interface, held.
pub struct AllQueues {
    _locks: Vec<File>,
}

/// The directory of the lock files of the network namespace whose inode is `netns` (what
/// `/proc/self/ns/net`, or a namespace's bind mount under /run/netns, has as its inode): the
/// lab removes it with the namespace.
pub fn namespace_dir(netns: u64) -> PathBuf {
    PathBuf::from(format!("{}/{netns}", root()))
}

/// `Some` when no process holds a queue of `iface` (among its first `queues`): the guard keeps it
/// so. The cleanup helper detaches a dead process's XDP program only then.
pub fn idle(iface: &str, queues: u16) -> Option<AllQueues> {
    lock_all_except(iface, queues.max(1), None)
}

fn lock_all_except(iface: &str, queues: u16, mine: Option<std::ops::Range<u16>>) -> Option<AllQueues> {
    let mut locks = Vec::new();
    for q in (0..queues).filter(|q| !mine.as_ref().is_some_and(|m| m.contains(q))) {
        match try_lock(iface, q) {
            Ok(Some(f)) => locks.push(f),
            Ok(None) => return None,
            // No lock file can be made: nobody else can hold one either.
            Err(_) => {}
        }
    }
    Some(AllQueues { _locks: locks })
}

/// The lock file of one queue, in a directory per network namespace (interface names repeat
/// across namespaces).
fn lock_path(iface: &str, what: impl std::fmt::Display) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let netns = std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()).unwrap_or(0);
    PathBuf::from(format!("{}/{netns}/{iface}.{what}", root()))
}

fn open_lock(path: &std::path::Path) -> Result<File, ClaimError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |err| ClaimError::Lock { path: path.display().to_string(), err };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map_err(err)
}

/// `<iface>.successor`, open for reading (a read lock needs it) and writing.
fn open_successor(iface: &str) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = lock_path(iface, "successor");
    std::fs::create_dir_all(path.parent()?).ok()?;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .ok()
}

/// Marks a claimant of `iface` as waiting: an open-file read lock on `<iface>.successor`, held
/// as long as the returned file is (`None`: it cannot be taken; the claimant waits unmarked).
fn mark_waiting(iface: &str) -> Option<File> {
    let file = open_successor(iface)?;
    // SAFETY: all zeroes is a valid flock.
    let mut read: libc::flock = unsafe { std::mem::zeroed() };
    read.l_type = libc::F_RDLCK as libc::c_short;
    read.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: F_OFD_SETLK reads `read`, ours; the fd is `file`'s. Read locks never conflict with
    // one another, and no holder takes a write lock (it only asks whether one could be had).
    (unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &read) } == 0).then_some(file)
}

fn try_lock(iface: &str, queue: u16) -> Result<Option<File>, ClaimError> {
    let file = open_lock(&lock_path(iface, queue))?;
    // SAFETY: flock takes no memory; the fd is `file`'s, open for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(Some(file))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // flock is per open file description: two opens in one process contend like two processes.

    /// One lock test at a time: a test that forks copies the others' lock fds for a moment.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The test's lock files, then the directories if no other test still uses them.
    fn remove_locks(iface: &str) {
        let dir = lock_path(iface, 0).parent().unwrap().to_path_buf();
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(&format!("{iface}.")) {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(&dir);
        let _ = std::fs::remove_dir(root());
    }

    #[test]
    fn processes_get_distinct_queues_and_a_freed_queue_is_reused() {
        let _serial = serial();
        let iface = format!("t{}a", std::process::id());
        let a = QueueClaim::first_free(&iface, 2, Duration::ZERO).unwrap();
        let b = QueueClaim::first_free(&iface, 2, Duration::ZERO).unwrap();
        assert_eq!((a.queue(), b.queue()), (0, 1));
        let full = QueueClaim::first_free(&iface, 2, Duration::ZERO).unwrap_err().to_string();
        assert!(full.contains("all 2 queue(s)") && full.contains("nic.queues"), "{full}");
        assert!(a.last_out().is_none(), "b still drives a queue");
        assert!(idle(&iface, 2).is_none());
        drop(b);
        assert!(a.last_out().is_some());
        let c = QueueClaim::first_free(&iface, 2, Duration::ZERO).unwrap();
        assert_eq!(c.queue(), 1);
        drop((a, c));
        assert!(idle(&iface, 2).is_some());
        remove_locks(&iface);
    }

    #[test]
    fn last_out_keeps_newcomers_away_while_held() {
        let _serial = serial();
        let iface = format!("t{}b", std::process::id());
        let a = QueueClaim::first_free(&iface, 3, Duration::ZERO).unwrap();
        let guard = a.last_out().unwrap();
        assert!(QueueClaim::first_free(&iface, 3, Duration::ZERO).is_err());
        drop(guard);
        assert_eq!(QueueClaim::first_free(&iface, 3, Duration::ZERO).unwrap().queue(), 1);
        remove_locks(&iface);
    }

    #[test]
    fn a_process_with_several_shards_claims_a_run_of_consecutive_queues() {
        let _serial = serial();
        let iface = format!("t{}c", std::process::id());
        let one = QueueClaim::first_free(&iface, 4, Duration::ZERO).unwrap();
        let two = QueueClaim::first_free_run(&iface, 4, 2, Duration::ZERO).unwrap();
        assert_eq!((two.queue(), two.count()), (1, 2));
        // Queue 3 is free, but no run of two is.
        let err = QueueClaim::first_free_run(&iface, 4, 2, Duration::ZERO).unwrap_err().to_string();
        assert!(err.contains("no 2 consecutive free queues among the 4") && err.contains("runtime.shards"), "{err}");
        assert!(two.last_out().is_none(), "queue 0 is held by another claim");
        drop(one);
        assert!(two.last_out().is_some(), "its own queues do not count as others'");
        let run = QueueClaim::first_free_run(&iface, 4, 3, Duration::ZERO);
        assert!(run.is_err());
        drop(two);
        assert_eq!(QueueClaim::first_free_run(&iface, 4, 3, Duration::ZERO).unwrap().queue(), 0);
        remove_locks(&iface);
    }
    #[test]
    fn proc_locks_lines_name_the_holders_of_one_file_and_not_its_waiters() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 00:1a:777 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 4343 00:1a:777 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 4444 00:1a:778 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 4545 00:1a:777 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 4646 08:01:777 0 EOF\n";
        assert_eq!(flock_holders(locks, 0, 0x1a, 777), vec![4242]);
        let info = "pos:\t0\nflags:\t02100001\nmnt_id:\t29\nino:\t777\nlock:\t1: FLOCK  ADVISORY  WRITE 4242 00:1a:777 0 EOF\n";
        assert!(fdinfo_locks(info, 0, 0x1a, 777));
        assert!(!fdinfo_locks(info, 0, 0x1a, 778), "another file's lock");
        assert!(!fdinfo_locks("pos:\t0\nflags:\t02100001\nino:\t777\n", 0, 0x1a, 777), "no lock line");
        assert_eq!(flock_holders(locks, 8, 1, 777), vec![4646]);
        assert!(flock_holders(locks, 0, 0x1a, 779).is_empty());
    }

    #[test]
    fn a_thread_in_the_kernels_exit_counts_as_exiting_and_a_zombie_does_not() {
        // Fields after the command: state ppid pgrp session tty tpgid flags ...
        let line = |state: &str, flags: u64| format!("77 (nginx: worker) x)) {state} 1 77 77 0 -1 {flags} 0 0 0");
        assert!(thread_exiting(&line("D", 0x400044)), "PF_EXITING, blocked in the exit");
        assert!(thread_exiting(&line("R", 0x4)));
        assert!(!thread_exiting(&line("S", 0x400040)), "alive");
        assert!(!thread_exiting(&line("Z", 0x40040c)), "a zombie's files are closed");
        assert!(!thread_exiting("77 (trunc"));
        assert!(!exiting(std::process::id()));
    }

    #[test]
    fn a_holder_sees_a_successor_while_one_waits_for_its_queue_and_not_after() {
        let _serial = serial();
        let iface = format!("t{}s", std::process::id());
        let holder = QueueClaim::first_free(&iface, 1, Duration::ZERO).unwrap();
        assert!(!holder.successor_waits(), "nobody waits yet");
        // A claim that gives up at once marked nothing that outlives it.
        assert!(QueueClaim::first_free(&iface, 1, Duration::ZERO).is_err());
        assert!(!holder.successor_waits(), "a claim that gave up leaves no mark");
        // The waiter runs on a thread of the same name: lock_path's test root is per test name.
        let name = std::thread::current().name().unwrap().to_string();
        let waiter_iface = iface.clone();
        let waiter = std::thread::Builder::new()
            .name(name)
            .spawn(move || QueueClaim::first_free(&waiter_iface, 1, Duration::from_secs(60)).map(|c| c.queue()))
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !holder.successor_waits() {
            assert!(std::time::Instant::now() < deadline, "the waiting claim was never seen");
            std::thread::yield_now();
        }
        drop(holder);
        assert_eq!(waiter.join().unwrap().unwrap(), 0, "the waiter took the freed queue");
        let next = QueueClaim::first_free(&iface, 1, Duration::ZERO).unwrap();
        assert!(!next.successor_waits(), "the waiter's mark went with its wait");
        drop(next);
        remove_locks(&iface);
    }

    #[test]
    fn a_claim_that_gives_up_names_the_holders_and_waits_not_for_a_lock_an_heir_holds() {
        let _serial = serial();
        let iface = format!("t{}d", std::process::id());
        let mine = QueueClaim::first_free(&iface, 1, Duration::ZERO).unwrap();
        let err = QueueClaim::first_free(&iface, 1, Duration::ZERO).unwrap_err().to_string();
        let me = std::process::id();
        let command = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert!(err.contains(&format!("pid {me} ({}) holds queue 0", command.trim())), "{err}");
        drop(mine);
        // A child takes the lock and forks a grandchild that inherits it, then exits: /proc/locks
        // names the child (a zombie, not reaped yet) while the grandchild holds the lock, as a
        // family's keeper holds the queue its opener took. The grandchild is named.
        let mut pipe = [0; 2];
        // SAFETY: `pipe` has room for the two fds.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        let path = std::ffi::CString::new(lock_path(&iface, 0).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: the child only makes system calls (open, flock, fcntl, close_range, fork, write,
        // pause, _exit) on memory prepared before the fork: nothing that allocates or takes a lock.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: as above; every fd named is the child's own.
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd < 0 || libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) != 0 {
                    libc::_exit(1);
                }
                // Only the lock and the pipe stay: the other tests' lock fds, copied by the fork,
                // must not outlive it.
                libc::fcntl(fd, libc::F_DUPFD, 1000);
                let report = libc::fcntl(pipe[1], libc::F_DUPFD, 1000);
                libc::syscall(libc::SYS_close_range, 3u32, 999u32, 0u32);
                let grandchild = libc::fork();
                if grandchild == 0 {
                    libc::write(report, b"g".as_ptr().cast(), 1);
                    libc::pause();
                    libc::_exit(0);
                }
                // A tag, then the pid: a pid's first byte may be a 'g' itself.
                let g = grandchild.to_ne_bytes();
                let tagged = [b'p', g[0], g[1], g[2], g[3]];
                libc::write(report, tagged.as_ptr().cast(), tagged.len());
                libc::_exit(0);
            }
        }
        // SAFETY: our own fd.
        unsafe { libc::close(pipe[1]) };
        let mut buf = [0u8; 6];
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: `buf[got..]` is writable.
            let n = unsafe { libc::read(pipe[0], buf[got..].as_mut_ptr().cast(), buf.len() - got) };
            assert!(n > 0, "the child and grandchild report");
            got += n as usize;
        }
        // "g" and "p<pid>", in either order (one write each: a pipe keeps a short write whole).
        let (g, pid_bytes) = if buf[0] == b'g' { (0, &buf[2..6]) } else { (5, &buf[1..5]) };
        assert_eq!((buf[g], buf[if g == 0 { 1 } else { 0 }]), (b'g', b'p'), "{buf:?}");
        let grandchild = i32::from_ne_bytes(pid_bytes.try_into().unwrap());
        assert!(grandchild > 0);
        // The child has exited once its zombie shows (waitid with WNOWAIT leaves it there).
        // SAFETY: all zeroes is a valid siginfo_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is ours to write.
        unsafe { libc::waitid(libc::P_PID, child as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) };
        let held = holders(&iface, 1);
        assert_eq!(held, vec![Holder { queue: 0, pid: grandchild as u32, exiting: false }]);
        let err = QueueClaim::first_free(&iface, 1, Duration::ZERO).unwrap_err().to_string();
        assert!(err.contains(&format!("pid {grandchild} (")) && err.contains(") holds queue 0"), "{err}");
        assert!(!err.contains(&format!("pid {child} ")), "{err}");
        // SAFETY: signals and reaps our own child and grandchild's pids.
        unsafe {
            libc::kill(grandchild, libc::SIGKILL);
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(pipe[0]);
        }
        remove_locks(&iface);
    }
}
