//! The seeded generator of the tests: xorshift64* (Vigna's scrambled xorshift, shifts 12, 25, 27,
//! the same as `stack::echo::Stream`'s), deterministic from its seed, so that a failing input is
//! reproduced by rerunning the test. Not for anything a peer could predict: the product crates
//! have their own (the fault injector's xoshiro256**, syncookie secrets from the OS).

/// A xorshift64* stream. A seed of 0 (a fixed point of xorshift) is replaced by 1.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `len` bytes, the low byte of one step each.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_xorshift64_star() {
        // From the state 1, worked out apart.
        let mut r = Rng::new(1);
        assert_eq!(r.next_u64(), 0x47e4_ce4b_896c_dd1d);
        assert_eq!(r.next_u64(), 0xabcf_a6a8_e079_651d);
        assert_eq!(Rng::new(0).next_u64(), Rng::new(1).next_u64());
    }
}
