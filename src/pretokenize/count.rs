//! Chunk counting for training: the distinct chunks of a text with their counts, in
//! first-appearance order, counted in parallel shards or streamed block by block; either
//! over the text as one stream, or record by record (`bpe-train --records`: each line,
//! with its `\n`, is pre-split on its own, so a chunk never spans two records and any
//! cut of the input at line ends counts the same as the whole).
//!
//! Performance notes: the table is a hand-rolled open-addressing index over the arena
//! (8-byte slots: a 32-bit hash tag and an entry number) rather than an
//! `AHashMap<Box<[u8]>, _>`, so each distinct chunk is stored once, in the arena, and the
//! streaming counter owns its keys without a second copy. Shards are merged in text order,
//! each shard's distinct chunks in their own first-appearance order, which is exactly the
//! global first-appearance order.

use super::{SpecialCutter, Splitter};

/// Distinct chunks with their counts, in order of first appearance; stored compactly as
/// one byte arena plus spans (about 28 bytes per distinct chunk besides its bytes while
/// counting). At most 2^32 - 1 distinct chunks.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChunkCounts {
    bytes: Vec<u8>,
    /// `ends[i]` is where chunk `i` ends in `bytes`; it starts at `ends[i - 1]` (or 0).
    ends: Vec<usize>,
    counts: Vec<u64>,
    /// Open-addressing index: `(hash tag, entry + 1)`, `(_, 0)` is empty.
    slots: Vec<(u32, u32)>,
    hasher: ahash::RandomState,
}

impl PartialEq for ChunkCounts {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes && self.ends == other.ends && self.counts == other.counts
    }
}

impl Eq for ChunkCounts {}

impl ChunkCounts {
    /// No chunks.
    pub(crate) fn new() -> ChunkCounts {
        ChunkCounts::default()
    }

    /// The number of distinct chunks.
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    #[cfg(test)]
    /// The sum of all counts (the number of chunks in the text).
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `i`-th distinct chunk (in first-appearance order) and its count.
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], u64)> {
        let count = *self.counts.get(i)?;
        Some((self.chunk(i), count))
    }

    /// The distinct chunks with their counts, in order of first appearance.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        (0..self.len()).map(move |i| (self.chunk(i), self.counts[i]))
    }

    fn chunk(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Adds `n` occurrences of `chunk` (a new chunk goes last).
    pub(crate) fn add(&mut self, chunk: &[u8], n: u64) {
        self.add_at(chunk, n);
    }

    /// [`ChunkCounts::add`], returning the chunk's entry number (its place in
    /// first-appearance order). A count that would pass `u64::MAX` stays there.
    pub(crate) fn add_at(&mut self, chunk: &[u8], n: u64) -> usize {
        if (self.counts.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let hash = self.hasher.hash_one(chunk);
        let tag = (hash >> 32) as u32;
        let mask = self.slots.len() - 1;
        let mut pos = hash as usize & mask;
        loop {
            let (t, e) = self.slots[pos];
            if e == 0 {
                break;
            }
            let i = (e - 1) as usize;
            if t == tag && self.chunk(i) == chunk {
                self.counts[i] = self.counts[i].saturating_add(n);
                return i;
            }
            pos = (pos + 1) & mask;
        }
        self.bytes.extend_from_slice(chunk);
        self.ends.push(self.bytes.len());
        self.counts.push(n);
        self.slots[pos] = (tag, self.counts.len() as u32);
        self.counts.len() - 1
    }

    /// Adds every chunk of `other` with its count, in `other`'s order.
    pub(crate) fn merge(&mut self, other: &ChunkCounts) {
        for (chunk, n) in other.iter() {
            self.add(chunk, n);
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(64);
        self.slots = vec![(0, 0); size];
        let mask = size - 1;
        for i in 0..self.counts.len() {
            let hash = self.hasher.hash_one(self.chunk(i));
            let mut pos = hash as usize & mask;
            while self.slots[pos].1 != 0 {
                pos = (pos + 1) & mask;
            }
            self.slots[pos] = ((hash >> 32) as u32, i as u32 + 1);
        }
    }

    /// Frees the lookup index (after counting ends; `add` rebuilds it if needed).
    fn shrink(&mut self) {
        self.slots = Vec::new();
        self.bytes.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.counts.shrink_to_fit();
    }
}

/// Below this many bytes per thread, counting stays on one thread.
const MIN_SHARD: usize = 1 << 20;

/// Counts the chunks of `text` as `splitter` cuts it, on up to `threads` threads. The
/// text is sharded at safe cuts (preset patterns only; a custom pattern counts on one
/// thread), so the result is identical to a single-threaded count.
pub(crate) fn count_chunks(text: &[u8], splitter: &Splitter, threads: usize) -> ChunkCounts {
    let mut counts = ChunkCounts::new();
    count_into(&mut counts, text, splitter, threads);
    counts.shrink();
    counts
}

fn count_one(counts: &mut ChunkCounts, text: &[u8], splitter: &Splitter) {
    splitter.split(text, &mut |chunk| counts.add(chunk, 1));
}

/// Adds the chunks of `text` to `counts`, sharding the text over threads.
fn count_into(counts: &mut ChunkCounts, text: &[u8], splitter: &Splitter, threads: usize) {
    let threads = threads.max(1).min(text.len() / MIN_SHARD).max(1);
    if threads == 1 || !splitter.is_preset() {
        count_one(counts, text, splitter);
        return;
    }
    let mut cuts = vec![0];
    for k in 1..threads {
        let near = text.len() / threads * k;
        let prev = *cuts.last().unwrap_or(&0);
        if let Some(p) = splitter.last_safe_cut(text, prev + 1, near) {
            cuts.push(p);
        }
    }
    cuts.push(text.len());
    let shards: Vec<&[u8]> = cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect();
    let (first, rest) = shards
        .split_first()
        .map_or((&[][..], &[][..]), |(f, r)| (*f, r));
    let partial: Vec<ChunkCounts> = std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .map(|shard| {
                scope.spawn(move || {
                    let mut c = ChunkCounts::new();
                    count_one(&mut c, shard, splitter);
                    c
                })
            })
            .collect();
        count_one(counts, first, splitter);
        handles
            .into_iter()
            .zip(rest)
            .map(|(h, shard)| {
                h.join().unwrap_or_else(|_| {
                    // A shard thread cannot panic short of a bug; recount it here.
                    let mut c = ChunkCounts::new();
                    count_one(&mut c, shard, splitter);
                    c
                })
            })
            .collect()
    });
    for p in &partial {
        counts.merge(p);
    }
}

