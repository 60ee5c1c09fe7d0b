//! Packet I/O: everything between a shard and the wire.
//!
//! This crate owns the [`Nic`] trait (burst receive and transmit of frame buffers, MAC, MTU,
//! offload capabilities, link state, port statistics, the rx interrupt fd) and its backends:
//! - [`dpdk`]: any DPDK PMD (`net_af_xdp`, `net_af_packet`, real NICs) through the EAL;
//! - [`fault`]: a wrapper around any backend that loses, duplicates, reorders, delays and
//!   corrupts frames from a seeded generator (the lab kernel has no netem). A product part, not a
//!   test rig: `[nic] fault = ...` wraps the DPDK port of an accelerated process in it.
//!
//! The in-memory pair the tests run on is `testkit::mem`.
//!
//! Beside them: [`lane`], a tx queue driven outside the stack's lock; [`xdp`], pronghorn's XDP
//! program and its maps; and [`ifaddr`], the kernel's addresses of an interface.
//!
//! It knows frames, not protocols: nothing here parses a header. Burst calls only on the data
//! path; setup and statistics are the slow path.

pub mod clock;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod fault;
pub mod ifaddr;
pub mod lane;
#[cfg(feature = "dpdk")]
pub mod share;
#[cfg(feature = "dpdk")]
pub mod xdp;

use std::fmt;
use std::os::fd::RawFd;

/// A 48-bit Ethernet address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One frame buffer owned by a backend (an mbuf, a pooled heap buffer). Dropping it gives it back.
pub trait PacketBuf {
    /// The frame, `len()` bytes.
    fn data(&self) -> &[u8];
    /// The frame, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Sets the frame length. Panics if `len > capacity()`.
    fn set_len(&mut self, len: usize);
    /// The largest frame this buffer can hold.
    fn capacity(&self) -> usize;
    fn len(&self) -> usize {
        self.data().len()
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Asks the NIC to fill the checksums this frame's headers leave to it, as the offloads it
    /// reports allow ([`Offloads::tx_ipv4_checksum`], [`Offloads::tx_l4_checksum`]): an IPv4
    /// header checksum left zero, a TCP or UDP checksum field holding the pseudo-header sum.
    /// Frames without the request carry their checksums complete. This default does nothing
    /// (a backend without the offloads).
    fn request_checksums(&mut self) {}

    /// Asks the NIC to cut this frame, one TCP segment larger than the MSS, into segments of
    /// `seg.mss` payload bytes on transmit (TCP segmentation offload). Only for buffers from
    /// [`Nic::alloc_tso`] of a NIC whose [`Offloads::tx_tcp_segmentation`] is true; a backend
    /// without the offload never hands such buffers out, and this default does nothing.
    fn request_segmentation(&mut self, seg: Segmentation) {
        let _ = seg;
    }
}

/// What a NIC needs to know to segment a TCP frame (DPDK's `l2_len`, `l3_len`, `l4_len` and
/// `tso_segsz`): the headers it copies into every piece and the payload of each piece. The
/// frame's IPv4 header checksum is left to the NIC, and its TCP checksum field holds the
/// pseudo-header sum without the length (DPDK's `rte_ipv4_phdr_cksum` of a TSO frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segmentation {
    /// The Ethernet header.
    pub l2_len: u16,
    /// The IP header.
    pub l3_len: u16,
    /// The TCP header, options included.
    pub l4_len: u16,
    /// Payload bytes per piece (the last one may be shorter).
    pub mss: u16,
    /// IPv4 (else IPv6).
    pub ipv4: bool,
}

/// Checksum and segmentation work the hardware does for us. A backend without offloads reports
/// all false and the stack computes (and checks) every checksum itself and sends MSS-sized frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    pub rx_ipv4_checksum: bool,
    pub rx_l4_checksum: bool,
    pub tx_ipv4_checksum: bool,
    pub tx_l4_checksum: bool,
    /// TCP segmentation offload: the NIC cuts a TCP frame of up to
    /// [`TSO_MAX_FRAME`] bytes into MSS-sized segments ([`PacketBuf::request_segmentation`],
    /// buffers from [`Nic::alloc_tso`]). Implies both tx checksum offloads. For TCP over IPv4.
    pub tx_tcp_segmentation: bool,
    /// The same for TCP over IPv6 (implies `tx_tcp_segmentation`): some NICs segment IPv4 only
    /// (DPDK 22.11's net_tap).
    pub tx_tcp6_segmentation: bool,
}

