//! Split patterns (pre-tokenization): the preset patterns of minbpe and tiktoken, and
//! the splitter that cuts text into chunks that BPE pairs never cross.

use crate::error::{Error, Result};
use crate::model::SplitSpec;

/// minbpe's `GPT2_SPLIT_PATTERN`.
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";
/// minbpe's `GPT4_SPLIT_PATTERN`.
pub const GPT4_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+";
/// tiktoken's `cl100k_base` `pat_str`.
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
/// tiktoken's `r50k_base` / `p50k_base` `pat_str`.
pub const R50K_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
/// tiktoken's `o200k_base` `pat_str`.
pub const O200K_PATTERN: &str = concat!(
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
pub fn preset_pattern(name: &str) -> Option<&'static str> {
    match name {
        "gpt2" => Some(GPT2_PATTERN),
        "gpt4" => Some(GPT4_PATTERN),
        "cl100k" => Some(CL100K_PATTERN),
        "o200k" => Some(O200K_PATTERN),
        "r50k" | "p50k" => Some(R50K_PATTERN),
        _ => None,
    }
}

/// Cuts text into chunks by a split pattern.
pub struct Splitter {
    regex: fancy_regex::Regex,
}

impl Splitter {
    /// Compiles a split spec; an invalid regex is a usage error carrying the engine's message.
    pub fn new(spec: &SplitSpec) -> Result<Splitter> {
        let regex = fancy_regex::Regex::new(&spec.pattern)
            .map_err(|e| Error::usage(format!("invalid split pattern: {e}")))?;
        Ok(Splitter { regex })
    }

    /// Calls `emit` with each chunk of `text`, in order; the chunks concatenate to `text`.
    /// Valid UTF-8 stretches are split by the pattern; each byte of an invalid UTF-8
    /// sequence is a chunk of its own.
    pub fn split<'t>(&self, text: &'t [u8], emit: &mut dyn FnMut(&'t [u8])) {
        let mut rest = text;
        while !rest.is_empty() {
            let (valid, invalid_len) = match std::str::from_utf8(rest) {
                Ok(s) => (s, 0),
                Err(e) => {
                    let good = e.valid_up_to();
                    // The prefix up to valid_up_to() is valid UTF-8 by definition.
                    let s = std::str::from_utf8(&rest[..good]).unwrap_or("");
                    (s, e.error_len().unwrap_or(rest.len() - good))
                }
            };
            let mut last = 0;
            for m in self.regex.find_iter(valid) {
                let Ok(m) = m else { break };
                if m.start() > last {
                    emit(&valid.as_bytes()[last..m.start()]);
                }
                if m.end() > m.start() {
                    emit(&valid.as_bytes()[m.start()..m.end()]);
                }
                last = m.end();
            }
            if last < valid.len() {
                emit(&valid.as_bytes()[last..]);
            }
            let consumed = valid.len();
            for i in 0..invalid_len {
                emit(&rest[consumed + i..consumed + i + 1]);
            }
            rest = &rest[consumed + invalid_len..];
        }
    }
}