/// Counts chunks of a text that arrives in blocks (stdin of any size): the result is
/// identical to [`count_chunks`] over the concatenated blocks. Each block is counted up to
/// its last safe cut; only the unfinished tail is held back, so memory grows with the
/// distinct chunks and the longest stretch without a safe cut, not with the text. A
/// custom pattern has no safe cuts: its whole text is held until [`ChunkCounter::finish`].
pub(crate) struct ChunkCounter<'s> {
    splitter: &'s Splitter,
    threads: usize,
    batch: usize,
    pending: Vec<u8>,
    /// No safe cut lies in `1..searched` of `pending` (apart from positions next to a
    /// character that was incomplete at the time, re-examined below).
    searched: usize,
    counts: ChunkCounts,
}

impl<'s> ChunkCounter<'s> {
    /// A counter splitting with `splitter` on up to `threads` threads.
    pub(crate) fn new(splitter: &'s Splitter, threads: usize) -> ChunkCounter<'s> {
        let threads = threads.max(1);
        ChunkCounter {
            splitter,
            threads,
            batch: threads * (4 << 20),
            pending: Vec::new(),
            searched: 0,
            counts: ChunkCounts::new(),
        }
    }

    #[cfg(test)]
    /// Sets how many bytes to gather before counting (default: 4 MiB per thread). Small
    /// values exercise the block boundaries in tests; large ones amortise thread start-up.
    pub(crate) fn set_batch(&mut self, bytes: usize) {
        self.batch = bytes.max(1);
    }

    /// Adds the next block of the text (blocks may cut anywhere, even inside a UTF-8
    /// sequence).
    pub(crate) fn feed(&mut self, block: &[u8]) {
        self.pending.extend_from_slice(block);
        if self.pending.len() < self.batch {
            return;
        }
        // A character cut by the end of the previous search may have been rejected; look
        // a few bytes back again.
        let lo = self.searched.saturating_sub(8);
        match self
            .splitter
            .last_safe_cut(&self.pending, lo, self.pending.len())
        {
            Some(p) => {
                count_into(
                    &mut self.counts,
                    &self.pending[..p],
                    self.splitter,
                    self.threads,
                );
                self.pending.drain(..p);
                self.searched = 0;
            }
            None => self.searched = self.pending.len(),
        }
    }

    /// Counts the held-back tail and returns the counts of the whole text.
    pub(crate) fn finish(mut self) -> ChunkCounts {
        let pending = std::mem::take(&mut self.pending);
        count_into(&mut self.counts, &pending, self.splitter, self.threads);
        self.counts.shrink();
        self.counts
    }
}

/// Counts the chunks of the records of `text` record by record, on up to `threads`
/// threads: each line with its `\n` (one is supplied after a last line that lacks it)
/// is cut at the special tokens of `specials`, and each piece split by `splitter` on its
/// own. Any cut of `text` after a `\n` counts the same, so the text is sharded at line
/// ends whatever the pattern (custom ones too).
pub(crate) fn count_records(
    text: &[u8],
    splitter: &Splitter,
    specials: &SpecialCutter,
    threads: usize,
) -> ChunkCounts {
    let mut counts = ChunkCounts::new();
    count_records_into(
        &mut counts,
        text,
        RecordEnds::Lines,
        splitter,
        specials,
        threads,
    );
    counts.shrink();
    counts
}

/// Adds the chunks of one record (its exact bytes: a line with its `\n`, or a JSONL
/// document's text) to `counts`.
fn count_record(
    counts: &mut ChunkCounts,
    record: &[u8],
    splitter: &Splitter,
    specials: &SpecialCutter,
) {
    specials.for_each_piece(record, &mut |piece| {
        splitter.split(piece, &mut |chunk| counts.add(chunk, 1));
    });
}

/// Where the records of a text end.
#[derive(Clone, Copy)]
enum RecordEnds<'e> {
    /// After each `\n`; a last line that lacks it is a record with the `\n` supplied.
    Lines,
    /// At these offsets, in increasing order, the last one the text's length (JSONL
    /// documents, each counted as its exact bytes).
    At(&'e [usize]),
}

impl RecordEnds<'_> {
    /// The first record end at or after `near` in `text`, if one lies before its end.
    fn cut_near(self, text: &[u8], near: usize) -> Option<usize> {
        let end = match self {
            RecordEnds::Lines => near + memchr::memchr(b'\n', &text[near..])? + 1,
            RecordEnds::At(ends) => *ends.get(ends.partition_point(|&e| e < near))?,
        };
        (end < text.len()).then_some(end)
    }

