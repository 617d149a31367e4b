//! Split patterns (pre-tokenization): the preset patterns of minbpe and tiktoken, the
//! splitter that cuts text into chunks that BPE pairs never cross, safe cut points for
//! parallel work, cutting at special tokens, and chunk counting for training (over the
//! whole stream, or record by record for training in shards).
//!
//! # Semantics
//!
//! A pattern is applied as `regex.findall` in Python's `regex` module and as
//! `find_iter` in fancy-regex (the engine tiktoken uses): leftmost-first, backtracking,
//! with lookahead and possessive quantifiers; text between two matches (never produced
//! by the presets) is a chunk too, so the chunks always concatenate to the input. For the
//! preset patterns the two engines agree: `\s` is Unicode `White_Space` in both (the same
//! 25 code points), `(?i)` uses simple case folding in both (so `'ſ` is a contraction),
//! and `$` in `\s++$` only ever sees the end of the text (the possessive run has eaten a
//! final newline). Letter and digit classes are regex-syntax's (Unicode 16); Python's
//! `regex` may know a newer Unicode, which only matters for recently assigned characters.
//! A custom pattern runs on fancy-regex; where fancy-regex and Python `regex` differ
//! (e.g. `$` before a final newline), fancy-regex's behaviour applies.
//!
//! The presets (`GPT2_PATTERN`, `GPT4_PATTERN`, `CL100K_PATTERN`, `R50K_PATTERN`,
//! `O200K_PATTERN`) are recognised by their exact text and run on hand-written splitters
//! (module `fast`) that produce exactly the regex's chunks; tests hold them equal to
//! fancy-regex on random and real multilingual text and to Python `regex` on goldens.
//!
//! # Invalid UTF-8
//!
//! The text is cut into maximal valid UTF-8 stretches and invalid sequences. Each valid
//! stretch is split by the pattern as if it were a whole text (so `\s+(?!\S)` and `$` see
//! its end as the end of text); each byte of an invalid sequence is a chunk of its own.
//! Splitting never fails and the chunks concatenate to the input, byte for byte.
//!
//! # Safe cuts
//!
//! A position `p` (0 < p < len) is a *safe cut* when, for every preset pattern,
//! `split(text) == split(text[..p]) ++ split(text[p..])`. [`is_safe_cut`] accepts `p`
//! when the characters `a = text[..p].last()` and `b = text[p..].first()` are valid UTF-8
//! and one of these holds:
//!
//! 1. `b` is a space and `a` is not `\s`;
//! 2. `a` is in `\p{L}` and `b` is neither in `\p{L}`, nor in `\p{M}`, nor `'`;
//! 3. `a` is in `\p{N}` and `b` is not.
//!
//! Why: no preset has lookbehind or anchors at the start, so matching from `p` depends
//! only on `text[p..]`. A match attempt before `p` can reach `p` only by consuming `a`,
//! and after consuming a non-space `a` the presets test the next character only against
//! `\p{L}`, `\p{N}`, o200k's letter-and-mark sets, `[^\s\p{L}\p{N}]` (after punctuation),
//! `[\r\n]`, `[\r\n/]`, `'` or a contraction letter. In each rule `b` fails every test
//! that can follow `a`, exactly as the end of the text does; no lookahead or `$` is ever
//! evaluated at `p` because `a` is not whitespace. So every attempt before `p` behaves
//! the same with or without `text[p..]`, and the matches covering `a` end at `p`.
//! Custom patterns have no safe cuts (a regex may look arbitrarily far ahead).
//!
//! # Performance notes
//!
//! Measured as CPU time of one thread (the 2-core machine was shared, load about 12),
//! release build, on 27 MB of mixed text (English docs with 1.2 M non-ASCII characters
//! from 30 languages): hand-written splitters 150-185 MB/s (o200k slowest), fancy-regex
//! 9-17 MB/s on the same patterns, 11-16x; on 9.5 MB of English, 220-255 MB/s.
//! `count_chunks` takes about 0.46 s of CPU for the 27 MB on one thread (hashing
//! dominates: 6.5 M chunks, 120 k distinct), and 0.5 s of CPU in all on two threads.
//! Reproduce: `PRETOK_BENCH_CORPUS=FILE cargo test --release --test integration
//! bench_pretokenize -- --ignored --nocapture`.

