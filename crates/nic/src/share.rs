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
}

/// Why no queue could be claimed: each displays as one line with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("all {queues} queue(s) of interface \"{iface}\" are driven by other processes; give the interface more queues and set nic.queues to match (one per process that serves it)")]
    AllTaken { iface: String, queues: u16 },
    #[error("no {count} consecutive free queues among the {queues} of interface \"{iface}\" (runtime.shards = {count} takes one per shard); give the interface more queues and raise nic.queues to match")]
    NoRun { iface: String, queues: u16, count: u16 },
    #[error("cannot create the queue lock {path}: {err}")]
    Lock { path: String, err: std::io::Error },
}

impl QueueClaim {
    /// Claims the lowest free queue of `iface`'s first `queues`, waiting up to `patience` for
    /// one to come free: a server replacing its workers (nginx -s reload) starts the new ones
    /// while the old ones finish, and a process closing its port holds every lock briefly.
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
        loop {
            'start: for first in 0..queues.saturating_sub(count - 1) {
                let mut locks = Vec::new();
                for q in first..first + count {
                    match try_lock(iface, q)? {
                        Some(lock) => locks.push(lock),
                        None => continue 'start,
                    }
                }
                return Ok(QueueClaim { iface: iface.to_string(), queues, queue: first, count, _locks: locks });
            }
            if std::time::Instant::now() >= give_up {
                return Err(if count == 1 {
                    ClaimError::AllTaken { iface: iface.to_string(), queues }
                } else {
                    ClaimError::NoRun { iface: iface.to_string(), queues, count }
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
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
}
