//! An in-memory pair of endpoints joined back to back: what one transmits, the other receives, in
//! order.
//!
//! Deterministic (no threads, no clock) and single-threaded: the two endpoints share their queues
//! through an `Rc<RefCell<..>>`, so both must live on one thread. Meant for tests and stack-level
//! benchmarks, so the hot path is cheap: buffers come from a per-endpoint free list (filled lazily,
//! up to `pool_size`), the queues are preallocated, and nothing is allocated per frame once every
//! buffer of the pool has been used once.
//!
//! ```
//! use testkit::mem::{pair, MemConfig};
//! use nic::{Nic, PacketBuf};
//!
//! let (mut a, mut b) = pair(MemConfig::default());
//! let mut buf = a.alloc().unwrap();
//! buf.set_len(3);
//! buf.data_mut().copy_from_slice(b"abc");
//! let mut tx = vec![buf];
//! assert_eq!(a.tx_burst(&mut tx), 1);
//! let mut rx = Vec::new();
//! assert_eq!(b.rx_burst(&mut rx, 32), 1);
//! assert_eq!(rx[0].data(), b"abc");
//! drop(rx);
//! assert_eq!(a.pool_available(), a.pool_size());
//! ```

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;

use nic::{Link, MacAddr, Nic, NicStats, Offloads, PacketBuf, Segmentation, TSO_MAX_FRAME};

use crate::offload;

/// The Ethernet header a buffer holds on top of the MTU (no FCS).
pub const ETH_HEADER_LEN: usize = 14;

/// Settings of a [`pair`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemConfig {
    /// The IP MTU; a buffer holds `mtu + 14` bytes.
    pub mtu: u16,
    /// Frames queued per direction before `tx_burst` pushes back.
    pub queue_len: usize,
    /// Buffers per endpoint.
    pub pool_size: usize,
    /// The first endpoint's MAC.
    pub mac_a: MacAddr,
    /// The second endpoint's MAC.
    pub mac_b: MacAddr,
    /// Transmit offloads as a NIC with them has: IPv4, TCP and UDP checksums and TCP
    /// segmentation, done in software on transmit ([`crate::offload`]) so that the peer
    /// receives what a real wire would carry. Off by default; `PRONGHORN_TEST_TSO=1` in the
    /// environment turns it on for every pair made from the default, so that the whole stack
    /// test suite can run with it.
    pub tso: bool,
    /// With `tso`: whether TCP over IPv6 is segmented too. Off, as DPDK 22.11's net_tap: the
    /// NIC reports IPv4 segmentation only, and a frame over IPv6 that asks for it is not sent
    /// (counted in `oerrors`: on the wire it would be larger than the MTU).
    pub tso_ipv6: bool,
}

/// Frames of [`TSO_MAX_FRAME`] bytes per endpoint for TCP segmentation.
const TSO_POOL_SIZE: usize = 64;

impl Default for MemConfig {
    fn default() -> Self {
        Self {
            mtu: 1500,
            queue_len: 1024,
            pool_size: 4096,
            mac_a: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            mac_b: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            tso: std::env::var_os("PRONGHORN_TEST_TSO").is_some_and(|v| v == "1"),
            tso_ipv6: true,
        }
    }
}

/// One endpoint's buffer pool: a free list of fixed-size buffers, created on first use.
struct Pool {
    free: RefCell<Vec<Box<[u8]>>>,
    /// Buffers created so far (at most `size`).
    created: Cell<usize>,
    size: usize,
    buf_capacity: usize,
}

impl Pool {
    fn new(size: usize, buf_capacity: usize) -> Rc<Self> {
        Rc::new(Self { free: RefCell::new(Vec::with_capacity(size)), created: Cell::new(0), size, buf_capacity })
    }

    fn available(&self) -> usize {
        self.free.borrow().len() + (self.size - self.created.get())
    }

    fn take(&self) -> Option<Box<[u8]>> {
        if let Some(b) = self.free.borrow_mut().pop() {
            return Some(b);
        }
        let created = self.created.get();
        if created < self.size {
            self.created.set(created + 1);
            Some(vec![0u8; self.buf_capacity].into_boxed_slice())
        } else {
            None
        }
    }

