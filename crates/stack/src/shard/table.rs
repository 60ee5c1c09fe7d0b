//! The shard's demux tables: established connections by 4-tuple ([`ConnTable`]) and listeners by
//! local address and port with wildcard fallback ([`ListenTable`]).
//!
//! It owns the hash tables and their hash function, and maps keys to caller values (typically a
//! connection's slab index). It must not know what a connection is, iterate over the table on the
//! per-packet path, or allocate except when growing (size it up front with `with_capacity` from
//! the configured connection limit and it never allocates).
//!
//! # Layout
//! Open addressing with Robin Hood linear probing and backward-shift deletion (no tombstones, so
//! lookups of absent keys stay short after any number of removals). Buckets are stored inline
//! (`Option<Bucket>`: a 32-bit hash, the key and the value; 44 bytes for a [`FourTuple`] and a
//! `u32`, the `Option` costing nothing because the stored hash is non-zero), so a lookup touches
//! one or two adjacent cache lines. The table doubles when it is 7/8 full; the stored hash makes
//! a resize a move without rehashing, but it still touches every entry: growing past 917,504
//! entries (2^20 to 2^21 buckets) measured about 50 ms in release, a one-off pause with a
//! transient 2× of the bucket memory (`perf_million_conns`), which is why the shard should
//! reserve its connection limit at start. Memory: 44 bytes per bucket for `u32` values, i.e.
//! 50-100 bytes per flow depending on the load (7/16 to 7/8).
//!
//! # Hash
//! A keyed folded-multiply hash (the construction of foldhash and wyhash: the 128-bit product of
//! two 64-bit words, high half xor low half), keyed with six 64-bit words expanded (splitmix64)
//! from a 128-bit seed the caller draws at random per table. It was chosen over SipHash-1-3
//! because it costs a few nanoseconds for a 36-byte 4-tuple against 15-20 for SipHash, and the
//! demux runs for every packet. Against hash flooding it relies on the seed being secret: a remote
//! peer chooses at most its address and port, cannot observe hash values, and without the keys
//! cannot aim inputs at one bucket; Robin Hood probing keeps even an unlucky distribution's probe
//! lengths short. It is not a cryptographic PRF (SipHash is, and is what [`crate::syncookie`] and
//! [`crate::ports`] use, where the output is visible on the wire).
//!
//! # Addresses
//! Addresses are stored as 16 bytes, IPv4 as the IPv4-mapped IPv6 address `::ffff:a.b.c.d`, so a
//! 4-tuple of either family is 36 bytes. An IPv6 packet whose address is itself IPv4-mapped
//! would alias an IPv4 flow: the IP layer drops those (RFC 4291 §2.5.5.2 keeps them off the wire;
//! `drop_bad_source`).

use std::num::NonZeroU32;

use wire::{IpAddress, Ipv4Address, Ipv6Address};

/// An address as the 16 bytes of an IPv6 address; IPv4 as `::ffff:a.b.c.d`.
#[inline]
pub(crate) fn addr16(addr: IpAddress) -> [u8; 16] {
    match addr {
        IpAddress::V4(a) => v4_mapped(a),
        IpAddress::V6(a) => a.0,
    }
}

#[inline]
pub(crate) fn v4_mapped(a: Ipv4Address) -> [u8; 16] {
    Ipv6Address::ipv4_mapped(a).0
}

/// The inverse of [`addr16`].
#[inline]
pub(crate) fn from16(a: [u8; 16]) -> IpAddress {
    let v6 = Ipv6Address(a);
    if v6.is_ipv4_mapped() {
        IpAddress::V4(Ipv4Address([a[12], a[13], a[14], a[15]]))
    } else {
        IpAddress::V6(v6)
    }
}

/// A TCP or UDP flow as seen from this host: 36 bytes, `Copy`, either IP family.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FourTuple {
    local_addr: [u8; 16],
    remote_addr: [u8; 16],
    local_port: u16,
    remote_port: u16,
}

