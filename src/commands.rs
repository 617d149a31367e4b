//! The work of `bpe-train`, `bpe-encode` and `bpe-decode`, from a plain config to
//! bytes on a writer: what each binary calls after parsing its flags. Progress and
//! notes reach the binary through callbacks; nothing here prints.

use std::io::Write;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::decode::{decode_ids, vocab_size, DecodeBuf, DecodeTable};
use crate::encode::{AllowedSpecial, Encoder};
use crate::error::{Error, Result};
use crate::input::{self, Source};
use crate::model::{self, Model, SpecialToken, SplitSpec};
use crate::modelfile::{self, StreamModel};
use crate::ndjson;
use crate::parallel::Pool;
use crate::pretokenize::{self, ChunkCounter, ChunkCounts, Splitter};
use crate::train::{self, EngineChoice, Merge};

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
        return crate::word::write_model(out, &model).map_err(Error::write);
    }
    check_specials(&config.specials)?;
    let vocab_size = config.vocab_size.unwrap_or(DEFAULT_VOCAB_SIZE);
    if vocab_size < 256 {
        return Err(Error::usage(format!(
            "--vocab-size {vocab_size} is below 256 (the byte tokens alone)"
        )));
    }
    let wanted = vocab_size - 256;

    let mut tokens = train::TokenBytes::new();
    let mut learned = 0;
    let mut on_merge = |merge: &Merge| {
        learned += 1;
        events(TrainEvent::Merged {
            merge,
            index: learned,
            total: wanted,
            token: tokens.push(merge.pair),
        });
    };
    let merges = match &config.split {
        None => {
            // The seed's algorithm needs the whole sequence in memory.
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
    modelfile::write_bpe(out, config.split.as_ref(), &specials, &pairs, &counts)
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
    /// `--line-buffered`: encode the lines of a stream as soon as they arrive.
    pub line_buffered: bool,
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
    /// Adds the totals of a later part of the input.
    pub fn add(&mut self, other: &EncodeStats) {
        self.records += other.records;
        self.tokens += other.tokens;
        self.bytes += other.bytes;
        if let (Some(n), Some(more)) = (self.unknown.as_mut(), other.unknown) {
            *n += more;
        }
    }

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
    Word(crate::word::WordEncoder<'m>),
}

impl AnyEncoder<'_> {
    /// Appends each record's ids to `ids` and the end of its ids to `ends`; returns the
    /// number of unknown words (word models; 0 for BPE).
    fn encode_records(&self, records: &[&[u8]], ids: &mut Vec<u32>, ends: &mut Vec<usize>) -> u64 {
        match self {
            AnyEncoder::Bpe(enc) => {
                enc.encode_records(records, ids, ends);
                0
            }
            AnyEncoder::Word(enc) => enc.encode_records(records, ids, ends),
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
    let header = (config.header && !config.count).then(|| {
        let mut line = modelfile::stream_header(config.model.source()).into_bytes();
        line.push(b'\n');
        line
    });
    let mut out = HeaderFirst { out, header };
    let stats = encode_to(config, &encoder, unk, sources, &mut out)?;
    out.write_header().map_err(Error::write)?;
    Ok(stats)
}

/// Writes an id stream's header line just before the stream's first bytes (or at its
/// end, when it has no records): a run that fails before its first record, on a FILE
/// that cannot be opened or read, writes nothing at all, as `cat` would.
struct HeaderFirst<'w> {
    out: &'w mut dyn Write,
    header: Option<Vec<u8>>,
}

impl HeaderFirst<'_> {
    fn write_header(&mut self) -> std::io::Result<()> {
        match self.header.take() {
            Some(line) => self.out.write_all(&line),
            None => Ok(()),
        }
    }
}

impl Write for HeaderFirst<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_header()?;
        self.out.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.write_header()?;
        self.out.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// [`encode`] after its set-up: the records of `sources` to `out`.
fn encode_to(
    config: &EncodeConfig,
    encoder: &AnyEncoder,
    unk: Option<u32>,
    sources: &[Source],
    out: &mut dyn Write,
) -> Result<EncodeStats> {
    let mut stats = EncodeStats {
        unknown: unk.map(|_| 0),
        ..EncodeStats::default()
    };
    let mut buf = Vec::with_capacity(1 << 16);
    if config.whole {
        // One record, written as the ids arrive: memory for ids stays bounded.
        let text = input::read_all(sources, config.no_mmap)?;
        let mut first = true;
        let mut sink = |ids: &[u32]| -> Result<()> {
            stats.tokens += ids.len() as u64;
            if let (Some(unk), Some(n)) = (unk, stats.unknown.as_mut()) {
                *n += ids.iter().filter(|&&id| id == unk).count() as u64;
            }
            if config.count {
                return Ok(());
            }
            for &id in ids {
                buf.push(if first { b'[' } else { b',' });
                first = false;
                ndjson::push_u32(&mut buf, id);
            }
            if buf.len() >= 1 << 16 {
                out.write_all(&buf).map_err(Error::write)?;
                buf.clear();
            }
            Ok(())
        };
        match encoder {
            AnyEncoder::Bpe(enc) => enc.encode_whole_streaming(&text, config.threads, &mut sink)?,
            AnyEncoder::Word(enc) => {
                // Words never span an ASCII space or newline, so pieces cut after one
                // encode to the same ids: spread over the threads, written in order.
                let pieces = Cuts {
                    text: &text,
                    pos: 0,
                    target: ENCODE_ITEM,
                    after: (b' ', b'\n'),
                };
                let pool: Pool<Vec<u32>> = Pool::default();
                let work = |piece: &[u8]| {
                    let mut ids = pool.take();
                    ids.clear();
                    enc.encode(piece, &mut ids);
                    ids
                };
                let mut write = |ids: Vec<u32>| {
                    let written = sink(&ids);
                    pool.put(ids);
                    written
                };
                if config.threads < 2 || text.len() < 2 * ENCODE_ITEM {
                    for piece in pieces {
                        write(work(piece))?;
                    }
                } else {
                    let failed = crate::parallel::ordered(
                        config.threads,
                        2 * config.threads + 2,
                        pieces,
                        work,
                        |ids| match write(ids) {
                            Ok(()) => ControlFlow::Continue(()),
                            Err(e) => ControlFlow::Break(e),
                        },
                    );
                    failed.map_or(Ok(()), Err)?;
                }
            }
        }
        if config.count {
            buf.extend_from_slice(format!("{}\n", stats.tokens).as_bytes());
        } else {
            buf.extend_from_slice(if first { b"[]\n" } else { b"]\n" });
        }
        stats.records = 1;
        stats.bytes = text.len() as u64;
        emit_flush(out, &mut buf)?;
        return Ok(stats);
    }

    // Line mode: items of whole lines encoded and formatted on the threads, written in
    // order by this thread (see `encode_run`).
    let format = ItemFormat {
        unk,
        count: config.count,
    };
    let pool = Pool::default();
    let eager = config.line_buffered;
    input::for_each_line_run(
        sources,
        config.no_mmap,
        ENCODE_RUN,
        eager,
        &mut |_, _, run| encode_run(encoder, format, config.threads, &pool, run, &mut stats, out),
    )?;
    Ok(stats)
}

/// Line-mode input is cut into items of about this many bytes of whole lines (a longer
/// line is an item of its own).
const ENCODE_ITEM: usize = 1 << 18;
/// From a stream, runs of about this many bytes of whole lines are read at a time.
const ENCODE_RUN: usize = 1 << 22;

/// How an item's records are written.
#[derive(Clone, Copy)]
struct ItemFormat {
    /// `[UNK]`'s id, counted for `--stats` (word models).
    unk: Option<u32>,
    /// `--count`: token counts instead of ids.
    count: bool,
}

/// An item's output and totals, and the working memory that made them (returned to
/// the pool once written).
#[derive(Default)]
struct EncodedItem {
    out: Vec<u8>,
    stats: EncodeStats,
    ids: Vec<u32>,
    ends: Vec<usize>,
}

/// Encodes one run of whole lines: items cut from it are encoded and formatted on the
/// threads while this thread writes the finished ones in order. Before, each batch of
/// lines was copied, encoded by threads started for it, then formatted and written by
/// this thread while the threads waited: a second thread gained a third at most.
fn encode_run(
    encoder: &AnyEncoder,
    format: ItemFormat,
    threads: usize,
    pool: &Pool<EncodedItem>,
    run: &[u8],
    stats: &mut EncodeStats,
    out: &mut dyn Write,
) -> Result<()> {
    let items = Cuts {
        text: run,
        pos: 0,
        target: ENCODE_ITEM,
        after: (b'\n', b'\n'),
    };
    let work = |item: &[u8]| encode_item(encoder, format, pool.take(), item);
    let mut write = |done: EncodedItem| -> Result<()> {
        stats.add(&done.stats);
        let written = out.write_all(&done.out).map_err(Error::write);
        pool.put(done);
        written
    };
    if threads < 2 || run.len() < 2 * ENCODE_ITEM {
        for item in items {
            write(work(item))?;
        }
        return Ok(());
    }
    let failed =
        crate::parallel::ordered(threads, 2 * threads + 2, items, work, |done| {
            match write(done) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => ControlFlow::Break(e),
            }
        });
    failed.map_or(Ok(()), Err)
}