    /// Counts, on this thread, the records of `text` that lie in `from..to` (both are
    /// record ends, or 0 and the text's length).
    fn count(
        self,
        counts: &mut ChunkCounts,
        text: &[u8],
        (from, to): (usize, usize),
        splitter: &Splitter,
        specials: &SpecialCutter,
    ) {
        let mut start = from;
        match self {
            RecordEnds::Lines => {
                for nl in memchr::memchr_iter(b'\n', &text[from..to]) {
                    let end = from + nl + 1;
                    count_record(counts, &text[start..end], splitter, specials);
                    start = end;
                }
                if start < to {
                    let mut last = text[start..to].to_vec();
                    last.push(b'\n');
                    count_record(counts, &last, splitter, specials);
                }
            }
            RecordEnds::At(ends) => {
                let first = ends.partition_point(|&e| e <= from);
                for &end in ends[first..].iter().take_while(|&&e| e <= to) {
                    count_record(counts, &text[start..end], splitter, specials);
                    start = end;
                }
            }
        }
    }
}

/// Adds the chunks of the records of `text` to `counts`, on up to `threads` threads: the
/// text is sharded at record ends into parts of about equal bytes, each counted on its
/// own thread, and the parts' counts merged in order, so the chunks keep the order of
/// their first appearance.
fn count_records_into(
    counts: &mut ChunkCounts,
    text: &[u8],
    ends: RecordEnds,
    splitter: &Splitter,
    specials: &SpecialCutter,
    threads: usize,
) {
    let threads = threads.max(1).min(text.len() / MIN_SHARD).max(1);
    let mut cuts = vec![0];
    for k in 1..threads {
        let near = (text.len() / threads * k).max(*cuts.last().unwrap_or(&0));
        if let Some(cut) = ends.cut_near(text, near) {
            cuts.push(cut);
        }
    }
    cuts.push(text.len());
    cuts.dedup();
    let shards: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let count = |counts: &mut ChunkCounts, shard: (usize, usize)| {
        ends.count(counts, text, shard, splitter, specials)
    };
    let Some((&first, rest)) = shards.split_first() else {
        return;
    };
    if rest.is_empty() {
        count(counts, first);
        return;
    }
    let partial: Vec<ChunkCounts> = std::thread::scope(|scope| {
        let handles: Vec<_> = rest
            .iter()
            .map(|&shard| {
                scope.spawn(move || {
                    let mut c = ChunkCounts::new();
                    count(&mut c, shard);
                    c
                })
            })
            .collect();
        count(counts, first);
        handles
            .into_iter()
            .zip(rest)
            .map(|(h, &shard)| {
                h.join().unwrap_or_else(|_| {
                    // A shard thread cannot panic short of a bug; recount it here.
                    let mut c = ChunkCounts::new();
                    count(&mut c, shard);
                    c
                })
            })
            .collect()
    });
    for p in &partial {
        counts.merge(p);
    }
}

