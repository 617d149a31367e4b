//! The merge engine for small inputs: `engine`'s algorithm (same records, same lazy heap,
//! same gap-encoded deletions, so the same merges) laid out for a short run, where page
//! faults and allocations, not random access, are what a run costs.
//!
//! # What differs from `engine`, and why
//! - All occurrence lists live in ONE arena, each a range: a list is written once (the
//!   initial count, or the pass that creates its pair) and afterwards only loses entries, so
//!   it never needs to grow. That replaces a `Vec` per pair (a malloc and a free each, tens
//!   of thousands per run) and the per-pass `Vec<Vec<_>>` of new lists. Lists are never
//!   compacted: a dead entry is skipped at most twice (by `first_live`, then by the merge
//!   of its pair), and the arena is bounded (below).
//! - A new pair's count lives in its record from the start; a record whose count falls
//!   below 2 is released at once (its pair is never re-created, so a stale position link
//!   to a reused record never matches its pair).
//! - One 4-byte slot per position instead of 8: a live slot packs the token (the low
//!   `tb` bits, enough for the vocabulary and the separator) and its record link (the
//!   rest); a deleted slot holds the flag and a position, as in `engine` (its link is
//!   never read). Random access into this array is what the merge loop waits on, and half
//!   the bytes is half the cache lines and pages. The link field bounds the number of live
//!   records: when a pass could run out, the run stops and `train` finishes it on `engine`
//!   (exact either way; only inputs with very many distinct pairs and large vocabularies
//!   get there).
//! - Slots, arena and the initial count's pair table share one block of zeroed memory
//!   ([`Parts`]), in 2 MB pages when it is large enough ([`HugeBytes`]); the merge loop
//!   works on them as local slices (see the performance notes); counting uses one thread.
//!
//! # Arena bound
//! The initial lists hold at most `n - 1` entries. A pass adds at most two entries per
//! merged occurrence, and each merged occurrence deletes a position, so all passes add at
//! most `2 (n - 1)`: the arena never exceeds `3 n` entries. New lists go first into the
//! range the merged pair's list leaves free, then at the end.
//!
//! # Performance notes
//! Measured on the project machine (2-core VM, shared: CPU times quoted, minimum of
//! alternating runs), taylorswift.txt (185,768 bytes) to vocab 512, whole `bpe-train`
//! process (`perf stat -r 30`, user + sys): `engine` 8.5 ms; this engine 5.7 ms, of which
//! process start 1.35 ms (`/bin/true`: 0.74), set-up 1.3 ms, the 256 merges 3.0 ms.
//! Later (below): 4.7 ms of CPU per run; 5.5-6.7 ms wall per run in `scripts/bench.sh`'s
//! seed section (static binary, start 1.0 ms); in process (`examples/train-bench.rs`):
//! set-up 0.53 ms, the whole call 3.1-3.6 ms.
//! - A run's pages cost about 1-1.8 us each (fault, zeroing, teardown at exit; a test
//!   program touching 500 fresh pages took 0.9 ms more CPU): 823 faults here, 145 of them
//!   process start. Hence 4-byte slots, one arena, and lists reusing freed ranges.
//! - Pre-faulting the slots and the arena (`MAP_POPULATE`, `MADV_POPULATE_WRITE`) cut the
//!   fault count from 1114 to 367 but not the time (7.3 vs 7.2 ms): populating costs what
//!   the faults did. Not kept. Huge pages do cut it: slots, arena and pair table in one
//!   block of 2 MB pages (two faults, 4 MB zeroed), 823 -> 304 faults and 6.4 -> 6.1 ms
//!   per run (median of 7 alternated rounds of 50 runs, wall, process start included);
//!   reserving the records, the heap and the pass buffer up front instead of growing them
//!   (each growth copies into fresh pages), 304 -> 253 faults, 6.1 -> 5.9 ms. With the
//!   pair table in the arena's dead space one huge page suffices: 5.9-6.2 -> 5.5-5.7 ms
//!   (a THP fault with its 2 MB zeroing costs ~0.08 ms; 475 small pages 0.45 ms).
//! - New pairs' counts and lengths in the pass's small table (`NewPair`) instead of
//!   their records, and their lists filled through a cursor there; the initial lists
//!   through a cursor in the pair table: in process 3.39-3.42 -> 2.89-3.15 ms per call.
//! - Tried and dropped: a 16-byte record with the list bounds in a parallel array
//!   (slower, 3.34-3.48 vs 3.06-3.12 ms); pass buffer written by a running index instead
//!   of `push` (slower); touching 8, 12, 24 or 32 entries ahead, or not at all (3-5%
//!   slower); the set-up without its iterator's `take(n)` (no change).
//! - 8-byte slots (token, link) -> 4-byte packed slots: 7.6 -> 6.7 ms.
//! - Initial count from the tokens instead of the slots, slots written once: 6.8 -> 6.0 ms.
//! - Merge loop on local slices of disjoint fields instead of `self` methods (which
//!   reloaded the slices after each store): 5.9 -> 5.7 ms.
//! - Touching the slot 16 list entries ahead (a plain load; prefetch intrinsics need
//!   `unsafe`, `core::hint::prefetch_read` is unstable): in process 6.2 -> 5.5 ms per
//!   call; 4 or 8 ahead helped less, 24 or 32 no more. Touching a whole block of 8, 16 or
//!   32 entries ahead at once instead: no better. That load still stalls (a quarter of the
//!   merge loop's samples): the slots' cache lines come from memory.
//! - In process (warm allocator, no page faults), the set-up is 0.72 ms and the merges
//!   3.1 ms: 129 k list entries (107 k merged occurrences) at ~24 ns each.
//! - Keeping new pairs below a quarter of the creating merge's count out of the heap
//!   until the top falls to their level (8.5 k heap pushes saved): no measurable change
//!   (in process 3.9-4.3 ms per call either way). Not kept.
//! - Big passes on two threads (2026-12-01; not kept, in-process figures of
//!   `examples/train-bench.rs`, serial 3.2-3.3 ms per call): a pass's list cut where no
//!   occurrence on the left touches a slot one on the right does, a spinning second
//!   thread merging the right part with the records only read (losses and new pairs
//!   collected per thread, records made and slots linked when both are done). Cut at the
//!   list's middle (passes of 400+ entries), the second thread took 48 ns per entry and
//!   the first 24 (17-20 serial): every pass pulls the right part's cache lines over from
//!   the other core, where the previous pass or the set-up left them; 6.8 ms per call.
//!   Cut at the middle position of the text instead (every pass of 8+ entries, so each
//!   core keeps its half), the second thread linking its own occurrences: 30 vs 21-22 ns
//!   per entry (its half is first pulled over from where the set-up wrote it), and the
//!   serial joining of the halves (0.4 ms) and list filling (0.6 ms) on top: 5.2-5.5 ms.
//!   A gain needs each thread's half of slots, lists and new-pair tables to stay its own
//!   from the set-up on, only a few boundary occurrences per pass on one thread. (A
//!   kernel wake-up between the threads costs 15 us to the waker and 35 us in all on the
//!   project's VM, so the second thread must spin; a spinning hand-over takes 0.2 us.)
//!   That design too (branch `experiment/duo`: each thread counts and fills its half of
//!   the text, keeps its part of every list in its own region, merges, places and links
//!   its own; per pass only compact lists cross) gave the same model but lost: whole
//!   process 7.6-8.5 ms against 4.8-5.0 on one thread; set-up 0.8-1.9 ms, merges 3.7-5.6
//!   ms, of which 1.2-3.7 ms waiting at 478 hand-overs (spinning 4096 times before
//!   yielding, some runs waited 20-48 ms: the kernel had both threads on one core), the
//!   second thread's share 1.8-2.6 ms instead of the ~1.3 its entries cost here. In
//!   process (64 spins before yielding): each thread's merging 1.2-1.4 ms per call (no
//!   cheaper per entry than one thread's), joining the halves 0.4 ms, waiting 0.9-1.3 ms
//!   (a yielding waiter answers in 2-3 us, and every pass waits twice): 4.2-4.7 ms per
//!   call against 3.3. At this size the hand-overs cost what the second core saves.
//! - Mispredicted branches (2026-12-01; whole process, 8 alternated rounds of 101 runs,
//!   and in process): a fresh process runs 0.2-0.3 ms slower than a warm in-process call
//!   (cold caches, and the branch predictor has not learnt the text), so branches on
//!   data weigh more there. `prev_live` selecting its answer without a branch (whether
//!   the slot before is deleted is a coin toss): 4.49 -> 4.37 ms per run, in process
//!   2.92-2.93 -> 2.75-2.79 ms; `delete_run` writing both ends of a run unconditionally:
//!   4.32 -> 4.27 ms. Not kept: `dec_old` selecting what it subtracts (0 for an unset or
//!   stale link) instead of branching, 4.46 -> 4.61 ms (those branches are predictable,
//!   and the store is not free); `#[inline(never)]` on the set-up, the merge pass,
//!   `finish_pass` and `pick` (their own register allocation): in process 2.80-2.83 ->
//!   2.64-2.66 ms, but whole process 4.27 -> 4.26 ms, within the noise. Filling the new
//!   lists without a branch (kept: faster in process, no slower in a fresh one): in
//!   process 2.81 -> 2.69 ms, whole process unchanged. The heap (`queue::PairHeap`)
//!   comparing one 128-bit key instead of a tuple, field by field, that branched on
//!   equal counts: whole process 4.30 -> 4.17 ms (10 rounds), in process 2.68 -> 2.76
//!   (wider compares); its room reserved up front again, as before: 198 -> 175 page
//!   faults, 4.24 -> 4.19 ms. Not kept:
//!   new pairs waiting in buckets by the logarithm of their count until the heap's top
//!   falls into their range (most never enter the heap; 1086 pops, ~10 k pushes saved):
//!   4.17 vs 4.14 ms, within the noise; records of 16 bytes with the list bounds in a
//!   second array: 4.35 -> 4.49 ms; a real prefetch instead of the touch ahead (needs
//!   `unsafe`, measured only to know): 4.29 -> 4.25 ms; a new pair's first occurrence in
//!   a pass taking a pooled record id by selection, the record's pair written on every
//!   occurrence (no branch on "first"): 4.11 -> 4.49 ms, in process 2.74 -> 3.0 ms.
//! - Instructions, not misses, bound the merge loop (2026-12-01, on a second host CPU,
//!   Ice Lake-SP): cachegrind counts ~38 M instructions per taylorswift.txt call, ~270
//!   per merged occurrence, for ~4.2 ms at 2.8 GHz, so about three per cycle. A slot's
//!   record link was mapped to `NONE` when unset (`Lay::rec`) and `NONE` back to the unset
//!   link when written (`Lay::live`), and `dec_old` tested for `NONE` before its bounds-
//!   checked index. Now the unset link is left as it is (it is never a record id, so the
//!   record lookup's own bounds check, `get_mut`, rejects it) and `live` masks `NONE`'s
//!   shift into the unset link: in process (best of 200 calls, 8 alternated rounds)
//!   4.09-4.25 -> 3.43-3.52 ms, the `dec_old` part alone 3.91-4.09; whole process (8
//!   alternated rounds of 101 runs, a noisy host) 7.96 -> 7.19 ms per run, best round
//!   6.86 -> 5.94.
//! - On an AMD EPYC host (2026-12-01, 2.6 GHz; in process, 400 calls, 3 alternated
//!   rounds, 1.93-1.98 ms per call before): the cost per merged occurrence is 15-22 ns
//!   on inputs from 46 KB to 740 KB alike, so instructions, not misses, bound the loop.
//!   Dropped: new pairs counted only, their records, lists and slot links made when the
//!   pass ends (fewer stores in the loop, one more pass over the new occurrences):
//!   1.99-2.01 ms; no touch ahead: 2.01-2.02 ms; a live separator slot after the last
//!   position, so that `next` needs no end test: 2.23 ms (the loop compiled worse).
//! - On the Intel model-167 host (2026-12-01 evening; whole process, 6 alternated rounds
//!   of 201 runs): also touching the records linked from the slots before and after the
//!   entry 8 ahead (as the slot 16 ahead is touched): 4.33 -> 4.50 ms. Not kept. Shares
//!   of a whole run's samples there: merge passes 42%, `initial_count` 13%, `finish_pass`
//!   9.5%, `pick` 2.6%, the kernel 15%, glibc's `cpuid` start-up 9% (BENCHMARKS.md).

