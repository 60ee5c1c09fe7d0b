//! SYN cookies, Linux-style: when a listener's SYN queue is full, the SYN-ACK's initial sequence
//! number carries everything needed to rebuild the connection from the final ACK, so a SYN flood
//! costs no memory.
//!
//! It owns the cookie format, the MSS tables, the timestamp option encoding and the SipHash-2-4
//! used here and by [`crate::ports`]. It must not keep per-connection state, read a clock (time is
//! the caller's `now`), or decide when cookies are used or checked (the listener does).
//!
//! # Format (after `net/ipv4/syncookies.c`)
//! ```text
//! ISN = H(tuple, 0) + peer ISS + (t << 24) + (M(tuple, t, mss_index) << 2 | mss_index)
//! ```
//! where `t` is a counter that steps every [`COUNTER_PERIOD_NS`] (64 s), `H` is SipHash-2-4
//! under the caller's 128-bit secret truncated to 32 bits, and `M` the same hash (with the MSS
//! index in its input) truncated to 22 bits. A cookie is accepted while `t` is the current or the
//! previous period ([`MAX_AGE`]), i.e. for 64 to 128 s. The 2-bit MSS index picks from
//! [`MSS_TABLE_V4`] or [`MSS_TABLE_V6`].
//!
//! One deliberate difference from Linux, which adds the index to a 24-bit hash: here the index
//! is inside the MAC, so changing any bit of the cookie (or the peer ISS) is detected, where on
//! Linux an ISN off by one or two can still pass with another MSS. Same cost (two hashes per
//! encode or check) and the same forgery odds: a blind guess passes with probability
//! `MAX_AGE / 2^22` (Linux: `MAX_AGE * 4 / 2^24`).
//!
//! The SYN's other options cannot fit in the ISN. When the peer sent timestamps, the low 6 bits
//! of our TSval carry them instead ([`encode_timestamp`]): bits 0-3 the peer's window scale (15:
//! none), bit 4 SACK-permitted, bit 5 ECN (never set: pronghorn does not negotiate ECN). The
//! peer echoes the TSval in its ACK's TSecr and [`SynCookies::check`] reads them back. Without
//! timestamps, SACK and window scaling are lost for that connection, again as on Linux.

use crate::shard::table::FourTuple;

/// How long one value of the cookie counter lasts.
pub const COUNTER_PERIOD_NS: u64 = 64_000_000_000;
/// Cookies are accepted while their counter is less than this many periods old.
pub const MAX_AGE: u32 = 2;
/// How long after a listener last sent a cookie an ACK to it is checked for one (Linux's
/// `TCP_SYNCOOKIE_VALID`, `tcp_synq_no_recent_overflow`): outside that, no cookie of ours can
/// be out there, and a bare ACK is answered with a RST without being checked.
pub const VALID_AFTER_LAST_SENT_NS: u64 = 120_000_000_000;
/// MSS values a cookie can carry for IPv4 (Linux's `msstab`).
pub const MSS_TABLE_V4: [u16; 4] = [536, 1300, 1440, 1460];
/// MSS values a cookie can carry for IPv6: MTUs 1280, 1480, 1500 and 9000 less 60 bytes.
pub const MSS_TABLE_V6: [u16; 4] = [1220, 1420, 1440, 8940];

const COOKIE_BITS: u32 = 24;
const COOKIE_MASK: u32 = (1 << COOKIE_BITS) - 1;
const MSS_INDEX_BITS: u32 = 2;
const MSS_INDEX_MASK: u32 = (1 << MSS_INDEX_BITS) - 1;
const TS_BITS: u32 = 6;
const TS_WSCALE_MASK: u32 = 0xf;
const TS_SACK: u32 = 1 << 4;
/// The largest window scale shift (RFC 7323 §2.3).
const MAX_WSCALE: u8 = 14;

#[inline]
fn sipround(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13);
    v[1] ^= v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16);
    v[3] ^= v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21);
    v[3] ^= v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17);
    v[1] ^= v[2];
    v[2] = v[2].rotate_left(32);
}

/// SipHash-c-d (Aumasson & Bernstein) of `data` under the key `(k0, k1)` (the key's two
/// little-endian halves).
pub fn siphash<const C: usize, const D: usize>(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let m = u64::from_le_bytes(w);
        v[3] ^= m;
        for _ in 0..C {
            sipround(&mut v);
        }
        v[0] ^= m;
    }
    let rest = chunks.remainder();
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    for _ in 0..C {
        sipround(&mut v);
    }
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..D {
        sipround(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// SipHash-2-4 of `data` under a 128-bit `key` (bytes as in the paper's test vectors).
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let (k0, k1) = split_key(key);
    siphash::<2, 4>(k0, k1, data)
}

pub(crate) fn split_key(key: &[u8; 16]) -> (u64, u64) {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&key[..8]);
    b.copy_from_slice(&key[8..]);
    (u64::from_le_bytes(a), u64::from_le_bytes(b))
}

