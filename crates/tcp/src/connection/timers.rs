//! The connection's timers: [`TimerTable`] owns their deadlines and the probe counts of those
//! that probe; the connection's methods here say what each does when it fires: the
//! retransmission timer (RTO, SYN retries, the persist timer and its zero-window probes), the
//! delayed ACK, the idle timer (keepalive, FIN-WAIT-2, TIME-WAIT) and the loss timer (RACK
//! reordering, tail loss probe; what those do is `recovery`'s). A timer that fires only marks
//! what is owed; the segment is `output`'s to build.

use super::*;

/// A timer that is not armed.
pub(super) const NEVER: Instant = Instant::MAX;

/// The deadlines (NEVER when not armed) and the probe counts of the timers that probe.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimerTable {
    /// RTO, SYN retransmission or the persist timer (zero-window probes, or a small window that
    /// sender SWS avoidance held back).
    pub(super) rtx: Instant,
    pub(super) delack: Instant,
    /// Keepalive, FIN-WAIT-2 timeout or TIME-WAIT end.
    pub(super) idle: Instant,
    /// RACK's reordering timer or the tail loss probe (`loss_kind` says which).
    pub(super) loss: Instant,
    pub(super) loss_kind: LossTimer,
    /// The persist timer's backoff exponent.
    pub(super) persist_backoff: u8,
    /// Zero-window probes without an answer.
    pub(super) window_probes: u8,
    /// Keepalive probes without an answer.
    pub(super) keepalive_probes: u8,
}

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            rtx: NEVER,
            delack: NEVER,
            idle: NEVER,
            loss: NEVER,
            loss_kind: LossTimer::Reorder,
            persist_backoff: 0,
            window_probes: 0,
            keepalive_probes: 0,
        }
    }
}

impl TimerTable {
    /// The earliest deadline, if any is armed.
    pub(super) fn next(&self) -> Option<Instant> {
        let t = self.rtx.min(self.delack).min(self.idle).min(self.loss);
        (t != NEVER).then_some(t)
    }

    /// Disarms the loss timer if it is the tail loss probe's.
    pub(super) fn disarm_probe(&mut self) {
        if self.loss_kind == LossTimer::Probe {
            self.loss = NEVER;
        }
    }
}

/// What the loss timer (`TimerTable::loss`) is for when it is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LossTimer {
    /// RACK's reordering timer: run loss detection again (RFC 8985 section 6.2).
    Reorder,
    /// The tail loss probe timeout (RFC 8985 section 7.2).
    Probe,
}

impl Connection {
    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.delack <= now {
            self.timers.delack = NEVER;
            self.owed.insert(Owed::Ack);
        }
        // Before the RTO: a probe due with it takes its place (and re-arms it).
        if self.timers.loss <= now {
            self.timers.loss = NEVER;
            self.on_loss_timer(now);
        }
        if self.timers.rtx <= now {
            self.timers.rtx = NEVER;
            self.on_rtx_timer(now);
        }
        if self.timers.idle <= now {
            self.timers.idle = NEVER;
            self.on_idle_timer(now);
        }
    }

    fn on_rtx_timer(&mut self, now: Instant) {
        match self.state {
            State::SynSent | State::SynReceived => {
                let limit = if self.state == State::SynSent { self.p.syn_retries } else { self.p.synack_retries };
                if self.rtt.backoff >= limit {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.rtt.backoff += 1;
                self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
                self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
                self.flags.insert(Flag::SynRetransmitted);
                self.rtt.stop_timing();
                self.snd.nxt = self.snd.iss;
                self.timers.rtx = now + self.rto();
            }
            State::Established | State::FinWait1 | State::CloseWait | State::Closing | State::LastAck => {
                if self.snd.una != self.snd.max {
                    self.on_rto(now);
                } else if self.snd.has_unsent_data() {
                    self.on_persist(now);
                }
            }
            _ => {}
        }
    }

    /// The persist timer (RFC 9293 3.8.6.1): probe a zero window, or send into a small one
    /// that sender-side SWS avoidance held back.
    fn on_persist(&mut self, now: Instant) {
        let mut limit = self.p.retries2;
        if self.orphaned() {
            // Linux `tcp_probe_timer`: an orphan whose probes are already `rto_max` apart
            // gives up after `tcp_orphan_retries` of them, answered or not (a peer that keeps
            // its window shut would otherwise hold the connection for ever).
            let alive = self.persist_interval() < us(self.p.rto_max_us);
            limit = self.orphan_retries(alive);
            if !alive && self.timers.persist_backoff >= limit {
                self.fail(Error::TimedOut, EV_TIMED_OUT);
                return;
            }
        }
        if self.timers.window_probes >= limit {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        if self.snd.window_room() > 0 {
            self.owed.insert(Owed::ForceSend);
        } else {
            self.owed.insert(Owed::Probe);
            self.timers.window_probes = self.timers.window_probes.saturating_add(1);
        }
        self.timers.persist_backoff = self.timers.persist_backoff.saturating_add(1);
        self.timers.rtx = now + self.persist_interval();
    }

    fn on_idle_timer(&mut self, now: Instant) {
        match self.state {
            State::TimeWait => self.enter_closed(),
            State::FinWait2 if self.rcv.closed => self.enter_closed(),
            State::Established | State::CloseWait if self.p.has(Opt::Keepalive) => {
                // RFC 1122 4.2.3.6, Linux's rules: only when nothing is outstanding.
                if self.snd.una != self.snd.max || self.snd.has_unsent_data() {
                    self.timers.idle = now + ms(self.p.ka_idle_ms);
                    return;
                }
                if self.timers.keepalive_probes >= self.p.ka_count {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.owed.insert(Owed::Probe);
                self.timers.keepalive_probes += 1;
                self.timers.idle = now + ms(self.p.ka_interval_ms);
            }
            _ => {}
        }
    }

    /// Arms the persist timer when data waits, nothing is in flight and no timer runs.
    pub(super) fn arm_persist(&mut self, now: Instant) {
        if self.can_send_data()
            && self.snd.una == self.snd.max
            && self.timers.rtx == NEVER
            && self.snd.has_unsent_data()
            && self.snd.window_room() < self.eff_mss()
        {
            self.timers.rtx = now + self.persist_interval();
        }
    }

    /// The zero-window probe interval.
    fn persist_interval(&self) -> Duration {
        self.rtt.backed_off(self.timers.persist_backoff, self.p.rto_max_us)
    }
}