use super::engine::{delete_run, next_live, prev_live, Weights, DEL, NONE, SEP};
use super::queue::{PairHeap, PairQueue};
use super::Merge;
use crate::hugemem::HugeBytes;
use std::hint::select_unpredictable;

/// Inputs with fewer positions than this train here; longer ones in `engine`. Measured
/// (CPU s, this engine vs `engine`, prefixes of the 27 MB mixed text): 0.9 MB to vocab
/// 4096: 0.06 vs 0.11; 2 MB: 0.18-0.24 vs 0.34; 4 MB: 0.63-0.69 vs 0.73-0.77; to vocab
/// 32768 equal from 0.9 MB on, with more memory here (lists are never compacted). The
/// limit stays where `engine`'s huge pages and second counting thread start to pay.
pub(super) const SMALL_MAX: usize = 1 << 20;
/// How many list entries ahead the merge loop touches the token array.
const PREFETCH: usize = 16;
/// Per-pass cache slot not filled yet.
const UNSET: u32 = u32::MAX - 1;
/// The arena's first word is never read: filling the new lists writes the occurrences of
/// dropped pairs there, so that its loop needs no branch. Lists start after it.
const SCRATCH: u32 = 0;

/// Below this many bytes of working memory a run's memory comes from the heap, whose
/// 4 KB pages are each a fault; from here it is worth zeroing whole 2 MB pages instead.
/// Measured on taylorswift.txt (186 KB, 3 MB of working memory) to vocab 512, whole
/// process: 823 -> 367 page faults, 6.6-6.8 -> 6.2-6.4 ms.
const MAP_MIN_BYTES: usize = 1 << 20;