/// What a valid cookie gives back: the options of the SYN it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieInfo {
    /// The MSS to use: the largest table entry not above the peer's (the smallest entry when
    /// the peer's is below all of them).
    pub mss: u16,
    /// The peer sent SACK-permitted (only known when `ts_ok`).
    pub sack_ok: bool,
    /// The peer's window scale shift; `None` when it sent none or timestamps were off.
    pub wscale: Option<u8>,
    /// The ACK carried a timestamp option: timestamps are on for the connection.
    pub ts_ok: bool,
}

/// The cookie generator and checker of one listener or shard.
#[derive(Clone)]
pub struct SynCookies {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for SynCookies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SynCookies { .. }")
    }
}

/// The cookie counter at `now_ns`.
#[inline]
fn counter(now_ns: u64) -> u32 {
    (now_ns / COUNTER_PERIOD_NS) as u32
}

fn mss_table(tuple: &FourTuple) -> &'static [u16; 4] {
    if tuple.is_ipv4() {
        &MSS_TABLE_V4
    } else {
        &MSS_TABLE_V6
    }
}

impl SynCookies {
    /// Cookies under a 128-bit `secret`: random, per process (or per shard), never sent anywhere.
    /// Changing it invalidates outstanding cookies.
    pub fn new(secret: [u8; 16]) -> Self {
        let (k0, k1) = split_key(&secret);
        SynCookies { k0, k1 }
    }

    #[inline]
    fn hash(&self, tuple: &FourTuple, count: u32, which: u8, peer_iss: u32) -> u32 {
        let mut m = [0u8; 45];
        m[..16].copy_from_slice(tuple.local_addr_bytes());
        m[16..32].copy_from_slice(tuple.remote_addr_bytes());
        m[32..34].copy_from_slice(&tuple.local_port().to_be_bytes());
        m[34..36].copy_from_slice(&tuple.remote_port().to_be_bytes());
        m[36..40].copy_from_slice(&count.to_le_bytes());
        m[40] = which;
        m[41..45].copy_from_slice(&peer_iss.to_le_bytes());
        siphash::<2, 4>(self.k0, self.k1, &m) as u32
    }

    /// The 24 low bits of a cookie: a 22-bit MAC of (tuple, counter, index, peer ISS) and the
    /// index. The peer's ISS is in the MAC, not only subtracted out: otherwise any later ACK of
    /// the same connection (both numbers moved on by the same amount, as in an echo) would check
    /// out as a cookie once the connection is gone.
    #[inline]
    fn low_bits(&self, tuple: &FourTuple, count: u32, index: u32, peer_iss: u32) -> u32 {
        let mac = self.hash(tuple, count, 1 + index as u8, peer_iss) & (COOKIE_MASK >> MSS_INDEX_BITS);
        mac << MSS_INDEX_BITS | index
    }

    /// The ISN of a SYN-ACK answering a SYN on `tuple` (local = the listener's side) that carried
    /// sequence number `peer_iss` and MSS option `peer_mss` (536 when absent, RFC 9293 §3.7.1).
    /// Returns the ISN and the MSS the connection will use.
    pub fn encode(&self, tuple: &FourTuple, peer_iss: u32, peer_mss: u16, now_ns: u64) -> (u32, u16) {
        let table = mss_table(tuple);
        let index = (1..table.len()).rev().find(|&i| peer_mss >= table[i]).unwrap_or(0);
        let t = counter(now_ns);
        let isn = self
            .hash(tuple, 0, 0, 0)
            .wrapping_add(peer_iss)
            .wrapping_add(t << COOKIE_BITS)
            .wrapping_add(self.low_bits(tuple, t, index as u32, peer_iss));
        (isn, table[index])
    }