    fn give_back(&self, b: Box<[u8]>) {
        // The free list was allocated with room for the whole pool: no reallocation here.
        self.free.borrow_mut().push(b);
    }
}

/// A frame buffer of a [`MemNic`]. Goes back to the pool it came from when dropped, whichever
/// endpoint drops it.
pub struct MemBuf {
    storage: Box<[u8]>,
    len: usize,
    pool: Rc<Pool>,
    /// Asked to be cut into TCP segments on transmit.
    segmentation: Option<Segmentation>,
    /// Asked to have its checksums filled on transmit.
    checksums: bool,
}

impl PacketBuf for MemBuf {
    #[inline]
    fn data(&self) -> &[u8] {
        &self.storage[..self.len]
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.storage[..self.len]
    }

    #[inline]
    fn set_len(&mut self, len: usize) {
        assert!(len <= self.storage.len(), "MemBuf::set_len({len}) over the buffer capacity {}", self.storage.len());
        self.len = len;
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.storage.len()
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    fn request_segmentation(&mut self, seg: Segmentation) {
        self.segmentation = Some(seg);
    }

    fn request_checksums(&mut self) {
        self.checksums = true;
    }
}

impl Drop for MemBuf {
    fn drop(&mut self) {
        // An empty boxed slice does not allocate.
        let storage = std::mem::take(&mut self.storage);
        self.pool.give_back(storage);
    }
}

impl fmt::Debug for MemBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemBuf").field("len", &self.len).field("capacity", &self.storage.len()).finish()
    }
}

/// The wire between the two endpoints: `to[i]` holds the frames on their way to endpoint `i`.
struct Wire {
    to: [VecDeque<MemBuf>; 2],
}

/// One endpoint of an in-memory pair, made by [`pair`].
pub struct MemNic {
    /// 0 for the first endpoint, 1 for the second.
    side: usize,
    wire: Rc<RefCell<Wire>>,
    pool: Rc<Pool>,
    /// Buffers for frames to segment, when the offloads are on.
    tso_pool: Option<Rc<Pool>>,
    /// Segments TCP over IPv6 too ([`MemConfig::tso_ipv6`]).
    tso_ipv6: bool,
    /// Frames cut into TCP segments so far.
    segmented: u64,
    /// The most frames one `tx_burst` call was handed so far.
    largest_tx_burst: usize,
    queue_len: usize,
    mtu: u16,
    mac: MacAddr,
    stats: NicStats,
    /// What `successor_waits` answers ([`MemNic::set_successor_waits`]).
    successor_waits: bool,
}

/// Two endpoints joined back to back: what one transmits, the other receives, in order. The first
/// has `cfg.mac_a`, the second `cfg.mac_b`.
pub fn pair(cfg: MemConfig) -> (MemNic, MemNic) {
    let buf_capacity = cfg.mtu as usize + ETH_HEADER_LEN;
    let wire = Rc::new(RefCell::new(Wire {
        to: [VecDeque::with_capacity(cfg.queue_len), VecDeque::with_capacity(cfg.queue_len)],
    }));
    let endpoint = |side: usize, mac: MacAddr| MemNic {
        side,
        wire: Rc::clone(&wire),
        pool: Pool::new(cfg.pool_size, buf_capacity),
        tso_pool: cfg.tso.then(|| Pool::new(TSO_POOL_SIZE, TSO_MAX_FRAME)),
        tso_ipv6: cfg.tso_ipv6,
        segmented: 0,
        largest_tx_burst: 0,
        queue_len: cfg.queue_len,
        mtu: cfg.mtu,
        mac,
        stats: NicStats::default(),
        successor_waits: false,
    };
    let a = endpoint(0, cfg.mac_a);
    let b = endpoint(1, cfg.mac_b);
    (a, b)
}

impl MemNic {
    /// Makes [`Nic::successor_waits`] answer `waits`, as a DPDK port does while another
    /// process waits for its queue.
    pub fn set_successor_waits(&mut self, waits: bool) {
        self.successor_waits = waits;
    }

