//! What the connection sends: `poll_transmit` picks the next segment (a pending RST, the SYN or
//! SYN-ACK, retransmissions and new data in RFC 6675 NextSeg order, an owed ACK, a probe) and
//! builds it: header, options, SACK blocks, the window to advertise, the urgent pointer. Sender
//! SWS avoidance, Nagle and the congestion and peer windows are applied here. It must not read
//! segments.

use wire::{TcpFlags, TcpRepr};

use crate::congestion::CongestionControl;
use crate::time::Instant;
use crate::{segment, seq};

use super::bits::Bit;
use super::ecn::EcnBit;
use super::params::Opt;
use super::recovery::Recovery;
use super::timers::Timer;
use super::{Connection, Rst, State};

/// What the connection owes the peer besides data, each sent by the next `poll_transmit`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Owed {
    /// An ACK, now (not delayed).
    Ack,
    /// A challenge ACK (RFC 5961); the stack may cancel it (`cancel_challenge_ack`).
    ChallengeAck,
    /// A probe (zero window or keepalive): an ACK with SEG.SEQ = SND.UNA - 1.
    Probe,
    /// The persist timer fired with a small window open: send what fits, SWS or not.
    ForceSend,
    /// A RST (see `Connection::owe_rst`), before anything else.
    Rst,
    /// The RST carries an ACK.
    RstAck,
}

impl Bit for Owed {
    fn index(self) -> u8 {
        self as u8
    }
}

/// Length of a TCP header without options.
const HEADER_LEN: usize = wire::tcp::HEADER_LEN;

