//! The decoding engine of `bpe-decode`: an id stream, read in runs of whole lines, cut
//! into items (whole lines, or the pieces of a long line cut between ids), decoded on the
//! threads by the fast path ([`super::DecodeTable`]) and written in input order, with
//! header lines choosing the model of the records after them; and token files, whose
//! records come in pieces of ids from [`crate::format::tokens::read_pieces`] and are
//! decoded on this thread as they come (a table lookup and a copy per id: the reading
//! and writing, not the decoding, is the work there).

use std::io::Write;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::{decode_ids, DecodeBuf, DecodeTable};
use crate::error::{Error, Result};
use crate::format::tokens::{Boundary, Input};
use crate::format::{self, ids as ndjson, ids::StreamModel};
use crate::input;
use crate::model::Model;
use crate::parallel::Pool;

/// A stream (not a mapped file) is handed to the decoder in runs of about this many
/// bytes of whole lines.
pub(crate) const DECODE_RUN: usize = 1 << 22;
/// The threads take the input in items of about this many bytes: whole lines, or the
/// pieces of a longer line cut between ids.
const DECODE_ITEM: usize = 1 << 18;
/// The longest header line read from a stream whose lines come in parts.
const HEADER_MAX: usize = 1 << 16;
/// Runs shorter than this are decoded on one thread (threads would cost more).
const DECODE_PARALLEL_MIN: usize = 1 << 18;

/// The state of `bpe-decode` along its input.
///
/// The input is cut into items (about [`DECODE_ITEM`] bytes of whole lines, or the
/// pieces of a longer line cut between ids), decoded on the threads by the fast path
/// ([`DecodeTable::decode_lines`]) and written in order by this thread while the
/// threads decode the next ones. An item the fast path refuses is read again one line
/// at a time by the general parser, which reads what is valid JSON and names the line
/// of what is not, after everything before it is written.
///
/// Kept decisions: the writer writes while the threads decode the next items, so two
/// threads' CPU time adds up to about one thread's (27 MB of text from 558,607 records of
/// a 32k model: `-j 1` 70 ms of CPU); a mapped file is one run, so the threads are never
/// drained in the middle. The pieces of a long line (`--whole`) are written as they are
/// decoded, so memory stays bounded by the items (holding a 100 MB record until its end
/// cost 270 MB); an error inside such a record therefore comes after its bytes before
/// the bad piece.
pub(crate) struct StreamDecoder {
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
    /// The record being read in parts ([`StreamDecoder::part`]).
    long: LongRecord,
}

/// Where a record read in parts (a line too long to hold, from a stream) stands.
#[derive(Default)]
struct LongRecord {
    state: ndjson::PieceState,
    /// A word model's joining space owed before the next word (held back so that a
    /// record never ends with one).
    space: bool,
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
    /// A decoder for records of `model` (with `Some`, every header must name it; with
    /// `None`, headers choose, and o200k_base until one does).
    pub(crate) fn new(model: Option<Model>, whole: bool, threads: usize) -> StreamDecoder {
        StreamDecoder {
            fixed: model.is_some(),
            current: model,
            table: None,
            generation: 0,
            whole,
            threads: threads.max(1),
            ids: Vec::new(),
            bytes: DecodeBuf::default(),
            slow: Vec::new(),
            free: Vec::new(),
            long: LongRecord::default(),
        }
    }

    /// The current model and its table (o200k_base when no header has named one).
    fn table(&mut self) -> Result<&Arc<DecodeTable>> {
        if self.current.is_none() {
            self.current = Some(format::load(format::DEFAULT_MODEL, None)?);
        }
        let model = self.current.as_ref().expect("model chosen above");
        Ok(self
            .table
            .get_or_insert_with(|| Arc::new(DecodeTable::new(model))))
    }

