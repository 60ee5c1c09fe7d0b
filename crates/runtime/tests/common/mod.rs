//! What the runtime's integration tests share: bounded waits (`within`), the runtime's answers
//! unwrapped (`done`), and an in-memory NIC whose far side runs a peer each time the runtime
//! receives (`NicWithPeer`). Each test binary uses a part of it.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

use nic::{Link, MacAddr, Nic, NicStats};
use runtime::{Call, Errno};
use testkit::mem::{MemBuf, MemNic};

/// How long a test waits for anything: a hang detector, not a speed limit.
pub const BOUND: Duration = Duration::from_secs(30);

/// Runs `f` on a thread and waits for it at most `BOUND`: a lost wakeup fails the test.
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND).unwrap_or_else(|_| panic!("{what}: no answer (a lost wakeup?)"))
}

/// The result of a call the runtime must have handled itself.
pub fn done<T>(c: Call<T>) -> Result<T, Errno> {
    match c {
        Call::Done(r) => r,
        Call::Kernel => panic!("the runtime passed an accelerated call to the kernel"),
    }
}

/// The far end of a [`NicWithPeer`]: a peer shard (and what drives it) that runs whenever the
/// runtime receives, so it answers exactly as fast as the runtime looks.
pub trait Peer {
    fn run(&mut self);
}

/// The runtime's NIC: one end of an in-memory pair, the peer on the other.
pub struct NicWithPeer<P> {
    pub mine: MemNic,
    pub peer: P,
    /// An rx fd (an eventfd the test writes when it has the peer send, which each receive
    /// clears), so that a driver sleeps on it as on AF_XDP's; `None`: no rx fd, a driver
    /// looks every millisecond.
    pub rx_fd: Option<i32>,
}

impl<P: Peer> Nic for NicWithPeer<P> {
    type Buf = MemBuf;

    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        if let Some(fd) = self.rx_fd {
            let mut v = 0u64;
            // SAFETY: a non-blocking eventfd of the test's; the kernel writes 8 bytes to `v`.
            unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
        }
        self.peer.run();
        self.mine.rx_burst(out, max)
    }

    fn rx_interrupt_fd(&self) -> Option<i32> {
        self.rx_fd
    }

    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        self.mine.tx_burst(bufs)
    }

    fn alloc(&mut self) -> Option<MemBuf> {
        self.mine.alloc()
    }

    fn mac(&self) -> MacAddr {
        self.mine.mac()
    }

    fn mtu(&self) -> u16 {
        self.mine.mtu()
    }

    fn link(&self) -> Link {
        self.mine.link()
    }

    fn stats(&self) -> NicStats {
        self.mine.stats()
    }
}
