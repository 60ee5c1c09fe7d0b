//! Congestion control: how big the congestion window is. Loss *detection* and *recovery*
//! (duplicate ACKs, NewReno partial ACKs, the SACK scoreboard, RACK-TLP, the RTO) live in the
//! connection; an algorithm here only answers "what is cwnd now" as events come in, the way
//! Linux splits `tcp_cong.c` from `tcp_input.c`.
//!
//! Dispatch is static: a connection holds a [`Congestion`] enum and each call is a `match`, no
//! vtable and no allocation per connection. Two algorithms: [`Cubic`] (RFC 9438, the default,
//! as on Linux) and [`NewReno`] (RFC 5681 with RFC 6582's recovery); [`CongestionAlgorithm`]
//! names them in the configuration.

use crate::time::{Duration, Instant, MILLISECOND, SECOND};

/// A congestion-control algorithm. All sizes are bytes; `mss` is the sender's effective MSS.
pub trait CongestionControl {
    /// Sets the initial window (at the end of the handshake) and forgets any history.
    fn init(&mut self, initial_window: u32);
    /// The congestion window.
    fn cwnd(&self) -> u32;
    /// The slow-start threshold.
    fn ssthresh(&self) -> u32;
    /// `acked` new bytes were acknowledged outside loss recovery.
    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32);
    /// Loss was detected by duplicate ACKs or SACK (entering fast recovery) with `flight_size`
    /// bytes outstanding.
    fn on_congestion_event(&mut self, now: Instant, flight_size: u32, mss: u32);
    /// Fast recovery ended with a full ACK; `flight_size` is what is still outstanding.
    fn on_recovery_exit(&mut self, now: Instant, flight_size: u32, mss: u32);
    /// The retransmission timer expired; `first` unless this is a further backoff of the same
    /// loss (RFC 5681: ssthresh is only reduced once).
    fn on_retransmission_timeout(&mut self, now: Instant, flight_size: u32, mss: u32, first: bool);
    /// The connection's smoothed RTT (RFC 6298) after a new sample. Algorithms whose window is
    /// a function of time keep it (CUBIC's W_cubic(t + RTT)); the default ignores it.
    fn on_rtt_update(&mut self, _srtt: Duration) {}
}

/// Slow start below `ssthresh`, counting acknowledged bytes (see [`NewReno`]): grows `cwnd` by
/// what `acked` allows up to ssthresh and returns the rest, for congestion avoidance.
fn slow_start(cwnd: &mut u32, ssthresh: u32, acked: u32) -> u32 {
    if *cwnd >= ssthresh {
        return acked;
    }
    let grow = acked.min(ssthresh - *cwnd);
    *cwnd = cwnd.saturating_add(grow);
    acked - grow
}

/// The window when fast recovery ends: RFC 6582 section 3.2 step 3, option 1 (no burst).
fn window_after_recovery(ssthresh: u32, flight_size: u32, mss: u32) -> u32 {
    ssthresh.min(flight_size.max(mss) + mss)
}

/// RFC 5681 congestion control as RFC 6582 (NewReno) uses it: slow start, congestion avoidance
/// by appropriate byte counting, halving on loss, one segment after an RTO.
///
/// One deliberate difference from RFC 5681 section 3.1, which Linux shares (`tcp_slow_start`
/// counts every acknowledged segment): slow start grows cwnd by all the bytes an ACK
/// acknowledges, up to ssthresh, rather than by at most one SMSS per ACK. Receivers that
/// coalesce ACKs (GRO on Linux, burst processing in pronghorn) would otherwise make slow start
/// grow by one segment per round trip. RFC 3465 discusses the trade-off (its L limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewReno {
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged in congestion avoidance since cwnd last grew.
    acked: u32,
}

impl NewReno {
    /// A window of `initial_window` bytes and no threshold (RFC 5681: "arbitrarily high").
    pub const fn new(initial_window: u32) -> Self {
        NewReno { cwnd: initial_window, ssthresh: u32::MAX, acked: 0 }
    }

    /// RFC 5681 equation (4): half the flight, at least two segments.
    fn reduced(flight_size: u32, mss: u32) -> u32 {
        (flight_size / 2).max(2 * mss)
    }
}

impl Default for NewReno {
    fn default() -> Self {
        NewReno::new(10 * 536)
    }
}

