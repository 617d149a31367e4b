//! word: the seed's word-based tokenizer. Words are the pieces of Python's `str.split()`;
//! this module owns the whitespace set, word counting (streamed and on both cores),
//! the vocabulary with `[UNK]`, the word model file, encoding, decoding and the coverage
//! statistics behind `bpe-encode --stats`.
//!
//! # Whitespace
//!
//! A word is a maximal run of non-whitespace characters, exactly as Python's `str.split()`
//! with no arguments cuts a `str`. Python's whitespace (`str.isspace()`, which `split()`
//! uses) is Unicode `White_Space` plus the four ASCII information separators, 29 code
//! points in all:
//!
//! | code points | what |
//! |---|---|
//! | U+0009..U+000D | tab, line feed, vertical tab, form feed, carriage return |
//! | U+001C..U+001F | file, group, record and unit separators (Python adds these) |
//! | U+0020 | space |
//! | U+0085 | next line (NEL) |
//! | U+00A0 | no-break space |
//! | U+1680 | ogham space mark |
//! | U+2000..U+200A | en quad .. hair space |
//! | U+2028, U+2029 | line and paragraph separators |
//! | U+202F | narrow no-break space |
//! | U+205F | medium mathematical space |
//! | U+3000 | ideographic space |
//!
//! Not whitespace: U+180E (Mongolian vowel separator, dropped from `White_Space` in
//! Unicode 6.3), U+200B (zero-width space), U+FEFF (byte-order mark). The list is pinned by
//! `tests/fixtures/word/python-whitespace.txt`, produced by Python 3.11 over every code point.
//!
//! # Invalid UTF-8
//!
//! Python never sees invalid UTF-8 in a `str`; the suite reads bytes. The input is decoded
//! as UTF-8 the standard way (each maximal invalid subsequence is one unit, as in
//! `String::from_utf8_lossy`), and an invalid unit is never whitespace: its bytes stay
//! inside the word around it, unchanged. So `a\xff b` has the words `a\xff` and `b`, and a
//! truncated ideographic space (`\xe3\x80`) is part of a word. Nothing is replaced or lost.
//!
//! # Vocabulary
//!
//! Without a size, every distinct word is kept. With `vocab_size = Some(n)` the `n - 1`
//! most frequent words are kept; among words with equal counts the one that first appears
//! earlier in the text wins. Kept words get ids `0..` in sorted byte order (Python sorts
//! `str` by code point, which is the same order as UTF-8 bytes), and `[UNK]` takes the next
//! id. For `Life is short eat dessert first` this is the seed's
//! `{'Life': 0, 'dessert': 1, 'eat': 2, 'first': 3, 'is': 4, 'short': 5}`, `[UNK]` = 6.
//!
//! # Model file
//!
//! NDJSON. Line 1 is the header, then one line per word in id order:
//!
//! ```text
//! {"kind":"word","version":1,"unk":"[UNK]"}
//! {"id":0,"word":"Life","count":1}
//! {"id":1,"hex":"6361ff","count":2}
//! ```
//!
//! - `id`: required, consecutive from 0.
//! - `word`: the word as a JSON string, for words that are valid UTF-8.
//! - `hex`: instead of `word`, for a word that is not valid UTF-8: its bytes in hex
//!   (lowercase when written, either case read). Exactly one of `word`/`hex` per line.
//! - `count`: how often the word occurred when learned; optional, display only.
//!
//! `[UNK]`'s id is the number of word lines, so `head -n K` of a model file is a valid
//! smaller model. Header fields: `kind` (`"word"`), `version` (1), `unk` (the unknown
//! token's text, `"[UNK]"` if absent). Unknown fields, on any line, are errors; so are a
//! duplicated word, an empty word and a word containing whitespace (it could never be
//! produced by splitting). Blank lines are skipped.
//!
//! In memory ([`WordModel`]) a word that is not valid UTF-8 is held as a `String` made of a
//! space followed by the hex of its bytes (`" 6361ff"`). No real word contains a space, so
//! this key never collides with one; use [`word_bytes`] and [`lookup`] rather than reading
//! `words`/`ids` directly when such words matter.
//!
//! # Records
//!
//! [`encode`] maps each word of a record to its id, and words outside the vocabulary to
//! `[UNK]`. [`decode`] joins the words of the ids with single spaces. Whitespace is not
//! kept: decoding gives the words back, separated by single spaces (`bpe-encode --whole`
//! makes line breaks ordinary whitespace, so the whole input decodes to one line).
//!
//! # Performance notes
//!
//! - Splitting classifies each byte with a 256-entry table; only the lead bytes
//!   `C2 E1 E2 E3` of the multi-byte whitespace characters need a closer look. Because
//!   whitespace characters always start at a non-continuation byte, any byte offset just
//!   after a whitespace character is a safe place to cut the text: that is how blocks are
//!   streamed and how large inputs are sharded across threads.
//! - Counting uses a per-shard hash table over the borrowed text (no allocation per
//!   occurrence); shards are merged in order into one owned table, which keeps the
//!   first-appearance order exactly (a word first seen in shard k gets its order from
//!   shard k's own first-appearance list, after all words of shards < k).
//! - The counting tables key words of up to 7 bytes by one u64 and of up to 23 bytes by
//!   a fixed 24-byte inline copy (`Inline`), so a probe compares in place instead of
//!   following a pointer to the word.
//! - A model's words live in one arena ([`WordList`]) and its lookup table is one
//!   open-addressing array of 32-byte slots that hold words of up to 24 bytes in full, in
//!   huge pages (`wordtable`). Lookups in a table of a few hundred thousand words are
//!   bound by cache and TLB misses, so [`WordEncoder`] looks words up in groups that read
//!   their home slots together, overlapping the misses; the table is built the same way.
//! - Model lines in the exact form [`write_model`] writes are read by a small hand
//!   parser; anything else (other key order, escapes, spacing) goes through serde_json,
//!   and a test checks both read the same. Large model files are read in two halves on
//!   two threads ([`parse_model_text`]), their SHA-256 on a third.
//! - Loading the 540k-word model of the 27 MB benchmark text (26 MB): 0.29 s CPU before
//!   this design (one String per word, hashbrown inserts in id order), ~0.15 s after;
//!   encoding the text with it, load included: 0.78 s CPU before, ~0.4 s after (both
//!   figures measured while other builds ran on the machine: compare them to each other,
//!   not to BENCHMARKS.md).
//! - Inputs below [`PARALLEL_MIN_BYTES`] are counted on one thread: thread start-up and
//!   the merge cost more than they save there.
//! - Earlier figures (27 MB of Debian documentation, 3.18 M words; release build; CPU
//!   seconds, as the machine ran at load 10-14 on 2 vCPUs): split 0.05 s; train
//!   0.65-0.81 s. Current figures: BENCHMARKS.md.

