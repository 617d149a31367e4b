//! The tests' seeded random numbers: one SplitMix64 generator for the unit tests and,
//! included by `tests/common.rs`, for the integration tests, so that a failing case
//! replays from its seed and the tests need no crate for it.

/// SplitMix64 (Steele, Lea and Flood): any `u64` is a good seed, zero included.
pub(crate) struct Rng(pub(crate) u64);

/// The integer types [`Rng::below`] draws.
pub(crate) trait Bound: Copy {
    fn to_u64(self) -> u64;
    fn from_u64(value: u64) -> Self;
}

impl Bound for u64 {
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(value: u64) -> u64 {
        value
    }
}

impl Bound for usize {
    fn to_u64(self) -> u64 {
        self as u64
    }
    fn from_u64(value: u64) -> usize {
        value as usize
    }
}

impl Bound for u32 {
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(value: u64) -> u32 {
        value as u32
    }
}

/// For a bound written as a bare literal (`rng.below(10) as usize`), whose type defaults
/// to `i32`; a negative bound is a bug in the test.
impl Bound for i32 {
    fn to_u64(self) -> u64 {
        u64::try_from(self).expect("a non-negative bound")
    }
    fn from_u64(value: u64) -> i32 {
        value as i32
    }
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform (up to the modulo bias) in `0..n`; 0 for `n = 0`.
    pub(crate) fn below<N: Bound>(&mut self, n: N) -> N {
        N::from_u64(self.next_u64() % n.to_u64().max(1))
    }

    /// `len` bytes drawn from `alphabet` (used by the integration tests).
    #[allow(dead_code)]
    pub(crate) fn bytes_from(&mut self, alphabet: &[u8], len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| alphabet[self.below(alphabet.len())])
            .collect()
    }
}

/// [`Rng::below`] as a closure, from `seed`.
pub(crate) fn below_u64(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = Rng::new(seed);
    move |bound| rng.below(bound)
}

/// [`below_u64`] for indices.
pub(crate) fn below_usize(seed: u64) -> impl FnMut(usize) -> usize {
    let mut rng = Rng::new(seed);
    move |bound| rng.below(bound)
}