pub(crate) mod classes;
mod count;
mod fast;
mod specials;

pub(crate) use count::{count_chunks, count_records, ChunkCounter, ChunkCounts, RecordCounter};
pub(crate) use specials::SpecialCutter;

use crate::error::{Error, Result};
use fast::Preset;

/// A split (pre-tokenization) pattern: a preset name (`gpt4`, `o200k`, ... or `custom`)
/// and the exact regex text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitSpec {
    pub(crate) name: String,
    pub(crate) pattern: String,
}

/// Parses `--split NAME|REGEX`: `none`, a preset name, or a custom regex (checked here,
/// so a bad one is a usage error carrying the engine's message).
pub fn parse_split(value: &str) -> Result<Option<SplitSpec>> {
    if value == "none" {
        return Ok(None);
    }
    let spec = match preset_pattern(value) {
        Some(pattern) => SplitSpec {
            name: value.to_string(),
            pattern: pattern.to_string(),
        },
        // A bare word is a valid regex, but one that only finds itself in the text: far
        // more likely a mistyped preset (`cl100`) than a pattern anyone means.
        None if !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            return Err(Error::usage(format!(
                "unknown split {value:?}: the presets are none, gpt2, gpt4, cl100k, o200k, \
                 r50k and p50k (to split by that text as a regex, write (?:{value}))"
            )));
        }
        None => SplitSpec {
            name: "custom".to_string(),
            pattern: value.to_string(),
        },
    };
    Splitter::new(&spec)?;
    Ok(Some(spec))
}

/// minbpe's `GPT2_SPLIT_PATTERN`.
pub(crate) const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// minbpe's `GPT4_SPLIT_PATTERN`.
pub(crate) const GPT4_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// tiktoken's `cl100k_base` `pat_str`.
pub(crate) const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
/// tiktoken's `r50k_base` / `p50k_base` `pat_str`.
pub(crate) const R50K_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
/// tiktoken's `o200k_base` `pat_str`.
pub(crate) const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);

/// The preset split pattern with this name (`gpt2`, `gpt4`, `cl100k`, `o200k`, `r50k`,
/// `p50k`), if any.
pub(crate) fn preset_pattern(name: &str) -> Option<&'static str> {
    match name {
        "gpt2" => Some(GPT2_PATTERN),
        "gpt4" => Some(GPT4_PATTERN),
        "cl100k" => Some(CL100K_PATTERN),
        "o200k" => Some(O200K_PATTERN),
        "r50k" | "p50k" => Some(R50K_PATTERN),
        _ => None,
    }
}

/// The split spec of a pattern's text: named after the preset whose exact text it is
/// (`r50k` for the pattern r50k_base and p50k_base share), else `custom`. Used where a
/// pattern arrives without a name (HF `tokenizer.json`, minbpe `.model`).
pub(crate) fn split_of_pattern(pattern: &str) -> SplitSpec {
    let name = ["gpt2", "gpt4", "cl100k", "o200k", "r50k"]
        .into_iter()
        .find(|name| preset_pattern(name) == Some(pattern))
        .unwrap_or("custom");
    SplitSpec {
        name: name.to_string(),
        pattern: pattern.to_string(),
    }
}

/// Cuts text into chunks by a split pattern.
pub struct Splitter {
    engine: Engine,
}

enum Engine {
    Fast(Preset),
    Regex(Box<fancy_regex::Regex>),
}

/// Where a splitter's chunks go, one call per chunk, in order: any closure, or a type
/// whose `emit` is marked to be taken inline into the split loop (the encoder's chunk
/// step: LLVM kept its closure a call per chunk, and a closure cannot be so marked).
pub(crate) trait Emit<'t> {
    fn emit(&mut self, chunk: &'t [u8]);
}

impl<'t, F: FnMut(&'t [u8]) + ?Sized> Emit<'t> for F {
    #[inline(always)]
    fn emit(&mut self, chunk: &'t [u8]) {
        self(chunk);
    }
}

