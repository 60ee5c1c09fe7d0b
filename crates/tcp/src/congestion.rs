//! Congestion control: how big the congestion window is. Loss *detection* and *recovery*
//! (duplicate ACKs, NewReno partial ACKs, the SACK scoreboard, the RTO) live in the connection;
//! an algorithm here only answers "what is cwnd now" as events come in, the way Linux splits
//! `tcp_cong.c` from `tcp_input.c`.
//!
//! Dispatch is static: a connection holds a [`Congestion`] enum and each call is a `match`, no
//! vtable and no allocation per connection. Adding CUBIC (RFC 9438) means a new variant.

use crate::Instant;

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
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            // Slow start, counting acknowledged bytes (see the type's documentation).
            let grow = acked.min(self.ssthresh - self.cwnd);
            self.cwnd = self.cwnd.saturating_add(grow);
            acked -= grow;
        }
        if acked > 0 && self.cwnd >= self.ssthresh {
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
        // RFC 6582 section 3.2 step 3, option 1: no burst on leaving recovery.
        self.cwnd = self.ssthresh.min(flight_size.max(mss) + mss);
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

/// The algorithm of one connection: an enum so that dispatch is a `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Congestion {
    /// RFC 5681 + RFC 6582.
    NewReno(NewReno),
}

impl Default for Congestion {
    fn default() -> Self {
        Congestion::NewReno(NewReno::default())
    }
}

impl CongestionControl for Congestion {
    fn init(&mut self, initial_window: u32) {
        match self {
            Congestion::NewReno(cc) => cc.init(initial_window),
        }
    }

    fn cwnd(&self) -> u32 {
        match self {
            Congestion::NewReno(cc) => cc.cwnd(),
        }
    }

    fn ssthresh(&self) -> u32 {
        match self {
            Congestion::NewReno(cc) => cc.ssthresh(),
        }
    }

    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32) {
        match self {
            Congestion::NewReno(cc) => cc.on_ack(now, acked, mss),
        }
    }

    fn on_congestion_event(&mut self, now: Instant, flight_size: u32, mss: u32) {
        match self {
            Congestion::NewReno(cc) => cc.on_congestion_event(now, flight_size, mss),
        }
    }

    fn on_recovery_exit(&mut self, now: Instant, flight_size: u32, mss: u32) {
        match self {
            Congestion::NewReno(cc) => cc.on_recovery_exit(now, flight_size, mss),
        }
    }

    fn on_retransmission_timeout(&mut self, now: Instant, flight_size: u32, mss: u32, first: bool) {
        match self {
            Congestion::NewReno(cc) => cc.on_retransmission_timeout(now, flight_size, mss, first),
        }
    }
}