impl FourTuple {
    /// A flow from `local` (address, port) to `remote`. Both should be of the same family.
    #[inline]
    pub fn new(local: (IpAddress, u16), remote: (IpAddress, u16)) -> Self {
        FourTuple {
            local_addr: addr16(local.0),
            remote_addr: addr16(remote.0),
            local_port: local.1,
            remote_port: remote.1,
        }
    }

    /// An IPv4 flow.
    #[inline]
    pub fn v4(local: Ipv4Address, local_port: u16, remote: Ipv4Address, remote_port: u16) -> Self {
        FourTuple { local_addr: v4_mapped(local), remote_addr: v4_mapped(remote), local_port, remote_port }
    }

    /// An IPv6 flow.
    #[inline]
    pub fn v6(local: Ipv6Address, local_port: u16, remote: Ipv6Address, remote_port: u16) -> Self {
        FourTuple { local_addr: local.0, remote_addr: remote.0, local_port, remote_port }
    }

    /// The local address and port.
    pub fn local(&self) -> (IpAddress, u16) {
        (from16(self.local_addr), self.local_port)
    }

    /// The remote address and port.
    pub fn remote(&self) -> (IpAddress, u16) {
        (from16(self.remote_addr), self.remote_port)
    }

    /// The local address as 16 bytes (IPv4-mapped for IPv4).
    pub fn local_addr_bytes(&self) -> &[u8; 16] {
        &self.local_addr
    }

    /// The remote address as 16 bytes (IPv4-mapped for IPv4).
    pub fn remote_addr_bytes(&self) -> &[u8; 16] {
        &self.remote_addr
    }

    /// The local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The remote port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// Whether this is an IPv4 flow.
    pub fn is_ipv4(&self) -> bool {
        matches!(from16(self.local_addr), IpAddress::V4(_))
    }
}

impl std::fmt::Debug for FourTuple {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (la, lp) = self.local();
        let (ra, rp) = self.remote();
        write!(f, "{la}:{lp}<->{ra}:{rp}")
    }
}

#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128) * (b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn word(bytes: &[u8; 16], half: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[half * 8..half * 8 + 8]);
    u64::from_le_bytes(w)
}

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The hash keys of one table, expanded from the caller's 128-bit seed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HashKeys([u64; 6]);

impl HashKeys {
    pub(crate) fn new(seed: u128) -> Self {
        let mut state = (seed as u64) ^ ((seed >> 64) as u64).rotate_left(32);
        let mut k = [0u64; 6];
        for (i, k) in k.iter_mut().enumerate() {
            if i == 3 {
                state ^= (seed >> 64) as u64;
            }
            *k = splitmix64(&mut state);
        }
        HashKeys(k)
    }
}

/// A key of a [`RawTable`]: equality and a keyed hash.
pub(crate) trait TableKey: Copy + Eq {
    fn hash(&self, keys: &HashKeys) -> u64;
}

impl TableKey for FourTuple {
    #[inline]
    fn hash(&self, k: &HashKeys) -> u64 {
        let k = &k.0;
        let a = fold_mul(word(&self.local_addr, 0) ^ k[0], word(&self.local_addr, 1) ^ k[1]);
        let b = fold_mul(word(&self.remote_addr, 0) ^ k[2], word(&self.remote_addr, 1) ^ k[3]);
        let ports = ((self.local_port as u64) << 16) | self.remote_port as u64;
        fold_mul(a ^ ports ^ k[4], b ^ k[5])
    }
}

/// A local address (16 bytes) and port: the key of listeners and bound sockets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct AddrPort {
    pub(crate) addr: [u8; 16],
    pub(crate) port: u16,
}

impl TableKey for AddrPort {
    #[inline]
    fn hash(&self, k: &HashKeys) -> u64 {
        let k = &k.0;
        let a = fold_mul(word(&self.addr, 0) ^ k[0], word(&self.addr, 1) ^ k[1]);
        fold_mul(a ^ self.port as u64 ^ k[4], k[5])
    }
}

