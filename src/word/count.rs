//! Counting words, streamed and on several threads, and choosing the vocabulary.

use ahash::AHashMap;

use super::split::{first_space, last_space_end, split_generic, straddling_space};
use super::{WordIds, WordList, WordModel, UNK};
use crate::error::{Error, Result};
use crate::identity::ModelSource;

/// Blocks (or inputs) at least this long are counted on several threads.
pub(crate) const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// A word of up to 23 bytes as a fixed-size key (bytes, zero padding, length last):
/// hashed and compared inline, without following a pointer to the word's bytes. Most words
/// are short, so the hash tables below hold them this way and keep longer words apart.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Inline([u8; 24]);

impl Inline {
    fn new(word: &[u8]) -> Option<Inline> {
        if word.len() > 23 {
            return None;
        }
        let mut key = [0u8; 24];
        key[..word.len()].copy_from_slice(word);
        key[23] = word.len() as u8;
        Some(Inline(key))
    }

    fn bytes(&self) -> &[u8] {
        &self.0[..self.0[23] as usize]
    }
}

/// A word of up to 7 bytes as one u64: its bytes, then its length in the top byte.
#[inline]
fn tiny_key(word: &[u8]) -> Option<u64> {
    if word.len() > 7 {
        return None;
    }
    let mut key = [0u8; 8];
    key[..word.len()].copy_from_slice(word);
    key[7] = word.len() as u8;
    Some(u64::from_le_bytes(key))
}

/// The bytes of a [`tiny_key`].
fn tiny_bytes(key: u64) -> Vec<u8> {
    let bytes = key.to_le_bytes();
    bytes[..bytes[7] as usize].to_vec()
}

/// Word -> number while counting, with words of up to 7 bytes as u64 keys, up to 23
/// inline ([`Inline`]), and longer ones as `L` (borrowed `&[u8]` while counting a shard,
/// owned `Box<[u8]>` when shards are merged). Most running words are short: their table
/// has 12-byte entries instead of 28, so more of it stays in cache.
#[derive(Clone)]
struct WordIndex<L> {
    tiny: AHashMap<u64, u32>,
    short: AHashMap<Inline, u32>,
    long: AHashMap<L, u32>,
}

impl<L: std::borrow::Borrow<[u8]> + std::hash::Hash + Eq> WordIndex<L> {
    fn new() -> Self {
        WordIndex {
            tiny: AHashMap::new(),
            short: AHashMap::new(),
            long: AHashMap::new(),
        }
    }

    fn len(&self) -> usize {
        self.tiny.len() + self.short.len() + self.long.len()
    }

    /// The number of `word`, inserting `fresh` when it is new (then returns `None`).
    #[inline]
    fn get_or_insert<'w>(&mut self, word: &'w [u8], fresh: u32) -> Option<u32>
    where
        L: From<&'w [u8]>,
    {
        if let Some(key) = tiny_key(word) {
            return match self.tiny.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(fresh);
                    None
                }
            };
        }
        match Inline::new(word) {
            Some(key) => match self.short.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => Some(*e.get()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(fresh);
                    None
                }
            },
            None => match self.long.get(word) {
                Some(&n) => Some(n),
                None => {
                    self.long.insert(L::from(word), fresh);
                    None
                }
            },
        }
    }

    /// The words, by number (numbers must be `0..len`).
    fn into_words(self) -> Vec<Box<[u8]>> {
        let mut words: Vec<Box<[u8]>> = vec![Box::default(); self.len()];
        for (key, n) in self.tiny {
            if let Some(slot) = words.get_mut(n as usize) {
                *slot = tiny_bytes(key).into();
            }
        }
        for (key, n) in self.short {
            if let Some(slot) = words.get_mut(n as usize) {
                *slot = key.bytes().into();
            }
        }
        for (key, n) in self.long {
            if let Some(slot) = words.get_mut(n as usize) {
                *slot = key.borrow().into();
            }
        }
        words
    }
}

/// One shard's count: its distinct words in first-appearance order with their counts,
/// and the table that numbers them so (kept, so that the first shard's table can become
/// the counter's own without hashing every word again).
struct ShardCounts<'t> {
    index: WordIndex<&'t [u8]>,
    words: Vec<(&'t [u8], u64)>,
}