    /// Checks the final ACK of a handshake answered with a cookie: `cookie` is the ACK's
    /// acknowledgment number minus one, `peer_iss` its sequence number minus one, `tsecr` the
    /// TSecr of its timestamp option if it has one. `None`: not a cookie of ours for this tuple,
    /// or too old.
    pub fn check(
        &self,
        tuple: &FourTuple,
        cookie: u32,
        peer_iss: u32,
        tsecr: Option<u32>,
        now_ns: u64,
    ) -> Option<CookieInfo> {
        let t = counter(now_ns);
        let c = cookie.wrapping_sub(self.hash(tuple, 0, 0, 0)).wrapping_sub(peer_iss);
        let age = t.wrapping_sub(c >> COOKIE_BITS) & (u32::MAX >> COOKIE_BITS);
        if age >= MAX_AGE {
            return None;
        }
        let index = c & MSS_INDEX_MASK;
        if c & COOKIE_MASK != self.low_bits(tuple, t.wrapping_sub(age), index, peer_iss) {
            return None;
        }
        let mss = mss_table(tuple)[index as usize];
        Some(match tsecr {
            Some(tsecr) => {
                let (sack_ok, wscale) = decode_timestamp(tsecr);
                CookieInfo { mss, sack_ok, wscale, ts_ok: true }
            }
            None => CookieInfo { mss, sack_ok: false, wscale: None, ts_ok: false },
        })
    }
}

/// The TSval for a SYN-ACK carrying a cookie, when the SYN had timestamps: `ts_now` (the
/// connection's timestamp clock) rounded down to a multiple of 64 (so never ahead of the clock,
/// at most 63 ticks behind) with the SYN's SACK-permitted and window scale (clamped to 14) in the
/// low 6 bits.
pub fn encode_timestamp(ts_now: u32, sack_ok: bool, wscale: Option<u8>) -> u32 {
    let mut options = match wscale {
        Some(w) => u32::from(w.min(MAX_WSCALE)),
        None => TS_WSCALE_MASK,
    };
    if sack_ok {
        options |= TS_SACK;
    }
    let ts = (ts_now & !((1 << TS_BITS) - 1)) | options;
    if ts > ts_now {
        ts.wrapping_sub(1 << TS_BITS)
    } else {
        ts
    }
}