/// The records (lines) of `text` encoded and formatted, in `memory`'s buffers.
fn encode_item(
    encoder: &AnyEncoder,
    format: ItemFormat,
    memory: EncodedItem,
    text: &[u8],
) -> EncodedItem {
    let EncodedItem {
        mut out,
        mut ids,
        mut ends,
        ..
    } = memory;
    out.clear();
    ids.clear();
    ends.clear();
    let records: Vec<&[u8]> = input::Lines::new(text).collect();
    let unknown = encoder.encode_records(&records, &mut ids, &mut ends);
    let stats = EncodeStats {
        records: records.len() as u64,
        tokens: ids.len() as u64,
        bytes: records.iter().map(|r| r.len() as u64).sum(),
        unknown: format.unk.map(|_| unknown),
    };
    let mut start = 0;
    for &end in &ends {
        if format.count {
            ndjson::push_u32(&mut out, (end - start) as u32);
        } else {
            ndjson::push_ids(&mut out, &ids[start..end]);
        }
        out.push(b'\n');
        start = end;
    }
    EncodedItem {
        out,
        stats,
        ids,
        ends,
    }
}

/// Cuts text into pieces of about `target` bytes, each ending just after one of the
/// two bytes `after` (or at the end of the text): with `(b'\n', b'\n')`, whole lines
/// (a longer line is a piece of its own).
struct Cuts<'t> {
    text: &'t [u8],
    pos: usize,
    target: usize,
    after: (u8, u8),
}