use std::borrow::Cow;
use std::io::Write;

use ahash::AHashMap;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::{ModelSource, WordModel};

/// The unknown-word token's default text.
pub const UNK: &str = "[UNK]";

/// The model file format version this module reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// Blocks (or inputs) at least this long are counted on several threads.
pub const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Byte classes for the splitter: part of a word, ASCII whitespace, or the lead byte of a
/// possible multi-byte whitespace character.
const WORD: u8 = 0;
const SPACE: u8 = 1;
const LEAD: u8 = 2;

static CLASS: [u8; 256] = {
    let mut t = [WORD; 256];
    let mut b = 0x09;
    while b <= 0x0d {
        t[b] = SPACE;
        b += 1;
    }
    let mut b = 0x1c;
    while b <= 0x20 {
        t[b] = SPACE;
        b += 1;
    }
    t[0xc2] = LEAD;
    t[0xe1] = LEAD;
    t[0xe2] = LEAD;
    t[0xe3] = LEAD;
    t
};

/// True for the characters Python's `str.isspace()` accepts, which are exactly those
/// `str.split()` splits at (the 29 code points listed in the module documentation).
pub fn is_python_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{09}'..='\u{0d}'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// The length of the multi-byte whitespace character starting at `text[i]` (a `LEAD`
/// byte), or 0.
#[inline]
fn lead_space_len(text: &[u8], i: usize) -> usize {
    let b1 = text.get(i + 1).copied().unwrap_or(0);
    let b2 = text.get(i + 2).copied().unwrap_or(0);
    let hit = match text[i] {
        0xc2 => return if b1 == 0x85 || b1 == 0xa0 { 2 } else { 0 },
        0xe1 => b1 == 0x9a && b2 == 0x80,
        0xe2 => {
            (b1 == 0x80 && matches!(b2, 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf))
                || (b1 == 0x81 && b2 == 0x9f)
        }
        0xe3 => b1 == 0x80 && b2 == 0x80,
        _ => false,
    };
    if hit {
        3
    } else {
        0
    }
}

