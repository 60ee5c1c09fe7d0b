//! Loss recovery: fast recovery (RFC 5681/6582 NewReno, RFC 6675 with SACK), RACK-TLP loss
//! detection and the tail loss probe (RFC 8985, the decisions in `rack.rs`), and the
//! retransmission timeout's response (RFC 6298 5.4 to 5.7). [`LossRecovery`] owns the recovery
//! in progress, the SACK scoreboard, the transmit log (`sent.rs`) and RACK's state; the
//! connection's methods here decide what is lost and when recovery starts and ends. It must
//! not send: what goes next (`rtx_first`, `send_probe`, the lost ranges) is `output`'s to pick.

use wire::TcpRepr;

use crate::congestion::CongestionControl;
use crate::rack::{Detected, Rack};
use crate::ranges::Scoreboard;
use crate::sent::SentLog;
use crate::seq;
use crate::time::Instant;

use super::ecn::EcnBit;
use super::params::{us, Opt};
use super::timers::{LossTimer, Timer};
use super::{Connection, Error, EV_TIMED_OUT};

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

/// What the sender knows of losses: the recovery in progress, what the peer SACKed, when each
/// range in flight was sent and what loss detection concluded about it, and RACK-TLP's state.
#[derive(Debug)]
pub(super) struct LossRecovery {
    pub(super) mode: Recovery,
    /// RFC 6582 `recover` (exclusive: the highest sequence number sent plus one at loss).
    pub(super) recover: u32,
    /// NewReno's window inflation during fast recovery.
    pub(super) inflate: u32,
    pub(super) dupacks: u8,
    /// Retransmit the segment at SND.UNA next (fast retransmit, NewReno partial ACK).
    pub(super) rtx_first: bool,
    /// The probe timeout fired: send a tail loss probe.
    pub(super) send_probe: bool,
    /// What the peer SACKed.
    pub(super) sacked: Scoreboard,
    /// When each range in flight was sent, and what recovery made of it.
    pub(super) sent: SentLog,
    pub(super) rack: Rack,
}

impl LossRecovery {
    /// No loss yet; SND.UNA is `iss`.
    pub(super) fn new(iss: u32) -> Self {
        LossRecovery {
            mode: Recovery::None,
            recover: iss,
            inflate: 0,
            dupacks: 0,
            rtx_first: false,
            send_probe: false,
            sacked: Scoreboard::default(),
            sent: SentLog::default(),
            rack: Rack::new(iss),
        }
    }

    /// RFC 6675 SetPipe: un-SACKed bytes in flight, not counting those deemed lost, plus the
    /// retransmitted ones.
    pub(super) fn pipe(&self) -> u32 {
        self.sent.pipe(&self.sacked)
    }
}

impl Connection {
    /// RACK-TLP runs on this connection: it is on and the peer does SACK.
    pub(super) fn rack_on(&self) -> bool {
        self.p.has(Opt::RackTlp) && self.agreed.sack()
    }

    /// In fast recovery, or going back after an RTO until what was sent before it is
    /// acknowledged.
    pub(super) fn recovering(&self) -> bool {
        self.loss.mode != Recovery::None || seq::lt(self.snd.una, self.loss.recover)
    }

    /// Room in the congestion window for one more segment at SND.NXT.
    pub(super) fn cwnd_room(&self) -> u32 {
        let cwnd = self.cc.cwnd();
        match self.loss.mode {
            Recovery::Sack => cwnd.saturating_sub(self.loss.pipe()),
            Recovery::NewReno => {
                cwnd.saturating_add(self.loss.inflate).saturating_sub(self.snd.nxt.wrapping_sub(self.snd.una))
            }
            Recovery::None => cwnd.saturating_sub(self.snd.nxt.wrapping_sub(self.snd.una)),
        }
    }

    /// The SACK blocks of an ACK for `ack` (`dsack` is the D-SACK block, if the first is one):
    /// RACK's view of what it delivers, then the scoreboard takes them in.
    pub(super) fn take_in_sack(&mut self, now: Instant, seg: &TcpRepr, ack: u32, dsack: Option<(u32, u32)>) {
        if self.rack_on() {
            self.rack_delivered(now, seg, ack, dsack);
        }
        if self.agreed.sack() {
            for &(left, right) in seg.sack_ranges.iter().flatten() {
                if seq::lt(left, right) && seq::gt(right, ack) && seq::le(right, self.snd.max) {
                    self.loss.sacked.add(seq::max(left, ack), right);
                }
            }
        }
    }