    /// One run of whole lines, the first being line `first_line`.
    pub(crate) fn run(
        &mut self,
        file: &str,
        first_line: u64,
        text: &[u8],
        out: &mut dyn Write,
    ) -> Result<()> {
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

    /// One part of a line too long to hold ([`input::Run::Part`]); returns the bytes it
    /// used. The part is decoded up to where [`ndjson::piece_end`] cuts it (all of it
    /// when it ends the line), by the fast path where it has the compact form, else by the
    /// general parser, which reads what is valid JSON and names the line of what is
    /// not; either way the bytes are those the whole line decodes to, and are written
    /// at once, so memory stays bounded by the part.
    pub(crate) fn part(
        &mut self,
        file: &str,
        line_no: u64,
        text: &[u8],
        first: bool,
        last: bool,
        out: &mut dyn Write,
    ) -> Result<usize> {
        if first {
            if ndjson::is_header(text) {
                // A header is read whole: the reader is asked for more of it, up to a
                // bound that no real header comes near.
                if last {
                    self.line(file, line_no, text, out)?;
                    return Ok(text.len());
                }
                if text.len() < HEADER_MAX {
                    return Ok(0);
                }
                return Err(Error::data(format!(
                    "a header line longer than {HEADER_MAX} bytes (a header names a model in a \
                     few hundred)"
                ))
                .at_line(file, line_no));
            }
            self.long = LongRecord::default();
        }
        let used = if last {
            text.len()
        } else {
            match ndjson::piece_end(text) {
                Some(used) => used,
                // Too short to cut: the reader brings a longer part.
                None => return Ok(0),
            }
        };
        let piece = &text[..used];
        let table = Arc::clone(self.table()?);
        let mut bytes = std::mem::take(&mut self.bytes);
        bytes.clear();
        let result = self
            .piece(&table, piece, last, &mut bytes)
            .map_err(|e| e.at_line(file, line_no));
        let written = result.and_then(|()| {
            if last && !self.whole {
                bytes.push(b'\n');
            }
            out.write_all(bytes.as_slice()).map_err(Error::write)
        });
        self.bytes = bytes;
        written.map(|()| used)
    }

    /// The bytes of one piece of a long record, appended to `bytes`.
    fn piece(
        &mut self,
        table: &DecodeTable,
        piece: &[u8],
        last: bool,
        bytes: &mut DecodeBuf,
    ) -> Result<()> {
        use ndjson::PieceState;
        let state = self.long.state;
        // The compact form: `[` first, ids joined by commas, `,` at the end of all but
        // the last piece, `]` at its end.
        let ids = match state {
            PieceState::Start => piece.strip_prefix(b"["),
            PieceState::Value => Some(piece),
            _ => None,
        };
        let ids = match ids {
            Some(ids) if last => ids.strip_suffix(b"]"),
            ids => ids,
        };
        let joined = table.joined;
        if let Some(ids) = ids.filter(|ids| !ids.is_empty()) {
            if self.long.space {
                bytes.push(b' ');
            }
            if table.decode_piece(ids, last, bytes) {
                self.long.state = if last {
                    PieceState::Done
                } else {
                    PieceState::Value
                };
                // A word model's piece ends with the space before the next word.
                self.long.space = joined && !last;
                if self.long.space {
                    bytes.used -= 1;
                }
                return Ok(());
            }
            bytes.clear();
        }
        self.ids.clear();
        let parsed = ndjson::parse_ids_piece(piece, state, last, &mut self.ids);
        self.long.state = self.decode_parsed(parsed)?;
        if joined && !self.ids.is_empty() {
            if self.long.space {
                bytes.push(b' ');
            }
            self.long.space = true;
        }
        bytes.extend_from_slice(&self.slow);
        Ok(())
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
        let parsed = ndjson::parse_ids_into(line, &mut self.ids);
        self.decode_parsed(parsed)
            .map_err(|e| e.at_line(file, line_no))?;
        bytes.extend_from_slice(&self.slow);
        Ok(())
    }

    /// Decodes the ids a parse left in `self.ids` into `self.slow` and returns the parse's
    /// outcome. The first error in the line wins: ids parsed before a syntax error are
    /// checked against the vocabulary first, so a line gives one message however it was
    /// read (whole, or in pieces whose ids are checked as they come).
    fn decode_parsed<T>(&mut self, parsed: std::result::Result<T, String>) -> Result<T> {
        let model = self.current.as_ref().expect("table() loaded a model");
        self.slow.clear();
        if let Err(id) = decode_ids(model, &self.ids, &mut self.slow) {
            return Err(Error::data(format!(
                "id {id} is not in the vocabulary (size {})",
                model.vocab_size()
            )));
        }
        parsed.map_err(Error::data)
    }

    fn header(&mut self, file: &str, line_no: u64, line: &[u8]) -> Result<()> {
        let header =
            ndjson::parse_header(line).map_err(|e| Error::data(e).at_line(file, line_no))?;
        let named = ndjson::parse_stream_header(&header)
            .map_err(|e| Error::data(e).at_line(file, line_no))?;
        if self.fixed {
            if let Some(model) = &self.current {
                if !ndjson::same_model(model.source(), &named) {
                    if named.sha256.is_none()
                        && !crate::model::BUILTINS.contains(&named.name.as_str())
                    {
                        return Err(Error::data(format!(
                            "the stream names model {} but no \"sha256\" of its file, so it \
                             cannot be checked against the model -m gives",
                            named.describe()
                        ))
                        .at_line(file, line_no));
                    }
                    return Err(Error::data(format!(
                        "the stream was encoded with model {} but -m gives another model",
                        named.describe()
                    ))
                    .at_line(file, line_no));
                }
            }
        } else {
            let reuse = matches!(&self.current, Some(m) if ndjson::same_model(m.source(), &named));
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

/// Loads the model a stream header names ([`format::load_named`]).
fn load_named(named: &StreamModel) -> Result<Model> {
    format::load_named(named)
}

/// Decodes token files: each record's bytes, then a newline unless `whole`. A record's
/// pieces are written as they come, so memory stays bounded whatever its length. Word
/// models join words with a space, across pieces too.
pub(crate) fn decode_token_files(
    model: &Model,
    whole: bool,
    inputs: &[Input],
    boundary: Boundary,
    no_mmap: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let words = matches!(model, Model::Word(_));
    let mut bytes = Vec::with_capacity(1 << 18);
    // The record has ids written (word models put a space before the next piece).
    let mut started = false;
    format::tokens::read_pieces(inputs, boundary, no_mmap, &mut |piece| {
        if !piece.ids.is_empty() {
            if words && started {
                bytes.push(b' ');
            }
            let mark = bytes.len();
            if let Err(id) = decode_ids(model, piece.ids, &mut bytes) {
                let k = piece.ids.iter().position(|&x| x == id).unwrap_or(0);
                // What came before the bad id is written, as for id streams.
                bytes.truncate(mark);
                let _ = decode_ids(model, &piece.ids[..k], &mut bytes);
                out.write_all(&bytes).map_err(Error::write)?;
                return Err(Error::data(format!(
                    "token {}: id {id} is not in the vocabulary (size {})",
                    piece.offset + k as u64,
                    model.vocab_size()
                ))
                .in_file(piece.file));
            }
            started = true;
        }
        if piece.end {
            if !whole {
                bytes.push(b'\n');
            }
            started = false;
        }
        if bytes.len() >= 1 << 16 {
            out.write_all(&bytes).map_err(Error::write)?;
            bytes.clear();
        }
        Ok(())
    })?;
    out.write_all(&bytes).map_err(Error::write)
}
