//! BPE training: byte-level BPE over one sequence (`--split none`) and minbpe
//! RegexTokenizer's chunked variant (regex split modes), both on one incremental engine.
//!
//! # Exactness
//! Each round merges the most frequent adjacent pair. Counts include overlaps (`aaa` has two
//! `aa`), merging is left to right without overlap, and ties go to the pair whose first
//! occurrence in the *current* sequence is earliest: Python's `max(stats, key=stats.get)`
//! returns the first maximum of a dict filled in sequence order. In chunked mode pairs never
//! cross chunks, counts are sums weighted by how often each distinct chunk occurs, and the
//! distinct chunks are laid out in first-appearance order with a separator between them,
//! so "first in the text" is "first in this layout" (the first text occurrence of a pair
//! lies in the first appearance of the first distinct chunk that contains it).
//!
//! # Modules
//! - this one: the entry points; the input as a token stream (bytes, separators) and its
//!   weights (one for all positions, or one per position when chunk weights differ: a
//!   single chunk, even 200 MB of one letter, costs no weight array).
//! - `engine`: the records, the merge passes and the set-up.
//! - `slots`: the per-position array and its two layouts; `queue`: the pair queue.
//! - `tokens`: the learned tokens' bytes for callers that show them as they come.
//!
//! # Memory
//! Per input position: a slot (4 or 8 bytes), its entry in the initial occurrence lists
//! (4), and while a pass over a long list runs, 4 bytes per new occurrence (at most half
//! the positions). A run of one letter, the worst case, peaks at 15.8 bytes per input
//! byte with the mapped input and the process included (20 MB, `bpe-train --split none`);
//! a test holds it under 16. Long tokens' bytes are not kept ([`TokenBytes`]).
//!
//! # Kept decisions
//! One engine for every input. What still depends on the input is chosen per run, each for
//! its figure: the 4-byte slot layout where every record gets a link (`slots`), and the
//! two-thread set-up and bucket queue from 2^20 positions (`engine`, `queue`).

mod engine;
mod queue;
mod slots;
mod tokens;

pub(crate) use engine::Merge;
use engine::{Engine, PerPos, Plan, Tokens, Uniform, Weights};
use slots::{Packed, Wide, SEP};
pub(crate) use tokens::TokenBytes;

/// The longest text (`train_bytes`), or total length of the chunks plus one per chunk
/// (`train_chunks`), the trainer accepts: positions and ids live in 31 bits. Callers must
/// reject longer input (the trainer panics on it).
pub(crate) const MAX_TRAIN_LEN: usize = (1 << 31) - 1024;

#[cfg(test)]
/// Byte-level BPE over `text` as ONE sequence (`--split none`), bytes are ids 0..255.
/// Learns up to `vocab_size - 256` merges; stops early only when no pair is left.
/// `on_merge` is called after each merge. Uses a second thread for the set-up of inputs
/// from 2^20 bytes ([`train_bytes_with`] with 1 thread does not).
///
/// # Panics
/// If `text` is longer than [`MAX_TRAIN_LEN`].
pub(crate) fn train_bytes(
    text: &[u8],
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    train_bytes_with(EngineChoice::Auto, 2, text, vocab_size, on_merge)
}

/// How the engine is laid out: by input (`Auto`), or forced, so that tests hold every
/// layout and path to the naive trainer on the same small inputs. Not a stable interface.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineChoice {
    /// 4-byte slots where they fit; two-thread set-up and bucket queue from 2^20 positions.
    Auto,
    /// 4-byte slots (8-byte where they cannot link every record), one-thread set-up, one
    /// heap, whatever the length.
    Packed,
    /// 8-byte slots, the set-up in two shards, the bucket queue, whatever the length.
    Wide,
    /// `Packed` with every pass lean and the smallest arena (collected whenever a pass's
    /// lists do not fit).
    PackedTight,
    /// `Wide` with every pass lean and the smallest arena.
    WideTight,
}

/// [`train_bytes`] laid out as `choice` says, with `threads` threads at most (the set-up
/// of a large input runs on two; 1: on one).
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
    let tokens = Bytes(text);
    train(choice, threads, &tokens, Uniform(1), num_merges, on_merge)
}

#[cfg(test)]
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
pub(crate) fn train_chunks<'a>(
    chunks: impl IntoIterator<Item = (&'a [u8], u64)>,
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    train_chunks_with(EngineChoice::Auto, 2, chunks, vocab_size, on_merge)
}

