//! Counts files: the chunk counts of a corpus or of a shard of it, written by
//! `bpe-train --emit-counts`, merged by `bpe-train --from-counts --emit-counts` and
//! trained from by `bpe-train --from-counts`. Normative description: "Counts files" in
//! `docs/formats.md`; in short:
//!
//! ```text
//! {"kind":"counts","version":1,"split":"gpt4","pattern":"<regex>","special_tokens":["<|endoftext|>"]}
//! "Hello"\t3\t0\t0
//! " world"\t2\t0\t1
//! ```
//!
//! - A header line (a JSON object, `{` first) says how the chunks were cut. It may come
//!   anywhere and any number of times (so `cat` of count files is a count file); all the
//!   headers of one run must agree on the pattern and the special tokens.
//! - Every other line is one distinct chunk: its bytes as a JSON string, TAB, its count
//!   (decimal u64), TAB, the shard key (dotted decimal integers, `3` or `3.1048576`,
//!   compared part by part), TAB, its rank (decimal u64): where the chunk first occurs
//!   is the pair (shard key, rank). The key holds no TAB and no newline, so the line is
//!   a key-value record for `sort -t$'\t'`, Hadoop streaming or Spark's `reduceByKey`.
//! - Bytes that are not UTF-8 (each such byte is a chunk of its own, see `pretokenize`)
//!   are written `\udc80`..`\udcff` (Python's `surrogateescape`: a lone low surrogate,
//!   which valid text never holds): `json.loads(key).encode("utf-8", "surrogateescape")`
//!   gives the bytes back.
//! - Keys are written in one canonical form (the shortest JSON escapes: `\"`, `\\`,
//!   `\b\f\n\r\t`, `\u00XX` for other control characters, everything else as it is), so
//!   the same chunk is always the same text and key-text reducers merge exactly.
//!
//! Merging sums the counts of equal chunks and keeps the smallest (shard key, rank);
//! that is associative and commutative, so files merge in any order and any tree, and
//! the merged file's lines come in (shard key, rank) order: the first-appearance order
//! of the whole corpus when each shard's key follows the input order. Two different
//! chunks with the same first position mean two shards shared a key: an error, since
//! the order of the merges' ties would then be a guess.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::Value;

use super::json::{json_string, scan_digits, BOM, BOM_MESSAGE};
use crate::error::{Error, Result};
use crate::input::{self, Source};
use crate::pretokenize::{ChunkCounts, SplitSpec, Splitter};

/// The counts-file format version this build reads and writes.
const COUNTS_VERSION: u64 = 1;

/// What a counts file's header says: how the text was cut into chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountsHeader {
    pub(crate) split: SplitSpec,
    /// The special tokens the records were cut at, in `--special` order (their ids
    /// follow the merges in a model trained from the counts).
    pub(crate) specials: Vec<String>,
}

impl CountsHeader {
    /// The header line, newline included.
    fn line(&self) -> String {
        let mut line = format!(
            "{{\"kind\":\"counts\",\"version\":{COUNTS_VERSION},\"split\":{},\"pattern\":{}",
            json_string(&self.split.name),
            json_string(&self.split.pattern)
        );
        if !self.specials.is_empty() {
            line.push_str(",\"special_tokens\":[");
            for (k, s) in self.specials.iter().enumerate() {
                if k > 0 {
                    line.push(',');
                }
                line.push_str(&json_string(s));
            }
            line.push(']');
        }
        line.push_str("}\n");
        line
    }
}

/// A shard key: where a shard stands in the corpus, as dotted decimal integers (`3`,
/// `3.1048576`), compared part by part (`2` < `2.0` < `2.5` < `10`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardKey(Vec<u64>);

impl ShardKey {
    /// Parses `3` or `3.1048576`: one or more decimal integers that fit a u64, joined by
    /// dots.
    pub fn parse(text: &str) -> Option<ShardKey> {
        parse_shard(text.as_bytes())
    }
}

impl std::fmt::Display for ShardKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (k, part) in self.0.iter().enumerate() {
            if k > 0 {
                f.write_str(".")?;
            }
            write!(f, "{part}")?;
        }
        if self.0.is_empty() {
            f.write_str("0")?;
        }
        Ok(())
    }
}