/// The length of the whitespace character at `text[i]`, or 0 when it is not whitespace.
#[inline]
fn space_len(text: &[u8], i: usize) -> usize {
    match CLASS[text[i] as usize] {
        WORD => 0,
        SPACE => 1,
        _ => lead_space_len(text, i),
    }
}

/// Emits every word of `text` that is followed by whitespace and returns the offset where
/// the unterminated last word starts (`text.len()` when the text ends in whitespace).
#[inline]
fn scan<'t, F: FnMut(&'t [u8])>(text: &'t [u8], emit: &mut F) -> usize {
    let n = text.len();
    let mut i = 0;
    loop {
        loop {
            if i >= n {
                return n;
            }
            let len = space_len(text, i);
            if len == 0 {
                break;
            }
            i += len;
        }
        let start = i;
        loop {
            if i >= n {
                return start;
            }
            match CLASS[text[i] as usize] {
                WORD => i += 1,
                SPACE => break,
                _ => {
                    if lead_space_len(text, i) > 0 {
                        break;
                    }
                    i += 1;
                }
            }
        }
        emit(&text[start..i]);
    }
}

#[inline]
fn split_generic<'t, F: FnMut(&'t [u8])>(text: &'t [u8], emit: &mut F) {
    let tail = scan(text, emit);
    if tail < text.len() {
        emit(&text[tail..]);
    }
}

/// Calls `emit` for each word of `text`, in order: Python's `str.split()` with no
/// arguments. Invalid UTF-8 is never whitespace (see the module documentation), so every
/// byte of `text` is either in a word or part of a whitespace character.
pub fn split_words<'t>(text: &'t [u8], emit: &mut dyn FnMut(&'t [u8])) {
    split_generic(text, &mut |w| emit(w));
}

/// The first whitespace character at or after `from`: its offset and length.
fn first_space(text: &[u8], from: usize) -> Option<(usize, usize)> {
    (from..text.len()).find_map(|i| match space_len(text, i) {
        0 => None,
        len => Some((i, len)),
    })
}

/// The offset just after the last whitespace character of `text`, if any. Whitespace
/// characters begin with a byte that is never a UTF-8 continuation byte, so a pattern
/// found scanning backwards is a whitespace character in the forward reading too.
fn last_space_end(text: &[u8]) -> Option<usize> {
    (1..=text.len()).rev().find(|&end| {
        let b = text[end - 1];
        CLASS[b as usize] == SPACE
            || (end >= 2 && text[end - 2] == 0xc2 && (b == 0x85 || b == 0xa0))
            || (end >= 3
                && CLASS[text[end - 3] as usize] == LEAD
                && lead_space_len(text, end - 3) == 3)
    })
}

/// A whitespace character that starts in `carry` (which holds none whole) and ends in
/// `block`: its offset in `carry` and how many bytes of `block` it takes.
fn straddling_space(carry: &[u8], block: &[u8]) -> Option<(usize, usize)> {
    let mut joined = [0u8; 5];
    for at in carry.len().saturating_sub(2)..carry.len() {
        let head = &carry[at..];
        let take = block.len().min(3);
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..head.len() + take].copy_from_slice(&block[..take]);
        let len = space_len(&joined[..head.len() + take], 0);
        if len > head.len() {
            return Some((at, len - head.len()));
        }
    }
    None
}

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

/// The words of a vocabulary in id order, their bytes back to back (one allocation for
/// all of them: a 540k-word model used to hold 540k `String`s).
#[derive(Clone, PartialEq, Eq)]
pub struct WordList {
    text: Vec<u8>,
    /// Word `id` is `text[starts[id]..starts[id + 1]]`; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl Default for WordList {
    fn default() -> Self {
        WordList::with_capacity(0, 0)
    }
}

impl WordList {
    /// An empty list with room for `words` words of `bytes` bytes in all.
    pub fn with_capacity(words: usize, bytes: usize) -> WordList {
        let mut starts = Vec::with_capacity(words + 1);
        starts.push(0);
        WordList {
            text: Vec::with_capacity(bytes),
            starts,
        }
    }

    /// Appends a word (it gets the next id).
    pub fn push(&mut self, word: &[u8]) {
        self.text.extend_from_slice(word);
        self.starts.push(self.text.len());
    }

    /// Appends the words of `other` (they get the next ids).
    pub fn append(&mut self, other: &WordList) {
        let shift = self.text.len();
        self.text.extend_from_slice(&other.text);
        self.starts
            .extend(other.starts[1..].iter().map(|&start| start + shift));
    }