struct Bucket<K, V> {
    /// The low 31 bits of the hash, with bit 31 set so that it is never zero.
    hash: NonZeroU32,
    key: K,
    value: V,
}

/// Robin Hood open addressing over any [`TableKey`]; [`ConnTable`] and [`ListenTable`] wrap it.
pub(crate) struct RawTable<K, V> {
    buckets: Vec<Option<Bucket<K, V>>>,
    /// `buckets.len() - 1`; the length is a power of two (or zero before the first insert).
    mask: usize,
    len: usize,
    keys: HashKeys,
}

const MIN_BUCKETS: usize = 8;

/// Buckets needed to hold `n` entries below the 7/8 load limit.
fn buckets_for(n: usize) -> usize {
    let need = n.checked_mul(8).expect("table capacity overflow").div_ceil(7);
    need.next_power_of_two().max(MIN_BUCKETS)
}

impl<K: TableKey, V> RawTable<K, V> {
    pub(crate) fn new(seed: u128) -> Self {
        RawTable { buckets: Vec::new(), mask: 0, len: 0, keys: HashKeys::new(seed) }
    }

    pub(crate) fn with_capacity(capacity: usize, seed: u128) -> Self {
        let mut t = Self::new(seed);
        t.reserve(capacity);
        t
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entries it holds before the next resize.
    pub(crate) fn capacity(&self) -> usize {
        self.buckets.len() / 8 * 7
    }

    pub(crate) fn reserve(&mut self, additional: usize) {
        let want = self.len.checked_add(additional).expect("table capacity overflow");
        if want > self.capacity() {
            self.resize(buckets_for(want));
        }
    }

    #[inline]
    fn hash32(&self, key: &K) -> NonZeroU32 {
        NonZeroU32::new(key.hash(&self.keys) as u32 | 1 << 31).expect("bit 31 is set")
    }

    #[inline]
    fn distance(&self, pos: usize, hash: NonZeroU32) -> usize {
        pos.wrapping_sub(hash.get() as usize) & self.mask
    }

    #[inline]
    fn find(&self, key: &K) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let hash = self.hash32(key);
        let mut pos = hash.get() as usize & self.mask;
        let mut dist = 0;
        loop {
            match &self.buckets[pos] {
                None => return None,
                Some(b) => {
                    if b.hash == hash && b.key == *key {
                        return Some(pos);
                    }
                    if self.distance(pos, b.hash) < dist {
                        return None;
                    }
                }
            }
            pos = (pos + 1) & self.mask;
            dist += 1;
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        let pos = self.find(key)?;
        self.buckets[pos].as_ref().map(|b| &b.value)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let pos = self.find(key)?;
        self.buckets[pos].as_mut().map(|b| &mut b.value)
    }

    /// Inserts or replaces; returns the value replaced.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.reserve(1);
        let hash = self.hash32(&key);
        let mut pos = hash.get() as usize & self.mask;
        let mut dist = 0;
        loop {
            match &mut self.buckets[pos] {
                None => break,
                Some(b) => {
                    if b.hash == hash && b.key == key {
                        return Some(std::mem::replace(&mut b.value, value));
                    }
                    let d = pos.wrapping_sub(b.hash.get() as usize) & self.mask;
                    if d < dist {
                        break;
                    }
                }
            }
            pos = (pos + 1) & self.mask;
            dist += 1;
        }
        self.shift_in(pos, Bucket { hash, key, value });
        self.len += 1;
        None
    }

    /// Puts `bucket` at `pos` and shifts the rest of the cluster one place on, which keeps the
    /// cluster ordered by home bucket (the Robin Hood invariant).
    #[inline]
    fn shift_in(&mut self, mut pos: usize, bucket: Bucket<K, V>) {
        let mut carry = Some(bucket);
        while let Some(b) = carry {
            carry = self.buckets[pos].replace(b);
            pos = (pos + 1) & self.mask;
        }
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let mut pos = self.find(key)?;
        let removed = self.buckets[pos].take().map(|b| b.value);
        // Backward shift: pull the rest of the cluster one place back until an empty bucket or
        // an entry already in its home bucket.
        loop {
            let next = (pos + 1) & self.mask;
            let pull = match &self.buckets[next] {
                Some(b) => self.distance(next, b.hash) > 0,
                None => false,
            };
            if !pull {
                break;
            }
            self.buckets[pos] = self.buckets[next].take();
            pos = next;
        }
        self.len -= 1;
        removed
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.buckets.iter().flatten().map(|b| (&b.key, &b.value))
    }