/// The views of a run's working memory, one block of words, so that a run faults in a
/// huge page or two instead of hundreds of small pages (pages never written are never
/// faulted in). For `n` positions: the slots (per position: token in the low `tb` bits
/// and the record of the pair starting there when last set in the bits above, or [`DEL`]
/// and a position), then the list arena (a scratch word, then the lists: their bound,
/// `3 n`, from the module doc).
///
/// The initial count's table of byte pairs lives in the arena, after the `n` entries the
/// initial lists can fill at most: the arena is written before it is read beyond its
/// used front, so the table is dead space once counting is done, and a run touches
/// no memory for it beyond what its lists would. (taylorswift.txt to vocab 512: 1.9 MB of
/// the block in use, one huge page; with the table after the arena it took two, and a run
/// 5.9-6.2 ms instead of 5.5-5.7.)
struct Parts<'a> {
    slots: &'a mut [u32],
    arena: &'a mut [u32],
}

/// The views while counting: slots, the arena's first `n` entries, the pair table
/// (two words per byte pair: see `initial_count`).
struct SetupParts<'a> {
    slots: &'a mut [u32],
    lists: &'a mut [u32],
    occ: &'a mut [u32],
}

/// Byte pairs, each two words of the pair table.
const OCC: usize = 1 << 16;

