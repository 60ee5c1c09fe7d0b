//! The RTT estimator and the RTO (RFC 6298): [`RttEstimator`] owns SRTT, RTTVAR, the RTO and
//! its backoff, the one segment timed when there are no timestamps, and Karn's rule for
//! timestamps; the connection's methods here take samples from ACKs (RFC 7323 section 4) and
//! hand them to RACK and congestion control too. It must not arm timers or decide what to send:
//! it only says how long the RTO is.

use wire::TcpRepr;

use crate::congestion::CongestionControl;
use crate::seq;
use crate::time::{Duration, Instant, MILLISECOND};

use super::params::us;
use super::Connection;

/// RFC 6298's G, the clock granularity term of the RTO, in microseconds.
const CLOCK_GRANULARITY_US: u64 = 1000;

/// RFC 6298 section 5.7: the RTO once data flows if the SYN had to be retransmitted.
const RTO_AFTER_SYN_LOSS_US: u32 = 3_000_000;

/// RFC 6298's state, in µs.
#[derive(Debug, Clone, Copy)]
pub(super) struct RttEstimator {
    /// SRTT (0 before the first sample).
    srtt_us: u32,
    /// RTTVAR.
    rttvar_us: u32,
    /// The RTO before backoff, within the configured bounds.
    rto_us: u32,
    /// Without timestamps: the end of the one segment being timed and when it was sent, while
    /// `timing`.
    timed_end: u32,
    timed_at: Instant,
    /// Our TSval when we last retransmitted (see `ts_rtx_pending`).
    ts_rtx: u32,
    /// RTO backoff exponent: consecutive timeouts (also the SYN's retries).
    pub(super) backoff: u8,
    has_sample: bool,
    timing: bool,
    /// A retransmission happened: echoes older than `ts_rtx` are no RTT samples.
    ts_rtx_pending: bool,
}

impl RttEstimator {
    /// No sample yet; the RTO is `rto_us` (the initial RTO, within the bounds).
    pub(super) fn new(rto_us: u32) -> Self {
        RttEstimator {
            srtt_us: 0,
            rttvar_us: 0,
            rto_us,
            timed_end: 0,
            timed_at: 0,
            ts_rtx: 0,
            backoff: 0,
            has_sample: false,
            timing: false,
            ts_rtx_pending: false,
        }
    }

    pub(super) fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// SRTT (0 before the first sample).
    pub(super) fn srtt(&self) -> Duration {
        us(self.srtt_us)
    }

    pub(super) fn rttvar(&self) -> Duration {
        us(self.rttvar_us)
    }

    /// The RTO doubled `shift` times, at most `rto_max_us`.
    pub(super) fn backed_off(&self, shift: u8, rto_max_us: u32) -> Duration {
        let rto = u64::from(self.rto_us) << shift.min(32);
        us(rto.min(u64::from(rto_max_us)) as u32)
    }

    /// RFC 6298 section 2: takes a sample `r` in.
    fn sample(&mut self, r: Duration, rto_min_us: u32, rto_max_us: u32) {
        let r = (r / 1000).min(u64::from(u32::MAX)) as u32;
        if self.has_sample {
            let delta = self.srtt_us.abs_diff(r);
            self.rttvar_us = ((3 * u64::from(self.rttvar_us) + u64::from(delta)) / 4) as u32;
            self.srtt_us = ((7 * u64::from(self.srtt_us) + u64::from(r)) / 8) as u32;
        } else {
            self.srtt_us = r;
            self.rttvar_us = r / 2;
            self.has_sample = true;
        }
        let rto = u64::from(self.srtt_us) + CLOCK_GRANULARITY_US.max(4 * u64::from(self.rttvar_us));
        self.rto_us = rto.clamp(u64::from(rto_min_us), u64::from(rto_max_us)) as u32;
    }

    /// RFC 6298 section 5.7: the SYN was retransmitted and no sample came since.
    pub(super) fn after_syn_loss(&mut self, rto_max_us: u32) {
        if !self.has_sample {
            self.rto_us = self.rto_us.max(RTO_AFTER_SYN_LOSS_US).min(rto_max_us);
        }
    }

    /// Whether a segment is being timed.
    pub(super) fn timing(&self) -> bool {
        self.timing
    }

    /// Times the segment ending at `end`, sent at `now`.
    pub(super) fn start_timing(&mut self, end: u32, now: Instant) {
        self.timing = true;
        self.timed_end = end;
        self.timed_at = now;
    }

    /// Forgets the timed segment: it was sent again, or recovery makes its ACK ambiguous.
    pub(super) fn stop_timing(&mut self) {
        self.timing = false;
    }

    /// The timed segment's RTT if `ack` covers it (the timing stops).
    fn timed_sample(&mut self, ack: u32, now: Instant) -> Option<Duration> {
        if self.timing && seq::ge(ack, self.timed_end) {
            self.timing = false;
            return Some(now.saturating_sub(self.timed_at));
        }
        None
    }

    /// The RTT an echoed timestamp `tsecr` measures at our timestamp clock `ts_now`, unless
    /// Karn's rule rejects it (see [`Connection::rtt_on_ack`]).
    fn echo_sample(&mut self, tsecr: u32, ts_now: u32) -> Option<Duration> {
        if self.ts_rtx_pending && seq::lt(tsecr, self.ts_rtx) {
            return None;
        }
        if tsecr == 0 {
            return None;
        }
        self.ts_rtx_pending = false;
        let d = ts_now.wrapping_sub(tsecr);
        ((d as i32) >= 0).then(|| u64::from(d) * MILLISECOND)
    }

    /// Karn's rule: a retransmission at our timestamp clock `ts_now` makes the timed segment
    /// and older echoes ambiguous.
    fn retransmitted(&mut self, ts_now: u32) {
        self.timing = false;
        self.ts_rtx = ts_now;
        self.ts_rtx_pending = true;
    }
}

impl Connection {
    /// The RTO with backoff.
    pub(super) fn rto(&self) -> Duration {
        self.rtt.backed_off(self.rtt.backoff, self.p.rto_max_us)
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
        let sample = if self.agreed.timestamps() {
            let ts_now = self.ts.clock(now);
            let echo = seg.timestamp.and_then(|(_, tsecr)| self.rtt.echo_sample(tsecr, ts_now));
            sent_once_at.map(|t| now.saturating_sub(t)).or(echo)
        } else {
            self.rtt.timed_sample(ack, now)
        };
        if let Some(r) = sample {
            self.loss.rack.rtt_sample(r);
            self.rtt.sample(r, self.p.rto_min_us, self.p.rto_max_us);
            self.cc.on_rtt_update(self.rtt.srtt());
        }
    }

    /// Karn's rule: no RTT sample from what this retransmission makes ambiguous.
    pub(super) fn retransmitted(&mut self, now: Instant) {
        let ts_now = self.ts.clock(now);
        self.rtt.retransmitted(ts_now);
    }
}