impl<'t> Iterator for Cuts<'t> {
    type Item = &'t [u8];
    fn next(&mut self) -> Option<&'t [u8]> {
        let (text, start) = (self.text, self.pos);
        if start >= text.len() {
            return None;
        }
        let target = start + self.target;
        let (a, b) = self.after;
        self.pos = if target >= text.len() {
            text.len()
        } else {
            memchr::memchr2(a, b, &text[target..]).map_or(text.len(), |k| target + k + 1)
        };
        Some(&text[start..self.pos])
    }
}

fn emit_flush(out: &mut dyn Write, buf: &mut Vec<u8>) -> Result<()> {
    out.write_all(buf).map_err(Error::write)?;
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
    /// Worker threads (at least 1).
    pub threads: usize,
    /// `--line-buffered`: decode the lines of a stream as soon as they arrive.
    pub line_buffered: bool,
}

/// A stream (not a mapped file) is handed to the decoder in runs of about this many
/// bytes of whole lines.
const DECODE_RUN: usize = 1 << 22;
/// The threads take the input in items of about this many bytes: whole lines, or the
/// pieces of a longer line cut between ids.
const DECODE_ITEM: usize = 1 << 18;
/// Runs shorter than this are decoded on one thread (threads would cost more).
const DECODE_PARALLEL_MIN: usize = 1 << 18;

