//! Loss recovery: fast recovery (RFC 5681/6582 NewReno, RFC 6675 with SACK), RACK-TLP loss
//! detection and the tail loss probe (RFC 8985, the decisions in `rack.rs`), and the
//! retransmission timeout's response (RFC 6298 5.4 to 5.7). It decides what is lost and when
//! recovery starts and ends; sending the retransmissions is `output`'s.

use super::*;

/// Duplicate ACKs that mean a loss (RFC 5681 section 3.2, RFC 6675 DupThresh).
const DUPTHRESH: u8 = 3;

/// Fast-recovery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recovery {
    None,
    /// RFC 6582: retransmit on partial ACKs, window inflated by duplicate ACKs.
    NewReno,
    /// RFC 6675: the scoreboard and the pipe decide.
    Sack,
}

impl Connection {
    /// RFC 6675 SetPipe: un-SACKed bytes in flight, not counting those deemed lost, plus the
    /// retransmitted ones.
    pub(super) fn pipe(&self) -> u32 {
        self.sent.pipe(&self.sacked)
    }

    /// RACK-TLP runs on this connection: it is on and the peer does SACK.
    pub(super) fn rack_on(&self) -> bool {
        self.p.has(Opt::RackTlp) && self.sack_ok
    }

    /// In fast recovery, or going back after an RTO until what was sent before it is
    /// acknowledged.
    pub(super) fn recovering(&self) -> bool {
        self.recovery != Recovery::None || seq::lt(self.snd.una, self.recover)
    }

    /// Room in the congestion window for one more segment at SND.NXT.
    pub(super) fn cwnd_room(&self) -> u32 {
        let cwnd = self.cc.cwnd();
        match self.recovery {
            Recovery::Sack => cwnd.saturating_sub(self.pipe()),
            Recovery::NewReno => {
                cwnd.saturating_add(self.inflate).saturating_sub(self.snd.nxt.wrapping_sub(self.snd.una))
            }
            Recovery::None => cwnd.saturating_sub(self.snd.nxt.wrapping_sub(self.snd.una)),
        }
    }