impl Splitter {
    /// Compiles a split spec; an invalid regex is a usage error carrying the engine's
    /// message. A preset pattern (matched by its exact text, whatever the spec's name)
    /// gets its hand-written splitter.
    pub fn new(spec: &SplitSpec) -> Result<Splitter> {
        let preset = match spec.pattern.as_str() {
            GPT2_PATTERN | R50K_PATTERN => Some(Preset::Gpt2),
            GPT4_PATTERN => Some(Preset::Gpt4),
            CL100K_PATTERN => Some(Preset::Cl100k),
            O200K_PATTERN => Some(Preset::O200k),
            _ => None,
        };
        match preset {
            Some(p) => Ok(Splitter {
                engine: Engine::Fast(p),
            }),
            None => Splitter::new_regex(spec),
        }
    }

    /// Compiles a split spec for fancy-regex even when it is a preset: the reference the
    /// hand-written splitters are tested and benchmarked against.
    pub fn new_regex(spec: &SplitSpec) -> Result<Splitter> {
        let regex = fancy_regex::Regex::new(&spec.pattern)
            .map_err(|e| Error::usage(format!("invalid split pattern: {e}")))?;
        Ok(Splitter {
            engine: Engine::Regex(Box::new(regex)),
        })
    }

    /// Whether this splitter runs a hand-written preset splitter (and so has safe cuts).
    pub(crate) fn is_preset(&self) -> bool {
        matches!(self.engine, Engine::Fast(_))
    }

    /// Calls `emit` with each chunk of `text`, in order; the chunks concatenate to `text`.
    /// Valid UTF-8 stretches are split by the pattern; each byte of an invalid UTF-8
    /// sequence is a chunk of its own (see the module documentation).
    pub fn split<'t>(&self, text: &'t [u8], emit: &mut dyn FnMut(&'t [u8])) {
        self.split_each(text, emit);
    }

    /// [`Splitter::split`] with `emit` known at compile time, so that the preset
    /// splitters can take it inline (the encoder's chunk step: `bpe-encode -q -j 1
    /// --whole` on the 27 MB benchmark text, AMD EPYC Zen 4, min and 10th percentile
    /// of 20 alternated runs, o200k_base 418-428 ms against 430-439 through `dyn`,
    /// cl100k_base 377-385 against 384-396).
    pub(crate) fn split_each<'t, F: Emit<'t> + ?Sized>(&self, text: &'t [u8], emit: &mut F) {
        let mut rest = text;
        while !rest.is_empty() {
            let (valid, invalid_len) = match simdutf8::compat::from_utf8(rest) {
                Ok(s) => (s, 0),
                Err(e) => {
                    let good = e.valid_up_to();
                    // The prefix up to valid_up_to() is valid UTF-8 by definition.
                    let s = simdutf8::compat::from_utf8(&rest[..good]).unwrap_or("");
                    (s, e.error_len().unwrap_or(rest.len() - good))
                }
            };
            self.split_valid(valid, emit);
            let consumed = valid.len();
            for i in 0..invalid_len {
                emit.emit(&rest[consumed + i..consumed + i + 1]);
            }
            rest = &rest[consumed + invalid_len..];
        }
    }

    fn split_valid<'t, F: Emit<'t> + ?Sized>(&self, valid: &'t str, emit: &mut F) {
        let bytes = valid.as_bytes();
        match &self.engine {
            Engine::Fast(p) => fast::split(*p, classes::classes(), bytes, emit),
            Engine::Regex(regex) => {
                let mut last = 0;
                for m in regex.find_iter(valid) {
                    // A backtracking limit hit ends the matching; the rest stays one chunk.
                    let Ok(m) = m else { break };
                    if m.start() > last {
                        emit.emit(&bytes[last..m.start()]);
                    }
                    if m.end() > m.start() {
                        emit.emit(&bytes[m.start()..m.end()]);
                    }
                    last = m.end();
                }
                if last < bytes.len() {
                    emit.emit(&bytes[last..]);
                }
            }
        }
    }

