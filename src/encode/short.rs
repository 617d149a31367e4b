//! BPE of short sequences (nearly every chunk and text line): the shortest by a scalar
//! scan over two small arrays, the others by a vectorized scan over packed keys.

use super::tables::{byte_pair, PairCache};
use super::units::{Units, UNIT};
use super::{Encoder, Scratch, NONE, TINY};

impl Encoder<'_> {
    /// BPE for the shortest sequences (most chunks of a split pattern): two small
    /// arrays, a scalar scan for the lowest pair, removal by shifting; no set-up of
    /// links or keys, which costs more than it saves at this length. A removal copies
    /// a fixed [`TINY`] entries (the arrays are twice that long), which compiles to a
    /// few vector moves where `Vec::remove` called `memmove` twice per merge. The
    /// 427k first sightings of up to 32 bytes in the 27 MB benchmark text, o200k_base,
    /// in process on AMD EPYC Zen 4 (min and median of 15): 111-119 ms against 131-141
    /// ms; the whole command gains at most 1%, within the host's noise (there the
    /// pair table's loads, not the moves, hold the merges up).
    pub(super) fn bpe_tiny(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        debug_assert!((2..=TINY).contains(&bytes.len()));
        let base = &self.model.base_id_of_byte;
        let Tiny { ids, ranks } = &mut scratch.tiny;
        for (id, &b) in ids.iter_mut().zip(bytes) {
            *id = base[b as usize];
        }
        for (rank, w) in ranks.iter_mut().zip(bytes.windows(2)) {
            *rank = self.byte_pairs[byte_pair(w)];
        }
        self.tiny_merges(&mut scratch.pairs, &mut scratch.tiny, bytes.len(), out);
    }

    /// [`Encoder::bpe_tiny`]'s merges, over the first `n` ids and `n - 1` merge ids of
    /// `tiny` (`2..=TINY` of them).
    #[inline(always)]
    fn tiny_merges(&self, pc: &mut PairCache, tiny: &mut Tiny, mut n: usize, out: &mut Vec<u32>) {
        debug_assert!((2..=TINY).contains(&n));
        let Tiny { ids, ranks } = tiny;
        loop {
            let mut best = NONE;
            let mut at = 0;
            for (i, &r) in ranks[..n - 1].iter().enumerate() {
                if r < best {
                    best = r;
                    at = i;
                }
            }
            if best == NONE {
                break;
            }
            // Remove id `at + 1` and rank `at` (at most TINY - 2).
            ids[at] = best;
            let tail: [u32; TINY] = ids[at + 2..at + 2 + TINY].try_into().expect("TINY ids");
            ids[at + 1..at + 1 + TINY].copy_from_slice(&tail);
            let tail: [u32; TINY] = ranks[at + 1..at + 1 + TINY].try_into().expect("TINY ranks");
            ranks[at..at + TINY].copy_from_slice(&tail);
            n -= 1;
            if at > 0 {
                ranks[at - 1] = self.pair(pc, ids[at - 1], best);
            }
            if at + 1 < n {
                ranks[at] = self.pair(pc, best, ids[at + 1]);
            }
        }
        out.extend_from_slice(&ids[..n]);
    }

    /// BPE of a sequence of 3 to `scan_max` bytes starting from its units where they
    /// may (`crate::model::units`): [`Encoder::bpe_tiny`]'s merges when it starts from
    /// at most [`TINY`] ids, else the scan's.
    pub(super) fn bpe_units(
        &self,
        units: &Units,
        scratch: &mut Scratch,
        bytes: &[u8],
        out: &mut Vec<u32>,
    ) {
        let small = bytes.len() <= 2 * TINY;
        let n = if small {
            let Tiny { ids, ranks } = &mut scratch.tiny;
            self.start_units(units, &mut scratch.pairs, bytes, ids, ranks)
        } else {
            scratch.ids.resize(bytes.len(), 0);
            scratch.ranks.resize(bytes.len(), NONE);
            let (ids, ranks) = (&mut scratch.ids, &mut scratch.ranks);
            self.start_units(units, &mut scratch.pairs, bytes, ids, ranks)
        };
        if n == 1 {
            out.push(if small {
                scratch.tiny.ids[0]
            } else {
                scratch.ids[0]
            });
        } else if small && n <= TINY {
            self.tiny_merges(&mut scratch.pairs, &mut scratch.tiny, n, out);
        } else {
            if small {
                scratch.ids.clear();
                scratch.ids.extend_from_slice(&scratch.tiny.ids[..n]);
                scratch.ranks.clear();
                scratch
                    .ranks
                    .extend_from_slice(&scratch.tiny.ranks[..n - 1]);
            } else {
                scratch.ids.truncate(n);
                scratch.ranks.truncate(n - 1);
            }
            let shift = self.scan_shift;
            for (at, key) in scratch.ranks.iter_mut().enumerate() {
                *key = scan_key(*key, at, shift);
            }
            let last = n as u32 - 1;
            scratch.next.clear();
            scratch
                .next
                .extend((1..=n as u32).map(|i| if i > last { NONE } else { i }));
            scratch.prev.clear();
            scratch
                .prev
                .extend((0..n as u32).map(|i| i.wrapping_sub(1)));
            scan_merges(self, scratch, out);
        }
    }

    /// Writes the ids `bytes` starts from (its units where they may start whole, else
    /// its bytes) to `ids`, and the merge ids of their adjacent pairs to `ranks` (both
    /// at least `bytes.len()` long); returns how many ids.
    #[inline(always)]
    fn start_units(
        &self,
        units: &Units,
        pc: &mut PairCache,
        bytes: &[u8],
        ids: &mut [u32],
        ranks: &mut [u32],
    ) -> usize {
        let base = &self.model.base_id_of_byte;
        let len = bytes.len();
        let (mut n, mut i) = (0, 0);
        // The merge id of the last id (when a byte's) with the next byte's.
        let mut pending = NONE;
        let mut after_byte = false;
        while i < len {
            let b = bytes[i];
            let char3 = if (0xE0..=0xEF).contains(&b) {
                units.char3(bytes, i)
            } else {
                None
            };
            let (id, width, next_pending) = match char3 {
                Some(id) => (id, 3, NONE),
                None if i + 1 < len => {
                    let e = units.pairs[byte_pair(&bytes[i..])];
                    if e & UNIT != 0 && units.allowed(e, bytes, i, 2) {
                        (e as u32, 2, NONE)
                    } else {
                        (base[b as usize], 1, e as u32)
                    }
                }
                None => (base[b as usize], 1, NONE),
            };
            if n > 0 {
                ranks[n - 1] = if after_byte && width == 1 {
                    pending
                } else {
                    self.pair(pc, ids[n - 1], id)
                };
            }
            ids[n] = id;
            n += 1;
            i += width;
            after_byte = width == 1;
            pending = next_pending;
        }
        n
    }

    /// BPE for short sequences (at most `scan_max` bytes): the sequence is a linked list
    /// over the byte positions, so a merge moves nothing (removing from arrays cost two
    /// `memmove` calls per merge), and each live pair is a key `merge id << scan_shift |
    /// position` in one array, so the lowest key is the lowest merge id at its
    /// leftmost position: one vectorized minimum per merge, no search for the index.
    /// Compiled for AVX2 and SSE4.1 too, chosen at run time: the baseline x86-64 has no
    /// unsigned 32-bit minimum instruction, and its emulation made this path ~40% slower.
    pub(super) fn bpe_scan(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        bpe_scan(self, scratch, bytes, out);
    }
}