impl CongestionControl for NewReno {
    fn init(&mut self, initial_window: u32) {
        *self = NewReno::new(initial_window);
    }

    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    fn on_ack(&mut self, _now: Instant, acked: u32, mss: u32) {
        let acked = slow_start(&mut self.cwnd, self.ssthresh, acked);
        if acked > 0 {
            // Congestion avoidance: one SMSS per cwnd of acknowledged bytes (RFC 5681 section
            // 3.1, the byte-counting form of equation 3).
            self.acked = self.acked.saturating_add(acked);
            if self.acked >= self.cwnd {
                self.acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }

    fn on_congestion_event(&mut self, _now: Instant, flight_size: u32, mss: u32) {
        self.ssthresh = Self::reduced(flight_size, mss);
        self.cwnd = self.ssthresh;
        self.acked = 0;
    }

    fn on_recovery_exit(&mut self, _now: Instant, flight_size: u32, mss: u32) {
        self.cwnd = window_after_recovery(self.ssthresh, flight_size, mss);
        self.acked = 0;
    }

    fn on_retransmission_timeout(&mut self, _now: Instant, flight_size: u32, mss: u32, first: bool) {
        if first {
            self.ssthresh = Self::reduced(flight_size, mss);
        }
        // The loss window (RFC 5681 section 3.1).
        self.cwnd = mss;
        self.acked = 0;
    }
}

/// RFC 9438's C, in segments per second cubed.
const CUBIC_C: f64 = 0.4;
/// RFC 9438's β_cubic = 7/10: the window after a loss, as a fraction of the flight.
const BETA_NUM: u64 = 7;
const BETA_DEN: u64 = 10;
/// α_cubic = 3 (1 - β_cubic) / (1 + β_cubic) = 9/17 (RFC 9438 section 4.3).
const ALPHA_NUM: u64 = 9;
const ALPHA_DEN: u64 = 17;
/// W_est is kept in 1/1024 bytes, so that its growth of a fraction of a byte per ACK adds up.
const EST_SHIFT: u32 = 10;
/// No congestion-avoidance epoch is running.
const NO_EPOCH: Instant = Instant::MAX;
/// The shortest pause in growth taken for an idle or application-limited period (see
/// [`Cubic`]): RTT jitter on a sub-millisecond path is not one.
const MIN_PAUSE: Duration = MILLISECOND;

/// CUBIC (RFC 9438): after a loss the window follows W_cubic(t) = C (t - K)^3 + W_max, concave
/// up to the window where the loss happened (W_max), convex beyond it, never slower than the
/// Reno estimate W_est (the Reno-friendly region). β_cubic = 0.7, C = 0.4, fast convergence on.
/// Slow start is [`NewReno`]'s (byte counting, see there); HyStart++ (RFC 9406, optional in
/// RFC 9438) is left out, as is the undo of spurious congestion events (section 4.9).
///
/// Where Linux's `tcp_cubic.c` differs from the RFC in ways a user can see, this follows the
/// RFC:
/// - ssthresh after a loss is β_cubic times the flight size (RFC 9438 section 4.6), as this
///   crate's NewReno does, where Linux takes β_cubic times cwnd;
/// - the window one RTT ahead is W_cubic(t + SRTT) (section 4.2); Linux adds its minimum RTT;
/// - α_cubic becomes 1 once W_est reaches the window before the last reduction (section 4.3);
///   Linux keeps 9/17 throughout;
/// - no HyStart: Linux leaves slow start early on a rise in delay (HyStart, on by default);
///   here slow start lasts until the first loss, as on Linux with `hystart=0`.
///
/// Time in t excludes pauses in growth: the connection asks for growth only while the window
/// is in use (RFC 7661), so when no growth is asked for longer than an RTT (idle, or
/// application-limited) the epoch start moves forward by the pause, as Linux does after idle.
///
/// All windows are bytes (segments of `mss` where the RFC counts segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// W_max: the window where the last loss happened, lowered by fast convergence; 0 before
    /// any.
    w_max: u32,
    /// cwnd_prior: the window just before the last reduction.
    cwnd_prior: u32,
    /// Growth toward the target not yet added to cwnd, times cwnd.
    pending: u32,
    /// K, µs: how long after the epoch start W_cubic reaches W_max.
    k_us: u32,
    /// The smoothed RTT, µs.
    srtt_us: u32,
    /// When the current congestion-avoidance epoch began (`NO_EPOCH`: none yet).
    epoch_start: Instant,
    /// When growth was last asked for in congestion avoidance.
    last_ack: Instant,
    /// W_est, in 1/1024 bytes.
    w_est: u64,
    /// The last reduction was a retransmission timeout: the next epoch starts with K = 0 and
    /// W_max = its first window (RFC 9438 section 4.8).
    after_timeout: bool,
}

impl Cubic {
    /// A window of `initial_window` bytes, no threshold and no history.
    pub const fn new(initial_window: u32) -> Self {
        Cubic {
            cwnd: initial_window,
            ssthresh: u32::MAX,
            w_max: 0,
            cwnd_prior: 0,
            pending: 0,
            k_us: 0,
            srtt_us: 0,
            epoch_start: NO_EPOCH,
            last_ack: 0,
            w_est: 0,
            after_timeout: false,
        }
    }