fn count_shard(text: &[u8]) -> ShardCounts<'_> {
    let mut index: WordIndex<&[u8]> = WordIndex::new();
    let mut words: Vec<(&[u8], u64)> = Vec::new();
    split_generic(
        text,
        &mut |w| match index.get_or_insert(w, words.len() as u32) {
            Some(i) => words[i as usize].1 += 1,
            None => words.push((w, 1)),
        },
    );
    ShardCounts { index, words }
}

/// Counts words on up to `threads` threads, sharding `text` at whitespace; the shards'
/// lists come back in text order.
fn count_parallel(text: &[u8], threads: usize, min_bytes: usize) -> Vec<ShardCounts<'_>> {
    let threads = threads.max(1);
    if threads == 1 || text.len() < min_bytes.max(1) {
        return vec![count_shard(text)];
    }
    let mut bounds = vec![0];
    for k in 1..threads {
        let target = text.len() / threads * k;
        let last = *bounds.last().unwrap_or(&0);
        let cut = match first_space(text, target.max(last)) {
            Some((start, len)) => start + len,
            None => text.len(),
        };
        if cut > last && cut < text.len() {
            bounds.push(cut);
        }
    }
    bounds.push(text.len());
    std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| {
                let shard = &text[w[0]..w[1]];
                scope.spawn(move || count_shard(shard))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(counts) => counts,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// A streaming word counter: feed blocks of any size and any boundaries (a block may end
/// inside a word or inside a multi-byte character), then [`finish`](WordCounter::finish)
/// for the model. Memory grows with the number of distinct words, not with the input
/// (plus the longest word, which is held whole until its end is seen). Blocks of at least [`PARALLEL_MIN_BYTES`] are counted on `threads` threads; feeding
/// blocks of a few MiB uses both cores on standard input of any size.
pub(crate) struct WordCounter {
    threads: usize,
    /// The unterminated word at the end of the input so far (no whitespace in it).
    carry: Vec<u8>,
    /// Word -> index into `counts`; indices are first-appearance order.
    index: WordIndex<Box<[u8]>>,
    counts: Vec<u64>,
    bytes: u64,
    parallel_min: usize,
}

impl std::fmt::Debug for WordCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordCounter")
            .field("threads", &self.threads)
            .field("bytes", &self.bytes)
            .field("distinct", &self.counts.len())
            .field("carry", &self.carry.len())
            .finish()
    }
}

impl WordCounter {
    /// A counter that uses up to `threads` threads (at least one) on large blocks.
    pub(crate) fn new(threads: usize) -> WordCounter {
        WordCounter {
            threads: threads.max(1),
            carry: Vec::new(),
            index: WordIndex::new(),
            counts: Vec::new(),
            bytes: 0,
            parallel_min: PARALLEL_MIN_BYTES,
        }
    }

    #[cfg(test)]
    /// Counts blocks of at least `bytes` bytes on several threads (default
    /// [`PARALLEL_MIN_BYTES`]); tests lower it to exercise sharding on small inputs.
    pub(crate) fn with_parallel_threshold(mut self, bytes: usize) -> WordCounter {
        self.parallel_min = bytes;
        self
    }

