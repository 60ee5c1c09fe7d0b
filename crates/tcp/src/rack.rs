//! RACK-TLP (RFC 8985): time-based loss detection for connections with SACK.
//!
//! RACK ("recent acknowledgment"): once a segment sent after another has been delivered, the
//! other is lost if it has had time to arrive: `xmit + RACK.rtt + reo_wnd <= now`, where
//! RACK.rtt is the RTT of the most recently sent delivered segment and the reordering window
//! `reo_wnd` is a quarter of the minimum RTT, raised by D-SACKs (spurious retransmissions) and
//! zero until reordering is seen once recovery is on or three segments' worth is SACKed (the
//! DupThresh rule, so that a burst loss is repaired at once). Lost retransmissions are found
//! the same way, by their own send time.
//!
//! TLP ("tail loss probe"): when the ACKs stop for about two RTTs with data in flight, send one
//! segment (new data if the peer's window allows, else the last segment again) so that a lost
//! tail comes back as SACK information that RACK acts on, instead of waiting for the RTO.
//!
//! This module holds the state and makes the decisions; the connection feeds it ACKs, keeps the
//! timers and sends. Send times and loss marks are in the transmit log (`sent.rs`).

use crate::ranges::Scoreboard;
use crate::sent::{Sent, SentLog, LOST, RETRANS};
use crate::seq;
use crate::time::{Duration, Instant, MILLISECOND, SECOND};

/// RFC 8985's TLP.max_ack_delay (WCDelAckT): the longest a peer may delay the ACK of a lone
/// segment. Linux adds its minimum RTO, also 200 ms.
const TLP_MAX_ACK_DELAY: Duration = 200 * MILLISECOND;
/// Added to the PTO when more than a segment is in flight: two jiffies on Linux
/// (`TCP_TIMEOUT_MIN`), so that on a path with an RTT far below a millisecond a probe does not
/// race the ACK already on its way.
const PTO_SLACK: Duration = 2 * MILLISECOND;
/// RACK.reo_wnd_persist: recoveries over which a raised reordering window is kept.
const REO_WND_PERSIST: u8 = 16;
/// No RTT sample yet.
const NO_RTT: u32 = u32::MAX;

/// What a pass of loss detection found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Detected {
    /// Segments newly marked lost (un-SACKed bytes in MSS units, rounded up per range).
    pub(crate) lost_segments: u32,
    /// Of the ranges newly marked lost, those that were retransmissions.
    pub(crate) lost_retransmits: u32,
    /// Segments that are not lost yet but will be if nothing comes for them by then: when the
    /// reordering timer should run detection again.
    pub(crate) recheck_at: Option<Instant>,
}

/// One connection's RACK-TLP state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rack {
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent of the delivered segments.
    xmit: Instant,
    end: u32,
    /// RACK.rtt, µs.
    rtt_us: u32,
    /// RACK.min_RTT, µs, over the connection's life (Linux keeps a 5-minute windowed minimum).
    min_rtt_us: u32,
    /// RACK.fack: the highest end of delivered data that was sent once.
    fack: u32,
    /// RACK.dsack_round, while `dsack_round_open`.
    dsack_round: u32,
    /// TLP.end_seq, while `probe_open`.
    probe_end: u32,
    reo_wnd_mult: u8,
    reo_wnd_persist: u8,
    reordering_seen: bool,
    /// RACK.xmit_ts moved since detection last ran.
    advanced: bool,
    dsack_round_open: bool,
    /// A probe episode is on: TLP.end_seq is set.
    probe_open: bool,
    /// TLP.is_retrans.
    probe_retransmitted: bool,
}

impl Rack {
    /// The state of a connection whose first unacknowledged byte is `una`.
    pub(crate) fn new(una: u32) -> Rack {
        Rack {
            xmit: 0,
            end: una,
            rtt_us: 0,
            min_rtt_us: NO_RTT,
            fack: una,
            dsack_round: una,
            probe_end: una,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            reordering_seen: false,
            advanced: false,
            dsack_round_open: false,
            probe_open: false,
            probe_retransmitted: false,
        }
    }

