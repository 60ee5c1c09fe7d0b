//! The RTT estimator and the RTO (RFC 6298): samples from timestamps (RFC 7323 section 4) or
//! from one timed segment, Karn's rule after a retransmission, and the backed-off RTO.

use super::*;

/// RFC 6298's G, the clock granularity term of the RTO, in microseconds.
const CLOCK_GRANULARITY_US: u64 = 1000;

/// RFC 6298 section 5.7: the RTO once data flows if the SYN had to be retransmitted.
pub(super) const RTO_AFTER_SYN_LOSS_US: u32 = 3_000_000;

impl Connection {
    /// The RTO with backoff.
    pub(super) fn rto(&self) -> Duration {
        let rto = u64::from(self.rto_us) << self.backoff.min(32);
        us(rto.min(u64::from(self.p.rto_max_us)) as u32)
    }

    /// An RTT sample from this ACK: from the echoed timestamp if timestamps are on (RFC 7323
    /// section 4), else from the one timed segment if it was not retransmitted (Karn's rule).
    ///
    /// Karn's rule applies to timestamps too, in one case: when the original of a
    /// retransmitted segment had arrived and only its ACK was lost, the peer answers the
    /// retransmission (a duplicate to it) echoing the original's TSval, and the sample would
    /// measure the RTO wait. So after a retransmission, echoes older than it are ignored until
    /// a newer one comes.
    ///
    /// With timestamps, the send time of the acknowledged data at SND.UNA (`sent_once_at`: it
    /// was sent once) measures the same as the echo, to the nanosecond rather than to our
    /// timestamp clock's millisecond, in which a sub-millisecond RTT reads 0. Linux too prefers
    /// its own send times to the echo.
    pub(super) fn rtt_on_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32, sent_once_at: Option<Instant>) {
        let sample = if self.ts_ok {
            let echo = match seg.timestamp {
                Some((_, tsecr)) if self.ts_rtx_pending && seq::lt(tsecr, self.ts_rtx) => None,
                Some((_, tsecr)) if tsecr != 0 => {
                    self.ts_rtx_pending = false;
                    let d = self.ts_now(now).wrapping_sub(tsecr);
                    ((d as i32) >= 0).then(|| u64::from(d) * MILLISECOND)
                }
                _ => None,
            };
            sent_once_at.map(|t| now.saturating_sub(t)).or(echo)
        } else if self.rtt_timing && seq::ge(ack, self.rtt_seq) {
            self.rtt_timing = false;
            Some(now.saturating_sub(self.rtt_start))
        } else {
            None
        };
        if let Some(r) = sample {
            self.rtt_sample(r);
        }
    }

    /// RFC 6298 section 2.
    fn rtt_sample(&mut self, r: Duration) {
        self.rack.rtt_sample(r);
        let r = (r / 1000).min(u64::from(u32::MAX)) as u32;
        if self.have_rtt {
            let delta = self.srtt_us.abs_diff(r);
            self.rttvar_us = ((3 * u64::from(self.rttvar_us) + u64::from(delta)) / 4) as u32;
            self.srtt_us = ((7 * u64::from(self.srtt_us) + u64::from(r)) / 8) as u32;
        } else {
            self.srtt_us = r;
            self.rttvar_us = r / 2;
            self.have_rtt = true;
        }
        let rto = u64::from(self.srtt_us) + CLOCK_GRANULARITY_US.max(4 * u64::from(self.rttvar_us));
        self.rto_us = rto.clamp(u64::from(self.p.rto_min_us), u64::from(self.p.rto_max_us)) as u32;
        self.cc.on_rtt_update(us(self.srtt_us));
    }

    /// Karn's rule: no RTT sample from what this retransmission makes ambiguous.
    pub(super) fn retransmitted(&mut self, now: Instant) {
        self.rtt_timing = false;
        self.ts_rtx = self.ts_now(now);
        self.ts_rtx_pending = true;
    }
}
