//! Word model files (format version 1, described in [`crate::word`]): writing, and
//! reading with a hand parser for the lines as written and serde_json for the rest.

use std::borrow::Cow;
use std::io::Write;

use serde_json::{Map, Value};

use super::json::json_u64;
use crate::error::{Error, Result};
use crate::identity::ModelSource;
use crate::word::{
    from_hex, key_of, split_generic, to_hex, Repeat, WordIds, WordList, WordModel, UNK,
};

/// The model file format version this module reads and writes.
const FORMAT_VERSION: u64 = 1;

/// Writes `model` as a model file (the format in the module documentation).
pub(crate) fn write_model(w: &mut dyn Write, model: &WordModel) -> std::io::Result<()> {
    let json = |v: &str| serde_json::to_string(v).map_err(std::io::Error::from);
    writeln!(
        w,
        "{{\"kind\":\"word\",\"version\":{FORMAT_VERSION},\"unk\":{}}}",
        json(&model.unk_text)?
    )?;
    for (id, word) in model.words().iter().enumerate() {
        write!(w, "{{\"id\":{id},")?;
        match std::str::from_utf8(word) {
            Ok(text) => write!(w, "\"word\":{}", json(text)?)?,
            Err(_) => write!(w, "\"hex\":{}", json(&to_hex(word))?)?,
        }
        match model.counts.get(id) {
            Some(count) => writeln!(w, ",\"count\":{count}}}")?,
            None => writeln!(w, "}}")?,
        }
    }
    Ok(())
}

/// Model files from this size on are read on two threads (see `parse_model_text`).
pub(crate) const PARALLEL_MODEL_BYTES: usize = 1 << 20;

#[cfg(test)]
/// Reads a word model from the text of its file after the header line: `header` is line
/// 1 (already parsed, its `kind` being `"word"`), `body` the rest. Errors carry `file` and
/// the line number, exactly as [`parse_model`] reports them.
///
/// A body of `parallel_min` bytes or more ([`PARALLEL_MODEL_BYTES`] for the tools) is cut
/// at a line break near its middle and the halves are read on two threads; the second
/// half takes its first id from its first line, which must then follow the first half's
/// last. Anything unexpected (a malformed line, a repeated word, ids that do not join)
/// sends the whole body through [`parse_model`], which finds and names the first problem.
pub(crate) fn parse_model_text(
    header: &Map<String, Value>,
    body: &[u8],
    parallel_min: usize,
    source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    parse_model_text_beside(header, body, parallel_min, source, file, || ()).0
}

/// `parse_model_text`, running `beside` on a second thread while the table is built
/// (the one single-threaded step of a large model), or after reading a small one.
pub(crate) fn parse_model_text_beside<T: Send>(
    header: &Map<String, Value>,
    body: &[u8],
    parallel_min: usize,
    source: ModelSource,
    file: &str,
    beside: impl FnOnce() -> T + Send,
) -> (Result<WordModel>, T) {
    let sequential = |source| {
        let mut numbered = (crate::input::Lines::new(body).zip(2u64..)).map(|(line, n)| (n, line));
        let lines = memchr::memchr_iter(b'\n', body).count() + 1;
        parse_model(header, &mut numbered, lines, source, file)
    };
    let cut = match memchr::memchr(b'\n', &body[body.len() / 2..]) {
        Some(k) if body.len() >= parallel_min => body.len() / 2 + k + 1,
        _ => return (sequential(source), beside()),
    };
    let unk_text = match parse_header(header) {
        Ok(unk_text) => unk_text,
        Err(e) => return (Err(e.at_line(file, 1)), beside()),
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| read_piece(&body[cut..], None));
        let first = read_piece(&body[..cut], Some(0));
        (first, second.join().ok().flatten())
    });
    let (Some(mut first), Some(second)) = (first, second) else {
        return (sequential(source), beside());
    };
    if !second.words.is_empty() && second.first_id != Some(first.words.len() as u64) {
        return (sequential(source), beside());
    }
    first.words.append(&second.words);
    first.counts.extend_from_slice(&second.counts);
    if first.words.len() >= u32::MAX as usize {
        return (sequential(source), beside());
    }
    let (built, side) = crate::parallel::both(true, || WordIds::build(first.words), beside);
    match built {
        Ok(ids) => {
            let model = WordModel {
                source,
                unk_id: ids.len() as u32,
                counts: first.counts,
                ids,
                unk_text,
            };
            (Ok(model), side)
        }
        Err(_) => (sequential(source), side),
    }
}

/// The words of a run of model lines, read by `parse_model_text`.
struct Piece {
    words: WordList,
    counts: Vec<u64>,
    /// The id of the first word.
    first_id: Option<u64>,
}