    /// Buffers of this endpoint's pool not in use (neither held by anyone nor queued). Equal to
    /// [`pool_size`](Self::pool_size) when nothing leaked. (The segmentation pool's buffers
    /// never stay in use: a frame to segment goes back to it on transmit.)
    pub fn pool_available(&self) -> usize {
        self.pool.available()
    }

    /// Buffers in this endpoint's pool.
    pub fn pool_size(&self) -> usize {
        self.pool.size
    }

    /// Frames waiting to be received by this endpoint.
    pub fn rx_pending(&self) -> usize {
        self.wire.borrow().to[self.side].len()
    }

    /// Frames this endpoint could still transmit before the peer's queue is full.
    pub fn tx_space(&self) -> usize {
        self.queue_len - self.wire.borrow().to[1 - self.side].len()
    }

    /// Frames this endpoint cut into TCP segments on transmit ([`MemConfig::tso`]).
    pub fn frames_segmented(&self) -> u64 {
        self.segmented
    }

    /// The most frames one `tx_burst` call was handed so far (taken or not).
    pub fn largest_tx_burst(&self) -> usize {
        self.largest_tx_burst
    }

    /// The capacity of every buffer: `mtu + 14`.
    pub fn buf_capacity(&self) -> usize {
        self.pool.buf_capacity
    }
}

impl fmt::Debug for MemNic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemNic")
            .field("side", &if self.side == 0 { "a" } else { "b" })
            .field("mac", &self.mac)
            .field("mtu", &self.mtu)
            .field("rx_pending", &self.rx_pending())
            .field("pool_available", &self.pool_available())
            .finish()
    }
}

impl Nic for MemNic {
    type Buf = MemBuf;