    /// RFC 9438 figure 5: β_cubic times the flight, at least two segments.
    fn reduced(flight_size: u32, mss: u32) -> u32 {
        ((u64::from(flight_size) * BETA_NUM / BETA_DEN) as u32).max(2 * mss)
    }

    /// W_cubic(t) in bytes, `t` after the epoch start (RFC 9438 figure 1).
    fn w_cubic(&self, t: Duration, mss: u32) -> f64 {
        let x = (t as f64 - self.k() as f64) / SECOND as f64;
        f64::from(self.w_max) + CUBIC_C * x * x * x * f64::from(mss)
    }

    /// The first ACK of a congestion-avoidance stage (RFC 9438 sections 4.2, 4.3 and 4.8).
    fn start_epoch(&mut self, now: Instant, mss: u32) {
        self.epoch_start = now;
        self.last_ack = now;
        self.pending = 0;
        self.w_est = u64::from(self.cwnd) << EST_SHIFT;
        if self.after_timeout || self.w_max == 0 {
            self.after_timeout = false;
            self.w_max = self.cwnd;
        }
        // K = cbrt((W_max - cwnd_epoch) / C), in seconds, with windows in segments.
        let below = f64::from(self.w_max.saturating_sub(self.cwnd)) / f64::from(mss.max(1));
        self.k_us = ((below / CUBIC_C).cbrt() * 1e6).min(f64::from(u32::MAX)) as u32;
    }

    fn k(&self) -> Duration {
        Duration::from(self.k_us) * 1000
    }

    fn srtt(&self) -> Duration {
        Duration::from(self.srtt_us) * 1000
    }

    /// Congestion avoidance for `acked` bytes.
    fn avoid_congestion(&mut self, now: Instant, acked: u32, mss: u32) {
        if self.epoch_start == NO_EPOCH {
            self.start_epoch(now, mss);
        } else {
            let pause = now.saturating_sub(self.last_ack);
            if pause > self.srtt().max(MIN_PAUSE) {
                self.epoch_start = self.epoch_start.saturating_add(pause).min(now);
            }
            self.last_ack = now;
        }
        let cwnd = u64::from(self.cwnd.max(1));
        // The Reno-friendly estimate (section 4.3): α_cubic segments per window acknowledged,
        // 1 once it has grown back to the window before the reduction.
        let (num, den) =
            if self.w_est >> EST_SHIFT >= u64::from(self.cwnd_prior) { (1, 1) } else { (ALPHA_NUM, ALPHA_DEN) };
        self.w_est += ((num * u64::from(mss) * u64::from(acked)) << EST_SHIFT) / (den * cwnd);
        let w_est = (self.w_est >> EST_SHIFT).min(u64::from(u32::MAX)) as u32;
        let t = now.saturating_sub(self.epoch_start);
        if self.w_cubic(t, mss) < f64::from(w_est) {
            // The Reno-friendly region.
            self.cwnd = self.cwnd.max(w_est);
            self.pending = 0;
            return;
        }
        // The concave and convex regions (section 4.2): toward W_cubic one RTT ahead, by
        // (target - cwnd) / cwnd per segment acknowledged, the target kept within
        // [cwnd, 1.5 cwnd].
        let target = self.w_cubic(t + self.srtt(), mss).clamp(cwnd as f64, 1.5 * cwnd as f64) as u64;
        let pending = u64::from(self.pending) + (target - cwnd) * u64::from(acked);
        self.pending = (pending % cwnd) as u32;
        self.cwnd = self.cwnd.saturating_add((pending / cwnd).min(u64::from(u32::MAX)) as u32);
    }

