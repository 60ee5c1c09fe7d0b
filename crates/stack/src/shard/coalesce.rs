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

use nic::{Nic, PacketBuf};
use wire::{TcpFlags, TcpRepr};

use super::transport::Candidate;
use super::Socket;
use super::{Shard, SocketId, RX_BURST};

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

impl<N: Nic> Shard<N> {
    /// Holds `c` (its frame `buf`) in its connection's run, or starts one: the run it does not
    /// continue is handed over first, and with [`MAX_RUNS`] held, the oldest.
    pub(super) fn hold(&mut self, buf: N::Buf, c: Candidate) {
        let live = self.coalescer.live;
        if let Some(i) = self.coalescer.runs[..live].iter().position(|r| r.id == c.id) {
            if self.coalescer.runs[i].takes(&c) {
                self.stats.tcp_gro_merged += 1;
                self.coalescer.runs[i].push(buf, &c);
                return;
            }
            self.deliver_run(i);
        } else if live == MAX_RUNS {
            self.deliver_run(0);
        }
        let live = self.coalescer.live;
        if live == self.coalescer.runs.len() {
            self.coalescer.runs.push(Run {
                id: c.id,
                head: c.repr,
                ecn: c.ecn,
                piece: 0,
                end: 0,
                ended: false,
                frames: Vec::with_capacity(RX_BURST),
            });
        }
        self.coalescer.runs[live].push(buf, &c);
        self.coalescer.live += 1;
    }

    /// Whether connection `id` has a run held in this burst.
    pub(super) fn holds_run_of(&self, id: SocketId) -> bool {
        self.coalescer.runs[..self.coalescer.live].iter().any(|r| r.id == id)
    }

    /// Hands connection `id` its held run, if it has one (a segment of it that may not join
    /// comes next).
    pub(super) fn deliver_run_of(&mut self, id: SocketId) {
        let live = self.coalescer.live;
        if let Some(i) = self.coalescer.runs[..live].iter().position(|r| r.id == id) {
            self.deliver_run(i);
        }
    }

    /// Hands every held run to its connection (the burst is over).
    pub(super) fn deliver_runs(&mut self) {
        while self.coalescer.live > 0 {
            self.deliver_run(0);
        }
    }

    /// Hands run `i` to its connection, as one segment, and keeps the order of the others.
    fn deliver_run(&mut self, i: usize) {
        let mut run = self.coalescer.runs.remove(i);
        self.coalescer.live -= 1;
        let mut parts: [&[u8]; RX_BURST] = [&[]; RX_BURST];
        for (part, (buf, (start, end))) in parts.iter_mut().zip(&run.frames) {
            *part = &buf.data()[*start..*end];
        }
        self.deliver(run.id, &run.head, &parts[..run.frames.len()], run.ecn);
        run.frames.clear();
        self.coalescer.runs.push(run);
    }

    /// Hands connection `id` a segment (or a run as one), with the shard's part around it: its
    /// memory budget before, the challenge-ACK budget, its memory charged after.
    pub(super) fn deliver(&mut self, id: SocketId, repr: &TcpRepr, parts: &[&[u8]], ecn: u8) {
        let now = self.now;
        self.give_budget(id);
        let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return };
        s.conn.handle_coalesced(now, repr, parts, ecn == super::ECN_CE);
        if s.conn.challenge_ack_pending() && !self.take_challenge_ack() {
            if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
                s.conn.cancel_challenge_ack();
            }
        }
        self.recharge(id);
        self.sockets.mark_dirty(id);
    }
}
