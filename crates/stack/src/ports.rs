//! Ephemeral (local) port choice for active opens: RFC 6056 algorithm 4, "double-hash port
//! selection".
//!
//! It owns the port range, the secret and the small table of counters. It must not know which
//! ports are in use (the caller answers through `is_free`, checking its own tables for the full
//! 4-tuple) and must not read a clock or a random source (the secret comes from the caller).
//!
//! For a destination `(local addr, remote addr, remote port)`:
//! ```text
//! offset = F(dest, secret)           index = G(dest, secret)
//! for count in 0..range_len:
//!     port = min + (offset + table[index]) mod range_len;  table[index] += 1
//!     if filter(port) && is_free(port): return port
//! EADDRNOTAVAIL
//! ```
//! `F` and `G` are the high and low halves of one SipHash-2-4 (so they are independent keyed
//! functions); the table has 256 counters seeded from the secret. Successive connections to one
//! destination take successive ports (the fewest collisions with that destination's old
//! TIME_WAIT flows), while different destinations start at unrelated, secret offsets, so one
//! peer cannot predict the ports used towards another. Every port of the range is tried at most
//! once per call.
//!
//! The optional shard filter (`Fn(u16) -> bool`) is for the shards of one process: each takes
//! its own slice of the range (`port % count == index`), so that no two make the same 4-tuple;
//! a port the filter rejects is skipped without asking `is_free`.

use std::fmt;
use std::ops::RangeInclusive;

use wire::IpAddress;

use crate::shard::table::addr16;
use crate::syncookie::{siphash, split_key};

/// Linux's default `net.ipv4.ip_local_port_range`.
pub const DEFAULT_RANGE: RangeInclusive<u16> = 32768..=60999;
const TABLE_LEN: usize = 256;

/// No port of the range is free for this destination (`EADDRNOTAVAIL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFreePort;

impl fmt::Display for NoFreePort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no free local port in the ephemeral range for this destination (EADDRNOTAVAIL)")
    }
}

impl std::error::Error for NoFreePort {}

/// The ephemeral port allocator of one shard.
pub struct EphemeralPorts {
    min: u16,
    /// Ports in the range (1..=65535).
    len: u32,
    k0: u64,
    k1: u64,
    table: Box<[u32; TABLE_LEN]>,
    filter: Option<Box<dyn Fn(u16) -> bool>>,
}

impl fmt::Debug for EphemeralPorts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EphemeralPorts").field("range", &self.range()).finish_non_exhaustive()
    }
}

impl EphemeralPorts {
    /// Ports from `range` (non-empty, not containing 0), chosen under a random 128-bit `secret`.
    pub fn new(range: RangeInclusive<u16>, secret: [u8; 16]) -> Self {
        let (min, max) = (*range.start(), *range.end());
        assert!(min > 0 && min <= max, "bad ephemeral port range {min}..={max}");
        let (k0, k1) = split_key(&secret);
        let mut table = Box::new([0u32; TABLE_LEN]);
        for (i, slot) in table.iter_mut().enumerate() {
            *slot = siphash::<2, 4>(k0, k1, &[0xff, i as u8]) as u32;
        }
        EphemeralPorts { min, len: u32::from(max - min) + 1, k0, k1, table, filter: None }
    }

    /// Only hands out ports for which `filter` is true (the port hashes back to this shard).
    pub fn with_filter(mut self, filter: impl Fn(u16) -> bool + 'static) -> Self {
        self.filter = Some(Box::new(filter));
        self
    }

    /// The port range.
    pub fn range(&self) -> RangeInclusive<u16> {
        self.min..=(self.min as u32 + self.len - 1) as u16
    }