    /// W_max now (fast convergence lowers it), for tests.
    #[cfg(test)]
    pub(crate) fn w_max(&self) -> u32 {
        self.w_max
    }
}

impl Default for Cubic {
    fn default() -> Self {
        Cubic::new(10 * 536)
    }
}

impl CongestionControl for Cubic {
    fn init(&mut self, initial_window: u32) {
        *self = Cubic { srtt_us: self.srtt_us, ..Cubic::new(initial_window) };
    }

    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32) {
        let acked = slow_start(&mut self.cwnd, self.ssthresh, acked);
        if acked > 0 {
            self.avoid_congestion(now, acked, mss);
        }
    }

    fn on_congestion_event(&mut self, _now: Instant, flight_size: u32, mss: u32) {
        // Fast convergence (section 4.7): a loss below the last W_max means another flow took
        // bandwidth; give some up.
        self.w_max = if self.w_max != 0 && self.cwnd < self.w_max {
            (u64::from(self.cwnd) * (BETA_DEN + BETA_NUM) / (2 * BETA_DEN)) as u32
        } else {
            self.cwnd
        };
        self.cwnd_prior = self.cwnd;
        self.ssthresh = Self::reduced(flight_size, mss);
        self.cwnd = self.ssthresh;
        self.epoch_start = NO_EPOCH;
        self.after_timeout = false;
    }

    fn on_recovery_exit(&mut self, _now: Instant, flight_size: u32, mss: u32) {
        self.cwnd = window_after_recovery(self.ssthresh, flight_size, mss);
    }

    fn on_retransmission_timeout(&mut self, _now: Instant, flight_size: u32, mss: u32, first: bool) {
        // Section 4.8: Reno's loss window, ssthresh with β_cubic.
        if first {
            self.cwnd_prior = self.cwnd;
            self.ssthresh = Self::reduced(flight_size, mss);
        }
        self.cwnd = mss;
        self.epoch_start = NO_EPOCH;
        self.after_timeout = true;
    }

    fn on_rtt_update(&mut self, srtt: Duration) {
        self.srtt_us = (srtt / 1000).min(u64::from(u32::MAX)) as u32;
    }
}

/// The algorithms a connection can use (`[tcp] congestion` in the config file; Linux's
/// `net.ipv4.tcp_congestion_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CongestionAlgorithm {
    /// RFC 9438, Linux's default.
    #[default]
    Cubic,
    /// RFC 5681 + RFC 6582.
    NewReno,
}

/// The algorithm of one connection: an enum so that dispatch is a `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Congestion {
    /// RFC 9438.
    Cubic(Cubic),
    /// RFC 5681 + RFC 6582.
    NewReno(NewReno),
}

impl Congestion {
    /// A fresh instance of `algorithm` (its window is set by [`CongestionControl::init`]).
    pub fn new(algorithm: CongestionAlgorithm) -> Self {
        match algorithm {
            CongestionAlgorithm::Cubic => Congestion::Cubic(Cubic::default()),
            CongestionAlgorithm::NewReno => Congestion::NewReno(NewReno::default()),
        }
    }
}

impl Default for Congestion {
    fn default() -> Self {
        Congestion::new(CongestionAlgorithm::default())
    }
}

/// `$cc.$call` on whichever algorithm the enum holds.
macro_rules! dispatch {
    ($self:ident, $cc:ident => $call:expr) => {
        match $self {
            Congestion::Cubic($cc) => $call,
            Congestion::NewReno($cc) => $call,
        }
    };
}

impl CongestionControl for Congestion {
    fn init(&mut self, initial_window: u32) {
        dispatch!(self, cc => cc.init(initial_window))
    }

    fn cwnd(&self) -> u32 {
        dispatch!(self, cc => cc.cwnd())
    }

    fn ssthresh(&self) -> u32 {
        dispatch!(self, cc => cc.ssthresh())
    }

    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32) {
        dispatch!(self, cc => cc.on_ack(now, acked, mss))
    }

    fn on_congestion_event(&mut self, now: Instant, flight_size: u32, mss: u32) {
        dispatch!(self, cc => cc.on_congestion_event(now, flight_size, mss))
    }

    fn on_recovery_exit(&mut self, now: Instant, flight_size: u32, mss: u32) {
        dispatch!(self, cc => cc.on_recovery_exit(now, flight_size, mss))
    }

    fn on_retransmission_timeout(&mut self, now: Instant, flight_size: u32, mss: u32, first: bool) {
        dispatch!(self, cc => cc.on_retransmission_timeout(now, flight_size, mss, first))
    }

    fn on_rtt_update(&mut self, srtt: Duration) {
        dispatch!(self, cc => cc.on_rtt_update(srtt))
    }
}
