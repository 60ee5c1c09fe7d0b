//! TCP options and what they leave behind: [`Agreed`] holds what the handshake agreed (the MSS
//! the peer announced and the one the path allows, both window-scale shifts, whether window
//! scaling, SACK and timestamps are on); [`Timestamps`] holds RFC 7323's TS.Recent with its age
//! and our clock's offset. The connection's methods here take the options of a SYN or of a SYN
//! cookie and say how much payload a segment may carry. It must not build segments: `output`
//! reads what was agreed.

use wire::TcpRepr;

use crate::seq;
use crate::time::{Duration, Instant, MILLISECOND, SECOND};

use super::bits::{Bit, Bits};
use super::params::Opt;
use super::{Connection, CookieOptions};

/// RFC 9293 section 3.7.1: the send MSS when the peer announces none (IPv4's 576 - 40).
pub(super) const DEFAULT_MSS: u16 = 536;

/// RFC 7323 section 5.5: a TS.Recent idle for longer than this is too old for PAWS.
const PAWS_IDLE: Duration = 24 * 24 * 3600 * SECOND;

/// An option both sides agreed to use.
#[derive(Debug, Clone, Copy)]
pub(super) enum Feature {
    /// Window scaling (RFC 7323 section 2).
    WindowScale,
    /// SACK (RFC 2018).
    Sack,
    /// Timestamps (RFC 7323 section 3).
    Timestamps,
}

impl Bit for Feature {
    fn index(self) -> u8 {
        self as u8
    }
}

/// What the handshake agreed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Agreed {
    /// The MSS the peer announced.
    pub(super) peer_mss: u16,
    /// The payload a segment may carry on this path, from ICMP "fragmentation needed" / "packet
    /// too big" (RFC 1191, 8201); `u16::MAX` until the path says otherwise.
    pub(super) path_mss: u16,
    /// The peer's window-scale shift (0 without window scaling).
    pub(super) snd_wscale: u8,
    /// Ours (0 without window scaling).
    pub(super) rcv_wscale: u8,
    features: Bits<Feature>,
}

impl Agreed {
    /// Before the handshake: the default MSS, our shift `rcv_wscale` as offered, nothing on.
    pub(super) fn new(rcv_wscale: u8) -> Self {
        Agreed { peer_mss: DEFAULT_MSS, path_mss: u16::MAX, snd_wscale: 0, rcv_wscale, features: Bits::default() }
    }

    pub(super) fn window_scale(&self) -> bool {
        self.features.has(Feature::WindowScale)
    }

    pub(super) fn sack(&self) -> bool {
        self.features.has(Feature::Sack)
    }

    pub(super) fn timestamps(&self) -> bool {
        self.features.has(Feature::Timestamps)
    }
}

/// RFC 7323's timestamp state.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timestamps {
    /// When TS.Recent was taken (PAWS forgets a TS.Recent idle for 24 days).
    pub(super) recent_time: Instant,
    /// TS.Recent: the peer's timestamp we echo.
    pub(super) recent: u32,
    /// Our clock's offset, chosen by the caller (RFC 7323 section 5.4).
    pub(super) offset: u32,
}

impl Timestamps {
    /// Our timestamp clock at `t`: milliseconds plus the connection's offset.
    pub(super) fn clock(&self, t: Instant) -> u32 {
        ((t / MILLISECOND) as u32).wrapping_add(self.offset)
    }

    /// RFC 7323 section 5.3 R1 (PAWS): a segment with `tsval` older than TS.Recent is a
    /// duplicate from an earlier incarnation of the sequence space, unless TS.Recent is too old.
    pub(super) fn paws_rejects(&self, tsval: u32, now: Instant) -> bool {
        seq::lt(tsval, self.recent) && now.saturating_sub(self.recent_time) <= PAWS_IDLE
    }

    /// RFC 7323 section 4.3 (and 5.3 R3) for an acceptable segment at `seg_seq`: its `tsval`
    /// becomes TS.Recent if it is not older and the segment starts at or before what we last
    /// acknowledged (`last_ack_sent`).
    pub(super) fn update_recent(&mut self, tsval: u32, seg_seq: u32, last_ack_sent: u32, now: Instant) {
        if seq::ge(tsval, self.recent) && seq::le(seg_seq, last_ack_sent) {
            self.recent = tsval;
            self.recent_time = now;
        }
    }
}

/// The options a SYN offers, in the form a SYN cookie keeps them.
pub(super) fn offered_in(syn: &TcpRepr) -> CookieOptions {
    CookieOptions {
        mss: syn.max_seg_size.unwrap_or(0),
        window_scale: syn.window_scale,
        sack_permitted: syn.sack_permitted,
        timestamps: syn.timestamp.is_some(),
    }
}

/// The smallest shift that lets a 16-bit window field cover `buf` (RFC 7323: at most 14).
pub(super) fn window_shift_for(buf: u32) -> u8 {
    let mut shift = 0;
    while shift < 14 && (buf >> shift) > 0xffff {
        shift += 1;
    }
    shift
}

impl Connection {
    /// Agrees to what the peer `offered` where we offer it too (an MSS of 0 is none); `tsval` is
    /// the timestamp of the peer's segment that carried them, which starts TS.Recent.
    pub(super) fn agree(&mut self, now: Instant, offered: CookieOptions, tsval: Option<u32>) {
        self.agreed.peer_mss = if offered.mss == 0 { DEFAULT_MSS } else { offered.mss };
        let ws = self.p.has(Opt::OfferWindowScale) && offered.window_scale.is_some();
        self.agreed.features.set(Feature::WindowScale, ws);
        if ws {
            self.agreed.snd_wscale = offered.window_scale.unwrap_or(0).min(14);
        } else {
            self.agreed.snd_wscale = 0;
            self.agreed.rcv_wscale = 0;
        }
        let sack = self.p.has(Opt::OfferSack) && offered.sack_permitted;
        self.agreed.features.set(Feature::Sack, sack);
        match (self.p.has(Opt::OfferTimestamps) && offered.timestamps, tsval) {
            (true, Some(tsval)) => {
                self.agreed.features.set(Feature::Timestamps, true);
                self.ts.recent = tsval;
                self.ts.recent_time = now;
            }
            _ => self.agreed.features.set(Feature::Timestamps, false),
        }
    }

    /// Takes the options of the peer's SYN.
    pub(super) fn negotiate(&mut self, now: Instant, syn: &TcpRepr) {
        self.agree(now, offered_in(syn), syn.timestamp.map(|(tsval, _)| tsval));
    }

    /// The largest payload without options: the peer's MSS, ours, and the path's.
    pub(super) fn mss_cap(&self) -> u16 {
        self.agreed.peer_mss.min(self.p.mss).min(self.agreed.path_mss)
    }

    /// The largest payload of a segment without SACK blocks (RFC 9293 3.7.1 Eff.snd.MSS: the
    /// timestamp option takes 12 bytes of it).
    pub(super) fn eff_mss(&self) -> u32 {
        let base = u32::from(self.mss_cap());
        let opts = if self.agreed.timestamps() { 12 } else { 0 };
        base.saturating_sub(opts).max(1)
    }
}
