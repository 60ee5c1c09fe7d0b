//! The neighbor cache (ARP for IPv4, NDP for IPv6): next-hop IP address to Ethernet address, the
//! packets waiting for a resolution, and when to send a request.
//!
//! It owns the entries, their states and timers, and the queue of pending packets (any `P`:
//! frames or buffers, dropped with `P`'s own `Drop` when the cache gives up on them). It must
//! not build or send frames (it says *when* a request is due; the interface sends it), read a
//! clock, or scan its entries: a lookup is one hash probe, each timer event is O(1), and finding
//! an entry to evict is O(1).
//!
//! # States (after Linux's NUD machine, simplified)
//! - **Incomplete**: a request went out; up to `queue_per_entry` packets wait (the oldest is
//!   dropped on overflow, like Linux's `unres_qlen`), all entries together at most
//!   `queue_total`. A request is sent at most once per `retrans_ns` per address; after
//!   `max_probes` unanswered requests the entry is removed and its packets dropped and counted.
//!   Retries are driven by [`NeighborCache::expire`] (or lazily by `lookup`), in a FIFO ordered by
//!   due time: the retry interval is constant, so appending keeps it sorted.
//! - **Reachable**: confirmed by a reply ([`NeighborCache::update`]) or by upper-layer progress
//!   ([`NeighborCache::confirm`]) less than `reachable_ns` ago.
//! - **Stale**: reachability expired, or the address was only learned from the peer's own
//!   request ([`Update::REQUEST`]). Still used. On first use a `delay_ns` grace period
//!   starts (Linux's DELAY: time for a confirmation to arrive); then up to `max_probes` unicast
//!   requests one `retrans_ns` apart; if none is answered the entry is dropped and the next
//!   packet starts a fresh resolution.
//!
//! Reachable → Stale needs no timer: confirmed entries sit in a FIFO ordered by expiry, so
//! staleness is a comparison and the oldest stale entry (the one evicted when the cache is full)
//! is the head of that FIFO or of the FIFO of learned entries. Incomplete entries are never
//! evicted; when all entries are incomplete or reachable a new resolution is refused and counted.
//!
//! # Who may change an entry (Linux's `neigh_update`)
//! What a message may do is its [`Update`]: whether it makes an entry for an unknown address
//! (only the neighbor's own request to us does: Linux `neigh_event_ns`; unsolicited ARP replies
//! and advertisements do not, as with `arp_accept=0` and RFC 4861 section 7.2.5), whether it
//! proves reachability, and whether a different link-layer address replaces a resolved entry's:
//! always (requests, gratuitous ARP, advertisements with Override), only when the entry has not
//! changed for `locktime_ns` (other ARP: the first of several answers wins), never but a
//! reachable entry goes stale (advertisements without Override), or never (what the shard
//! gleans from TCP and UDP frames). An incomplete entry takes any address it is given.
//!
//! Multicast and broadcast destinations map to their Ethernet groups without an entry. The
//! subnet-directed broadcast is the caller's to map (see [`crate::shard::route::Routes`]).

use wire::{EthernetAddress, IpAddress};

use crate::shard::table::{addr16, from16, AddrPort, RawTable};

const NIL: u32 = u32::MAX;
/// `next_probe_at` of a stale entry not used since it went stale.
const UNUSED: u64 = u64::MAX;

const INCOMPLETE: u8 = 0;
/// Confirmed entries: reachable until `expires_at`, stale after.
const CONFIRMED: u8 = 1;
/// Learned, never confirmed: stale since `expires_at`.
const UNCONFIRMED: u8 = 2;
const FREE: u8 = 3;

/// Limits and timings of a neighbor cache. The defaults are Linux's.
#[derive(Clone, Debug)]
pub struct NeighborConfig {
    /// Most entries (Linux `gc_thresh3`).
    pub capacity: usize,
    /// How long a confirmation keeps an entry reachable (Linux `base_reachable_time`, fixed
    /// here rather than randomised).
    pub reachable_ns: u64,
    /// Grace period between the first use of a stale entry and its first probe
    /// (`delay_first_probe_time`).
    pub delay_ns: u64,
    /// Interval between requests for one address (`retrans_time`).
    pub retrans_ns: u64,
    /// Requests before giving up (`mcast_solicit` / `ucast_solicit`).
    pub max_probes: u8,
    /// How long after an entry changed an ARP reply with another address is ignored
    /// (`locktime`; see [`Replace::AfterLocktime`]).
    pub locktime_ns: u64,
    /// Packets queued per unresolved address (`unres_qlen`).
    pub queue_per_entry: usize,
    /// Packets queued over all unresolved addresses.
    pub queue_total: usize,
    /// Seed of the address hash (random per cache).
    pub seed: u128,
}

impl Default for NeighborConfig {
    fn default() -> Self {
        NeighborConfig {
            capacity: 1024,
            reachable_ns: 30_000_000_000,
            delay_ns: 5_000_000_000,
            retrans_ns: 1_000_000_000,
            max_probes: 3,
            locktime_ns: 1_000_000_000,
            // Linux: unres_qlen 101 (derived from unres_qlen_bytes = 212992): a burst of
            // datagrams to a new neighbor is not cut to its first three.
            queue_per_entry: 101,
            queue_total: 256,
            seed: 0,
        }
    }
}

/// What happened in the cache, for `pronghorn stat` and tests. Every packet passed to
/// [`NeighborCache::enqueue`] is either drained by `fill`/`learn` or counted in one `drop_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeighborStats {
    /// Requests the cache asked for (broadcast/multicast for incomplete, unicast for stale).
    pub requests: u64,
    /// Incomplete entries that got an address.
    pub resolved: u64,
    /// Resolutions given up, and stale entries dropped after unanswered probes.
    pub failed: u64,
    /// Stale entries evicted to make room.
    pub evicted: u64,
    /// New resolutions refused because every entry was incomplete or reachable.
    pub table_full: u64,
    /// Packets dropped when their resolution failed (or the entry was removed).
    pub drop_unresolved: u64,
    /// Packets dropped because their address's queue was full (the oldest goes).
    pub drop_queue_overflow: u64,
    /// Packets refused because all queues together were full.
    pub drop_queue_limit: u64,
    /// Packets refused because no resolution was pending for their address.
    pub drop_no_entry: u64,
}