fn parse_shard(text: &[u8]) -> Option<ShardKey> {
    let mut parts = Vec::with_capacity(1);
    for part in text.split(|&b| b == b'.') {
        let (value, digits) = scan_digits(part);
        if digits == 0 || digits != part.len() {
            return None;
        }
        parts.push(value?);
    }
    Some(ShardKey(parts))
}

/// Appends `chunk` as a JSON string in the canonical form (module documentation).
fn push_key(buf: &mut Vec<u8>, chunk: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.push(b'"');
    let mut rest = chunk;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(_) => (rest.len(), 0),
            Err(e) => (
                e.valid_up_to(),
                e.error_len().unwrap_or(rest.len() - e.valid_up_to()),
            ),
        };
        for &b in &rest[..valid] {
            match b {
                b'"' => buf.extend_from_slice(b"\\\""),
                b'\\' => buf.extend_from_slice(b"\\\\"),
                b'\n' => buf.extend_from_slice(b"\\n"),
                b'\r' => buf.extend_from_slice(b"\\r"),
                b'\t' => buf.extend_from_slice(b"\\t"),
                0x08 => buf.extend_from_slice(b"\\b"),
                0x0c => buf.extend_from_slice(b"\\f"),
                0..=0x1f => {
                    buf.extend_from_slice(b"\\u00");
                    buf.push(HEX[(b >> 4) as usize]);
                    buf.push(HEX[(b & 15) as usize]);
                }
                _ => buf.push(b),
            }
        }
        for &b in &rest[valid..valid + bad] {
            buf.extend_from_slice(b"\\udc");
            buf.push(HEX[(b >> 4) as usize]);
            buf.push(HEX[(b & 15) as usize]);
        }
        rest = &rest[valid + bad..];
    }
    buf.push(b'"');
}

/// `chunk` as its key text (for messages).
fn key_text(chunk: &[u8]) -> String {
    let mut buf = Vec::new();
    push_key(&mut buf, chunk);
    String::from_utf8_lossy(&buf).into_owned()
}

fn push_line(buf: &mut Vec<u8>, chunk: &[u8], count: u64, shard: &[u8], rank: u64) {
    push_key(buf, chunk);
    buf.push(b'\t');
    buf.extend_from_slice(count.to_string().as_bytes());
    buf.push(b'\t');
    buf.extend_from_slice(shard);
    buf.push(b'\t');
    buf.extend_from_slice(rank.to_string().as_bytes());
    buf.push(b'\n');
}

/// Writes the counts of one shard (the map side): the header, then each distinct chunk
/// in first-appearance order, its rank being its place in that order.
pub(crate) fn write_counts(
    w: &mut dyn Write,
    header: &CountsHeader,
    counts: &ChunkCounts,
    shard: &ShardKey,
) -> io::Result<()> {
    w.write_all(header.line().as_bytes())?;
    let shard = shard.to_string().into_bytes();
    let mut buf = Vec::with_capacity(1 << 16);
    for (rank, (chunk, count)) in counts.iter().enumerate() {
        push_line(&mut buf, chunk, count, &shard, rank as u64);
        if buf.len() >= 1 << 16 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)
}

