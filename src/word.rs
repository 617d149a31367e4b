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
//! - Counting uses per-shard `AHashMap<&[u8], index>` tables over the borrowed text (no
//!   allocation per occurrence); shards are merged in order into one owned table, which
//!   keeps the first-appearance order exactly (a word first seen in shard k gets its order
//!   from shard k's own first-appearance list, after all words of shards < k).
//! - Inputs below [`PARALLEL_MIN_BYTES`] are counted on one thread: thread start-up and
//!   the merge cost more than they save there.

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

/// Distinct words of one shard in first-appearance order, with their counts.
type ShardCounts<'t> = Vec<(&'t [u8], u64)>;

fn count_shard(text: &[u8]) -> ShardCounts<'_> {
    let mut index: AHashMap<&[u8], u32> = AHashMap::new();
    let mut words: ShardCounts<'_> = Vec::new();
    split_generic(text, &mut |w| match index.get(w) {
        Some(&i) => words[i as usize].1 += 1,
        None => {
            index.insert(w, words.len() as u32);
            words.push((w, 1));
        }
    });
    words
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
/// for the model. Memory grows with the number of distinct words, not with the input.
/// Blocks of at least [`PARALLEL_MIN_BYTES`] are counted on `threads` threads; feeding
/// blocks of a few MiB uses both cores on standard input of any size.
#[derive(Debug, Default)]
pub struct WordCounter {
    threads: usize,
    /// The unterminated word at the end of the input so far (no whitespace in it).
    carry: Vec<u8>,
    /// Word -> index into `counts`; indices are first-appearance order.
    index: AHashMap<Box<[u8]>, u32>,
    counts: Vec<u64>,
    bytes: u64,
    parallel_min: usize,
}

impl WordCounter {
    /// A counter that uses up to `threads` threads (at least one) on large blocks.
    pub fn new(threads: usize) -> WordCounter {
        WordCounter {
            threads: threads.max(1),
            parallel_min: PARALLEL_MIN_BYTES,
            ..WordCounter::default()
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
        match self.index.get(word) {
            Some(&i) => self.counts[i as usize] += count,
            None => {
                self.index.insert(word.into(), self.counts.len() as u32);
                self.counts.push(count);
            }
        }
    }

    fn merge(&mut self, shards: Vec<ShardCounts<'_>>) {
        for shard in shards {
            self.index.reserve(shard.len().min(1 << 16));
            for (word, count) in shard {
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
        let mut by_order: Vec<Option<Box<[u8]>>> = vec![None; self.counts.len()];
        for (word, i) in self.index.drain() {
            by_order[i as usize] = Some(word);
        }
        let mut order: Vec<u32> = (0..self.counts.len() as u32).collect();
        if keep < order.len() {
            let counts = &self.counts;
            order.sort_unstable_by_key(|&i| (std::cmp::Reverse(counts[i as usize]), i));
            order.truncate(keep);
        }
        let mut kept: Vec<(Box<[u8]>, u64)> = order
            .into_iter()
            .filter_map(|i| {
                by_order[i as usize]
                    .take()
                    .map(|w| (w, self.counts[i as usize]))
            })
            .collect();
        kept.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut words = Vec::with_capacity(kept.len());
        let mut counts = Vec::with_capacity(kept.len());
        let mut ids = AHashMap::with_capacity(kept.len());
        for (id, (word, count)) in kept.into_iter().enumerate() {
            let key = key_of(&word).into_owned();
            ids.insert(key.clone(), id as u32);
            words.push(key);
            counts.push(count);
        }
        Ok(WordModel {
            source: placeholder_source(),
            unk_id: words.len() as u32,
            words,
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

/// The bytes a key of [`WordModel::words`] stands for (undoing [`key_of`]).
fn key_bytes(key: &str) -> Cow<'_, [u8]> {
    match key.strip_prefix(' ') {
        Some(hex) => match from_hex(hex) {
            Some(bytes) => Cow::Owned(bytes),
            None => Cow::Borrowed(key.as_bytes()),
        },
        None => Cow::Borrowed(key.as_bytes()),
    }
}

/// The bytes of word `id` (`[UNK]`'s text for the unknown id), or `None` for an id
/// outside the vocabulary.
pub fn word_bytes(model: &WordModel, id: u32) -> Option<Cow<'_, [u8]>> {
    match model.words.get(id as usize) {
        Some(key) => Some(key_bytes(key)),
        None if id == model.unk_id => Some(Cow::Borrowed(model.unk_text.as_bytes())),
        None => None,
    }
}

/// The id of `word` (its bytes), or `None` when it is not in the vocabulary.
pub fn lookup(model: &WordModel, word: &[u8]) -> Option<u32> {
    model.ids.get(key_of(word).as_ref()).copied()
}

/// Appends the ids of the words of `record` to `out`; words outside the vocabulary
/// become `[UNK]`'s id. Returns how many words were unknown.
pub fn encode(model: &WordModel, record: &[u8], out: &mut Vec<u32>) -> u64 {
    let mut unknown = 0;
    split_generic(record, &mut |w: &[u8]| {
        let id = match std::str::from_utf8(w) {
            Ok(s) => model.ids.get(s).copied(),
            Err(_) => lookup(model, w),
        };
        out.push(id.unwrap_or_else(|| {
            unknown += 1;
            model.unk_id
        }));
    });
    unknown
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
    for (id, key) in model.words.iter().enumerate() {
        write!(w, "{{\"id\":{id},")?;
        match key.strip_prefix(' ') {
            Some(hex) => write!(w, "\"hex\":{}", json(hex)?)?,
            None => write!(w, "\"word\":{}", json(key)?)?,
        }
        match model.counts.get(id) {
            Some(count) => writeln!(w, ",\"count\":{count}}}")?,
            None => writeln!(w, "}}")?,
        }
    }
    Ok(())
}

/// Reads a word model: `header` is line 1 (already parsed, its `kind` being `"word"`),
/// `lines` the further lines with their 1-based line numbers. Errors carry `file` and the
/// line number.
pub fn parse_model(
    header: &Map<String, Value>,
    lines: &mut dyn Iterator<Item = (u64, &[u8])>,
    source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    let unk_text = parse_header(header).map_err(|e| e.at_line(file, 1))?;
    let mut words: Vec<String> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    let mut ids: AHashMap<String, u32> = AHashMap::new();
    for (line_no, line) in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let expected = words.len() as u64;
        let (key, count) = parse_word_line(line, expected).map_err(|e| e.at_line(file, line_no))?;
        if expected >= u32::MAX as u64 {
            return Err(Error::data("too many words for 32-bit token ids").at_line(file, line_no));
        }
        if let Some(&other) = ids.get(&key) {
            return Err(Error::data(format!(
                "duplicated word {} (also id {other})",
                show_key(&key)
            ))
            .at_line(file, line_no));
        }
        ids.insert(key.clone(), expected as u32);
        words.push(key);
        counts.push(count);
    }
    Ok(WordModel {
        source,
        unk_id: words.len() as u32,
        words,
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
                    show_key(other)
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

fn parse_word_line(line: &[u8], expected: u64) -> Result<(String, u64)> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| Error::data(format!("invalid json: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::data("a word line must be a json object"));
    };
    let mut id = None;
    let mut word: Option<Vec<u8>> = None;
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
                word = Some(if field == "hex" {
                    from_hex(text).ok_or_else(|| {
                        Error::data(format!(
                            "\"hex\" is not an even number of hex digits: {value}"
                        ))
                    })?
                } else {
                    text.as_bytes().to_vec()
                });
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
                    show_key(other)
                )))
            }
        }
    }
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
    // A word without whitespace splits into exactly itself.
    let mut whole = false;
    split_generic(&word, &mut |piece| whole = piece.len() == word.len());
    let key = key_of(&word).into_owned();
    if !whole {
        return Err(Error::data(format!(
            "word {} contains whitespace",
            show_key(&key)
        )));
    }
    Ok((key, count))
}

/// Coverage statistics over encoded records, for `bpe-encode --stats`: records, bytes
/// (of the records, without the newlines between them), tokens and, for word models,
/// unknown words. Works for any model; `unknown` stays `None` where it has no meaning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WordStats {
    pub records: u64,
    pub bytes: u64,
    pub tokens: u64,
    /// Words that became `[UNK]`; `None` for models without an unknown token.
    pub unknown: Option<u64>,
}