/// [`Encoder::bpe_tiny`]'s two arrays: a sequence's ids and the merge ids of its
/// adjacent pairs, each twice [`TINY`] long so that a removal copies a fixed [`TINY`]
/// entries (what lies past the sequence's end is never read as part of it).
pub(super) struct Tiny {
    ids: [u32; 2 * TINY],
    ranks: [u32; 2 * TINY],
}

impl Default for Tiny {
    fn default() -> Tiny {
        Tiny {
            ids: [0; 2 * TINY],
            ranks: [NONE; 2 * TINY],
        }
    }
}

/// [`Encoder::bpe_scan`]'s body: the linked list and keys of `bytes`, then the merges.
fn bpe_scan(enc: &Encoder<'_>, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
    let base = &enc.model.base_id_of_byte;
    let Scratch {
        ids: tok,
        ranks: keys,
        next,
        prev,
        ..
    } = scratch;
    let shift = enc.scan_shift;
    linked_bytes(bytes, base, tok, next, prev);
    keys.clear();
    keys.extend(
        bytes
            .windows(2)
            .enumerate()
            .map(|(at, w)| scan_key(enc.byte_pairs[byte_pair(w)], at, shift)),
    );
    scan_merges(enc, scratch, out);
}

/// A scan key: `id << shift | at`, or [`NONE`] for no merge.
#[inline(always)]
pub(super) fn scan_key(id: u32, at: usize, shift: u32) -> u32 {
    if id == NONE {
        NONE
    } else {
        id << shift | at as u32
    }
}

