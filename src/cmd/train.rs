//! `bpe-train`'s work, from a [`TrainConfig`] to a model file on a writer: read the
//! corpus (whole, or streamed and counted by chunk; with `--field`, the documents of a
//! JSONL file, no pair or chunk crossing from one to the next), train, write. Progress
//! and notes reach the binary through [`TrainEvent`]s.
//!
//! Past one machine (`--records`, `--emit-counts`, `--shard`, `--from-counts`): split
//! training is map-reduce shaped. Each shard's chunks are counted record by record (a
//! record's chunks never depend on another record, so any cut at line ends counts the
//! same), written with their first position (shard key, rank) as a counts file
//! (`format::counts`); count files merge by summing counts and keeping the smallest
//! first position; training from the merged counts feeds the trainer the chunks in
//! first-position order, which is the corpus's first-appearance order, so the merges
//! (ties included) are exactly those of `--records` on the whole corpus in one process.
//! Whole-stream splitting is not shard-invariant: the GPT-4 pattern's `\s*[\r\n]`
//! glues runs of newlines across a line end, which a cut there would separate.

use std::io::Write;

use crate::error::{Error, Result};
use crate::format::counts::{self, CountsHeader, CountsMerger, ShardKey};
use crate::format::jsonl::{self, Skipped};
use crate::format::model_file;
use crate::input::{self, Source};
use crate::model::{self, SpecialToken};
use crate::pretokenize::{
    self, ChunkCounter, ChunkCounts, RecordCounter, SpecialCutter, SplitSpec, Splitter,
};
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
    /// `--records`: pre-split each record (a line with its `\n`) on its own.
    pub records: bool,
    /// `--emit-counts`: write the chunk counts (a counts file) instead of a model; with
    /// `from_counts`, merge counts files.
    pub emit_counts: bool,
    /// `--shard KEY`: this input's place in the corpus, for `emit_counts` (default 0).
    pub shard: Option<ShardKey>,
    /// `--from-counts`: the sources are counts files.
    pub from_counts: bool,
    /// `--field NAME`: the corpus is JSONL, and each line's string member NAME is one
    /// document (a record of its own, as `--records` makes each line).
    pub field: Option<String>,
    /// `--skip-invalid`: JSONL lines without a usable NAME are counted and left out.
    pub skip_invalid: bool,
}

impl TrainConfig {
    /// A BPE training run with the defaults of `bpe-train` (no flags given).
    pub(crate) fn new() -> TrainConfig {
        TrainConfig {
            model_type: ModelType::Bpe,
            vocab_size: None,
            split: None,
            specials: Vec::new(),
            threads: 1,
            no_mmap: false,
            records: false,
            emit_counts: false,
            shard: None,
            from_counts: false,
            field: None,
            skip_invalid: false,
        }
    }
}

impl Default for TrainConfig {
    fn default() -> TrainConfig {
        TrainConfig::new()
    }
}

/// The default BPE vocabulary size of `bpe-train`.
const DEFAULT_VOCAB_SIZE: usize = 512;