/// Reads the word lines of `text`, the first one having id `first_id` (taken from that
/// line when `None`); `None` when any line is malformed or out of order.
fn read_piece(text: &[u8], mut first_id: Option<u64>) -> Option<Piece> {
    // A word line takes at least 19 bytes: room for that many lines is never outgrown
    // (blank lines aside), and costs only address space until written. (Counting the
    // lines first took ~8% of loading a 26 MB model.)
    let lines = text.len() / 16 + 1;
    let mut words = WordList::with_capacity(lines, text.len() / 2);
    let mut counts = Vec::with_capacity(lines);
    for line in crate::input::Lines::new(text) {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let base = match first_id {
            Some(id) => id,
            None => *first_id.insert(match parse_plain_line(line) {
                Some((id, _, _)) => id,
                None => parse_json_line(line).ok()?.0?,
            }),
        };
        let (word, count) = parse_word_line(line, base + words.len() as u64).ok()?;
        words.push(&word);
        counts.push(count);
    }
    Some(Piece {
        words,
        counts,
        first_id,
    })
}

/// Reads a word model: `header` is line 1 (already parsed, its `kind` being `"word"`),
/// `lines` the further lines with their 1-based line numbers, about `size_hint` of them
/// (room is made for that many words). Errors carry `file` and the line number.
pub(crate) fn parse_model(
    header: &Map<String, Value>,
    lines: &mut dyn Iterator<Item = (u64, &[u8])>,
    size_hint: usize,
    source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    let unk_text = parse_header(header).map_err(|e| e.at_line(file, 1))?;
    let mut words = WordList::with_capacity(size_hint, 0);
    let mut counts: Vec<u64> = Vec::with_capacity(size_hint);
    let mut line_of: Vec<u64> = Vec::with_capacity(size_hint);
    let mut malformed = None;
    for (line_no, line) in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let expected = words.len() as u64;
        let parsed = parse_word_line(line, expected).and_then(|parsed| {
            if expected >= u32::MAX as u64 {
                return Err(Error::data("too many words for 32-bit token ids"));
            }
            Ok(parsed)
        });
        match parsed {
            Ok((word, count)) => {
                words.push(&word);
                counts.push(count);
                line_of.push(line_no);
            }
            Err(e) => {
                malformed = Some(e.at_line(file, line_no));
                break;
            }
        }
    }
    // Lines are checked one by one, repeated words all at once afterwards; a repeat
    // before the first malformed line is still the first problem reported.
    let ids = match WordIds::build(words) {
        Ok(ids) => ids,
        Err((Repeat { id, earlier }, words)) => {
            let key = key_of(words.word(id));
            return Err(Error::data(format!(
                "duplicated word {} (also id {earlier})",
                show_key(&key)
            ))
            .at_line(file, line_of[id as usize]));
        }
    };
    if let Some(e) = malformed {
        return Err(e);
    }
    Ok(WordModel {
        source,
        unk_id: ids.len() as u32,
        counts,
        ids,
        unk_text,
    })
}

/// A word for error messages: JSON-quoted, or `hex "..."` for invalid UTF-8.
fn show_key(key: &str) -> String {
    match key.strip_prefix(' ') {
        Some(hex) => format!("hex \"{hex}\""),
        None => serde_json::to_string(key).unwrap_or_else(|_| key.to_string()),
    }
}

fn parse_header(header: &Map<String, Value>) -> Result<String> {
    let mut unk = UNK.to_string();
    for (field, value) in header {
        match field.as_str() {
            "kind" => {
                if value.as_str() != Some("word") {
                    return Err(Error::data(format!("not a word model (kind {value})")));
                }
            }
            "version" => {
                if value.as_u64() != Some(FORMAT_VERSION) {
                    return Err(Error::data(format!(
                        "unsupported word model version {value} (this build reads version {FORMAT_VERSION})"
                    )));
                }
            }
            "unk" => match value.as_str() {
                Some(text) if !text.is_empty() => unk = text.to_string(),
                _ => {
                    return Err(Error::data(format!(
                        "\"unk\" must be a non-empty string, not {value}"
                    )))
                }
            },
            other => {
                return Err(Error::data(format!(
                    "unknown field {} in the word model header",
                    serde_json::to_string(other).unwrap_or_default()
                )))
            }
        }
    }
    if !header.contains_key("kind") {
        return Err(Error::data("the model header has no \"kind\""));
    }
    if !header.contains_key("version") {
        return Err(Error::data("the model header has no \"version\""));
    }
    Ok(unk)
}