impl Connection {
    /// The next segment to send, if any: its header, with its payload copied into `payload`
    /// (`payload_len` bytes; pass a buffer of at least the MSS). Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant, payload: &mut [u8]) -> Option<TcpRepr> {
        self.ecn.remove(EcnBit::TransmitEct);
        if let Some(rst) = self.take_rst() {
            return Some(rst);
        }
        match self.state {
            State::Closed => return None,
            State::SynSent => {
                return (self.snd.nxt == self.snd.iss).then(|| self.send_syn(now));
            }
            State::SynReceived if self.snd.nxt == self.snd.iss => return Some(self.send_syn(now)),
            _ => {}
        }
        if self.can_send_data() {
            if let Some(repr) = self.transmit_data(now, payload) {
                return Some(repr);
            }
        }
        // An ACK that is owed goes before a probe, in a segment of its own. A probe is made to
        // be unacceptable (SEG.SEQ = SND.UNA - 1, left of the peer's window): the peer answers
        // it but does not look at its ACK field (RFC 9293 3.10.7.4; Linux drops it too). An
        // ACK, or a window update, that rode only on the probe would be lost: if the persist
        // timer keeps firing just as the peer's retransmissions arrive (both back off from the
        // same RTO), the peer never learns that its data arrived, and both sides wait forever
        // on each other's zero window. A delayed ACK counts: the probe would cancel its timer.
        if self.owed.has(Owed::Ack)
            || self.owed.has(Owed::ChallengeAck)
            || (self.owed.has(Owed::Probe) && self.timers.is_armed(Timer::Delack))
        {
            let seq = self.snd.max;
            return Some(self.emit(now, seq, 0, false, false, payload));
        }
        if self.owed.has(Owed::Probe) {
            self.owed.remove(Owed::Probe);
            let seq = self.snd.una.wrapping_sub(1);
            return Some(self.emit(now, seq, 0, false, false, payload));
        }
        self.arm_persist(now);
        None
    }

    /// Whether [`Connection::poll_transmit`] would return `None` now, and change nothing
    /// that shows: an established connection (or one in CLOSE-WAIT) that owes no RST, ACK or
    /// probe, has no probe or retransmission pending, is not recovering, and has sent all its
    /// data (and its FIN, if queued). The stack asks before it takes a frame buffer for a
    /// segment: every pass over a connection used to end with a buffer taken, a `poll_transmit`
    /// that found nothing and the buffer given back. `false` says nothing: poll.
    pub fn has_nothing_to_send(&self) -> bool {
        let data_end = self.snd.data_end();
        matches!(self.state, State::Established | State::CloseWait)
            && self.owed.is_empty()
            && !self.loss.send_probe
            && !self.loss.rtx_first
            && self.loss.mode == Recovery::None
            && !seq::lt(self.snd.nxt, self.snd.max)
            && !seq::lt(self.snd.nxt, data_end)
            && !(self.snd.fin_queued && seq::le(self.snd.nxt, data_end))
    }

    /// Owes the peer a RST: `<SEQ=seq><CTL=RST>`, or `<SEQ=seq><ACK=ack><CTL=RST,ACK>`.
    pub(super) fn owe_rst(&mut self, seq: u32, ack: Option<u32>) {
        self.rst = Rst { seq, ack: ack.unwrap_or(0) };
        self.owed.insert(Owed::Rst);
        self.owed.set(Owed::RstAck, ack.is_some());
    }

    /// The RST owed, if any.
    fn take_rst(&mut self) -> Option<TcpRepr> {
        if !self.owed.take(Owed::Rst) {
            return None;
        }
        let ack = self.owed.take(Owed::RstAck).then_some(self.rst.ack);
        Some(segment::rst(self.local_port, self.remote_port, self.rst.seq, ack))
    }

    /// Our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), first or again.
    fn send_syn(&mut self, now: Instant) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        let (ws, sack, ts) = if synack {
            (self.agreed.window_scale(), self.agreed.sack(), self.agreed.timestamps())
        } else {
            (self.p.has(Opt::OfferWindowScale), self.p.has(Opt::OfferSack), self.p.has(Opt::OfferTimestamps))
        };
        let wnd = self.syn_window();
        // RFC 3168 section 6.1.1: an ECN-setup SYN carries ECE and CWR, the SYN-ACK that
        // accepts it ECE alone. A SYN sent again does not ask (section 6.1.1.1: a middlebox may
        // drop it; Linux `tcp_ecn_clear_syn`), though a SYN-ACK that accepts still counts.
        let ecn = match (synack, self.ecn.has(EcnBit::On)) {
            (true, true) => TcpFlags::ECE,
            (false, true) if self.rtt.backoff == 0 => TcpFlags::ECE | TcpFlags::CWR,
            _ => TcpFlags::empty(),
        };
        let ack = synack.then_some(self.rcv.nxt);
        let repr = TcpRepr {
            window_scale: ws.then_some(self.agreed.rcv_wscale),
            max_seg_size: Some(self.p.mss),
            sack_permitted: sack,
            timestamp: ts.then(|| (self.ts.clock(now), if synack { self.ts.recent } else { 0 })),
            ..segment::bare_segment(
                self.local_port,
                self.remote_port,
                self.snd.iss,
                ack,
                ecn | TcpFlags::SYN,
                wnd as u16,
            )
        };
        self.snd.nxt = self.snd.iss.wrapping_add(1);
        self.snd.max = self.snd.nxt;
        if self.rtt.backoff == 0 {
            self.rtt.start_timing(self.snd.nxt, now);
        } else {
            self.retransmitted(now);
        }
        self.timers.arm(Timer::Rtx, now + self.rto());
        if synack {
            self.rcv.adv = seq::max(self.rcv.adv, self.rcv.nxt.wrapping_add(wnd));
            self.ack_sent();
        }
        repr
    }

    /// Retransmissions and new data, in RFC 6675 NextSeg order when in SACK recovery.
    fn transmit_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpRepr> {
        if buf.is_empty() {
            // No room for data (the caller should pass at least the MSS): only control
            // segments, so that a caller polling until `None` always gets there.
            return None;
        }
        if std::mem::take(&mut self.loss.send_probe) {
            if let Some(repr) = self.transmit_probe(now, buf) {
                return Some(repr);
            }
        }
        if self.loss.rtx_first {
            self.loss.rtx_first = false;
            if seq::lt(self.snd.una, self.snd.max) {
                let seq = self.snd.una;
                let limit = self.loss.sacked.next_start_after(seq).map_or(usize::MAX, |s| s.wrapping_sub(seq) as usize);
                return Some(self.retransmit(now, seq, limit, buf));
            }
        }
        if self.loss.mode == Recovery::Sack {
            let mss = self.eff_mss();
            if self.cc.cwnd().saturating_sub(self.loss.pipe()) < mss {
                return None;
            }
            // Rule 1: the first un-SACKed range deemed lost and not sent again.
            if let Some((s, e)) = self.loss.sent.next_lost(&self.loss.sacked) {
                return Some(self.retransmit(now, s, e.wrapping_sub(s) as usize, buf));
            }
            // Rule 2: new data.
            if let Some(repr) = self.transmit_new(now, buf, false) {
                return Some(repr);
            }
            // Rule 3: an un-SACKed range below the highest SACKed one, neither lost nor sent
            // again.
            let high = self.loss.sacked.highest()?;
            let (s, e) = self.loss.sent.next_unmarked_below(&self.loss.sacked, high)?;
            return Some(self.retransmit(now, s, e.wrapping_sub(s) as usize, buf));
        }
        self.transmit_new(now, buf, false)
    }

    /// The tail loss probe (RFC 8985 section 7.3): a new segment if the peer's window has room
    /// (the congestion window does not count), else the last segment again, unless the peer
    /// SACKed it.
    fn transmit_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpRepr> {
        if !self.probe_allowed() {
            return None;
        }
        let (repr, retransmitted) = match self.transmit_new(now, buf, true) {
            Some(repr) => (repr, false),
            None => {
                let data_end = self.snd.data_end();
                let last = data_end.wrapping_sub(self.eff_mss().min(data_end.wrapping_sub(self.snd.una)));
                if self.loss.sacked.first_unsacked(last) == self.snd.max {
                    return None;
                }
                (self.retransmit(now, last, usize::MAX, buf), true)
            }
        };
        self.loss.rack.probe_sent(self.snd.max, retransmitted);
        self.counters.loss_probes = self.counters.loss_probes.wrapping_add(1);
        self.timers.disarm_probe();
        Some(repr)
    }

    /// Sends again the segment at `seq` (at most `limit` bytes) without moving SND.NXT.
    pub(super) fn retransmit(&mut self, now: Instant, seq: u32, limit: usize, buf: &mut [u8]) -> TcpRepr {
        let fin_sent = self.snd.fin_queued && seq::gt(self.snd.max, self.snd.data_end());
        let repr = self.emit(now, seq, limit, fin_sent, false, buf);
        let end = seq.wrapping_add(repr.segment_len() as u32);
        self.loss.sent.retransmitted(seq, end, now);
        self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
        self.retransmitted(now);
        repr
    }

    /// The segment at SND.NXT: new data, or going back after an RTO (skipping what the peer
    /// SACKed). Applies the peer's window, the congestion window, sender SWS avoidance and
    /// Nagle; a `loss_probe` only the peer's window.
    fn transmit_new(&mut self, now: Instant, buf: &mut [u8], loss_probe: bool) -> Option<TcpRepr> {
        if seq::lt(self.snd.nxt, self.snd.max) {
            while let Some(end) = self.loss.sacked.covering(self.snd.nxt) {
                self.snd.nxt = seq::min(end, self.snd.max);
                if self.snd.nxt == self.snd.max {
                    break;
                }
            }
        }
        let data_end = self.snd.data_end();
        let avail = if seq::lt(self.snd.nxt, data_end) { data_end.wrapping_sub(self.snd.nxt) as usize } else { 0 };
        let fin_unsent = self.snd.fin_queued && seq::le(self.snd.nxt, data_end);
        if avail == 0 && !fin_unsent {
            return None;
        }
        let is_rtx = seq::lt(self.snd.nxt, self.snd.max);
        let mss = self.data_room(buf) as usize;
        let mut cwnd_room = self.cwnd_room();
        if self.loss.mode == Recovery::None && !is_rtx {
            // Limited Transmit (RFC 3042): the flight may reach cwnd plus one segment for each
            // of the first two duplicate ACKs, so that small windows still produce three of
            // them. (Added to the room instead, it gave one more segment on every call.)
            let allowed = self.cc.cwnd().saturating_add(u32::from(self.loss.dupacks.min(2)) * self.eff_mss());
            cwnd_room = allowed.saturating_sub(self.snd.nxt.wrapping_sub(self.snd.una));
        }
        if loss_probe {
            cwnd_room = cwnd_room.max(mss as u32);
        }
        let mut wnd_room = self.snd.window_room() as usize;
        if is_rtx && self.snd.nxt == self.snd.una {
            // The first segment after an RTO goes even if the peer shrank its window to zero:
            // the retransmission doubles as a window probe (RFC 9293 3.8.6.1; Linux too). Only
            // what was sent before goes beyond the window, not new data after it.
            let sent = self.snd.max.wrapping_sub(self.snd.nxt) as usize;
            wnd_room = wnd_room.max(mss.min(sent));
        }
        // With segmentation offload, new data goes in a segment of several MSS that the NIC
        // cuts; what is sent again (after an RTO or as a probe) goes one MSS at a time.
        let room = if self.p.has(Opt::Tso) && !is_rtx && !loss_probe { self.tso_room(mss, buf.len()) } else { mss };
        let mut len = avail.min(room).min(wnd_room).min(cwnd_room as usize);
        if len > mss {
            // Whole segments: the NIC cuts at every MSS, so a short piece may only end the
            // data, and only where Nagle would let it go alone (Linux's `tcp_mss_split_point`).
            let nagle_free = self.p.has(Opt::Nodelay) || fin_unsent || self.urg.sending;
            if len < avail || !nagle_free {
                len -= len % mss;
            }
        }
        if is_rtx {
            // Going back after an RTO: stop before what the peer SACKed.
            if let Some(next) = self.loss.sacked.next_start_after(self.snd.nxt) {
                len = len.min(next.wrapping_sub(self.snd.nxt) as usize);
            }
        }
        let force = self.owed.take(Owed::ForceSend) || loss_probe;
        if len == 0 {
            // A FIN alone needs no window (Linux accepts a bare FIN into a zero window).
            if avail > 0 {
                return None;
            }
        } else if !is_rtx && !force && len < mss {
            if len < avail {
                // Sender SWS avoidance (RFC 9293 3.8.6.2.1): no small segment unless it is
                // half the largest window the peer offered.
                let wnd_limited = len == wnd_room;
                if !(wnd_limited && len >= self.snd.max_wnd as usize / 2) {
                    return None;
                }
            } else if !self.p.has(Opt::Nodelay) && !fin_unsent && !self.urg.sending && self.snd.max != self.snd.una {
                // Nagle (RFC 896, RFC 1122 4.2.3.4): one small segment in flight at a time
                // (urgent data is not held back: Linux's `tcp_nagle_test`).
                return None;
            }
        }
        let seq = self.snd.nxt;
        let was_idle = self.snd.una == self.snd.max;
        let mut repr = self.emit(now, seq, len, fin_unsent, len > mss, buf);
        if !is_rtx && repr.payload_len > 0 && self.ecn.has(EcnBit::On) {
            // RFC 3168 section 6.1.2: new data is ECN-capable; the first after a window
            // reduction says so with CWR.
            self.ecn.insert(EcnBit::TransmitEct);
            if self.ecn.take(EcnBit::CwrPending) {
                repr.flags |= TcpFlags::CWR;
            }
        }
        let sent = repr.segment_len() as u32;
        let old_max = self.snd.max;
        self.snd.nxt = seq.wrapping_add(sent);
        if seq::gt(self.snd.nxt, self.snd.max) {
            self.snd.max = self.snd.nxt;
            // Going back after an RTO, a segment may reach beyond what was sent before.
            self.loss.sent.sent_new(old_max, self.snd.max, now);
        }
        if is_rtx {
            self.loss.sent.retransmitted(seq, seq::min(self.snd.nxt, old_max), now);
            self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
            self.retransmitted(now);
        } else {
            if !self.rtt.timing() && !self.agreed.timestamps() && sent > 0 {
                self.rtt.start_timing(self.snd.nxt, now);
            }
        }
        if was_idle || !self.timers.is_armed(Timer::Rtx) {
            self.timers.arm(Timer::Rtx, now + self.rto());
        }
        if !is_rtx && !loss_probe {
            self.schedule_probe(now);
        }
        Some(repr)
    }

    /// The payload of one MSS-sized segment whose header (options included) is `header_len`
    /// bytes: what each piece of a segment the NIC cuts carries (its `tso_segsz`).
    #[inline]
    pub fn segment_payload_max(&self, header_len: usize) -> usize {
        (usize::from(self.mss_cap()) + HEADER_LEN).saturating_sub(header_len).max(1)
    }

    /// Bytes written and not sent yet (a FIN not counted): a stack with segmentation offload
    /// gives [`Connection::poll_transmit`] a large buffer only when there is more than one
    /// segment's worth.
    #[inline]
    pub fn unsent(&self) -> usize {
        let data_end = self.snd.data_end();
        if seq::lt(self.snd.nxt, data_end) {
            data_end.wrapping_sub(self.snd.nxt) as usize
        } else {
            0
        }
    }

    /// How much new data one segment the NIC cuts may carry, as Linux's `tcp_tso_autosize`:
    /// about a millisecond of data at the pacing rate (Linux's `sk_pacing_shift` of 10; the
    /// rate twice cwnd per RTT in slow start, 1.2 times in congestion avoidance, as
    /// `tcp_update_pacing_rate`), at least two segments, at most what the buffer holds (the
    /// 64 KiB a NIC takes), in whole segments of `mss`. Before an RTT sample, no limit but the
    /// buffer (Linux's rate is unbounded without one too).
    fn tso_room(&self, mss: usize, buf_len: usize) -> usize {
        let most = buf_len - buf_len % mss;
        let srtt_us = self.rtt.srtt() / 1000;
        if !self.rtt.has_sample() || srtt_us == 0 {
            return most;
        }
        let cwnd = u64::from(self.cc.cwnd());
        let ratio_pct = if self.cc.cwnd() < self.cc.ssthresh() / 2 { 200 } else { 120 };
        let bytes_per_s = cwnd * ratio_pct * 10_000 / srtt_us;
        let goal = (bytes_per_s >> 10) as usize;
        (goal - goal % mss).max(2 * mss).min(most)
    }

    /// Payload room of a data segment sent now: the MSS less the options it will carry.
    fn data_room(&self, buf: &[u8]) -> u32 {
        let header = self.data_header_len();
        let base = usize::from(self.mss_cap()) + HEADER_LEN;
        (base.saturating_sub(header).max(1).min(buf.len())) as u32
    }

    /// The length of the TCP header, options included, of a segment with data that
    /// [`Connection::poll_transmit`] would return now (SYNs and RSTs, whose headers differ,
    /// carry none). A stack that passes `poll_transmit` a buffer at this offset in its frame
    /// can write the header in front of the payload without moving it.
    #[inline]
    pub fn data_header_len(&self) -> usize {
        if self.agreed.sack()
            && (!self.rcv.ooo.is_empty() || self.rcv.fin_ahead || self.rcv.dsack.0 != self.rcv.dsack.1)
        {
            // SACK blocks go out (`sack_blocks`: out-of-order data, a FIN held ahead of a
            // hole, a D-SACK): how many fit is the header's to say.
            return self.header(0, self.snd.nxt).header_len();
        }
        // The timestamps option (two NOPs and ten bytes), or none.
        HEADER_LEN + if self.agreed.timestamps() { 12 } else { 0 }
    }

    /// A header with ACK, our options for a synchronized state, and no window yet.
    pub(super) fn header(&self, now: Instant, seq: u32) -> TcpRepr {
        // RFC 3168 section 6.1.3: every segment echoes congestion until the peer's CWR.
        let flags = if self.ecn.has(EcnBit::Echo) { TcpFlags::ACK | TcpFlags::ECE } else { TcpFlags::ACK };
        TcpRepr {
            sack_ranges: self.sack_blocks(),
            timestamp: self.agreed.timestamps().then(|| (self.ts.clock(now), self.ts.recent)),
            ..segment::bare_segment(self.local_port, self.remote_port, seq, Some(self.rcv.nxt), flags, 0)
        }
    }

    /// SACK blocks for our out-of-order data, most recent first (RFC 2018 section 4), after a
    /// D-SACK block if data arrived twice (RFC 2883 section 4): 4 fit in the options, 3 next
    /// to timestamps. A FIN held ahead of a hole takes a sequence number too: the block that
    /// ends where it sits covers it, or it has a block of its own (Linux queues it out of
    /// order with the data and SACKs its `end_seq`).
    fn sack_blocks(&self) -> [Option<(u32, u32)>; 4] {
        let mut blocks = if self.agreed.sack() { self.rcv.ooo.blocks() } else { [None; 4] };
        if self.agreed.sack() && self.rcv.fin_ahead {
            let fin = self.rcv.fin;
            match blocks.iter_mut().flatten().find(|(_, right)| *right == fin) {
                Some(block) => block.1 = fin.wrapping_add(1),
                None => {
                    blocks.copy_within(0..3, 1);
                    blocks[0] = Some((fin, fin.wrapping_add(1)));
                }
            }
        }
        if self.agreed.sack() && self.rcv.dsack.0 != self.rcv.dsack.1 {
            blocks.copy_within(0..3, 1);
            blocks[0] = Some(self.rcv.dsack);
        }
        if self.agreed.timestamps() {
            blocks[3] = None;
        }
        blocks
    }

    /// A segment at `seq` with up to `max_len` bytes from the send buffer (more than one MSS
    /// only if `segmented`: the NIC cuts it), and the FIN if `fin_ok` and the data reaches it.
    fn emit(
        &mut self,
        now: Instant,
        seq: u32,
        max_len: usize,
        fin_ok: bool,
        segmented: bool,
        buf: &mut [u8],
    ) -> TcpRepr {
        let mut repr = self.header(now, seq);
        let room = if segmented { max_len } else { self.segment_payload_max(repr.header_len()) };
        let data_end = self.snd.data_end();
        let avail = if seq::ge(seq, self.snd.buf_seq) && seq::lt(seq, data_end) {
            data_end.wrapping_sub(seq) as usize
        } else {
            0
        };
        let len = avail.min(max_len).min(room).min(buf.len());
        if len > 0 {
            self.snd.buf.read_at(seq.wrapping_sub(self.snd.buf_seq) as usize, &mut buf[..len]);
            repr.payload_len = len;
        }
        let end = seq.wrapping_add(len as u32);
        if len > 0 && end == data_end {
            repr.flags |= TcpFlags::PSH;
        }
        if fin_ok && self.snd.fin_queued && end == data_end && seq::ge(seq, self.snd.buf_seq) {
            repr.flags |= TcpFlags::FIN;
        }
        if let Some(up) = self.urg.pointer_at(seq, self.snd.nxt) {
            repr.flags |= TcpFlags::URG;
            repr.urgent_at = up;
        }
        repr.window_len = self.select_window();
        self.ack_sent();
        repr
    }

    /// The window field to send, in units of our scale. The right edge never moves left: when
    /// the buffer has less room than we promised, the promise stands, rounded up to the scale
    /// unit, which the ring's slack absorbs. Only a peer that keeps sending segments smaller
    /// than the scale unit into a full buffer can exhaust the slack; then the edge is rounded
    /// down (a retraction of less than one unit, which RFC 7323 appendix F allows for). The
    /// edge moves right only by at least min(buffer / 2, MSS) (receiver SWS avoidance, RFC
    /// 9293 3.8.6.2.2).
    pub(super) fn select_window(&mut self) -> u16 {
        let shift = u32::from(self.agreed.rcv_wscale);
        let g = 1u32 << shift;
        let adv = self.rcv_buf_adv();
        let used = self.rcv.buf.len() as u32;
        let cand = self.free_window();
        let cur = self.rcv.wnd();
        let thresh = (adv / 2).min(u32::from(self.p.mss)).max(1);
        let wnd = if cand > cur && (cand - cur >= thresh || cand == (adv & !(g - 1))) { cand } else { cur };
        let ring = if self.rcv.buf.is_allocated() { self.rcv.buf.capacity() } else { self.rx_cap() };
        let phys = (ring as u32).saturating_sub(used);
        let mut field = ((u64::from(wnd) + u64::from(g) - 1) >> shift).min(0xffff) as u32;
        if field << shift > phys {
            // Rounding up would promise more than the ring holds: round down instead.
            field = wnd >> shift;
        }
        let edge = self.rcv.nxt.wrapping_add(field << shift);
        if seq::gt(edge, self.rcv.adv) {
            self.rcv.adv = edge;
        }
        field as u16
    }

    /// Bookkeeping for a segment that carries our ACK.
    fn ack_sent(&mut self) {
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.owed.remove(Owed::Ack);
        self.rcv.dsack = (0, 0); // reported once (RFC 2883 section 4)
        self.owed.remove(Owed::ChallengeAck);
        self.timers.disarm(Timer::Delack);
        self.rcv.unacked = 0;
    }
}
