//! The work of `bpe-train`, `bpe-encode` and `bpe-decode`, from a plain config to
//! bytes on a writer: what each binary calls after parsing its flags. Progress and
//! notes reach the binary through callbacks; nothing here prints.

use std::io::Write;

use crate::decode::{decode_ids, vocab_size, DecodeBuf, DecodeTable};
use crate::encode::{encode_blocks, AllowedSpecial, Encoder, IdBlock};
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
            check_train_len(text.len())?;
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
            check_train_len(counts.iter().map(|(c, _)| c.len() + 1).sum())?;
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
    Word(crate::word::WordEncoder<'m>),
}

impl AnyEncoder<'_> {
    fn batch(&self, records: &[&[u8]], threads: usize) -> Vec<IdBlock> {
        match self {
            AnyEncoder::Bpe(enc) => encode_blocks(enc, records, threads),
            AnyEncoder::Word(enc) => {
                let encode_all = |part: &[&[u8]]| -> IdBlock {
                    let mut block = IdBlock::default();
                    enc.encode_records(part, &mut block.ids, &mut block.ends);
                    block
                };
                if threads < 2 || records.len() < 64 {
                    return vec![encode_all(records)];
                }
                let per = records.len().div_ceil(threads);
                std::thread::scope(|scope| {
                    let parts: Vec<_> = records
                        .chunks(per)
                        .map(|part| scope.spawn(move || encode_all(part)))
                        .collect();
                    parts
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
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
                out.write_all(&buf).map_err(write_err)?;
                buf.clear();
            }
            Ok(())
        };
        match &encoder {
            AnyEncoder::Bpe(enc) => enc.encode_whole_streaming(&text, config.threads, &mut sink)?,
            AnyEncoder::Word(enc) => {
                let mut ids = Vec::new();
                enc.encode(&text, &mut ids);
                sink(&ids)?;
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

    // Records are encoded in batches so that threads share the work while memory
    // stays bounded by the batch, whatever the input size.
    let mut emit = |ids: &[u32], bytes: usize, stats: &mut EncodeStats| -> Result<()> {
        stats.records += 1;
        stats.tokens += ids.len() as u64;
        stats.bytes += bytes as u64;
        if let (Some(unk), Some(n)) = (unk, stats.unknown.as_mut()) {
            *n += ids.iter().filter(|&&id| id == unk).count() as u64;
        }
        if config.count {
            ndjson::push_u32(&mut buf, ids.len() as u32);
        } else {
            ndjson::push_ids(&mut buf, ids);
        }
        buf.push(b'\n');
        if buf.len() >= 1 << 16 {
            out.write_all(&buf).map_err(write_err)?;
            buf.clear();
        }
        Ok(())
    };
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
            let blocks = encoder.batch(&records, config.threads);
            let encoded = blocks.iter().flat_map(IdBlock::records);
            for (ids, record) in encoded.zip(&records) {
                emit(ids, record.len(), stats)?;
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
    /// Worker threads (at least 1).
    pub threads: usize,
}

/// Input is handed to the decoder in runs of about this many bytes of whole lines.
const DECODE_RUN: usize = 1 << 22;
/// Runs shorter than this are decoded on one thread (threads would cost more).
const DECODE_PARALLEL_MIN: usize = 1 << 18;

/// Decodes id streams from `sources` to `out`. Header lines select the model of the
/// records after them (or, with `-m`, must name it); without either, `o200k_base`.
///
/// Lines up to the last header of a run are decoded one by one; the rest of the run
/// (records only) is cut at line ends and decoded on all threads, each record by
/// [`DecodeTable::decode_record`]. A part that meets a record the fast path refuses is
/// finished one record at a time by the general parser, which reads what is valid
/// JSON and names the line of what is not, after everything before it is written.
pub fn decode(config: DecodeConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let mut decoder = StreamDecoder {
        fixed: config.model.is_some(),
        current: config.model,
        table: None,
        whole: config.whole,
        threads: config.threads.max(1),
        ids: Vec::new(),
        bytes: DecodeBuf::default(),
        slow: Vec::new(),
        parts: Vec::new(),
        pieces: Vec::new(),
    };
    input::for_each_line_run(
        sources,
        config.no_mmap,
        DECODE_RUN,
        &mut |file, first, run| {
            let records_from = match memchr::memrchr(b'{', run) {
                Some(p) => memchr::memchr(b'\n', &run[p..]).map_or(run.len(), |k| p + k + 1),
                None => 0,
            };
            let headed = &run[..records_from];
            decoder.lines(file, first, headed, out)?;
            let line_no = first + memchr::memchr_iter(b'\n', headed).count() as u64;
            decoder.records(file, line_no, &run[records_from..], out)
        },
    )
}

/// The state of `bpe-decode` along its input.
struct StreamDecoder {
    fixed: bool,
    current: Option<Model>,
    /// The fast table of `current`, built on first use.
    table: Option<DecodeTable>,
    whole: bool,
    threads: usize,
    ids: Vec<u32>,
    bytes: DecodeBuf,
    /// The general parser's output.
    slow: Vec<u8>,
    /// Per-part outputs of the parallel path, kept to reuse their memory.
    parts: Vec<(DecodeBuf, Option<usize>)>,
    /// The pieces of one long record, likewise.
    pieces: Vec<DecodeBuf>,
}

impl StreamDecoder {
    /// The current model and its table (o200k_base when no header has named one).
    fn table(&mut self) -> Result<&DecodeTable> {
        if self.current.is_none() {
            self.current = Some(modelfile::load(modelfile::DEFAULT_MODEL, None)?);
        }
        let model = self.current.as_ref().expect("model chosen above");
        Ok(self.table.get_or_insert_with(|| DecodeTable::new(model)))
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
            out.write_all(bytes.as_slice()).map_err(write_err)
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
            }
        }
        Ok(())
    }

    /// Lines that hold no header (`text`, whose first line is `first_line`), on
    /// `threads` threads: one line cut at commas, several lines in parts at line ends.
    fn records(
        &mut self,
        file: &str,
        first_line: u64,
        text: &[u8],
        out: &mut dyn Write,
    ) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        if self.threads < 2 || text.len() < DECODE_PARALLEL_MIN {
            return self.lines(file, first_line, text, out);
        }
        // One long line (a `--whole` stream is one) is cut inside; several lines go in
        // parts, each decoded whole.
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        if memchr::memchr(b'\n', body).is_none() {
            return self.long_record(file, first_line, body, out);
        }
        self.parts_parallel(file, first_line, text, out)
    }

    /// One long record, its ids cut at commas for the threads.
    fn long_record(
        &mut self,
        file: &str,
        line_no: u64,
        line: &[u8],
        out: &mut dyn Write,
    ) -> Result<()> {
        let threads = self.threads;
        let mut pieces = std::mem::take(&mut self.pieces);
        let decoded = self
            .table()?
            .decode_record_parallel(line, threads, &mut pieces);
        let written = decoded.then(|| -> Result<()> {
            for piece in &pieces {
                out.write_all(piece.as_slice()).map_err(write_err)?;
            }
            if !self.whole {
                out.write_all(b"\n").map_err(write_err)?;
            }
            Ok(())
        });
        self.pieces = pieces;
        match written {
            Some(result) => result,
            None => self.line(file, line_no, line, out),
        }
    }

    /// Short records, cut into one part per thread at line ends and decoded in
    /// parallel; each part's output is written in order, and a part whose fast path
    /// stopped is finished by [`line`](Self::line) from the record that stopped it.
    fn parts_parallel(
        &mut self,
        file: &str,
        first_line: u64,
        text: &[u8],
        out: &mut dyn Write,
    ) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let threads = self.threads;
        let whole = self.whole;
        let chunks = crate::decode::cut_after(text, b'\n', threads);
        let mut parts = std::mem::take(&mut self.parts);
        parts.resize_with(chunks.len(), Default::default);
        let table = self.table()?;
        std::thread::scope(|scope| {
            for ((buf, stopped), chunk) in parts.iter_mut().zip(&chunks) {
                scope.spawn(move || {
                    buf.clear();
                    *stopped = None;
                    let mut offset = 0;
                    for line in input::Lines::new(chunk) {
                        if !table.decode_record(line, buf) {
                            *stopped = Some(offset);
                            return;
                        }
                        if !whole {
                            buf.push(b'\n');
                        }
                        offset += line.len() + 1;
                    }
                });
            }
        });
        let result = self.write_parts(file, first_line, &parts, &chunks, out);
        self.parts = parts;
        result
    }

    /// Writes the parts' outputs in order; a part whose fast path stopped is finished
    /// one line at a time from the record that stopped it.
    fn write_parts(
        &mut self,
        file: &str,
        first_line: u64,
        parts: &[(DecodeBuf, Option<usize>)],
        chunks: &[&[u8]],
        out: &mut dyn Write,
    ) -> Result<()> {
        let mut chunk_line = first_line;
        for ((buf, stopped), chunk) in parts.iter().zip(chunks) {
            out.write_all(buf.as_slice()).map_err(write_err)?;
            if let Some(offset) = *stopped {
                let line_no =
                    chunk_line + memchr::memchr_iter(b'\n', &chunk[..offset]).count() as u64;
                self.lines(file, line_no, &chunk[offset..], out)?;
            }
            chunk_line += memchr::memchr_iter(b'\n', chunk).count() as u64;
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
