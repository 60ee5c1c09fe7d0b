//! Test helpers: segment builders for scripted tests against one connection, and `Pair`, two
//! connections back to back over a fake link with a fake clock and loss/reordering by segment
//! index.

use std::vec::Vec;

use wire::{TcpFlags, TcpRepr};

use crate::time::{Duration, Instant, MILLISECOND, SECOND};
use crate::{Config, Connection, Event};

/// The clock starts at 1 s (so that timestamps are not 0).
pub const T0: Instant = SECOND;
/// Our port in scripted tests (and A's in pairs).
pub const LP: u16 = 40000;
/// The peer's port in scripted tests (and B's in pairs).
pub const RP: u16 = 80;
/// Our ISS in scripted tests.
pub const ISS: u32 = 1000;
/// The scripted peer's ISS.
pub const PISS: u32 = 9000;
/// B's ISS in pairs.
pub const ISS_B: u32 = 0xffff_ff00; // wraps during the tests

pub const MS: Duration = MILLISECOND;

/// A segment as it went on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seg {
    pub repr: TcpRepr,
    pub payload: Vec<u8>,
    /// Sent ECN-capable, ECT(0) (`Connection::transmit_ect`).
    pub ect: bool,
}

impl Seg {
    pub fn seq(&self) -> u32 {
        self.repr.seq_number
    }
    pub fn ack(&self) -> Option<u32> {
        self.repr.ack_number
    }
    pub fn flags(&self) -> TcpFlags {
        self.repr.flags
    }
    pub fn has(&self, f: TcpFlags) -> bool {
        self.repr.flags.contains(f)
    }
    pub fn len(&self) -> usize {
        self.payload.len()
    }
}

/// Everything the connection wants to send now.
pub fn poll_all(c: &mut Connection, now: Instant) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096]; // at least the MSS
    loop {
        // Every scripted test checks the stack's shortcut: nothing to send means nothing sent.
        let idle = c.has_nothing_to_send();
        let Some(repr) = c.poll_transmit(now, &mut buf) else { break };
        assert!(!idle, "has_nothing_to_send said nothing, poll_transmit sent {repr:?}");
        assert!(repr.payload_len <= buf.len());
        out.push(Seg { repr, payload: buf[..repr.payload_len].to_vec(), ect: c.transmit_ect() });
        assert!(out.len() < 100_000, "poll_transmit does not stop");
    }
    out
}

/// Exactly one segment is due; returns it.
pub fn poll_one(c: &mut Connection, now: Instant) -> Seg {
    let mut segs = poll_all(c, now);
    assert_eq!(segs.len(), 1, "expected one segment, got {segs:#?}");
    segs.pop().unwrap()
}

/// Nothing is due.
pub fn poll_none(c: &mut Connection, now: Instant) {
    let segs = poll_all(c, now);
    assert!(segs.is_empty(), "expected nothing, got {segs:#?}");
}

pub fn events(c: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// No options at all: the simplest scripted tests.
pub fn plain() -> Config {
    Config { window_scale: false, timestamps: false, sack: false, ..Config::default() }
}

/// A segment from the scripted peer (RP to LP), no options, no payload.
pub fn seg(seq: u32, ack: Option<u32>, flags: TcpFlags, window: u16) -> TcpRepr {
    crate::bare_segment(RP, LP, seq, ack, flags, window)
}

/// An ACK from the peer.
pub fn ack(seq: u32, ack: u32, window: u16) -> TcpRepr {
    seg(seq, Some(ack), TcpFlags::ACK, window)
}

/// A data segment from the peer (feed it with a payload of `len` bytes).
pub fn data(seq: u32, ack: u32, len: usize) -> TcpRepr {
    TcpRepr { payload_len: len, ..seg(seq, Some(ack), TcpFlags::ACK | TcpFlags::PSH, 65535) }
}

/// Feeds a segment with `len` bytes of payload (`pattern(offset)`).
pub fn feed(c: &mut Connection, now: Instant, repr: TcpRepr) {
    let payload: Vec<u8> = (0..repr.payload_len).map(|i| pattern(repr.seq_number.wrapping_add(i as u32))).collect();
    c.handle_segment(now, &repr, &payload);
}

/// The byte the peer sends at sequence number `seq` in scripted tests.
pub fn pattern(seq: u32) -> u8 {
    (seq % 251) as u8
}

/// The peer's SYN (for passive opens), with options as `cfg` offers them.
pub fn peer_syn(cfg: &Config) -> TcpRepr {
    TcpRepr {
        max_seg_size: Some(1460),
        window_scale: cfg.window_scale.then_some(7),
        sack_permitted: cfg.sack,
        timestamp: cfg.timestamps.then_some((777, 0)),
        ..seg(PISS, None, TcpFlags::SYN, 65535)
    }
}

/// An active connection to the scripted peer, established without options (plain) or with
/// those of `cfg` answered in kind (window scale 7 from the peer, timestamps starting at 777).
/// Our ISS is `ISS`, the peer's `PISS`; the peer's next sequence number is PISS + 1.
pub fn established(cfg: &Config) -> (Connection, Instant) {
    let now = T0;
    let mut c = Connection::connect(cfg, LP, RP, ISS, now);
    let syn = poll_one(&mut c, now);
    assert!(syn.has(TcpFlags::SYN));
    let tsval = syn.repr.timestamp.map(|(v, _)| v);
    let synack = TcpRepr {
        max_seg_size: Some(1460),
        window_scale: cfg.window_scale.then_some(7),
        sack_permitted: cfg.sack,
        timestamp: tsval.map(|v| (777, v)),
        ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535)
    };
    c.handle_segment(now, &synack, &[]);
    let ack = poll_one(&mut c, now);
    assert_eq!((ack.seq(), ack.ack()), (ISS + 1, Some(PISS + 1)));
    assert_eq!(events(&mut c), [Event::Connected, Event::Writable]);
    (c, now)
}

