//! The connection's timers: when each fires and what it does: the retransmission timer (RTO,
//! SYN retries, the persist timer and its zero-window probes), the delayed ACK, the idle timer
//! (keepalive, FIN-WAIT-2, TIME-WAIT) and the loss timer (RACK reordering, tail loss probe).

use super::*;

/// A timer that is not armed.
pub(super) const NEVER: Instant = Instant::MAX;

impl Connection {
    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.t_delack <= now {
            self.t_delack = NEVER;
            self.ack_now = true;
        }
        // Before the RTO: a probe due with it takes its place (and re-arms it).
        if self.t_loss <= now {
            self.t_loss = NEVER;
            self.on_loss_timer(now);
        }
        if self.t_rtx <= now {
            self.t_rtx = NEVER;
            self.on_rtx_timer(now);
        }
        if self.t_idle <= now {
            self.t_idle = NEVER;
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
                self.syn_retransmitted = true;
                self.rtt.stop_timing();
                self.snd_nxt = self.iss;
                self.t_rtx = now + self.rto();
            }
            State::Established | State::FinWait1 | State::CloseWait | State::Closing | State::LastAck => {
                if self.snd_una != self.snd_max {
                    self.on_rto(now);
                } else if self.has_unsent_data() {
                    self.on_persist(now);
                }
            }
            _ => {}
        }
    }

    /// The persist timer (RFC 9293 3.8.6.1): probe a zero window, or send into a small one
    /// that sender-side SWS avoidance held back.
    fn on_persist(&mut self, now: Instant) {
        if self.probes >= self.p.retries2 {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        if self.snd_wnd_room() > 0 {
            self.force_send = true;
        } else {
            self.probe = true;
            self.probes = self.probes.saturating_add(1);
        }
        self.persist_backoff = self.persist_backoff.saturating_add(1);
        self.t_rtx = now + self.persist_interval();
    }

    fn on_idle_timer(&mut self, now: Instant) {
        match self.state {
            State::TimeWait => self.enter_closed(),
            State::FinWait2 if self.rcv_closed => self.enter_closed(),
            State::Established | State::CloseWait if self.p.has(Opt::Keepalive) => {
                // RFC 1122 4.2.3.6, Linux's rules: only when nothing is outstanding.
                if self.snd_una != self.snd_max || self.has_unsent_data() {
                    self.t_idle = now + ms(self.p.ka_idle_ms);
                    return;
                }
                if self.ka_probes >= self.p.ka_count {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.probe = true;
                self.ka_probes += 1;
                self.t_idle = now + ms(self.p.ka_interval_ms);
            }
            _ => {}
        }
    }

    /// Arms the persist timer when data waits, nothing is in flight and no timer runs.
    pub(super) fn arm_persist(&mut self, now: Instant) {
        if self.can_send_data()
            && self.snd_una == self.snd_max
            && self.t_rtx == NEVER
            && self.has_unsent_data()
            && self.snd_wnd_room() < self.eff_mss()
        {
            self.t_rtx = now + self.persist_interval();
        }
    }

    /// The zero-window probe interval.
    fn persist_interval(&self) -> Duration {
        self.rtt.backed_off(self.persist_backoff, self.p.rto_max_us)
    }
}