impl<'a> Parts<'a> {
    fn words(n: usize) -> usize {
        (4 * n + 1).max(2 * n + 1 + 2 * OCC)
    }

    #[inline(always)]
    fn of(mem: &'a mut HugeBytes, n: usize) -> Parts<'a> {
        let (slots, rest) = mem.words_mut().split_at_mut(n);
        Parts {
            slots,
            arena: &mut rest[..3 * n + 1],
        }
    }

    fn setup(mem: &'a mut HugeBytes, n: usize) -> SetupParts<'a> {
        let (slots, rest) = mem.words_mut().split_at_mut(n);
        let (lists, rest) = rest.split_at_mut(n + 1);
        SetupParts {
            slots,
            lists,
            occ: &mut rest[..2 * OCC],
        }
    }
}

/// A tracked pair (weighted count >= 2), its list `arena[head..end]`. Free: `a == NONE`.
/// While its creating pass runs, its count and list are unset (0): the pass's
/// [`NewPair`] counts them, and `finish_pass` writes them.
struct Rec {
    a: u32,
    b: u32,
    count: u64,
    head: u32,
    end: u32,
}

/// The slot layout and the sequence operations on it (gap-encoded deletions as in
/// `engine`), over the slot array passed in, so hot loops can hold it as a local slice.
#[derive(Clone, Copy)]
struct Lay {
    n: u32,
    /// Bits of a live slot that hold the token.
    tb: u32,
    /// `(1 << tb) - 1`; as a token, the separator.
    tok_mask: u32,
}

impl Lay {
    /// The separator token.
    #[inline(always)]
    fn sep(self) -> u32 {
        self.tok_mask
    }

    /// The token of slot value `v`; a deleted slot gives a value with [`DEL`] set.
    #[inline(always)]
    fn tok(self, v: u32) -> u32 {
        v & (DEL | self.tok_mask)
    }

    /// The record linked from live slot value `v`, or the "no record" link (all ones in
    /// the link bits; record ids stay below it, so [`Recs::dec_old`] finds none there).
    #[inline(always)]
    fn rec(self, v: u32) -> u32 {
        v >> self.tb
    }

    /// A live slot value; `rec` may be `NONE`, which shifts to all ones in the link bits
    /// (the "no record" link) once the bit above them is cleared.
    #[inline(always)]
    fn live(self, t: u32, rec: u32) -> u32 {
        t | ((rec << self.tb) & !DEL)
    }

    /// `v` with its token replaced by `t`.
    #[inline(always)]
    fn with_tok(self, v: u32, t: u32) -> u32 {
        (v & !self.tok_mask) | t
    }

    /// `v` with its record link replaced by `rec`.
    #[inline(always)]
    fn with_rec(self, v: u32, rec: u32) -> u32 {
        (v & self.tok_mask) | (rec << self.tb)
    }

    /// The live position after live position `p`, or `n`.
    #[inline(always)]
    fn next(self, slots: &[u32], p: u32) -> u32 {
        next_live(p, self.n, |q| slots[q as usize])
    }

    /// The live position before live position `p`, or `NONE`.
    #[inline(always)]
    fn prev(self, slots: &[u32], p: u32) -> u32 {
        prev_live(p, |q| slots[q as usize])
    }

    /// Whether `(a, b)` currently occurs at `p` (`p` may be a dead entry).
    #[inline(always)]
    fn occurs(self, slots: &[u32], p: u32, a: u32, b: u32) -> bool {
        if self.tok(slots[p as usize]) != a {
            return false;
        }
        let q = self.next(slots, p);
        q < self.n && self.tok(slots[q as usize]) == b
    }

    /// Merges at live `p` (its pair ends at live `r`, `s` is the live slot after `r`):
    /// writes `c` at `p`, keeping its link, and deletes `r`. The deleted run becomes
    /// `p+1..s`; its two ends record `s` and `p`.
    #[inline(always)]
    fn merge_at(self, slots: &mut [u32], p: u32, r: u32, s: u32, c: u32) {
        slots[p as usize] = self.with_tok(slots[p as usize], c);
        delete_run(p, r, s, |q, v| slots[q as usize] = v);
    }
}

/// The records and the free list of released record slots.
struct Recs {
    recs: Vec<Rec>,
    free: Vec<u32>,
}

impl Recs {
    #[inline(always)]
    fn alloc(&mut self, rec: Rec) -> u32 {
        if let Some(id) = self.free.pop() {
            self.recs[id as usize] = rec;
            id
        } else {
            self.recs.push(rec);
            (self.recs.len() - 1) as u32
        }
    }

    #[inline(always)]
    fn release(&mut self, id: u32) {
        let r = &mut self.recs[id as usize];
        r.a = NONE;
        r.b = NONE;
        r.count = 0;
        self.free.push(id);
    }

    /// Record ids that can still be handed out below `max`.
    fn room(&self, max: u32) -> u64 {
        (u64::from(max) + self.free.len() as u64).saturating_sub(self.recs.len() as u64)
    }

    /// Subtracts one occurrence of weight `w` from record `id` if it is `(a, b)`'s record
    /// (the position's link may be stale: then the pair is untracked).
    #[inline(always)]
    fn dec_old(&mut self, id: u32, a: u32, b: u32, w: u64) {
        let Some(r) = self.recs.get_mut(id as usize) else {
            return;
        };
        if r.a != a || r.b != b {
            return;
        }
        r.count -= w;
        if r.count < 2 {
            self.release(id);
        }
    }
}

/// A pair the current pass creates: its record, and its count and occurrences so far.
/// Kept here, not in the record, until the pass ends: this small table stays in the
/// first-level cache, and neither the pass's additions nor the filling of the new lists
/// reach into the record array.
#[derive(Clone, Copy)]
struct NewPair {
    id: u32,
    len: u32,
    count: u64,
    /// While the lists are filled: the next free entry of this pair's list, or the
    /// arena's scratch word when the pair is dropped (count < 2).
    at: u32,
    /// How far `at` moves per occurrence: 1, or 0 for a dropped pair.
    step: u32,
}

const NO_NEW_PAIR: NewPair = NewPair {
    id: UNSET,
    len: 0,
    count: 0,
    at: NONE,
    step: 0,
};

/// The current pass's new pairs and their occurrences.
struct Pass {
    /// The new pair `(x, c)` at `2 x`, the new pair `(c, y)` at `2 y + 1`; unused entries
    /// are [`NO_NEW_PAIR`].
    new: Vec<NewPair>,
    /// Entries of `new` in use, in creation order.
    touched: Vec<u32>,
    /// (entry of `new`, position) of every new occurrence, in position order.
    buf: Vec<(u32, u32)>,
}

impl Pass {
    /// Adds an occurrence of weight `w` at `pos` of the new pair `(a, b)`: `(x, c)` when
    /// `left` (`key` is x), `(c, y)` otherwise (`key` is y). Returns its record.
    #[inline(always)]
    fn add(
        &mut self,
        recs: &mut Recs,
        left: bool,
        key: u32,
        pair: (u32, u32),
        pos: u32,
        w: u64,
    ) -> u32 {
        let entry = 2 * key + u32::from(!left);
        let new = &mut self.new[entry as usize];
        if new.id == UNSET {
            // Its count in the record stays 0 until the pass ends; no other path reads
            // it meanwhile (a new pair is never an old neighbour of this pass's merges).
            new.id = recs.alloc(Rec {
                a: pair.0,
                b: pair.1,
                count: 0,
                head: 0,
                end: 0,
            });
            self.touched.push(entry);
        }
        new.count += w;
        new.len += 1;
        self.buf.push((entry, pos));
        new.id
    }
}

pub(super) struct Small<W: Weights> {
    lay: Lay,
    /// The run's working memory, [`Parts`]: slots, list arena, initial pair table.
    mem: HugeBytes,
    weights: W,
    recs: Recs,
    /// Record ids stay below this.
    max_recs: u32,
    /// Entries in use at the front of `arena`.
    alen: usize,
    heap: PairHeap,
    next_id: u32,
    /// Leftmost position that may start a pair, for the all-counts-are-1 phase.
    cursor: u32,
    pass: Pass,
}

impl<W: Weights> Small<W> {
    /// An engine over the `n` tokens `toks` (bytes and [`SEP`]), for at most `num_merges`
    /// merges, with at most `max_recs` live records (tests lower it). `None` when the
    /// vocabulary does not fit the slot layout or the byte pairs alone need more records
    /// than it links: then nothing was learned, and `engine` must do the work.
    pub(super) fn new(
        n: usize,
        toks: impl Iterator<Item = u32> + Clone,
        weights: W,
        num_merges: usize,
        max_recs: u32,
    ) -> Option<Small<W>> {
        // Ids stay below 256 + merges, and a run learns fewer merges than positions.
        let vocab = 256 + num_merges.min(n) as u64;
        // Token bits: room for every id and the separator (all ones) above them.
        let tb = 64 - vocab.leading_zeros();
        if tb > 20 {
            return None;
        }
        // The "no record" link: all ones in the link bits. Record ids stay below it.
        let no_link = (1u32 << (31 - tb)) - 1;
        let lay = Lay {
            n: n as u32,
            tb,
            tok_mask: (1u32 << tb) - 1,
        };
        // Room for what a run usually needs, reserved up front: growing a vector copies it
        // into fresh pages, each a fault, while reserved pages are only faulted in when
        // written. Live records never exceed the positions; a pass adds at most two new
        // occurrences per merged one, in real text far fewer than half the positions.
        let mut e = Small {
            lay,
            mem: HugeBytes::zeroed(Parts::words(n) * 4, MAP_MIN_BYTES),
            weights,
            recs: Recs {
                recs: Vec::with_capacity(n),
                free: Vec::new(),
            },
            max_recs: max_recs.min(no_link),
            alen: SCRATCH as usize + 1,
            heap: PairHeap::new(),
            next_id: 256,
            cursor: 0,
            pass: Pass {
                new: vec![NO_NEW_PAIR; 512],
                touched: Vec::new(),
                buf: Vec::with_capacity(n / 2 + 1),
            },
        };
        if e.initial_count(toks.take(n)) {
            Some(e)
        } else {
            None
        }
    }

    /// Fills the slots from `toks`, counts all byte pairs and builds the tracked records,
    /// their lists in the arena (a counting sort of the positions by pair) and the heap.
    /// False if the tracked pairs need more than `max_recs` records.
    ///
    /// Both passes read `toks` (for `--split none`, the text itself), not the slots: the
    /// first version counted from the slots and took 18% of a taylorswift.txt run.
    fn initial_count(&mut self, toks: impl Iterator<Item = u32> + Clone) -> bool {
        let lay = self.lay;
        let n = lay.n as usize;
        let sep = lay.sep();
        let slot = |t: u32, rec: u32| lay.live(if t == SEP { sep } else { t }, rec);
        let mut it = toks.clone();
        let Some(mut x) = it.next() else {
            return true;
        };
        // Two words per byte pair: its occurrences, which become `FLAG | record` when its
        // first position is met in the second pass, and then the next free entry of its
        // list, so that filling the lists reads one table line per position and not the
        // record too. Only the entries of pairs that occur are touched: a full sweep of
        // the table was a loop and page faults that cost most of a run on a tiny input.
        const FLAG: u32 = 1 << 31;
        let SetupParts {
            slots,
            lists: arena,
            occ,
        } = Parts::setup(&mut self.mem, n);
        let mut wsum = if W::UNIT {
            Vec::new()
        } else {
            vec![0u64; 1 << 16]
        };
        let mut pairs = 0usize;
        for (p, y) in it.enumerate() {
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                occ[2 * k] += 1;
                pairs += 1;
                if !W::UNIT {
                    wsum[k] += self.weights.at(p as u32);
                }
            }
            x = y;
        }
        let arena = &mut arena[..pairs + 1];
        let recs = &mut self.recs;
        let mut total = SCRATCH + 1;
        let mut it = toks;
        let Some(mut x) = it.next() else {
            return true;
        };
        for (p, y) in it.enumerate() {
            let mut id = NONE;
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                let v = occ[2 * k];
                if v & FLAG != 0 {
                    id = v & !FLAG;
                    let at = occ[2 * k + 1];
                    arena[at as usize] = p as u32;
                    occ[2 * k + 1] = at + 1;
                } else {
                    let count = if W::UNIT { u64::from(v) } else { wsum[k] };
                    if count >= 2 {
                        if recs.recs.len() as u32 >= self.max_recs {
                            return false;
                        }
                        id = recs.alloc(Rec {
                            a: x,
                            b: y,
                            count,
                            head: total,
                            end: total + v,
                        });
                        arena[total as usize] = p as u32;
                        occ[2 * k] = FLAG | id;
                        occ[2 * k + 1] = total + 1;
                        total += v;
                    }
                }
            }
            slots[p] = slot(x, id);
            x = y;
        }
        slots[n - 1] = slot(x, NONE);
        self.alen = total as usize;
        let arena = Parts::of(&mut self.mem, n).arena;
        self.heap = PairHeap::from_entries(
            self.recs
                .recs
                .iter()
                .enumerate()
                .map(|(id, r)| (r.count, arena[r.head as usize], id as u32)),
            n,
        );
        true
    }

