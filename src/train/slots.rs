//! The trainer's per-position array (the slots) in its two layouts, the walk over it that
//! skips merged-away positions, and the block of memory it shares with the list arena.
//!
//! # Invariants
//! - A live slot holds its token and the record of the pair starting there when last set
//!   (a link that may be stale: the engine trusts it only if that record's pair is the pair
//!   at the slot). A deleted slot holds [`DEL`] and a position: the two ends of each run of
//!   deleted slots name the live position beyond the run (gap encoding, as in Re-Pair), so
//!   [`Layout::next`] and [`Layout::prev`] are O(1) without link arrays.
//! - A position's token only ever grows to a newer id, and its successor only changes when
//!   its token does.
//!
//! # Kept decisions
//! - [`Packed`]: 4 bytes per slot, the token in the low bits and the link above, where
//!   every record a run can have fits in the link bits (short inputs, small vocabularies):
//!   half the cache lines and pages of [`Wide`]; taylorswift.txt to 512, 7.6 -> 6.7 ms.
//! - Slots, arena and the set-up's pair table share one block, in 2 MB pages from
//!   [`MAP_MIN_BYTES`] on ([`HugeBytes`]): random slot reads on a VM cost 70-90 ns in
//!   4 KB pages and 40 ns in huge pages (27 MB: 10-14 -> 6 s), and a short run faults one
//!   huge page instead of hundreds of small ones (taylorswift.txt: 823 -> 304 faults).

use crate::hugemem::HugeBytes;
use std::hint::select_unpredictable;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Flag of a deleted slot's word.
pub(crate) const DEL: u32 = 1 << 31;
/// The separator token between chunks in a token stream (and in [`Wide`] slots); it never
/// pairs.
pub(crate) const SEP: u32 = DEL - 1;
/// "No position / no record" marker.
pub(crate) const NONE: u32 = u32::MAX;

/// Below this many bytes a run's working memory comes from the heap; from here whole
/// 2 MB pages are worth zeroing (taylorswift.txt, 3 MB: 823 -> 367 faults, 6.6-6.8 ->
/// 6.2-6.4 ms).
const MAP_MIN_BYTES: usize = 1 << 20;

/// Byte pairs: the set-up's pair table has two words per pair.
pub(crate) const PAIRS: usize = 1 << 16;

/// How a slot holds a token and a record link. `Copy` values carry what the layout needs
/// (the sequence length, bit widths), so hot loops keep them in registers.
pub(crate) trait Layout: Copy + Send + Sync {
    type Slot: Copy + Send + Sync + FromBytes + IntoBytes + KnownLayout + Immutable;

    /// The sequence length: positions `0..n`.
    fn n(self) -> u32;
    /// The slot's word that carries [`DEL`]: a token, or `DEL | position`.
    fn word(v: Self::Slot) -> u32;
    /// A deleted slot holding `word` (`DEL | position`).
    fn gap(word: u32) -> Self::Slot;
    /// The token of `v`; a deleted slot gives a value with [`DEL`] set (no token).
    fn tok(self, v: Self::Slot) -> u32;
    /// The record linked from live slot `v` (the "no record" link is never a record id).
    fn rec(self, v: Self::Slot) -> u32;
    /// A live slot; `rec` may be [`NONE`] (no record).
    fn live(self, t: u32, rec: u32) -> Self::Slot;
    /// `v` with its token replaced.
    fn with_tok(self, v: Self::Slot, t: u32) -> Self::Slot;
    /// `v` with its record link replaced by the record `rec`.
    fn with_rec(self, v: Self::Slot, rec: u32) -> Self::Slot;
    /// The separator token as this layout stores it.
    fn sep(self) -> u32;

    /// A token of the input stream ([`SEP`] or a byte) as this layout stores it.
    #[inline(always)]
    fn input(self, t: u32) -> u32 {
        if t == SEP {
            self.sep()
        } else {
            t
        }
    }

    /// The live position after live position `p`, or `n`.
    #[inline(always)]
    fn next(self, slots: &[Self::Slot], p: u32) -> u32 {
        let q = p + 1;
        if q >= self.n() {
            return self.n();
        }
        let t = Self::word(slots[q as usize]);
        select_unpredictable(t & DEL != 0, t & !DEL, q)
    }