    fn resize(&mut self, buckets: usize) {
        debug_assert!(buckets.is_power_of_two() && buckets / 8 * 7 >= self.len);
        let mut fresh = Vec::with_capacity(buckets);
        fresh.resize_with(buckets, || None);
        let old = std::mem::replace(&mut self.buckets, fresh);
        self.mask = buckets - 1;
        for b in old.into_iter().flatten() {
            let mut pos = b.hash.get() as usize & self.mask;
            let mut dist = 0;
            while let Some(o) = &self.buckets[pos] {
                if self.distance(pos, o.hash) < dist {
                    break;
                }
                pos = (pos + 1) & self.mask;
                dist += 1;
            }
            self.shift_in(pos, b);
        }
    }

    /// The longest probe (distance from home bucket) in the table. Scans it: tests and stats.
    #[cfg(test)]
    pub(crate) fn max_probe(&self) -> usize {
        (0..self.buckets.len())
            .filter_map(|pos| self.buckets[pos].as_ref().map(|b| self.distance(pos, b.hash)))
            .max()
            .unwrap_or(0)
    }
}

/// Established flows by 4-tuple: the per-packet TCP/UDP demux.
pub struct ConnTable<V> {
    raw: RawTable<FourTuple, V>,
}

impl<V> ConnTable<V> {
    /// An empty table hashing with keys derived from `seed`, which should be random per table
    /// (per shard and per process start) and never leave the process.
    pub fn new(seed: u128) -> Self {
        ConnTable { raw: RawTable::new(seed) }
    }

    /// A table that holds `capacity` flows before it first grows.
    pub fn with_capacity(capacity: usize, seed: u128) -> Self {
        ConnTable { raw: RawTable::with_capacity(capacity, seed) }
    }

    /// Flows in the table.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// No flow in the table.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.raw.len() == 0
    }

    /// Flows it holds before the next resize.
    pub fn capacity(&self) -> usize {
        self.raw.capacity()
    }

    /// Makes room for `additional` more flows now (a resize is O(len)).
    pub fn reserve(&mut self, additional: usize) {
        self.raw.reserve(additional)
    }

    /// Adds or replaces the flow `key`; returns the value it replaced.
    #[inline]
    pub fn insert(&mut self, key: FourTuple, value: V) -> Option<V> {
        self.raw.insert(key, value)
    }

    /// The value of flow `key`.
    #[inline]
    pub fn get(&self, key: &FourTuple) -> Option<&V> {
        self.raw.get(key)
    }

    /// The value of flow `key`, mutably.
    #[inline]
    pub fn get_mut(&mut self, key: &FourTuple) -> Option<&mut V> {
        self.raw.get_mut(key)
    }

    /// Whether flow `key` is in the table.
    #[inline]
    pub fn contains_key(&self, key: &FourTuple) -> bool {
        self.raw.find(key).is_some()
    }

    /// Removes flow `key`; returns its value.
    #[inline]
    pub fn remove(&mut self, key: &FourTuple) -> Option<V> {
        self.raw.remove(key)
    }

    /// Every flow, in no particular order. O(capacity): for `pronghorn conns`, not the data path.
    pub fn iter(&self) -> impl Iterator<Item = (&FourTuple, &V)> + '_ {
        self.raw.iter()
    }
}

struct Listener<V> {
    value: V,
    v6only: bool,
}