/// The answer to [`NeighborCache::lookup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Send to `mac`. When `send_request`, also send a unicast request to `mac` to confirm a
    /// stale entry.
    Hit { mac: EthernetAddress, send_request: bool },
    /// Unknown yet: queue the packet with [`NeighborCache::enqueue`] and, when `send_request`,
    /// send a broadcast ARP request / multicast neighbor solicitation.
    Miss { send_request: bool },
}

/// What a received message says of a neighbor's address, and how far it may change the cache
/// (Linux's `neigh_update` and the flags ARP and NDP pass it; see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Update {
    /// An unknown address gets an entry; otherwise the message is ignored for it.
    pub create: bool,
    /// The address is proven reachable (a unicast ARP reply, a solicited advertisement): the
    /// entry becomes reachable. Otherwise a new address leaves the entry stale and the same
    /// address leaves its state as it was.
    pub reachable: bool,
    /// What a different address does to a resolved entry.
    pub replace: Replace,
}

impl Update {
    /// The neighbor's own request to us (an ARP request for our address; a neighbor
    /// solicitation with its link-layer address, RFC 4861 section 7.2.3): an unknown address
    /// gets a stale entry, a known one takes the new address and goes stale (Linux
    /// `neigh_event_ns`).
    pub const REQUEST: Update = Update { create: true, reachable: false, replace: Replace::Always };
}

/// What a different link-layer address does to a resolved (reachable or stale) entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// It replaces the cached one (Linux NEIGH_UPDATE_F_OVERRIDE).
    Always,
    /// Only if the entry has not changed for `locktime_ns`: of several ARP replies in a row the
    /// first wins (Linux `arp_process`).
    AfterLocktime,
    /// Never; a reachable entry goes stale (NEIGH_UPDATE_F_WEAK_OVERRIDE: an advertisement
    /// without the Override flag, RFC 4861 section 7.2.5).
    Weak,
    /// Never.
    Never,
}

/// The state of an entry, for display and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborState {
    Incomplete,
    Reachable,
    Stale,
}

struct Entry {
    addr: [u8; 16],
    mac: EthernetAddress,
    list: u8,
    /// Requests sent in the current round (incomplete: since creation; stale: probes).
    probes: u8,
    q_len: u16,
    /// Incomplete: when the next request is due. Stale: end of the delay or time of the next
    /// probe; [`UNUSED`] before the first use.
    next_probe_at: u64,
    /// Confirmed: end of reachability. Unconfirmed: when learned (stale since).
    expires_at: u64,
    /// When an [`Update`] last changed the address or the state (Linux `updated`).
    updated_at: u64,
    prev: u32,
    next: u32,
    q_head: u32,
    q_tail: u32,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

struct Node<P> {
    packet: Option<P>,
    next: u32,
}

/// The pending packets of all entries: a slab of singly-linked nodes with a free list.
struct Pool<P> {
    nodes: Vec<Node<P>>,
    free: u32,
    used: usize,
    limit: usize,
}

impl<P> Pool<P> {
    fn alloc(&mut self, packet: P) -> Result<u32, P> {
        if self.used >= self.limit {
            return Err(packet);
        }
        self.used += 1;
        if self.free != NIL {
            let i = self.free;
            let n = &mut self.nodes[i as usize];
            self.free = n.next;
            n.packet = Some(packet);
            n.next = NIL;
            Ok(i)
        } else {
            self.nodes.push(Node { packet: Some(packet), next: NIL });
            Ok(self.nodes.len() as u32 - 1)
        }
    }

    /// Frees node `i`; returns its packet and the next node.
    fn take(&mut self, i: u32) -> (Option<P>, u32) {
        let n = &mut self.nodes[i as usize];
        let packet = n.packet.take();
        let next = n.next;
        n.next = self.free;
        self.free = i;
        self.used -= 1;
        (packet, next)
    }

    /// Drops a chain of packets; returns how many.
    fn drop_chain(&mut self, mut i: u32) -> u64 {
        let mut n = 0;
        while i != NIL {
            i = self.take(i).1;
            n += 1;
        }
        n
    }
}

/// The packets that were waiting for an address, in the order they were queued. Dropping it
/// early drops the rest.
pub struct Drain<'a, P> {
    pool: &'a mut Pool<P>,
    head: u32,
}

impl<P> Iterator for Drain<'_, P> {
    type Item = P;

    fn next(&mut self) -> Option<P> {
        while self.head != NIL {
            let (packet, next) = self.pool.take(self.head);
            self.head = next;
            if packet.is_some() {
                return packet;
            }
        }
        None
    }
}

impl<P> Drop for Drain<'_, P> {
    fn drop(&mut self) {
        self.pool.drop_chain(self.head);
    }
}

/// The Ethernet address of a destination that needs no resolution: IPv4 limited broadcast and
/// multicast (RFC 1112 §6.4), IPv6 multicast (RFC 2464 §7).
pub fn multicast_mac(ip: IpAddress) -> Option<EthernetAddress> {
    match ip {
        IpAddress::V4(a) if a.is_broadcast() => Some(EthernetAddress::BROADCAST),
        IpAddress::V4(a) if a.is_multicast() => {
            Some(EthernetAddress([0x01, 0x00, 0x5e, a.0[1] & 0x7f, a.0[2], a.0[3]]))
        }
        IpAddress::V6(a) if a.0[0] == 0xff => Some(EthernetAddress([0x33, 0x33, a.0[12], a.0[13], a.0[14], a.0[15]])),
        _ => None,
    }
}

