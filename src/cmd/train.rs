//! `bpe-train`'s work, from a [`TrainConfig`] to a model file on a writer: read the
//! corpus (whole, or streamed and counted by chunk; with `--field`, the documents of a
//! JSONL file, no pair or chunk crossing from one to the next), train, write. Progress
//! and notes reach the binary through [`TrainEvent`]s.

use std::io::Write;

use crate::error::{Error, Result};
use crate::format::jsonl::{self, Skipped};
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
    /// `--field NAME`: the corpus is JSONL, and each line's string member NAME is one
    /// document.
    pub field: Option<String>,
    /// `--skip-invalid`: JSONL lines without a usable NAME are counted and left out.
    pub skip_invalid: bool,
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
    if config.skip_invalid && config.field.is_none() {
        return Err(Error::usage(
            "--skip-invalid applies to JSONL input (--field NAME)",
        ));
    }
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
    let vocab_size = bpe_vocab_size(config)?;
    train_bpe(
        config,
        vocab_size,
        out,
        events,
        &mut |on_merge| match &config.split {
            None => {
                // Whole-text BPE needs the whole sequence in memory.
                let text = input::read_all(sources, config.no_mmap)?;
                check_train_len(text.len())?;
                Ok(match cut_specials(&text, &config.specials)[..] {
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
                })
            }
            Some(spec) => {
                let splitter = Splitter::new(spec)?;
                let counts = count_training_chunks(config, sources, &splitter)?;
                check_train_len(counts.iter().map(|(c, _)| c.len() + 1).sum())?;
                Ok(train::train_chunks_with(
                    EngineChoice::Auto,
                    config.threads,
                    counts.iter(),
                    vocab_size,
                    on_merge,
                ))
            }
        },
    )
}

/// The BPE vocabulary size asked for, checked (and the special tokens with it).
fn bpe_vocab_size(config: &TrainConfig) -> Result<usize> {
    check_specials(&config.specials)?;
    let vocab_size = config.vocab_size.unwrap_or(DEFAULT_VOCAB_SIZE);
    if vocab_size < 256 {
        return Err(Error::usage(format!(
            "--vocab-size {vocab_size} is below 256 (the byte tokens alone)"
        )));
    }
    Ok(vocab_size)
}

/// A training run given the callback to report each merge with: its merges.
type Learn<'a> = dyn FnMut(&mut dyn FnMut(&Merge)) -> Result<Vec<Merge>> + 'a;

/// Runs `learn` with the merge reporting, then writes the model (the special tokens after
/// the merges kept).
fn train_bpe(
    config: &TrainConfig,
    vocab_size: usize,
    out: &mut dyn Write,
    events: &mut dyn FnMut(TrainEvent),
    learn: &mut Learn,
) -> Result<()> {
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
    let merges = learn(&mut on_merge)?;
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

/// `--field`: trains on the documents of a JSONL corpus. Each document is its own text:
/// no pair (`--split none`), chunk (split patterns) or word crosses from one document to
/// the next, exactly as if each were trained on apart and the counts added.
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
    let vocab_size = bpe_vocab_size(config)?;
    let counts = match &config.split {
        None => {
            // Whole-text BPE needs the documents in memory; each is its own
            // sequence (cut at special tokens as well).
            let mut text = Vec::new();
            let mut ends = Vec::new();
            let skipped = each_document(&mut |doc| {
                for piece in cut_specials(doc, &config.specials) {
                    text.extend_from_slice(piece);
                    ends.push(text.len());
                }
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
            let threads = config.threads;
            let learn = move |on_merge: &mut dyn FnMut(&Merge)| {
                Ok(train::train_chunks_with(
                    EngineChoice::Auto,
                    threads,
                    pieces.iter().map(|p| (*p, 1u64)),
                    vocab_size,
                    on_merge,
                ))
            };
            return train_bpe(config, vocab_size, out, events, &mut { learn });
        }
        Some(spec) => {
            let splitter = Splitter::new(spec)?;
            let mut counter = DocumentChunks::new(&splitter, config.threads);
            let skipped = each_document(&mut |doc| {
                for piece in cut_specials(doc, &config.specials) {
                    counter.feed(piece);
                }
                Ok(())
            })?;
            report(skipped, events);
            counter.finish()
        }
    };
    check_train_len(counts.iter().map(|(c, _)| c.len() + 1).sum())?;
    train_bpe(config, vocab_size, out, events, &mut |on_merge| {
        Ok(train::train_chunks_with(
            EngineChoice::Auto,
            config.threads,
            counts.iter(),
            vocab_size,
            on_merge,
        ))
    })
}

/// Counts the chunks of documents, each split on its own, on the threads: documents are
/// gathered into batches (about 4 MiB per thread), each batch's documents shared out in
/// order over the threads, and the counts merged in document order, so the chunks keep
/// their first-appearance order.
struct DocumentChunks<'s> {
    splitter: &'s Splitter,
    threads: usize,
    text: Vec<u8>,
    ends: Vec<usize>,
    counts: ChunkCounts,
}

impl<'s> DocumentChunks<'s> {
    fn new(splitter: &'s Splitter, threads: usize) -> DocumentChunks<'s> {
        DocumentChunks {
            splitter,
            threads: threads.max(1),
            text: Vec::new(),
            ends: Vec::new(),
            counts: ChunkCounts::new(),
        }
    }

    fn feed(&mut self, document: &[u8]) {
        self.text.extend_from_slice(document);
        self.ends.push(self.text.len());
        if self.text.len() >= self.threads * (4 << 20) {
            self.count_batch();
        }
    }

    fn count_batch(&mut self) {
        let (text, ends, splitter) = (&self.text, &self.ends, self.splitter);
        // Contiguous groups of documents of about equal bytes, one per thread.
        let mut groups = Vec::with_capacity(self.threads);
        let (mut start, mut doc) = (0, 0);
        for k in 1..=self.threads {
            let target = text.len() * k / self.threads;
            let first_doc = doc;
            while doc < ends.len() && (ends[doc] <= target || k == self.threads) {
                doc += 1;
            }
            groups.push((start, first_doc, doc));
            start = if doc > 0 { ends[doc - 1] } else { 0 };
        }
        let count = |&(mut at, from, to): &(usize, usize, usize)| {
            let mut counts = ChunkCounts::new();
            for &end in &ends[from..to] {
                splitter.split(&text[at..end], &mut |chunk| counts.add(chunk, 1));
                at = end;
            }
            counts
        };
        let partial: Vec<ChunkCounts> = if self.threads == 1 {
            groups.iter().map(count).collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = groups
                    .iter()
                    .map(|group| scope.spawn(move || count(group)))
                    .collect();
                handles
                    .into_iter()
                    .zip(&groups)
                    .map(|(h, group)| h.join().unwrap_or_else(|_| count(group)))
                    .collect()
            })
        };
        for p in &partial {
            self.counts.merge(p);
        }
        self.text.clear();
        self.ends.clear();
    }

    fn finish(mut self) -> ChunkCounts {
        self.count_batch();
        self.counts
    }
}