/// Decodes id streams from `sources` to `out`. Header lines select the model of the
/// records after them (or, with `-m`, must name it); without either, `o200k_base`.
///
/// The input is cut into items (about [`DECODE_ITEM`] bytes of whole lines, or the
/// pieces of a longer line cut between ids), decoded on the threads by the fast path
/// ([`DecodeTable::decode_lines`]) and written in order by this thread while the
/// threads decode the next ones. An item the fast path refuses is read again one line
/// at a time by the general parser, which reads what is valid JSON and names the line
/// of what is not, after everything before it is written.
///
/// Performance notes (27 MB of text from 558,607 records of a 32k model, 2 cores, output
/// to a file; best of several runs): 0.08-0.11 s wall, 0.15 s CPU before this design, when
/// each 4 MB run was cut into one part per thread, the parts decoded, then written while
/// the threads waited, and the run was searched for `{` (headers) and its lines counted
/// in separate passes: the second thread gained nothing and doubled the CPU time. With
/// this design the threads' CPU time adds up to about one thread's (`-j 1`: 70 ms). A
/// mapped file is one run, so the threads are never drained in the middle. What did not
/// measurably help (on a machine busy with other work): a thread mapping the input's
/// pages while the header's model loads.
///
/// The pieces of a long line (`--whole`) are written as they are decoded, so memory
/// stays bounded by the items; an error inside such a record comes after its bytes
/// before the bad piece. (Holding the record until its end, as before, cost a 100 MB
/// record 270 MB of memory and ~0.1 s of page faults.)
pub fn decode(config: DecodeConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let mut decoder = StreamDecoder {
        fixed: config.model.is_some(),
        current: config.model,
        table: None,
        generation: 0,
        whole: config.whole,
        threads: config.threads.max(1),
        ids: Vec::new(),
        bytes: DecodeBuf::default(),
        slow: Vec::new(),
        free: Vec::new(),
    };
    input::for_each_line_run(
        sources,
        config.no_mmap,
        DECODE_RUN,
        config.line_buffered,
        &mut |file, first, run| decoder.run(file, first, run, out),
    )
}

/// The state of `bpe-decode` along its input.
struct StreamDecoder {
    fixed: bool,
    current: Option<Model>,
    /// The fast table of `current`, built on first use.
    table: Option<Arc<DecodeTable>>,
    /// Counts the changes of model (headers naming another one).
    generation: u64,
    whole: bool,
    threads: usize,
    ids: Vec<u32>,
    bytes: DecodeBuf,
    /// The general parser's output.
    slow: Vec<u8>,
    /// Output buffers of the items, kept to reuse their memory.
    free: Vec<DecodeBuf>,
}

/// A part of a run handed to a thread: `text[start..end]`.
#[derive(Clone, Copy)]
struct Item {
    start: usize,
    end: usize,
    /// `None`: whole lines. `Some`: a piece of a long line's ids.
    piece: Option<Piece>,
}

/// Where a piece of a long line is: the line starts at `line_start` (its `[`); the
/// `last` piece knows where it ends (after its `\n`), and whether it ends in `]` at
/// all (`shaped`). A line the cutter took for one long line may hold several (a `\n`
/// inside a piece); the fast path refuses those pieces, and the general parser reads
/// `text[line_start..line_end]` line by line.
#[derive(Clone, Copy)]
struct Piece {
    line_start: usize,
    line_end: usize,
    last: bool,
    shaped: bool,
}

/// Cuts a run into [`Item`]s, in order, reading each byte about once (a long line is
/// cut as it is read, not searched for its end first: that search of a 35 MB
/// `--whole` record took ~5 ms before any thread could start).
struct Cutter<'t> {
    text: &'t [u8],
    pos: usize,
    /// The start of the long line being cut.
    long: Option<usize>,
}

