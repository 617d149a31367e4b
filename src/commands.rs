//! The work of `bpe-train`, `bpe-encode` and `bpe-decode`, from a plain config to
//! bytes on a writer: what each binary calls after parsing its flags. Progress and
//! notes reach the binary through callbacks; nothing here prints.

use std::io::Write;

use crate::decode::{decode_ids, vocab_size};
use crate::encode::{encode_batch, AllowedSpecial, Encoder};
use crate::error::{Error, Result};
use crate::input::{self, Source};
use crate::model::{Model, SpecialToken, SplitSpec};
use crate::modelfile::{self, StreamModel};
use crate::ndjson;
use crate::pretokenize::{self, ChunkCounter, ChunkCounts, Splitter};
use crate::train::{self, Merge};

fn write_err(e: std::io::Error) -> Error {
    Error::io("write failed", e).in_file("<stdout>")
}

/// Parses `--split NAME|REGEX`: `none`, a preset name, or a custom regex (checked here,
/// so a bad one is a usage error carrying the engine's message).
pub fn parse_split(value: &str) -> Result<Option<SplitSpec>> {
    if value == "none" {
        return Ok(None);
    }
    let spec = match pretokenize::preset_pattern(value) {
        Some(pattern) => SplitSpec {
            name: value.to_string(),
            pattern: pattern.to_string(),
        },
        None => SplitSpec {
            name: "custom".to_string(),
            pattern: value.to_string(),
        },
    };
    Splitter::new(&spec)?;
    Ok(Some(spec))
}

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
}

/// The seed's `--verbose` line: `merge 1/3: (104, 97) -> 256 (b'ha') had 3 occurrences`.
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
        return crate::word::write_model(out, &model).map_err(write_err);
    }
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
            // The seed's algorithm needs the whole sequence in memory.
            let text = input::read_all(sources, config.no_mmap)?;
            match cut_specials(&text, &config.specials)[..] {
                [] => Vec::new(),
                [only] => train::train_bytes(only, vocab_size, &mut on_merge),
                ref pieces => train::train_chunks(
                    pieces.iter().map(|p| (*p, 1u64)),
                    vocab_size,
                    &mut on_merge,
                ),
            }
        }
        Some(spec) => {
            let splitter = Splitter::new(spec)?;
            let counts = count_training_chunks(config, sources, &splitter)?;
            train::train_chunks(counts.iter(), vocab_size, &mut on_merge)
        }
    };
    if merges.len() < wanted {
        events(TrainEvent::Exhausted {
            learned: merges.len(),
            wanted,
        });
    }
    let first_special = 256 + merges.len() as u32;
    let specials: Vec<SpecialToken> = config
        .specials
        .iter()
        .enumerate()
        .map(|(k, text)| SpecialToken {
            text: text.clone(),
            id: first_special + k as u32,
        })
        .collect();
    let pairs: Vec<(u32, u32)> = merges.iter().map(|m| m.pair).collect();
    let counts: Vec<u64> = merges.iter().map(|m| m.count).collect();
    modelfile::write_bpe(out, config.split.as_ref(), &specials, &pairs, &counts).map_err(write_err)
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

/// What `bpe-encode` was asked to do.
pub struct EncodeConfig {
    pub model: Model,
    /// `--whole`: the entire input is one record.
    pub whole: bool,
    /// `--count`: write token counts instead of ids.
    pub count: bool,
    /// Write the id-stream header line first (not with `--count`).
    pub header: bool,
    pub allowed_special: AllowedSpecial,
    pub threads: usize,
    pub no_mmap: bool,
}

/// Totals of an encoding run, for `--stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodeStats {
    pub records: u64,
    pub tokens: u64,
    pub bytes: u64,
    /// Unknown-word tokens (word models only).
    pub unknown: Option<u64>,
}

impl EncodeStats {
    /// The `--stats` summary line.
    pub fn summary(&self) -> String {
        let per_token = if self.tokens == 0 {
            0.0
        } else {
            self.bytes as f64 / self.tokens as f64
        };
        let mut line = format!(
            "records {} tokens {} bytes {} bytes/token {:.3}",
            self.records, self.tokens, self.bytes, per_token
        );
        if let Some(unknown) = self.unknown {
            let rate = if self.tokens == 0 {
                0.0
            } else {
                100.0 * unknown as f64 / self.tokens as f64
            };
            line.push_str(&format!(" unknown {unknown} unknown-rate {rate:.2}%"));
        }
        line
    }
}