/// Counts record by record a text that arrives in parts: blocks of lines (stdin of any
/// size, [`feed`](Self::feed)) or whole records (JSONL documents,
/// [`feed_record`](Self::feed_record)); one counter is fed one way. The result is
/// identical to counting each record on its own in order ([`count_records`] over the
/// concatenated blocks). Records are gathered into batches (about 4 MiB per thread) and
/// each batch counted up to its last record end; only an unfinished line is held back,
/// so memory grows with the distinct chunks and the longest record, not with the text.
pub(crate) struct RecordCounter<'s> {
    splitter: &'s Splitter,
    specials: &'s SpecialCutter,
    threads: usize,
    batch: usize,
    pending: Vec<u8>,
    /// The ends of the records in `pending`, when fed whole records.
    ends: Vec<usize>,
    counts: ChunkCounts,
}

impl<'s> RecordCounter<'s> {
    /// A counter splitting with `splitter`, cutting at `specials`, on up to `threads`
    /// threads.
    pub(crate) fn new(
        splitter: &'s Splitter,
        specials: &'s SpecialCutter,
        threads: usize,
    ) -> RecordCounter<'s> {
        let threads = threads.max(1);
        RecordCounter {
            splitter,
            specials,
            threads,
            batch: threads * (4 << 20),
            pending: Vec::new(),
            ends: Vec::new(),
            counts: ChunkCounts::new(),
        }
    }

    #[cfg(test)]
    /// Sets how many bytes to gather before counting (default: 4 MiB per thread).
    pub(crate) fn set_batch(&mut self, bytes: usize) {
        self.batch = bytes.max(1);
    }

    /// Adds the next block of lines (blocks may cut anywhere).
    pub(crate) fn feed(&mut self, block: &[u8]) {
        debug_assert!(self.ends.is_empty(), "a counter is fed lines or records");
        self.pending.extend_from_slice(block);
        if self.pending.len() < self.batch {
            return;
        }
        if let Some(nl) = memchr::memrchr(b'\n', &self.pending) {
            self.count_pending(nl + 1, RecordEnds::Lines);
        }
    }

    /// Adds one whole record, counted as its exact bytes.
    pub(crate) fn feed_record(&mut self, record: &[u8]) {
        self.pending.extend_from_slice(record);
        self.ends.push(self.pending.len());
        if self.pending.len() >= self.batch {
            self.end_input();
        }
    }

    /// Counts `pending[..to]` as records ending as `ends` says, and drops it.
    fn count_pending(&mut self, to: usize, ends: RecordEnds) {
        count_records_into(
            &mut self.counts,
            &self.pending[..to],
            ends,
            self.splitter,
            self.specials,
            self.threads,
        );
        self.pending.drain(..to);
    }

    /// Ends one input: its last line, if it lacks a `\n`, is a record of its own (with
    /// the `\n` supplied), not the start of the next input's first line.
    pub(crate) fn end_input(&mut self) {
        let ends = std::mem::take(&mut self.ends);
        let kind = if ends.is_empty() {
            RecordEnds::Lines
        } else {
            RecordEnds::At(&ends)
        };
        self.count_pending(self.pending.len(), kind);
    }

    /// Counts what is held back and returns the counts of all the records.
    pub(crate) fn finish(mut self) -> ChunkCounts {
        self.end_input();
        self.counts.shrink();
        self.counts
    }
}