/// The neighbor cache of one interface, queueing packets of type `P`.
pub struct NeighborCache<P> {
    cfg: NeighborConfig,
    index: RawTable<AddrPort, u32>,
    entries: Vec<Entry>,
    free: u32,
    lists: [List; 3],
    pool: Pool<P>,
    stats: NeighborStats,
}

fn key(addr: [u8; 16]) -> AddrPort {
    AddrPort { addr, port: 0 }
}

impl<P> NeighborCache<P> {
    /// An empty cache. Its index is sized for `capacity` up front.
    pub fn new(cfg: NeighborConfig) -> Self {
        assert!(cfg.capacity > 0 && cfg.capacity < NIL as usize, "neighbor cache capacity");
        assert!(cfg.max_probes > 0, "neighbor max_probes must be at least 1");
        NeighborCache {
            index: RawTable::with_capacity(cfg.capacity, cfg.seed),
            entries: Vec::new(),
            free: NIL,
            lists: [List { head: NIL, tail: NIL }; 3],
            pool: Pool { nodes: Vec::new(), free: NIL, used: 0, limit: cfg.queue_total },
            stats: NeighborStats::default(),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NeighborConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &NeighborStats {
        &self.stats
    }

    /// Entries in the cache.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// Packets waiting for a resolution.
    pub fn pending(&self) -> usize {
        self.pool.used
    }

    /// The addresses being resolved (incomplete entries), oldest first.
    pub fn incomplete(&self) -> impl Iterator<Item = IpAddress> + '_ {
        let mut at = self.lists[INCOMPLETE as usize].head;
        std::iter::from_fn(move || {
            let e = self.entries.get(at as usize)?;
            at = e.next;
            Some(crate::shard::table::from16(e.addr))
        })
    }

    /// The state and address of `ip`'s entry at `now`.
    pub fn state(&self, ip: IpAddress, now: u64) -> Option<(NeighborState, Option<EthernetAddress>)> {
        let &i = self.index.get(&key(addr16(ip)))?;
        let e = &self.entries[i as usize];
        Some(match e.list {
            INCOMPLETE => (NeighborState::Incomplete, None),
            CONFIRMED if now < e.expires_at => (NeighborState::Reachable, Some(e.mac)),
            _ => (NeighborState::Stale, Some(e.mac)),
        })
    }

    /// The Ethernet address for next hop `ip`, and whether a request should go out now. On a
    /// `Miss`, queue the packet with [`NeighborCache::enqueue`].
    #[inline]
    pub fn lookup(&mut self, ip: IpAddress, now: u64) -> Lookup {
        if let Some(mac) = multicast_mac(ip) {
            return Lookup::Hit { mac, send_request: false };
        }
        let addr = addr16(ip);
        let Some(&i) = self.index.get(&key(addr)) else { return self.start(addr, now) };
        let e = &self.entries[i as usize];
        match e.list {
            CONFIRMED if now < e.expires_at => Lookup::Hit { mac: e.mac, send_request: false },
            INCOMPLETE => {
                if now < e.next_probe_at {
                    Lookup::Miss { send_request: false }
                } else if self.retry(i, now) {
                    Lookup::Miss { send_request: true }
                } else {
                    self.start(addr, now)
                }
            }
            _ => self.use_stale(i, now),
        }
    }

    /// Queues `packet` for `ip`, whose lookup was a `Miss`. When the address's queue is full its
    /// oldest packet is dropped. `Err` gives the packet back (counted as dropped; the caller
    /// frees it): no resolution is pending for `ip` (the cache was full), or all queues together
    /// are full.
    pub fn enqueue(&mut self, ip: IpAddress, packet: P) -> Result<(), P> {
        let i = match self.index.get(&key(addr16(ip))) {
            Some(&i) if self.entries[i as usize].list == INCOMPLETE => i,
            _ => {
                self.stats.drop_no_entry += 1;
                return Err(packet);
            }
        };
        if self.entries[i as usize].q_len as usize >= self.cfg.queue_per_entry {
            let head = self.entries[i as usize].q_head;
            if head == NIL {
                // A per-entry limit of zero.
                self.stats.drop_queue_overflow += 1;
                return Err(packet);
            }
            let (_, next) = self.pool.take(head);
            let e = &mut self.entries[i as usize];
            e.q_head = next;
            if next == NIL {
                e.q_tail = NIL;
            }
            e.q_len -= 1;
            self.stats.drop_queue_overflow += 1;
        }
        let node = match self.pool.alloc(packet) {
            Ok(node) => node,
            Err(packet) => {
                self.stats.drop_queue_limit += 1;
                return Err(packet);
            }
        };
        let e = &mut self.entries[i as usize];
        if e.q_tail == NIL {
            e.q_head = node;
        } else {
            self.pool.nodes[e.q_tail as usize].next = node;
        }
        e.q_tail = node;
        e.q_len += 1;
        Ok(())
    }

    /// A message says `ip` is at `mac`; `update` says how far that may change the cache (see
    /// the module doc). An incomplete entry that gets its address gives back its waiting
    /// packets, to be sent to `mac`.
    pub fn update(&mut self, ip: IpAddress, mac: EthernetAddress, now: u64, update: Update) -> Drain<'_, P> {
        let addr = addr16(ip);
        let mut head = NIL;
        match self.index.get(&key(addr)) {
            None if update.create => {
                if let Some(i) = self.alloc(addr, now) {
                    self.entries[i as usize].mac = mac;
                    self.set_state(i, update.reachable, now);
                }
            }
            None => {}
            Some(&i) => {
                let e = &self.entries[i as usize];
                let reachable = e.list == CONFIRMED && now < e.expires_at;
                if e.list == INCOMPLETE {
                    head = self.resolve(i, mac);
                    self.set_state(i, update.reachable, now);
                } else if e.mac == mac {
                    if update.reachable && reachable {
                        self.set_confirmed(i, now);
                    } else if update.reachable {
                        self.set_state(i, true, now);
                    }
                } else {
                    let replace = match update.replace {
                        Replace::Always => true,
                        Replace::AfterLocktime => now >= e.updated_at.saturating_add(self.cfg.locktime_ns),
                        Replace::Weak | Replace::Never => false,
                    };
                    if replace {
                        self.resolve(i, mac);
                        self.set_state(i, update.reachable, now);
                    } else if update.replace == Replace::Weak && reachable {
                        self.set_state(i, false, now);
                    }
                }
            }
        }
        Drain { pool: &mut self.pool, head }
    }