impl WordStats {
    /// Adds one record of `bytes` bytes encoded as `tokens` ids, `unknown` of them
    /// unknown words (`None` for models without `[UNK]`).
    pub fn add(&mut self, bytes: usize, tokens: usize, unknown: Option<u64>) {
        self.records += 1;
        self.bytes += bytes as u64;
        self.tokens += tokens as u64;
        if let Some(u) = unknown {
            *self.unknown.get_or_insert(0) += u;
        }
    }

    /// Adds another set of statistics (from another thread or file).
    pub fn merge(&mut self, other: &WordStats) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.tokens += other.tokens;
        if let Some(u) = other.unknown {
            *self.unknown.get_or_insert(0) += u;
        }
    }

    /// Bytes per token, or `None` when there are no tokens.
    pub fn bytes_per_token(&self) -> Option<f64> {
        (self.tokens > 0).then(|| self.bytes as f64 / self.tokens as f64)
    }

    /// Unknown words as a fraction of all tokens, or `None` when it has no meaning.
    pub fn unknown_rate(&self) -> Option<f64> {
        let unknown = self.unknown?;
        (self.tokens > 0).then(|| unknown as f64 / self.tokens as f64)
    }
}

/// One line: `records 1, bytes 31, tokens 6, bytes/token 5.17, unknown 1 (16.67%)`;
/// `bytes/token -` without tokens; the unknown part only for word models.
impl std::fmt::Display for WordStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "records {}, bytes {}, tokens {}, bytes/token ",
            self.records, self.bytes, self.tokens
        )?;
        match self.bytes_per_token() {
            Some(r) => write!(f, "{r:.2}")?,
            None => f.write_str("-")?,
        }
        if let Some(unknown) = self.unknown {
            write!(f, ", unknown {unknown}")?;
            if let Some(rate) = self.unknown_rate() {
                write!(f, " ({:.2}%)", rate * 100.0)?;
            }
        }
        Ok(())
    }
}
