//! `bpe-train`'s work, from a [`TrainConfig`] to a model file on a writer: read the
//! corpus (whole, or streamed and counted by chunk), train, write. Progress and notes
//! reach the binary through [`TrainEvent`]s.

use std::io::Write;

use crate::error::{Error, Result};
use crate::format::model_file;
use crate::input::{self, Source};
use crate::model::{self, SpecialToken};
use crate::pretokenize::{self, ChunkCounter, ChunkCounts, SplitSpec, Splitter};
use crate::train::{self, EngineChoice, Merge};

/// Which kind of model `bpe-train` learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    Bpe,
    Word,
}

/// What `bpe-train` was asked to do.
pub struct TrainConfig {
    pub model_type: ModelType,
    /// Vocabulary size (256 bytes + merges for BPE; words + `[UNK]` for word models).
    /// `None`: 512 for BPE, every word for word models.
    pub vocab_size: Option<usize>,
    pub split: Option<SplitSpec>,
    pub specials: Vec<String>,
    /// Threads to use (at least 1).
    pub threads: usize,
    pub no_mmap: bool,
}

/// The default BPE vocabulary size of `bpe-train`.
pub const DEFAULT_VOCAB_SIZE: usize = 512;

/// What training reports while it runs.
pub enum TrainEvent<'a> {
    /// Merge number `index` (1-based) of at most `total` was learned; `token` is its bytes.
    Merged {
        merge: &'a Merge,
        index: usize,
        total: usize,
        token: &'a [u8],
    },
    /// No pair was left after `learned` merges, short of the `wanted` ones.
    Exhausted { learned: usize, wanted: usize },
    /// Only the first `kept` of the `wanted` merges are written: the next one learned
    /// would take the tokens past the model format's limit ([`model::MAX_TOKEN_BYTES`]).
    OverLimit { kept: usize, wanted: usize },
}

/// The `--verbose` line, minbpe's: `merge 1/3: (104, 97) -> 256 (b'ha') had 3 occurrences`.
pub fn merge_log_line(merge: &Merge, index: usize, total: usize, token: &[u8]) -> String {
    format!(
        "merge {index}/{total}: ({}, {}) -> {} ({}) had {} occurrences",
        merge.pair.0,
        merge.pair.1,
        merge.id,
        python_bytes_repr(token),
        merge.count
    )
}

/// Python's `repr(bytes)`: `b'ha'`, `b"it's"`, `b'\xe4\n'`.
pub fn python_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut s = String::from("b");
    s.push(quote as char);
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            _ if b == quote => {
                s.push('\\');
                s.push(b as char);
            }
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push(quote as char);
    s
}

/// Special tokens must be non-empty (an empty one occurs everywhere: cutting the text at
/// it never advanced) and distinct (a model may not name a token twice, so a model
/// written with a repeated one could not be read back).
fn check_specials(specials: &[String]) -> Result<()> {
    for (k, special) in specials.iter().enumerate() {
        if special.is_empty() {
            return Err(Error::usage("--special needs a non-empty token"));
        }
        if specials[..k].contains(special) {
            return Err(Error::usage(format!(
                "--special {special:?} is given twice"
            )));
        }
    }
    Ok(())
}

/// Cuts `text` at every occurrence of a special token (leftmost, longest first): the
/// pieces between them, in order. Specials are boundaries, never training text.
fn cut_specials<'t>(text: &'t [u8], specials: &[String]) -> Vec<&'t [u8]> {
    if specials.is_empty() {
        return vec![text];
    }
    let mut pieces = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < text.len() {
        let hit = specials
            .iter()
            .filter(|s| text[i..].starts_with(s.as_bytes()))
            .map(|s| s.len())
            .max();
        match hit {
            Some(len) => {
                pieces.push(&text[start..i]);
                i += len;
                start = i;
            }
            None => i += 1,
        }
    }
    pieces.push(&text[start..]);
    pieces.retain(|p| !p.is_empty());
    pieces
}

