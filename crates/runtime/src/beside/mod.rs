//! Local clients of accelerated listeners on an interface shared with the kernel (`nic.share`,
//! issue 23 item 3; docs/runtime.md, "Local clients on a shared interface").
//!
//! A process on the same host (`redis-cli`, a health check, the accelerated process itself)
//! reaches our address through the kernel's loopback, never through the NIC, so the shard never
//! sees its SYN. As Onload does, each accelerated listener gets a kernel socket listening beside
//! it on the same address and port (SO_REUSEADDR, and SO_REUSEPORT and IPV6_V6ONLY as the
//! application set them): the kernel takes the local clients, and the application's accept()
//! on the listener returns them too, as the kernel sockets they are (the shim passes unknown fds
//! through). The kernel socket also keeps the kernel's own servers off the port.
//!
//! Its connections must wake whoever waits on the listener (epoll, poll, a blocking accept), in
//! every drive mode: one thread per process (`pronghorn-beside`, started with the first such
//! socket) sleeps in the kernel on an epoll set of them (EPOLLONESHOT), and when one is readable
//! marks it ready and wakes the listener's waiters as a stack pass would ([`Runtime::notify`]);
//! the listener's readiness and arrivals (`ShardSet::readiness`) include it until an accept finds
//! it empty, which re-arms the watch. Counted: `kernel_accepted` beside `accepted`.
//!
//! Not covered: a child forked after listen() (the watcher thread is not inherited), and
//! listeners inherited from a parent.

//!
//! This module holds the set's state, which the shards' readiness reads; `watch` makes the
//! kernel sockets, runs the watcher and accepts from them.

mod watch;

use std::collections::HashMap;

use stack::shard::SocketId;

use crate::real;

/// The kernel sockets beside the process's accelerated listeners.
#[derive(Default)]
pub(crate) struct BesideSet {
    /// By listener (its primary).
    listeners: HashMap<SocketId, Beside>,
    /// The watcher thread's epoll set, once started.
    watch: Option<i32>,
    /// By application fd: the kernel sockets of listeners made before the NIC opened.
    early: HashMap<i32, i32>,
    /// That an address is not the kernel's was said.
    said_not_the_kernels: bool,
}

struct Beside {
    fd: i32,
    /// The kernel socket has connections waiting (the watcher saw it readable; no accept has
    /// found it empty since).
    ready: bool,
    /// Times the watcher saw it readable (edge-triggered epoll reports each).
    arrivals: u32,
}

impl Beside {
    /// Nothing waits on the kernel socket: the watcher looks at it again (a connection that
    /// came meanwhile is reported at once: the watch is level-triggered).
    fn watch_again(&mut self, watch: i32) {
        self.ready = false;
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: self.fd as u64 };
        // SAFETY: `ev` outlives the call; both fds are ours.
        unsafe { real::epoll_ctl(watch, libc::EPOLL_CTL_MOD, self.fd, &mut ev) };
    }
}

impl BesideSet {
    /// Listener `id`'s kernel socket: whether it has connections waiting, and its arrivals.
    /// Cheap when there is none (a dedicated interface).
    pub(crate) fn state(&self, id: SocketId) -> Option<(bool, u32)> {
        if self.listeners.is_empty() {
            return None;
        }
        self.listeners.get(&id).map(|b| (b.ready, b.arrivals))
    }
}