/// Listening (or bound) sockets by local address and port. A lookup tries the exact address,
/// then the wildcard of the packet's family (`0.0.0.0` or `::`), then, for IPv4, a dual-stack
/// `::` listener (one not bound with `IPV6_V6ONLY`), as Linux does without `SO_REUSEPORT`.
/// At most three probes, none of them a scan.
///
/// It only refuses an exact duplicate; the wider bind conflict rules (`0.0.0.0:80` against a
/// dual-stack `:::80`, `SO_REUSEADDR`) belong to the socket layer.
pub struct ListenTable<V> {
    raw: RawTable<AddrPort, Listener<V>>,
}

const V4_ANY: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0];
const V6_ANY: [u8; 16] = [0; 16];

impl<V> ListenTable<V> {
    /// An empty table hashing with keys derived from `seed` (random per table).
    pub fn new(seed: u128) -> Self {
        ListenTable { raw: RawTable::new(seed) }
    }

    /// Listeners in the table.
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// No listener in the table.
    pub fn is_empty(&self) -> bool {
        self.raw.len() == 0
    }

    /// Adds a listener on `local` (address, port); the address may be a wildcard. `v6only` only
    /// matters for `::`: when false it also receives IPv4. `Err` gives the value back when that
    /// exact address and port are taken (`EADDRINUSE`).
    pub fn insert(&mut self, local: (IpAddress, u16), v6only: bool, value: V) -> Result<(), V> {
        let key = AddrPort { addr: addr16(local.0), port: local.1 };
        if self.raw.find(&key).is_some() {
            return Err(value);
        }
        self.raw.insert(key, Listener { value, v6only });
        Ok(())
    }

    /// Removes the listener bound to exactly `local`.
    pub fn remove(&mut self, local: (IpAddress, u16)) -> Option<V> {
        self.raw.remove(&AddrPort { addr: addr16(local.0), port: local.1 }).map(|l| l.value)
    }

    /// The listener bound to exactly `local` (no wildcard fallback).
    pub fn get(&self, local: (IpAddress, u16)) -> Option<&V> {
        self.raw.get(&AddrPort { addr: addr16(local.0), port: local.1 }).map(|l| &l.value)
    }

    /// [`ListenTable::get`], mutably.
    pub fn get_mut(&mut self, local: (IpAddress, u16)) -> Option<&mut V> {
        self.raw.get_mut(&AddrPort { addr: addr16(local.0), port: local.1 }).map(|l| &mut l.value)
    }

    /// The listener that receives a connection to `dst` (the packet's destination address and
    /// port): exact, then wildcard.
    #[inline]
    pub fn lookup(&self, dst: (IpAddress, u16)) -> Option<&V> {
        self.lookup_key(dst).and_then(|key| self.raw.get(&key)).map(|l| &l.value)
    }

    /// [`ListenTable::lookup`], mutably.
    pub fn lookup_mut(&mut self, dst: (IpAddress, u16)) -> Option<&mut V> {
        let key = self.lookup_key(dst)?;
        self.raw.get_mut(&key).map(|l| &mut l.value)
    }