    fn successor_waits(&self) -> bool {
        self.successor_waits
    }

    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        let mut wire = self.wire.borrow_mut();
        let q = &mut wire.to[self.side];
        let n = max.min(q.len());
        let mut bytes = 0u64;
        out.extend(q.drain(..n).inspect(|b| bytes += b.len as u64));
        self.stats.ipackets += n as u64;
        self.stats.ibytes += bytes;
        n
    }

    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        self.largest_tx_burst = self.largest_tx_burst.max(bufs.len());
        let wire = Rc::clone(&self.wire);
        let mut wire = wire.borrow_mut();
        let q = &mut wire.to[1 - self.side];
        let n = bufs.len().min(self.queue_len.saturating_sub(q.len()));
        if self.tso_pool.is_none() {
            let mut bytes = 0u64;
            q.extend(bufs.drain(..n).inspect(|b| bytes += b.len as u64));
            self.stats.opackets += n as u64;
            self.stats.obytes += bytes;
            return n;
        }
        // With the offloads, as a NIC: a frame to segment leaves as its pieces (which may go
        // beyond the queue's length), a frame that asks for it with its checksums finished.
        for mut buf in bufs.drain(..n) {
            let Some(seg) = buf.segmentation.take() else {
                if std::mem::take(&mut buf.checksums) {
                    offload::finish_checksums(buf.data_mut());
                }
                self.stats.opackets += 1;
                self.stats.obytes += buf.len as u64;
                q.push_back(buf);
                continue;
            };
            if !seg.ipv4 && !self.tso_ipv6 {
                self.stats.oerrors += 1;
                continue;
            }
            self.segmented += 1;
            offload::segment(buf.data(), seg, |piece| match self.alloc() {
                Some(mut p) => {
                    p.set_len(piece.len());
                    p.data_mut().copy_from_slice(piece);
                    self.stats.opackets += 1;
                    self.stats.obytes += piece.len() as u64;
                    q.push_back(p);
                }
                None => self.stats.oerrors += 1,
            });
        }
        n
    }

    fn alloc(&mut self) -> Option<MemBuf> {
        let storage = self.pool.take()?;
        Some(MemBuf { storage, len: 0, pool: Rc::clone(&self.pool), segmentation: None, checksums: false })
    }

    fn alloc_tso(&mut self) -> Option<MemBuf> {
        let pool = self.tso_pool.as_ref()?;
        let storage = pool.take()?;
        Some(MemBuf { storage, len: 0, pool: Rc::clone(pool), segmentation: None, checksums: false })
    }

    fn offloads(&self) -> Offloads {
        let on = self.tso_pool.is_some();
        Offloads {
            tx_ipv4_checksum: on,
            tx_l4_checksum: on,
            tx_tcp_segmentation: on,
            tx_tcp6_segmentation: on && self.tso_ipv6,
            ..Offloads::default()
        }
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn mtu(&self) -> u16 {
        self.mtu
    }

    fn link(&self) -> Link {
        Link { up: true, speed_mbps: 0 }
    }

    fn stats(&self) -> NicStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame whose bytes depend on `i` (and whose length varies with it).
    fn frame(nic: &mut MemNic, i: u32) -> MemBuf {
        let mut b = nic.alloc().expect("pool exhausted");
        let len = 60 + (i as usize * 7) % 1000;
        b.set_len(len);
        for (k, byte) in b.data_mut().iter_mut().enumerate() {
            *byte = (i as usize).wrapping_mul(31).wrapping_add(k) as u8;
        }
        b.data_mut()[..4].copy_from_slice(&i.to_be_bytes());
        b
    }

    fn expected(i: u32) -> Vec<u8> {
        let len = 60 + (i as usize * 7) % 1000;
        let mut v: Vec<u8> = (0..len).map(|k| (i as usize).wrapping_mul(31).wrapping_add(k) as u8).collect();
        v[..4].copy_from_slice(&i.to_be_bytes());
        v
    }

    #[test]
    fn defaults() {
        let c = MemConfig::default();
        assert_eq!((c.mtu, c.queue_len, c.pool_size), (1500, 1024, 4096));
        let (a, b) = pair(c);
        assert_eq!(a.mac().to_string(), "02:00:00:00:00:01");
        assert_eq!(b.mac().to_string(), "02:00:00:00:00:02");
        assert_eq!(a.mtu(), 1500);
        assert_eq!(a.buf_capacity(), 1514);
        assert_eq!(a.link(), Link { up: true, speed_mbps: 0 });
        assert_eq!(a.rx_interrupt_fd(), None);
        assert_eq!(a.pool_available(), 4096);
        assert_eq!(b.pool_available(), 4096);
    }

    #[test]
    fn frames_arrive_in_order_byte_identical_both_ways() {
        fn one_way(tx: &mut MemNic, rx: &mut MemNic) {
            let mut out: Vec<MemBuf> = (0..100).map(|i| frame(tx, i)).collect();
            assert_eq!(tx.tx_burst(&mut out), 100);
            assert!(out.is_empty());
            assert_eq!(rx.rx_pending(), 100);
            let mut got = Vec::new();
            // Several bursts, the last one short.
            while rx.rx_burst(&mut got, 32) > 0 {}
            assert_eq!(got.len(), 100);
            for (i, b) in got.iter().enumerate() {
                assert_eq!(b.data(), &expected(i as u32)[..], "frame {i}");
            }
            assert_eq!(rx.rx_pending(), 0);
        }
        let (mut a, mut b) = pair(MemConfig::default());
        one_way(&mut a, &mut b);
        one_way(&mut b, &mut a);
    }

    #[test]
    fn rx_burst_respects_max_and_appends() {
        let (mut a, mut b) = pair(MemConfig::default());
        let mut out: Vec<MemBuf> = (0..10).map(|i| frame(&mut a, i)).collect();
        a.tx_burst(&mut out);
        let mut got = vec![frame(&mut b, 99)];
        assert_eq!(b.rx_burst(&mut got, 4), 4);
        assert_eq!(got.len(), 5);
        assert_eq!(got[1].data(), &expected(0)[..]);
        assert_eq!(b.rx_burst(&mut got, 0), 0);
        assert_eq!(b.rx_pending(), 6);
    }

    #[test]
    fn back_pressure_leaves_unsent_frames_in_the_callers_vec() {
        let (mut a, mut b) = pair(MemConfig { queue_len: 8, ..MemConfig::default() });
        let mut out: Vec<MemBuf> = (0..12).map(|i| frame(&mut a, i)).collect();
        assert_eq!(a.tx_space(), 8);
        assert_eq!(a.tx_burst(&mut out), 8);
        assert_eq!(out.len(), 4);
        // The unsent ones are the last four, still in order.
        for (k, buf) in out.iter().enumerate() {
            assert_eq!(buf.data(), &expected(8 + k as u32)[..]);
        }
        assert_eq!(a.tx_space(), 0);
        assert_eq!(a.tx_burst(&mut out), 0);
        assert_eq!(out.len(), 4);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(&mut got, 3), 3);
        assert_eq!(a.tx_burst(&mut out), 3);
        assert_eq!(out.len(), 1);
        while b.rx_burst(&mut got, 64) > 0 {}
        assert_eq!(a.tx_burst(&mut out), 1);
        b.rx_burst(&mut got, 64);
        assert_eq!(got.len(), 12);
        for (i, buf) in got.iter().enumerate() {
            assert_eq!(buf.data(), &expected(i as u32)[..]);
        }
        // The other direction has its own queue.
        assert_eq!(b.tx_space(), 8);
    }

    #[test]
    fn buffers_return_to_the_senders_pool() {
        let (mut a, mut b) = pair(MemConfig { pool_size: 16, ..MemConfig::default() });
        let mut out: Vec<MemBuf> = (0..16).map(|i| frame(&mut a, i)).collect();
        assert_eq!(a.pool_available(), 0);
        assert!(a.alloc().is_none(), "an exhausted pool must say so");
        a.tx_burst(&mut out);
        // Queued frames still count as used.
        assert_eq!(a.pool_available(), 0);
        let mut got = Vec::new();
        b.rx_burst(&mut got, 64);
        assert_eq!(a.pool_available(), 0);
        assert_eq!(b.pool_available(), 16, "the receiver's pool is untouched");
        got.truncate(10);
        assert_eq!(a.pool_available(), 6);
        drop(got);
        assert_eq!(a.pool_available(), 16);
        // Recycled buffers work again (and come back with length 0).
        let again = a.alloc().unwrap();
        assert_eq!(again.len(), 0);
        assert_eq!(again.capacity(), 1514);
    }

    #[test]
    fn queued_frames_are_freed_when_the_receiver_goes_away() {
        let (mut a, b) = pair(MemConfig { pool_size: 4, ..MemConfig::default() });
        let mut out: Vec<MemBuf> = (0..4).map(|i| frame(&mut a, i)).collect();
        a.tx_burst(&mut out);
        assert_eq!(a.pool_available(), 0);
        drop(b);
        // `a` still owns the wire, so the queue lives on until `a` goes too: no use after free.
        assert_eq!(a.pool_available(), 0);
        drop(a);
    }

    #[test]
    fn stats_count_packets_and_bytes() {
        let (mut a, mut b) = pair(MemConfig { queue_len: 4, ..MemConfig::default() });
        let mut out: Vec<MemBuf> = (0..6).map(|i| frame(&mut a, i)).collect();
        let sent_bytes: u64 = (0..4).map(|i| expected(i).len() as u64).sum();
        assert_eq!(a.tx_burst(&mut out), 4);
        assert_eq!(a.stats(), NicStats { opackets: 4, obytes: sent_bytes, ..NicStats::default() });
        // Nothing counted on rx before delivery.
        assert_eq!(b.stats(), NicStats::default());
        let mut got = Vec::new();
        b.rx_burst(&mut got, 3);
        let got_bytes: u64 = (0..3).map(|i| expected(i).len() as u64).sum();
        assert_eq!(b.stats(), NicStats { ipackets: 3, ibytes: got_bytes, ..NicStats::default() });
        b.rx_burst(&mut got, 3);
        assert_eq!(b.stats().ipackets, 4);
        assert_eq!(b.stats().ibytes, sent_bytes);
        assert_eq!(b.stats().imissed, 0);
    }

    #[test]
    #[should_panic(expected = "over the buffer capacity")]
    fn set_len_over_capacity_panics() {
        let (mut a, _b) = pair(MemConfig { mtu: 100, ..MemConfig::default() });
        let mut buf = a.alloc().unwrap();
        buf.set_len(114);
        buf.set_len(115);
    }
}
