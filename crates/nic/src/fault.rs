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

    fn alloc_tso(&mut self) -> Option<N::Buf> {
        self.inner.alloc_tso()
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

    fn successor_waits(&self) -> bool {
        self.inner.successor_waits()
    }

    /// The inner NIC's fd. It does not become readable when a held rx frame comes due: a shard
    /// that sleeps on it should wake by [`next_release_ns`](FaultyNic::next_release_ns) too.
    fn rx_interrupt_fd(&self) -> Option<RawFd> {
        self.inner.rx_interrupt_fd()
    }

    /// The inner NIC's lane when no tx fault is injected (`tx_burst` hands everything straight
    /// through); with tx faults, none: the held and delayed frames are this wrapper's, under
    /// the caller's serialisation.
    fn detach_tx(&mut self) -> Option<std::sync::Arc<dyn crate::lane::TxSender>> {
        if self.tx.active {
            return None;
        }
        self.inner.detach_tx()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

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
    }

    /// A port with nothing to receive, no room to send and no buffers.
    struct Unplugged;

    /// The buffer type of [`Unplugged`], which never hands one out (not zero-sized, so that an
    /// empty `Vec` of them has capacity 0).
    struct Frame(Vec<u8>);

    impl PacketBuf for Frame {
        fn data(&self) -> &[u8] {
            &self.0
        }
        fn data_mut(&mut self) -> &mut [u8] {
            &mut self.0
        }
        fn set_len(&mut self, len: usize) {
            self.0.resize(len, 0);
        }
        fn capacity(&self) -> usize {
            self.0.capacity()
        }
    }

    impl Nic for Unplugged {
        type Buf = Frame;
        fn rx_burst(&mut self, _out: &mut Vec<Frame>, _max: usize) -> usize {
            0
        }
        fn tx_burst(&mut self, _bufs: &mut Vec<Frame>) -> usize {
            0
        }
        fn alloc(&mut self) -> Option<Frame> {
            None
        }
        fn mac(&self) -> MacAddr {
            MacAddr::default()
        }
        fn mtu(&self) -> u16 {
            1500
        }
        fn link(&self) -> Link {
            Link::default()
        }
        fn stats(&self) -> NicStats {
            NicStats::default()
        }
    }

    #[test]
    fn a_noop_wrapper_holds_nothing_not_even_scratch_space() {
        // The behaviour of every fault is tested over the in-memory pair in tests/fault.rs.
        let nic = FaultyNic::new(Unplugged, "".parse().unwrap(), ManualClock::new());
        assert_eq!(nic.scratch.capacity(), 0);
        assert!(!nic.tx.active && !nic.rx.active);
    }
}
