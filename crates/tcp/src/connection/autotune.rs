//! Buffer autotuning, as Linux's. The receive buffer grows towards twice what the application
//! read in the last round trip, plus what a sender speeding up needs (`tcp_rcv_space_adjust`,
//! dynamic right-sizing), the round trip measured by the receiver as the time one window of
//! data takes to arrive (`tcp_rcv_rtt_measure`); the send buffer grows towards twice the
//! congestion window (`tcp_sndbuf_expand`) while the window is not full. Each grows up to its
//! maximum (`tcp_rmem[2]`, `tcp_wmem[2]`: [`crate::Config::rcv_buf_max`],
//! [`crate::Config::snd_buf_max`]), never under the stack's memory pressure, never shrinks, and
//! never once the application set the size (SO_RCVBUF/SO_SNDBUF set the maximum to the size:
//! Linux's SOCK_RCVBUF_LOCK/SOCK_SNDBUF_LOCK). It owns only the measurements; the buffers are
//! the connection's.

use crate::congestion::CongestionControl;
use crate::seq;
use crate::time::Instant;

use super::{Connection, Flag};

/// Linux's `TCP_INIT_CWND`: the first measurement's baseline is at most this many segments.
const INIT_SEGMENTS: u32 = 10;

/// The receiver's measurements (Linux's `rcvq_space` and `rcv_rtt_est`).
#[derive(Debug, Default)]
pub(super) struct Autotune {
    /// What the application read in the last measured round trip (`rcvq_space.space`).
    space: u32,
    /// Where the application was reading when this measurement began, and when (µs, wrapping:
    /// 4 bytes where an `Instant` takes 8, and a round trip is far shorter than 71 minutes).
    space_seq: u32,
    space_time: u32,
    /// The receiver's round-trip estimate in µs, the smallest measured; 0 before the first.
    rtt_us: u32,
    /// The measurement of the round trip ends when RCV.NXT reaches this (a window beyond where
    /// it began).
    rtt_seq: u32,
    rtt_time: u32,
}

/// `now` in µs, wrapping (see [`Autotune::space_time`]).
fn micros(now: Instant) -> u32 {
    (now / 1000) as u32
}

impl Connection {
    /// At establishment: the measurements begin (Linux's `tcp_init_buffer_space`).
    pub(super) fn autotune_start(&mut self, now: Instant) {
        let initial = self.rcv.wnd().min(INIT_SEGMENTS * u32::from(self.p.mss));
        self.tune = Autotune {
            space: initial.max(1),
            space_seq: self.rcv.read_seq(),
            space_time: micros(now),
            rtt_us: 0,
            rtt_seq: self.rcv.nxt.wrapping_add(self.rcv.wnd()),
            rtt_time: micros(now),
        };
    }

    /// In-order data arrived: a round trip may be measured, and the receive buffer grown.
    pub(super) fn autotune_receive(&mut self, now: Instant) {
        let now = micros(now);
        if seq::ge(self.rcv.nxt, self.tune.rtt_seq) {
            let sample = now.wrapping_sub(self.tune.rtt_time).max(1);
            self.tune.rtt_us = if self.tune.rtt_us == 0 { sample } else { self.tune.rtt_us.min(sample) };
            self.tune.rtt_seq = self.rcv.nxt.wrapping_add(self.rcv.wnd());
            self.tune.rtt_time = now;
        }
        if self.tune.rtt_us == 0 || now.wrapping_sub(self.tune.space_time) < self.tune.rtt_us {
            return;
        }
        let read_seq = self.rcv.read_seq();
        let copied = read_seq.wrapping_sub(self.tune.space_seq);
        if copied > self.tune.space {
            let (copied, space, mss) = (u64::from(copied), u64::from(self.tune.space), u64::from(self.p.mss));
            let mut rcvwin = 2 * copied + 16 * mss;
            let grow = rcvwin * (copied - space) / space.max(1);
            rcvwin += 2 * grow;
            let target = rcvwin.min(u64::from(self.p.rcv_buf_max)) as u32;
            if target > self.p.rcv_buf && !self.flags.has(Flag::MemoryPressure) {
                self.p.rcv_buf = target;
                self.grow_rx_ring();
            }
            self.tune.space = copied as u32;
        }
        self.tune.space_seq = read_seq;
        self.tune.space_time = now;
    }

    /// New data was acknowledged: the send buffer grows towards twice the congestion window
    /// while the window is not full (Linux's `tcp_should_expand_sndbuf`).
    pub(super) fn autotune_send(&mut self) {
        if self.p.snd_buf >= self.p.snd_buf_max || self.flags.has(Flag::MemoryPressure) {
            return;
        }
        let cwnd = self.cc.cwnd();
        if self.loss.pipe() >= cwnd {
            return;
        }
        let segments = (cwnd / self.eff_mss().max(1)).max(INIT_SEGMENTS);
        let target = 2u64 * u64::from(segments) * u64::from(self.eff_mss());
        let target = target.min(u64::from(self.p.snd_buf_max)) as u32;
        if target > self.p.snd_buf {
            self.p.snd_buf = target;
            self.grow_tx_ring();
        }
    }

    /// The receive ring, if allocated, to the buffer's size.
    pub(super) fn grow_rx_ring(&mut self) {
        let cap = self.rx_cap();
        if self.rcv.buf.is_allocated() && self.rcv.buf.capacity() < cap {
            self.rcv.buf.grow(cap);
        }
    }

    /// The send ring, if allocated, to at least the buffer's size. The buffer grows a segment
    /// or two per ACK, but the ring is moved and copied whole to grow: it at least doubles
    /// each time (to at most the maximum), so that reaching the maximum takes a few moves, not
    /// one per ACK. The buffer's size, not the ring's, limits what the application may write.
    pub(super) fn grow_tx_ring(&mut self) {
        let cap = self.p.snd_buf as usize;
        let ring = self.snd.buf.capacity();
        if self.snd.buf.is_allocated() && ring < cap {
            self.snd.buf.grow(cap.max((2 * ring).min(self.p.snd_buf_max as usize)));
        }
    }
}