    /// RFC 8985 step 1: an RTT sample of RFC 6298 updates RACK.min_RTT.
    pub(crate) fn rtt_sample(&mut self, rtt: Duration) {
        self.min_rtt_us = self.min_rtt_us.min(to_us(rtt));
    }

    /// Steps 2 and 3 for one ACK. `ranges` are what it acknowledges, cumulatively or
    /// selectively, in sequence order; the parts `sacked` already holds were delivered before.
    /// `echo_older(xmit)`: the ACK's timestamp echo predates `xmit` (so it was made for an
    /// earlier copy).
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ranges: &[(u32, u32)],
        log: &SentLog,
        sacked: &Scoreboard,
        echo_older: impl Fn(Instant) -> bool,
    ) {
        // Reordering is data delivered below what was delivered before this ACK (Linux's
        // prior_fack): the ACK's own ranges come in any order.
        let prior_fack = self.fack;
        for &(from, to) in ranges {
            if sacked.is_empty() {
                // Nothing SACKed before (no loss, no reordering): the whole range is new.
                if seq::lt(from, to) {
                    for (end, sent) in log.overlapping(from, to) {
                        self.delivered(now, sent, end, prior_fack, &echo_older);
                    }
                }
                continue;
            }
            let mut s = sacked.first_unsacked(from);
            while seq::lt(s, to) {
                let e = sacked.next_start_after(s).map_or(to, |next| seq::min(next, to));
                for (end, sent) in log.overlapping(s, e) {
                    self.delivered(now, sent, end, prior_fack, &echo_older);
                }
                s = sacked.first_unsacked(e);
            }
        }
    }

    /// Steps 2 and 3 for delivered data ending at `end`, of the log entry `sent`.
    fn delivered(&mut self, now: Instant, sent: Sent, end: u32, prior_fack: u32, echo_older: impl Fn(Instant) -> bool) {
        let rtt = now.saturating_sub(sent.xmit);
        if sent.flags & RETRANS != 0 {
            // Step 2: an ACK that may be for an earlier copy says nothing about this one.
            if echo_older(sent.xmit) || (self.min_rtt_us != NO_RTT && to_us(rtt) < self.min_rtt_us) {
                return;
            }
        } else if seq::lt(end, prior_fack) {
            // Step 3: delivered after data sent later.
            self.reordering_seen = true;
        } else {
            self.fack = seq::max(self.fack, end);
        }
        if sent.xmit > self.xmit || (sent.xmit == self.xmit && seq::gt(end, self.end)) {
            self.rtt_us = to_us(rtt);
            self.xmit = sent.xmit;
            self.end = end;
            self.advanced = true;
        }
    }

    /// Whether RACK.xmit_ts moved since the last call (then loss detection runs).
    pub(crate) fn take_advanced(&mut self) -> bool {
        std::mem::take(&mut self.advanced)
    }

    /// Step 4: the reordering window's multiplier, after an ACK that moved SND.UNA to `una`
    /// (SND.NXT `nxt`), brought a D-SACK or not, and ended a recovery or not.
    ///
    /// A D-SACK also counts as reordering seen, as on Linux (which counts reordering when
    /// D-SACKs undo a recovery): the retransmission it reports was needed only because the
    /// original came late, and a window of zero would make the same mistake again.
    pub(crate) fn update_reo_wnd(&mut self, una: u32, nxt: u32, dsack: bool, recovery_ended: bool) {
        if self.dsack_round_open && seq::ge(una, self.dsack_round) {
            self.dsack_round_open = false;
        }
        if dsack {
            self.reordering_seen = true;
        }
        if dsack && !self.dsack_round_open {
            self.reo_wnd_mult = self.reo_wnd_mult.saturating_add(1);
            self.dsack_round = nxt;
            self.dsack_round_open = true;
            self.reo_wnd_persist = REO_WND_PERSIST;
        } else if recovery_ended {
            self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
            if self.reo_wnd_persist == 0 {
                self.reo_wnd_mult = 1;
            }
        }
    }

    /// RACK.reo_wnd: zero while no reordering was seen if the connection is recovering or
    /// `dupthresh_sacked` (three segments' worth is SACKed); else the multiplier times a
    /// quarter of the minimum RTT, at most `srtt`.
    pub(crate) fn reo_wnd(&self, recovering: bool, dupthresh_sacked: bool, srtt: Duration) -> Duration {
        if !self.reordering_seen && (recovering || dupthresh_sacked) || self.min_rtt_us == NO_RTT {
            return 0;
        }
        let wnd = u64::from(self.reo_wnd_mult) * u64::from(self.min_rtt_us) * 1000 / 4;
        wnd.min(srtt)
    }

    /// Step 5: marks lost, in `log`, every un-SACKed range sent before RACK's segment whose
    /// time is up.
    pub(crate) fn detect_loss(
        &self,
        now: Instant,
        log: &mut SentLog,
        sacked: &Scoreboard,
        reo_wnd: Duration,
        mss: u32,
    ) -> Detected {
        // Data sent at RACK's own instant is before it only up to RACK.end_seq.
        if log.xmit_around(self.end) == Some(self.xmit) {
            log.split_at(self.end);
        }
        let rtt = u64::from(self.rtt_us) * 1000;
        let mut found = Detected::default();
        for i in 0..log.entries().len() {
            let sent = log.entries()[i];
            let before = sent.xmit < self.xmit || (sent.xmit == self.xmit && seq::le(sent.end, self.end));
            if sent.flags == LOST || !before {
                continue; // lost and not sent again since, or sent after RACK's segment
            }
            let start = log.start_of(i);
            let unsacked = sent.end.wrapping_sub(start) - sacked.sacked_in(start, sent.end);
            if unsacked == 0 {
                continue;
            }
            let deadline = sent.xmit + rtt + reo_wnd;
            if deadline <= now {
                found.lost_segments += unsacked.div_ceil(mss.max(1));
                found.lost_retransmits += u32::from(sent.flags & RETRANS != 0);
                log.mark_entry_lost(i);
            } else {
                // RFC 8985 and Linux wait for the last of them.
                found.recheck_at = found.recheck_at.max(Some(deadline));
            }
        }
        found
    }

    /// The probe timeout (RFC 8985 section 7.2): two smoothed RTTs (`None`: no sample yet, one
    /// second), plus the peer's delayed-ACK allowance when one segment is in flight (or
    /// Linux's timer slack when more are).
    pub(crate) fn pto(srtt: Option<Duration>, flight: u32, mss: u32) -> Duration {
        match srtt {
            None => SECOND,
            Some(srtt) => 2 * srtt + if flight <= mss { TLP_MAX_ACK_DELAY } else { PTO_SLACK },
        }
    }

    /// A probe is out and its outcome not known yet (TLP.end_seq is set).
    pub(crate) fn probe_open(&self) -> bool {
        self.probe_open
    }

    /// A probe went out: the episode ends at `end` (SND.NXT after it).
    pub(crate) fn probe_sent(&mut self, end: u32, retransmitted: bool) {
        self.probe_open = true;
        self.probe_end = end;
        self.probe_retransmitted = retransmitted;
    }

    /// Recovery or an RTO takes over: the probe's outcome no longer matters.
    pub(crate) fn end_probe(&mut self) {
        self.probe_open = false;
    }

    /// RFC 8985 section 7.4: what an ACK says of the probe. `true`: the probe repaired a loss
    /// (the ACK goes beyond its end and no D-SACK said both copies arrived), and congestion
    /// control must respond. A pure duplicate ACK at the probe's end means both copies arrived,
    /// as Linux reads it.
    pub(crate) fn probe_acked(&mut self, ack: u32, dsack: Option<(u32, u32)>, pure_dupack: bool) -> bool {
        if !self.probe_open || seq::lt(ack, self.probe_end) {
            return false;
        }
        let repaired = if !self.probe_retransmitted || dsack.is_some_and(|(_, end)| end == self.probe_end) {
            false
        } else if seq::gt(ack, self.probe_end) {
            true
        } else if pure_dupack {
            false
        } else {
            return false; // not known yet
        };
        self.probe_open = false;
        repaired
    }
}

fn to_us(d: Duration) -> u32 {
    (d / 1000).min(u64::from(u32::MAX - 1)) as u32
}
