//! A fault injector around any [`Nic`]: loses, duplicates, reorders, delays and corrupts frames,
//! and marks them congested (ECN CE), deterministically from a seed (the lab kernel has no
//! netem).
//!
//! Faults apply independently to the rx direction (frames returned by `rx_burst`) and to the tx
//! direction (frames handed to `tx_burst`), each with its own random stream derived from the seed,
//! so what happens on one direction does not change the other's sequence.
//!
//! Per frame, in this order:
//! 1. **loss**: the frame is dropped (its buffer freed);
//! 2. **corrupt**: one random bit of one random byte is flipped;
//! 3. **ce**: an ECN-capable IPv4 or IPv6 packet (ECT(0) or ECT(1)) is marked CE, congestion
//!    experienced, as a router's active queue management would instead of dropping it (RFC 3168
//!    section 5; the IPv4 header checksum is updated); other frames are left alone;
//! 4. **dup**: a copy (a fresh buffer from the inner NIC's `alloc()`, same bytes) follows the frame;
//!    when the inner pool is empty there is no copy and `dup_failed` counts it;
//! 5. **reorder**: the frame (each copy separately) is held back until the next 1 to 3 frames of
//!    the same direction have come by, or, if none come, until `max(delay_us, 1000)` µs have
//!    passed, so a held frame never stalls forever;
//! 6. **delay**: with `delay_us > 0` every frame is held until `now + delay_us`, then released in
//!    order.
//!
//! On rx, a frame enters the injector when `rx_burst` pulls it from the inner NIC (so a delay runs
//! from that poll); on tx, when it is handed to `tx_burst`. Frames the inner NIC's tx queue has no
//! room for wait inside the wrapper (bounded, see [`FaultyNic::with_tx_hold_limit`]) and are
//! retried on the next `tx_burst`, `rx_burst` or [`FaultyNic::flush`].
//!
//! Time comes from a [`Clock`], so tests drive it with a [`ManualClock`](crate::clock::ManualClock)
//! and [`FaultyNic::next_release_ns`] tells them how far to jump.
//!
//! With every probability 0 and no delay (or with a direction switched off) the wrapper passes
//! bursts straight through: no allocation, one branch.
//!
//! ```
//! use nic::fault::FaultConfig;
//!
//! let cfg: FaultConfig = "loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001,delay_us=200".parse().unwrap();
//! assert_eq!(cfg.loss, 0.02);
//! assert_eq!(cfg.to_string().parse::<FaultConfig>().unwrap(), cfg);
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::os::fd::RawFd;
use std::str::FromStr;

use crate::clock::Clock;
use crate::{Link, MacAddr, Nic, NicStats, Offloads, PacketBuf};

/// The seed used when the configuration names none, so that runs are reproducible by default.
pub const DEFAULT_SEED: u64 = 0x7072_6f6e_6768_6f72; // "pronghor"

/// The default bound on the frames the tx direction holds at once (delayed, held for reordering,
/// or waiting for room in the inner NIC's tx queue). Beyond it `tx_burst` leaves frames in the
/// caller's vec.
pub const DEFAULT_TX_HOLD_LIMIT: usize = 4096;

/// The shortest time a frame held for reordering waits when no other frame follows it.
pub const MIN_REORDER_TIMEOUT_US: u64 = 1000;

/// What to inject. Parse it from the user syntax with [`str::parse`]:
/// `loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001,delay_us=200` (plus optional `ce=P`, `seed=N`
/// and `dir=rx|tx|both`); the empty string means no faults.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is duplicated.
    pub dup: f64,
    /// Probability that a frame is held back behind the next 1 to 3 frames.
    pub reorder: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Probability that an ECN-capable packet is marked CE.
    pub ce: f64,
    /// Every frame is held this long.
    pub delay_us: u64,
    pub seed: u64,
    /// Apply the faults to received frames.
    pub rx: bool,
    /// Apply the faults to transmitted frames.
    pub tx: bool,
}

impl Default for FaultConfig {
    /// No faults, both directions, the default seed.
    fn default() -> Self {
        Self {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            corrupt: 0.0,
            ce: 0.0,
            delay_us: 0,
            seed: DEFAULT_SEED,
            rx: true,
            tx: true,
        }
    }
}

impl FaultConfig {
    /// True when this configuration injects nothing (every probability 0 and no delay, or neither
    /// direction on): the wrapper is then a pass-through.
    pub fn is_noop(&self) -> bool {
        !(self.rx || self.tx) || !self.has_faults()
    }

    fn has_faults(&self) -> bool {
        self.loss > 0.0
            || self.dup > 0.0
            || self.reorder > 0.0
            || self.corrupt > 0.0
            || self.ce > 0.0
            || self.delay_us > 0
    }
}

/// A fault configuration that does not parse; the message names the bad part and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultConfigError(String);

impl FaultConfigError {
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FaultConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FaultConfigError {}

const KEYS: [&str; 8] = ["loss", "dup", "reorder", "corrupt", "ce", "delay_us", "seed", "dir"];

impl FromStr for FaultConfig {
    type Err = FaultConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |msg: String| Err(FaultConfigError(msg));
        let mut cfg = FaultConfig::default();
        if s.trim().is_empty() {
            return Ok(cfg);
        }
        let mut seen = [false; KEYS.len()];
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                return err(format!(
                    "empty item in fault list \"{s}\" (remove the extra comma; items are key=value separated by single commas)"
                ));
            }
            let Some((key, value)) = item.split_once('=') else {
                return err(format!("fault item \"{item}\" has no value (write key=value, e.g. loss=0.02)"));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(k) = KEYS.iter().position(|&known| known == key) else {
                return err(format!(
                    "unknown fault key \"{key}\" (expected loss, dup, reorder, corrupt, ce, delay_us, seed, dir)"
                ));
            };
            if seen[k] {
                return err(format!("fault \"{key}\" is given twice (keep one)"));
            }
            seen[k] = true;
            match key {
                "loss" | "dup" | "reorder" | "corrupt" | "ce" => {
                    let p = match value.parse::<f64>() {
                        Ok(p) if (0.0..=1.0).contains(&p) => p,
                        Ok(_) => {
                            return err(format!("fault \"{key}\" must be a probability between 0 and 1, got {value}"))
                        }
                        Err(_) => {
                            return err(format!(
                                "fault \"{key}\" must be a probability between 0 and 1, got \"{value}\""
                            ))
                        }
                    };
                    match key {
                        "loss" => cfg.loss = p,
                        "dup" => cfg.dup = p,
                        "reorder" => cfg.reorder = p,
                        "corrupt" => cfg.corrupt = p,
                        _ => cfg.ce = p,
                    }
                }
                "delay_us" => {
                    cfg.delay_us = value.parse().map_err(|_| {
                        FaultConfigError(format!(
                            "fault \"delay_us\" must be a whole number of microseconds, got \"{value}\""
                        ))
                    })?;
                }
                "seed" => {
                    cfg.seed = value.parse().map_err(|_| {
                        FaultConfigError(format!(
                            "fault \"seed\" must be a whole number between 0 and {}, got \"{value}\"",
                            u64::MAX
                        ))
                    })?;
                }
                _ => {
                    (cfg.rx, cfg.tx) = match value {
                        "rx" => (true, false),
                        "tx" => (false, true),
                        "both" => (true, true),
                        // Not advertised; lets `Display` print a config with neither direction.
                        "none" => (false, false),
                        _ => return err(format!("fault \"dir\" must be rx, tx or both, got \"{value}\"")),
                    };
                }
            }
        }
        Ok(cfg)
    }
}

