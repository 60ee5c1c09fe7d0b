//! The threads the runtime starts (a stack thread per shard, the control socket's, the watcher of
//! kernel sockets beside listeners) and those the NIC's opening starts (DPDK's interrupt
//! thread): each starts with every signal blocked. A signal sent to the process goes to a thread
//! that does not block it; an application that blocks its signals outside a few waits (the
//! PostgreSQL 15 postmaster runs its handlers, which fork and edit its list of backends, only
//! while it sleeps in select) would otherwise have them run on one of ours, at the same time as
//! its own code.
//!
//! A thread started from inside the runtime (`INSIDE`: opening the NIC, where DPDK starts its
//! interrupt thread) is the runtime's from its first instruction: the shim's `pthread_create`
//! marks it, and its socket, epoll and poll calls go to the kernel. DPDK's interrupt thread
//! otherwise waited in its own epoll set through the runtime, asleep there for the process's
//! life, and took the NIC's driver role for good (stop 50).

/// Every signal blocked in the calling thread until drop, which puts its mask back: a thread
/// started meanwhile starts with all blocked (a new thread inherits its creator's mask).
pub(crate) struct SignalsBlocked {
    old: libc::sigset_t,
}

impl SignalsBlocked {
    pub(crate) fn new() -> SignalsBlocked {
        // SAFETY: sigset_t is plain data (all-zero: a valid empty set); both sets are ours and
        // outlive the calls.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            SignalsBlocked { old }
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: `old` is the mask `new` read back, a valid sigset_t.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut()) };
    }
}

/// Starts a thread named `name` running `f`, with every signal blocked.
pub(crate) fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    let _blocked = SignalsBlocked::new();
    std::thread::Builder::new().name(name).spawn(f)
}

/// Whether a thread the calling thread starts now is the runtime's: the caller is inside the
/// runtime (DPDK starting its interrupt thread as the NIC opens, or a thread of our own).
pub fn starting_runtime_thread() -> bool {
    crate::inside()
}

/// Marks the calling thread, just started, as the runtime's: its calls go to the kernel.
pub fn runtime_thread_starts() {
    crate::INSIDE.with(|i| i.set(true));
}