/// Reads the JSON string at the start of `line` (the key): its bytes, and the text
/// after its closing quote.
fn parse_key(line: &[u8]) -> std::result::Result<(std::borrow::Cow<'_, [u8]>, &[u8]), String> {
    let Some(body) = line.strip_prefix(b"\"") else {
        return Err("a count line starts with its chunk as a JSON string".to_string());
    };
    let unterminated = || "the chunk's JSON string has no closing quote".to_string();
    let control =
        || "a control character in the chunk's JSON string (write it escaped)".to_string();
    let not_utf8 = || "the chunk's JSON string is not UTF-8".to_string();
    let end = memchr::memchr2(b'"', b'\\', body).ok_or_else(unterminated)?;
    if body[end] == b'"' {
        let raw = &body[..end];
        if raw.iter().any(|&b| b < 0x20) {
            return Err(control());
        }
        if !raw.is_ascii() && std::str::from_utf8(raw).is_err() {
            return Err(not_utf8());
        }
        return Ok((raw.into(), &body[end + 1..]));
    }
    // Escapes: decode into a buffer.
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    loop {
        let Some(&b) = body.get(i) else {
            return Err(unterminated());
        };
        match b {
            b'"' => break,
            b'\\' => {
                let esc = *body.get(i + 1).ok_or_else(unterminated)?;
                i += 2;
                match esc {
                    b'"' | b'\\' | b'/' => out.push(esc),
                    b'b' => out.push(0x08),
                    b'f' => out.push(0x0c),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let hi = hex4(body.get(i..i + 4))?;
                        i += 4;
                        let c = match hi {
                            0xdc80..=0xdcff => {
                                out.push((hi - 0xdc00) as u8);
                                continue;
                            }
                            0xd800..=0xdbff => {
                                let lo = match body.get(i..i + 2) {
                                    Some(b"\\u") => hex4(body.get(i + 2..i + 6))?,
                                    _ => return Err(lone_surrogate(hi)),
                                };
                                if !(0xdc00..=0xdfff).contains(&lo) {
                                    return Err(lone_surrogate(hi));
                                }
                                i += 6;
                                0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                            }
                            0xdc00..=0xdfff => return Err(lone_surrogate(hi)),
                            c => c,
                        };
                        let c = char::from_u32(c).ok_or_else(|| lone_surrogate(hi))?;
                        let mut utf8 = [0u8; 4];
                        out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                    }
                    _ => {
                        return Err(format!(
                            "unknown escape \\{} in the chunk's JSON string",
                            esc as char
                        ))
                    }
                }
            }
            0..=0x1f => return Err(control()),
            _ => {
                // A run of plain bytes up to the next quote or escape.
                let run = memchr::memchr2(b'"', b'\\', &body[i..]).map_or(body.len(), |k| i + k);
                let raw = &body[i..run];
                if raw.iter().any(|&b| b < 0x20) {
                    return Err(control());
                }
                if std::str::from_utf8(raw).is_err() {
                    return Err(not_utf8());
                }
                out.extend_from_slice(raw);
                i = run;
            }
        }
    }
    Ok((out.into(), &body[i + 1..]))
}

fn lone_surrogate(u: u32) -> String {
    format!(
        "\\u{u:04x} in the chunk's JSON string is a surrogate that stands for no character \
         (only \\udc80..\\udcff stand for bytes)"
    )
}

fn hex4(digits: Option<&[u8]>) -> std::result::Result<u32, String> {
    let bad = || "a \\u escape needs four hex digits".to_string();
    let digits = digits.ok_or_else(bad)?;
    let text = std::str::from_utf8(digits).map_err(|_| bad())?;
    if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    u32::from_str_radix(text, 16).map_err(|_| bad())
}

/// A decimal u64 field (`what` names it in messages), then `\t` or the end of the line.
fn parse_field<'a>(text: &'a [u8], what: &str) -> std::result::Result<(u64, &'a [u8]), String> {
    let end = memchr::memchr(b'\t', text).unwrap_or(text.len());
    let (value, digits) = scan_digits(&text[..end]);
    if digits == 0 || digits != end {
        let found = String::from_utf8_lossy(&text[..end.min(40)]).into_owned();
        return Err(format!(
            "the {what} must be a decimal integer, found {found:?}"
        ));
    }
    let value = value.ok_or_else(|| format!("the {what} is past 2^64 - 1"))?;
    Ok((value, &text[end..]))
}

/// One count line: chunk bytes, count, shard-key text, rank.
type CountLine<'a> = (std::borrow::Cow<'a, [u8]>, u64, &'a [u8], u64);

fn parse_count_line(line: &[u8]) -> std::result::Result<CountLine<'_>, String> {
    let (chunk, rest) = parse_key(line)?;
    let fields = "a count line is: chunk (JSON string), TAB, count, TAB, shard key, TAB, rank";
    let rest = rest.strip_prefix(b"\t").ok_or(fields)?;
    let (count, rest) = parse_field(rest, "count")?;
    let rest = rest.strip_prefix(b"\t").ok_or(fields)?;
    let end = memchr::memchr(b'\t', rest).ok_or(fields)?;
    let shard = &rest[..end];
    let (rank, rest) = parse_field(&rest[end + 1..], "rank")?;
    if !rest.is_empty() {
        return Err(format!("{fields}, and nothing after the rank"));
    }
    Ok((chunk, count, shard, rank))
}