impl fmt::Display for FaultConfig {
    /// The parseable form, listing only what differs from the default (so no faults prints as the
    /// empty string).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        let mut item = |f: &mut fmt::Formatter<'_>, args: fmt::Arguments<'_>| {
            let r = write!(f, "{sep}{args}");
            sep = ",";
            r
        };
        let probabilities = [
            ("loss", self.loss),
            ("dup", self.dup),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
            ("ce", self.ce),
        ];
        for (key, p) in probabilities {
            if p != 0.0 {
                item(f, format_args!("{key}={p}"))?;
            }
        }
        if self.delay_us != 0 {
            item(f, format_args!("delay_us={}", self.delay_us))?;
        }
        if self.seed != DEFAULT_SEED {
            item(f, format_args!("seed={}", self.seed))?;
        }
        match (self.rx, self.tx) {
            (true, true) => {}
            (true, false) => item(f, format_args!("dir=rx"))?,
            (false, true) => item(f, format_args!("dir=tx"))?,
            (false, false) => item(f, format_args!("dir=none"))?,
        }
        Ok(())
    }
}

/// What the injector did on one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames lost.
    pub dropped: u64,
    /// Copies made.
    pub duplicated: u64,
    /// Copies not made because the inner NIC had no buffer.
    pub dup_failed: u64,
    /// Frames (or copies) held back for reordering.
    pub reordered: u64,
    /// Frames with a bit flipped.
    pub corrupted: u64,
    /// ECN-capable packets marked CE.
    pub ce_marked: u64,
    /// Frames held for `delay_us`.
    pub delayed: u64,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256**, seeded through splitmix64.