    /// The live position before live position `p`, or [`NONE`].
    #[inline(always)]
    fn prev(self, slots: &[Self::Slot], p: u32) -> u32 {
        if p == 0 {
            return NONE;
        }
        let q = p - 1;
        let t = Self::word(slots[q as usize]);
        // Whether `q` is deleted is data the branch predictor cannot learn (a merge loop
        // meets both about equally often), so both answers are computed and one selected
        // (taylorswift.txt, whole process: 4.49 -> 4.37 ms).
        let v = t & !DEL;
        // A run of one deleted slot stores the position after it (== p).
        let run_start = select_unpredictable(v < q, v, q.wrapping_sub(1));
        select_unpredictable(t & DEL != 0, run_start, q)
    }

    /// Whether `(a, b)` currently occurs at `p` (`p` may be a dead list entry).
    #[inline(always)]
    fn occurs(self, slots: &[Self::Slot], p: u32, a: u32, b: u32) -> bool {
        if self.tok(slots[p as usize]) != a {
            return false;
        }
        let q = self.next(slots, p);
        q < self.n() && self.tok(slots[q as usize]) == b
    }

    /// Deletes live slot `r`, the right half of a merge at `p`, `s` being the live slot
    /// after it: the deleted run becomes `p+1..s`, and its two ends record `s` and `p`.
    #[inline(always)]
    fn delete(self, slots: &mut [Self::Slot], p: u32, r: u32, s: u32) {
        // `r` may end up inside the run, where nothing else would overwrite its token, and
        // a stale token there would make a dead list entry look live.
        slots[r as usize] = Self::gap(DEL);
        // Both ends are written, the right one first: in a run of one slot the left end's
        // `s` stays (see `prev`). Whether the run is one slot long is data, and a branch
        // on it was mispredicted about as often as taken (4.32 -> 4.27 ms).
        slots[(s - 1) as usize] = Self::gap(DEL | p);
        slots[(p + 1) as usize] = Self::gap(DEL | s);
    }
}

/// 4-byte slots: the token in the low `tb` bits (the separator is all ones there), the
/// record link in the bits above up to [`DEL`]; all ones in the link bits is "no record".
#[derive(Clone, Copy)]
pub(crate) struct Packed {
    n: u32,
    tb: u32,
    tok_mask: u32,
}

impl Packed {
    /// The layout for `n` positions and ids below `vocab`, if every record a run can hold
    /// at once (fewer than `2 n + 2`: see the engine's record bound) gets a link.
    pub(crate) fn fitting(n: u32, vocab: u64) -> Option<Packed> {
        // Token bits: room for every id and the separator (all ones) above them.
        let tb = 64 - vocab.leading_zeros();
        if tb > 24 {
            return None;
        }
        let no_link = (1u64 << (31 - tb)) - 1;
        (2 * u64::from(n) + 2 <= no_link).then_some(Packed {
            n,
            tb,
            tok_mask: (1 << tb) - 1,
        })
    }
}

impl Layout for Packed {
    type Slot = u32;

    #[inline(always)]
    fn n(self) -> u32 {
        self.n
    }
    #[inline(always)]
    fn word(v: u32) -> u32 {
        v
    }
    #[inline(always)]
    fn gap(word: u32) -> u32 {
        word
    }
    #[inline(always)]
    fn tok(self, v: u32) -> u32 {
        v & (DEL | self.tok_mask)
    }
    #[inline(always)]
    fn rec(self, v: u32) -> u32 {
        v >> self.tb
    }
    #[inline(always)]
    fn live(self, t: u32, rec: u32) -> u32 {
        // `NONE` shifts to all ones in the link bits once the bit above them is cleared.
        t | ((rec << self.tb) & !DEL)
    }
    #[inline(always)]
    fn with_tok(self, v: u32, t: u32) -> u32 {
        (v & !self.tok_mask) | t
    }
    #[inline(always)]
    fn with_rec(self, v: u32, rec: u32) -> u32 {
        (v & self.tok_mask) | (rec << self.tb)
    }
    #[inline(always)]
    fn sep(self) -> u32 {
        self.tok_mask
    }
}