    /// Learns up to `num_merges` merges, calling `on_merge` after each. The flag is false
    /// if the run stopped early because the next pass could need more records than slots
    /// can link; the merges so far are right, and `engine` must learn the rest.
    pub(super) fn run(
        mut self,
        num_merges: usize,
        on_merge: &mut dyn FnMut(&Merge),
    ) -> (Vec<Merge>, bool) {
        let mut merges = Vec::with_capacity(num_merges.min(self.lay.n as usize));
        while merges.len() < num_merges {
            let m = match self.pick() {
                Some(id) => {
                    // A pass creates at most two records per occurrence of its pair.
                    let r = &self.recs.recs[id as usize];
                    if 2 * u64::from(r.end - r.head) > self.recs.room(self.max_recs) {
                        return (merges, false);
                    }
                    self.merge_tracked(id)
                }
                None => match self.merge_leftmost() {
                    Some(m) => m,
                    None => break,
                },
            };
            on_merge(&m);
            merges.push(m);
        }
        (merges, true)
    }

    /// Advances the record's head to its first live entry and returns that position.
    fn first_live(&mut self, id: u32) -> u32 {
        let r = &self.recs.recs[id as usize];
        let (a, b, end) = (r.a, r.b, r.end as usize);
        let mut h = r.head as usize;
        let Parts { slots, arena, .. } = Parts::of(&mut self.mem, self.lay.n as usize);
        while h < end && !self.lay.occurs(slots, arena[h], a, b) {
            h += 1;
        }
        self.recs.recs[id as usize].head = h as u32;
        if h < end {
            arena[h]
        } else {
            NONE
        }
    }