#[derive(Clone, Debug)]
struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// An independent stream `stream` of `seed`.
    fn new(seed: u64, stream: u64) -> Self {
        let mut sm = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let s = [splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm), splitmix64(&mut sm)];
        // splitmix64 is a bijection of distinct states: four zero outputs in a row cannot happen.
        Self { s }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// True with probability `p` (callers skip the draw when `p` is 0).
    fn chance(&mut self, p: f64) -> bool {
        if p >= 1.0 {
            return true;
        }
        ((self.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// Ethernet type of IPv4 and IPv6, and the ECN field's CE codepoint (RFC 3168 section 5).
const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_IPV6: [u8; 2] = [0x86, 0xdd];
const ECN_CE: u8 = 0b11;

/// Marks an ECN-capable IP packet (ECT(0) or ECT(1)) in an Ethernet frame CE, as a router that
/// saw congestion would; whether it did (a frame that is no ECN-capable IP packet is left
/// alone). The IPv4 header checksum is updated incrementally (RFC 1624).
fn mark_ce(frame: &mut [u8]) -> bool {
    const IP: usize = 14;
    if frame.len() < IP + 20 {
        return false;
    }
    let ethertype = [frame[12], frame[13]];
    if ethertype == ETHERTYPE_IPV4 && frame[IP] >> 4 == 4 {
        let old = u16::from_be_bytes([frame[IP], frame[IP + 1]]);
        if old & 0b11 == 0 || old & 0b11 == u16::from(ECN_CE) {
            return false;
        }
        let new = old | u16::from(ECN_CE);
        frame[IP + 1] |= ECN_CE;
        // HC' = ~(~HC + ~m + m') (RFC 1624 equation 3), in one's complement arithmetic.
        let hc = u16::from_be_bytes([frame[IP + 10], frame[IP + 11]]);
        let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        frame[IP + 10..IP + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        return true;
    }
    if ethertype == ETHERTYPE_IPV6 && frame[IP] >> 4 == 6 {
        // The traffic class spans the low nibble of byte 0 and the high nibble of byte 1; its
        // ECN bits are bits 4 and 5 of byte 1.
        let ecn = (frame[IP + 1] >> 4) & 0b11;
        if ecn == 0 || ecn == ECN_CE {
            return false;
        }
        frame[IP + 1] |= ECN_CE << 4;
        return true;
    }
    false
}

/// A frame held back for reordering.
struct Held<B> {
    /// Frames still to come by before it is released.
    left: u8,
    /// When it is released anyway.
    deadline_ns: u64,
    buf: B,
}

/// The state of one direction.
struct Direction<B> {
    /// False: pass-through, nothing below is used.
    active: bool,
    loss: f64,
    dup: f64,
    reorder: f64,
    corrupt: f64,
    ce: f64,
    delay_ns: u64,
    reorder_timeout_ns: u64,
    rng: Rng,
    /// Held for reordering, oldest first (a handful at most: each is released within 3 frames).
    held: Vec<Held<B>>,
    /// Held for the delay, with the time each is due, in order.
    delayed: VecDeque<(u64, B)>,
    /// Due now: to return from rx_burst (rx) or to hand to the inner NIC (tx).
    ready: Vec<B>,
    stats: FaultStats,
}

impl<B: PacketBuf> Direction<B> {
    fn new(cfg: &FaultConfig, enabled: bool, stream: u64, ready_capacity: usize) -> Self {
        let active = enabled && cfg.has_faults();
        let (held, delayed, ready) = if active {
            (
                Vec::with_capacity(8),
                VecDeque::with_capacity(if cfg.delay_us > 0 { 1024 } else { 0 }),
                Vec::with_capacity(ready_capacity),
            )
        } else {
            (Vec::new(), VecDeque::new(), Vec::new())
        };
        Self {
            active,
            loss: cfg.loss,
            dup: cfg.dup,
            reorder: cfg.reorder,
            corrupt: cfg.corrupt,
            ce: cfg.ce,
            delay_ns: cfg.delay_us.saturating_mul(1000),
            reorder_timeout_ns: cfg.delay_us.max(MIN_REORDER_TIMEOUT_US).saturating_mul(1000),
            rng: Rng::new(cfg.seed, stream),
            held,
            delayed,
            ready,
            stats: FaultStats::default(),
        }
    }

    /// Frames this direction holds, whatever the reason.
    fn holding(&self) -> usize {
        self.held.len() + self.delayed.len() + self.ready.len()
    }

    fn next_release_ns(&self) -> Option<u64> {
        let held = self.held.iter().map(|h| h.deadline_ns).min();
        let delayed = self.delayed.front().map(|&(due, _)| due);
        match (held, delayed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Moves what is due at `now` to `ready`: reorder timeouts first, then the delay queue.
    fn release_due(&mut self, now: u64) {
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].deadline_ns <= now {
                let h = self.held.remove(i);
                self.after_reorder(h.buf, now);
            } else {
                i += 1;
            }
        }
        while let Some(&(due, _)) = self.delayed.front() {
            if due > now {
                break;
            }
            let (_, buf) = self.delayed.pop_front().expect("front exists");
            self.ready.push(buf);
        }
    }

    /// A frame enters this direction.
    fn admit(&mut self, mut buf: B, now: u64, alloc: impl FnOnce() -> Option<B>) {
        if self.loss > 0.0 && self.rng.chance(self.loss) {
            self.stats.dropped += 1;
            return; // dropping `buf` frees it
        }
        if self.corrupt > 0.0 && self.rng.chance(self.corrupt) && !buf.is_empty() {
            let len = buf.len() as u64;
            let byte = self.rng.below(len) as usize;
            let bit = self.rng.below(8);
            buf.data_mut()[byte] ^= 1 << bit;
            self.stats.corrupted += 1;
        }
        if self.ce > 0.0 && self.rng.chance(self.ce) && mark_ce(buf.data_mut()) {
            self.stats.ce_marked += 1;
        }
        let copy = if self.dup > 0.0 && self.rng.chance(self.dup) {
            match alloc() {
                Some(mut c) if c.capacity() >= buf.len() => {
                    c.set_len(buf.len());
                    c.data_mut().copy_from_slice(buf.data());
                    self.stats.duplicated += 1;
                    Some(c)
                }
                _ => {
                    self.stats.dup_failed += 1;
                    None
                }
            }
        } else {
            None
        };
        self.reorder_stage(buf, now);
        if let Some(c) = copy {
            self.reorder_stage(c, now);
        }
    }

    fn reorder_stage(&mut self, buf: B, now: u64) {
        if self.held.is_empty() && self.reorder == 0.0 {
            self.after_reorder(buf, now);
            return;
        }
        // This frame comes by every frame already held.
        for h in &mut self.held {
            h.left -= 1;
        }
        if self.reorder > 0.0 && self.rng.chance(self.reorder) {
            let left = 1 + self.rng.below(3) as u8;
            self.held.push(Held { left, deadline_ns: now.saturating_add(self.reorder_timeout_ns), buf });
            self.stats.reordered += 1;
        } else {
            self.after_reorder(buf, now);
        }
        // Release, in the order they were held, those that have let enough frames by.
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].left == 0 {
                let h = self.held.remove(i);
                self.after_reorder(h.buf, now);
            } else {
                i += 1;
            }
        }
    }

    fn after_reorder(&mut self, buf: B, now: u64) {
        if self.delay_ns > 0 {
            self.delayed.push_back((now.saturating_add(self.delay_ns), buf));
            self.stats.delayed += 1;
        } else {
            self.ready.push(buf);
        }
    }
}

/// A [`Nic`] that injects faults into the frames of the NIC it wraps. See the
/// [module documentation](self).
///
/// A stack calls [`flush`](Self::flush) on each poll so that delayed tx frames go out;
/// `rx_burst` also flushes them.
pub struct FaultyNic<N: Nic, C: Clock> {
    // Buffers before the NIC they belong to: fields drop in order.
    rx: Direction<N::Buf>,
    tx: Direction<N::Buf>,
    scratch: Vec<N::Buf>,
    tx_hold_limit: usize,
    cfg: FaultConfig,
    clock: C,
    inner: N,
}

impl<N: Nic, C: Clock> FaultyNic<N, C> {
    pub fn new(inner: N, cfg: FaultConfig, clock: C) -> Self {
        let active = !cfg.is_noop();
        Self {
            rx: Direction::new(&cfg, cfg.rx, 1, 64),
            tx: Direction::new(&cfg, cfg.tx, 2, 1024),
            scratch: if active { Vec::with_capacity(64) } else { Vec::new() },
            tx_hold_limit: DEFAULT_TX_HOLD_LIMIT,
            cfg,
            clock,
            inner,
        }
    }

    /// Bounds the frames the tx direction holds (delayed, held for reordering, or waiting for room
    /// in the inner NIC's tx queue); default [`DEFAULT_TX_HOLD_LIMIT`]. At the bound, `tx_burst`
    /// leaves the caller's frames in its vec.
    pub fn with_tx_hold_limit(mut self, limit: usize) -> Self {
        self.tx_hold_limit = limit.max(1);
        self
    }

    pub fn config(&self) -> &FaultConfig {
        &self.cfg
    }

    /// What was injected: `(rx, tx)`.
    pub fn fault_stats(&self) -> (FaultStats, FaultStats) {
        (self.rx.stats, self.tx.stats)
    }

    /// The earliest time (clock nanoseconds) at which a held frame, rx or tx, becomes due; `None`
    /// when nothing is held for a time. Frames already due but not yet taken (rx frames beyond the
    /// last `max`, tx frames waiting for room in the inner NIC) do not count.
    pub fn next_release_ns(&self) -> Option<u64> {
        match (self.rx.next_release_ns(), self.tx.next_release_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Frames the wrapper holds now in both directions, for any reason: `(rx, tx)`. Both 0 means
    /// nothing is in flight inside the wrapper.
    pub fn holding(&self) -> (usize, usize) {
        (self.rx.holding(), self.tx.holding())
    }

    /// Hands the tx frames that are due to the inner NIC (those it has no room for stay queued).
    pub fn flush(&mut self) {
        if !self.tx.active || self.tx.holding() == 0 {
            return;
        }
        let now = self.clock.now_ns();
        self.tx.release_due(now);
        if !self.tx.ready.is_empty() {
            self.inner.tx_burst(&mut self.tx.ready);
        }
    }

    pub fn inner(&self) -> &N {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut N {
        &mut self.inner
    }

    /// The wrapped NIC. Frames the wrapper still holds are freed.
    pub fn into_inner(self) -> N {
        let Self { rx, tx, scratch, inner, .. } = self;
        drop((rx, tx, scratch));
        inner
    }
}

impl<N: Nic, C: Clock> Nic for FaultyNic<N, C> {
    type Buf = N::Buf;

    fn rx_burst(&mut self, out: &mut Vec<N::Buf>, max: usize) -> usize {
        self.flush();
        if !self.rx.active {
            return self.inner.rx_burst(out, max);
        }
        let now = self.clock.now_ns();
        let rx = &mut self.rx;
        rx.release_due(now);
        let want = max.saturating_sub(rx.ready.len());
        if want > 0 && self.inner.rx_burst(&mut self.scratch, want) > 0 {
            let inner = &mut self.inner;
            for buf in self.scratch.drain(..) {
                rx.admit(buf, now, || inner.alloc());
            }
        }
        let n = max.min(rx.ready.len());
        out.extend(rx.ready.drain(..n));
        n
    }

    fn tx_burst(&mut self, bufs: &mut Vec<N::Buf>) -> usize {
        if !self.tx.active {
            return self.inner.tx_burst(bufs);
        }
        let now = self.clock.now_ns();
        let tx = &mut self.tx;
        let inner = &mut self.inner;
        tx.release_due(now);
        if !tx.ready.is_empty() {
            inner.tx_burst(&mut tx.ready);
        }
        self.scratch.append(bufs);
        let mut accepted = 0;
        let mut frames = self.scratch.drain(..);
        while let Some(buf) = frames.next() {
            if tx.holding() >= self.tx_hold_limit {
                if !tx.ready.is_empty() {
                    inner.tx_burst(&mut tx.ready);
                }
                if tx.holding() >= self.tx_hold_limit {
                    bufs.push(buf);
                    bufs.extend(frames);
                    break;
                }
            }
            tx.admit(buf, now, || inner.alloc());
            accepted += 1;
        }
        if !tx.ready.is_empty() {
            inner.tx_burst(&mut tx.ready);
        }
        accepted
    }

    fn alloc(&mut self) -> Option<N::Buf> {
        self.inner.alloc()
    }

    fn mac(&self) -> MacAddr {
        self.inner.mac()
    }

    fn mtu(&self) -> u16 {
        self.inner.mtu()
    }

    fn offloads(&self) -> Offloads {
        self.inner.offloads()
    }

    fn link(&self) -> Link {
        self.inner.link()
    }

    /// The inner NIC's counters (what really crossed the port).
    fn stats(&self) -> NicStats {
        self.inner.stats()
    }

    /// The inner NIC's pool (frames held back by a delay or reorder count as in use).
    fn pool_usage(&self) -> Option<(u64, u64)> {
        self.inner.pool_usage()
    }

    /// The inner NIC's fd. It does not become readable when a held rx frame comes due: a shard
    /// that sleeps on it should wake by [`next_release_ns`](FaultyNic::next_release_ns) too.
    fn rx_interrupt_fd(&self) -> Option<RawFd> {
        self.inner.rx_interrupt_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::mem::{pair, MemBuf, MemConfig, MemNic};

    type F = FaultyNic<MemNic, ManualClock>;

    /// Where the faults go in a sender → receiver test: the receiver's rx, the sender's tx, or
    /// both.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum At {
        Rx,
        Tx,
        Both,
    }

    fn frame_bytes(i: u32) -> Vec<u8> {
        let len = 64 + (i % 50) as usize;
        let mut v: Vec<u8> = (0..len).map(|k| (i as usize * 7 + k) as u8).collect();
        v[..4].copy_from_slice(&i.to_be_bytes());
        v
    }

    fn id(frame: &[u8]) -> u32 {
        u32::from_be_bytes(frame[..4].try_into().unwrap())
    }

    fn fill(nic: &mut F, i: u32) -> MemBuf {
        let mut b = nic.alloc().expect("pool exhausted");
        let bytes = frame_bytes(i);
        b.set_len(bytes.len());
        b.data_mut().copy_from_slice(&bytes);
        b
    }

    /// A sender and a receiver on one clock, with the faults of `spec` where `at` says.
    fn setup(spec: &str, at: At, mem: MemConfig) -> (ManualClock, F, F) {
        let cfg: FaultConfig = spec.parse().unwrap();
        let clock = ManualClock::new();
        let (a, b) = pair(mem);
        let send_cfg = FaultConfig { rx: false, tx: at != At::Rx, ..cfg.clone() };
        let recv_cfg = FaultConfig { rx: at != At::Tx, tx: false, ..cfg };
        let s = FaultyNic::new(a, send_cfg, clock.clone());
        let r = FaultyNic::new(b, recv_cfg, clock.clone());
        (clock, s, r)
    }

    /// Receives everything `r` has for now.
    fn collect(r: &mut F, delivered: &mut Vec<Vec<u8>>) -> usize {
        let mut got = Vec::new();
        while r.rx_burst(&mut got, 64) > 0 {}
        let n = got.len();
        delivered.extend(got.iter().map(|b| b.data().to_vec()));
        n
    }

    /// Runs the clock forward until neither side holds anything.
    fn drain(clock: &ManualClock, s: &mut F, r: &mut F, delivered: &mut Vec<Vec<u8>>) {
        for _ in 0..100_000 {
            s.flush();
            collect(r, delivered);
            if s.holding() == (0, 0) && r.holding() == (0, 0) && r.inner().rx_pending() == 0 {
                return;
            }
            let next = [s.next_release_ns(), r.next_release_ns()].into_iter().flatten().min();
            match next {
                Some(t) if t > clock.now_ns() => clock.set_ns(t),
                _ => clock.advance_ns(1),
            }
        }
        panic!("the pair never became quiescent");
    }

    fn assert_no_leak(s: &F, r: &F) {
        assert_eq!(s.holding(), (0, 0));
        assert_eq!(r.holding(), (0, 0));
        assert_eq!(s.inner().pool_available(), s.inner().pool_size(), "sender pool leaked");
        assert_eq!(r.inner().pool_available(), r.inner().pool_size(), "receiver pool leaked");
    }

    struct Run {
        delivered: Vec<Vec<u8>>,
        /// The receiver's rx faults.
        rx: FaultStats,
        /// The sender's tx faults.
        tx: FaultStats,
    }

    impl Run {
        fn stats(&self, at: At) -> FaultStats {
            match at {
                At::Rx => self.rx,
                At::Tx => self.tx,
                At::Both => panic!("two sets of stats"),
            }
        }
        fn ids(&self) -> Vec<u32> {
            self.delivered.iter().map(|f| id(f)).collect()
        }
    }

    /// Sends `n` frames in bursts of 32, 10 µs apart, receiving as it goes, then drains.
    fn run(spec: &str, at: At, n: u32) -> Run {
        let (clock, mut s, mut r) = setup(spec, at, MemConfig::default());
        let mut out = Vec::with_capacity(32);
        let mut delivered = Vec::new();
        let mut next = 0u32;
        let mut rounds = 0;
        while next < n || !out.is_empty() {
            while out.len() < 32 && next < n {
                if s.inner().pool_available() == 0 {
                    break;
                }
                out.push(fill(&mut s, next));
                next += 1;
            }
            s.tx_burst(&mut out);
            clock.advance_ns(10_000);
            collect(&mut r, &mut delivered);
            rounds += 1;
            assert!(rounds < 1_000_000, "stuck");
        }
        drain(&clock, &mut s, &mut r, &mut delivered);
        assert_no_leak(&s, &r);
        Run { delivered, rx: r.fault_stats().0, tx: s.fault_stats().1 }
    }

    // ---- configuration ----

    const EXAMPLE: &str = "loss=0.02,reorder=0.02,dup=0.01,corrupt=0.001,delay_us=200";

    #[test]
    fn parses_the_example_and_round_trips() {
        let cfg: FaultConfig = EXAMPLE.parse().unwrap();
        assert_eq!(
            cfg,
            FaultConfig {
                loss: 0.02,
                dup: 0.01,
                reorder: 0.02,
                corrupt: 0.001,
                ce: 0.0,
                delay_us: 200,
                seed: DEFAULT_SEED,
                rx: true,
                tx: true,
            }
        );
        let shown = cfg.to_string();
        assert_eq!(shown, "loss=0.02,dup=0.01,reorder=0.02,corrupt=0.001,delay_us=200");
        assert_eq!(shown.parse::<FaultConfig>().unwrap(), cfg);
    }

    #[test]
    fn parses_seed_dir_and_whitespace() {
        let cfg: FaultConfig = " loss = 0.5 , seed=42,dir=rx ".parse().unwrap();
        assert_eq!((cfg.loss, cfg.seed, cfg.rx, cfg.tx), (0.5, 42, true, false));
        let cfg: FaultConfig = "dir=tx".parse().unwrap();
        assert_eq!((cfg.rx, cfg.tx), (false, true));
        let cfg: FaultConfig = "dir=both,loss=1,dup=0".parse().unwrap();
        assert_eq!((cfg.rx, cfg.tx, cfg.loss), (true, true, 1.0));
        let cfg: FaultConfig = "seed=18446744073709551615".parse().unwrap();
        assert_eq!(cfg.seed, u64::MAX);
    }

    #[test]
    fn empty_string_means_no_faults() {
        for s in ["", "  "] {
            let cfg: FaultConfig = s.parse().unwrap();
            assert_eq!(cfg, FaultConfig::default());
            assert!(cfg.is_noop());
        }
        assert_eq!(FaultConfig::default().to_string(), "");
        assert!("seed=3,dir=rx".parse::<FaultConfig>().unwrap().is_noop());
        assert!(!"delay_us=1".parse::<FaultConfig>().unwrap().is_noop());
    }

    #[test]
    fn display_round_trips() {
        let configs = [
            FaultConfig { loss: 1e-9, dup: 0.1 + 0.2, ..FaultConfig::default() },
            FaultConfig { reorder: 1.0, corrupt: 0.123456789, seed: 0, ..FaultConfig::default() },
            FaultConfig { ce: 0.25, ..FaultConfig::default() },
            FaultConfig { delay_us: u64::MAX, seed: 7, rx: false, ..FaultConfig::default() },
            FaultConfig { loss: 0.5, tx: false, ..FaultConfig::default() },
            FaultConfig { loss: 0.5, rx: false, tx: false, ..FaultConfig::default() },
            FaultConfig::default(),
        ];
        for cfg in configs {
            let shown = cfg.to_string();
            assert_eq!(shown.parse::<FaultConfig>().unwrap(), cfg, "{shown}");
        }
    }

    fn parse_err(s: &str) -> String {
        s.parse::<FaultConfig>().expect_err(s).to_string()
    }

    #[test]
    fn errors_name_the_bad_part_and_the_fix() {
        let keys = "(expected loss, dup, reorder, corrupt, ce, delay_us, seed, dir)";
        assert_eq!(parse_err("los=0.1"), format!("unknown fault key \"los\" {keys}"));
        assert_eq!(parse_err("loss=0.1,Loss=0.1"), format!("unknown fault key \"Loss\" {keys}"));
        assert_eq!(parse_err("loss=1.5"), "fault \"loss\" must be a probability between 0 and 1, got 1.5");
        assert_eq!(parse_err("dup=-0.1"), "fault \"dup\" must be a probability between 0 and 1, got -0.1");
        assert_eq!(parse_err("reorder=NaN"), "fault \"reorder\" must be a probability between 0 and 1, got NaN");
        assert_eq!(parse_err("corrupt=abc"), "fault \"corrupt\" must be a probability between 0 and 1, got \"abc\"");
        assert_eq!(parse_err("loss="), "fault \"loss\" must be a probability between 0 and 1, got \"\"");
        for bad in ["abc", "1.5", "-1", ""] {
            assert_eq!(
                parse_err(&format!("delay_us={bad}")),
                format!("fault \"delay_us\" must be a whole number of microseconds, got \"{bad}\"")
            );
        }
        assert!(parse_err("seed=x").starts_with("fault \"seed\" must be a whole number"));
        assert!(parse_err("seed=x").ends_with("got \"x\""));
        assert_eq!(parse_err("dir=up"), "fault \"dir\" must be rx, tx or both, got \"up\"");
        for s in ["loss=0.1,,dup=0.1", "loss=0.1,", ",loss=0.1", ","] {
            assert!(parse_err(s).starts_with("empty item in fault list"), "{s}: {}", parse_err(s));
        }
        assert_eq!(parse_err("loss"), "fault item \"loss\" has no value (write key=value, e.g. loss=0.02)");
        assert_eq!(
            parse_err("loss=0.1,delay_us 200"),
            "fault item \"delay_us 200\" has no value (write key=value, e.g. loss=0.02)"
        );
        assert_eq!(parse_err("loss=0.1,loss=0.2"), "fault \"loss\" is given twice (keep one)");
    }

    // ---- the generator ----

    #[test]
    fn rng_matches_reference_vectors() {
        let mut sm = 0u64;
        assert_eq!(splitmix64(&mut sm), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut sm), 0x6E78_9E6A_A1B9_65F4);
        // xoshiro256** from the state {1, 2, 3, 4} (the reference implementation's outputs).
        let mut r = Rng { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
    }

    #[test]
    fn rng_streams_and_distributions() {
        let mut rx = Rng::new(1, 1);
        let mut tx = Rng::new(1, 2);
        let mut rx2 = Rng::new(1, 1);
        let a: Vec<u64> = (0..8).map(|_| rx.next_u64()).collect();
        let b: Vec<u64> = (0..8).map(|_| tx.next_u64()).collect();
        let c: Vec<u64> = (0..8).map(|_| rx2.next_u64()).collect();
        assert_ne!(a, b);
        assert_eq!(a, c);
        let mut r = Rng::new(DEFAULT_SEED, 1);
        let hits = (0..100_000).filter(|_| r.chance(0.25)).count();
        assert!((24_000..26_000).contains(&hits), "{hits}");
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            seen[r.below(3) as usize] += 1;
        }
        assert!(seen.iter().all(|&k| (900..1100).contains(&k)), "{seen:?}");
        assert!(r.chance(1.0));
    }

    // ---- behaviour ----

    #[test]
    fn pass_through_delivers_identically() {
        let expected: Vec<Vec<u8>> = (0..3000).map(frame_bytes).collect();
        for spec in ["", "seed=9", "dir=rx", "dir=tx"] {
            let run = run(spec, At::Both, 3000);
            assert_eq!(run.delivered, expected, "{spec}");
            assert_eq!((run.rx, run.tx), (FaultStats::default(), FaultStats::default()));
        }
        // A noop wrapper never holds anything, not even scratch space.
        let (_clock, s, r) = setup("", At::Both, MemConfig::default());
        assert_eq!(s.scratch.capacity() + r.scratch.capacity(), 0);
        assert!(!s.tx.active && !s.rx.active && !r.rx.active && !r.tx.active);
    }

    #[test]
    fn a_fixed_seed_gives_the_same_run() {
        let spec = "loss=0.05,dup=0.05,reorder=0.2,corrupt=0.02,delay_us=30,seed=7";
        let one = run(spec, At::Both, 3000);
        let two = run(spec, At::Both, 3000);
        assert_eq!(one.delivered, two.delivered);
        assert_eq!((one.rx, one.tx), (two.rx, two.tx));
        // Faults did happen, and another seed gives another run.
        let clean: Vec<Vec<u8>> = (0..3000).map(frame_bytes).collect();
        assert_ne!(one.delivered, clean);
        for st in [one.rx, one.tx] {
            assert!(st.dropped > 0 && st.duplicated > 0 && st.reordered > 0);
            assert!(st.corrupted > 0 && st.delayed > 0);
        }
        let other = run(&spec.replace("seed=7", "seed=8"), At::Both, 3000);
        assert_ne!(one.delivered, other.delivered);
        // The two directions draw from different streams.
        assert_ne!(one.rx, one.tx);
    }

    #[test]
    fn loss_drops_about_the_right_share() {
        for at in [At::Rx, At::Tx] {
            let run = run("loss=0.1", at, 10_000);
            let st = run.stats(at);
            assert!((800..=1200).contains(&st.dropped), "{at:?}: {st:?}");
            assert_eq!(run.delivered.len() as u64, 10_000 - st.dropped);
            assert_eq!(FaultStats { dropped: st.dropped, ..FaultStats::default() }, st);
            // The survivors are intact and in order.
            let ids = run.ids();
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            for f in &run.delivered {
                assert_eq!(*f, frame_bytes(id(f)));
            }
        }
        // loss=1 loses everything.
        let run = run("loss=1", At::Tx, 500);
        assert!(run.delivered.is_empty());
        assert_eq!(run.tx.dropped, 500);
    }

    #[test]
    fn dup_one_delivers_every_frame_twice() {
        for at in [At::Rx, At::Tx] {
            let run = run("dup=1", at, 2000);
            assert_eq!(run.delivered.len(), 4000, "{at:?}");
            for (k, pair) in run.delivered.chunks(2).enumerate() {
                assert_eq!(pair[0], frame_bytes(k as u32));
                assert_eq!(pair[1], frame_bytes(k as u32));
            }
            assert_eq!(run.stats(at), FaultStats { duplicated: 2000, ..FaultStats::default() });
        }
    }

    #[test]
    fn dup_without_a_buffer_is_counted_not_lost() {
        for at in [At::Rx, At::Tx] {
            let mem = MemConfig { pool_size: 8, ..MemConfig::default() };
            let (clock, mut s, mut r) = setup("dup=1", at, mem);
            // Empty both pools: the sender's by its own 8 frames, the receiver's by a hog.
            let mut out: Vec<MemBuf> = (0..8).map(|i| fill(&mut s, i)).collect();
            let hog: Vec<MemBuf> = std::iter::from_fn(|| r.alloc()).collect();
            assert_eq!(hog.len(), 8);
            assert_eq!(s.tx_burst(&mut out), 8);
            let mut delivered = Vec::new();
            drain(&clock, &mut s, &mut r, &mut delivered);
            assert_eq!(delivered, (0..8).map(frame_bytes).collect::<Vec<_>>(), "{at:?}");
            let st = if at == At::Rx { r.fault_stats().0 } else { s.fault_stats().1 };
            assert_eq!(st, FaultStats { dup_failed: 8, ..FaultStats::default() });
            drop(hog);
            assert_no_leak(&s, &r);
        }
    }

    /// An Ethernet frame with an IPv4 header (checksum filled) whose ECN field is `ecn`.
    fn ipv4_frame(ecn: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4);
        f[14..34].copy_from_slice(&[0x45, 0xb8 | ecn, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let sum = ipv4_sum(&f[14..34]);
        f[24..26].copy_from_slice(&(!sum).to_be_bytes());
        f
    }

    /// The one's complement sum of an IPv4 header (0xffff when its checksum is right).
    fn ipv4_sum(header: &[u8]) -> u16 {
        let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn ce_marks_ecn_capable_packets_only() {
        for ect in [0b01, 0b10] {
            let mut f = ipv4_frame(ect);
            assert!(mark_ce(&mut f));
            assert_eq!(f[15], 0xb8 | ECN_CE, "the DSCP stays");
            assert_eq!(ipv4_sum(&f[14..34]), 0xffff, "the checksum follows");
        }
        for not_capable in [0b00, ECN_CE] {
            let mut f = ipv4_frame(not_capable);
            let before = f.clone();
            assert!(!mark_ce(&mut f));
            assert_eq!(f, before);
        }
        let mut v6 = vec![0u8; 14 + 40];
        v6[12..14].copy_from_slice(&ETHERTYPE_IPV6);
        v6[14..16].copy_from_slice(&[0x6b, 0x90]); // traffic class 0xb9: DSCP 46, ECT(1)
        assert!(mark_ce(&mut v6));
        assert_eq!(&v6[14..16], &[0x6b, 0xb0]);
        let mut arp = ipv4_frame(0b10);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!mark_ce(&mut arp));
        // Through the injector: every ECN-capable packet, nothing else.
        let (clock, mut s, mut r) = setup("ce=1", At::Tx, MemConfig::default());
        let mut out = Vec::new();
        for ecn in [0b10, 0b00, 0b01] {
            let mut b = s.alloc().unwrap();
            let bytes = ipv4_frame(ecn);
            b.set_len(bytes.len());
            b.data_mut().copy_from_slice(&bytes);
            out.push(b);
        }
        s.tx_burst(&mut out);
        let mut got = Vec::new();
        drain(&clock, &mut s, &mut r, &mut got);
        let ecn: Vec<u8> = got.iter().map(|f| f[15] & 0b11).collect();
        assert_eq!(ecn, [ECN_CE, 0b00, ECN_CE]);
        assert_eq!(s.fault_stats().1, FaultStats { ce_marked: 2, ..FaultStats::default() });
    }

    #[test]
    fn corrupt_one_flips_exactly_one_bit_per_frame() {
        for at in [At::Rx, At::Tx] {
            let run = run("corrupt=1", at, 3000);
            assert_eq!(run.delivered.len(), 3000);
            let mut positions = std::collections::BTreeSet::new();
            for (k, f) in run.delivered.iter().enumerate() {
                let orig = frame_bytes(k as u32);
                assert_eq!(f.len(), orig.len());
                let flipped: u32 = f.iter().zip(&orig).map(|(a, b)| (a ^ b).count_ones()).sum();
                assert_eq!(flipped, 1, "{at:?} frame {k}");
                positions.insert(f.iter().zip(&orig).position(|(a, b)| a != b).unwrap());
            }
            // Anywhere in the frame, not always the same byte.
            assert!(positions.len() > 60, "{positions:?}");
            assert!(*positions.last().unwrap() >= 100);
            assert_eq!(run.stats(at), FaultStats { corrupted: 3000, ..FaultStats::default() });
        }
    }

    #[test]
    fn reorder_delivers_every_frame_once_out_of_order() {
        for at in [At::Rx, At::Tx] {
            let run = run("reorder=0.5", at, 5000);
            let ids = run.ids();
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..5000).collect::<Vec<_>>(), "{at:?}: lost or duplicated");
            assert_ne!(ids, sorted, "{at:?}: nothing was reordered");
            for f in &run.delivered {
                assert_eq!(*f, frame_bytes(id(f)));
            }
            // A held frame lets at most 3 others by, and only its near neighbours overtake it.
            for (pos, &i) in ids.iter().enumerate() {
                assert!((pos as i64 - i as i64).abs() <= 3, "{at:?}: frame {i} at {pos}");
            }
            let st = run.stats(at);
            assert!((2000..3000).contains(&st.reordered), "{st:?}");
            assert_eq!(FaultStats { reordered: st.reordered, ..FaultStats::default() }, st);
        }
    }

    #[test]
    fn a_lone_held_frame_is_released_after_the_timeout() {
        for at in [At::Rx, At::Tx] {
            let (clock, mut s, mut r) = setup("reorder=1", at, MemConfig::default());
            let mut out = vec![fill(&mut s, 0)];
            assert_eq!(s.tx_burst(&mut out), 1);
            let mut delivered = Vec::new();
            assert_eq!(collect(&mut r, &mut delivered), 0);
            let holder = if at == At::Rx { &r } else { &s };
            assert_eq!(holder.next_release_ns(), Some(MIN_REORDER_TIMEOUT_US * 1000));
            clock.set_ns(MIN_REORDER_TIMEOUT_US * 1000 - 1);
            s.flush();
            assert_eq!(collect(&mut r, &mut delivered), 0, "{at:?}: released early");
            clock.set_ns(MIN_REORDER_TIMEOUT_US * 1000);
            s.flush();
            assert_eq!(collect(&mut r, &mut delivered), 1, "{at:?}: never released");
            assert_eq!(delivered, [frame_bytes(0)]);
            assert_eq!(s.next_release_ns(), None);
            assert_eq!(r.next_release_ns(), None);
            assert_no_leak(&s, &r);
        }
        // The timeout grows with the delay when that is longer (then the delay applies too).
        let (clock, mut s, mut r) = setup("reorder=1,delay_us=2000", At::Rx, MemConfig::default());
        let mut out = vec![fill(&mut s, 0)];
        s.tx_burst(&mut out);
        let mut delivered = Vec::new();
        collect(&mut r, &mut delivered);
        assert_eq!(r.next_release_ns(), Some(2_000_000));
        drain(&clock, &mut s, &mut r, &mut delivered);
        assert_eq!(clock.now_ns(), 4_000_000);
        assert_eq!(delivered, [frame_bytes(0)]);
    }

    #[test]
    fn delay_holds_everything_until_it_is_due() {
        for at in [At::Rx, At::Tx] {
            let (clock, mut s, mut r) = setup("delay_us=200", at, MemConfig::default());
            let mut delivered = Vec::new();
            let mut out: Vec<MemBuf> = (0..50).map(|i| fill(&mut s, i)).collect();
            assert_eq!(s.tx_burst(&mut out), 50);
            assert!(out.is_empty());
            assert_eq!(collect(&mut r, &mut delivered), 0);
            clock.set_ns(100_000);
            let mut out: Vec<MemBuf> = (50..80).map(|i| fill(&mut s, i)).collect();
            assert_eq!(s.tx_burst(&mut out), 30);
            // (On rx the delay runs from the poll that pulls a frame in, as a stack polls.)
            assert_eq!(collect(&mut r, &mut delivered), 0);
            let holder = if at == At::Rx { &r } else { &s };
            assert_eq!(holder.next_release_ns(), Some(200_000));
            clock.set_ns(199_999);
            s.flush();
            assert_eq!(collect(&mut r, &mut delivered), 0, "{at:?}: early");
            clock.set_ns(200_000);
            // rx_burst flushes due tx frames too, even with nothing new to send.
            let mut nothing = Vec::new();
            assert_eq!(s.rx_burst(&mut nothing, 32), 0);
            assert_eq!(collect(&mut r, &mut delivered), 50, "{at:?}");
            assert_eq!(delivered, (0..50).map(frame_bytes).collect::<Vec<_>>());
            let holder = if at == At::Rx { &r } else { &s };
            assert_eq!(holder.next_release_ns(), Some(300_000));
            clock.set_ns(299_999);
            s.flush();
            assert_eq!(collect(&mut r, &mut delivered), 0);
            clock.set_ns(300_000);
            s.flush();
            assert_eq!(collect(&mut r, &mut delivered), 30);
            assert_eq!(delivered, (0..80).map(frame_bytes).collect::<Vec<_>>());
            let st = if at == At::Rx { r.fault_stats().0 } else { s.fault_stats().1 };
            assert_eq!(st, FaultStats { delayed: 80, ..FaultStats::default() });
            assert_no_leak(&s, &r);
        }
    }

    #[test]
    fn delay_with_a_small_rx_max_keeps_order() {
        let (clock, mut s, mut r) = setup("delay_us=5,dir=rx", At::Rx, MemConfig::default());
        let mut out: Vec<MemBuf> = (0..20).map(|i| fill(&mut s, i)).collect();
        s.tx_burst(&mut out);
        let mut got = Vec::new();
        assert_eq!(r.rx_burst(&mut got, 3), 0);
        clock.advance_ns(5_000);
        let mut out: Vec<MemBuf> = (20..25).map(|i| fill(&mut s, i)).collect();
        s.tx_burst(&mut out);
        let mut n = 0;
        for _ in 0..20 {
            n += r.rx_burst(&mut got, 3);
            clock.advance_ns(1_000);
        }
        assert_eq!(n, 25);
        let ids: Vec<u32> = got.iter().map(|b| id(b.data())).collect();
        assert_eq!(ids, (0..25).collect::<Vec<_>>());
    }

    #[test]
    fn tx_frames_the_inner_nic_refuses_wait_and_are_not_lost() {
        let mem = MemConfig { queue_len: 4, ..MemConfig::default() };
        let clock = ManualClock::new();
        let (a, b) = pair(mem);
        let mut s = FaultyNic::new(a, "delay_us=1".parse().unwrap(), clock.clone()).with_tx_hold_limit(8);
        let mut r = b;
        let mut out: Vec<MemBuf> = (0..12)
            .map(|i| {
                let mut buf = s.alloc().unwrap();
                let bytes = frame_bytes(i);
                buf.set_len(bytes.len());
                buf.data_mut().copy_from_slice(&bytes);
                buf
            })
            .collect();
        // The wrapper holds at most 8: the last 4 stay with the caller, in order.
        assert_eq!(s.tx_burst(&mut out), 8);
        assert_eq!(out.iter().map(|b| id(b.data())).collect::<Vec<_>>(), [8, 9, 10, 11]);
        assert_eq!(s.holding(), (0, 8));
        clock.advance_ns(1_000);
        s.flush();
        // The inner queue takes 4; 4 wait inside the wrapper.
        assert_eq!(r.rx_pending(), 4);
        assert_eq!(s.holding(), (0, 4));
        assert_eq!(s.tx_burst(&mut out), 4);
        assert!(out.is_empty());
        assert_eq!(s.holding(), (0, 8));
        let mut got = Vec::new();
        assert_eq!(r.rx_burst(&mut got, 64), 4);
        // Retried on the next rx_burst.
        s.rx_burst(&mut Vec::new(), 32);
        assert_eq!(r.rx_pending(), 4);
        r.rx_burst(&mut got, 64);
        clock.advance_ns(1_000);
        s.flush();
        r.rx_burst(&mut got, 64);
        assert_eq!(s.holding(), (0, 0));
        let ids: Vec<u32> = got.iter().map(|b| id(b.data())).collect();
        assert_eq!(ids, (0..12).collect::<Vec<_>>());
        assert_eq!(s.stats().opackets, 12);
        drop(got);
        assert_eq!(s.inner().pool_available(), s.inner().pool_size());
    }

    #[test]
    fn accessors_and_dropping_a_wrapper_that_holds_frames() {
        let clock = ManualClock::new();
        let (a, mut b) = pair(MemConfig::default());
        let mut s = FaultyNic::new(a, "delay_us=50,reorder=0.5".parse().unwrap(), clock.clone());
        assert_eq!(s.config().delay_us, 50);
        assert_eq!(s.mac(), s.inner().mac());
        assert_eq!(s.mtu(), 1500);
        assert_eq!(s.link(), s.inner().link());
        assert_eq!(s.offloads(), Offloads::default());
        assert_eq!(s.rx_interrupt_fd(), None);
        let mut out: Vec<MemBuf> = (0..10)
            .map(|i| {
                let mut buf = s.alloc().unwrap();
                buf.set_len(64);
                buf.data_mut()[..4].copy_from_slice(&(i as u32).to_be_bytes());
                buf
            })
            .collect();
        s.tx_burst(&mut out);
        assert_eq!(s.stats(), s.inner().stats());
        assert_eq!(s.stats().opackets, 0, "everything is delayed");
        assert!(s.inner_mut().rx_pending() == 0);
        let a = s.into_inner();
        assert_eq!(a.pool_available(), a.pool_size(), "held frames freed by into_inner");

        // Held rx frames are freed with the wrapper.
        let (mut a2, b2) = pair(MemConfig::default());
        let mut r = FaultyNic::new(b2, "delay_us=50".parse().unwrap(), clock.clone());
        let mut out: Vec<MemBuf> = (0..10).map(|_| a2.alloc().unwrap()).collect();
        a2.tx_burst(&mut out);
        assert_eq!(r.rx_burst(&mut Vec::new(), 32), 0);
        assert_eq!(r.holding(), (10, 0));
        assert_eq!(a2.pool_available(), a2.pool_size() - 10);
        drop(r);
        assert_eq!(a2.pool_available(), a2.pool_size());
        let _ = b.alloc();
    }
}