    #[cfg(test)]
    /// Calls `split` and collects the chunks (convenient for tests and small texts).
    pub(crate) fn chunks<'t>(&self, text: &'t [u8]) -> Vec<&'t [u8]> {
        let mut out = Vec::new();
        self.split(text, &mut |c| out.push(c));
        out
    }

    /// [`find_safe_cut`] for this splitter's pattern: `None` for custom patterns, which
    /// have no safe cuts.
    pub(crate) fn find_safe_cut(&self, text: &[u8], near: usize) -> Option<usize> {
        if self.is_preset() {
            find_safe_cut(text, near)
        } else {
            None
        }
    }

    /// The largest safe cut in `lo..=hi` for this splitter, if any.
    pub(crate) fn last_safe_cut(&self, text: &[u8], lo: usize, hi: usize) -> Option<usize> {
        if self.is_preset() {
            last_safe_cut(text, lo, hi)
        } else {
            None
        }
    }
}

/// How far [`find_safe_cut`] looks on each side of `near`.
const SAFE_CUT_WINDOW: usize = 1 << 20;

/// A safe cut of `text` (see the module documentation) for the preset patterns: the
/// nearest at or before `near`, else the nearest after it, looking at most
/// [`SAFE_CUT_WINDOW`] bytes each way; `None` if there is none there. Splitting
/// `text[..p]` and `text[p..]` independently gives the chunks of `text`, so an encoder
/// can cut a huge text into parts near `len * k / parts` and encode them in parallel.
/// Only valid for the preset patterns; [`Splitter::find_safe_cut`] checks that.
pub(crate) fn find_safe_cut(text: &[u8], near: usize) -> Option<usize> {
    let near = near.min(text.len());
    last_safe_cut(text, near.saturating_sub(SAFE_CUT_WINDOW), near).or_else(|| {
        let hi = near.saturating_add(SAFE_CUT_WINDOW).min(text.len());
        (near + 1..=hi).find(|&p| is_safe_cut(text, p))
    })
}

/// The largest safe cut `p` with `lo <= p <= hi`.
fn last_safe_cut(text: &[u8], lo: usize, hi: usize) -> Option<usize> {
    let hi = hi.min(text.len().saturating_sub(1));
    let lo = lo.max(1);
    (lo..=hi).rev().find(|&p| is_safe_cut(text, p))
}

/// Whether `p` is a safe cut of `text` for every preset pattern (rules in the module
/// documentation). The characters on both sides must be valid, complete UTF-8.
pub(crate) fn is_safe_cut(text: &[u8], p: usize) -> bool {
    if p == 0 || p >= text.len() {
        return false;
    }
    let (b, a) = (text[p], text[p - 1]);
    let t = classes::classes();
    if b < 0x80 && a < 0x80 {
        // Fast path for ASCII on both sides.
        let (kb, ka) = (t.ascii[b as usize], t.ascii[a as usize]);
        return safe_pair(ka, kb, b as u32);
    }
    let Some(cb) = char_at(text, p) else {
        return false;
    };
    let Some(ca) = char_before(text, p) else {
        return false;
    };
    safe_pair(t.of(ca), t.of(cb), cb)
}

#[inline(always)]
fn safe_pair(ka: u8, kb: u8, b: u32) -> bool {
    use classes::{L, M, N, S};
    if ka & S != 0 {
        return false;
    }
    b == b' ' as u32
        || (ka & L != 0 && kb & (L | M) == 0 && b != b'\'' as u32)
        || (ka & N != 0 && kb & N == 0)
}

/// The valid, complete character starting at `p`.
fn char_at(text: &[u8], p: usize) -> Option<u32> {
    let len = match text[p] {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return None,
    };
    let s = std::str::from_utf8(text.get(p..p + len)?).ok()?;
    s.chars().next().map(|c| c as u32)
}

/// The valid, complete character ending at `p`.
fn char_before(text: &[u8], p: usize) -> Option<u32> {
    let mut start = p - 1;
    while start > 0 && p - start < 4 && text[start] & 0xC0 == 0x80 {
        start -= 1;
    }
    let s = std::str::from_utf8(&text[start..p]).ok()?;
    let mut chars = s.chars();
    let c = chars.next()?;
    if chars.next().is_some() {
        return None;
    }
    Some(c as u32)
}
