//! `bpe-encode`'s work, from an [`EncodeConfig`] to ids in the chosen format: the input
//! read as records (lines, JSONL documents with `--field`, or the whole input), encoded
//! on the threads in items, and written in input order — as an id stream (NDJSON, with
//! its header line first) or into a token file ([`crate::format::tokens`]), with the
//! document-boundary ids placed as asked.
//!
//! Invariants: output order is input order whatever the threads; memory is bounded by a
//! few items (and the longest record), never by the input; a record that cannot be read
//! (a JSONL line with no usable field) stops the run with `FILE:LINE` after everything
//! before it is written, or, with `--skip-invalid`, is counted and left out.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;

use crate::cli::Output;
use crate::encode::{AllowedSpecial, Encoder};
use crate::error::{Error, Result};
use crate::format::ids as ndjson;
use crate::format::jsonl::{self, Skipped};
use crate::format::tokens::{self, Format, SinkSpec, TokenSink};
use crate::input::{self, Source};
use crate::model::Model;
use crate::parallel::Pool;

/// What `bpe-encode` was asked to do.
pub struct EncodeConfig {
    pub model: Model,
    /// `--whole`: the entire input is one record.
    pub whole: bool,
    /// `--count`: write token counts instead of ids.
    pub count: bool,
    /// Write the id-stream header line first (NDJSON ids only).
    pub header: bool,
    pub allowed_special: AllowedSpecial,
    pub threads: usize,
    pub no_mmap: bool,
    /// `--line-buffered`: encode the lines of a stream as soon as they arrive.
    pub line_buffered: bool,
    /// `--field NAME`: the input is JSONL, and each line's string member NAME is a record.
    pub field: Option<String>,
    /// `--skip-invalid`: JSONL lines without a usable field are counted and left out.
    pub skip_invalid: bool,
    /// `--format`: the id stream or a token file.
    pub format: Format,
    /// `--eot TOKEN`: an id written after each record.
    pub eot: Option<String>,
    /// `--bos TOKEN`: an id written before each record.
    pub bos: Option<String>,
    /// `--shard-tokens N` (llm.c): files of N tokens each.
    pub shard_tokens: Option<u64>,
    /// `-o`: a FILE, or the PREFIX of a Megatron dataset or of llm.c shards; `None` for
    /// standard output.
    pub output: Option<PathBuf>,
}

/// Totals of an encoding run, for `--stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodeStats {
    records: u64,
    /// Ids written, boundary ids included.
    tokens: u64,
    bytes: u64,
    /// Unknown-word tokens (word models only).
    unknown: Option<u64>,
}

