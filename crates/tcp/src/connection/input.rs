//! Segment arrival, in the order of RFC 9293 3.10.7: SYN-SENT (3.10.7.3), then for every
//! synchronized state the sequence check, RST, SYN, ACK (with RFC 5961's blind-attack rules and
//! the window update), URG, text and FIN (3.10.7.4). Also the state changes they cause. It must
//! not build segments: it records what is owed (an ACK, a challenge ACK, a RST) for `output`.

use wire::{TcpFlags, TcpRepr};

use crate::congestion::CongestionControl;
use crate::payload::Payload;
use crate::time::{Instant, MILLISECOND};
use crate::{segment, seq};

use super::ecn::EcnBit;
use super::output::Owed;
use super::params::{ms, us, Opt};
use super::recovery::Recovery;
use super::timers::{Timer, NEVER};
use super::{
    Connection, Error, Flag, State, EV_CLOSED, EV_CONNECTED, EV_READABLE, EV_READ_CLOSED, EV_RESET, EV_TIME_WAIT,
    EV_WRITABLE, SEGMENT_OVERHEAD,
};

/// RFC 2883 section 4: the first SACK block reports data that arrived twice (D-SACK) if it
/// lies below the cumulative ACK or inside the second block.
fn dsack_block(seg: &TcpRepr, ack: u32) -> Option<(u32, u32)> {
    let (left, right) = seg.sack_ranges[0]?;
    let inside_second = seg.sack_ranges[1].is_some_and(|(l2, r2)| seq::le(l2, left) && seq::le(right, r2));
    (seq::lt(left, ack) || inside_second).then_some((left, right))
}

