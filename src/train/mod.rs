//! BPE training: the seed's byte-level algorithm over one sequence (`--split none`) and
//! minbpe RegexTokenizer's chunked variant (regex split modes), both incremental.
//!
//! # Exactness
//! Each round merges the most frequent adjacent pair. Counts include overlaps (`aaa` has two
//! `aa`), merging is left to right without overlap, and ties go to the pair whose first
//! occurrence in the *current* sequence is earliest: the seed's `max(stats, key=stats.get)`
//! returns the first maximum of a dict filled in sequence order. In chunked mode pairs never
//! cross chunks, counts are sums weighted by how often each distinct chunk occurs, and the
//! distinct chunks are laid out in first-appearance order, so "first in the text" is "first
//! in this layout" (the first text occurrence of a pair lies in the first appearance of the
//! first distinct chunk that contains it).
//!
//! # Data structures (in `engine`)
//! - One slot per original position (`slots`): its token and a link to the record of the
//!   pair starting there, 8 bytes. A merge writes the new id at the left position and
//!   deletes the right one; deleted slots carry a flag and, at the two ends of each run of
//!   deleted slots, the live position beyond the run (gap encoding, as in Re-Pair), so
//!   `next`/`prev` are O(1) without link arrays.
//! - One record per *tracked* pair (weighted count >= 2): exact count, live occurrences, and
//!   its occurrence list in position order, validated lazily: an entry `p` is live iff
//!   `tokens[p] == a` and `tokens[next(p)] == b`. A position's token only ever grows to a
//!   newer id and `next(p)` only changes when `tokens[p]` does, so a dead entry never comes
//!   back to life. Existing pairs only lose occurrences; a new pair's occurrences are found
//!   by the left-to-right merge pass, so they arrive in position order too. A position's
//!   record link may be stale; it is trusted only if that record's pair is the pair at the
//!   position (pairs are never re-created, so this is exact). The links replace a hash map.
//!   All lists live end to end in one pool; dead lists leave holes that are slid shut in
//!   place when they are half the pool.
//! - A priority queue keyed by (count, first live position), refreshed lazily (`queue`):
//!   keys of existing pairs only get worse, so a popped entry whose key is still current is
//!   the true maximum; a stale one is re-pushed with its current key. The largest count
//!   never grows (a new pair occurs at most as often as the pair whose merge made it), so
//!   the large engine keeps counts below 4096 in buckets, each a small heap by position.
//! - Pairs of weighted count 1 are not tracked at all: counts never grow after a pair's
//!   creating pass, so such a pair can only be chosen when every pair has count 1, and then
//!   the tie rule picks the leftmost pair of the sequence, which a cursor finds.
//!
//! # Performance notes
//! Measured on the project machine (2-core x86-64 VM, shared with other jobs while
//! measuring: wall times varied 2x, so CPU seconds are quoted), release build, on a 27.3 MB
//! mixed text (Debian docs, English and localized man pages), `--split none` to vocab
//! 32768; `gzip -6` on the same file: 0.85 s.
//! - 23 M merged occurrences; random access into the position array dominates, and on this
//!   VM TLB misses cost more than cache misses (random 4-byte reads over 108 MB: 70-90 ns
//!   with 4 KB pages, 40 ns with huge pages). Huge pages for the slot array (memmap2's safe
//!   anonymous map + `MADV_HUGEPAGE`) took a run from 10-14 s to ~6 s CPU.
//! - Record links in the slots replace the pair -> record hash map (the link is in the
//!   cache line the merge already reads); new pairs take their record at once so positions
//!   are linked while hot. With touching the slot 16 list entries ahead in the merge loop
//!   (a plain load: prefetch intrinsics need `unsafe`), a run was 5.0-7.4 CPU s depending
//!   on the neighbours' load (since replaced by the batched touch below).
//! - Eager list compaction (dead > 2 x live) scanned 50 M entries; compacting only at
//!   dead > 8 x live + 64 is cheaper in time and costs ~30 MB.
//! - Peak memory was 413 MB for 27.3 MB (15 bytes per input byte, including the input)
//!   with a vector per list; 100 MB of docs: 1.38 GB (13.8 bytes/byte), 24 CPU s.
//! - The initial pair count and the fill of the slots and first lists run on both cores
//!   (two shards of the text; sums and list order do not depend on the cut). Fresh memory
//!   is the cost here: when the host has taken back a guest's free pages (the VM reports
//!   them through its balloon driver), every first touch faults on the host too, ~1.6-2 ms
//!   per MB (216 MB of huge pages: 0.35-0.43 s cold, 0.03 s when just freed by another
//!   process). Set-up 0.72 -> 0.44 s (means of 5 alternated runs; 0.25-0.65 s per run).
//! - November 30, measured as means of 4-5 alternated runs of each build (in-process, the
//!   whole 27 MB run; the host's speed moved 30% within minutes, so only alternated
//!   figures compare): the merge loop first loads the slots of 32 list entries in a tight
//!   loop, then merges them (their misses overlap; a load a few entries ahead inside the
//!   loop still has to retire in order), merge phase 6.65 -> 5.45 s; a bucket queue (the
//!   one heap grew to 1.26 M entries for < 0.2 M pops, each pop ~20 levels of misses)
//!   for the last 29 k merges 2.24 -> 1.99 s; the list pool (a million short `Vec`s had
//!   cost a fifth of those merges in `malloc` and `free`) 4.63 -> 4.05 s in all, peak
//!   memory 412 -> 502 MB (18.6 bytes per input byte; 100 MB: 1.72 GB, 17.2). The pool
//!   is collected 3 times in that run (50-100 ms each) and hands back capacity when a
//!   collection leaves it under an eighth full (16 MB of one repeated byte: peak 375 MB
//!   before the pool, 470 MB with it, 380 MB handing back; at a quarter, the 27 MB run
//!   re-faulted what it had handed back: 0.12 s more system time). Splitting the big early passes
//!   over two threads (per-thread count deltas, boundary occurrences settled in order) is
//!   the next step for speed: the first 3000 merges are now 60% of the merge time.
//! - Inputs below 2^20 positions train in `small`, the same algorithm laid out for a short
//!   run (one list arena, 4-byte slots, one huge page; see its notes): taylorswift.txt
//!   to 512 merges, whole process, 8.5 -> 5.7 -> 4.7 ms CPU (4.2 ms wall on 2026-12-01,
//!   after taking the branches on data out of `prev_live`, `delete_run` and the heap;
//!   then in process 15% less by not mapping unset record links to `NONE` and back).
//!   `train_chunks` on the 141 k distinct GPT-4 chunks (1.4 MB) of the 27 MB text to
//!   32768: ~0.4 CPU s.