    fn lookup_key(&self, dst: (IpAddress, u16)) -> Option<AddrPort> {
        let port = dst.1;
        let exact = AddrPort { addr: addr16(dst.0), port };
        if self.raw.find(&exact).is_some() {
            return Some(exact);
        }
        let v6_any = AddrPort { addr: V6_ANY, port };
        match dst.0 {
            IpAddress::V4(_) => {
                let v4_any = AddrPort { addr: V4_ANY, port };
                if self.raw.find(&v4_any).is_some() {
                    return Some(v4_any);
                }
                match self.raw.get(&v6_any) {
                    Some(l) if !l.v6only => Some(v6_any),
                    _ => None,
                }
            }
            IpAddress::V6(_) => self.raw.find(&v6_any).map(|_| v6_any),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn v4(a: u32) -> Ipv4Address {
        Ipv4Address(a.to_be_bytes())
    }

    fn v6(hi: u64, lo: u64) -> Ipv6Address {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&hi.to_be_bytes());
        b[8..].copy_from_slice(&lo.to_be_bytes());
        Ipv6Address(b)
    }

    #[test]
    fn four_tuple_is_compact_and_round_trips() {
        assert_eq!(std::mem::size_of::<FourTuple>(), 36);
        assert_eq!(std::mem::size_of::<Option<Bucket<FourTuple, u32>>>(), 44);
        let t = FourTuple::v4(v4(0x0a00_0001), 80, v4(0x0a00_0002), 40000);
        assert_eq!(t.local(), (IpAddress::V4(v4(0x0a00_0001)), 80));
        assert_eq!(t.remote(), (IpAddress::V4(v4(0x0a00_0002)), 40000));
        assert!(t.is_ipv4());
        assert_eq!(t, FourTuple::new(t.local(), t.remote()));
        let u = FourTuple::v6(v6(0xfd00 << 48, 1), 443, v6(0xfd00 << 48, 2), 50000);
        assert_eq!(u.local(), (IpAddress::V6(v6(0xfd00 << 48, 1)), 443));
        assert!(!u.is_ipv4());
        assert_eq!(format!("{t:?}"), "10.0.0.1:80<->10.0.0.2:40000");
    }

    #[test]
    fn insert_get_remove() {
        let mut t = ConnTable::new(1);
        let a = FourTuple::v4(v4(1), 80, v4(2), 1000);
        let b = FourTuple::v4(v4(1), 80, v4(2), 1001);
        let c = FourTuple::v4(v4(2), 1000, v4(1), 80);
        assert!(t.is_empty());
        assert_eq!(t.get(&a), None);
        assert_eq!(t.remove(&a), None);
        assert_eq!(t.insert(a, 1), None);
        assert_eq!(t.insert(b, 2), None);
        assert_eq!(t.insert(a, 3), Some(1));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(&a), Some(&3));
        assert_eq!(t.get(&c), None, "reversed tuple is another flow");
        *t.get_mut(&b).unwrap() += 10;
        assert_eq!(t.remove(&b), Some(12));
        assert_eq!(t.remove(&b), None);
        assert!(t.contains_key(&a));
        assert_eq!(t.iter().count(), 1);
    }

    /// Random inserts, overwrites, lookups and removes against `std::collections::HashMap`, with
    /// a tiny key space so that clusters, wrap-around and backward shifts are exercised hard.
    #[test]
    fn randomized_against_std_hashmap() {
        for seed in 0..6u64 {
            let mut rng = seed;
            let mut t = ConnTable::new(seed as u128 * 0x1234_5678_9abc_def1);
            let mut m: HashMap<FourTuple, u64> = HashMap::new();
            let keys = [16, 200, 3_000][seed as usize % 3];
            let key = |r: u64| {
                let r = r % keys;
                if r & 1 == 0 {
                    FourTuple::v4(v4(0x0a00_0001), 80, v4(0x0a00_0000 + (r as u32 >> 4)), (r & 15) as u16)
                } else {
                    FourTuple::v6(v6(1, 1), 443, v6(0xfd << 56, r >> 3), (r & 7) as u16)
                }
            };
            for i in 0..40_000u64 {
                let r = splitmix64(&mut rng);
                let k = key(splitmix64(&mut rng));
                match r % 4 {
                    0 | 1 => assert_eq!(t.insert(k, i), m.insert(k, i)),
                    2 => assert_eq!(t.remove(&k), m.remove(&k)),
                    _ => assert_eq!(t.get(&k), m.get(&k)),
                }
                assert_eq!(t.len(), m.len());
            }
            for (k, v) in &m {
                assert_eq!(t.get(k), Some(v));
            }
            let mut seen: Vec<_> = t.iter().map(|(k, v)| (*k, *v)).collect();
            let mut want: Vec<_> = m.iter().map(|(k, v)| (*k, *v)).collect();
            seen.sort();
            want.sort();
            assert_eq!(seen, want);
        }
    }