fn parse_header(line: &[u8]) -> std::result::Result<CountsHeader, String> {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(_) if line.starts_with(BOM) => return Err(BOM_MESSAGE.to_string()),
        Err(e) => return Err(format!("malformed counts header: {e}")),
    };
    let Value::Object(map) = value else {
        return Err("a counts header is a JSON object".to_string());
    };
    match map.get("kind").and_then(Value::as_str) {
        Some("counts") => {}
        Some(other) => {
            return Err(format!(
                "this is a {other:?} file, not a counts file (bpe-train --emit-counts writes those)"
            ))
        }
        None => return Err("the counts header has no \"kind\":\"counts\"".to_string()),
    }
    match map.get("version") {
        Some(v) if v.as_u64() == Some(COUNTS_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "unsupported counts format version {v} (this build reads version {COUNTS_VERSION})"
            ))
        }
        None => return Err("the counts header has no \"version\"".to_string()),
    }
    for key in map.keys() {
        if !matches!(
            key.as_str(),
            "kind" | "version" | "split" | "pattern" | "special_tokens"
        ) {
            return Err(format!("unknown field {key:?} in the counts header"));
        }
    }
    let (Some(name), Some(pattern)) = (
        map.get("split").and_then(Value::as_str),
        map.get("pattern").and_then(Value::as_str),
    ) else {
        return Err("the counts header needs \"split\" and \"pattern\" strings".to_string());
    };
    let split = SplitSpec {
        name: name.to_string(),
        pattern: pattern.to_string(),
    };
    Splitter::new(&split).map_err(|e| e.message().to_string())?;
    let mut specials = Vec::new();
    match map.get("special_tokens") {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item.as_str() {
                    Some(s) if !s.is_empty() && !specials.iter().any(|t| t == s) => {
                        specials.push(s.to_string())
                    }
                    _ => {
                        return Err(
                            "\"special_tokens\" holds distinct non-empty strings".to_string()
                        )
                    }
                }
            }
        }
        Some(_) => return Err("\"special_tokens\" is an array of strings".to_string()),
    }
    Ok(CountsHeader { split, specials })
}

/// Counts files merged (the reduce side): distinct chunks with summed counts and the
/// smallest first position (shard key, rank) each was seen at.
pub(crate) struct CountsMerger {
    header: Option<(CountsHeader, String)>,
    counts: ChunkCounts,
    /// Per chunk: its first position's shard (an index into `shards`) and rank.
    shard_of: Vec<u32>,
    rank_of: Vec<u64>,
    shards: Vec<ShardKey>,
    shard_ids: HashMap<ShardKey, u32>,
}

impl Default for CountsMerger {
    fn default() -> CountsMerger {
        CountsMerger::new()
    }
}

impl CountsMerger {
    /// Nothing read yet.
    pub(crate) fn new() -> CountsMerger {
        CountsMerger {
            header: None,
            counts: ChunkCounts::new(),
            shard_of: Vec::new(),
            rank_of: Vec::new(),
            shards: Vec::new(),
            shard_ids: HashMap::new(),
        }
    }

    /// The header read (the first one; all others agreed with it), if any.
    pub(crate) fn header(&self) -> Option<&CountsHeader> {
        self.header.as_ref().map(|(h, _)| h)
    }

    /// Reads counts files (or standard input) line by line.
    pub(crate) fn read_sources(&mut self, sources: &[Source], no_mmap: bool) -> Result<()> {
        let mut last_shard: (Vec<u8>, u32) = (Vec::new(), u32::MAX);
        input::for_each_line(sources, no_mmap, &mut |file, line_no, line| {
            self.read_line(line, file, line_no, &mut last_shard)
                .map_err(|message| Error::data(message).at_line(file, line_no))
        })
    }

