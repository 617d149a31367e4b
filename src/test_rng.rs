//! The unit tests' seeded random numbers: one xorshift generator, so that a failing case
//! replays from its seed and the tests need no crate for it.

/// Numbers below the bound given to each call (which must be non-zero), from `seed`.
pub(crate) fn below_u64(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut state = seed;
    move |bound| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % bound
    }
}

/// [`below_u64`] for indices.
pub(crate) fn below_usize(seed: u64) -> impl FnMut(usize) -> usize {
    let mut below = below_u64(seed);
    move |bound| below(bound as u64) as usize
}