    /// Upper-layer proof that `ip` is reachable (TCP forward progress): a resolved entry becomes
    /// reachable again without a request. Unknown and incomplete addresses are ignored.
    pub fn confirm(&mut self, ip: IpAddress, now: u64) {
        if let Some(&i) = self.index.get(&key(addr16(ip))) {
            if self.entries[i as usize].list != INCOMPLETE {
                self.set_confirmed(i, now);
            }
        }
    }

    /// Removes `ip`'s entry, dropping (and counting) its waiting packets.
    pub fn remove(&mut self, ip: IpAddress) -> bool {
        match self.index.get(&key(addr16(ip))) {
            Some(&i) => {
                self.release(i);
                true
            }
            None => false,
        }
    }

    /// Runs the request timers due at `now`: calls `send_request(ip)` for each incomplete entry
    /// due another request, and gives up on those out of requests (dropping their packets).
    /// Costs O(1) per due entry; the caller wakes for [`NeighborCache::next_deadline`].
    pub fn expire(&mut self, now: u64, mut send_request: impl FnMut(IpAddress)) {
        loop {
            let i = self.lists[INCOMPLETE as usize].head;
            if i == NIL || self.entries[i as usize].next_probe_at > now {
                return;
            }
            let addr = self.entries[i as usize].addr;
            if self.retry(i, now) {
                send_request(from16(addr));
            }
        }
    }

    /// When [`NeighborCache::expire`] next has work: the earliest request retry or give-up.
    pub fn next_deadline(&self) -> Option<u64> {
        let i = self.lists[INCOMPLETE as usize].head;
        (i != NIL).then(|| self.entries[i as usize].next_probe_at)
    }

    /// A new incomplete entry for `addr`, asking for the first request.
    fn start(&mut self, addr: [u8; 16], now: u64) -> Lookup {
        let Some(i) = self.alloc(addr, now) else {
            self.stats.table_full += 1;
            return Lookup::Miss { send_request: false };
        };
        let e = &mut self.entries[i as usize];
        e.probes = 1;
        e.next_probe_at = now.saturating_add(self.cfg.retrans_ns);
        self.push_back(i, INCOMPLETE);
        self.stats.requests += 1;
        Lookup::Miss { send_request: true }
    }

    /// An incomplete entry's request timer came: another request (true) or give up (false; the
    /// entry is gone).
    fn retry(&mut self, i: u32, now: u64) -> bool {
        let e = &mut self.entries[i as usize];
        if e.probes < self.cfg.max_probes {
            e.probes += 1;
            e.next_probe_at = now.saturating_add(self.cfg.retrans_ns);
            self.unlink(i);
            self.push_back(i, INCOMPLETE);
            self.stats.requests += 1;
            true
        } else {
            self.stats.failed += 1;
            self.release(i);
            false
        }
    }

    fn use_stale(&mut self, i: u32, now: u64) -> Lookup {
        let e = &mut self.entries[i as usize];
        let mac = e.mac;
        if e.next_probe_at == UNUSED {
            e.next_probe_at = now.saturating_add(self.cfg.delay_ns);
            Lookup::Hit { mac, send_request: false }
        } else if now < e.next_probe_at {
            Lookup::Hit { mac, send_request: false }
        } else if e.probes < self.cfg.max_probes {
            e.probes += 1;
            e.next_probe_at = now.saturating_add(self.cfg.retrans_ns);
            self.stats.requests += 1;
            Lookup::Hit { mac, send_request: true }
        } else {
            // Unanswered probes: the neighbor is gone or moved.
            let addr = e.addr;
            self.stats.failed += 1;
            self.release(i);
            self.start(addr, now)
        }
    }

    /// Gives an entry its address; returns its waiting packets (an incomplete entry's queue).
    fn resolve(&mut self, i: u32, mac: EthernetAddress) -> u32 {
        let e = &mut self.entries[i as usize];
        if e.list == INCOMPLETE {
            self.stats.resolved += 1;
        }
        e.mac = mac;
        let head = std::mem::replace(&mut e.q_head, NIL);
        e.q_tail = NIL;
        e.q_len = 0;
        head
    }

    /// An update's outcome for entry `i`: reachable or stale, changed now.
    fn set_state(&mut self, i: u32, reachable: bool, now: u64) {
        if reachable {
            self.set_confirmed(i, now);
        } else {
            self.set_unconfirmed(i, now);
        }
        self.entries[i as usize].updated_at = now;
    }

    fn set_confirmed(&mut self, i: u32, now: u64) {
        let e = &mut self.entries[i as usize];
        e.expires_at = now.saturating_add(self.cfg.reachable_ns);
        e.probes = 0;
        e.next_probe_at = UNUSED;
        self.unlink(i);
        self.push_back(i, CONFIRMED);
    }