/// The bytes A sends in pairs at stream offset `i`.
pub fn stream_byte(i: usize) -> u8 {
    (i.wrapping_mul(7) % 253) as u8
}

/// Direction of a segment in a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB,
    BtoA,
}

/// What the link does to one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    /// Delivered this much later than the normal delay.
    Delay(Duration),
    /// Delivered twice, the copy this much later.
    Duplicate(Duration),
    /// Delivered with CE in its IP header if it was sent ECN-capable (a router's AQM marks
    /// instead of dropping, RFC 3168 section 5).
    MarkCe,
}

/// Decides a segment's fate from its direction and index.
pub type FateFn = Box<dyn FnMut(Dir, u64, &Seg) -> Fate>;

struct InFlight {
    at: Instant,
    order: u64,
    dir: Dir,
    seg: Seg,
    ce: bool,
}

/// Two connections back to back: A connects to B (B is made by `accept` when A's SYN arrives).
pub struct Pair {
    pub a: Connection,
    pub b: Option<Connection>,
    pub cfg_b: Config,
    pub now: Instant,
    /// One-way delay.
    pub delay: Duration,
    /// Link rate in bits per second, each direction (0: infinite). Segments are serialized:
    /// a flight arrives spread out, as on a real link.
    pub rate: u64,
    busy: [Instant; 2],
    queue: Vec<InFlight>,
    order: u64,
    /// Segments sent so far per direction (the index the fate sees).
    pub count: [u64; 2],
    /// Decides each segment's fate from its direction and index.
    pub fate: FateFn,
    /// Everything sent (time, direction, header, payload length), if `logging`.
    pub log: Vec<(Instant, Dir, TcpRepr)>,
    pub logging: bool,
    pub a_events: Vec<Event>,
    pub b_events: Vec<Event>,
}

impl Pair {
    pub fn new(cfg_a: &Config, cfg_b: &Config) -> Pair {
        Pair::with_iss(cfg_a, cfg_b, ISS)
    }

    /// With A's ISS chosen (to make its sequence numbers wrap).
    pub fn with_iss(cfg_a: &Config, cfg_b: &Config, iss_a: u32) -> Pair {
        Pair {
            a: Connection::connect(cfg_a, LP, RP, iss_a, T0),
            b: None,
            cfg_b: *cfg_b,
            now: T0,
            delay: 5 * MS,
            rate: 100_000_000,
            busy: [0, 0],
            queue: Vec::new(),
            order: 0,
            count: [0, 0],
            fate: Box::new(|_, _, _| Fate::Deliver),
            log: Vec::new(),
            logging: true,
            a_events: Vec::new(),
            b_events: Vec::new(),
        }
    }

    /// A pair that has completed its handshake.
    pub fn connected(cfg_a: &Config, cfg_b: &Config) -> Pair {
        let mut p = Pair::new(cfg_a, cfg_b);
        let ok = p.run_until(T0 + 10 * SECOND, |p| {
            p.a.state() == crate::State::Established
                && p.b.as_ref().map(|b| b.state()) == Some(crate::State::Established)
        });
        assert!(ok, "no handshake");
        p.take_events();
        p
    }

    pub fn b(&mut self) -> &mut Connection {
        self.b.as_mut().expect("B not created yet")
    }

    /// Events so far (after a flush, so that the latest are in).
    pub fn take_events(&mut self) -> (Vec<Event>, Vec<Event>) {
        self.flush();
        (std::mem::take(&mut self.a_events), std::mem::take(&mut self.b_events))
    }

