//! A tx queue driven outside the lock that serialises the rest of a NIC's calls.
//!
//! The runtime runs its stack under one lock. Handing frames to an AF_XDP tx queue costs a
//! system call (the kick), and on a veth the peer's whole receive runs inside it: about half
//! of the time the lock was held per request (`pronghorn stat`'s `lock_hold_us`, issue 21),
//! time during which every other thread of the process that wants the stack waits. A
//! [`TxLane`] splits transmit in two: under the lock the stack only *stages* its frames (a
//! short append behind a lock of the lane's own); whoever releases the stack lock then
//! *sends* them ([`TxSender::send`]), the burst and the kick with no stack lock held.
//!
//! What the lane guarantees: frames leave in the order they were staged (staging happens under
//! the stack lock, so in the stack's order, and one thread at a time bursts); none is lost
//! while the lane is open: a thread that stages while another bursts leaves its frames to that
//! one, which looks again after it finishes (its gate is released before it looks, with
//! sequentially consistent operations on both sides, so one of the two always sees the
//! other); frames the queue has no room for stay first in line for the next send, at most
//! [`TX_BACKLOG`] of them, and those beyond are dropped and counted ([`TxLane::dropped`]), as
//! the stack's own backlog does; so are frames staged beyond that bound while nobody sends. A
//! sender goes on while others stage behind it (as a qdisc runner does); [`TxSender::send_once`]
//! lets the runtime do its own wakes between the first round and the rest. [`TxSender::close`] sends what it can one last time and frees
//! the rest: after it, the queue is never touched again (its port may close).
//!
//! It knows nothing of what a frame holds, nor of the stack: only buffers, order and the queue.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Frames waiting for room in the queue before new ones are dropped (the stack's own tx
/// backlog has the same bound).
pub const TX_BACKLOG: usize = 8192;

/// A NIC tx queue that may be driven from any thread, one at a time.
pub trait TxQueue<B>: Send {
    /// Transmits frames from the front of `bufs`, removing those sent; the rest (the queue is
    /// full) stay. Returns how many were sent. As [`crate::Nic::tx_burst`].
    fn tx_burst(&mut self, bufs: &mut Vec<B>) -> usize;
}

/// The sending half of a lane, whatever its buffers: what the thread that releases the stack
/// lock calls.
pub trait TxSender: Send + Sync {
    /// Whether frames wait: staged since the last send, or left by a full queue.
    fn is_waiting(&self) -> bool;
    /// Hands the waiting frames to the queue, unless another thread is doing so now (it then
    /// sends these too), and goes on while others stage behind it. Never blocks on another
    /// sender.
    fn send(&self) {
        while self.send_once() {}
    }
    /// One round of [`TxSender::send`]. True when frames were staged during it by a thread
    /// that found the gate shut: they are now this caller's to send (`send` or another
    /// `send_once`, soon: nobody else will).
    fn send_once(&self) -> bool;
    /// Sends what the queue takes one last time, frees the rest and lets go of the queue;
    /// later staged frames are dropped (counted). Waits for a send in progress.
    fn close(&self);
}

/// See the [module documentation](self).
pub struct TxLane<B> {
    /// Frames handed over under the stack lock, not yet taken by a sender.
    staged: Mutex<Vec<B>>,
    /// Whether `staged` has frames (set under its lock, cleared by the sender that takes them).
    staged_flag: AtomicBool,
    /// Whether `out.held` has frames the queue had no room for.
    backlog: AtomicBool,
    /// Taken (false to true) by the one thread that sends.
    gate: AtomicBool,
    /// The queue and the frames on their way to it. Locked by the gate's holder, or by `close`.
    out: Mutex<Outbound<B>>,
    sent: AtomicU64,
    dropped: AtomicU64,
}

struct Outbound<B> {
    /// `None` once closed.
    queue: Option<Box<dyn TxQueue<B>>>,
    /// Taken from `staged`, first those the queue refused.
    held: Vec<B>,
}

/// Opens the gate when dropped.
struct GateOpener<'a>(&'a AtomicBool);