impl Iterator for Cutter<'_> {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        let text = self.text;
        let start = self.pos;
        if let Some(line_start) = self.long {
            // The piece ends after the first comma past its target size, or where the
            // line ends.
            // (The last piece of a long line ends with less than an item's bytes: its
            // `\n` is searched for from its start. Elsewhere a `\n` before the target size
            // is not looked for, which would read every piece twice: the thread that
            // decodes the piece finds it, see `Decoded::line_ended`.)
            let target = start + DECODE_ITEM;
            let found = if target >= text.len() {
                memchr::memchr(b'\n', &text[start..]).map(|k| start + k)
            } else {
                memchr::memchr2(b',', b'\n', &text[target..]).map(|k| target + k)
            };
            if let Some(comma) = found.filter(|&p| text[p] == b',') {
                self.pos = comma + 1;
                return Some(Item {
                    start,
                    end: comma + 1,
                    piece: Some(Piece {
                        line_start,
                        line_end: 0,
                        last: false,
                        shaped: true,
                    }),
                });
            }
            let body_end = found.unwrap_or(text.len());
            let line_end = found.map_or(text.len(), |p| p + 1);
            let shaped = body_end > start && text[body_end - 1] == b']';
            self.long = None;
            self.pos = line_end;
            return Some(Item {
                start,
                end: if shaped { body_end - 1 } else { body_end },
                piece: Some(Piece {
                    line_start,
                    line_end,
                    last: true,
                    shaped,
                }),
            });
        }
        if start >= text.len() {
            return None;
        }
        let lines = |end: usize| Item {
            start,
            end,
            piece: None,
        };
        let target = start + DECODE_ITEM;
        if target >= text.len() {
            self.pos = text.len();
            return Some(lines(text.len()));
        }
        let window = (target + 3 * DECODE_ITEM).min(text.len());
        if let Some(k) = memchr::memchr(b'\n', &text[target..window]) {
            self.pos = target + k + 1;
            return Some(lines(self.pos));
        }
        if window == text.len() {
            self.pos = window;
            return Some(lines(window));
        }
        // A long line: the lines before it make one item, then it is cut into pieces
        // between ids (when it starts as a record at all).
        let line_start =
            memchr::memrchr(b'\n', &text[start..target]).map_or(start, |k| start + k + 1);
        if line_start > start {
            self.pos = line_start;
            return Some(lines(line_start));
        }
        if text[start] == b'[' {
            self.long = Some(start);
            self.pos = start + 1;
            return self.next();
        }
        self.pos = memchr::memchr(b'\n', &text[window..]).map_or(text.len(), |k| window + k + 1);
        Some(lines(self.pos))
    }
}

/// What a thread made of an item: the item's output in `buf` and, for whole lines, the
/// number of lines; `ok` false when the fast path refused it.
struct Decoded {
    item: Item,
    ok: bool,
    lines: u64,
    buf: DecodeBuf,
    /// A piece found its line's end (the cutter had not): the items after it were cut
    /// as more of the line, and the writer starts again after the line.
    line_ended: bool,
}

/// Where the writer stopped: the end of the input, or a header that changed the model
/// (the items after it, decoded with the old table, must be decoded again), or the end
/// of a long line the cutter did not see (the items after it were cut wrongly).
enum Stop {
    Done,
    Restart { pos: usize, line: u64 },
}

/// The writer's state along the items of one run.
struct Writing<'t> {
    file: &'t str,
    text: &'t [u8],
    /// The number of the next line to write.
    line: u64,
    /// The bytes written of the long line being decoded, and whether a piece of it was
    /// refused (the pieces after that one are not written).
    streamed: usize,
    refused: bool,
    /// Output buffers to reuse.
    free: &'t Pool<DecodeBuf>,
}

impl StreamDecoder {
    /// The current model and its table (o200k_base when no header has named one).
    fn table(&mut self) -> Result<&Arc<DecodeTable>> {
        if self.current.is_none() {
            self.current = Some(modelfile::load(modelfile::DEFAULT_MODEL, None)?);
        }
        let model = self.current.as_ref().expect("model chosen above");
        Ok(self
            .table
            .get_or_insert_with(|| Arc::new(DecodeTable::new(model))))
    }

    /// One run of whole lines, the first being line `first_line`.
    fn run(&mut self, file: &str, first_line: u64, text: &[u8], out: &mut dyn Write) -> Result<()> {
        let mut pos = 0;
        let mut line = first_line;
        loop {
            // Leading headers first, so that the items are decoded with their model.
            // (A short look first: finding the end of a 35 MB `--whole` record to see
            // that it is not a header took ~3 ms.)
            while ndjson::is_header(&text[pos..text.len().min(pos + 64)]) {
                let Some(header) = input::Lines::new(&text[pos..]).next() else {
                    break;
                };
                if !ndjson::is_header(header) {
                    break;
                }
                self.line(file, line, header, out)?;
                pos = (pos + header.len() + 1).min(text.len());
                line += 1;
            }
            if pos >= text.len() {
                return Ok(());
            }
            let rest = &text[pos..];
            let stop = self.items(file, line, rest, out)?;
            match stop {
                Stop::Done => return Ok(()),
                Stop::Restart {
                    pos: next,
                    line: next_line,
                } => {
                    pos += next;
                    line = next_line;
                }
            }
        }
    }