mod engine;
mod queue;
mod slots;
mod small;

use engine::{Engine, PerPos, Unit, SEP};
use small::{Small, SMALL_MAX};

/// One learned merge: the pair, the new id (256 + index), and the pair's count when learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merge {
    /// The two ids merged, left then right.
    pub pair: (u32, u32),
    /// The new token's id: 256 for the first merge, then consecutive.
    pub id: u32,
    /// The pair's count (overlaps included; weighted in chunked mode) when it was chosen.
    pub count: u64,
}

/// The longest text (`train_bytes`), or total length of the chunks plus one per chunk
/// (`train_chunks`), the trainer accepts: positions and ids live in 31 bits. Callers must
/// reject longer input (the trainer panics on it).
pub const MAX_TRAIN_LEN: usize = (1 << 31) - 1024;

/// The seed's algorithm (`--split none`): byte-level BPE over `text` as ONE sequence, bytes
/// are ids 0..255. Learns up to `vocab_size - 256` merges; stops early only when no pair is
/// left. `on_merge` is called after each merge. Uses a second thread for the set-up of
/// inputs from 2^20 bytes ([`train_bytes_with`] with 1 thread does not).
///
/// # Panics
/// If `text` is longer than [`MAX_TRAIN_LEN`].
pub fn train_bytes(text: &[u8], vocab_size: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
    train_bytes_with(EngineChoice::Auto, 2, text, vocab_size, on_merge)
}

/// Which merge engine trains: by input length (`Auto`), or forced, so that tests hold
/// both engines to the naive trainer on the same small inputs. Not a stable interface.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// `Small` below 2^20 positions (`small::SMALL_MAX`), `Large` from there.
    Auto,
    /// One arena for all occurrence lists, 4-byte slots, huge-page memory, one thread;
    /// hands over to `Large` if its slots cannot link all the records a run needs.
    Small,
    /// `Small` with at most this many live records, so tests reach the hand-over.
    SmallCapped(u32),
    /// Huge-page slots, compacted per-pair lists, two-thread initial count.
    Large,
}

impl EngineChoice {
    /// The small engine's record limit for an input of `len` positions, if it trains it.
    fn small(self, len: usize) -> Option<u32> {
        match self {
            EngineChoice::Auto if len < SMALL_MAX => Some(u32::MAX),
            EngineChoice::Small => Some(u32::MAX),
            EngineChoice::SmallCapped(cap) => Some(cap),
            _ => None,
        }
    }
}