/// The options [`encode_timestamp`] put in a TSval: (SACK-permitted, window scale).
pub fn decode_timestamp(tsecr: u32) -> (bool, Option<u8>) {
    let w = tsecr & TS_WSCALE_MASK;
    let wscale = if w == TS_WSCALE_MASK { None } else { Some((w as u8).min(MAX_WSCALE)) };
    (tsecr & TS_SACK != 0, wscale)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{Ipv4Address, Ipv6Address};

    const SEC: u64 = 1_000_000_000;

    /// `vectors_sip64` of the SipHash reference implementation: key 00..0f, message 00..(n-1).
    const SIP64: [u64; 64] = [
        0x726fdb47dd0e0e31,
        0x74f839c593dc67fd,
        0x0d6c8009d9a94f5a,
        0x85676696d7fb7e2d,
        0xcf2794e0277187b7,
        0x18765564cd99a68d,
        0xcbc9466e58fee3ce,
        0xab0200f58b01d137,
        0x93f5f5799a932462,
        0x9e0082df0ba9e4b0,
        0x7a5dbbc594ddb9f3,
        0xf4b32f46226bada7,
        0x751e8fbc860ee5fb,
        0x14ea5627c0843d90,
        0xf723ca908e7af2ee,
        0xa129ca6149be45e5,
        0x3f2acc7f57c29bdb,
        0x699ae9f52cbe4794,
        0x4bc1b3f0968dd39c,
        0xbb6dc91da77961bd,
        0xbed65cf21aa2ee98,
        0xd0f2cbb02e3b67c7,
        0x93536795e3a33e88,
        0xa80c038ccd5ccec8,
        0xb8ad50c6f649af94,
        0xbce192de8a85b8ea,
        0x17d835b85bbb15f3,
        0x2f2e6163076bcfad,
        0xde4daaaca71dc9a5,
        0xa6a2506687956571,
        0xad87a3535c49ef28,
        0x32d892fad841c342,
        0x7127512f72f27cce,
        0xa7f32346f95978e3,
        0x12e0b01abb051238,
        0x15e034d40fa197ae,
        0x314dffbe0815a3b4,
        0x027990f029623981,
        0xcadcd4e59ef40c4d,
        0x9abfd8766a33735c,
        0x0e3ea96b5304a7d0,
        0xad0c42d6fc585992,
        0x187306c89bc215a9,
        0xd4a60abcf3792b95,
        0xf935451de4f21df2,
        0xa9538f0419755787,
        0xdb9acddff56ca510,
        0xd06c98cd5c0975eb,
        0xe612a3cb9ecba951,
        0xc766e62cfcadaf96,
        0xee64435a9752fe72,
        0xa192d576b245165a,
        0x0a8787bf8ecb74b2,
        0x81b3e73d20b49b6f,
        0x7fa8220ba3b2ecea,
        0x245731c13ca42499,
        0xb78dbfaf3a8d83bd,
        0xea1ad565322a1a0b,
        0x60e61c23a3795013,
        0x6606d7e446282b93,
        0x6ca4ecb15c5f91e1,
        0x9f626da15c9625f3,
        0xe51b38608ef25f57,
        0x958a324ceb064572,
    ];

    fn splitmix64(state: &mut u64) -> u64 {
        crate::shard::table::splitmix64(state)
    }

    #[test]
    fn siphash24_reference_vectors() {
        let key: [u8; 16] = core::array::from_fn(|i| i as u8);
        let msg: [u8; 64] = core::array::from_fn(|i| i as u8);
        for (n, &want) in SIP64.iter().enumerate() {
            assert_eq!(siphash24(&key, &msg[..n]), want, "length {n}");
        }
        // The worked example of the paper's appendix A.
        assert_eq!(siphash24(&key, &msg[..15]), 0xa129ca6149be45e5);
    }

    /// Cross-check against the standard library's SipHash-2-4 (deprecated as a `Hasher`, still a
    /// reference) and SipHash-1-3 (`DefaultHasher::new()` is SipHash-1-3 with a zero key).
    #[test]
    #[allow(deprecated)]
    fn siphash_matches_std() {
        use std::hash::Hasher;
        let mut rng = 3u64;
        for len in 0..100 {
            let data: Vec<u8> = (0..len).map(|_| splitmix64(&mut rng) as u8).collect();
            let (k0, k1) = (splitmix64(&mut rng), splitmix64(&mut rng));
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            h.write(&data);
            assert_eq!(siphash::<2, 4>(k0, k1, &data), h.finish());
            let mut h = std::collections::hash_map::DefaultHasher::new();
            h.write(&data);
            assert_eq!(siphash::<1, 3>(0, 0, &data), h.finish());
        }
    }

    fn tuple4() -> FourTuple {
        FourTuple::v4(Ipv4Address::new(10, 0, 0, 1), 80, Ipv4Address::new(192, 0, 2, 7), 40001)
    }

    fn tuple6() -> FourTuple {
        let a: Ipv6Address = "2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().into();
        let b: Ipv6Address = "2001:db8::77".parse::<std::net::Ipv6Addr>().unwrap().into();
        FourTuple::v6(a, 443, b, 50000)
    }

    fn cookies() -> SynCookies {
        SynCookies::new(*b"0123456789abcdef")
    }

    #[test]
    fn round_trip_both_families_all_mss() {
        let c = cookies();
        let now = 1_000 * SEC;
        for tuple in [tuple4(), tuple6()] {
            let table = mss_table(&tuple);
            for (peer_mss, want) in [
                (table[0], table[0]),
                (table[2] + 1, table[2]),
                (table[3], table[3]),
                (65535, table[3]),
                (100, table[0]),
            ] {
                let iss = 0xfffff000u32;
                let (isn, mss) = c.encode(&tuple, iss, peer_mss, now);
                assert_eq!(mss, want);
                let info = c.check(&tuple, isn, iss, None, now + SEC).unwrap();
                assert_eq!(info, CookieInfo { mss: want, sack_ok: false, wscale: None, ts_ok: false });
            }
        }
        let (isn, mss) = c.encode(&tuple4(), 7, 1400, now);
        assert_eq!(mss, 1300);
        let ts = encode_timestamp(123_456, true, Some(7));
        let info = c.check(&tuple4(), isn, 7, Some(ts), now).unwrap();
        assert_eq!(info, CookieInfo { mss: 1300, sack_ok: true, wscale: Some(7), ts_ok: true });
    }

    #[test]
    fn wrong_tuple_or_sequence_rejected() {
        let c = cookies();
        let now = 5_000 * SEC;
        let t = tuple4();
        let (isn, _) = c.encode(&t, 1000, 1460, now);
        assert!(c.check(&t, isn, 1000, None, now).is_some());
        let (la, lp) = t.local();
        let (ra, rp) = t.remote();
        let others = [
            FourTuple::new((la, lp + 1), (ra, rp)),
            FourTuple::new((la, lp), (ra, rp + 1)),
            FourTuple::new((ra, lp), (la, rp)),
            FourTuple::new((la, lp), (Ipv4Address::new(192, 0, 2, 8).into(), rp)),
            FourTuple::new((ra, rp), (la, lp)),
        ];
        for other in others {
            assert_eq!(c.check(&other, isn, 1000, None, now), None, "{other:?}");
        }
        for delta in [1u32, 2, 3, 1 << 24, u32::MAX] {
            assert_eq!(c.check(&t, isn, 1000u32.wrapping_add(delta), None, now), None, "peer ISS off by {delta}");
        }
        assert_eq!(SynCookies::new([9; 16]).check(&t, isn, 1000, None, now), None, "other secret");
    }

    #[test]
    fn a_later_ack_of_the_same_connection_is_not_a_cookie() {
        // An echo moves both sequence numbers on by the same amount: a stray final ACK after the
        // connection is gone must not build a new one (found by the 10,000-connection pair test).
        let c = cookies();
        let now = 5_000 * SEC;
        let t = tuple4();
        let (isn, _) = c.encode(&t, 1000, 1460, now);
        for moved in [1u32, 4097, 1 << 20] {
            assert_eq!(
                c.check(&t, isn.wrapping_add(moved), 1000u32.wrapping_add(moved), None, now),
                None,
                "moved {moved}"
            );
        }
    }

    #[test]
    fn expiry_after_two_periods() {
        let c = cookies();
        let t = tuple6();
        let issued = 77 * COUNTER_PERIOD_NS + 5 * SEC;
        let (isn, _) = c.encode(&t, 42, 1440, issued);
        let period_end = 78 * COUNTER_PERIOD_NS;
        assert!(c.check(&t, isn, 42, None, period_end - 1).is_some());
        assert!(c.check(&t, isn, 42, None, period_end).is_some(), "previous period still accepted");
        assert!(c.check(&t, isn, 42, None, period_end + COUNTER_PERIOD_NS - 1).is_some());
        assert_eq!(c.check(&t, isn, 42, None, period_end + COUNTER_PERIOD_NS), None, "two periods old");
        assert_eq!(c.check(&t, isn, 42, None, issued + 1_000 * COUNTER_PERIOD_NS), None);
        assert_eq!(c.check(&t, isn, 42, None, issued - COUNTER_PERIOD_NS), None, "from the future");
    }

    #[test]
    fn tampered_cookies_rejected() {
        let c = cookies();
        let t = tuple4();
        let now = 12_345 * SEC;
        for peer_mss in MSS_TABLE_V4 {
            let (isn, _) = c.encode(&t, 99, peer_mss, now);
            for bit in 0..32 {
                assert_eq!(c.check(&t, isn ^ (1 << bit), 99, None, now), None, "bit {bit} flipped");
            }
            for delta in 1..=64u32 {
                assert_eq!(c.check(&t, isn.wrapping_add(delta), 99, None, now), None, "+{delta}");
                assert_eq!(c.check(&t, isn.wrapping_sub(delta), 99, None, now), None, "-{delta}");
            }
        }
        // Blind guesses: each passes with probability 2 / 2^22.
        let mut rng = 1u64;
        let accepted =
            (0..20_000).filter(|_| c.check(&t, splitmix64(&mut rng) as u32, 99, None, now).is_some()).count();
        assert_eq!(accepted, 0);
    }

    #[test]
    fn timestamp_option_bits() {
        for ts_now in [0u32, 1, 63, 64, 1_000_003, u32::MAX] {
            for sack in [false, true] {
                for wscale in [None, Some(0), Some(7), Some(14), Some(15)] {
                    let ts = encode_timestamp(ts_now, sack, wscale);
                    let back = ts_now.wrapping_sub(ts);
                    assert!(back < 64, "TSval {ts} vs clock {ts_now}: must not be ahead or far behind");
                    assert_eq!(decode_timestamp(ts), (sack, wscale.map(|w| w.min(14))));
                }
            }
        }
        // ECN is never claimed.
        assert_eq!(encode_timestamp(1 << 20, true, Some(3)) & (1 << 5), 0);
    }

    /// Release-mode numbers: `cargo test --release -p stack -- --ignored --nocapture syncookie`.
    #[test]
    #[ignore]
    fn perf_cookie() {
        let c = cookies();
        let t = tuple6();
        let n = 1_000_000u32;
        let start = std::time::Instant::now();
        let mut x = 0u32;
        for i in 0..n {
            x ^= c.encode(std::hint::black_box(&t), i, 1460, 1_000 * SEC).0;
        }
        let enc = start.elapsed().as_nanos() as f64 / n as f64;
        let (isn, _) = c.encode(&t, 5, 1460, 1_000 * SEC);
        let start = std::time::Instant::now();
        for _ in 0..n {
            x ^= c.check(std::hint::black_box(&t), isn, 5, None, 1_000 * SEC).map_or(0, |i| i.mss as u32);
        }
        let chk = start.elapsed().as_nanos() as f64 / n as f64;
        println!("syncookie (SipHash-2-4 over 41 bytes, twice): encode {enc:.1} ns, check (valid) {chk:.1} ns ({x})");
    }
}