    /// The items of `text` decoded and written in order: on the threads, at most
    /// `2 * threads + 2` of them decoded ahead of the writing, or one after the other on
    /// this thread for one thread or a short text.
    fn items(&mut self, file: &str, line: u64, text: &[u8], out: &mut dyn Write) -> Result<Stop> {
        let table = Arc::clone(self.table()?);
        let generation = self.generation;
        let threads = self.threads;
        let whole = self.whole;
        let free = Pool::from(std::mem::take(&mut self.free));
        let mut cutter = Cutter {
            text,
            pos: 0,
            long: None,
        };
        let mut writing = Writing {
            file,
            text,
            line,
            streamed: 0,
            refused: false,
            free: &free,
        };
        let decode = |item| decode_item(&table, whole, &free, text, item);
        let mut write = |decoded| match self.write_item(&mut writing, decoded, generation, out) {
            Ok(None) => ControlFlow::Continue(()),
            Ok(Some(stop)) => ControlFlow::Break(Ok(stop)),
            Err(e) => ControlFlow::Break(Err(e)),
        };
        let stopped = if threads < 2 || text.len() < DECODE_PARALLEL_MIN {
            cutter.find_map(|item| write(decode(item)).break_value())
        } else {
            crate::parallel::ordered(threads, 2 * threads + 2, cutter, decode, write)
        };
        self.free = free.into_inner();
        stopped.unwrap_or(Ok(Stop::Done))
    }

    /// Writes one decoded item (the next in order), or reads it again line by line when
    /// the fast path refused it; `Some` when the writing must stop here.
    fn write_item(
        &mut self,
        writing: &mut Writing,
        decoded: Decoded,
        generation: u64,
        out: &mut dyn Write,
    ) -> Result<Option<Stop>> {
        let Decoded {
            item,
            ok,
            lines,
            buf,
            line_ended,
            ..
        } = decoded;
        let (file, text) = (writing.file, writing.text);
        let slow_end = match item.piece {
            None if ok => {
                out.write_all(buf.as_slice()).map_err(Error::write)?;
                writing.free.put(buf);
                writing.line += lines;
                return Ok(None);
            }
            None => {
                writing.free.put(buf);
                self.lines(file, writing.line, &text[item.start..item.end], out)?;
                writing.line +=
                    memchr::memchr_iter(b'\n', &text[item.start..item.end]).count() as u64;
                item.end
            }
            Some(Piece {
                line_start,
                line_end,
                last,
                ..
            }) => {
                // Accepted pieces are written at once: memory stays bounded (holding a
                // 100 MB record's bytes cost as much in fresh pages as decoding them).
                if ok && !writing.refused {
                    out.write_all(buf.as_slice()).map_err(Error::write)?;
                    writing.streamed += buf.as_slice().len();
                } else {
                    writing.refused = true;
                }
                writing.free.put(buf);
                if !last {
                    return Ok(None);
                }
                let refused = std::mem::replace(&mut writing.refused, false);
                let streamed = std::mem::take(&mut writing.streamed);
                if !refused {
                    if !self.whole {
                        out.write_all(b"\n").map_err(Error::write)?;
                    }
                    writing.line += 1;
                    return Ok(line_ended.then_some(Stop::Restart {
                        pos: line_end,
                        line: writing.line,
                    }));
                }
                // The general reader gives the same bytes for the pieces written.
                let span = &text[line_start..line_end];
                let mut rest = SkipFirst {
                    out,
                    skip: streamed,
                };
                self.lines(file, writing.line, span, &mut rest)?;
                writing.line += memchr::memchr_iter(b'\n', span).count() as u64;
                line_end
            }
        };
        Ok((self.generation != generation).then_some(Stop::Restart {
            pos: slow_end,
            line: writing.line,
        }))
    }