    /// Loss detection after an ACK: with SACK, RACK (RFC 8985) or else RFC 6675's IsLost mark
    /// what is lost in the transmit log; without, three duplicate ACKs say it (RFC 5681 3.2,
    /// in `recover_if_lost`).
    pub(super) fn detect_loss_on_ack(
        &mut self,
        now: Instant,
        seg: &TcpRepr,
        ack: u32,
        dsack: Option<(u32, u32)>,
        is_dup: bool,
        was_recovering: bool,
    ) {
        if self.rack_on() {
            let recovery_ended = was_recovering && !self.recovering();
            self.loss.rack.update_reo_wnd(self.snd.una, self.snd.max, dsack.is_some(), recovery_ended);
            let pure_dupack = is_dup && seg.sack_ranges[0].is_none();
            if self.loss.rack.probe_acked(ack, dsack, pure_dupack) {
                // The probe repaired a loss by itself (RFC 8985 section 7.4.2): congestion
                // control responds as to any loss, from the window rather than the flight,
                // as Linux does (`tcp_process_tlp_ack`): the flight at a tail is a segment or
                // two, and would cut a window that was fine to its floor.
                self.counters.loss_probe_recoveries = self.counters.loss_probe_recoveries.wrapping_add(1);
                self.cc.on_congestion_event(now, self.cc.cwnd(), self.eff_mss());
            }
            if self.loss.rack.take_advanced() {
                self.rack_detect_loss(now);
            }
        } else if self.agreed.sack() && !self.loss.sacked.is_empty() {
            let lost_end = seq::min(self.loss.sacked.lost_end(self.snd.una, self.eff_mss()), self.snd.max);
            if seq::gt(lost_end, self.snd.una) {
                self.loss.sent.mark_lost(self.snd.una, lost_end, false);
            }
        }
    }

    /// An ACK of new data (`acked` bytes, up to `ack`; `flight_before` was outstanding): the
    /// window grows outside recovery; a full ACK ends recovery; a partial one in NewReno
    /// retransmits the next hole.
    pub(super) fn new_ack_in_recovery(&mut self, now: Instant, ack: u32, acked: u32, flight_before: u32) {
        let mss = self.eff_mss();
        let flight = self.snd.in_flight();
        match self.loss.mode {
            Recovery::None => {
                self.loss.dupacks = 0;
                // RFC 7661: grow only a window that is in use (at least half of it in flight).
                if flight_before.saturating_mul(2) >= self.cc.cwnd() {
                    self.cc.on_ack(now, acked, mss);
                }
            }
            Recovery::NewReno | Recovery::Sack if seq::ge(ack, self.loss.recover) => {
                // Full ACK: recovery is over.
                self.loss.mode = Recovery::None;
                self.loss.inflate = 0;
                self.loss.dupacks = 0;
                self.cc.on_recovery_exit(now, flight, mss);
            }
            Recovery::NewReno => {
                // Partial ACK (RFC 6582 section 3.2 step 5): retransmit the next hole,
                // deflate by what was acknowledged, give back one SMSS if it was that much.
                self.loss.rtx_first = true;
                let back = if acked >= mss { mss } else { 0 };
                self.loss.inflate = (self.loss.inflate + back).saturating_sub(acked);
            }
            Recovery::Sack => {}
        }
    }