    /// Fast recovery starts if loss detection found a loss, but not again for losses before
    /// `recover` (RFC 6582 section 3.2 step 2).
    pub(super) fn recover_if_lost(&mut self, now: Instant) {
        if self.recovering() || self.snd.una == self.snd.max {
            return;
        }
        // RACK replaces the duplicate-ACK rule where it runs (as on Linux).
        let lost = self.sent.has_lost(&self.sacked) || (!self.rack_on() && self.dupacks >= DUPTHRESH);
        if lost {
            self.enter_recovery(now);
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        let mss = self.eff_mss();
        let flight = self.snd.in_flight();
        // RFC 3168 section 6.1.2: not again if ECE reduced the window for this one (Linux:
        // not in its CWR state); the next new data says CWR either way.
        if !self.ecn_reducing {
            self.cc.on_congestion_event(now, flight, mss);
        }
        self.ecn_cwr_pending = self.ecn_ok;
        self.recover = self.snd.max;
        self.rtt.stop_timing();
        // This recovery responds to the loss: a probe's outcome no longer matters.
        self.rack.end_probe();
        self.timers.disarm_probe();
        if self.sack_ok {
            self.recovery = Recovery::Sack;
            self.inflate = 0;
            // RFC 6675 section 5 (4.3): the segment at SND.UNA goes at once, lost or not.
            // RACK sends what it marked lost, in order (rule 1 of NextSeg).
            self.rtx_first = !self.rack_on();
        } else {
            self.recovery = Recovery::NewReno;
            self.inflate = DUPTHRESH as u32 * mss;
            self.rtx_first = true;
        }
    }

    /// RFC 8985 steps 2 and 3 for what this ACK delivers: `[SND.UNA, ack)` and the SACK blocks
    /// (the D-SACK block delivers nothing new), in sequence order.
    pub(super) fn rack_delivered(&mut self, now: Instant, seg: &TcpRepr, ack: u32, dsack: Option<(u32, u32)>) {
        let mut ranges = [(0u32, 0u32); 5];
        let mut n = 0;
        if seq::gt(ack, self.snd.una) {
            ranges[0] = (self.snd.una, ack);
            n = 1;
        }
        for &(left, right) in seg.sack_ranges.iter().flatten() {
            let valid = seq::lt(left, right) && seq::gt(right, ack) && seq::le(right, self.snd.max);
            if valid && Some((left, right)) != dsack {
                ranges[n] = (seq::max(left, ack), right);
                n += 1;
            }
        }
        let una = self.snd.una;
        ranges[..n].sort_unstable_by_key(|&(left, _)| left.wrapping_sub(una));
        let echo = if self.ts_ok { seg.timestamp.map(|(_, tsecr)| tsecr).filter(|&e| e != 0) } else { None };
        let (ts_offset, sent, sacked) = (self.ts_offset, &self.sent, &self.sacked);
        let echo_older = |xmit: Instant| echo.is_some_and(|e| seq::lt(e, ts_clock(xmit, ts_offset)));
        self.rack.on_ack(now, &ranges[..n], sent, sacked, echo_older);
    }

    /// RFC 8985 step 5, and the reordering timer for what is not lost yet.
    pub(super) fn rack_detect_loss(&mut self, now: Instant) {
        let mss = self.eff_mss();
        let dupthresh_sacked = self.sacked.sacked_in(self.snd.una, self.snd.max) > (u32::from(DUPTHRESH) - 1) * mss;
        let reo_wnd = self.rack.reo_wnd(self.recovering(), dupthresh_sacked, self.rtt.srtt());
        let found = self.rack.detect_loss(now, &mut self.sent, &self.sacked, reo_wnd, mss);
        self.counters.rack_lost = self.counters.rack_lost.wrapping_add(found.lost_segments);
        self.counters.lost_retransmits = self.counters.lost_retransmits.wrapping_add(found.lost_retransmits);
        match found.recheck_at {
            Some(t) => {
                self.timers.loss = t;
                self.timers.loss_kind = LossTimer::Reorder;
            }
            None if self.timers.loss_kind == LossTimer::Reorder => self.timers.loss = NEVER,
            None => {}
        }
    }

    /// Arms the tail loss probe (RFC 8985 section 7.2), after new data went out or an ACK
    /// acknowledged new data: a PTO from now, but no later than the RTO. A pending reordering
    /// timer goes first.
    pub(super) fn schedule_probe(&mut self, now: Instant) {
        if self.timers.loss != NEVER && self.timers.loss_kind == LossTimer::Reorder {
            return;
        }
        if !self.probe_allowed() {
            self.timers.loss = NEVER;
            return;
        }
        let flight = self.snd.in_flight();
        let pto = Rack::pto(self.rtt.has_sample().then(|| self.rtt.srtt()), flight, self.eff_mss());
        self.timers.loss = (now + pto).min(self.timers.rtx);
        self.timers.loss_kind = LossTimer::Probe;
    }

    /// A tail loss probe may go: RACK-TLP runs, data is in flight, no recovery (fast, or after
    /// an RTO) is going on, and the outcome of the last probe is known.
    pub(super) fn probe_allowed(&self) -> bool {
        self.rack_on()
            && self.can_send_data()
            && self.snd.una != self.snd.max
            && !self.recovering()
            && !self.rack.probe_open()
    }

    /// RACK's reordering timer (detect losses again) or the tail loss probe timeout.
    pub(super) fn on_loss_timer(&mut self, now: Instant) {
        if !self.can_send_data() || self.snd.una == self.snd.max {
            return;
        }
        match self.timers.loss_kind {
            LossTimer::Reorder => {
                self.rack_detect_loss(now);
                self.recover_if_lost(now);
                self.schedule_probe(now);
            }
            LossTimer::Probe => {
                self.send_probe = self.probe_allowed();
                // RFC 8985 section 7.3: after a probe, the RTO is armed, not the PTO.
                self.timers.rtx = now + self.rto();
            }
        }
    }

    /// RFC 6298 section 5.4 to 5.7 with RFC 5681's loss window: go back to SND.UNA.
    pub(super) fn on_rto(&mut self, now: Instant) {
        if self.rtt.backoff >= self.p.retries2 {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
        // Everything goes again from SND.UNA: no loss marks, no probe, no reordering timer.
        self.sent.clear_marks();
        self.rack.end_probe();
        self.timers.loss = NEVER;
        let mss = self.eff_mss();
        let flight = self.snd.in_flight();
        self.cc.on_retransmission_timeout(now, flight, mss, self.rtt.backoff == 0);
        self.ecn_window_reduced();
        if self.rtt.backoff >= 1 {
            // A second timeout in a row: maybe the receiver reneged on what it SACKed (RFC
            // 2018 section 8); send everything again.
            self.sacked.clear();
        }
        self.recovery = Recovery::None;
        self.inflate = 0;
        self.dupacks = 0;
        self.recover = self.snd.max;
        self.rtx_first = false;
        self.rtt.stop_timing();
        self.rtt.backoff = self.rtt.backoff.saturating_add(1);
        self.snd.nxt = self.snd.una;
        self.timers.rtx = now + self.rto();
    }
}