    #[cfg(test)]
    /// Bytes fed so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    fn add(&mut self, word: &[u8], count: u64) {
        match self.index.get_or_insert(word, self.counts.len() as u32) {
            Some(i) => self.counts[i as usize] += count,
            None => self.counts.push(count),
        }
    }

    fn merge(&mut self, shards: Vec<ShardCounts<'_>>) {
        for shard in shards {
            if self.counts.is_empty() {
                // Nothing counted yet: the shard's numbering is the counter's.
                self.counts = shard.words.iter().map(|&(_, count)| count).collect();
                self.index.tiny = shard.index.tiny;
                self.index.short = shard.index.short;
                self.index.long = (shard.index.long.into_iter())
                    .map(|(word, n)| (Box::from(word), n))
                    .collect();
                continue;
            }
            for (word, count) in shard.words {
                self.add(word, count);
            }
        }
    }

    /// Counts the words of the next block of input.
    pub(crate) fn feed(&mut self, block: &[u8]) {
        self.bytes += block.len() as u64;
        let mut rest = block;
        if !self.carry.is_empty() {
            // Close the word left open by the previous block, without rescanning it (it
            // holds no whitespace): either a whitespace character straddles the boundary,
            // or the word runs to the first whitespace of this block.
            if let Some((at, used)) = straddling_space(&self.carry, block) {
                let carry = std::mem::take(&mut self.carry);
                if at > 0 {
                    self.add(&carry[..at], 1);
                }
                rest = &block[used..];
            } else {
                match first_space(block, 0) {
                    Some((start, len)) => {
                        let mut carry = std::mem::take(&mut self.carry);
                        carry.extend_from_slice(&block[..start]);
                        self.add(&carry, 1);
                        rest = &block[start + len..];
                    }
                    None => {
                        self.carry.extend_from_slice(block);
                        return;
                    }
                }
            }
        }
        match last_space_end(rest) {
            Some(end) => {
                let shards = count_parallel(&rest[..end], self.threads, self.parallel_min);
                self.merge(shards);
                self.carry.extend_from_slice(&rest[end..]);
            }
            None => self.carry.extend_from_slice(rest),
        }
    }

    /// Ends the input and builds the vocabulary: every word when `vocab_size` is `None`,
    /// else the `vocab_size - 1` most frequent words (ties: the word seen first) plus
    /// `[UNK]`. A `vocab_size` of 0 is a usage error (there is always `[UNK]`). The
    /// model's `source` is a placeholder (an empty file name and hash) for the caller to
    /// set.
    pub(crate) fn finish(mut self, vocab_size: Option<usize>) -> Result<WordModel> {
        if !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            self.add(&carry, 1);
        }
        let keep = match vocab_size {
            None => self.counts.len(),
            Some(0) => {
                return Err(Error::usage(
                    "vocabulary size must be at least 1 (the [UNK] token)",
                ))
            }
            Some(n) => (n - 1).min(self.counts.len()),
        };
        if keep >= u32::MAX as usize {
            return Err(Error::data(format!(
                "{keep} distinct words do not fit 32-bit token ids"
            )));
        }
        let index = std::mem::replace(&mut self.index, WordIndex::new());
        let mut by_order: Vec<Option<Box<[u8]>>> =
            index.into_words().into_iter().map(Some).collect();
        let mut order: Vec<u32> = (0..self.counts.len() as u32).collect();
        if keep < order.len() {
            let counts = &self.counts;
            order.sort_unstable_by_key(|&i| (std::cmp::Reverse(counts[i as usize]), i));
            order.truncate(keep);
        }
        // Sort on an inline big-endian prefix first: most comparisons then stay within
        // `kept` instead of following two pointers (zero padding keeps the order exact).
        let prefix = |w: &[u8]| {
            let mut p = [0u8; 8];
            let n = w.len().min(8);
            p[..n].copy_from_slice(&w[..n]);
            u64::from_be_bytes(p)
        };
        let mut kept: Vec<(u64, Box<[u8]>, u64)> = order
            .into_iter()
            .filter_map(|i| {
                by_order[i as usize]
                    .take()
                    .map(|w| (prefix(&w), w, self.counts[i as usize]))
            })
            .collect();
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let bytes = kept.iter().map(|(_, word, _)| word.len()).sum();
        let mut words = WordList::with_capacity(kept.len(), bytes);
        let mut counts = Vec::with_capacity(kept.len());
        for (_, word, count) in kept {
            words.push(&word);
            counts.push(count);
        }
        // The counter's table held every word once: no word repeats.
        let ids = WordIds::build(words)
            .map_err(|(r, _)| Error::data(format!("internal: word {} counted twice", r.id)))?;
        Ok(WordModel {
            source: placeholder_source(),
            unk_id: ids.len() as u32,
            counts,
            ids,
            unk_text: UNK.to_string(),
        })
    }
}

fn placeholder_source() -> ModelSource {
    ModelSource::File {
        name: String::new(),
        sha256: String::new(),
    }
}

#[cfg(test)]
/// Learns a word vocabulary from `text` (see [`WordCounter::finish`] for `vocab_size`),
/// counting on up to `threads` threads when the text is large.
pub(crate) fn train(text: &[u8], vocab_size: Option<usize>, threads: usize) -> Result<WordModel> {
    let mut counter = WordCounter::new(threads);
    counter.feed(text);
    counter.finish(vocab_size)
}