    /// Client-like flows: one server address and port, clients from a /16 with sequential ports,
    /// and an IPv6 /64 with sequential interface ids. Adjacent keys differ in a few low bits; the
    /// hash must still spread them.
    fn client_flow(i: u32) -> FourTuple {
        if i % 4 == 3 {
            FourTuple::v6(v6(0x2001_0db8 << 32, 1), 6379, v6(0x2001_0db8_0000_0001, i as u64), 40000)
        } else {
            FourTuple::v4(v4(0xc0a8_0001), 6379, v4(0x0a00_0000 | (i >> 12)), 32768 + (i & 0xfff) as u16)
        }
    }

    #[test]
    fn million_flows_insert_lookup_remove() {
        const N: u32 = 1_000_000;
        let mut t = ConnTable::new(0x5eed);
        for i in 0..N {
            assert_eq!(t.insert(client_flow(i), i), None);
        }
        assert_eq!(t.len(), N as usize);
        let probe = t.raw.max_probe();
        assert!(probe < 64, "max probe {probe} at 1M entries");
        for i in 0..N {
            assert_eq!(t.get(&client_flow(i)), Some(&i));
        }
        assert_eq!(t.get(&FourTuple::v4(v4(1), 1, v4(2), 2)), None);
        for i in (0..N).step_by(2) {
            assert_eq!(t.remove(&client_flow(i)), Some(i));
        }
        for i in 0..N {
            assert_eq!(t.get(&client_flow(i)).is_some(), i % 2 == 1);
        }
        for i in (1..N).step_by(2) {
            assert_eq!(t.remove(&client_flow(i)), Some(i));
        }
        assert!(t.is_empty());
    }

    #[test]
    fn with_capacity_does_not_grow() {
        let mut t = ConnTable::with_capacity(10_000, 7);
        let cap = t.capacity();
        assert!(cap >= 10_000);
        for i in 0..10_000 {
            t.insert(client_flow(i), ());
        }
        assert_eq!(t.capacity(), cap);
        // Churn at full size: removes leave no tombstones, so nothing grows.
        for i in 0..50_000 {
            t.remove(&client_flow(i));
            t.insert(client_flow(i + 10_000), ());
        }
        assert_eq!(t.capacity(), cap);
        assert_eq!(t.len(), 10_000);
    }

    #[test]
    fn seeds_change_the_hash() {
        let k = client_flow(5);
        let a = HashKeys::new(1);
        let b = HashKeys::new(2);
        let c = HashKeys::new(1 << 64);
        assert_ne!(k.hash(&a), k.hash(&b));
        assert_ne!(k.hash(&a), k.hash(&c));
        assert_eq!(k.hash(&a), k.hash(&HashKeys::new(1)));
    }

    #[test]
    fn listener_lookup_with_wildcards() {
        let mut l = ListenTable::new(3);
        let a4 = IpAddress::V4(v4(0x0a00_0001));
        let b4 = IpAddress::V4(v4(0x0a00_0002));
        let any4 = IpAddress::V4(Ipv4Address::UNSPECIFIED);
        let a6 = IpAddress::V6(v6(0xfd << 56, 1));
        let b6 = IpAddress::V6(v6(0xfd << 56, 2));
        let any6 = IpAddress::V6(v6(0, 0));
        l.insert((a4, 80), false, "a4:80").unwrap();
        l.insert((any4, 80), false, "0.0.0.0:80").unwrap();
        assert_eq!(l.insert((any4, 80), false, "dup"), Err("dup"));
        assert_eq!(l.lookup((a4, 80)), Some(&"a4:80"));
        assert_eq!(l.lookup((b4, 80)), Some(&"0.0.0.0:80"));
        assert_eq!(l.lookup((a4, 81)), None);
        assert_eq!(l.lookup((a6, 80)), None, "an IPv4 wildcard does not take IPv6");
        // A v6-only :: takes IPv6 but not IPv4.
        l.insert((any6, 443), true, ":::443 v6only").unwrap();
        assert_eq!(l.lookup((a6, 443)), Some(&":::443 v6only"));
        assert_eq!(l.lookup((a4, 443)), None);
        // A dual-stack :: takes both; a specific IPv6 address wins over it.
        l.insert((any6, 6379), false, ":::6379").unwrap();
        l.insert((b6, 6379), true, "b6:6379").unwrap();
        assert_eq!(l.lookup((a4, 6379)), Some(&":::6379"));
        assert_eq!(l.lookup((a6, 6379)), Some(&":::6379"));
        assert_eq!(l.lookup((b6, 6379)), Some(&"b6:6379"));
        assert_eq!(l.get((a4, 6379)), None, "get is exact");
        *l.lookup_mut((b4, 80)).unwrap() = "changed";
        assert_eq!(l.remove((any4, 80)), Some("changed"));
        assert_eq!(l.lookup((b4, 80)), None);
        assert_eq!(l.len(), 4);
    }