    #[cfg(test)]
    /// Reads the counts in `data` (a whole file's bytes), `file` naming it in messages.
    pub(crate) fn read_bytes(&mut self, data: &[u8], file: &str) -> Result<()> {
        let mut last_shard: (Vec<u8>, u32) = (Vec::new(), u32::MAX);
        for (k, line) in input::Lines::new(data).enumerate() {
            let line_no = k as u64 + 1;
            self.read_line(line, file, line_no, &mut last_shard)
                .map_err(|message| Error::data(message).at_line(file, line_no))?;
        }
        Ok(())
    }

    fn check_header(&mut self, header: CountsHeader, at: &str) -> std::result::Result<(), String> {
        match &self.header {
            None => self.header = Some((header, at.to_string())),
            Some((first, first_at)) => {
                if first.split.pattern != header.split.pattern {
                    return Err(format!(
                        "split {} conflicts with split {} of the header at {first_at}: counts \
                         cut by different patterns cannot be merged",
                        header.split.name, first.split.name
                    ));
                }
                if first.specials != header.specials {
                    return Err(format!(
                        "special tokens {:?} conflict with {:?} of the header at {first_at}",
                        header.specials, first.specials
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads one line, a header or a count.
    fn read_line(
        &mut self,
        line: &[u8],
        file: &str,
        line_no: u64,
        last_shard: &mut (Vec<u8>, u32),
    ) -> std::result::Result<(), String> {
        if line.first() == Some(&b'{') || line.starts_with(BOM) {
            let header = parse_header(line)?;
            return self.check_header(header, &format!("{file}:{line_no}"));
        }
        if line.is_empty() {
            return Err("empty line (a counts file has no blank lines)".to_string());
        }
        let (chunk, count, shard_text, rank) = parse_count_line(line)?;
        let shard = if last_shard.1 != u32::MAX && last_shard.0 == shard_text {
            last_shard.1
        } else {
            let key = parse_shard(shard_text).ok_or_else(|| {
                format!(
                    "the shard key must be decimal integers joined by dots, found {:?}",
                    String::from_utf8_lossy(shard_text)
                )
            })?;
            let next = self.shards.len() as u32;
            let id = *self.shard_ids.entry(key.clone()).or_insert(next);
            if id == next {
                self.shards.push(key);
            }
            last_shard.0.clear();
            last_shard.0.extend_from_slice(shard_text);
            last_shard.1 = id;
            id
        };
        if self.counts.len() >= u32::MAX as usize - 1 {
            return Err("more than 2^32 - 2 distinct chunks".to_string());
        }
        let i = self.counts.add_at(&chunk, count);
        if i == self.shard_of.len() {
            self.shard_of.push(shard);
            self.rank_of.push(rank);
        } else {
            let (s0, r0) = (self.shard_of[i], self.rank_of[i]);
            if (&self.shards[shard as usize], rank) < (&self.shards[s0 as usize], r0) {
                self.shard_of[i] = shard;
                self.rank_of[i] = rank;
            }
            if self.counts.get(i).map(|(_, n)| n) == Some(u64::MAX) {
                return Err(format!(
                    "the counts of chunk {} add up past 2^64 - 1",
                    key_text(&chunk)
                ));
            }
        }
        Ok(())
    }

    /// The chunks' entry numbers in first-position order (shard key, then rank): the
    /// first-appearance order of the corpus. Two chunks with the same first position
    /// are an error (two shards were given the same key).
    pub(crate) fn ordered(&self) -> Result<Vec<u32>> {
        let mut by_key: Vec<u32> = (0..self.shards.len() as u32).collect();
        by_key.sort_unstable_by(|&a, &b| self.shards[a as usize].cmp(&self.shards[b as usize]));
        let mut ord = vec![0u32; self.shards.len()];
        for (o, &id) in by_key.iter().enumerate() {
            ord[id as usize] = o as u32;
        }
        let key = |i: u32| {
            (
                ord[self.shard_of[i as usize] as usize],
                self.rank_of[i as usize],
            )
        };
        let mut order: Vec<u32> = (0..self.counts.len() as u32).collect();
        order.sort_unstable_by_key(|&i| key(i));
        for w in order.windows(2) {
            if key(w[0]) == key(w[1]) {
                let (a, b) = (self.chunk(w[0]).0, self.chunk(w[1]).0);
                let (shard, rank) = (
                    &self.shards[self.shard_of[w[0] as usize] as usize],
                    self.rank_of[w[0] as usize],
                );
                return Err(Error::data(format!(
                    "chunks {} and {} both first occur at shard {shard} rank {rank}: two \
                     shards were counted with the same shard key (give each its own \
                     --shard KEY, in input order)",
                    key_text(a),
                    key_text(b)
                )));
            }
        }
        Ok(order)
    }

    /// Chunk `i` (an entry number) and its summed count.
    pub(crate) fn chunk(&self, i: u32) -> (&[u8], u64) {
        self.counts.get(i as usize).unwrap_or((&[], 0))
    }

    /// Writes the merged counts: the header, then the chunks in `order` (from
    /// [`CountsMerger::ordered`]), each with its smallest first position.
    pub(crate) fn write(
        &self,
        w: &mut dyn Write,
        header: &CountsHeader,
        order: &[u32],
    ) -> io::Result<()> {
        w.write_all(header.line().as_bytes())?;
        let shard_texts: Vec<Vec<u8>> = self
            .shards
            .iter()
            .map(|s| s.to_string().into_bytes())
            .collect();
        let mut buf = Vec::with_capacity(1 << 16);
        for &i in order {
            let (chunk, count) = self.chunk(i);
            let shard = &shard_texts[self.shard_of[i as usize] as usize];
            push_line(&mut buf, chunk, count, shard, self.rank_of[i as usize]);
            if buf.len() >= 1 << 16 {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
        w.write_all(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::below_usize;

    #[test]
    fn keys_round_trip_any_bytes() {
        let mut below = below_usize(24);
        let alphabet: Vec<&[u8]> = vec![
            b"a",
            b"\"",
            b"\\",
            b"\n",
            b"\t",
            b"\r",
            b"\x00",
            b"\x1f",
            b"\x7f",
            b"\x80",
            b"\xff",
            b"\xc3",
            "é".as_bytes(),
            "\u{2028}".as_bytes(),
            "😀".as_bytes(),
            b"/",
            b" ",
        ];
        for _ in 0..2000 {
            let len = below(8);
            let mut chunk = Vec::new();
            for _ in 0..len {
                chunk.extend_from_slice(alphabet[below(alphabet.len())]);
            }
            let mut buf = Vec::new();
            push_key(&mut buf, &chunk);
            assert!(!buf.contains(&b'\t') && !buf.contains(&b'\n'));
            assert!(std::str::from_utf8(&buf).is_ok());
            let (back, rest) = parse_key(&buf).expect("own key parses");
            assert_eq!(&*back, &chunk[..]);
            assert!(rest.is_empty());
            // Valid UTF-8 keys are exactly what serde_json writes.
            if let Ok(s) = std::str::from_utf8(&chunk) {
                assert_eq!(buf, serde_json::to_vec(s).unwrap());
            }
        }
    }

    #[test]
    fn keys_in_other_spellings_read_the_same() {
        let read = |s: &str| parse_key(s.as_bytes()).map(|(k, _)| k.into_owned());
        assert_eq!(read(r#""\u0041\/\u00e9""#), Ok("A/é".as_bytes().to_vec()));
        assert_eq!(read(r#""\ud83d\ude00""#), Ok("😀".as_bytes().to_vec()));
        assert_eq!(read(r#""\udcff\udc80""#), Ok(b"\xff\x80".to_vec()));
        assert!(read(r#""\ud83d""#).is_err());
        assert!(read(r#""\udc00""#).is_err());
        assert!(read(r#""\x""#).is_err());
        assert!(read("\"a\tb\"").is_err());
        assert!(read("\"abc").is_err());
        assert!(read("abc").is_err());
    }

    #[test]
    fn shard_keys_compare_part_by_part() {
        let k = |s: &str| ShardKey::parse(s).unwrap();
        assert!(k("2") < k("2.0"));
        assert!(k("2.0") < k("2.5"));
        assert!(k("2.5") < k("10"));
        assert!(k("9.1048576") < k("10.0"));
        assert_eq!(k("007").to_string(), "7");
        for bad in [
            "",
            ".",
            "1.",
            ".1",
            "a",
            "1..2",
            "-1",
            "18446744073709551616",
        ] {
            assert!(ShardKey::parse(bad).is_none(), "{bad:?}");
        }
    }
}
