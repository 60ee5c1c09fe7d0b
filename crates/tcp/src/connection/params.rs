//! The configuration a connection keeps, compact (durations in µs or ms, 32-bit), and the unit
//! conversions to and from [`Duration`]. Set at creation from [`Config`] and by the
//! socket options; nothing else writes it.

use crate::config::{Config, Ecn, Keepalive};
use crate::time::{Duration, MILLISECOND};

use super::bits::{Bit, Bits};

/// The configuration's switches.
#[derive(Debug, Clone, Copy)]
pub(super) enum Opt {
    /// SO_KEEPALIVE.
    Keepalive,
    /// TCP_NODELAY: no Nagle.
    Nodelay,
    /// Window scaling (RFC 7323) offered in our SYN and accepted in a SYN-ACK.
    OfferWindowScale,
    /// SACK (RFC 2018) offered and accepted.
    OfferSack,
    /// Timestamps (RFC 7323) offered and accepted.
    OfferTimestamps,
    /// RACK-TLP (RFC 8985) where SACK is on.
    RackTlp,
    /// SO_OOBINLINE: the urgent byte stays in the stream.
    OobInline,
    /// TCP segmentation offload: new data in segments of several MSS.
    Tso,
}

impl Bit for Opt {
    fn index(self) -> u8 {
        self as u8
    }
}

/// The configuration kept by a connection, compact: durations in µs or ms.
#[derive(Debug, Clone, Copy)]
pub(super) struct Params {
    pub(super) rcv_buf: u32,
    pub(super) snd_buf: u32,
    /// What autotuning may grow the buffers to (the size itself once the application set it).
    pub(super) rcv_buf_max: u32,
    pub(super) snd_buf_max: u32,
    pub(super) initial_cwnd: u32,
    pub(super) delayed_ack_us: u32,
    pub(super) rto_min_us: u32,
    pub(super) rto_max_us: u32,
    pub(super) time_wait_ms: u32,
    pub(super) fin_wait2_ms: u32,
    pub(super) ka_idle_ms: u32,
    pub(super) ka_interval_ms: u32,
    pub(super) invalid_ratelimit_ms: u32,
    pub(super) mss: u16,
    pub(super) ka_count: u8,
    pub(super) syn_retries: u8,
    pub(super) synack_retries: u8,
    pub(super) retries2: u8,
    pub(super) orphan_retries: u8,
    pub(super) ecn: Ecn,
    pub(super) opts: Bits<Opt>,
    /// SO_RCVLOWAT: bytes that make the connection readable (at least 1).
    pub(super) rcvlowat: u32,
}

pub(super) fn to_us(d: Duration) -> u32 {
    (d / 1000).min(u64::from(u32::MAX)) as u32
}

fn to_ms(d: Duration) -> u32 {
    (d / MILLISECOND).min(u64::from(u32::MAX)) as u32
}

pub(super) fn ms(v: u32) -> Duration {
    u64::from(v) * MILLISECOND
}

pub(super) fn us(v: u32) -> Duration {
    u64::from(v) * 1000
}

impl Params {
    pub(super) fn new(cfg: &Config) -> Self {
        let ka = cfg.keepalive.unwrap_or_default();
        let mut opts = Bits::default();
        opts.set(Opt::Keepalive, cfg.keepalive.is_some());
        opts.set(Opt::Nodelay, cfg.nodelay);
        opts.set(Opt::OfferWindowScale, cfg.window_scale);
        opts.set(Opt::OfferSack, cfg.sack);
        opts.set(Opt::OfferTimestamps, cfg.timestamps);
        opts.set(Opt::RackTlp, cfg.rack_tlp);
        opts.set(Opt::Tso, cfg.tso);
        Params {
            rcv_buf: cfg.rcv_buf.max(1),
            snd_buf: cfg.snd_buf.max(1),
            rcv_buf_max: cfg.rcv_buf_max.max(cfg.rcv_buf).max(1),
            snd_buf_max: cfg.snd_buf_max.max(cfg.snd_buf).max(1),
            initial_cwnd: cfg.initial_cwnd.max(1),
            delayed_ack_us: to_us(cfg.delayed_ack),
            rto_min_us: to_us(cfg.rto_min).max(1),
            rto_max_us: to_us(cfg.rto_max).max(to_us(cfg.rto_min)).max(1),
            time_wait_ms: to_ms(cfg.time_wait),
            fin_wait2_ms: to_ms(cfg.fin_wait2_timeout),
            ka_idle_ms: to_ms(ka.idle),
            ka_interval_ms: to_ms(ka.interval),
            invalid_ratelimit_ms: to_ms(cfg.invalid_ratelimit),
            // Below 88 bytes the options of a SYN do not leave room for data (Linux clamps too).
            mss: cfg.mss.max(88),
            ka_count: ka.count,
            syn_retries: cfg.syn_retries,
            synack_retries: cfg.synack_retries,
            retries2: cfg.retries2,
            orphan_retries: cfg.orphan_retries,
            ecn: cfg.ecn,
            opts,
            rcvlowat: 1,
        }
    }

    pub(super) fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        let ka = keepalive.unwrap_or_default();
        self.opts.set(Opt::Keepalive, keepalive.is_some());
        self.ka_idle_ms = to_ms(ka.idle);
        self.ka_interval_ms = to_ms(ka.interval);
        self.ka_count = ka.count;
    }

    /// Whether `opt` is on.
    pub(super) fn has(&self, opt: Opt) -> bool {
        self.opts.has(opt)
    }
}