/// The fields of a word line in exactly the form [`write_model`] writes it, with a word
/// that needs no JSON escapes: `{"id":N,"word":"W","count":C}` (count optional). Anything
/// else returns `None` and goes through the full JSON parser.
///
/// The word is found from both ends of the line (it holds no `"`, so the end is
/// unambiguous) and then checked in one pass without early exits, which the compiler
/// vectorizes; a 540k-word model's lines are read ~2x faster than scanning for the
/// closing quote byte by byte.
fn parse_plain_line(line: &[u8]) -> Option<(u64, &[u8], u64)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (id, rest) = json_u64(line.strip_prefix(b"{\"id\":")?)?;
    let body = rest.strip_prefix(b",\"word\":\"")?.strip_suffix(b"}")?;
    let (word, count) = match body.strip_suffix(b"\"") {
        Some(word) => (word, 0),
        None => {
            let digits = body.iter().rev().take_while(|b| b.is_ascii_digit()).count();
            let (head, tail) = body.split_at(body.len() - digits);
            let (count, after) = json_u64(tail)?;
            if !after.is_empty() {
                return None;
            }
            (head.strip_suffix(b"\",\"count\":")?, count)
        }
    };
    let plain = (word.iter()).fold(true, |ok, &b| ok & (b != b'"') & (b != b'\\') & (b >= 0x20));
    if !plain {
        return None;
    }
    std::str::from_utf8(word).ok()?;
    Some((id, word, count))
}

fn parse_word_line(line: &[u8], expected: u64) -> Result<(Cow<'_, [u8]>, u64)> {
    let (id, word, count) = match parse_plain_line(line) {
        Some((id, word, count)) => (Some(id), Some(Cow::Borrowed(word)), count),
        None => parse_json_line(line)?,
    };
    check_word_line(id, word, count, expected)
}

type LineFields<'l> = (Option<u64>, Option<Cow<'l, [u8]>>, u64);

fn parse_json_line(line: &[u8]) -> Result<LineFields<'static>> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| Error::data(format!("invalid json: {e}")))?;
    let Value::Object(fields) = value else {
        return Err(Error::data("a word line must be a json object"));
    };
    let mut id = None;
    let mut word: Option<Cow<'static, [u8]>> = None;
    let mut count = 0;
    for (field, value) in &fields {
        match field.as_str() {
            "id" => {
                id = Some(value.as_u64().ok_or_else(|| {
                    Error::data(format!(
                        "\"id\" must be a non-negative integer, not {value}"
                    ))
                })?)
            }
            "word" | "hex" => {
                if word.is_some() {
                    return Err(Error::data("a word line has both \"word\" and \"hex\""));
                }
                let text = value.as_str().ok_or_else(|| {
                    Error::data(format!("\"{field}\" must be a string, not {value}"))
                })?;
                word = Some(Cow::Owned(if field == "hex" {
                    from_hex(text).ok_or_else(|| {
                        Error::data(format!(
                            "\"hex\" is not an even number of hex digits: {value}"
                        ))
                    })?
                } else {
                    text.as_bytes().to_vec()
                }));
            }
            "count" => {
                count = value.as_u64().ok_or_else(|| {
                    Error::data(format!(
                        "\"count\" must be a non-negative integer, not {value}"
                    ))
                })?
            }
            other => {
                return Err(Error::data(format!(
                    "unknown field {} in a word line",
                    serde_json::to_string(other).unwrap_or_default()
                )))
            }
        }
    }
    Ok((id, word, count))
}

fn check_word_line(
    id: Option<u64>,
    word: Option<Cow<'_, [u8]>>,
    count: u64,
    expected: u64,
) -> Result<(Cow<'_, [u8]>, u64)> {
    match id {
        None => return Err(Error::data("a word line has no \"id\"")),
        Some(id) if id != expected => {
            return Err(Error::data(format!(
                "expected id {expected}, found {id} (ids are consecutive from 0)"
            )))
        }
        Some(_) => {}
    }
    let Some(word) = word else {
        return Err(Error::data("a word line has no \"word\" (or \"hex\")"));
    };
    if word.is_empty() {
        return Err(Error::data("empty word"));
    }
    // A word without whitespace splits into exactly itself; printable ASCII other than
    // the space (most words) holds none.
    let printable = (word.iter()).fold(true, |ok, &b| ok & (b.wrapping_sub(0x21) < 0x5e));
    let mut whole = printable;
    if !printable {
        split_generic(&word, &mut |piece| whole = piece.len() == word.len());
    }
    if !whole {
        return Err(Error::data(format!(
            "word {} contains whitespace",
            show_key(&key_of(&word))
        )));
    }
    Ok((word, count))
}
