//! Explicit Congestion Notification (RFC 3168) on an established connection: what an ECE does
//! to the congestion window and when CWR goes out. Negotiation happens with the handshake
//! (`input`, `output`); marking segments ECN-capable is `output`'s.

use super::*;

impl Connection {
    /// RFC 3168 section 6.1.2 for an ACK of an ECN connection: an ECE is treated as a loss by
    /// the congestion controller, once per window of data (not again until an ACK goes beyond
    /// what was sent when the window was last reduced, as Linux's CWR state) and not during
    /// loss recovery, which reduced the window already. `flight` is what was outstanding when
    /// the ACK came.
    pub(super) fn on_ecn_ack(&mut self, now: Instant, seg: &TcpRepr, flight: u32) {
        if self.ecn_reducing && seq::gt(self.snd.una, self.ecn_reduced_at) {
            self.ecn_reducing = false;
        }
        if seg.flags.contains(TcpFlags::ECE) && !self.ecn_reducing && self.loss.mode == Recovery::None {
            self.cc.on_congestion_event(now, flight, self.eff_mss());
            self.ecn_window_reduced();
        }
    }

    /// The window was reduced for ECE or by an RTO: on an ECN connection the next new data
    /// carries CWR, so that the peer stops echoing congestion it told us about (RFC 3168
    /// section 6.1.2; Linux sets it after every reduction), and ECE for data sent before is
    /// not acted on (Linux's CWR and Loss states).
    pub(super) fn ecn_window_reduced(&mut self) {
        if self.ecn_ok {
            self.ecn_cwr_pending = true;
            self.ecn_reducing = true;
            self.ecn_reduced_at = self.snd.max;
        }
    }
}