/// [`train_chunks`] laid out as `choice` says, with `threads` threads at most (as
/// [`train_bytes_with`]).
#[doc(hidden)]
pub(crate) fn train_chunks_with<'a>(
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
    let tokens = Chunks::new(kept.iter().map(|&(c, _)| c));
    assert!(
        tokens.len <= MAX_TRAIN_LEN,
        "training chunks longer than {MAX_TRAIN_LEN} bytes in all"
    );
    let num_merges = vocab_size.saturating_sub(256);
    let first = kept.first().map_or(1, |&(_, w)| w);
    if kept.iter().all(|&(_, w)| w == first) {
        return train(
            choice,
            threads,
            &tokens,
            Uniform(first),
            num_merges,
            on_merge,
        );
    }
    // Each position carries its chunk's weight; separators 0.
    let mut weights: Vec<u64> = Vec::with_capacity(tokens.len);
    for (i, &(chunk, w)) in kept.iter().enumerate() {
        if i > 0 {
            weights.push(0);
        }
        weights.extend(std::iter::repeat_n(w, chunk.len()));
    }
    let weights = PerPos(weights);
    train(choice, threads, &tokens, weights, num_merges, on_merge)
}

/// Trains on `tokens` (of `tokens.len()` positions) with the layout and plan `choice`
/// gives.
fn train<T: Tokens + Len, W: Weights>(
    choice: EngineChoice,
    threads: usize,
    tokens: &T,
    weights: W,
    num_merges: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    let n = tokens.len();
    if n < 2 {
        return Vec::new();
    }
    let mut plan = Plan::auto(n, threads);
    let vocab = 256 + num_merges.min(n) as u64;
    let packed = match choice {
        EngineChoice::Wide | EngineChoice::WideTight => None,
        _ => Packed::fitting(n as u32, vocab),
    };
    match choice {
        EngineChoice::Auto => {}
        EngineChoice::Packed | EngineChoice::PackedTight => plan.large = false,
        EngineChoice::Wide | EngineChoice::WideTight => {
            plan.large = true;
            plan.two_threads = threads > 1;
        }
    }
    if matches!(choice, EngineChoice::PackedTight | EngineChoice::WideTight) {
        plan.lean_min = 0;
        plan.arena_cap = n + 1;
    }
    match packed {
        Some(lay) => Engine::new(lay, tokens, weights, plan).run(num_merges, on_merge),
        None => Engine::new(Wide::new(n as u32), tokens, weights, plan).run(num_merges, on_merge),
    }
}

/// A token stream's length in positions.
trait Len {
    fn len(&self) -> usize;
}

/// The text's bytes as tokens.
struct Bytes<'a>(&'a [u8]);

impl Len for Bytes<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl Tokens for Bytes<'_> {
    #[inline]
    fn from(&self, p: usize) -> impl Iterator<Item = u32> + '_ {
        self.0[p..].iter().map(|&b| u32::from(b))
    }
}

/// Chunks as tokens: their bytes with [`SEP`] between chunks.
struct Chunks<'a> {
    chunks: Vec<&'a [u8]>,
    /// Where each chunk's first byte is (the separator before it is one earlier).
    starts: Vec<usize>,
    len: usize,
}

impl<'a> Chunks<'a> {
    fn new(chunks: impl Iterator<Item = &'a [u8]>) -> Chunks<'a> {
        let chunks: Vec<&[u8]> = chunks.collect();
        let mut starts = Vec::with_capacity(chunks.len());
        let mut at = 0;
        for c in &chunks {
            starts.push(at);
            at += c.len() + 1;
        }
        Chunks {
            chunks,
            starts,
            len: at.saturating_sub(1),
        }
    }
}

impl Len for Chunks<'_> {
    fn len(&self) -> usize {
        self.len
    }
}

impl Tokens for Chunks<'_> {
    fn from(&self, p: usize) -> impl Iterator<Item = u32> + '_ {
        // The chunk holding `p`, or whose separator after it is `p`.
        let i = self.starts.partition_point(|&s| s <= p).saturating_sub(1);
        let (chunk, start) = match self.chunks.get(i) {
            Some(&c) => (c, self.starts[i]),
            None => (&[][..], 0),
        };
        let head = chunk[(p - start).min(chunk.len())..].iter();
        let rest = self.chunks[(i + 1).min(self.chunks.len())..]
            .iter()
            .flat_map(|c| std::iter::once(SEP).chain(c.iter().map(|&b| u32::from(b))));
        head.map(|&b| u32::from(b)).chain(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::{Chunks, Tokens, SEP};

    /// Every starting position gives the rest of the laid-out stream.
    #[test]
    fn chunk_tokens_from_any_position() {
        let chunks: [&[u8]; 3] = [b"ab", b"cde", b"fg"];
        let tokens = Chunks::new(chunks.into_iter());
        let all: Vec<u32> = [97, 98, SEP, 99, 100, 101, SEP, 102, 103].into();
        assert_eq!(tokens.len, all.len());
        for p in 0..=all.len() {
            assert_eq!(tokens.from(p).collect::<Vec<_>>(), all[p..], "from {p}");
        }
        assert_eq!(Chunks::new(std::iter::empty()).from(0).count(), 0);
    }
}