impl EncodeStats {
    /// Adds the totals of a later part of the input.
    fn add(&mut self, other: &EncodeStats) {
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

/// What an encoding run reports.
#[derive(Debug, Clone, Default)]
pub struct EncodeReport {
    pub stats: EncodeStats,
    /// JSONL lines left out by `--skip-invalid`.
    pub skipped: Skipped,
}

enum AnyEncoder<'m> {
    Bpe(Box<Encoder<'m>>),
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

/// The ids placed around each record, and whether an empty record gets them.
#[derive(Debug, Clone, Copy, Default)]
struct Boundaries {
    bos: Option<u32>,
    eot: Option<u32>,
    /// Megatron: a record with no ids stays empty (Megatron's `--append-eod` adds the
    /// end-of-document id to non-empty documents only), so it has no sequence.
    skip_empty: bool,
}

impl Boundaries {
    fn any(self) -> bool {
        self.bos.is_some() || self.eot.is_some()
    }
}

/// Where the ids go.
enum Sink<'o> {
    /// NDJSON: id arrays or counts, formatted on the threads.
    Text(&'o mut dyn Write),
    /// A token file.
    Tokens(&'o mut dyn TokenSink),
}

/// Checks the flags against each other and the model, opens the output, encodes
/// `sources` and returns the totals.
pub fn encode(config: &EncodeConfig, sources: &[Source]) -> Result<EncodeReport> {
    check_flags(config)?;
    let encoder = match &config.model {
        Model::Bpe(model) => {
            AnyEncoder::Bpe(Box::new(Encoder::new(model, &config.allowed_special)?))
        }
        Model::Word(model) => {
            if config.allowed_special != AllowedSpecial::None {
                return Err(Error::usage("--allowed-special applies to BPE models only"));
            }
            AnyEncoder::Word(crate::word::WordEncoder::new(model))
        }
    };
    let resolve = |flag: &str, spec: &Option<String>| {
        spec.as_deref()
            .map(|s| tokens::resolve_token(&config.model, flag, s))
            .transpose()
    };
    let boundaries = Boundaries {
        bos: resolve("--bos", &config.bos)?,
        eot: resolve("--eot", &config.eot)?,
        skip_empty: config.format == Format::Megatron,
    };
    let unk = match &config.model {
        Model::Word(model) => Some(model.unk_id),
        Model::Bpe(_) => None,
    };
    if config.format == Format::Ndjson {
        let mut out = Output::create(config.output.as_deref())?.line_buffered(config.line_buffered);
        let header = (config.header && !config.count).then(|| {
            let mut line = ndjson::stream_header(config.model.source()).into_bytes();
            line.push(b'\n');
            line
        });
        let result = (|| {
            let mut text = HeaderFirst {
                out: &mut out,
                header,
            };
            let report = encode_to(
                config,
                &encoder,
                boundaries,
                unk,
                sources,
                &mut Sink::Text(&mut text),
            )?;
            text.write_header().map_err(Error::write)?;
            Ok(report)
        })();
        return out.finish_with(result);
    }
    let dtype = tokens::write_dtype(
        config.format,
        config.model.vocab_size(),
        &tokens::model_name(&config.model),
    )?;
    let mut sink = tokens::create_sink(&SinkSpec {
        format: config.format,
        dtype,
        output: config.output.as_deref(),
        shard_tokens: config.shard_tokens,
    })?;
    let result = encode_to(
        config,
        &encoder,
        boundaries,
        unk,
        sources,
        &mut Sink::Tokens(sink.as_mut()),
    );
    match result {
        Ok(report) => sink.commit().map(|()| report),
        Err(err) => Err(sink.fail(err)),
    }
}

/// Flags that do not go together are usage errors, before any output is opened.
fn check_flags(config: &EncodeConfig) -> Result<()> {
    let binary = config.format != Format::Ndjson;
    if config.field.is_some() && config.whole {
        return Err(Error::usage(
            "--whole and --field do not go together (with --field each JSONL line is a record)",
        ));
    }
    if config.skip_invalid && config.field.is_none() {
        return Err(Error::usage(
            "--skip-invalid applies to JSONL input (--field NAME)",
        ));
    }
    if config.count && binary {
        return Err(Error::usage(format!(
            "--count writes NDJSON counts; it does not go with --format {}",
            config.format.name()
        )));
    }
    if config.shard_tokens.is_some() && config.format != Format::Llmc {
        return Err(Error::usage("--shard-tokens applies to --format llmc"));
    }
    if config.format == Format::Megatron && config.output.is_none() {
        return Err(Error::usage(
            "--format megatron writes PREFIX.bin and PREFIX.idx: give -o PREFIX",
        ));
    }
    if config.eot.is_some() && config.bos.is_some() {
        return Err(Error::usage(
            "give --eot or --bos, not both (one boundary convention per file)",
        ));
    }
    Ok(())
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

/// [`encode`] after its set-up: the records of `sources` to `sink`.
fn encode_to(
    config: &EncodeConfig,
    encoder: &AnyEncoder,
    boundaries: Boundaries,
    unk: Option<u32>,
    sources: &[Source],
    sink: &mut Sink,
) -> Result<EncodeReport> {
    let mut report = EncodeReport {
        stats: EncodeStats {
            unknown: unk.map(|_| 0),
            ..EncodeStats::default()
        },
        skipped: Skipped::default(),
    };
    if config.whole {
        let mut stats = EncodeStats {
            unknown: unk.map(|_| 0),
            ..EncodeStats::default()
        };
        let mut record = Streamed::new(config, unk, boundaries);
        let mapped = match sources {
            [only] if !config.no_mmap => input::map_source(only)?,
            _ => None,
        };
        match mapped {
            // A mapped file is encoded in place, cut into pieces for the threads.
            Some(text) => {
                encode_part(
                    encoder,
                    &text,
                    true,
                    true,
                    config.threads,
                    &mut record,
                    sink,
                )?;
                stats.bytes = text.len() as u64;
            }
            // Anything else is read in parts of about `WHOLE_PART` bytes, each encoded
            // up to a place where the rest cannot change its ids: memory stays bounded
            // by the part, whatever the input's size.
            None => {
                let mut text = Vec::with_capacity(WHOLE_PART + (1 << 16));
                let (mut first, mut want) = (true, WHOLE_PART);
                for source in sources {
                    let mut stream = input::open_stream(source)?;
                    while input::read_more(&mut stream, &mut text, &source.name)? > 0 {
                        if text.len() < want {
                            continue;
                        }
                        let used = encode_part(
                            encoder,
                            &text,
                            first,
                            false,
                            config.threads,
                            &mut record,
                            sink,
                        )?;
                        if used > 0 {
                            first = false;
                            stats.bytes += used as u64;
                            text.drain(..used);
                            want = WHOLE_PART;
                        } else {
                            // No place to cut yet (one long chunk): read more.
                            want = text.len().saturating_mul(2);
                        }
                    }
                }
                encode_part(
                    encoder,
                    &text,
                    first,
                    true,
                    config.threads,
                    &mut record,
                    sink,
                )?;
                stats.bytes += text.len() as u64;
            }
        }
        record.finish(&mut stats, sink)?;
        record.flush(sink)?;
        report.stats = stats;
        return Ok(report);
    }
    // Records: items of whole lines encoded (and, for NDJSON, formatted) on the threads,
    // written in order by this thread (see `encode_run`).
    let plan = ItemPlan {
        unk,
        count: config.count,
        ndjson: matches!(sink, Sink::Text(_)),
        field: config.field.as_deref(),
        skip_invalid: config.skip_invalid,
        boundaries,
    };
    let pool = Pool::default();
    let eager = config.line_buffered;
    // A line too long to hold, read in parts, is encoded as a `--whole` record is.
    let mut long = Streamed::new(config, unk, boundaries);
    input::for_each_run(
        sources,
        config.no_mmap,
        ENCODE_RUN,
        eager,
        &mut |file, run| match run {
            input::Run::Lines(first_line, lines) => {
                let mut at = RunPlace {
                    file,
                    line: first_line,
                };
                encode_run(
                    encoder,
                    plan,
                    config.threads,
                    &pool,
                    lines,
                    &mut at,
                    &mut report,
                    sink,
                )
                .map(|()| 0)
            }
            // A JSONL line is decoded whole: asking for all of it (0 used) makes the
            // reader hand it over as one last part.
            input::Run::Part {
                line, bytes, last, ..
            } if plan.field.is_some() => {
                if !last {
                    return Ok(0);
                }
                let mut at = RunPlace { file, line };
                encode_run(
                    encoder,
                    plan,
                    config.threads,
                    &pool,
                    bytes,
                    &mut at,
                    &mut report,
                    sink,
                )
                .map(|()| bytes.len())
            }
            input::Run::Part {
                bytes, first, last, ..
            } => {
                let used =
                    encode_part(encoder, bytes, first, last, config.threads, &mut long, sink)?;
                report.stats.bytes += used as u64;
                if last {
                    long.finish(&mut report.stats, sink)?;
                }
                long.flush(sink)?;
                Ok(used)
            }
        },
    )?;
    Ok(report)
}

/// A `--whole` input is read from a stream in parts of about this many bytes.
const WHOLE_PART: usize = 1 << 23;

/// One record written as its ids arrive (`--whole`, or a line read in parts), so that
/// memory for its ids stays bounded: with its boundary ids (`--bos` before the first id,
/// `--eot` after the last) to a token file, or as NDJSON (`[` before the first id, `,`
/// between, `]` and a newline at the end; with `--count`, the number of ids only).
struct Streamed {
    buf: Vec<u8>,
    count: bool,
    unk: Option<u32>,
    boundaries: Boundaries,
    /// Ids of the record so far, boundary ids included.
    written: u64,
    unknown: u64,
}

impl Streamed {
    fn new(config: &EncodeConfig, unk: Option<u32>, boundaries: Boundaries) -> Streamed {
        Streamed {
            buf: Vec::with_capacity(1 << 16),
            count: config.count,
            unk,
            boundaries,
            written: 0,
            unknown: 0,
        }
    }

    /// Takes the next ids of the record (the `--bos` id before the first of them),
    /// writing to `sink` in blocks.
    fn ids(&mut self, ids: &[u32], sink: &mut Sink) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        if self.written == 0 {
            if let Some(bos) = self.boundaries.bos {
                self.emit(&[bos], sink)?;
            }
        }
        if let Some(unk) = self.unk {
            self.unknown += ids.iter().filter(|&&id| id == unk).count() as u64;
        }
        self.emit(ids, sink)
    }

    fn emit(&mut self, ids: &[u32], sink: &mut Sink) -> Result<()> {
        let first = self.written == 0;
        self.written += ids.len() as u64;
        match sink {
            Sink::Tokens(tokens) => tokens.extend(ids),
            Sink::Text(_) if self.count => Ok(()),
            Sink::Text(_) => {
                // A part at a time, so that the buffer stays small enough to stay in
                // the cache between its formatting and its write (a piece of 1 MB of
                // text made it 1.7 MB). Intel Xeon model 167, one thread, o200k_base,
                // 27 MB, CPU ms (min / p10 / median of 15 alternated runs): 435 /
                // 450 / 465 against 448 / 457 / 472; cl100k_base 388 / 397 / 409
                // against 394 / 405 / 421.
                let mut sep = if first { b'[' } else { b',' };
                for part in ids.chunks(1 << 13) {
                    ndjson::push_list(&mut self.buf, Some(sep), part);
                    sep = b',';
                    if self.buf.len() >= 1 << 16 {
                        self.flush(sink)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// Ends the record (its boundary ids: an empty record gets them too, except in
    /// Megatron's convention), adding its totals to `stats`; the next ids start a new one.
    fn finish(&mut self, stats: &mut EncodeStats, sink: &mut Sink) -> Result<()> {
        let skip_empty = self.boundaries.skip_empty;
        if self.written == 0 && !skip_empty {
            if let Some(bos) = self.boundaries.bos {
                self.emit(&[bos], sink)?;
            }
        }
        if let Some(eot) = self.boundaries.eot {
            if self.written > 0 || !skip_empty {
                self.emit(&[eot], sink)?;
            }
        }
        match sink {
            Sink::Tokens(tokens) => tokens.end_document()?,
            Sink::Text(_) if self.count => {
                ndjson::push_u32(
                    &mut self.buf,
                    u32::try_from(self.written).unwrap_or(u32::MAX),
                );
                self.buf.push(b'\n');
            }
            Sink::Text(_) => {
                let end: &[u8] = if self.written == 0 { b"[]\n" } else { b"]\n" };
                self.buf.extend_from_slice(end);
            }
        }
        stats.records += 1;
        stats.tokens += self.written;
        if let Some(n) = stats.unknown.as_mut() {
            *n += self.unknown;
        }
        self.written = 0;
        self.unknown = 0;
        Ok(())
    }

    /// Writes what is formatted so far.
    fn flush(&mut self, sink: &mut Sink) -> Result<()> {
        match sink {
            Sink::Text(out) => {
                out.write_all(&self.buf).map_err(Error::write)?;
                self.buf.clear();
                Ok(())
            }
            Sink::Tokens(_) => Ok(()),
        }
    }
}

/// Encodes a part of one record ([`Encoder::encode_part`]; for word models, up to the
/// last ASCII space or newline, which no word spans) into `record`, and returns the
/// bytes it used.
fn encode_part(
    encoder: &AnyEncoder,
    text: &[u8],
    first: bool,
    last: bool,
    threads: usize,
    record: &mut Streamed,
    sink: &mut Sink,
) -> Result<usize> {
    let mut ids_out = |ids: &[u32]| -> Result<()> { record.ids(ids, sink) };
    match encoder {
        AnyEncoder::Bpe(enc) => enc.encode_part(text, first, last, threads, &mut ids_out),
        AnyEncoder::Word(enc) => {
            let end = if last {
                text.len()
            } else {
                memchr::memrchr2(b' ', b'\n', text).map_or(0, |k| k + 1)
            };
            let text = &text[..end];
            // Words never span an ASCII space or newline, so pieces cut after one
            // encode to the same ids: spread over the threads, written in order.
            let pieces = Cuts {
                text,
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
                let written = ids_out(&ids);
                pool.put(ids);
                written
            };
            if threads < 2 || text.len() < 2 * ENCODE_ITEM {
                for piece in pieces {
                    write(work(piece))?;
                }
            } else {
                let failed =
                    crate::parallel::ordered(threads, 2 * threads + 2, pieces, work, |ids| {
                        match write(ids) {
                            Ok(()) => ControlFlow::Continue(()),
                            Err(e) => ControlFlow::Break(e),
                        }
                    });
                failed.map_or(Ok(()), Err)?;
            }
            Ok(end)
        }
    }
}

/// Line-mode input is cut into items of about this many bytes of whole lines (a longer
/// line is an item of its own).
const ENCODE_ITEM: usize = 1 << 18;
/// From a stream, runs of about this many bytes of whole lines are read at a time.
const ENCODE_RUN: usize = 1 << 22;

/// How an item's lines become records and its records output.
#[derive(Clone, Copy)]
struct ItemPlan<'f> {
    /// `[UNK]`'s id, counted for `--stats` (word models).
    unk: Option<u32>,
    /// `--count`: token counts instead of ids.
    count: bool,
    /// Format NDJSON on the threads (else the ids go to a token file as they are).
    ndjson: bool,
    /// `--field`: each line is a JSONL object and this member is the record.
    field: Option<&'f str>,
    skip_invalid: bool,
    boundaries: Boundaries,
}

/// The file and line number the next item starts at.
struct RunPlace<'f> {
    file: &'f str,
    line: u64,
}

/// An item's output and totals, and the working memory that made them (returned to
/// the pool once written).
#[derive(Default)]
struct EncodedItem {
    /// NDJSON lines.
    out: Vec<u8>,
    /// True when the NDJSON lines are left for the writer to format as it writes
    /// ([`write_in_pieces`]): a long line's.
    in_pieces: bool,
    stats: EncodeStats,
    /// The records' ids, boundary ids included, and where each record's ids end.
    ids: Vec<u32>,
    ends: Vec<usize>,
    /// Lines of the item read (all of them, unless one failed).
    lines: u64,
    /// JSONL: decoded documents, and where each ends.
    docs: Vec<u8>,
    doc_ends: Vec<usize>,
    /// Before boundaries: the encoder's ids.
    raw_ids: Vec<u32>,
    raw_ends: Vec<usize>,
    /// Skipped lines (`--skip-invalid`): line within the item (from 0) and why.
    skipped: Vec<(u64, jsonl::LineError)>,
    /// The line that stops the run (from 0 within the item) and why.
    failed: Option<(u64, jsonl::LineError)>,
}

/// An item with more ids than this (one long line, in practice) is formatted by the
/// writer a piece at a time as it writes, so that its text is never held whole beside
/// its ids: 10 MB of random bytes (9.5 M ids) with cl100k_base as one line, 97 -> 62 MB.
const FORMAT_WHEN_WRITTEN: usize = 1 << 20;

/// Writes an item's NDJSON lines from its ids, in pieces of about 64 KB.
fn write_in_pieces(item: &EncodedItem, out: &mut dyn Write) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity((1 << 16) + 16);
    let mut start = 0;
    for &end in &item.ends {
        let mut sep = b'[';
        for ids in item.ids[start..end].chunks(4096) {
            ndjson::push_list(&mut buf, Some(sep), ids);
            sep = b',';
            if buf.len() >= 1 << 16 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        if start == end {
            buf.push(b'[');
        }
        buf.extend_from_slice(b"]\n");
        start = end;
    }
    out.write_all(&buf)
}

/// Encodes one run of whole lines: items cut from it are encoded and formatted on the
/// threads while this thread writes the finished ones in order. (Before, each batch of
/// lines was copied, encoded by threads started for it, then formatted and written by
/// this thread while the threads waited: a second thread gained a third at most.)
#[allow(clippy::too_many_arguments)]
fn encode_run(
    encoder: &AnyEncoder,
    plan: ItemPlan,
    threads: usize,
    pool: &Pool<EncodedItem>,
    run: &[u8],
    at: &mut RunPlace,
    report: &mut EncodeReport,
    sink: &mut Sink,
) -> Result<()> {
    let items = Cuts {
        text: run,
        pos: 0,
        target: ENCODE_ITEM,
        after: (b'\n', b'\n'),
    };
    let work = |item: &[u8]| encode_item(encoder, plan, pool.take(), item);
    let mut write = |done: EncodedItem| -> Result<()> {
        let written = write_item(&done, at, report, sink);
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

/// Writes one encoded item (the next in order), counts its skipped lines, and stops at
/// its failed line after writing the records before it.
fn write_item(
    done: &EncodedItem,
    at: &mut RunPlace,
    report: &mut EncodeReport,
    sink: &mut Sink,
) -> Result<()> {
    report.stats.add(&done.stats);
    match sink {
        Sink::Text(out) if done.in_pieces => write_in_pieces(done, out).map_err(Error::write)?,
        Sink::Text(out) => out.write_all(&done.out).map_err(Error::write)?,
        Sink::Tokens(tokens) => {
            let mut start = 0;
            for &end in &done.ends {
                tokens.extend(&done.ids[start..end])?;
                tokens.end_document()?;
                start = end;
            }
        }
    }
    for (line, why) in &done.skipped {
        report.skipped.add(why, at.file, at.line + line);
    }
    if let Some((line, why)) = &done.failed {
        return Err(Error::data(why.message.clone()).at_line(at.file, at.line + line));
    }
    at.line += done.lines;
    Ok(())
}

/// The records of `text` (lines, or the JSONL documents of its lines) encoded, the
/// boundary ids placed and, for NDJSON, formatted, in `memory`'s buffers.
fn encode_item(
    encoder: &AnyEncoder,
    plan: ItemPlan,
    memory: EncodedItem,
    text: &[u8],
) -> EncodedItem {
    let mut item = memory;
    item.out.clear();
    item.ids.clear();
    item.ends.clear();
    item.docs.clear();
    item.doc_ends.clear();
    item.raw_ids.clear();
    item.raw_ends.clear();
    item.skipped.clear();
    item.failed = None;
    item.lines = 0;
    let records: Vec<&[u8]> = match plan.field {
        None => {
            let records: Vec<&[u8]> = input::Lines::new(text).collect();
            item.lines = records.len() as u64;
            records
        }
        Some(field) => {
            for (k, line) in input::Lines::new(text).enumerate() {
                item.lines += 1;
                match jsonl::document(line, field, &mut item.docs) {
                    Ok(()) => item.doc_ends.push(item.docs.len()),
                    Err(why) if plan.skip_invalid => item.skipped.push((k as u64, why)),
                    Err(why) => {
                        item.failed = Some((k as u64, why));
                        break;
                    }
                }
            }
            let mut start = 0;
            item.doc_ends
                .iter()
                .map(|&end| {
                    let doc = &item.docs[start..end];
                    start = end;
                    doc
                })
                .collect()
        }
    };
    let b = plan.boundaries;
    let (ids, ends) = if b.any() {
        (&mut item.raw_ids, &mut item.raw_ends)
    } else {
        (&mut item.ids, &mut item.ends)
    };
    let unknown = encoder.encode_records(&records, ids, ends);
    if b.any() {
        let mut start = 0;
        for &end in &item.raw_ends {
            let record = &item.raw_ids[start..end];
            if !(record.is_empty() && b.skip_empty) {
                item.ids.extend(b.bos);
                item.ids.extend_from_slice(record);
                item.ids.extend(b.eot);
            }
            item.ends.push(item.ids.len());
            start = end;
        }
    }
    item.stats = EncodeStats {
        records: records.len() as u64,
        tokens: item.ids.len() as u64,
        bytes: records.iter().map(|r| r.len() as u64).sum(),
        unknown: plan.unk.map(|_| unknown),
    };
    item.in_pieces = plan.ndjson && !plan.count && item.ids.len() > FORMAT_WHEN_WRITTEN;
    if plan.ndjson && !item.in_pieces {
        let mut start = 0;
        for &end in &item.ends {
            if plan.count {
                ndjson::push_u32(&mut item.out, (end - start) as u32);
            } else {
                ndjson::push_ids(&mut item.out, &item.ids[start..end]);
            }
            item.out.push(b'\n');
            start = end;
        }
    }
    item
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