/// [`Encoder::bpe_scan`]'s merges, over the linked list of `scratch.ids` and the keys
/// of its pairs in `scratch.ranks` (one fewer than the ids); a free function for the
/// multiversioning macro.
#[multiversion::multiversion(targets("x86_64+avx2", "x86_64+sse4.1"))]
pub(super) fn scan_merges<'m>(enc: &Encoder<'m>, scratch: &mut Scratch, out: &mut Vec<u32>) {
    let Scratch {
        ids: tok,
        ranks: keys,
        next,
        prev,
        pairs,
        ..
    } = scratch;
    let shift = enc.scan_shift;
    let key = |id: u32, at: usize| scan_key(id, at, shift);
    // Whole blocks of SCAN_LANES keys for `lowest_key`; the padding stays NONE.
    keys.resize((tok.len() + 1).next_multiple_of(SCAN_LANES), NONE);
    let mut lowest = lowest_key(keys);
    while lowest != NONE {
        let (r, i) = (lowest >> shift, (lowest & ((1 << shift) - 1)) as usize);
        let j = next[i] as usize;
        tok[i] = r;
        let k = next[j];
        next[i] = k;
        keys[j] = NONE;
        let mut after = NONE;
        if k != NONE {
            prev[k as usize] = i as u32;
            after = key(enc.pair(pairs, r, tok[k as usize]), i);
        }
        keys[i] = after;
        let p = prev[i];
        let mut before = NONE;
        if p != NONE {
            let p = p as usize;
            before = key(enc.pair(pairs, tok[p], r), p);
            keys[p] = before;
        }
        // The pair after the one just merged, with the same merge id, is the lowest key
        // when both new keys are above it: every other key was at least `lowest`, and
        // none lies between the two positions. Runs of one byte and repeated patterns
        // then merge without a scan.
        let chained = if k != NONE { keys[k as usize] } else { NONE };
        lowest = if chained >> shift == r && chained < after && chained < before {
            chained
        } else {
            lowest_key(keys)
        };
    }
    push_linked(tok, next, out);
}

/// The scan's keys are padded to a multiple of this: the width of the vectorized loop
/// of [`lowest_key`] (four 512-bit vectors of u32).
pub(super) const SCAN_LANES: usize = 64;

/// The lowest of `keys`. LLVM vectorizes this into a loop over 64 keys with 8-wide and
/// scalar remainder loops; with the keys padded to a multiple of 64 (with `NONE`) the
/// remainder loops never run. Measured with the 32k model, one thread, 27 MB: 1.45-1.51 s
/// vs 1.54-1.71 s unpadded (their trip counts varied from line to line and mispredicted).
/// Written as 16-lane blocks with an array accumulator instead, LLVM kept the lanes in
/// memory: 2.05 s.
#[inline(always)]
pub(super) fn lowest_key(keys: &[u32]) -> u32 {
    keys.iter().copied().fold(NONE, u32::min)
}

/// The ids of `bytes` as a linked list over their positions (`NONE` ends both ways):
/// the set-up of [`Encoder::bpe_scan`] and [`Encoder::bpe_heap`].
pub(super) fn linked_bytes(
    bytes: &[u8],
    base: &[u32; 256],
    tok: &mut Vec<u32>,
    next: &mut Vec<u32>,
    prev: &mut Vec<u32>,
) {
    let n = bytes.len();
    tok.clear();
    tok.extend(bytes.iter().map(|&b| base[b as usize]));
    next.clear();
    next.extend((1..=n as u32).map(|i| if i as usize == n { NONE } else { i }));
    prev.clear();
    prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
}

/// Appends the ids of a linked list that starts at position 0.
pub(super) fn push_linked(tok: &[u32], next: &[u32], out: &mut Vec<u32>) {
    let mut i = 0u32;
    while i != NONE {
        out.push(tok[i as usize]);
        i = next[i as usize];
    }
}