    /// Release-mode numbers: `cargo test --release -p stack -- --ignored --nocapture table`.
    #[test]
    #[ignore]
    fn perf_million_conns() {
        use std::time::Instant;
        const N: u32 = 1_000_000;
        let keys: Vec<FourTuple> = (0..N).map(client_flow).collect();
        // Lookups in a random order, so that they miss the cache as packets of many flows would.
        let mut order: Vec<u32> = (0..N).collect();
        let mut rng = 11u64;
        for i in (1..order.len()).rev() {
            order.swap(i, (splitmix64(&mut rng) % (i as u64 + 1)) as usize);
        }
        let k = HashKeys::new(9);
        let t0 = Instant::now();
        let mut x = 0u64;
        for key in &keys {
            x ^= std::hint::black_box(key).hash(&k);
        }
        let hash = t0.elapsed().as_nanos() as f64 / N as f64;

        let mut t = ConnTable::new(9);
        let t0 = Instant::now();
        let mut worst_insert = std::time::Duration::ZERO;
        for (i, key) in keys.iter().enumerate() {
            let s = Instant::now();
            t.insert(*key, i as u32);
            worst_insert = worst_insert.max(s.elapsed());
        }
        let grow_insert = t0.elapsed().as_nanos() as f64 / N as f64;
        // One resize at the size where 1M entries live: 2^20 -> 2^21 buckets (917,504 entries).
        let mut r = ConnTable::new(9);
        r.reserve(917_504);
        for key in keys.iter().take(917_504) {
            r.insert(*key, 0u32);
        }
        let s = Instant::now();
        r.insert(keys[917_504], 0);
        let resize = s.elapsed();

        let mut p = ConnTable::with_capacity(N as usize, 9);
        let t0 = Instant::now();
        for (i, key) in keys.iter().enumerate() {
            p.insert(*key, i as u32);
        }
        let insert = t0.elapsed().as_nanos() as f64 / N as f64;
        let t0 = Instant::now();
        for &i in &order {
            x = x.wrapping_add(*p.get(&keys[i as usize]).unwrap() as u64);
        }
        let hit = t0.elapsed().as_nanos() as f64 / N as f64;
        let t0 = Instant::now();
        for &i in &order {
            let mut miss = keys[i as usize];
            miss.remote_port ^= 0x8000;
            x = x.wrapping_add(p.get(&miss).is_some() as u64);
        }
        let miss = t0.elapsed().as_nanos() as f64 / N as f64;
        let t0 = Instant::now();
        for &i in &order {
            p.remove(&keys[i as usize]);
        }
        let remove = t0.elapsed().as_nanos() as f64 / N as f64;
        println!(
            "conn table, 1M flows ({} buckets, max probe {}): hash {hash:.1} ns, insert presized {insert:.1} ns, \
             insert growing {grow_insert:.1} ns (worst single insert {worst_insert:?}), resize at 917,504 entries \
             {resize:?}, lookup hit (random order) {hit:.1} ns, lookup miss {miss:.1} ns, remove {remove:.1} ns ({x})",
            t.raw.buckets.len(),
            t.raw.max_probe()
        );
    }
}
