//! The accelerated process's life: the shard opened before the process gives up root, the port
//! closed at exit (which detaches the XDP program), and fork (the child never touches the
//! parent's queues).

use std::sync::atomic::{AtomicBool, Ordering};

use nic::Nic;

use crate::accel::Accel;
use crate::{real, Errno, FORKED, MAX_FDS, TRACKED};

impl<N: Nic + 'static> Accel<N> {
    /// The process is about to change its credentials (setuid, setgid, setgroups, ...): a
    /// server that drops root (mariadbd --user=mysql, nginx's `user`) would lose the rights to
    /// open the NIC (AF_XDP, hugepages) before its first socket. Open it now.
    pub fn before_credentials_change(&self) {
        self.with(|rt| {
            let _ = rt.shard();
        });
    }

    /// At exit: frames still queued (replies written just before exit) go out, then the port
    /// closes (which detaches the XDP program). The stack thread, if any, stops when it sees the
    /// shard gone.
    pub fn at_exit(&self) {
        self.try_with(|rt| {
            rt.poll_shard();
            drop(rt.shard.take());
        });
    }
}

/// `pthread_atfork` child handler: the child never touches the parent's queues. Its accelerated
/// sockets fail with EOPNOTSUPP; closing them only closes the placeholder.
pub fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// In a forked child, a tracked fd is a placeholder of the parent's socket: socket calls on it
/// fail with EOPNOTSUPP (said once on stderr) instead of silently reaching an eventfd. A child
/// of its own is served by the kernel; accelerated sockets shared with a child need a shard per
/// process (the multi-process work).
pub fn forked_child_socket(fd: i32) -> Option<Errno> {
    if !FORKED.load(Ordering::Relaxed)
        || fd < 0
        || fd as usize >= MAX_FDS
        || TRACKED[fd as usize].load(Ordering::Relaxed) != 1
    {
        return None;
    }
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let msg = format!(
            "pronghorn: pid {} uses accelerated socket fd {fd} inherited through fork: not supported yet (one shard per process); \
             run the server without worker processes (e.g. nginx master_process off) or without pronghorn\n",
            std::process::id()
        );
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    Some(Errno::EOPNOTSUPP)
}