    /// The number of words.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// True when there are no words.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of word `id`, if there is one.
    pub fn get(&self, id: u32) -> Option<&[u8]> {
        let (start, end) = (
            self.starts.get(id as usize)?,
            self.starts.get(id as usize + 1)?,
        );
        Some(&self.text[*start..*end])
    }

    /// The bytes of word `id` (`id < len`).
    #[inline(always)]
    pub(crate) fn word(&self, id: u32) -> &[u8] {
        &self.text[self.starts[id as usize]..self.starts[id as usize + 1]]
    }

    /// The words in id order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.starts.windows(2).map(|w| &self.text[w[0]..w[1]])
    }

    /// The words' display keys ([`key_of`]) in id order.
    pub fn keys(&self) -> Vec<String> {
        self.iter().map(|w| key_of(w).into_owned()).collect()
    }
}

impl std::fmt::Debug for WordList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(key_of)).finish()
    }
}

/// A word that repeats an earlier one: its id and the earlier word's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    pub id: u32,
    pub earlier: u32,
}

/// The words of a [`WordModel`] and the table from a word (its bytes) to its id: built
/// once when the model is read or trained, and used as is by the encoder.
///
/// The table is `wordtable::BigTable`: one open-addressing array whose slots hold words
/// of up to 24 bytes in full, looked up in batches by [`WordEncoder`] so that cache
/// misses overlap. (Measured on the 27 MB benchmark text with its 540k-word model, CPU
/// seconds for load and encode: a 64k-word hash table of the most frequent words in
/// front of it 0.40-0.48; a 16k-word one 0.40-0.44; the big table alone 0.37. The front
/// table's own misses and hashing cost more than the lines of the big table that stay in
/// cache anyway.)
#[derive(Clone)]
pub struct WordIds {
    words: WordList,
    table: crate::wordtable::BigTable,
}

impl WordIds {
    /// The table of `words`. A word that repeats an earlier one fails the build with the
    /// first such repeat (the lowest id whose word has a lower id too), and the words back.
    pub fn build(words: WordList) -> std::result::Result<WordIds, (Repeat, WordList)> {
        match crate::wordtable::BigTable::build(&words) {
            Ok(table) => Ok(WordIds { words, table }),
            Err(repeat) => Err((repeat, words)),
        }
    }

    /// The words, by id.
    pub fn words(&self) -> &WordList {
        &self.words
    }

    /// The id of `word`.
    #[inline]
    pub fn get(&self, word: &[u8]) -> Option<u32> {
        self.table.find(&self.table.probe(word), &self.words)
    }

    /// The number of words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// True when there are no words.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for WordIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WordIds({} words)", self.len())
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
pub struct WordCounter {
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
    pub fn new(threads: usize) -> WordCounter {
        WordCounter {
            threads: threads.max(1),
            carry: Vec::new(),
            index: WordIndex::new(),
            counts: Vec::new(),
            bytes: 0,
            parallel_min: PARALLEL_MIN_BYTES,
        }
    }