/// Trains a model on the concatenated `sources` and writes the model file to `out`.
pub fn train(
    config: &TrainConfig,
    sources: &[Source],
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    if config.model_type == ModelType::Word {
        // Streams: memory grows with the distinct words, not with the input.
        let mut counter = crate::word::WordCounter::new(config.threads);
        input::for_each_block(sources, config.no_mmap, &mut |block| {
            counter.feed(block);
            Ok(())
        })?;
        let model = counter.finish(config.vocab_size)?;
        return crate::format::word_file::write_model(out, &model).map_err(Error::write);
    }
    check_specials(&config.specials)?;
    let vocab_size = config.vocab_size.unwrap_or(DEFAULT_VOCAB_SIZE);
    if vocab_size < 256 {
        return Err(Error::usage(format!(
            "--vocab-size {vocab_size} is below 256 (the byte tokens alone)"
        )));
    }
    let wanted = vocab_size - 256;

    let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut learned = 0;
    let mut on_merge = |merge: &Merge| {
        let (a, b) = (merge.pair.0 as usize, merge.pair.1 as usize);
        let mut token = vocab[a].clone();
        token.extend_from_slice(&vocab[b]);
        learned += 1;
        events(TrainEvent::Merged {
            merge,
            index: learned,
            total: wanted,
            token: &token,
        });
        vocab.push(token);
    };
    let merges = match &config.split {
        None => {
            // Whole-text BPE needs the whole sequence in memory.
            let text = input::read_all(sources, config.no_mmap)?;
            check_train_len(text.len())?;
            match cut_specials(&text, &config.specials)[..] {
                [] => Vec::new(),
                [only] => train::train_bytes_with(
                    EngineChoice::Auto,
                    config.threads,
                    only,
                    vocab_size,
                    &mut on_merge,
                ),
                ref pieces => train::train_chunks_with(
                    EngineChoice::Auto,
                    config.threads,
                    pieces.iter().map(|p| (*p, 1u64)),
                    vocab_size,
                    &mut on_merge,
                ),
            }
        }
        Some(spec) => {
            let splitter = Splitter::new(spec)?;
            let counts = count_training_chunks(config, sources, &splitter)?;
            check_train_len(counts.iter().map(|(c, _)| c.len() + 1).sum())?;
            train::train_chunks_with(
                EngineChoice::Auto,
                config.threads,
                counts.iter(),
                vocab_size,
                &mut on_merge,
            )
        }
    };
    let mut pairs: Vec<(u32, u32)> = merges.iter().map(|m| m.pair).collect();
    let kept = model::merges_within_limit(&pairs);
    if kept < pairs.len() {
        pairs.truncate(kept);
        events(TrainEvent::OverLimit { kept, wanted });
    } else if merges.len() < wanted {
        events(TrainEvent::Exhausted {
            learned: merges.len(),
            wanted,
        });
    }
    let first_special = 256 + pairs.len() as u32;
    let specials: Vec<SpecialToken> = config
        .specials
        .iter()
        .enumerate()
        .map(|(k, text)| SpecialToken {
            text: text.clone(),
            id: first_special + k as u32,
        })
        .collect();
    let counts: Vec<u64> = merges.iter().take(kept).map(|m| m.count).collect();
    model_file::write_bpe(out, config.split.as_ref(), &specials, &pairs, &counts)
        .map_err(Error::write)
}

/// The trainer keeps positions in 31 bits: longer input is refused, not truncated.
fn check_train_len(len: usize) -> Result<()> {
    if len > train::MAX_TRAIN_LEN {
        return Err(Error::data(format!(
            "training input of {len} bytes is over the limit of {} bytes (for a split model: \
             distinct chunks, one byte more each)",
            train::MAX_TRAIN_LEN
        )));
    }
    Ok(())
}

/// Distinct chunks of the training text in first-appearance order with their counts.
/// Standard input streams (memory grows with the distinct chunks, not the corpus); a
/// mapped file is counted in place; special tokens cut the text into separate pieces.
fn count_training_chunks(
    config: &TrainConfig,
    sources: &[Source],
    splitter: &Splitter,
) -> Result<ChunkCounts> {
    if !config.specials.is_empty() {
        let text = input::read_all(sources, config.no_mmap)?;
        let mut counts = ChunkCounts::new();
        for piece in cut_specials(&text, &config.specials) {
            counts.merge(&pretokenize::count_chunks(piece, splitter, config.threads));
        }
        return Ok(counts);
    }
    if let [only] = sources {
        if !only.is_stdin() {
            let text = input::read_source(only, config.no_mmap)?;
            return Ok(pretokenize::count_chunks(&text, splitter, config.threads));
        }
    }
    let mut counter = ChunkCounter::new(splitter, config.threads);
    input::for_each_block(sources, config.no_mmap, &mut |block| {
        counter.feed(block);
        Ok(())
    })?;
    Ok(counter.finish())
}
