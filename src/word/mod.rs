//! word: the word-level tokenizer. Words are the pieces of Python's `str.split()`;
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
//! id. For `Life is short eat dessert first` this is
//! `{'Life': 0, 'dessert': 1, 'eat': 2, 'first': 3, 'is': 4, 'short': 5}`, `[UNK]` = 6.
//!
//! # Model file
//!
//! NDJSON, described in `docs/formats.md` ("Word models"), read and written by
//! [`crate::format::word_file`].
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
//! - Model lines in the exact form [`write_model`](crate::format::word_file::write_model) writes are read by a small hand
//!   parser; anything else (other key order, escapes, spacing) goes through serde_json,
//!   and a test checks both read the same. Large model files are read in two halves on
//!   two threads (`format::word_file::parse_model_text`), their SHA-256 on a third.
//!   Loading the 540k-word model of the 27 MB benchmark text (26 MB) takes ~0.15 s of
//!   CPU with this layout, against 0.29 s with a `String` per word in a hash map.
//! - Inputs below [`PARALLEL_MIN_BYTES`](count::PARALLEL_MIN_BYTES) are counted on one
//!   thread: thread start-up and the merge cost more than they save there.

mod count;
mod encode;
mod split;
mod table;
mod vocab;

use std::borrow::Cow;

#[cfg(test)]
pub(crate) use count::train;
pub(crate) use count::WordCounter;
#[cfg(test)]
pub(crate) use encode::encode;
pub(crate) use encode::WordEncoder;
pub(crate) use split::is_python_whitespace;
pub(crate) use split::split_generic;
#[cfg(test)]
pub(crate) use split::split_words;
pub(crate) use vocab::{Repeat, WordIds, WordList};

use crate::identity::ModelSource;

/// The unknown-word token's default text.
pub(crate) const UNK: &str = "[UNK]";

/// A word-level vocabulary: words by id, and `[UNK]`.
#[derive(Debug, Clone)]
pub struct WordModel {
    pub(crate) source: ModelSource,
    /// Counts when learned, parallel to the words (display only).
    pub(crate) counts: Vec<u64>,
    /// The words (ids `0..`) and the table from a word (its bytes) to its id.
    pub(crate) ids: crate::word::WordIds,
    /// The unknown-word token's text and id (`[UNK]`, the number of words).
    pub(crate) unk_text: String,
    pub(crate) unk_id: u32,
}

impl WordModel {
    /// The words, by id (`[UNK]` is not among them).
    pub(crate) fn words(&self) -> &crate::word::WordList {
        self.ids.words()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
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
pub(crate) fn key_of(word: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(word) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(format!(" {}", to_hex(word))),
    }
}

/// The bytes of word `id` (`[UNK]`'s text for the unknown id), or `None` for an id
/// outside the vocabulary.
pub(crate) fn word_bytes(model: &WordModel, id: u32) -> Option<Cow<'_, [u8]>> {
    match model.words().get(id) {
        Some(word) => Some(Cow::Borrowed(word)),
        None if id == model.unk_id => Some(Cow::Borrowed(model.unk_text.as_bytes())),
        None => None,
    }
}

/// The id of `word` (its bytes), or `None` when it is not in the vocabulary.
pub(crate) fn lookup(model: &WordModel, word: &[u8]) -> Option<u32> {
    model.ids.get(word)
}

/// Appends the words of `ids` to `out`, joined with single spaces (`[UNK]` as its text).
/// An id outside the vocabulary is returned as the error, and `out` is left as it was.
pub(crate) fn decode(
    model: &WordModel,
    ids: &[u32],
    out: &mut Vec<u8>,
) -> std::result::Result<(), u32> {
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