    /// Pops the heap until its top is current; that record is the pair to merge.
    fn pick(&mut self) -> Option<u32> {
        let mut heap = std::mem::take(&mut self.heap);
        let id = heap.pick_current(|id| {
            let count = self.recs.recs[id as usize].count;
            (count >= 2).then(|| (count, self.first_live(id)))
        });
        self.heap = heap;
        id
    }

    /// Merges every occurrence of a tracked pair, left to right, updating neighbours.
    fn merge_tracked(&mut self, id: u32) -> Merge {
        let (a, b, count, head, end) = {
            let r = &self.recs.recs[id as usize];
            (r.a, r.b, r.count, r.head as usize, r.end as usize)
        };
        let c = self.next_id;
        self.next_id += 1;
        let size = self.next_id as usize + 1;
        self.pass.new.resize(2 * size, NO_NEW_PAIR);
        let lay = self.lay;
        let n = lay.n;
        let sep = lay.sep();
        // Local borrows of disjoint fields: the loop keeps the slices in registers
        // instead of reloading them through `self` after every store.
        let Parts { slots, arena, .. } = Parts::of(&mut self.mem, n as usize);
        let recs = &mut self.recs;
        let pass = &mut self.pass;
        let weights = &self.weights;
        let list = &arena[head..end];
        let mut sink = 0u32;
        for (i, &p) in list.iter().enumerate() {
            // Touch the slot a few entries ahead: its miss overlaps with this entry's work
            // instead of stalling behind a branch that depends on it.
            if let Some(&ahead) = list.get(i + PREFETCH) {
                sink = sink.wrapping_add(slots[ahead as usize]);
            }
            let vp = slots[p as usize];
            if lay.tok(vp) != a {
                continue;
            }
            let r = lay.next(slots, p);
            if r >= n {
                continue;
            }
            let vr = slots[r as usize];
            if lay.tok(vr) != b {
                continue;
            }
            let w = weights.at(p);
            let s = lay.next(slots, r);
            let l = lay.prev(slots, p);
            if l != NONE {
                let vl = slots[l as usize];
                let x = lay.tok(vl);
                if x != sep {
                    if x == c {
                        // (c, a) was created by the previous occurrence in this pass.
                        pass.new[2 * a as usize + 1].count -= w;
                    } else {
                        let rec_l = lay.rec(vl);
                        if rec_l != id {
                            recs.dec_old(rec_l, x, a, w);
                        }
                    }
                    let nid = pass.add(recs, true, x, (x, c), l, w);
                    slots[l as usize] = lay.with_rec(vl, nid);
                }
            }
            // `c` at `p`, linked to the new pair it starts, if any: one store.
            let mut merged = lay.live(c, NONE);
            if s < n {
                let y = lay.tok(slots[s as usize]);
                if y != sep {
                    let rec_r = lay.rec(vr);
                    if rec_r != id {
                        recs.dec_old(rec_r, b, y, w);
                    }
                    merged = lay.live(c, pass.add(recs, false, y, (c, y), p, w));
                }
            }
            slots[p as usize] = merged;
            delete_run(p, r, s, |q, v| slots[q as usize] = v);
        }
        std::hint::black_box(sink);
        self.recs.release(id);
        self.finish_pass(head as u32, end as u32);
        Merge {
            pair: (a, b),
            id: c,
            count,
        }
    }

