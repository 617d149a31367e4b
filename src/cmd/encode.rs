//! `bpe-encode`'s work, from an [`EncodeConfig`] to id records on a writer: the input
//! read as records (lines, or the whole input), encoded on the threads in items, and
//! written in input order, with the stream's header line first.

use std::io::Write;
use std::ops::ControlFlow;

use crate::encode::{AllowedSpecial, Encoder};
use crate::error::{Error, Result};
use crate::format::ids as ndjson;
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
        let mut line = ndjson::stream_header(config.model.source()).into_bytes();
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
    /// False when the records' ids are left for the writer to format as it writes
    /// ([`write_in_pieces`]): a long line's.
    formatted: bool,
    stats: EncodeStats,
    ids: Vec<u32>,
    ends: Vec<usize>,
}

/// An item with more ids than this (one long line, in practice) is formatted by the
/// writer a piece at a time as it writes, so that its text is never held whole beside
/// its ids: 10 MB of random bytes (9.5 M ids) with cl100k_base as one line, 97 -> 62 MB.
const FORMAT_WHEN_WRITTEN: usize = 1 << 20;

/// Writes an item's records whose ids were not formatted, in pieces of about 64 KB.
fn write_in_pieces(item: &mut EncodedItem, out: &mut dyn Write) -> std::io::Result<()> {
    let buf = &mut item.out;
    buf.clear();
    let mut start = 0;
    for &end in &item.ends {
        buf.push(b'[');
        for (k, &id) in item.ids[start..end].iter().enumerate() {
            if k > 0 {
                buf.push(b',');
            }
            ndjson::push_u32(buf, id);
            if buf.len() >= 1 << 16 {
                out.write_all(buf)?;
                buf.clear();
            }
        }
        buf.extend_from_slice(b"]\n");
        start = end;
    }
    out.write_all(buf)
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
    let mut write = |mut done: EncodedItem| -> Result<()> {
        stats.add(&done.stats);
        let written = if done.formatted {
            out.write_all(&done.out)
        } else {
            write_in_pieces(&mut done, out)
        };
        pool.put(done);
        written.map_err(Error::write)
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
    let formatted = format.count || ids.len() <= FORMAT_WHEN_WRITTEN;
    if formatted {
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
    }
    EncodedItem {
        out,
        formatted,
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