    /// Counts blocks of at least `bytes` bytes on several threads (default
    /// [`PARALLEL_MIN_BYTES`]); tests lower it to exercise sharding on small inputs.
    pub fn with_parallel_threshold(mut self, bytes: usize) -> WordCounter {
        self.parallel_min = bytes;
        self
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Distinct words seen so far (the unterminated word at the end not included).
    pub fn distinct(&self) -> usize {
        self.counts.len()
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
    pub fn feed(&mut self, block: &[u8]) {
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
    pub fn finish(mut self, vocab_size: Option<usize>) -> Result<WordModel> {
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

/// Learns a word vocabulary from `text` (see [`WordCounter::finish`] for `vocab_size`),
/// counting on up to `threads` threads when the text is large.
pub fn train(text: &[u8], vocab_size: Option<usize>, threads: usize) -> Result<WordModel> {
    let mut counter = WordCounter::new(threads);
    counter.feed(text);
    counter.finish(vocab_size)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The in-memory key of a word: the word itself when it is valid UTF-8, else a space and
/// the hex of its bytes (which no real word can equal, since words hold no whitespace).
pub fn key_of(word: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(word) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(format!(" {}", to_hex(word))),
    }
}

/// The bytes of word `id` (`[UNK]`'s text for the unknown id), or `None` for an id
/// outside the vocabulary.
pub fn word_bytes(model: &WordModel, id: u32) -> Option<Cow<'_, [u8]>> {
    match model.words().get(id) {
        Some(word) => Some(Cow::Borrowed(word)),
        None if id == model.unk_id => Some(Cow::Borrowed(model.unk_text.as_bytes())),
        None => None,
    }
}

/// The id of `word` (its bytes), or `None` when it is not in the vocabulary.
pub fn lookup(model: &WordModel, word: &[u8]) -> Option<u32> {
    model.ids.get(word)
}

/// Appends the ids of the words of `record` to `out`; words outside the vocabulary
/// become `[UNK]`'s id. Returns how many words were unknown.
pub fn encode(model: &WordModel, record: &[u8], out: &mut Vec<u32>) -> u64 {
    let mut unknown = 0;
    split_generic(record, &mut |w: &[u8]| {
        out.push(model.ids.get(w).unwrap_or_else(|| {
            unknown += 1;
            model.unk_id
        }));
    });
    unknown
}

/// A word model's encoder: its word table (keyed by bytes, short words inline), shared
/// by the threads.
pub struct WordEncoder<'m> {
    ids: &'m WordIds,
    unk_id: u32,
}

impl<'m> WordEncoder<'m> {
    /// The encoder of `model` (nothing to build: the model holds the table).
    pub fn new(model: &'m WordModel) -> WordEncoder<'m> {
        WordEncoder {
            ids: &model.ids,
            unk_id: model.unk_id,
        }
    }

    /// Appends the ids of the words of `record` to `out` (unknown words become
    /// `[UNK]`'s id) and returns how many words were unknown; the same as [`encode`].
    pub fn encode(&self, record: &[u8], out: &mut Vec<u32>) -> u64 {
        let mut ends = Vec::new();
        self.encode_records(&[record], out, &mut ends)
    }

    /// Appends the ids of the words of each record to `ids`, and after each record the
    /// length of `ids` to `ends`; returns how many words were unknown.
    ///
    /// Words are looked up in batches, a group of them reading their home slots together
    /// first, so that their cache misses overlap instead of following one another.
    pub fn encode_records(
        &self,
        records: &[&[u8]],
        ids: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> u64 {
        let mut unknown = 0;
        let mut pending = Vec::with_capacity(PENDING);
        for record in records {
            split_generic(record, &mut |w: &[u8]| {
                pending.push((ids.len(), self.ids.table.probe(w)));
                ids.push(self.unk_id);
                // Within a record too: one `--whole` record holds every word of the input.
                if pending.len() >= PENDING {
                    unknown += self.resolve(&mut pending, ids);
                }
            });
            ends.push(ids.len());
        }
        unknown += self.resolve(&mut pending, ids);
        unknown
    }

    /// Looks up the pending words, writes their ids in place (unknown words keep
    /// `[UNK]`'s id) and returns how many were unknown.
    fn resolve(&self, pending: &mut Vec<(usize, crate::wordtable::Probe)>, ids: &mut [u32]) -> u64 {
        let (table, words) = (&self.ids.table, &self.ids.words);
        let mut unknown = 0;
        for group in pending.chunks(crate::wordtable::GROUP) {
            let touched = (group.iter()).fold(0u32, |acc, (_, p)| acc.wrapping_add(table.touch(p)));
            std::hint::black_box(touched);
            for (at, probe) in group {
                match table.find(probe, words) {
                    Some(id) => ids[*at] = id,
                    None => unknown += 1,
                }
            }
        }
        pending.clear();
        unknown
    }
}

/// How many words wait for the table before the encoder looks them up.
const PENDING: usize = 512;

impl std::fmt::Debug for WordEncoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordEncoder")
            .field("words", &self.ids.len())
            .field("unk_id", &self.unk_id)
            .finish()
    }
}

/// Appends the words of `ids` to `out`, joined with single spaces (`[UNK]` as its text).
/// An id outside the vocabulary is returned as the error, and `out` is left as it was.
pub fn decode(model: &WordModel, ids: &[u32], out: &mut Vec<u8>) -> std::result::Result<(), u32> {
    let start = out.len();
    for (k, &id) in ids.iter().enumerate() {
        if k > 0 {
            out.push(b' ');
        }
        match word_bytes(model, id) {
            Some(bytes) => out.extend_from_slice(&bytes),
            None => {
                out.truncate(start);
                return Err(id);
            }
        }
    }
    Ok(())
}

/// Writes `model` as a model file (the format in the module documentation).
pub fn write_model(w: &mut dyn Write, model: &WordModel) -> std::io::Result<()> {
    let json = |v: &str| serde_json::to_string(v).map_err(std::io::Error::from);
    writeln!(
        w,
        "{{\"kind\":\"word\",\"version\":{FORMAT_VERSION},\"unk\":{}}}",
        json(&model.unk_text)?
    )?;
    for (id, word) in model.words().iter().enumerate() {
        write!(w, "{{\"id\":{id},")?;
        match std::str::from_utf8(word) {
            Ok(text) => write!(w, "\"word\":{}", json(text)?)?,
            Err(_) => write!(w, "\"hex\":{}", json(&to_hex(word))?)?,
        }
        match model.counts.get(id) {
            Some(count) => writeln!(w, ",\"count\":{count}}}")?,
            None => writeln!(w, "}}")?,
        }
    }
    Ok(())
}

/// Model files from this size on are read on two threads (see [`parse_model_text`]).
pub const PARALLEL_MODEL_BYTES: usize = 1 << 20;

/// Reads a word model from the text of its file after the header line: `header` is line
/// 1 (already parsed, its `kind` being `"word"`), `body` the rest. Errors carry `file` and
/// the line number, exactly as [`parse_model`] reports them.
///
/// A body of `parallel_min` bytes or more ([`PARALLEL_MODEL_BYTES`] for the tools) is cut
/// at a line break near its middle and the halves are read on two threads; the second
/// half takes its first id from its first line, which must then follow the first half's
/// last. Anything unexpected (a malformed line, a repeated word, ids that do not join)
/// sends the whole body through [`parse_model`], which finds and names the first problem.
pub fn parse_model_text(
    header: &Map<String, Value>,
    body: &[u8],
    parallel_min: usize,
    source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    parse_model_text_beside(header, body, parallel_min, source, file, || ()).0
}

/// [`parse_model_text`], running `beside` on a second thread while the table is built
/// (the one single-threaded step of a large model), or after reading a small one.
pub fn parse_model_text_beside<T: Send>(
    header: &Map<String, Value>,
    body: &[u8],
    parallel_min: usize,
    source: ModelSource,
    file: &str,
    beside: impl FnOnce() -> T + Send,
) -> (Result<WordModel>, T) {
    let sequential = |source| {
        let mut numbered = (crate::input::Lines::new(body).zip(2u64..)).map(|(line, n)| (n, line));
        let lines = memchr::memchr_iter(b'\n', body).count() + 1;
        parse_model(header, &mut numbered, lines, source, file)
    };
    let cut = match memchr::memchr(b'\n', &body[body.len() / 2..]) {
        Some(k) if body.len() >= parallel_min => body.len() / 2 + k + 1,
        _ => return (sequential(source), beside()),
    };
    let unk_text = match parse_header(header) {
        Ok(unk_text) => unk_text,
        Err(e) => return (Err(e.at_line(file, 1)), beside()),
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| read_piece(&body[cut..], None));
        let first = read_piece(&body[..cut], Some(0));
        (first, second.join().ok().flatten())
    });
    let (Some(mut first), Some(second)) = (first, second) else {
        return (sequential(source), beside());
    };
    if !second.words.is_empty() && second.first_id != Some(first.words.len() as u64) {
        return (sequential(source), beside());
    }
    first.words.append(&second.words);
    first.counts.extend_from_slice(&second.counts);
    if first.words.len() >= u32::MAX as usize {
        return (sequential(source), beside());
    }
    let (built, side) = crate::parallel::both(true, || WordIds::build(first.words), beside);
    match built {
        Ok(ids) => {
            let model = WordModel {
                source,
                unk_id: ids.len() as u32,
                counts: first.counts,
                ids,
                unk_text,
            };
            (Ok(model), side)
        }
        Err(_) => (sequential(source), side),
    }
}

/// The words of a run of model lines, read by [`parse_model_text`].
struct Piece {
    words: WordList,
    counts: Vec<u64>,
    /// The id of the first word.
    first_id: Option<u64>,
}

/// Reads the word lines of `text`, the first one having id `first_id` (taken from that
/// line when `None`); `None` when any line is malformed or out of order.
fn read_piece(text: &[u8], mut first_id: Option<u64>) -> Option<Piece> {
    // A word line takes at least 19 bytes: room for that many lines is never outgrown
    // (blank lines aside), and costs only address space until written. (Counting the
    // lines first took ~8% of loading a 26 MB model.)
    let lines = text.len() / 16 + 1;
    let mut words = WordList::with_capacity(lines, text.len() / 2);
    let mut counts = Vec::with_capacity(lines);
    for line in crate::input::Lines::new(text) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let base = match first_id {
            Some(id) => id,
            None => *first_id.insert(match parse_plain_line(line) {
                Some((id, _, _)) => id,
                None => parse_json_line(line).ok()?.0?,
            }),
        };
        let (word, count) = parse_word_line(line, base + words.len() as u64).ok()?;
        words.push(&word);
        counts.push(count);
    }
    Some(Piece {
        words,
        counts,
        first_id,
    })
}

/// Reads a word model: `header` is line 1 (already parsed, its `kind` being `"word"`),
/// `lines` the further lines with their 1-based line numbers, about `size_hint` of them
/// (room is made for that many words). Errors carry `file` and the line number.
pub fn parse_model(
    header: &Map<String, Value>,
    lines: &mut dyn Iterator<Item = (u64, &[u8])>,
    size_hint: usize,
    source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    let unk_text = parse_header(header).map_err(|e| e.at_line(file, 1))?;
    let mut words = WordList::with_capacity(size_hint, 0);
    let mut counts: Vec<u64> = Vec::with_capacity(size_hint);
    let mut line_of: Vec<u64> = Vec::with_capacity(size_hint);
    let mut malformed = None;
    for (line_no, line) in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let expected = words.len() as u64;
        let parsed = parse_word_line(line, expected).and_then(|parsed| {
            if expected >= u32::MAX as u64 {
                return Err(Error::data("too many words for 32-bit token ids"));
            }
            Ok(parsed)
        });
        match parsed {
            Ok((word, count)) => {
                words.push(&word);
                counts.push(count);
                line_of.push(line_no);
            }
            Err(e) => {
                malformed = Some(e.at_line(file, line_no));
                break;
            }
        }
    }
    // Lines are checked one by one, repeated words all at once afterwards; a repeat
    // before the first malformed line is still the first problem reported.
    let ids = match WordIds::build(words) {
        Ok(ids) => ids,
        Err((Repeat { id, earlier }, words)) => {
            let key = key_of(words.word(id));
            return Err(Error::data(format!(
                "duplicated word {} (also id {earlier})",
                show_key(&key)
            ))
            .at_line(file, line_of[id as usize]));
        }
    };
    if let Some(e) = malformed {
        return Err(e);
    }
    Ok(WordModel {
        source,
        unk_id: ids.len() as u32,
        counts,
        ids,
        unk_text,
    })
}