    /// One line: a header, or a record decoded and written.
    fn line(&mut self, file: &str, line_no: u64, line: &[u8], out: &mut dyn Write) -> Result<()> {
        if ndjson::is_header(line) {
            return self.header(file, line_no, line);
        }
        let whole = self.whole;
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        let result = self.record(file, line_no, line, &mut bytes).and_then(|()| {
            if !whole {
                bytes.push(b'\n');
            }
            out.write_all(bytes.as_slice()).map_err(Error::write)
        });
        self.bytes = bytes;
        result
    }

    /// Appends the bytes of one record: the fast path, else the general parser.
    fn record(
        &mut self,
        file: &str,
        line_no: u64,
        line: &[u8],
        bytes: &mut DecodeBuf,
    ) -> Result<()> {
        if self.table()?.decode_record(line, bytes) {
            return Ok(());
        }
        ndjson::parse_ids_into(line, &mut self.ids)
            .map_err(|e| Error::data(e).at_line(file, line_no))?;
        let model = self.current.as_ref().expect("table() loaded a model");
        self.slow.clear();
        if let Err(id) = decode_ids(model, &self.ids, &mut self.slow) {
            return Err(Error::data(format!(
                "id {id} is not in the vocabulary (size {})",
                vocab_size(model)
            ))
            .at_line(file, line_no));
        }
        bytes.extend_from_slice(&self.slow);
        Ok(())
    }

    fn header(&mut self, file: &str, line_no: u64, line: &[u8]) -> Result<()> {
        let header =
            ndjson::parse_header(line).map_err(|e| Error::data(e).at_line(file, line_no))?;
        let named = modelfile::parse_stream_header(&header)
            .map_err(|e| Error::data(e).at_line(file, line_no))?;
        if self.fixed {
            if let Some(model) = &self.current {
                if !modelfile::same_model(model.source(), &named) {
                    return Err(Error::data(format!(
                        "the stream was encoded with model {} but -m gives another model",
                        describe(&named)
                    ))
                    .at_line(file, line_no));
                }
            }
        } else {
            let reuse =
                matches!(&self.current, Some(m) if modelfile::same_model(m.source(), &named));
            if !reuse {
                self.current = Some(load_named(&named).map_err(|e| e.at_line(file, line_no))?);
                self.table = None;
                self.generation += 1;
            }
        }
        Ok(())
    }

    /// Lines one at a time, the first being line `first_line`.
    fn lines(
        &mut self,
        file: &str,
        first_line: u64,
        text: &[u8],
        out: &mut dyn Write,
    ) -> Result<()> {
        for (line_no, line) in (first_line..).zip(input::Lines::new(text)) {
            self.line(file, line_no, line, out)?;
        }
        Ok(())
    }
}

/// Decodes one item by the fast path.
fn decode_item(
    table: &DecodeTable,
    whole: bool,
    free: &Pool<DecodeBuf>,
    text: &[u8],
    item: Item,
) -> Decoded {
    let mut buf = free.take();
    buf.clear();
    let mut item = item;
    let part = &text[item.start..item.end];
    let mut line_ended = false;
    let (ok, lines) = match item.piece {
        None => match table.decode_lines(part, !whole, &mut buf) {
            Some(lines) => (true, lines),
            None => (false, 0),
        },
        Some(mut piece) => {
            let mut ok = piece.shaped && table.decode_piece(part, piece.last, &mut buf);
            if !ok && !piece.last {
                // The line may end in this piece (`...,7]\n[1,2...`): then the piece up
                // to its `]` is the line's last.
                if let Some(q) = memchr::memchr(b'\n', part).filter(|&q| q > 0) {
                    buf.clear();
                    if part[q - 1] == b']' && table.decode_piece(&part[..q - 1], true, &mut buf) {
                        ok = true;
                        line_ended = true;
                        piece.last = true;
                        piece.line_end = item.start + q + 1;
                        item.piece = Some(piece);
                    }
                }
            }
            (ok, 0)
        }
    };
    Decoded {
        item,
        ok,
        lines,
        buf,
        line_ended,
    }
}

/// Passes writes on to `out` except for their first `skip` bytes.
struct SkipFirst<'w> {
    out: &'w mut dyn Write,
    skip: usize,
}

impl Write for SkipFirst<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let skipped = self.skip.min(buf.len());
        self.skip -= skipped;
        self.out.write_all(&buf[skipped..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
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