/// The largest frame a NIC with TCP segmentation offload takes: what one DPDK mbuf holds
/// after its headroom (its `buf_len` is 16 bits), above the 64 KiB of payload Linux's GSO
/// gives a segment less its headers.
pub const TSO_MAX_FRAME: usize = 65535 - 128;

/// Link state as the port reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub up: bool,
    /// 0 when unknown.
    pub speed_mbps: u32,
}

/// Port counters, DPDK's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    /// Frames the port dropped because rx was not drained fast enough.
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    /// Receptions that found no buffer in the pool (DPDK's `rx_nombuf`): af_xdp then leaves the
    /// frames in the ring and cannot refill the fill ring, and the kernel drops what comes next.
    pub rx_nombuf: u64,
    /// Frames the kernel dropped because the AF_XDP rx ring was full (XDP_STATISTICS
    /// `rx_ring_full`): rx not drained fast enough, which DPDK 22.11's af_xdp leaves out of
    /// `imissed` (it counts `rx_dropped` only).
    pub rx_ring_full: u64,
    /// Frames the kernel refused to send from the AF_XDP tx ring (XDP_STATISTICS
    /// `tx_invalid_descs`), which DPDK 22.11's af_xdp leaves out of `oerrors`.
    pub tx_invalid: u64,
    /// pronghorn's XDP program (`xdp`): frames handed to the AF_XDP socket.
    pub xdp_redirected: u64,
    /// pronghorn's XDP program: frames passed to the kernel, not pronghorn's.
    pub xdp_passed: u64,
    /// pronghorn's XDP program: frames pronghorn owns passed to the kernel because the queue had
    /// no socket.
    pub xdp_no_socket: u64,
}

/// A network port with one rx and one tx queue, driven by bursts.
pub trait Nic {
    type Buf: PacketBuf;

    /// Receives up to `max` frames, appending them to `out`. Returns how many arrived.
    fn rx_burst(&mut self, out: &mut Vec<Self::Buf>, max: usize) -> usize;

    /// Transmits frames from the front of `bufs`, removing those sent. Returns how many were sent;
    /// the rest stay in `bufs` (the queue is full) for the caller to retry or drop.
    fn tx_burst(&mut self, bufs: &mut Vec<Self::Buf>) -> usize;

    /// An empty buffer (length 0) for a frame to transmit, or `None` when the pool is exhausted.
    fn alloc(&mut self) -> Option<Self::Buf>;

    /// An empty buffer for a TCP frame the NIC will segment, of up to [`TSO_MAX_FRAME`] bytes,
    /// or `None` (no such offload, or its pool is exhausted: the caller sends MSS-sized
    /// frames).
    fn alloc_tso(&mut self) -> Option<Self::Buf> {
        None
    }

    fn mac(&self) -> MacAddr;

    /// The IP MTU (the Ethernet payload size), 1500 on a default veth.
    fn mtu(&self) -> u16;

    fn offloads(&self) -> Offloads {
        Offloads::default()
    }

    fn link(&self) -> Link;

    fn stats(&self) -> NicStats;

    /// Buffers of the pool in use and the pool's size, for `pronghorn stat` (`None`: the
    /// backend cannot tell).
    fn pool_usage(&self) -> Option<(u64, u64)> {
        None
    }

    /// Whether another process waits to take over this NIC's queue (a reload's new worker or
    /// master, waiting for the old one's queue: `share::QueueClaim::successor_waits` on a DPDK
    /// port). Its
    /// stack then leaves a SYN that finds no listener unanswered rather than resetting it: the
    /// client's retransmission reaches the successor. Asked only for such SYNs (a system call
    /// on a DPDK port). `false` (the default): the backend has no queue another process could
    /// take.
    fn successor_waits(&self) -> bool {
        false
    }

    /// A file descriptor that becomes readable when frames arrive, for a shard that wants to sleep
    /// instead of spinning. `None` when the backend has none (then the shard must poll).
    fn rx_interrupt_fd(&self) -> Option<RawFd> {
        None
    }

    /// Moves the tx queue into a [`lane::TxLane`]: from now on `tx_burst` only stages the
    /// frames (it takes them all), and they go to the queue when someone calls `send` on the
    /// returned handle, from any thread, with none of this NIC's other calls serialised against
    /// it. Its caller must call `send` after each hold of what serialises those calls (the
    /// runtime's lock). `None` (the default): the backend cannot, or it is already detached;
    /// `tx_burst` then sends as before.
    fn detach_tx(&mut self) -> Option<std::sync::Arc<dyn lane::TxSender>> {
        None
    }
}