/// A word for error messages: JSON-quoted, or `hex "..."` for invalid UTF-8.
fn show_key(key: &str) -> String {
    match key.strip_prefix(' ') {
        Some(hex) => format!("hex \"{hex}\""),
        None => serde_json::to_string(key).unwrap_or_else(|_| key.to_string()),
    }
}

fn parse_header(header: &Map<String, Value>) -> Result<String> {
    let mut unk = UNK.to_string();
    for (field, value) in header {
        match field.as_str() {
            "kind" => {
                if value.as_str() != Some("word") {
                    return Err(Error::data(format!("not a word model (kind {value})")));
                }
            }
            "version" => {
                if value.as_u64() != Some(FORMAT_VERSION) {
                    return Err(Error::data(format!(
                        "unsupported word model version {value} (this build reads version {FORMAT_VERSION})"
                    )));
                }
            }
            "unk" => match value.as_str() {
                Some(text) if !text.is_empty() => unk = text.to_string(),
                _ => {
                    return Err(Error::data(format!(
                        "\"unk\" must be a non-empty string, not {value}"
                    )))
                }
            },
            other => {
                return Err(Error::data(format!(
                    "unknown field {} in the word model header",
                    serde_json::to_string(other).unwrap_or_default()
                )))
            }
        }
    }
    if !header.contains_key("kind") {
        return Err(Error::data("the model header has no \"kind\""));
    }
    if !header.contains_key("version") {
        return Err(Error::data("the model header has no \"version\""));
    }
    Ok(unk)
}