enum AnyEncoder<'m> {
    Bpe(Encoder<'m>),
    Word(crate::word::WordEncoder),
}

impl AnyEncoder<'_> {
    fn batch(&self, records: &[&[u8]], threads: usize) -> Vec<Vec<u32>> {
        match self {
            AnyEncoder::Bpe(enc) => encode_batch(enc, records, threads),
            AnyEncoder::Word(enc) => {
                let encode_all = |part: &[&[u8]]| -> Vec<Vec<u32>> {
                    part.iter()
                        .map(|r| {
                            let mut ids = Vec::new();
                            enc.encode(r, &mut ids);
                            ids
                        })
                        .collect()
                };
                if threads < 2 || records.len() < 64 {
                    return encode_all(records);
                }
                let per = records.len().div_ceil(threads);
                std::thread::scope(|scope| {
                    let parts: Vec<_> = records
                        .chunks(per)
                        .map(|part| scope.spawn(move || encode_all(part)))
                        .collect();
                    parts
                        .into_iter()
                        .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                        .collect()
                })
            }
        }
    }
}

/// Encodes `sources` to `out` and returns the totals.
pub fn encode(
    config: &EncodeConfig,
    sources: &[Source],
    out: &mut dyn Write,
) -> Result<EncodeStats> {
    let encoder = match &config.model {
        Model::Bpe(model) => AnyEncoder::Bpe(Encoder::new(model, &config.allowed_special)?),
        Model::Word(model) => {
            if config.allowed_special != AllowedSpecial::None {
                return Err(Error::usage("--allowed-special applies to BPE models only"));
            }
            AnyEncoder::Word(crate::word::WordEncoder::new(model))
        }
    };
    let unk = match &config.model {
        Model::Word(model) => Some(model.unk_id),
        Model::Bpe(_) => None,
    };
    let mut stats = EncodeStats {
        unknown: unk.map(|_| 0),
        ..EncodeStats::default()
    };
    if config.header && !config.count {
        let mut line = modelfile::stream_header(config.model.source());
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(write_err)?;
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut emit = |ids: &[u32], bytes: usize, stats: &mut EncodeStats, last: bool| -> Result<()> {
        stats.records += 1;
        stats.tokens += ids.len() as u64;
        stats.bytes += bytes as u64;
        if let (Some(unk), Some(n)) = (unk, stats.unknown.as_mut()) {
            *n += ids.iter().filter(|&&id| id == unk).count() as u64;
        }
        if config.count {
            if !config.whole {
                ndjson::push_u32(&mut buf, ids.len() as u32);
                buf.push(b'\n');
            }
        } else {
            ndjson::push_ids(&mut buf, ids);
            buf.push(b'\n');
        }
        if buf.len() >= 1 << 16 || last {
            out.write_all(&buf).map_err(write_err)?;
            buf.clear();
        }
        Ok(())
    };

    if config.whole {
        let text = input::read_all(sources, config.no_mmap)?;
        let mut ids = Vec::new();
        match &encoder {
            AnyEncoder::Bpe(enc) => enc.encode_whole_parallel(&text, config.threads, &mut ids),
            AnyEncoder::Word(enc) => {
                enc.encode(&text, &mut ids);
            }
        }
        emit(&ids, text.len(), &mut stats, true)?;
        if config.count {
            out.write_all(format!("{}\n", ids.len()).as_bytes())
                .map_err(write_err)?;
        }
        return Ok(stats);
    }

    // Records are encoded in batches so that threads share the work while memory
    // stays bounded by the batch, whatever the input size.
    const BATCH_BYTES: usize = 1 << 20;
    const BATCH_RECORDS: usize = 4096;
    let mut arena: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
    let mut ends: Vec<usize> = Vec::with_capacity(BATCH_RECORDS);
    let mut flush_batch =
        |arena: &mut Vec<u8>, ends: &mut Vec<usize>, stats: &mut EncodeStats| -> Result<()> {
            let mut records: Vec<&[u8]> = Vec::with_capacity(ends.len());
            let mut start = 0;
            for &end in ends.iter() {
                records.push(&arena[start..end]);
                start = end;
            }
            let encoded = encoder.batch(&records, config.threads);
            for (ids, record) in encoded.iter().zip(&records) {
                emit(ids, record.len(), stats, false)?;
            }
            arena.clear();
            ends.clear();
            Ok(())
        };
    input::for_each_line(sources, config.no_mmap, &mut |_, _, line| {
        arena.extend_from_slice(line);
        ends.push(arena.len());
        if arena.len() >= BATCH_BYTES || ends.len() >= BATCH_RECORDS {
            flush_batch(&mut arena, &mut ends, &mut stats)?;
        }
        Ok(())
    })?;
    flush_batch(&mut arena, &mut ends, &mut stats)?;
    emit_flush(out, &mut buf)?;
    Ok(stats)
}

fn emit_flush(out: &mut dyn Write, buf: &mut Vec<u8>) -> Result<()> {
    out.write_all(buf).map_err(write_err)?;
    buf.clear();
    Ok(())
}

/// What `bpe-decode` was asked to do.
pub struct DecodeConfig {
    /// `-m MODEL`, if given: every header in the stream must name this model.
    pub model: Option<Model>,
    /// `--whole`: write bytes only, no newline after each record.
    pub whole: bool,
    /// Read files without memory-mapping them.
    pub no_mmap: bool,
}

/// Decodes id streams from `sources` to `out`. Header lines select the model of the
/// records after them (or, with `-m`, must name it); without either, `o200k_base`.
pub fn decode(config: DecodeConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let fixed = config.model.is_some();
    let mut current: Option<Model> = config.model;
    let mut ids = Vec::new();
    let mut bytes = Vec::with_capacity(1 << 16);
    input::for_each_line(sources, config.no_mmap, &mut |file, line_no, line| {
        if ndjson::is_header(line) {
            let header =
                ndjson::parse_header(line).map_err(|e| Error::data(e).at_line(file, line_no))?;
            let named = modelfile::parse_stream_header(&header)
                .map_err(|e| Error::data(e).at_line(file, line_no))?;
            if fixed {
                let model = current.as_ref().map(Model::source);
                if let Some(source) = model {
                    if !modelfile::same_model(source, &named) {
                        return Err(Error::data(format!(
                            "the stream was encoded with model {} but -m gives another model",
                            describe(&named)
                        ))
                        .at_line(file, line_no));
                    }
                }
            } else {
                let reuse =
                    matches!(&current, Some(m) if modelfile::same_model(m.source(), &named));
                if !reuse {
                    current = Some(load_named(&named).map_err(|e| e.at_line(file, line_no))?);
                }
            }
            return Ok(());
        }
        ndjson::parse_ids_into(line, &mut ids)
            .map_err(|e| Error::data(e).at_line(file, line_no))?;
        if current.is_none() {
            current = Some(modelfile::load(modelfile::DEFAULT_MODEL, None)?);
        }
        let model = current.as_ref().expect("model chosen above");
        bytes.clear();
        if let Err(id) = decode_ids(model, &ids, &mut bytes) {
            return Err(Error::data(format!(
                "id {id} is not in the vocabulary (size {})",
                vocab_size(model)
            ))
            .at_line(file, line_no));
        }
        if !config.whole {
            bytes.push(b'\n');
        }
        out.write_all(&bytes)
            .map_err(|e| Error::io("write failed", e).in_file("<stdout>"))
    })
}

fn describe(named: &StreamModel) -> String {
    match &named.sha256 {
        Some(hash) => format!("{:?} (sha256 {})", named.name, &hash[..hash.len().min(12)]),
        None => format!("{:?}", named.name),
    }
}

/// Loads the model a stream header names: a built-in by name, or the file by path,
/// checked against the header's content hash.
fn load_named(named: &StreamModel) -> Result<Model> {
    let model = modelfile::load(&named.name, None).map_err(|e| {
        Error::data(format!(
            "the stream names model {}, which cannot be loaded ({e}); give it with -m",
            describe(named)
        ))
    })?;
    if !modelfile::same_model(model.source(), named) {
        return Err(Error::data(format!(
            "the stream names model {}, but that file now has other content; give the right model with -m",
            describe(named)
        )));
    }
    Ok(model)
}