/// What training reports while it runs.
pub enum TrainEvent<'a> {
    /// Merge number `index` (1-based) of at most `total` was learned; `tokens` gives the
    /// bytes of every token so far (`tokens.bytes(merge.id)`: the new one), put together
    /// only when asked for.
    Merged {
        merge: &'a Merge,
        index: usize,
        total: usize,
        tokens: &'a mut train::TokenBytes,
    },
    /// No pair was left after `learned` merges, short of the `wanted` ones.
    Exhausted { learned: usize, wanted: usize },
    /// Only the first `kept` of the `wanted` merges are written: the next one learned
    /// would take the tokens past the model format's limit ([`model::MAX_TOKEN_BYTES`]).
    OverLimit { kept: usize, wanted: usize },
    /// `--skip-invalid` left out these JSONL lines.
    Skipped(&'a Skipped),
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
fn python_bytes_repr(bytes: &[u8]) -> String {
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

/// Checks the flags of training past one machine against each other and the mode.
fn check_scale_flags(config: &TrainConfig) -> Result<()> {
    let scale = config.records || config.emit_counts || config.from_counts;
    if config.model_type == ModelType::Word && (scale || config.shard.is_some()) {
        return Err(Error::usage(
            "--records, --emit-counts, --shard and --from-counts apply to BPE models only",
        ));
    }
    if config.shard.is_some() && (!config.emit_counts || config.from_counts) {
        return Err(Error::usage(
            "--shard KEY goes with --emit-counts on text (merged counts keep the keys they \
             were counted with)",
        ));
    }
    if config.emit_counts && config.vocab_size.is_some() {
        return Err(Error::usage(
            "--vocab-size does not apply to --emit-counts, which writes counts, not a model",
        ));
    }
    if config.skip_invalid && config.field.is_none() {
        return Err(Error::usage(
            "--skip-invalid applies to JSONL input (--field NAME)",
        ));
    }
    if config.field.is_some() && config.from_counts {
        return Err(Error::usage(
            "--field reads a JSONL corpus; --from-counts reads counts files",
        ));
    }
    if !config.from_counts && (config.records || config.emit_counts) && config.split.is_none() {
        let flag = if config.emit_counts {
            "--emit-counts"
        } else {
            "--records"
        };
        return Err(Error::usage(format!(
            "{flag} needs a split pattern (--split gpt4, o200k, ...): --split none trains on \
             the whole input as one sequence, which cannot be cut into records or shards"
        )));
    }
    Ok(())
}

/// Trains a model on the concatenated `sources` and writes the model file to `out`; or,
/// as the config says, writes their chunk counts, merges counts files, or trains from
/// counts files.
pub fn train(
    config: &TrainConfig,
    sources: &[Source],
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    check_scale_flags(config)?;
    if let Some(field) = &config.field {
        return train_documents(config, field, sources, out, events);
    }
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
    if !config.emit_counts {
        // A bad --vocab-size is a usage error before any input is read.
        checked_vocab_size(config)?;
    }
    if config.from_counts {
        return train_from_counts(config, sources, out, events);
    }
    if let Some(spec) = &config.split {
        let splitter = Splitter::new(spec)?;
        let counts = count_training_chunks(config, sources, &splitter)?;
        return counts_or_model(config, spec, &counts, out, events);
    }
    let vocab_size = checked_vocab_size(config)?;
    // Whole-text BPE (`--split none`) needs the whole sequence in memory.
    let text = input::read_all(sources, config.no_mmap)?;
    check_train_len(text.len())?;
    let pieces = SpecialCutter::new(&config.specials).pieces(&text);
    let merges = learn(vocab_size, events, &mut |on_merge| match pieces[..] {
        [] => Vec::new(),
        [only] => train::train_bytes_with(
            EngineChoice::Auto,
            config.threads,
            only,
            vocab_size,
            on_merge,
        ),
        ref pieces => train::train_chunks_with(
            EngineChoice::Auto,
            config.threads,
            pieces.iter().map(|p| (*p, 1u64)),
            vocab_size,
            on_merge,
        ),
    });
    write_model(out, None, &config.specials, &merges, vocab_size, events)
}

/// `--vocab-size` (default [`DEFAULT_VOCAB_SIZE`]), at least the 256 byte tokens.
fn checked_vocab_size(config: &TrainConfig) -> Result<usize> {
    let vocab_size = config.vocab_size.unwrap_or(DEFAULT_VOCAB_SIZE);
    if vocab_size < 256 {
        return Err(Error::usage(format!(
            "--vocab-size {vocab_size} is below 256 (the byte tokens alone)"
        )));
    }
    Ok(vocab_size)
}

/// The trainer's per-merge callback.
type OnMerge<'a> = dyn FnMut(&Merge) + 'a;

/// Runs `run` (a trainer call) with a merge callback that reports each merge as a
/// [`TrainEvent::Merged`] with the tokens' bytes.
fn learn(
    vocab_size: usize,
    events: &mut dyn FnMut(TrainEvent),
    run: &mut dyn FnMut(&mut OnMerge) -> Vec<Merge>,
) -> Vec<Merge> {
    let wanted = vocab_size - 256;
    let mut tokens = train::TokenBytes::new();
    let mut learned = 0;
    let mut on_merge = |merge: &Merge| {
        learned += 1;
        tokens.push(merge.pair);
        events(TrainEvent::Merged {
            merge,
            index: learned,
            total: wanted,
            tokens: &mut tokens,
        });
    };
    run(&mut on_merge)
}

/// Writes the model file of `merges` (cut back to the format's limit, with a note), the
/// special tokens taking the ids after the last merge.
fn write_model(
    out: &mut dyn Write,
    split: Option<&SplitSpec>,
    specials: &[String],
    merges: &[Merge],
    vocab_size: usize,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    let wanted = vocab_size - 256;
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
    let specials: Vec<SpecialToken> = specials
        .iter()
        .enumerate()
        .map(|(k, text)| SpecialToken {
            text: text.clone(),
            id: first_special + k as u32,
        })
        .collect();
    let counts: Vec<u64> = merges.iter().take(kept).map(|m| m.count).collect();
    model_file::write_bpe(out, split, &specials, &pairs, &counts).map_err(Error::write)
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

/// The chunks' length limit ([`check_train_len`]), and their pair counts' bound: the
/// occurrences of all pairs, weighted, must fit a u64 (counts files can claim any count).
fn check_chunks<'a>(chunks: impl Iterator<Item = (&'a [u8], u64)>) -> Result<()> {
    let (mut len, mut pairs) = (0usize, Some(0u64));
    for (chunk, count) in chunks {
        len += chunk.len() + 1;
        let n = chunk.len().saturating_sub(1) as u64;
        pairs = pairs.and_then(|p| p.checked_add(count.checked_mul(n)?));
    }
    check_train_len(len)?;
    if pairs.is_none() {
        return Err(Error::data(
            "the chunk counts are too large: their pairs, counted with the chunks' counts, \
             add up past 2^64 - 1",
        ));
    }
    Ok(())
}

/// `--from-counts`: reads counts files, then merges them (`--emit-counts`) or trains
/// from them. The pattern and special tokens come from the files' headers (`--split`
/// and `--special`, if given, must say the same).
fn train_from_counts(
    config: &TrainConfig,
    sources: &[Source],
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    let vocab_size = if config.emit_counts {
        0
    } else {
        checked_vocab_size(config)?
    };
    let mut merger = CountsMerger::new();
    merger.read_sources(sources, config.no_mmap)?;
    let header = match (merger.header(), &config.split) {
        (Some(header), split) => {
            if let Some(split) = split {
                if split.pattern != header.split.pattern {
                    return Err(Error::usage(format!(
                        "--split {} differs from the counts' split {} (the counts files \
                         carry their pattern: --split may be left out)",
                        split.name, header.split.name
                    )));
                }
            }
            if !config.specials.is_empty() && config.specials != header.specials {
                return Err(Error::usage(format!(
                    "--special {:?} differs from the counts' special tokens {:?} (the counts \
                     files carry them: --special may be left out)",
                    config.specials, header.specials
                )));
            }
            header.clone()
        }
        (None, Some(split)) => CountsHeader {
            split: split.clone(),
            specials: config.specials.clone(),
        },
        (None, None) => {
            return Err(Error::data(
                "the counts have no header line saying how they were split (bpe-train \
                 --emit-counts writes one; for headerless counts give --split)",
            ));
        }
    };
    let order = merger.ordered()?;
    if config.emit_counts {
        return merger.write(out, &header, &order).map_err(Error::write);
    }
    let chunks = || order.iter().map(|&i| merger.chunk(i));
    check_chunks(chunks())?;
    let merges = learn(vocab_size, events, &mut |on_merge| {
        train::train_chunks_with(
            EngineChoice::Auto,
            config.threads,
            chunks(),
            vocab_size,
            on_merge,
        )
    });
    write_model(
        out,
        Some(&header.split),
        &header.specials,
        &merges,
        vocab_size,
        events,
    )
}

/// Distinct chunks of the training text in first-appearance order with their counts.
/// Standard input streams (memory grows with the distinct chunks, not the corpus); a
/// mapped file is counted in place; special tokens cut the text into separate pieces.
/// With `--records` (and `--emit-counts`) each line is split on its own.
fn count_training_chunks(
    config: &TrainConfig,
    sources: &[Source],
    splitter: &Splitter,
) -> Result<ChunkCounts> {
    let cutter = SpecialCutter::new(&config.specials);
    if config.records || config.emit_counts {
        if let [only] = sources {
            if !only.is_stdin() {
                let text = input::read_source(only, config.no_mmap)?;
                return Ok(pretokenize::count_records(
                    &text,
                    splitter,
                    &cutter,
                    config.threads,
                ));
            }
        }
        let mut counter = RecordCounter::new(splitter, &cutter, config.threads);
        for source in sources {
            input::for_each_block(std::slice::from_ref(source), config.no_mmap, &mut |block| {
                counter.feed(block);
                Ok(())
            })?;
            counter.end_input();
        }
        return Ok(counter.finish());
    }
    if !cutter.is_empty() {
        let text = input::read_all(sources, config.no_mmap)?;
        let mut counts = ChunkCounts::new();
        cutter.for_each_piece(&text, &mut |piece| {
            counts.merge(&pretokenize::count_chunks(piece, splitter, config.threads));
        });
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

/// `--field`: trains on the documents of a JSONL corpus (or, with `--emit-counts`, writes
/// their chunk counts). Each document is its own text: no pair (`--split none`), chunk
/// (split patterns) or word crosses from one document to the next, exactly as if each were
/// trained on apart and the counts added; so documents are records, and sharding a JSONL
/// corpus at line ends counts the same.
fn train_documents(
    config: &TrainConfig,
    field: &str,
    sources: &[Source],
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    let each_document = |each: &mut dyn FnMut(&[u8]) -> Result<()>| {
        jsonl::for_each_document(sources, config.no_mmap, field, config.skip_invalid, each)
    };
    let report = |skipped: Skipped, events: &mut dyn FnMut(TrainEvent)| {
        if skipped.lines > 0 {
            events(TrainEvent::Skipped(&skipped));
        }
    };
    if config.model_type == ModelType::Word {
        let mut counter = crate::word::WordCounter::new(config.threads);
        let skipped = each_document(&mut |doc| {
            // A line break between documents: words never join across them.
            counter.feed(doc);
            counter.feed(b"\n");
            Ok(())
        })?;
        report(skipped, events);
        let model = counter.finish(config.vocab_size)?;
        return crate::format::word_file::write_model(out, &model).map_err(Error::write);
    }
    check_specials(&config.specials)?;
    if !config.emit_counts {
        checked_vocab_size(config)?;
    }
    let cutter = SpecialCutter::new(&config.specials);
    let Some(spec) = &config.split else {
        // Whole-text BPE needs the documents in memory; each is its own sequence (cut at
        // special tokens as well).
        let vocab_size = checked_vocab_size(config)?;
        let mut text = Vec::new();
        let mut ends = Vec::new();
        let skipped = each_document(&mut |doc| {
            cutter.for_each_piece(doc, &mut |piece| {
                text.extend_from_slice(piece);
                ends.push(text.len());
            });
            Ok(())
        })?;
        report(skipped, events);
        check_train_len(text.len() + ends.len())?;
        let mut start = 0;
        let pieces: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let piece = &text[start..end];
                start = end;
                piece
            })
            .collect();
        let merges = learn(vocab_size, events, &mut |on_merge| {
            train::train_chunks_with(
                EngineChoice::Auto,
                config.threads,
                pieces.iter().map(|p| (*p, 1u64)),
                vocab_size,
                on_merge,
            )
        });
        return write_model(out, None, &config.specials, &merges, vocab_size, events);
    };
    let splitter = Splitter::new(spec)?;
    let mut counter = RecordCounter::new(&splitter, &cutter, config.threads);
    let skipped = each_document(&mut |doc| {
        counter.feed_record(doc);
        Ok(())
    })?;
    report(skipped, events);
    counts_or_model(config, spec, &counter.finish(), out, events)
}

/// The end of split training, from the corpus's chunk counts: with `--emit-counts` the
/// counts file, else the model trained on them.
fn counts_or_model(
    config: &TrainConfig,
    spec: &SplitSpec,
    counts: &ChunkCounts,
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
) -> Result<()> {
    if config.emit_counts {
        let header = CountsHeader {
            split: spec.clone(),
            specials: config.specials.clone(),
        };
        let shard = config.shard.clone().unwrap_or_default();
        return counts::write_counts(out, &header, counts, &shard).map_err(Error::write);
    }
    let vocab_size = checked_vocab_size(config)?;
    check_chunks(counts.iter())?;
    let merges = learn(vocab_size, events, &mut |on_merge| {
        train::train_chunks_with(
            EngineChoice::Auto,
            config.threads,
            counts.iter(),
            vocab_size,
            on_merge,
        )
    });
    write_model(
        out,
        Some(spec),
        &config.specials,
        &merges,
        vocab_size,
        events,
    )
}