impl Connection {
    /// Processes a segment addressed to this connection (the stack has checked the checksum
    /// and matched the 4-tuple). `payload` is the segment's data.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        self.handle_segment_ce(now, seg, payload, false);
    }

    /// [`Connection::handle_segment`] for a segment whose IP header carried the CE codepoint
    /// if `ce`: a router on the path saw congestion (RFC 3168 section 5). On an ECN connection
    /// our segments then carry ECE until the peer's CWR.
    pub fn handle_segment_ce(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8], ce: bool) {
        self.handle_coalesced(now, seg, &[payload], ce);
    }

    /// [`Connection::handle_segment_ce`] for consecutive in-order segments that the stack
    /// coalesced on receive (Linux's GRO): `seg` is the first's header with `payload_len` the
    /// sum, and carries the last's PSH; `parts` are their payloads in order, each full-sized
    /// but the last. They are taken as one segment: one ACK decision, one copy into the
    /// receive ring, while the delayed-ACK rule counts them at their own size (Linux's
    /// `tcp_measure_rcv_mss` reads `gso_size`).
    pub fn handle_coalesced(&mut self, now: Instant, seg: &TcpRepr, parts: &[&[u8]], ce: bool) {
        let payload = Payload::new(parts);
        match self.state {
            State::Closed => {
                // RFC 9293 3.10.7.1: as if there were no connection.
                if let Some(rst) = segment::rst_for_unmatched(seg, payload.len()) {
                    self.owe_rst(rst.seq_number, rst.ack_number);
                }
            }
            State::SynSent => self.handle_syn_sent(now, seg, payload, ce),
            _ => self.handle_synchronized(now, seg, payload, ce),
        }
        self.arm_persist(now);
    }

    /// RFC 9293 3.10.7.3.
    fn handle_syn_sent(&mut self, now: Instant, seg: &TcpRepr, payload: Payload, ce: bool) {
        let rst = seg.flags.contains(TcpFlags::RST);
        if let Some(ack) = seg.ack_number {
            if seq::le(ack, self.snd.iss) || seq::gt(ack, self.snd.max) {
                if !rst {
                    self.owe_rst(ack, None);
                }
                return;
            }
        }
        if rst {
            // Only with an acceptable ACK (RFC 5961 section 3: no blind reset of a connect).
            if seg.ack_number.is_some() {
                self.fail(Error::ConnectionRefused, EV_RESET);
            }
            return;
        }
        if !seg.flags.contains(TcpFlags::SYN) {
            return;
        }
        self.rcv.irs = seg.seq_number;
        self.rcv.nxt = seg.seq_number.wrapping_add(1);
        self.rcv.last_ack_sent = self.rcv.nxt;
        self.rcv.adv = self.rcv.nxt.wrapping_add(self.syn_window());
        self.negotiate(now, seg);
        match seg.ack_number {
            Some(ack) => {
                // RFC 3168 section 6.1.1: the peer agrees with ECE alone on its SYN-ACK.
                let agreed = seg.flags.contains(TcpFlags::ECE) && !seg.flags.contains(TcpFlags::CWR);
                if !agreed {
                    self.ecn.remove(EcnBit::On);
                }
                // The window of a SYN is never scaled (RFC 7323 section 2.2).
                self.establish_from_ack(now, seg, ack, u32::from(seg.window_len));
                self.owed.insert(Owed::Ack);
                if !payload.is_empty() || seg.flags.contains(TcpFlags::FIN) {
                    let fin = seg.flags.contains(TcpFlags::FIN);
                    self.process_text(now, self.rcv.nxt, payload, fin, ce);
                }
            }
            None => {
                // Simultaneous open: SYN-RECEIVED, our SYN again, now with an ACK. ECN if both
                // SYNs asked for it (Linux `tcp_ecn_rcv_syn`).
                let agreed = seg.flags.contains(TcpFlags::ECE | TcpFlags::CWR);
                if !agreed {
                    self.ecn.remove(EcnBit::On);
                }
                self.state = State::SynReceived;
                self.snd.nxt = self.snd.iss;
                self.snd.wnd = u32::from(seg.window_len);
                self.snd.max_wnd = self.snd.wnd;
                self.snd.wl1 = seg.seq_number;
            }
        }
    }

    /// Our SYN is acknowledged: ESTABLISHED.
    fn establish_from_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32, wnd: u32) {
        self.snd.una = ack;
        if seq::lt(self.snd.nxt, ack) {
            self.snd.nxt = ack;
        }
        self.snd.wnd = wnd;
        self.snd.max_wnd = self.snd.max_wnd.max(wnd);
        self.snd.wl1 = seg.seq_number;
        self.snd.wl2 = ack;
        self.rtt_on_ack(now, seg, ack, None);
        self.establish(now);
    }

    pub(super) fn establish(&mut self, now: Instant) {
        self.state = if self.snd.fin_queued { State::FinWait1 } else { State::Established };
        self.autotune_start(now);
        let mss = self.eff_mss();
        // RFC 5681 section 3.1: one segment if the SYN or SYN-ACK was lost.
        let iw = if self.flags.has(Flag::SynRetransmitted) { mss } else { self.p.initial_cwnd.saturating_mul(mss) };
        self.cc.init(iw);
        if self.rtt.has_sample() {
            self.cc.on_rtt_update(self.rtt.srtt());
        }
        if self.flags.has(Flag::SynRetransmitted) {
            self.rtt.after_syn_loss(self.p.rto_max_us);
        }
        self.rtt.backoff = 0;
        self.loss.recover = self.snd.una;
        self.timers.arm(Timer::Rtx, if self.snd.una == self.snd.max { NEVER } else { now + self.rto() });
        if self.p.has(Opt::Keepalive) && self.state == State::Established {
            self.timers.arm(Timer::Idle, now + ms(self.p.ka_idle_ms));
        }
        self.events |= EV_CONNECTED | EV_WRITABLE;
    }

    /// In SYN-RECEIVED, whether `seg` (with `payload_len` bytes) is the ACK that completes the
    /// handshake: an acceptable sequence number, no RST or SYN, an ACK of our SYN. The stack
    /// asks before handing it over, to look at the listener's accept queue first as Linux's
    /// `tcp_check_req` does (`syn_recv_sock` fails on a full queue and the ACK is dropped).
    pub fn completes_handshake(&self, seg: &TcpRepr, payload_len: usize) -> bool {
        if self.state != State::SynReceived || seg.flags.intersects(TcpFlags::RST | TcpFlags::SYN) {
            return false;
        }
        let Some(ack) = seg.ack_number else { return false };
        let seg_len = payload_len as u32 + u32::from(seg.flags.contains(TcpFlags::FIN));
        self.acceptable(seg.seq_number, seg_len, false) && seq::gt(ack, self.snd.una) && seq::le(ack, self.snd.max)
    }

    /// RFC 9293 3.10.7.4, for every state after SYN-SENT.
    fn handle_synchronized(&mut self, now: Instant, seg: &TcpRepr, payload: Payload, ce: bool) {
        let rst = seg.flags.contains(TcpFlags::RST);
        let mut syn = seg.flags.contains(TcpFlags::SYN);
        let fin = seg.flags.contains(TcpFlags::FIN);
        let mut seq = seg.seq_number;

        if self.state == State::SynReceived && syn && !rst && seq == self.rcv.irs {
            match seg.ack_number {
                // Simultaneous open: the peer's SYN-ACK, whose SYN we already have.
                Some(ack) if ack == self.snd.max => {
                    syn = false;
                    seq = seq.wrapping_add(1);
                }
                // Our SYN-ACK was lost: the peer sent its SYN again.
                None => {
                    self.snd.nxt = self.snd.iss;
                    return;
                }
                _ => {}
            }
        }
        if self.state == State::TimeWait {
            if rst {
                return; // RFC 1337: no TIME-WAIT assassination.
            }
            if fin && !syn && seq.wrapping_add(payload.len() as u32 + 1) == self.rcv.nxt {
                // The peer's FIN again: our ACK was lost. ACK and restart 2*MSL.
                self.owed.insert(Owed::Ack);
                self.timers.arm(Timer::Idle, now + ms(self.p.time_wait_ms));
                return;
            }
        }

        let seg_len = payload.len() as u32 + u32::from(syn) + u32::from(fin);

        // RFC 7323 section 5.3 R1: PAWS.
        if self.agreed.timestamps() && !rst {
            if let Some((tsval, _)) = seg.timestamp {
                if self.ts.paws_rejects(tsval, now) {
                    self.answer_invalid(now, syn, seg_len);
                    return;
                }
            }
        }

        // First: the sequence number.
        if !self.acceptable(seq, seg_len, rst) || self.runs_past_window_over_unread(seq, payload.len()) {
            if !rst {
                self.answer_invalid(now, syn, seg_len);
                if !syn && seq::lt(seq, self.rcv.nxt) {
                    // Data (or a FIN) we already have: a D-SACK block says so (RFC 2883).
                    let end = seq.wrapping_add(payload.len() as u32 + u32::from(fin));
                    self.report_duplicate(seq, seq::min(end, self.rcv.nxt));
                }
            }
            return;
        }

        // Second: RST (RFC 5961 section 3.2: only an exact match resets).
        if rst {
            if seq == self.rcv.nxt {
                self.on_reset();
            } else {
                self.challenge_ack(now);
            }
            return;
        }

        // Fourth: SYN in a synchronized state (RFC 5961 section 4.2).
        if syn {
            self.challenge_ack(now);
            return;
        }

        // Fifth: ACK.
        let Some(ack) = seg.ack_number else {
            return;
        };
        if self.state == State::SynReceived {
            if seq::gt(ack, self.snd.una) && seq::le(ack, self.snd.max) {
                let wnd = u32::from(seg.window_len) << self.agreed.snd_wscale;
                self.establish_from_ack(now, seg, ack, wnd);
            } else {
                self.owe_rst(ack, None);
                return;
            }
        }

        if !self.process_ack(now, seg, seq, ack, payload.len()) || self.state == State::Closed {
            return;
        }

        // RFC 7323 section 4.3 (and 5.3 R3): remember the timestamp to echo, only from an
        // acceptable segment, so after its ACK was checked: a blind in-window segment with an
        // unacceptable ACK must not move TS.Recent (PAWS would then drop the real peer).
        if self.agreed.timestamps() {
            if let Some((tsval, _)) = seg.timestamp {
                self.ts.update_recent(tsval, seq, self.rcv.last_ack_sent, now);
            }
        }

        if self.p.has(Opt::Keepalive) && matches!(self.state, State::Established | State::CloseWait) {
            self.timers.keepalive_answered();
            self.timers.arm(Timer::Idle, now + ms(self.p.ka_idle_ms));
        }

        // RFC 3168 section 6.1.3: the peer's CWR on a segment with data (or a FIN) ends our
        // ECE; it also asks for an ACK at once, its window being small (Linux
        // `tcp_ecn_accept_cwr`). CE on new data starts ECE again (`process_text`).
        if self.ecn.has(EcnBit::On) && seg.flags.contains(TcpFlags::CWR) && seg_len > 0 {
            self.ecn.remove(EcnBit::Echo);
            self.owed.insert(Owed::Ack);
        }

        // Sixth: the URG bit, where data is still accepted (after the peer's FIN there is none).
        if matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            self.urgent_arrival(seg, seq, payload);
        }

        // Seventh and eighth: text and FIN.
        self.process_text(now, seq, payload, fin, ce);
    }

    /// The four cases of RFC 9293 3.10.7.4. With a zero window a segment at RCV.NXT is let
    /// through so that its ACK, and a bare FIN, are processed ("special allowance"); its data
    /// is trimmed off later.
    ///
    /// One leniency, Linux's (`tcp_sequence` starts the window at `rcv_wup`, the RCV.NXT we
    /// last acknowledged, and looks at where a segment ends): a segment (not a RST) that starts
    /// at or before RCV.NXT and ends at or after the RCV.NXT we last acknowledged is acceptable.
    /// A pure ACK reordered behind data is then used rather than answered with an ACK, which in
    /// a two-way transfer the peer would count as a duplicate; and a retransmission of what we
    /// acknowledged last moves TS.Recent on before its D-SACK is sent (as Linux's does).
    pub(super) fn acceptable(&self, seq: u32, len: u32, rst: bool) -> bool {
        let wnd = self.rcv.wnd();
        let nxt = self.rcv.nxt;
        if !rst && seq::le(seq, nxt) && seq::ge(seq.wrapping_add(len), self.rcv.last_ack_sent) {
            return true;
        }
        match (len, wnd) {
            (0, 0) => seq == nxt,
            (0, _) => seq::in_window(seq, nxt, wnd),
            (_, 0) => seq == nxt,
            _ => seq::in_window(seq, nxt, wnd) || seq::in_window(seq.wrapping_add(len - 1), nxt, wnd),
        }
    }

    /// Linux 6.x's `tcp_sequence` (SKB_DROP_REASON_TCP_INVALID_END_SEQUENCE): data that runs
    /// past the window we advertised is acceptable only when the application has read
    /// everything before it. Otherwise the whole segment is not (answered with an ACK, its
    /// ACK field and timestamp unused), so a zero-window probe of one byte at RCV.NXT leaves
    /// TS.Recent with the last segment that was acceptable and the answer echoes that one
    /// (RFC 7323 section 4.3), not the probe's. A FIN may sit just past the window.
    fn runs_past_window_over_unread(&self, seq: u32, data_len: usize) -> bool {
        let right_edge = self.rcv.nxt.wrapping_add(self.rcv.wnd());
        data_len > 0 && seq::gt(seq.wrapping_add(data_len as u32), right_edge) && self.rcv.buf.len() > 0
    }

    /// RFC 2883: `[start, end)` arrived again; report it as the first SACK block of an ACK sent
    /// at once (the sender learns that its retransmission was not needed).
    fn report_duplicate(&mut self, start: u32, end: u32) {
        if self.agreed.sack() && seq::lt(start, end) {
            self.rcv.dsack = (start, end);
            self.owed.insert(Owed::Ack);
        }
    }

    /// RFC 5961's challenge ACK, at most one per `invalid_ratelimit` (Linux 6.x limits them per
    /// connection; its global `tcp_challenge_ack_limit` is off by default since 6.0).
    fn challenge_ack(&mut self, now: Instant) {
        if self.invalid_ack_allowed(now) {
            self.owed.insert(Owed::ChallengeAck);
            self.challenge_acks = self.challenge_acks.wrapping_add(1);
        } else {
            self.counters.challenge_acks_skipped = self.counters.challenge_acks_skipped.wrapping_add(1);
        }
    }

    /// The answer to a segment that failed PAWS or the sequence check (`seg_len` counts its
    /// SYN and FIN): a challenge ACK for a SYN (RFC 5961 section 4.2, Linux's `syn_challenge`);
    /// an ACK for one with data or a FIN, always; for one without, at most one ACK per
    /// `invalid_ratelimit` (Linux `tcp_oow_rate_limited`: two stacks that disagree about the
    /// window would otherwise answer each other's ACKs forever).
    fn answer_invalid(&mut self, now: Instant, syn: bool, seg_len: u32) {
        if syn {
            self.challenge_ack(now);
        } else if seg_len > 0 || self.invalid_ack_allowed(now) {
            self.owed.insert(Owed::Ack);
        }
    }

    /// Whether an ACK to an invalid segment may go now, one per `invalid_ratelimit` on our
    /// millisecond clock (Linux `__tcp_oow_rate_limited`); if so, the interval starts now.
    pub(super) fn invalid_ack_allowed(&mut self, now: Instant) -> bool {
        let ms_now = (now / MILLISECOND) as u32;
        if self.flags.has(Flag::InvalidAcked) && ms_now.wrapping_sub(self.invalid_ack_ms) < self.p.invalid_ratelimit_ms
        {
            return false;
        }
        self.flags.insert(Flag::InvalidAcked);
        self.invalid_ack_ms = ms_now;
        true
    }

    /// An acceptable RST.
    fn on_reset(&mut self) {
        let err = match self.state {
            State::SynReceived if self.flags.has(Flag::Passive) => Some(Error::ConnectionReset),
            State::SynReceived => Some(Error::ConnectionRefused),
            State::Established | State::FinWait1 | State::FinWait2 => Some(Error::ConnectionReset),
            State::CloseWait => Some(Error::BrokenPipe),
            _ => None,
        };
        if let Some(err) = err {
            self.error = Some(err);
            self.events |= EV_RESET;
        }
        self.enter_closed();
    }

    pub(super) fn fail(&mut self, err: Error, event: u16) {
        // Linux counts `tcp_write_err`: not a half-open connection's SYN-ACKs, which are a
        // request socket's there.
        if err == Error::TimedOut && self.state != State::SynReceived {
            self.counters.aborts_on_timeout = self.counters.aborts_on_timeout.wrapping_add(1);
        }
        self.error = Some(err);
        self.events |= event;
        self.enter_closed();
    }

    pub(super) fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.timers.disarm(Timer::Rtx);
        self.timers.disarm(Timer::Delack);
        self.timers.disarm(Timer::Idle);
        self.timers.disarm(Timer::Loss);
        self.snd.buf.clear();
        self.rcv.ooo.clear();
        self.loss.sacked.clear();
        self.loss.sent.clear();
        self.loss.send_probe = false;
        self.loss.mode = Recovery::None;
        self.owed.remove(Owed::Ack);
        self.owed.remove(Owed::ChallengeAck);
        self.owed.remove(Owed::Probe);
        self.loss.rtx_first = false;
        self.owed.remove(Owed::ForceSend);
        self.events |= EV_CLOSED;
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.timers.disarm(Timer::Rtx);
        self.timers.disarm(Timer::Loss);
        self.timers.arm(Timer::Idle, now + ms(self.p.time_wait_ms));
        self.loss.sacked.clear();
        self.loss.sent.clear();
        self.snd.buf.clear();
        self.events |= EV_TIME_WAIT;
    }

    /// The ACK field (RFC 9293 3.10.7.4 fifth, RFC 5961 section 5). `false`: drop the segment.
    fn process_ack(&mut self, now: Instant, seg: &TcpRepr, seq: u32, ack: u32, payload_len: usize) -> bool {
        let flight_before = self.snd.in_flight();
        // RFC 5961 section 5.2: outside [SND.UNA - MAX.SND.WND, SND.NXT]. As in Linux, the
        // left edge reaches back no further than what the peer has acknowledged so far: before
        // any data is acknowledged, an ACK below SND.UNA is one.
        let max_back = self.snd.max_wnd.min(self.bytes_acked);
        if seq::gt(ack, self.snd.max) || seq::lt(ack, self.snd.una.wrapping_sub(max_back)) {
            self.challenge_ack(now);
            return false;
        }
        let seg_wnd = u32::from(seg.window_len) << self.agreed.snd_wscale;
        let is_dup = ack == self.snd.una
            && payload_len == 0
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
            && seg_wnd == self.snd.wnd
            && self.snd.max != self.snd.una;

        let old_una = self.snd.una;
        let was_recovering = self.recovering();
        let dsack = if self.agreed.sack() { dsack_block(seg, ack) } else { None };
        self.take_in_sack(now, seg, ack, dsack);

        if self.snd.update_window(seq, ack, seg_wnd) {
            // A zero window opened: the persist timer is done.
            self.timers.persist_answered();
            if self.snd.una == self.snd.max {
                self.timers.disarm(Timer::Rtx);
            }
        }
        self.timers.window_probe_answered();

        if seq::gt(ack, self.snd.una) {
            self.on_new_ack(now, seg, ack);
        } else if is_dup {
            self.loss.dupacks = self.loss.dupacks.saturating_add(1);
            if self.loss.mode == Recovery::NewReno {
                // RFC 6582 section 3.2 step 4: inflate for each further duplicate.
                self.loss.inflate = self.loss.inflate.saturating_add(self.eff_mss());
            }
        }

        if self.state == State::Closed {
            return true;
        }
        self.detect_loss_on_ack(now, seg, ack, dsack, is_dup, was_recovering);
        self.recover_if_lost(now);
        if self.ecn.has(EcnBit::On) {
            self.on_ecn_ack(now, seg, flight_before);
        }
        // The probe restarts when new data is acknowledged, and starts when the reordering
        // timer has nothing left to wait for.
        if self.rack_on() && (seq::gt(self.snd.una, old_una) || !self.timers.is_armed(Timer::Loss)) {
            self.schedule_probe(now);
        }
        true
    }

    fn on_new_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32) {
        let acked = ack.wrapping_sub(self.snd.una);
        self.bytes_acked = self.bytes_acked.saturating_add(acked);
        let flight_before = self.snd.in_flight();
        let freed = self.snd.acknowledge(ack);
        self.urg.acked(ack);
        self.loss.sacked.trim(ack);
        let sent_once_at = self.loss.sent.first_sent_once();
        self.loss.sent.acked(ack);
        self.rtt_on_ack(now, seg, ack, sent_once_at);
        self.rtt.backoff = 0;

        self.new_ack_in_recovery(now, ack, acked, flight_before);

        // RFC 6298 section 5.2 and 5.3.
        self.timers.arm(Timer::Rtx, if self.snd.una == self.snd.max { NEVER } else { now + self.rto() });
        if self.snd.una == self.snd.max {
            self.timers.disarm(Timer::Loss);
        }

        if freed {
            self.autotune_send();
        }
        if freed
            && self.snd.write_blocked
            && matches!(self.state, State::Established | State::CloseWait)
            && !self.snd.fin_queued
            && self.tx_writable()
        {
            self.snd.write_blocked = false;
            self.events |= EV_WRITABLE;
        }

        if self.snd.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.timers.disarm(Timer::Rtx);
                    if self.rcv.closed {
                        self.timers.arm(Timer::Idle, now + ms(self.p.fin_wait2_ms));
                    }
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => self.enter_closed(),
                _ => {}
            }
        }
    }

    /// Data and FIN of an acceptable segment starting at `seq`.
    fn process_text(&mut self, now: Instant, mut seq: u32, payload: Payload, mut fin: bool, ce: bool) {
        let mut data = payload;
        // Trim what we already have.
        if seq::lt(seq, self.rcv.nxt) {
            let skip = self.rcv.nxt.wrapping_sub(seq) as usize;
            let end = seq.wrapping_add(data.len() as u32 + u32::from(fin));
            // Its head is a duplicate (RFC 2883).
            self.report_duplicate(seq, seq::min(end, self.rcv.nxt));
            if end != seq && seq::le(end, self.rcv.nxt) {
                // Nothing new: a retransmission, answered at once (Linux too, SACK or not).
                self.owed.insert(Owed::Ack);
            }
            fin = fin && skip <= data.len();
            data = data.skip(skip);
            seq = self.rcv.nxt;
        }
        // Trim what is beyond the window (a bare FIN at the edge is kept, like Linux).
        let room = if seq::gt(self.rcv.adv, seq) { self.rcv.adv.wrapping_sub(seq) as usize } else { 0 };
        if data.len() > room {
            data = data.truncate(room);
            fin = false;
            self.owed.insert(Owed::Ack);
        }
        if data.is_empty() && !fin {
            return;
        }
        if !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            return;
        }
        if self.rcv.closed && !data.is_empty() {
            // Linux: data for a closed socket resets the connection.
            self.owe_rst(self.snd.max, Some(self.rcv.nxt));
            self.enter_closed();
            return;
        }
        if !data.is_empty() {
            if ce && self.ecn.has(EcnBit::On) {
                // RFC 3168 section 6.1.3: congestion on the path. Echo it with ECE until the
                // peer's CWR, and ACK at once the first time (Linux: the sender's window may be
                // small enough that a delayed ACK stalls it).
                if !self.ecn.has(EcnBit::Echo) {
                    self.owed.insert(Owed::Ack);
                }
                self.ecn.insert(EcnBit::Echo);
            }
            let off = seq.wrapping_sub(self.rcv.nxt) as usize;
            let charge = if off == 0 { data.len() } else { data.len() + SEGMENT_OVERHEAD };
            // In-order data for an empty receive queue is taken whatever the budget says
            // (Linux's `sk_forced_mem_schedule`): a connection can always make progress.
            let forced = off == 0 && self.rcv.buf.len() == 0;
            if charge > self.mem_room() && !forced {
                // Over the stack's memory budget (Linux `tcp_data_queue` when
                // `tcp_try_rmem_schedule` fails): dropped, and an ACK says where we are; the
                // peer sends it again.
                let drops = if off == 0 { &mut self.counters.rcvq_drops } else { &mut self.counters.ofo_drops };
                *drops = drops.wrapping_add(1);
                self.owed.insert(Owed::Ack);
                return;
            }
            self.rcv.buf.ensure(self.rx_ring_size());
            let len = data.len() as u32;
            self.rcv.mss = self.rcv.mss.max(data.piece().min(usize::from(self.p.mss)) as u16);
            if off == 0 {
                let had_ooo = !self.rcv.ooo.is_empty();
                let at = self.rcv.buf.len();
                data.write_to(&mut self.rcv.buf, at);
                self.rcv.buf.extend(data.len());
                let nxt = self.rcv.ooo.advance(self.rcv.nxt.wrapping_add(len));
                self.rcv.buf.extend(nxt.wrapping_sub(self.rcv.nxt.wrapping_add(len)) as usize);
                self.rcv.nxt = nxt;
                self.rcv.unacked = self.rcv.unacked.saturating_add(len);
                self.autotune_receive(now);
                self.events |= EV_READABLE;
                if had_ooo || self.rcv.unacked >= 2 * u32::from(self.rcv.mss) {
                    // A filled hole, or the second full-sized segment (RFC 5681 4.2).
                    self.owed.insert(Owed::Ack);
                } else if !self.timers.is_armed(Timer::Delack) {
                    self.timers.arm(Timer::Delack, now + us(self.p.delayed_ack_us));
                }
            } else {
                // Out-of-order data we already hold is a duplicate too (RFC 2883 section 4.1.2).
                if let Some((start, end)) = self.rcv.ooo.overlap(seq, seq.wrapping_add(len)) {
                    self.report_duplicate(start, end);
                }
                if self.rcv.ooo.add(seq, seq.wrapping_add(len)) {
                    let at = self.rcv.buf.len() + off;
                    data.write_to(&mut self.rcv.buf, at);
                }
                // Out of order: a duplicate ACK (with SACK blocks) at once (RFC 5681 4.2).
                self.owed.insert(Owed::Ack);
            }
        }
        if fin {
            let fin_seq = seq.wrapping_add(data.len() as u32);
            if seq::gt(fin_seq, self.rcv.nxt) {
                self.rcv.fin = fin_seq;
                self.rcv.fin_ahead = true;
                self.owed.insert(Owed::Ack);
            } else if fin_seq == self.rcv.nxt {
                self.receive_fin(now);
            }
        }
        if self.rcv.fin_ahead && self.rcv.fin == self.rcv.nxt {
            self.receive_fin(now);
        }
    }

    fn receive_fin(&mut self, now: Instant) {
        self.rcv.fin_ahead = false;
        self.rcv.fin_received = true;
        self.rcv.nxt = self.rcv.nxt.wrapping_add(1);
        self.rcv.ooo.clear();
        self.owed.insert(Owed::Ack);
        self.events |= EV_READ_CLOSED;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// After the application read: announce a window that opened enough (receiver-side SWS
    /// avoidance, RFC 9293 3.8.6.2.2; Linux's `tcp_cleanup_rbuf` rule: the current window is
    /// at most half the buffer and the new one at least doubles it).
    pub(super) fn window_update_after_read(&mut self) {
        if !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) || self.rcv.fin_received {
            return;
        }
        let cur = self.rcv.wnd();
        let adv = self.rcv_buf_adv();
        let cand = self.free_window();
        let thresh = (adv / 2).min(u32::from(self.p.mss)).max(1);
        if cur <= adv / 2 && cand >= cur.saturating_mul(2) && cand >= cur + thresh {
            self.owed.insert(Owed::Ack);
        }
    }
}