/// 8-byte slots: the token word in the low half, the record link ([`NONE`]: no record) in
/// the high half, read in one load.
#[derive(Clone, Copy)]
pub(crate) struct Wide {
    n: u32,
}

impl Wide {
    pub(crate) fn new(n: u32) -> Wide {
        Wide { n }
    }
}

impl Layout for Wide {
    type Slot = u64;

    #[inline(always)]
    fn n(self) -> u32 {
        self.n
    }
    #[inline(always)]
    fn word(v: u64) -> u32 {
        v as u32
    }
    #[inline(always)]
    fn gap(word: u32) -> u64 {
        u64::from(word)
    }
    #[inline(always)]
    fn tok(self, v: u64) -> u32 {
        v as u32
    }
    #[inline(always)]
    fn rec(self, v: u64) -> u32 {
        (v >> 32) as u32
    }
    #[inline(always)]
    fn live(self, t: u32, rec: u32) -> u64 {
        u64::from(t) | (u64::from(rec) << 32)
    }
    #[inline(always)]
    fn with_tok(self, v: u64, t: u32) -> u64 {
        (v & !u64::from(u32::MAX)) | u64::from(t)
    }
    #[inline(always)]
    fn with_rec(self, v: u64, rec: u32) -> u64 {
        (v & u64::from(u32::MAX)) | (u64::from(rec) << 32)
    }
    #[inline(always)]
    fn sep(self) -> u32 {
        SEP
    }
}

/// A run's working memory: `n` slots, then the list arena (its first word is scratch,
/// never read). Pages never written are never faulted in.
pub(crate) struct Block<S> {
    mem: HugeBytes,
    n: usize,
    _slot: std::marker::PhantomData<S>,
}

impl<S: FromBytes + IntoBytes + KnownLayout> Block<S> {
    /// `n` slots and an arena of `arena` words, with room for the set-up's pair table
    /// after the `n + 1` words the initial lists can fill.
    pub(crate) fn new(n: usize, arena: usize) -> Block<S> {
        let bytes = n * size_of::<S>() + 4 * arena.max(n + 1 + 2 * PAIRS);
        Block {
            mem: HugeBytes::zeroed(bytes, MAP_MIN_BYTES),
            n,
            _slot: std::marker::PhantomData,
        }
    }

    /// The slots and the arena.
    #[inline(always)]
    pub(crate) fn parts(&mut self) -> (&mut [S], &mut [u32]) {
        let (slots, arena) = self.mem.bytes_mut().split_at_mut(self.n * size_of::<S>());
        // The block is 8-byte aligned and `S` is 4 or 8 bytes, so both views exist; the
        // empty fallbacks are never taken.
        (
            <[S]>::mut_from_bytes(slots).unwrap_or_default(),
            <[u32]>::mut_from_bytes(arena).unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::{Layout, Packed, Wide, DEL, NONE, SEP};

    /// Both layouts give back what was stored, and "no record" is never a record id a run
    /// can reach.
    #[test]
    fn layouts_round_trip() {
        fn check<L: Layout>(lay: L, max_tok: u32, max_rec: u32) {
            for t in [0, 1, 255, max_tok] {
                for rec in [0, 1, max_rec] {
                    let v = lay.live(t, rec);
                    assert_eq!((lay.tok(v), lay.rec(v)), (t, rec));
                    let w = lay.with_rec(lay.with_tok(v, max_tok - t), rec / 2);
                    assert_eq!((lay.tok(w), lay.rec(w)), (max_tok - t, rec / 2));
                }
                assert!(lay.rec(lay.live(t, NONE)) > max_rec);
                assert_eq!(lay.tok(lay.live(t, NONE)), t);
            }
            assert_eq!(lay.input(SEP), lay.sep());
            assert_ne!(lay.tok(L::gap(DEL | 5)), 5);
        }
        let n = 1000;
        let packed = Packed::fitting(n, 512).unwrap();
        check(packed, 511, 2 * n + 1);
        check(Wide::new(n), SEP - 1, 2 * n + 1);
        assert!(Packed::fitting(1 << 20, 512).is_none());
        assert!(Packed::fitting(100, 1 << 30).is_none());
    }
}