    /// Turns the pass's new pairs into records with lists (count >= 2) or frees them.
    /// The merged pair's list `arena[hole..hole_end]` is free space for the new lists.
    fn finish_pass(&mut self, mut hole: u32, hole_end: u32) {
        let mut total = self.alen as u32;
        let recs = &mut self.recs;
        let pass = &mut self.pass;
        // Which pairs reach a count of 2, and which lists fit the hole, is data: the
        // branches that are left are taken once per new pair, the filling loop has none.
        for &entry in &pass.touched {
            let new = &mut pass.new[entry as usize];
            if new.count >= 2 {
                let fits = new.len <= hole_end - hole;
                let head = select_unpredictable(fits, hole, total);
                hole += new.len * u32::from(fits);
                total += new.len * u32::from(!fits);
                let r = &mut recs.recs[new.id as usize];
                r.count = new.count;
                r.head = head;
                r.end = head + new.len;
                new.at = head;
                new.step = 1;
            } else {
                recs.release(new.id);
                new.at = SCRATCH;
            }
        }
        self.alen = total as usize;
        let arena = Parts::of(&mut self.mem, self.lay.n as usize).arena;
        for &(entry, pos) in &pass.buf {
            let new = &mut pass.new[entry as usize];
            arena[new.at as usize] = pos;
            new.at += new.step;
        }
        for &entry in &pass.touched {
            let new = &mut pass.new[entry as usize];
            if new.step != 0 {
                let head = new.at - new.len;
                // The first entry may be dead (a transient (c, a)); an earlier position
                // only makes the key an upper bound, which `pick` corrects.
                PairQueue::push(&mut self.heap, new.count, arena[head as usize], new.id);
            }
            *new = NO_NEW_PAIR;
        }
        pass.touched.clear();
        pass.buf.clear();
    }

    /// Merges the leftmost pair of the sequence; used once every pair has count 1 (then no
    /// pair is tracked, and every pair a merge creates has count 1 too).
    fn merge_leftmost(&mut self) -> Option<Merge> {
        let lay = self.lay;
        let (n, sep) = (lay.n, lay.sep());
        let slots = Parts::of(&mut self.mem, n as usize).slots;
        let tok = |slots: &[u32], p: u32| lay.tok(slots[p as usize]);
        let mut p = self.cursor;
        loop {
            if p >= n {
                self.cursor = p;
                return None;
            }
            if tok(slots, p) == sep {
                p += 1;
                continue;
            }
            let r = lay.next(slots, p);
            if r < n && tok(slots, r) != sep {
                break;
            }
            p = r;
        }
        self.cursor = p;
        let r = lay.next(slots, p);
        let s = lay.next(slots, r);
        let (a, b) = (tok(slots, p), tok(slots, r));
        let c = self.next_id;
        self.next_id += 1;
        let count = self.weights.at(p);
        lay.merge_at(slots, p, r, s, c);
        Some(Merge {
            pair: (a, b),
            id: c,
            count,
        })
    }
}
