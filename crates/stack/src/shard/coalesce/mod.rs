//! Receive coalescing in software, as Linux's GRO (`tcp_gro_receive`): within one rx burst, the
//! consecutive in-order data segments of one established connection are held and handed to the
//! connection as one segment when the burst ends (`Connection::handle_coalesced`): one pass
//! through its input, one ACK decision, one wakeup, one copy into the receive ring. The frames
//! are not copied to be joined; they are kept until then and go back to the pool after.
//!
//! A segment joins the run of its connection only if TCP would have treated it exactly as the
//! one before it apart from its data (Linux's rules): it starts where the run ends; it has the
//! same acknowledgment number, window, options (byte for byte: the same timestamp value and
//! echo, SACK blocks) and ECN codepoint; its flags are ACK, or ACK and PSH; every segment
//! before it was full-sized (the run's first one's size) and it is no bigger; the run stays
//! under 64 KiB. A PSH or a short segment ends a run (it joins, nothing joins after it). A
//! segment with any other flag (SYN, FIN, RST, URG, ECE, CWR), without data, with IP options,
//! IPv6 extension headers or to a connection not established is never held: the run of its
//! connection is handed over first, then the segment, so the connection sees them in order.
//! Checksums are checked per segment before (ingress and the transport layer).
//! Counted: `tcp_gro_merged`, the segments that joined a run (Linux has no MIB counter for GRO).
//!
//! It must not decide anything TCP decides (acceptability, ACKs): the connection does, once.
//!
//! This module holds the values (a run, the runs of a burst), knowing nothing of the shard;
//! `delivery` holds segments in runs and hands the runs to their connections.

use wire::{TcpFlags, TcpRepr};

use super::link::RX_BURST;
use super::sockets::SocketId;
use super::transport::Candidate;

mod delivery;

/// Runs held at once (Linux's `MAX_GRO_SKBS`): one more starts by handing over the oldest.
const MAX_RUNS: usize = 8;
/// The most data one run carries (Linux's default `gro_max_size`, 64 KiB, less the headers).
const MAX_RUN_BYTES: usize = 65_535 - 40;

/// The held segments of one connection: the first one's header (its payload length the sum,
/// PSH if the last had it), and each frame with where its payload lies.
struct Run<B> {
    id: SocketId,
    head: TcpRepr,
    ecn: u8,
    /// The first segment's payload size: every segment but the last has it.
    piece: usize,
    /// The sequence number after the last segment.
    end: u32,
    /// A PSH or a short segment joined: nothing more may.
    ended: bool,
    frames: Vec<(B, (usize, usize))>,
}

impl<B> Run<B> {
    /// Whether `c` continues this run (see the module's doc).
    fn takes(&self, c: &Candidate) -> bool {
        let (h, r) = (&self.head, &c.repr);
        !self.ended
            && c.repr.seq_number == self.end
            && r.payload_len <= self.piece
            && self.head.payload_len + r.payload_len <= MAX_RUN_BYTES
            && self.frames.len() < RX_BURST
            && c.ecn == self.ecn
            && r.ack_number == h.ack_number
            && r.window_len == h.window_len
            && r.timestamp == h.timestamp
            && r.sack_ranges == h.sack_ranges
            && r.window_scale == h.window_scale
            && r.max_seg_size == h.max_seg_size
            && r.sack_permitted == h.sack_permitted
    }

    /// Adds `c` (one it [`Run::takes`], or the first).
    fn push(&mut self, buf: B, c: &Candidate) {
        let len = c.repr.payload_len;
        if self.frames.is_empty() {
            self.head = c.repr;
            self.piece = len;
            self.ecn = c.ecn;
        } else {
            self.head.payload_len += len;
            self.head.flags |= c.repr.flags & TcpFlags::PSH;
        }
        self.id = c.id;
        self.end = c.repr.seq_number.wrapping_add(len as u32);
        self.ended = c.repr.flags.contains(TcpFlags::PSH) || len < self.piece;
        self.frames.push((buf, c.payload));
    }
}

/// The runs held during one burst; their frame lists are kept for the next.
pub(super) struct Coalescer<B> {
    runs: Vec<Run<B>>,
    live: usize,
}

impl<B> Default for Coalescer<B> {
    fn default() -> Self {
        Coalescer { runs: Vec::new(), live: 0 }
    }
}