    /// A local port for a connection from `local` to `remote` (address, port). `is_free(port)`
    /// says whether that port can be used for this 4-tuple; it is asked at most once per port of
    /// the range, and never for a port the filter rejects.
    pub fn allocate(
        &mut self,
        local: IpAddress,
        remote: (IpAddress, u16),
        mut is_free: impl FnMut(u16) -> bool,
    ) -> Result<u16, NoFreePort> {
        let mut m = [0u8; 34];
        m[..16].copy_from_slice(&addr16(local));
        m[16..32].copy_from_slice(&addr16(remote.0));
        m[32..].copy_from_slice(&remote.1.to_be_bytes());
        let h = siphash::<2, 4>(self.k0, self.k1, &m);
        let offset = (h >> 32) as u32;
        let index = h as usize % TABLE_LEN;
        for _ in 0..self.len {
            let counter = self.table[index];
            self.table[index] = counter.wrapping_add(1);
            let port = self.min + ((u64::from(offset) + u64::from(counter)) % u64::from(self.len)) as u16;
            let allowed = match &self.filter {
                Some(filter) => filter(port),
                None => true,
            };
            if allowed && is_free(port) {
                return Ok(port);
            }
        }
        Err(NoFreePort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use wire::Ipv4Address;

    fn ip(d: u8) -> IpAddress {
        Ipv4Address::new(192, 0, 2, d).into()
    }

    const LOCAL: IpAddress = IpAddress::V4(Ipv4Address::new(10, 0, 0, 1));

    #[test]
    fn different_destinations_are_not_sequential() {
        let mut p = EphemeralPorts::new(DEFAULT_RANGE, [1; 16]);
        let mut ports = Vec::new();
        for d in 1..=100u8 {
            ports.push(p.allocate(LOCAL, (ip(d), 80), |_| true).unwrap());
        }
        for port in 1000..1100u16 {
            ports.push(p.allocate(LOCAL, (ip(1), port), |_| true).unwrap());
        }
        assert!(ports.iter().all(|p| DEFAULT_RANGE.contains(p)));
        let adjacent = ports.windows(2).filter(|w| w[0].abs_diff(w[1]) <= 2).count();
        assert!(adjacent < 5, "{adjacent} near-sequential pairs: {ports:?}");
        let distinct: HashSet<_> = ports.iter().collect();
        assert!(distinct.len() > 190);
    }

    #[test]
    fn same_destination_moves_on() {
        let mut p = EphemeralPorts::new(DEFAULT_RANGE, [2; 16]);
        let mut used = HashSet::new();
        for _ in 0..1000 {
            let port = p.allocate(LOCAL, (ip(9), 6379), |port| !used.contains(&port)).unwrap();
            assert!(used.insert(port));
        }
    }

    #[test]
    fn secret_decides_the_sequence() {
        let run = |secret| {
            let mut p = EphemeralPorts::new(DEFAULT_RANGE, secret);
            (1..=20u8).map(|d| p.allocate(LOCAL, (ip(d), 443), |_| true).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(run([3; 16]), run([3; 16]));
        assert_ne!(run([3; 16]), run([4; 16]));
    }

    #[test]
    fn exhaustion_tries_each_port_once() {
        let mut p = EphemeralPorts::new(1000..=1999, [5; 16]);
        let mut asked = HashSet::new();
        let r = p.allocate(LOCAL, (ip(1), 80), |port| {
            assert!(asked.insert(port), "port {port} asked twice");
            false
        });
        assert_eq!(r, Err(NoFreePort));
        assert_eq!(asked.len(), 1000);
        assert_eq!(
            NoFreePort.to_string(),
            "no free local port in the ephemeral range for this destination (EADDRNOTAVAIL)"
        );
        // The last free port is found wherever it is.
        for last in [1000u16, 1500, 1999] {
            assert_eq!(p.allocate(LOCAL, (ip(2), 80), |port| port == last), Ok(last));
        }
    }

    #[test]
    fn single_port_range() {
        let mut p = EphemeralPorts::new(5000..=5000, [6; 16]);
        assert_eq!(p.range(), 5000..=5000);
        assert_eq!(p.allocate(LOCAL, (ip(1), 80), |_| true), Ok(5000));
        assert_eq!(p.allocate(LOCAL, (ip(1), 80), |_| false), Err(NoFreePort));
    }

    #[test]
    fn shard_filter_is_honoured() {
        fn shard_one_of_four(port: u16) -> bool {
            port % 4 == 1
        }
        let mut p = EphemeralPorts::new(DEFAULT_RANGE, [7; 16]).with_filter(shard_one_of_four);
        let mut used = HashSet::new();
        for d in 0..500u32 {
            let dst = (ip((d % 200) as u8 + 1), 80 + (d / 200) as u16);
            let port = p
                .allocate(LOCAL, dst, |port| {
                    assert_eq!(port % 4, 1, "filter bypassed");
                    !used.contains(&port)
                })
                .unwrap();
            used.insert(port);
        }
        // A range with no acceptable port fails without asking.
        let mut q = EphemeralPorts::new(4000..=4000, [7; 16]).with_filter(shard_one_of_four);
        assert_eq!(q.allocate(LOCAL, (ip(1), 80), |_| panic!("asked")), Err(NoFreePort));
    }
}