    /// Polls both sides for segments and events; puts the segments on the link.
    pub fn flush(&mut self) {
        let now = self.now;
        for dir in [Dir::AtoB, Dir::BtoA] {
            let conn = match dir {
                Dir::AtoB => &mut self.a,
                Dir::BtoA => match self.b.as_mut() {
                    Some(b) => b,
                    None => continue,
                },
            };
            let segs = poll_all(conn, now);
            let events: Vec<Event> = std::iter::from_fn(|| conn.poll_event()).collect();
            match dir {
                Dir::AtoB => self.a_events.extend(events),
                Dir::BtoA => self.b_events.extend(events),
            }
            for seg in segs {
                let idx = self.count[dir as usize];
                self.count[dir as usize] += 1;
                if self.logging {
                    self.log.push((now, dir, seg.repr));
                }
                let fate = (self.fate)(dir, idx, &seg);
                if fate == Fate::Drop {
                    continue;
                }
                let mut sent_at = now;
                let bits = (seg.repr.header_len() + seg.payload.len() + 20) as u64 * 8;
                if let Some(ns) = (bits * 1_000_000_000).checked_div(self.rate) {
                    sent_at = self.busy[dir as usize].max(now) + ns;
                    self.busy[dir as usize] = sent_at;
                }
                let at = match fate {
                    Fate::Delay(extra) => sent_at + self.delay + extra,
                    _ => sent_at + self.delay,
                };
                if let Fate::Duplicate(extra) = fate {
                    self.enqueue(at + extra, dir, seg.clone(), false);
                }
                let ce = fate == Fate::MarkCe && seg.ect;
                self.enqueue(at, dir, seg, ce);
            }
        }
    }

    fn enqueue(&mut self, at: Instant, dir: Dir, seg: Seg, ce: bool) {
        self.order += 1;
        let item = InFlight { at, order: self.order, dir, seg, ce };
        let pos = self.queue.partition_point(|x| (x.at, x.order) <= (item.at, item.order));
        self.queue.insert(pos, item);
    }

    /// The next thing that happens: a delivery or a timer. `false` when nothing is pending.
    pub fn step(&mut self) -> bool {
        self.flush();
        let next =
            [self.queue.first().map(|x| x.at), self.a.poll_timeout(), self.b.as_ref().and_then(|b| b.poll_timeout())]
                .into_iter()
                .flatten()
                .min();
        let Some(next) = next else {
            return false;
        };
        self.now = self.now.max(next);
        let now = self.now;
        while self.queue.first().is_some_and(|x| x.at <= now) {
            let item = self.queue.remove(0);
            self.deliver(item.dir, &item.seg, item.ce);
        }
        if self.a.poll_timeout().is_some_and(|t| t <= now) {
            self.a.handle_timeout(now);
        }
        if let Some(b) = self.b.as_mut() {
            if b.poll_timeout().is_some_and(|t| t <= now) {
                b.handle_timeout(now);
            }
        }
        true
    }

    fn deliver(&mut self, dir: Dir, seg: &Seg, ce: bool) {
        let now = self.now;
        match dir {
            Dir::AtoB => match self.b.as_mut() {
                Some(b) => b.handle_segment_ce(now, &seg.repr, &seg.payload, ce),
                None if seg.repr.flags.contains(TcpFlags::SYN) && seg.repr.ack_number.is_none() => {
                    self.b = Some(Connection::accept(&self.cfg_b, &seg.repr, ISS_B, now));
                }
                None => {}
            },
            Dir::BtoA => self.a.handle_segment_ce(now, &seg.repr, &seg.payload, ce),
        }
    }

    /// Steps until `cond` holds (checked after each step) or `deadline`; whether it held.
    pub fn run_until(&mut self, deadline: Instant, mut cond: impl FnMut(&mut Pair) -> bool) -> bool {
        loop {
            if cond(self) {
                return true;
            }
            if self.now >= deadline || !self.step() {
                self.flush();
                return cond(self);
            }
        }
    }

    /// Steps for `d` of simulated time (or until nothing is pending).
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            self.flush();
            let next = [
                self.queue.first().map(|x| x.at),
                self.a.poll_timeout(),
                self.b.as_ref().and_then(|b| b.poll_timeout()),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(t) if t <= end => {
                    self.step();
                }
                _ => break,
            }
        }
        self.now = self.now.max(end);
    }

    /// Segments logged in a direction.
    pub fn sent(&self, dir: Dir) -> Vec<TcpRepr> {
        self.log.iter().filter(|(_, d, _)| *d == dir).map(|(_, _, r)| *r).collect()
    }
}

/// A sends `data` to B over the pair, as fast as the connections let it; whether all of it
/// arrived, in order and intact, `within` that much simulated time.
pub fn deliver(p: &mut Pair, data: &[u8], within: Duration) -> bool {
    let (mut sent, mut got) = (0, Vec::new());
    let ok = p.run_until(p.now + within, |p| {
        if sent < data.len() {
            sent += p.a.send(&data[sent..]).unwrap_or(0);
        }
        got.extend(read_all(p.b.as_mut().expect("B not created yet")));
        got.len() == data.len()
    });
    ok && got == data
}

/// Reads everything readable.
pub fn read_all(c: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = c.recv(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

pub use testkit::Rng;
