//! The connection's timers: [`TimerTable`] owns their deadlines and the probe counts of those
//! that probe; the connection's methods here say what each does when it fires: the
//! retransmission timer (RTO, SYN retries, the persist timer and its zero-window probes), the
//! delayed ACK, the idle timer (keepalive, FIN-WAIT-2, TIME-WAIT) and the loss timer (RACK
//! reordering, tail loss probe; what those do is `recovery`'s). A timer that fires only marks
//! what is owed; the segment is `output`'s to build.

use crate::time::{Duration, Instant};

use super::output::Owed;
use super::params::{ms, us, Opt};
use super::{Connection, Error, Flag, State, EV_TIMED_OUT};

/// A timer that is not armed.
pub(super) const NEVER: Instant = Instant::MAX;

/// The deadlines (NEVER when not armed) and the probe counts of the timers that probe.
#[derive(Debug, Clone, Copy)]
pub(super) struct TimerTable {
    /// The deadlines, indexed by [`Timer`].
    deadlines: [Instant; 4],
    /// What the loss timer is for.
    loss_kind: LossTimer,
    /// The persist timer's backoff exponent.
    persist_backoff: u8,
    /// Zero-window probes without an answer.
    window_probes: u8,
    /// Keepalive probes without an answer.
    keepalive_probes: u8,
}

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            deadlines: [NEVER; 4],
            loss_kind: LossTimer::Reorder,
            persist_backoff: 0,
            window_probes: 0,
            keepalive_probes: 0,
        }
    }
}

impl TimerTable {
    /// The earliest deadline, if any is armed.
    #[inline]
    pub(super) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().copied().min().filter(|&t| t != NEVER)
    }

    /// When `timer` fires: [`NEVER`] when it is not armed.
    pub(super) fn deadline(&self, timer: Timer) -> Instant {
        self.deadlines[timer as usize]
    }

    pub(super) fn is_armed(&self, timer: Timer) -> bool {
        self.deadline(timer) != NEVER
    }

    /// Sets `timer` to fire at `at` ([`NEVER`] disarms it). The loss timer keeps its kind: arm
    /// it with [`TimerTable::arm_loss`].
    pub(super) fn arm(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer as usize] = at;
    }

    pub(super) fn disarm(&mut self, timer: Timer) {
        self.arm(timer, NEVER);
    }

    /// Whether `timer` is due at `now`; a due timer is disarmed (the caller runs it).
    pub(super) fn take_due(&mut self, timer: Timer, now: Instant) -> bool {
        let due = self.deadline(timer) <= now;
        if due {
            self.disarm(timer);
        }
        due
    }

    /// Arms the loss timer at `at` for `kind`.
    pub(super) fn arm_loss(&mut self, at: Instant, kind: LossTimer) {
        self.arm(Timer::Loss, at);
        self.loss_kind = kind;
    }

    /// What the loss timer is for (the last kind it was armed for).
    pub(super) fn loss_kind(&self) -> LossTimer {
        self.loss_kind
    }

    /// Disarms the loss timer if it is the tail loss probe's.
    pub(super) fn disarm_probe(&mut self) {
        if self.loss_kind == LossTimer::Probe {
            self.disarm(Timer::Loss);
        }
    }

    /// The persist timer's backoff exponent.
    pub(super) fn persist_backoff(&self) -> u8 {
        self.persist_backoff
    }

    /// The persist timer fired: the next interval is twice as long.
    pub(super) fn back_off_persist(&mut self) {
        self.persist_backoff = self.persist_backoff.saturating_add(1);
    }

    /// The peer's window opened: the persist timer starts again from its first interval.
    pub(super) fn persist_answered(&mut self) {
        self.persist_backoff = 0;
    }

    /// Zero-window probes sent without an answer.
    pub(super) fn window_probes(&self) -> u8 {
        self.window_probes
    }

    pub(super) fn count_window_probe(&mut self) {
        self.window_probes = self.window_probes.saturating_add(1);
    }

    /// An ACK came: the zero-window probes were answered.
    pub(super) fn window_probe_answered(&mut self) {
        self.window_probes = 0;
    }

    /// Keepalive probes sent without an answer.
    pub(super) fn keepalive_probes(&self) -> u8 {
        self.keepalive_probes
    }

    pub(super) fn count_keepalive_probe(&mut self) {
        self.keepalive_probes += 1;
    }

    /// The peer was heard from: the keepalive probes were answered.
    pub(super) fn keepalive_answered(&mut self) {
        self.keepalive_probes = 0;
    }
}

/// One of the connection's four deadlines in [`TimerTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// RTO, SYN retransmission or the persist timer (zero-window probes, or a small window that
    /// sender SWS avoidance held back).
    Rtx,
    /// The delayed ACK.
    Delack,
    /// Keepalive, FIN-WAIT-2 timeout or TIME-WAIT end.
    Idle,
    /// RACK's reordering timer or the tail loss probe ([`TimerTable::loss_kind`] says which).
    Loss,
}

/// What the loss timer (`Timer::Loss`) is for when it is armed.
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
        if self.timers.take_due(Timer::Delack, now) {
            self.owed.insert(Owed::Ack);
        }
        // Before the RTO: a probe due with it takes its place (and re-arms it).
        if self.timers.take_due(Timer::Loss, now) {
            self.on_loss_timer(now);
        }
        if self.timers.take_due(Timer::Rtx, now) {
            self.on_rtx_timer(now);
        }
        if self.timers.take_due(Timer::Idle, now) {
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
                self.timers.arm(Timer::Rtx, now + self.rto());
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
            if !alive && self.timers.persist_backoff() >= limit {
                self.fail(Error::TimedOut, EV_TIMED_OUT);
                return;
            }
        }
        if self.timers.window_probes() >= limit {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        if self.snd.window_room() > 0 {
            self.owed.insert(Owed::ForceSend);
        } else {
            self.owed.insert(Owed::Probe);
            self.timers.count_window_probe();
        }
        self.timers.back_off_persist();
        self.timers.arm(Timer::Rtx, now + self.persist_interval());
    }

    fn on_idle_timer(&mut self, now: Instant) {
        match self.state {
            State::TimeWait => self.enter_closed(),
            State::FinWait2 if self.rcv.closed => self.enter_closed(),
            State::Established | State::CloseWait if self.p.has(Opt::Keepalive) => {
                // RFC 1122 4.2.3.6, Linux's rules: only when nothing is outstanding.
                if self.snd.una != self.snd.max || self.snd.has_unsent_data() {
                    self.timers.arm(Timer::Idle, now + ms(self.p.ka_idle_ms));
                    return;
                }
                if self.timers.keepalive_probes() >= self.p.ka_count {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.owed.insert(Owed::Probe);
                self.timers.count_keepalive_probe();
                self.timers.arm(Timer::Idle, now + ms(self.p.ka_interval_ms));
            }
            _ => {}
        }
    }

    /// Arms the persist timer when data waits, nothing is in flight and no timer runs.
    pub(super) fn arm_persist(&mut self, now: Instant) {
        if self.can_send_data()
            && self.snd.una == self.snd.max
            && !self.timers.is_armed(Timer::Rtx)
            && self.snd.has_unsent_data()
            && self.snd.window_room() < self.eff_mss()
        {
            self.timers.arm(Timer::Rtx, now + self.persist_interval());
        }
    }

    /// The zero-window probe interval.
    fn persist_interval(&self) -> Duration {
        self.rtt.backed_off(self.timers.persist_backoff(), self.p.rto_max_us)
    }
}