impl Drop for GateOpener<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain vectors behind: still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<B: Send + 'static> TxLane<B> {
    /// A lane over `queue`.
    pub fn new(queue: Box<dyn TxQueue<B>>) -> Arc<TxLane<B>> {
        Arc::new(TxLane {
            staged: Mutex::new(Vec::with_capacity(64)),
            staged_flag: AtomicBool::new(false),
            backlog: AtomicBool::new(false),
            gate: AtomicBool::new(false),
            out: Mutex::new(Outbound { queue: Some(queue), held: Vec::with_capacity(64) }),
            sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// Takes all of `bufs` (in order, after those staged before). Returns how many are staged
    /// now. Cheap: call it under the stack lock, and [`TxSender::send`] after releasing it.
    pub fn stage(&self, bufs: &mut Vec<B>) -> usize {
        let mut staged = relock(&self.staged);
        staged.append(bufs);
        // Bounded like the queue's backlog: what nobody sends (a sender stalled in the driver)
        // must not take the whole pool.
        if staged.len() > TX_BACKLOG {
            let excess = staged.len() - TX_BACKLOG;
            self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
            staged.truncate(TX_BACKLOG);
        }
        self.staged_flag.store(true, Ordering::SeqCst);
        staged.len()
    }

    /// Frames the queue took so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Frames dropped: beyond [`TX_BACKLOG`] waiting for room, or staged after `close`.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// One round with `out` locked: the staged frames join the held ones, the queue takes
    /// what it has room for, and the backlog is bounded.
    fn drain(&self, out: &mut Outbound<B>) {
        {
            let mut staged = relock(&self.staged);
            self.staged_flag.store(false, Ordering::SeqCst);
            out.held.append(&mut staged);
        }
        let Some(queue) = out.queue.as_mut() else {
            self.dropped.fetch_add(out.held.len() as u64, Ordering::Relaxed);
            out.held.clear();
            self.backlog.store(false, Ordering::SeqCst);
            return;
        };
        if !out.held.is_empty() {
            let n = queue.tx_burst(&mut out.held);
            self.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        if out.held.len() > TX_BACKLOG {
            let excess = out.held.len() - TX_BACKLOG;
            self.dropped.fetch_add(excess as u64, Ordering::Relaxed);
            out.held.truncate(TX_BACKLOG);
        }
        self.backlog.store(!out.held.is_empty(), Ordering::SeqCst);
    }
}

impl<B: Send + 'static> TxSender for TxLane<B> {
    fn is_waiting(&self) -> bool {
        self.staged_flag.load(Ordering::Relaxed) || self.backlog.load(Ordering::Relaxed)
    }

    fn send_once(&self) -> bool {
        if self.gate.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            // Another thread sends: it looks at `staged_flag` after opening the gate.
            return false;
        }
        {
            // Opened again however the round ends: a panic in the driver (caught by the
            // runtime's shield) must not leave the queue without a sender for good.
            let _open = GateOpener(&self.gate);
            self.drain(&mut relock(&self.out));
        }
        // Frames staged while we burst, by a thread that found the gate shut: ours to send.
        // (Frames the queue refused wait for the next send: no spinning on a full queue.)
        self.staged_flag.load(Ordering::SeqCst)
    }

    fn close(&self) {
        let mut out = relock(&self.out);
        self.drain(&mut out);
        let left = out.held.len();
        self.dropped.fetch_add(left as u64, Ordering::Relaxed);
        out.held.clear();
        out.queue = None;
        self.backlog.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// A queue that records what it sent, with room for `room` frames per burst.
    struct Recorder {
        out: Arc<Mutex<Vec<u32>>>,
        room: usize,
    }

    impl TxQueue<u32> for Recorder {
        fn tx_burst(&mut self, bufs: &mut Vec<u32>) -> usize {
            let n = self.room.min(bufs.len());
            relock(&self.out).extend(bufs.drain(..n));
            n
        }
    }

    fn lane(room: usize) -> (Arc<TxLane<u32>>, Arc<Mutex<Vec<u32>>>) {
        let out = Arc::new(Mutex::new(Vec::new()));
        (TxLane::new(Box::new(Recorder { out: out.clone(), room })), out)
    }

    #[test]
    fn staged_frames_leave_on_send_in_order() {
        let (l, out) = lane(usize::MAX);
        assert!(!l.is_waiting());
        assert_eq!(l.stage(&mut vec![1, 2]), 2);
        assert_eq!(l.stage(&mut vec![3]), 3);
        assert!(l.is_waiting());
        assert!(relock(&out).is_empty(), "staging sends nothing");
        l.send();
        assert_eq!(*relock(&out), vec![1, 2, 3]);
        assert!(!l.is_waiting());
        assert_eq!(l.sent(), 3);
    }

    #[test]
    fn refused_frames_go_first_next_time_and_the_backlog_is_bounded() {
        let (l, out) = lane(2);
        l.stage(&mut (0..5).collect());
        l.send();
        assert_eq!(*relock(&out), vec![0, 1]);
        assert!(l.is_waiting(), "three left for the next send");
        l.stage(&mut vec![5]);
        l.send();
        assert_eq!(*relock(&out), vec![0, 1, 2, 3]);
        let (l, out) = lane(0);
        l.stage(&mut (0..TX_BACKLOG as u32 + 10).collect());
        l.send();
        assert_eq!(l.dropped(), 10);
        assert!(relock(&out).is_empty());
    }

    #[test]
    fn close_sends_what_fits_and_drops_the_rest_and_later_frames() {
        let (l, out) = lane(3);
        l.stage(&mut (0..5).collect());
        l.close();
        assert_eq!(*relock(&out), vec![0, 1, 2]);
        assert_eq!(l.dropped(), 2);
        l.stage(&mut vec![9]);
        l.send();
        assert_eq!(l.dropped(), 3);
        assert_eq!(*relock(&out), vec![0, 1, 2]);
        assert!(!l.is_waiting());
    }

    /// A queue whose first burst stops in the middle until the test lets it go.
    struct Stalling {
        out: Arc<Mutex<Vec<u32>>>,
        inside: Arc<Barrier>,
        go_on: Arc<Barrier>,
        first: bool,
    }

    impl TxQueue<u32> for Stalling {
        fn tx_burst(&mut self, bufs: &mut Vec<u32>) -> usize {
            if std::mem::take(&mut self.first) {
                self.inside.wait();
                self.go_on.wait();
            }
            let n = bufs.len();
            relock(&self.out).extend(bufs.drain(..));
            n
        }
    }

    /// What a lane sent.
    type Sent = Arc<Mutex<Vec<u32>>>;

    /// A lane over a [`Stalling`] queue: the lane, what it sent, and the two barriers.
    fn stalling_lane() -> (Arc<TxLane<u32>>, Sent, Arc<Barrier>, Arc<Barrier>) {
        let out = Arc::new(Mutex::new(Vec::new()));
        let inside = Arc::new(Barrier::new(2));
        let go_on = Arc::new(Barrier::new(2));
        let q = Stalling { out: out.clone(), inside: inside.clone(), go_on: go_on.clone(), first: true };
        (TxLane::new(Box::new(q)), out, inside, go_on)
    }

    #[test]
    fn frames_staged_during_another_threads_burst_are_sent_by_it() {
        let (l, out, inside, go_on) = stalling_lane();
        l.stage(&mut vec![1]);
        std::thread::scope(|s| {
            let sender = s.spawn(|| l.send());
            inside.wait();
            // The other thread is in its burst: this send finds the gate shut and returns.
            l.stage(&mut vec![2]);
            l.send();
            assert_eq!(*relock(&out), Vec::<u32>::new());
            go_on.wait();
            sender.join().unwrap();
        });
        assert_eq!(*relock(&out), vec![1, 2], "the burst's thread sent the frame staged meanwhile");
        assert!(!l.is_waiting());
    }

    /// A queue that panics on its first burst.
    struct Panicking {
        first: bool,
        out: Arc<Mutex<Vec<u32>>>,
    }

    impl TxQueue<u32> for Panicking {
        fn tx_burst(&mut self, bufs: &mut Vec<u32>) -> usize {
            assert!(!std::mem::take(&mut self.first), "the driver failed");
            let n = bufs.len();
            relock(&self.out).extend(bufs.drain(..));
            n
        }
    }

    #[test]
    fn a_send_that_panicked_leaves_the_gate_open() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let l = TxLane::new(Box::new(Panicking { first: true, out: out.clone() }));
        l.stage(&mut vec![1]);
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l.send())).is_err());
        l.stage(&mut vec![2]);
        l.send();
        assert_eq!(*relock(&out), vec![1, 2], "the frame held through the panic went first");
    }

    #[test]
    fn staging_while_nobody_sends_is_bounded_and_counted() {
        let (l, out) = lane(usize::MAX);
        for _ in 0..3 {
            l.stage(&mut (0..TX_BACKLOG as u32).collect());
        }
        assert_eq!(l.dropped(), 2 * TX_BACKLOG as u64);
        l.send();
        assert_eq!(relock(&out).len(), TX_BACKLOG);
    }

    #[test]
    fn send_once_hands_what_others_staged_meanwhile_to_its_caller() {
        let (l, out, inside, go_on) = stalling_lane();
        l.stage(&mut vec![1]);
        std::thread::scope(|s| {
            let sender = s.spawn(|| l.send_once());
            inside.wait();
            l.stage(&mut vec![2]);
            assert!(!l.send_once(), "the gate is shut: nothing of ours to send");
            go_on.wait();
            assert!(sender.join().unwrap(), "frame 2 is the first sender's now");
        });
        assert_eq!(*relock(&out), vec![1]);
        assert!(!l.send_once());
        assert_eq!(*relock(&out), vec![1, 2]);
    }

    #[test]
    fn many_threads_lose_nor_reorder_nothing() {
        const THREADS: u32 = 4;
        const EACH: u32 = 2000;
        let (l, out) = lane(usize::MAX);
        // The stack lock: staging happens under it, so its order is the order to keep.
        let stack = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (l, stack) = (&l, &stack);
                s.spawn(move || {
                    for k in 0..EACH {
                        {
                            let mut order = relock(stack);
                            order.push(t * EACH + k);
                            l.stage(&mut vec![t * EACH + k]);
                        }
                        l.send();
                    }
                });
            }
        });
        assert!(!l.is_waiting(), "the last sender left nothing behind");
        assert_eq!(*relock(&out), *relock(&stack));
        assert_eq!(l.sent(), u64::from(THREADS * EACH));
    }
}