    /// Fast recovery starts if loss detection found a loss, but not again for losses before
    /// `recover` (RFC 6582 section 3.2 step 2).
    pub(super) fn recover_if_lost(&mut self, now: Instant) {
        if self.recovering() || self.snd.una == self.snd.max {
            return;
        }
        // RACK replaces the duplicate-ACK rule where it runs (as on Linux).
        let lost = self.loss.sent.has_lost(&self.loss.sacked) || (!self.rack_on() && self.loss.dupacks >= DUPTHRESH);
        if lost {
            self.enter_recovery(now);
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        let mss = self.eff_mss();
        let flight = self.snd.in_flight();
        // RFC 3168 section 6.1.2: not again if ECE reduced the window for this one (Linux:
        // not in its CWR state); the next new data says CWR either way.
        if !self.ecn.has(EcnBit::Reducing) {
            self.cc.on_congestion_event(now, flight, mss);
        }
        self.ecn.set(EcnBit::CwrPending, self.ecn.has(EcnBit::On));
        self.loss.recover = self.snd.max;
        self.rtt.stop_timing();
        // This recovery responds to the loss: a probe's outcome no longer matters.
        self.loss.rack.end_probe();
        self.timers.disarm_probe();
        if self.agreed.sack() {
            self.loss.mode = Recovery::Sack;
            self.loss.inflate = 0;
            // RFC 6675 section 5 (4.3): the segment at SND.UNA goes at once, lost or not.
            // RACK sends what it marked lost, in order (rule 1 of NextSeg).
            self.loss.rtx_first = !self.rack_on();
        } else {
            self.loss.mode = Recovery::NewReno;
            self.loss.inflate = DUPTHRESH as u32 * mss;
            self.loss.rtx_first = true;
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
        if n > 1 {
            ranges[..n].sort_unstable_by_key(|&(left, _)| left.wrapping_sub(una));
        }
        let echo =
            if self.agreed.timestamps() { seg.timestamp.map(|(_, tsecr)| tsecr).filter(|&e| e != 0) } else { None };
        let (ts, sent, sacked) = (self.ts, &self.loss.sent, &self.loss.sacked);
        let echo_older = |xmit: Instant| echo.is_some_and(|e| seq::lt(e, ts.clock(xmit)));
        self.loss.rack.on_ack(now, &ranges[..n], sent, sacked, echo_older);
    }

    /// RFC 8985 step 5, and the reordering timer for what is not lost yet.
    pub(super) fn rack_detect_loss(&mut self, now: Instant) {
        // Nothing sent and unacknowledged (an ACK of all of it: every exchange of requests and
        // answers): nothing can be lost and no reordering waited for, without the window.
        let found = if self.loss.sent.entries().is_empty() {
            Detected::default()
        } else {
            let mss = self.eff_mss();
            let dupthresh_sacked =
                self.loss.sacked.sacked_in(self.snd.una, self.snd.max) > (u32::from(DUPTHRESH) - 1) * mss;
            let reo_wnd = self.loss.rack.reo_wnd(self.recovering(), dupthresh_sacked, self.rtt.srtt());
            self.loss.rack.detect_loss(now, &mut self.loss.sent, &self.loss.sacked, reo_wnd, mss)
        };
        self.counters.rack_lost = self.counters.rack_lost.wrapping_add(found.lost_segments);
        self.counters.lost_retransmits = self.counters.lost_retransmits.wrapping_add(found.lost_retransmits);
        match found.recheck_at {
            Some(t) => self.timers.arm_loss(t, LossTimer::Reorder),
            None if self.timers.loss_kind() == LossTimer::Reorder => self.timers.disarm(Timer::Loss),
            None => {}
        }
    }

    /// Arms the tail loss probe (RFC 8985 section 7.2), after new data went out or an ACK
    /// acknowledged new data: a PTO from now, but no later than the RTO. A pending reordering
    /// timer goes first.
    pub(super) fn schedule_probe(&mut self, now: Instant) {
        if self.timers.is_armed(Timer::Loss) && self.timers.loss_kind() == LossTimer::Reorder {
            return;
        }
        if !self.probe_allowed() {
            self.timers.disarm(Timer::Loss);
            return;
        }
        let flight = self.snd.in_flight();
        let pto = Rack::pto(self.rtt.has_sample().then(|| self.rtt.srtt()), flight, self.eff_mss());
        self.timers.arm_loss((now + pto).min(self.timers.deadline(Timer::Rtx)), LossTimer::Probe);
    }

    /// A tail loss probe may go: RACK-TLP runs, data is in flight, no recovery (fast, or after
    /// an RTO) is going on, and the outcome of the last probe is known.
    pub(super) fn probe_allowed(&self) -> bool {
        self.rack_on()
            && self.can_send_data()
            && self.snd.una != self.snd.max
            && !self.recovering()
            && !self.loss.rack.probe_open()
    }

    /// RACK's reordering timer (detect losses again) or the tail loss probe timeout.
    pub(super) fn on_loss_timer(&mut self, now: Instant) {
        if !self.can_send_data() || self.snd.una == self.snd.max {
            return;
        }
        match self.timers.loss_kind() {
            LossTimer::Reorder => {
                self.rack_detect_loss(now);
                self.recover_if_lost(now);
                self.schedule_probe(now);
            }
            LossTimer::Probe => {
                self.loss.send_probe = self.probe_allowed();
                // RFC 8985 section 7.3: after a probe, the RTO is armed, not the PTO.
                self.timers.arm(Timer::Rtx, now + self.rto());
            }
        }
    }

    /// RFC 6298 section 5.4 to 5.7 with RFC 5681's loss window: go back to SND.UNA.
    pub(super) fn on_rto(&mut self, now: Instant) {
        // Linux `tcp_write_timeout`: an orphan gets `tcp_orphan_retries` instead of `retries2`.
        let limit =
            if self.orphaned() { self.orphan_retries(self.rto() < us(self.p.rto_max_us)) } else { self.p.retries2 };
        if self.rtt.backoff >= limit {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
        // Everything goes again from SND.UNA: no loss marks, no probe, no reordering timer.
        self.loss.sent.clear_marks();
        self.loss.rack.end_probe();
        self.timers.disarm(Timer::Loss);
        let mss = self.eff_mss();
        let flight = self.snd.in_flight();
        self.cc.on_retransmission_timeout(now, flight, mss, self.rtt.backoff == 0);
        self.ecn_window_reduced();
        if self.rtt.backoff >= 1 {
            // A second timeout in a row: maybe the receiver reneged on what it SACKed (RFC
            // 2018 section 8); send everything again.
            self.loss.sacked.clear();
        }
        self.loss.mode = Recovery::None;
        self.loss.inflate = 0;
        self.loss.dupacks = 0;
        self.loss.recover = self.snd.max;
        self.loss.rtx_first = false;
        self.rtt.stop_timing();
        self.rtt.backoff = self.rtt.backoff.saturating_add(1);
        self.snd.nxt = self.snd.una;
        self.timers.arm(Timer::Rtx, now + self.rto());
    }
}