    fn set_unconfirmed(&mut self, i: u32, now: u64) {
        let e = &mut self.entries[i as usize];
        e.expires_at = now;
        e.probes = 0;
        e.next_probe_at = UNUSED;
        self.unlink(i);
        self.push_back(i, UNCONFIRMED);
    }

    /// A fresh entry (linked in no list), evicting the oldest stale entry when full.
    fn alloc(&mut self, addr: [u8; 16], now: u64) -> Option<u32> {
        if self.index.len() >= self.cfg.capacity && !self.evict(now) {
            return None;
        }
        let fresh = Entry {
            addr,
            mac: EthernetAddress([0; 6]),
            list: FREE,
            probes: 0,
            q_len: 0,
            next_probe_at: UNUSED,
            expires_at: 0,
            updated_at: now,
            prev: NIL,
            next: NIL,
            q_head: NIL,
            q_tail: NIL,
        };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.entries[i as usize].next;
            self.entries[i as usize] = fresh;
            i
        } else {
            self.entries.push(fresh);
            self.entries.len() as u32 - 1
        };
        self.index.insert(key(addr), i);
        Some(i)
    }

    /// Evicts the entry that has been stale longest: the head of the confirmed FIFO if its
    /// reachability ran out before the head of the learned FIFO was learned, else that one.
    fn evict(&mut self, now: u64) -> bool {
        let confirmed = self.lists[CONFIRMED as usize].head;
        let learned = self.lists[UNCONFIRMED as usize].head;
        let stale_since = |i: u32| (i != NIL).then(|| self.entries[i as usize].expires_at).filter(|&t| t <= now);
        let victim = match (stale_since(confirmed), stale_since(learned)) {
            (Some(a), Some(b)) => {
                if a <= b {
                    confirmed
                } else {
                    learned
                }
            }
            (Some(_), None) => confirmed,
            (None, Some(_)) => learned,
            (None, None) => return false,
        };
        self.stats.evicted += 1;
        self.release(victim);
        true
    }

    /// Removes entry `i` from everything, dropping its packets.
    fn release(&mut self, i: u32) {
        self.unlink(i);
        let e = &mut self.entries[i as usize];
        let head = std::mem::replace(&mut e.q_head, NIL);
        e.q_tail = NIL;
        e.q_len = 0;
        e.list = FREE;
        e.next = self.free;
        let addr = e.addr;
        self.free = i;
        self.index.remove(&key(addr));
        self.stats.drop_unresolved += self.pool.drop_chain(head);
    }

    fn unlink(&mut self, i: u32) {
        let e = &self.entries[i as usize];
        if e.list == FREE {
            return;
        }
        let (list, prev, next) = (e.list as usize, e.prev, e.next);
        if prev == NIL {
            self.lists[list].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        let e = &mut self.entries[i as usize];
        e.list = FREE;
        e.prev = NIL;
        e.next = NIL;
    }

    fn push_back(&mut self, i: u32, list: u8) {
        let tail = self.lists[list as usize].tail;
        let e = &mut self.entries[i as usize];
        e.list = list;
        e.prev = tail;
        e.next = NIL;
        if tail == NIL {
            self.lists[list as usize].head = i;
        } else {
            self.entries[tail as usize].next = i;
        }
        self.lists[list as usize].tail = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;
    use wire::{Ipv4Address, Ipv6Address};

    const SEC: u64 = 1_000_000_000;
    /// A solicited advertisement with Override: an existing entry takes the address, reachable.
    const ANSWER: Update = Update { create: false, reachable: true, replace: Replace::Always };
    const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
    const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);

    fn ip(d: u8) -> IpAddress {
        Ipv4Address::new(10, 0, 0, d).into()
    }

    fn cache() -> NeighborCache<u32> {
        NeighborCache::new(NeighborConfig::default())
    }

    fn miss(send_request: bool) -> Lookup {
        Lookup::Miss { send_request }
    }

    fn hit(mac: EthernetAddress, send_request: bool) -> Lookup {
        Lookup::Hit { mac, send_request }
    }

    #[test]
    fn miss_queue_fill_hit() {
        let mut c = cache();
        assert_eq!(c.lookup(ip(1), 0), miss(true));
        assert_eq!(c.enqueue(ip(1), 1), Ok(()));
        assert_eq!(c.lookup(ip(1), SEC / 2), miss(false), "one request per second");
        assert_eq!(c.enqueue(ip(1), 2), Ok(()));
        assert_eq!(c.pending(), 2);
        assert_eq!(c.state(ip(1), SEC / 2), Some((NeighborState::Incomplete, None)));
        let drained: Vec<u32> = c.update(ip(1), MAC_A, SEC / 2, ANSWER).collect();
        assert_eq!(drained, vec![1, 2]);
        assert_eq!(c.pending(), 0);
        assert_eq!(c.lookup(ip(1), SEC), hit(MAC_A, false));
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Reachable, Some(MAC_A))));
        assert_eq!(c.stats().resolved, 1);
        assert_eq!(c.stats().requests, 1);
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn retries_by_timer_then_give_up() {
        let mut c = cache();
        assert_eq!(c.lookup(ip(1), 0), miss(true));
        c.enqueue(ip(1), 7).unwrap();
        assert_eq!(c.next_deadline(), Some(SEC));
        let mut sent = Vec::new();
        c.expire(SEC - 1, |ip| sent.push(ip));
        assert!(sent.is_empty());
        c.expire(SEC, |ip| sent.push(ip));
        assert_eq!(sent, vec![ip(1)]);
        assert_eq!(c.lookup(ip(1), SEC + SEC / 2), miss(false));
        c.expire(2 * SEC, |ip| sent.push(ip));
        assert_eq!(sent.len(), 2, "plus the first, from lookup: three requests in all");
        assert_eq!(c.next_deadline(), Some(3 * SEC));
        c.expire(3 * SEC, |ip| sent.push(ip));
        assert_eq!(sent.len(), 2, "gave up: no fourth request");
        assert!(c.is_empty());
        assert_eq!(c.pending(), 0);
        let s = *c.stats();
        assert_eq!((s.requests, s.failed, s.drop_unresolved), (3, 1, 1));
        // A late reply does not create an entry.
        assert_eq!(c.update(ip(1), MAC_A, 3 * SEC, ANSWER).count(), 0);
        assert!(c.is_empty());
    }

    #[test]
    fn lazy_retry_and_give_up_on_lookup() {
        let mut c = cache();
        assert_eq!(c.lookup(ip(1), 0), miss(true));
        c.enqueue(ip(1), 1).unwrap();
        assert_eq!(c.lookup(ip(1), SEC), miss(true));
        assert_eq!(c.lookup(ip(1), 2 * SEC), miss(true));
        // Out of requests: the queued packet is dropped, and this new packet starts over.
        assert_eq!(c.lookup(ip(1), 3 * SEC), miss(true));
        assert_eq!(c.stats().drop_unresolved, 1);
        assert_eq!(c.stats().failed, 1);
        assert_eq!(c.pending(), 0);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn per_entry_queue_drops_oldest() {
        let mut c = NeighborCache::new(NeighborConfig { queue_per_entry: 3, ..NeighborConfig::default() });
        c.lookup(ip(1), 0);
        for p in 1..=5 {
            c.enqueue(ip(1), p).unwrap();
        }
        assert_eq!(c.stats().drop_queue_overflow, 2);
        assert_eq!(c.pending(), 3);
        assert_eq!(c.update(ip(1), MAC_A, 0, ANSWER).collect::<Vec<_>>(), vec![3, 4, 5]);
    }

    #[test]
    fn global_queue_limit() {
        let mut c =
            NeighborCache::new(NeighborConfig { queue_total: 4, queue_per_entry: 3, ..NeighborConfig::default() });
        c.lookup(ip(1), 0);
        c.lookup(ip(2), 0);
        for p in 0..3 {
            c.enqueue(ip(1), p).unwrap();
        }
        c.enqueue(ip(2), 10).unwrap();
        assert_eq!(c.enqueue(ip(2), 11), Err(11));
        assert_eq!(c.stats().drop_queue_limit, 1);
        // A full entry still rotates its own queue.
        assert_eq!(c.enqueue(ip(1), 3), Ok(()));
        assert_eq!(c.pending(), 4);
        // Nothing pending for this address.
        assert_eq!(c.enqueue(ip(3), 20), Err(20));
        assert_eq!(c.stats().drop_no_entry, 1);
        assert_eq!(c.update(ip(2), MAC_B, 0, ANSWER).collect::<Vec<_>>(), vec![10]);
        assert_eq!(c.enqueue(ip(2), 12), Err(12), "resolved: nothing to queue for");
    }

    #[test]
    fn reachable_stale_delay_probe_fail() {
        let mut c = cache();
        c.lookup(ip(1), 0);
        let _ = c.update(ip(1), MAC_A, 0, ANSWER);
        assert_eq!(c.lookup(ip(1), 30 * SEC - 1), hit(MAC_A, false));
        // Stale: still used; the delay starts at first use.
        assert_eq!(c.lookup(ip(1), 30 * SEC), hit(MAC_A, false));
        assert_eq!(c.state(ip(1), 30 * SEC).unwrap().0, NeighborState::Stale);
        assert_eq!(c.lookup(ip(1), 35 * SEC - 1), hit(MAC_A, false));
        // Unicast probes, one per second.
        assert_eq!(c.lookup(ip(1), 35 * SEC), hit(MAC_A, true));
        assert_eq!(c.lookup(ip(1), 35 * SEC + SEC / 2), hit(MAC_A, false));
        assert_eq!(c.lookup(ip(1), 36 * SEC), hit(MAC_A, true));
        assert_eq!(c.lookup(ip(1), 37 * SEC), hit(MAC_A, true));
        // No answer to three probes: start over with a broadcast request.
        assert_eq!(c.lookup(ip(1), 38 * SEC), miss(true));
        assert_eq!(c.state(ip(1), 38 * SEC).unwrap().0, NeighborState::Incomplete);
        assert_eq!(c.stats().failed, 1);
    }

    #[test]
    fn confirmation_refreshes_a_stale_entry() {
        let mut c = cache();
        c.lookup(ip(1), 0);
        let _ = c.update(ip(1), MAC_A, 0, ANSWER);
        assert_eq!(c.lookup(ip(1), 31 * SEC), hit(MAC_A, false));
        c.confirm(ip(1), 32 * SEC);
        assert_eq!(c.lookup(ip(1), 40 * SEC), hit(MAC_A, false));
        assert_eq!(c.state(ip(1), 40 * SEC).unwrap().0, NeighborState::Reachable);
        // A reply during probing does too.
        assert_eq!(c.lookup(ip(1), 62 * SEC), hit(MAC_A, false));
        assert_eq!(c.lookup(ip(1), 67 * SEC), hit(MAC_A, true));
        let _ = c.update(ip(1), MAC_B, 67 * SEC, ANSWER);
        assert_eq!(c.lookup(ip(1), 68 * SEC), hit(MAC_B, false));
        // Confirming an unknown address does nothing.
        c.confirm(ip(9), 0);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn learn_from_peer_requests() {
        let mut c = cache();
        // Unknown: a stale entry.
        assert_eq!(c.update(ip(1), MAC_A, 0, Update::REQUEST).count(), 0);
        assert_eq!(c.state(ip(1), 0), Some((NeighborState::Stale, Some(MAC_A))));
        assert_eq!(c.lookup(ip(1), 0), hit(MAC_A, false));
        // Same address: untouched (the delay keeps running).
        let _ = c.update(ip(1), MAC_A, 4 * SEC, Update::REQUEST);
        assert_eq!(c.lookup(ip(1), 5 * SEC), hit(MAC_A, true));
        // A new address: updated, probing reset.
        let _ = c.update(ip(1), MAC_B, 5 * SEC, Update::REQUEST);
        assert_eq!(c.lookup(ip(1), 6 * SEC), hit(MAC_B, false));
        // An incomplete entry gets its address and its packets back.
        c.lookup(ip(2), 0);
        c.enqueue(ip(2), 5).unwrap();
        assert_eq!(c.update(ip(2), MAC_A, SEC, Update::REQUEST).collect::<Vec<_>>(), vec![5]);
        assert_eq!(c.state(ip(2), SEC), Some((NeighborState::Stale, Some(MAC_A))));
        assert_eq!(c.stats().resolved, 1);
    }

    #[test]
    fn only_the_neighbors_own_request_makes_an_entry() {
        let mut c = cache();
        let replies = [
            Update { create: false, reachable: true, replace: Replace::AfterLocktime },
            Update { create: false, reachable: false, replace: Replace::Always },
            Update { create: false, reachable: true, replace: Replace::Weak },
            Update { create: false, reachable: true, replace: Replace::Never },
        ];
        for u in replies {
            assert_eq!(c.update(ip(1), MAC_A, 0, u).count(), 0);
            assert!(c.is_empty(), "{u:?}");
        }
        let _ = c.update(ip(1), MAC_A, 0, Update::REQUEST);
        assert_eq!(c.state(ip(1), 0), Some((NeighborState::Stale, Some(MAC_A))));
    }

    /// A cache whose request for ip(1) at 0 was answered with MAC_A by `u` (which proves
    /// reachability).
    fn resolved_by(u: Update) -> NeighborCache<u32> {
        let mut c = cache();
        c.lookup(ip(1), 0);
        let _ = c.update(ip(1), MAC_A, 0, u);
        assert_eq!(c.state(ip(1), 0), Some((NeighborState::Reachable, Some(MAC_A))));
        c
    }

    #[test]
    fn arp_replies_replace_an_address_only_after_locktime() {
        let arp_reply = Update { create: false, reachable: true, replace: Replace::AfterLocktime };
        let mut c = resolved_by(arp_reply);
        // A second answer within a second of the first loses.
        let _ = c.update(ip(1), MAC_B, SEC - 1, arp_reply);
        assert_eq!(c.state(ip(1), SEC - 1), Some((NeighborState::Reachable, Some(MAC_A))));
        // The same address again changes nothing (nor restarts the lock).
        let _ = c.update(ip(1), MAC_A, SEC / 2, arp_reply);
        let _ = c.update(ip(1), MAC_B, SEC, arp_reply);
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Reachable, Some(MAC_B))));
        // A broadcast reply with the same address does not demote a reachable entry.
        let broadcast = Update { reachable: false, ..arp_reply };
        let _ = c.update(ip(1), MAC_B, 3 * SEC, broadcast);
        assert_eq!(c.state(ip(1), 3 * SEC), Some((NeighborState::Reachable, Some(MAC_B))));
    }

    #[test]
    fn rfc4861_advert_without_override_keeps_the_address() {
        // RFC 4861 7.2.5.
        let advert = |solicited, override_| Update {
            create: false,
            reachable: solicited,
            replace: if override_ { Replace::Always } else { Replace::Weak },
        };
        let mut c = cache();
        c.lookup(ip(1), 0);
        c.enqueue(ip(1), 9).unwrap();
        // Incomplete: any advertisement resolves it, reachable if solicited.
        assert_eq!(c.update(ip(1), MAC_A, 0, advert(false, false)).collect::<Vec<_>>(), vec![9]);
        assert_eq!(c.state(ip(1), 0), Some((NeighborState::Stale, Some(MAC_A))));
        let _ = c.update(ip(1), MAC_A, 0, advert(true, false));
        assert_eq!(c.state(ip(1), 0), Some((NeighborState::Reachable, Some(MAC_A))));
        // Another address without Override: a reachable entry goes stale, its address kept...
        let _ = c.update(ip(1), MAC_B, SEC, advert(true, false));
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Stale, Some(MAC_A))));
        // ...and a stale one ignores it.
        let _ = c.update(ip(1), MAC_B, SEC, advert(true, false));
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Stale, Some(MAC_A))));
        // With Override the address is replaced: stale if unsolicited, reachable if solicited.
        let _ = c.update(ip(1), MAC_B, SEC, advert(false, true));
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Stale, Some(MAC_B))));
        let _ = c.update(ip(1), MAC_B, SEC, advert(true, true));
        assert_eq!(c.state(ip(1), SEC), Some((NeighborState::Reachable, Some(MAC_B))));
    }

    #[test]
    fn never_replace_resolves_and_confirms_only() {
        let glean = Update { create: false, reachable: true, replace: Replace::Never };
        let mut c = resolved_by(glean);
        let _ = c.update(ip(1), MAC_B, 5 * SEC, glean);
        assert_eq!(c.state(ip(1), 5 * SEC), Some((NeighborState::Reachable, Some(MAC_A))));
        let _ = c.update(ip(1), MAC_B, 40 * SEC, glean);
        assert_eq!(c.state(ip(1), 40 * SEC), Some((NeighborState::Stale, Some(MAC_A))));
        let _ = c.update(ip(1), MAC_A, 40 * SEC, glean);
        assert_eq!(c.state(ip(1), 40 * SEC), Some((NeighborState::Reachable, Some(MAC_A))));
    }

    #[test]
    fn eviction_takes_the_oldest_stale_entry() {
        let mut c: NeighborCache<u32> = NeighborCache::new(NeighborConfig { capacity: 3, ..NeighborConfig::default() });
        c.lookup(ip(1), 0);
        let _ = c.update(ip(1), MAC_A, 0, ANSWER);
        c.lookup(ip(2), SEC);
        let _ = c.update(ip(2), MAC_A, SEC, ANSWER);
        let _ = c.update(ip(3), MAC_B, 2 * SEC, Update::REQUEST);
        assert_eq!(c.len(), 3);
        // 1 and 2 are reachable: the learned 3 goes.
        assert_eq!(c.lookup(ip(4), 3 * SEC), miss(true));
        assert_eq!(c.state(ip(3), 3 * SEC), None);
        assert_eq!(c.stats().evicted, 1);
        // Full of reachable and incomplete entries: refused and counted.
        assert_eq!(c.lookup(ip(5), 4 * SEC), miss(false));
        assert_eq!(c.enqueue(ip(5), 1), Err(1));
        assert_eq!(c.stats().table_full, 1);
        let _ = c.update(ip(4), MAC_B, 4 * SEC, ANSWER);
        // At 40 s all are stale; 1 has been stale longest (since 30 s).
        assert_eq!(c.lookup(ip(5), 40 * SEC), miss(true));
        assert_eq!(c.state(ip(1), 40 * SEC), None);
        assert!(c.state(ip(2), 40 * SEC).is_some());
        let _ = c.update(ip(5), MAC_A, 40 * SEC, ANSWER);
        assert!(c.remove(ip(4)));
        let _ = c.update(ip(6), MAC_A, 40 * SEC, Update::REQUEST);
        // 2 has been stale since 31 s, the learned 6 since 40 s: 2 goes.
        assert_eq!(c.lookup(ip(7), 41 * SEC), miss(true));
        assert_eq!(c.state(ip(2), 41 * SEC), None);
        assert!(c.state(ip(6), 41 * SEC).is_some());
        let _ = c.update(ip(7), MAC_B, 41 * SEC, ANSWER);
        // At 80 s: 5 stale since 70 s, 7 since 71 s, 6 since 40 s: 6 goes.
        assert_eq!(c.lookup(ip(8), 80 * SEC), miss(true));
        assert_eq!(c.state(ip(6), 80 * SEC), None);
        assert!(c.state(ip(5), 80 * SEC).is_some());
        assert!(c.state(ip(7), 80 * SEC).is_some());
        assert_eq!(c.stats().evicted, 4);
    }

    #[test]
    fn multicast_and_broadcast_need_no_entry() {
        let mut c = cache();
        let group4 = IpAddress::V4(Ipv4Address::new(239, 129, 2, 3));
        assert_eq!(c.lookup(group4, 0), hit(EthernetAddress([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]), false));
        assert_eq!(c.lookup(Ipv4Address::BROADCAST.into(), 0), hit(EthernetAddress::BROADCAST, false));
        let group6: IpAddress = Ipv6Address("ff02::1:ff12:3456".parse::<std::net::Ipv6Addr>().unwrap().octets()).into();
        assert_eq!(c.lookup(group6, 0), hit(EthernetAddress([0x33, 0x33, 0xff, 0x12, 0x34, 0x56]), false));
        assert!(c.is_empty());
    }

    #[test]
    fn ipv6_neighbors() {
        let mut c = cache();
        let a: IpAddress = Ipv6Address("fe80::1".parse::<std::net::Ipv6Addr>().unwrap().octets()).into();
        assert_eq!(c.lookup(a, 0), miss(true));
        c.enqueue(a, 1).unwrap();
        let mut sent = Vec::new();
        c.expire(SEC, |ip| sent.push(ip));
        assert_eq!(sent, vec![a]);
        assert_eq!(c.update(a, MAC_A, SEC, ANSWER).collect::<Vec<_>>(), vec![1]);
        assert_eq!(c.lookup(a, SEC), hit(MAC_A, false));
    }

    /// Packets given up on are really dropped (their `Drop` runs), and dropping a `Drain` early
    /// drops the rest; the node slab is reused.
    #[test]
    fn dropped_packets_are_freed() {
        struct Pkt(Rc<Cell<u32>>);
        impl Drop for Pkt {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let drops = Rc::new(Cell::new(0));
        let mut c: NeighborCache<Pkt> = NeighborCache::new(NeighborConfig::default());
        for round in 0..3u64 {
            let t = round * 10 * SEC;
            c.lookup(ip(1), t);
            c.lookup(ip(2), t);
            for _ in 0..3 {
                assert!(c.enqueue(ip(1), Pkt(drops.clone())).is_ok());
                assert!(c.enqueue(ip(2), Pkt(drops.clone())).is_ok());
            }
            let mut d = c.update(ip(1), MAC_A, t, ANSWER);
            drop(d.next());
            drop(d);
            for s in 1..=3 {
                c.expire(t + s * SEC, |_| {});
            }
            assert_eq!(c.pending(), 0);
            assert!(c.remove(ip(1)));
        }
        assert_eq!(drops.get(), 18);
        assert_eq!(c.pool.nodes.len(), 6, "nodes reused across rounds");
        assert_eq!(c.stats().drop_unresolved, 9);
    }

    /// Many neighbors at once: each request timer is O(1) (expire only touches due entries).
    #[test]
    fn many_incomplete_entries_expire_in_order() {
        let mut c: NeighborCache<u32> =
            NeighborCache::new(NeighborConfig { capacity: 10_000, ..NeighborConfig::default() });
        for i in 0..10_000u32 {
            let a = IpAddress::V4(Ipv4Address((0x0a00_0000 + i).to_be_bytes()));
            assert_eq!(c.lookup(a, i as u64 * 1000), miss(true));
        }
        let mut n = 0;
        c.expire(SEC + 4_999_000, |_| n += 1);
        assert_eq!(n, 5_000);
        assert_eq!(c.next_deadline(), Some(SEC + 5_000_000));
    }
}