/// Reads the digits at the start of `text` as a JSON non-negative integer (no leading
/// zeros, fits u64), returning it and the rest.
fn json_u64(text: &[u8]) -> Option<(u64, &[u8])> {
    let mut value: u64 = 0;
    let mut digits = 0;
    for &b in text {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value = value.checked_mul(10)?.checked_add(digit as u64)?;
        digits += 1;
    }
    if digits == 0 || (digits > 1 && text[0] == b'0') {
        return None;
    }
    Some((value, &text[digits..]))
}

/// The fields of a word line in exactly the form [`write_model`] writes it, with a word
/// that needs no JSON escapes: `{"id":N,"word":"W","count":C}` (count optional). Anything
/// else returns `None` and goes through the full JSON parser.
///
/// The word is found from both ends of the line (it holds no `"`, so the end is
/// unambiguous) and then checked in one pass without early exits, which the compiler
/// vectorizes; a 540k-word model's lines are read ~2x faster than scanning for the
/// closing quote byte by byte.
fn parse_plain_line(line: &[u8]) -> Option<(u64, &[u8], u64)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (id, rest) = json_u64(line.strip_prefix(b"{\"id\":")?)?;
    let body = rest.strip_prefix(b",\"word\":\"")?.strip_suffix(b"}")?;
    let (word, count) = match body.strip_suffix(b"\"") {
        Some(word) => (word, 0),
        None => {
            let digits = body.iter().rev().take_while(|b| b.is_ascii_digit()).count();
            let (head, tail) = body.split_at(body.len() - digits);
            let (count, after) = json_u64(tail)?;
            if !after.is_empty() {
                return None;
            }
            (head.strip_suffix(b"\",\"count\":")?, count)
        }
    };
    let plain = (word.iter()).fold(true, |ok, &b| ok & (b != b'"') & (b != b'\\') & (b >= 0x20));
    if !plain {
        return None;
    }
    std::str::from_utf8(word).ok()?;
    Some((id, word, count))
}