/// Runs the small engine if `choice` says so. `Ok(merges)` when it finished; otherwise
/// how many merges it learned (and reported), which the large engine must not report again.
fn try_small<W: engine::Weights>(
    choice: EngineChoice,
    n: usize,
    toks: impl Iterator<Item = u32> + Clone,
    weights: impl FnOnce() -> W,
    num_merges: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Result<Vec<Merge>, usize> {
    let Some(cap) = choice.small(n) else {
        return Err(0);
    };
    let Some(small) = Small::new(n, toks, weights(), num_merges, cap) else {
        return Err(0);
    };
    match small.run(num_merges, on_merge) {
        (merges, true) => Ok(merges),
        (merges, false) => Err(merges.len()),
    }
}

/// `on_merge` without its first `skip` calls.
fn skipping(skip: usize, on_merge: &mut dyn FnMut(&Merge)) -> impl FnMut(&Merge) + '_ {
    let mut seen = 0usize;
    move |m: &Merge| {
        if seen >= skip {
            on_merge(m);
        }
        seen += 1;
    }
}

/// [`train_bytes`] on the engine `choice` names, with `threads` threads at most (the
/// large engine counts and fills its slots on two from 2^20 positions; 1: on one).
#[doc(hidden)]
pub fn train_bytes_with(
    choice: EngineChoice,
    threads: usize,
    text: &[u8],
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    assert!(
        text.len() <= MAX_TRAIN_LEN,
        "training input longer than {MAX_TRAIN_LEN} bytes"
    );
    let num_merges = vocab_size.saturating_sub(256);
    let toks = text.iter().map(|&b| u32::from(b));
    let skip = match try_small(choice, text.len(), toks, || Unit, num_merges, on_merge) {
        Ok(merges) => return merges,
        Err(skip) => skip,
    };
    let tok_at = |p: u32| u32::from(text[p as usize]);
    let engine = Engine::new(text.len() as u32, tok_at, Unit, threads);
    engine.run(num_merges, &mut skipping(skip, on_merge))
}

/// Chunked training (regex split modes): distinct chunks in FIRST-APPEARANCE order with
/// their occurrence counts; pairs never cross chunks; counts are weighted sums; ties go to
/// the pair that occurs first in the text (= first in this chunk order, then position in
/// chunk). Gives exactly minbpe RegexTokenizer's merges. Chunks need not be distinct
/// (a repeated chunk behaves as its occurrences would); chunks of weight 0 are ignored.
/// Threads as [`train_bytes`].
///
/// # Panics
/// If the chunks of weight > 0 and length >= 2, plus one byte each, exceed
/// [`MAX_TRAIN_LEN`].
pub fn train_chunks<'a>(
    chunks: impl IntoIterator<Item = (&'a [u8], u64)>,
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    train_chunks_with(EngineChoice::Auto, 2, chunks, vocab_size, on_merge)
}

/// [`train_chunks`] on the engine `choice` names, with `threads` threads at most (as
/// [`train_bytes_with`]).
#[doc(hidden)]
pub fn train_chunks_with<'a>(
    choice: EngineChoice,
    threads: usize,
    chunks: impl IntoIterator<Item = (&'a [u8], u64)>,
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    // Chunks of one byte never hold a pair, and merges never create one in them.
    let kept: Vec<(&[u8], u64)> = chunks
        .into_iter()
        .filter(|&(c, w)| w > 0 && c.len() >= 2)
        .collect();
    // Chunk bytes with a separator slot between chunks; the separator never pairs.
    let len = kept
        .iter()
        .map(|(c, _)| c.len() + 1)
        .sum::<usize>()
        .saturating_sub(1);
    assert!(
        len <= MAX_TRAIN_LEN,
        "training chunks longer than {MAX_TRAIN_LEN} bytes in all"
    );
    let num_merges = vocab_size.saturating_sub(256);
    // The chunks' tokens with a separator between chunks, and each position's weight.
    let toks = kept.iter().enumerate().flat_map(|(i, &(chunk, _))| {
        let sep = (i > 0).then_some(SEP);
        sep.into_iter().chain(chunk.iter().map(|&b| u32::from(b)))
    });
    let weights = || {
        let mut weights: Vec<u64> = Vec::with_capacity(len);
        for (i, &(chunk, w)) in kept.iter().enumerate() {
            if i > 0 {
                weights.push(0);
            }
            weights.extend(std::iter::repeat_n(w, chunk.len()));
        }
        PerPos(weights)
    };
    let skip = match try_small(choice, len, toks.clone(), weights, num_merges, on_merge) {
        Ok(merges) => return merges,
        Err(skip) => skip,
    };
    let (tokens, weights): (Vec<u32>, _) = (toks.collect(), weights());
    drop(kept);
    let tok_at = |p: u32| tokens[p as usize];
    let engine = Engine::new(len as u32, tok_at, weights, threads);
    drop(tokens);
    engine.run(num_merges, &mut skipping(skip, on_merge))
}