fn parse_word_line(line: &[u8], expected: u64) -> Result<(Cow<'_, [u8]>, u64)> {
    let (id, word, count) = match parse_plain_line(line) {
        Some((id, word, count)) => (Some(id), Some(Cow::Borrowed(word)), count),
        None => parse_json_line(line)?,
    };
    check_word_line(id, word, count, expected)
}

type LineFields<'l> = (Option<u64>, Option<Cow<'l, [u8]>>, u64);

fn parse_json_line(line: &[u8]) -> Result<LineFields<'static>> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| Error::data(format!("invalid json: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::data("a word line must be a json object"));
    };
    let mut id = None;
    let mut word: Option<Cow<'static, [u8]>> = None;
    let mut count = 0;
    for (field, value) in &fields {
        match field.as_str() {
            "id" => {
                id = Some(value.as_u64().ok_or_else(|| {
                    Error::data(format!(
                        "\"id\" must be a non-negative integer, not {value}"
                    ))
                })?)
            }
            "word" | "hex" => {
                if word.is_some() {
                    return Err(Error::data("a word line has both \"word\" and \"hex\""));
                }
                let text = value.as_str().ok_or_else(|| {
                    Error::data(format!("\"{field}\" must be a string, not {value}"))
                })?;
                word = Some(Cow::Owned(if field == "hex" {
                    from_hex(text).ok_or_else(|| {
                        Error::data(format!(
                            "\"hex\" is not an even number of hex digits: {value}"
                        ))
                    })?
                } else {
                    text.as_bytes().to_vec()
                }));
            }
            "count" => {
                count = value.as_u64().ok_or_else(|| {
                    Error::data(format!(
                        "\"count\" must be a non-negative integer, not {value}"
                    ))
                })?
            }
            other => {
                return Err(Error::data(format!(
                    "unknown field {} in a word line",
                    serde_json::to_string(other).unwrap_or_default()
                )))
            }
        }
    }
    Ok((id, word, count))
}

fn check_word_line(
    id: Option<u64>,
    word: Option<Cow<'_, [u8]>>,
    count: u64,
    expected: u64,
) -> Result<(Cow<'_, [u8]>, u64)> {
    match id {
        None => return Err(Error::data("a word line has no \"id\"")),
        Some(id) if id != expected => {
            return Err(Error::data(format!(
                "expected id {expected}, found {id} (ids are consecutive from 0)"
            )))
        }
        Some(_) => {}
    }
    let Some(word) = word else {
        return Err(Error::data("a word line has no \"word\" (or \"hex\")"));
    };
    if word.is_empty() {
        return Err(Error::data("empty word"));
    }
    // A word without whitespace splits into exactly itself; printable ASCII other than
    // the space (most words) holds none.
    let printable = (word.iter()).fold(true, |ok, &b| ok & (b.wrapping_sub(0x21) < 0x5e));
    let mut whole = printable;
    if !printable {
        split_generic(&word, &mut |piece| whole = piece.len() == word.len());
    }
    if !whole {
        return Err(Error::data(format!(
            "word {} contains whitespace",
            show_key(&key_of(&word))
        )));
    }
    Ok((word, count))
}
