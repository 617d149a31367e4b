//! The suite's model files (format version 1, `docs/formats.md`, "Model files"):
//! the header, dispatched by `kind` (word models are read by [`super::word_file`]), and
//! BPE models, read and written.
//!
//! Reading checks everything the format promises (consecutive ids, pairs defined before
//! use and merged once, tokens within 4 GiB, special ids beyond the merges) and names
//! the line of the first problem, whichever check finds it. Lines in exactly the form
//! [`write_bpe`] writes are read by a hand parser; anything else goes through serde_json
//! (the JSON parser took ~17 of the ~20 ms a 32k model took to load).

use std::io::{self, Write};

use serde_json::{Map, Value};

use super::json::{json_string, json_u64, BOM, BOM_MESSAGE};
use crate::error::{Error, Result};
use crate::input::Lines;
use crate::model::tables::PAIR_ID_BITS;
use crate::model::{self, BpeModel, Model, ModelSource, PairIds, PairTable, SpecialToken};
use crate::pretokenize::SplitSpec;

/// The model-file format version this build reads and writes.
const FORMAT_VERSION: u64 = 1;

fn header_error(file: &str, message: impl Into<String>) -> Error {
    Error::data(message).at_line(file, 1)
}

#[cfg(test)]
/// Parses a model file's bytes.
pub(crate) fn parse(bytes: &[u8], source: ModelSource, file: &str) -> Result<Model> {
    parse_beside(bytes, source, file, || ()).0
}

/// Parses a model file's bytes and runs `beside` (the file's hash, for [`load`](super::load)) on a
/// second thread while the work is single-threaded: beside the whole parse of a BPE
/// model (the hash took ~1 ms of the ~10 ms a 32k model took to load), beside the table
/// build of a large word model, whose lines are read on both cores first (its 26 MB hash
/// took ~25 ms; run beside the two halves it slowed both).
pub(crate) fn parse_beside<T: Send>(
    bytes: &[u8],
    source: ModelSource,
    file: &str,
    beside: impl FnOnce() -> T + Send,
) -> (Result<Model>, T) {
    let mut lines = Lines::new(bytes);
    let Some(first) = lines.next() else {
        let e = Error::data("empty model file (no header line)").in_file(file);
        return (Err(e), beside());
    };
    let header = match serde_json::from_slice::<Value>(first) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return (
                Err(header_error(file, "model header is not a JSON object")),
                beside(),
            )
        }
        Err(_) if first.starts_with(BOM) => {
            return (Err(header_error(file, BOM_MESSAGE)), beside())
        }
        Err(e) => {
            let e = header_error(file, format!("malformed model header: {e}"));
            return (Err(e), beside());
        }
    };
    let version_error = match header.get("version") {
        Some(v) if v.as_u64() == Some(FORMAT_VERSION) => None,
        Some(v) => Some(format!(
            "unsupported model format version {v} (this build reads version {FORMAT_VERSION})"
        )),
        None => Some("model header has no \"version\"".to_string()),
    };
    if let Some(message) = version_error {
        return (Err(header_error(file, message)), beside());
    }
    let body = &bytes[first.len() + 1.min(bytes.len() - first.len())..];
    match header.get("kind").and_then(Value::as_str) {
        Some("bpe") => crate::parallel::both(
            true,
            || {
                // Room for every merge up front: the shortest valid merge line,
                // `{"id":256,"pair":[1,2]}` and its newline, is 24 bytes (pages of the
                // room never used are never touched).
                let lines = body.len() / 24 + 1;
                parse_bpe(&header, body, lines, source, file).map(Model::Bpe)
            },
            beside,
        ),
        Some("word") => {
            let parallel_min = super::word_file::PARALLEL_MODEL_BYTES;
            let (model, side) = super::word_file::parse_model_text_beside(
                &header,
                body,
                parallel_min,
                source,
                file,
                beside,
            );
            (model.map(Model::Word), side)
        }
        Some(other) => {
            let message = format!("unknown model kind {other:?} (expected \"bpe\" or \"word\")");
            (Err(header_error(file, message)), beside())
        }
        None => (
            Err(header_error(file, "model header has no \"kind\"")),
            beside(),
        ),
    }
}

/// What is wrong with merge `k` (0-based) when its token takes the tokens past
/// [`model::MAX_TOKEN_BYTES`] in all.
fn over_limit(k: usize) -> String {
    format!(
        "merge {} takes the tokens past 4 GiB in all (the model format's limit)",
        256 + k
    )
}

/// A merge line's id and pair, as read (not yet checked).
type MergeFields = (u64, (u64, u64));

/// The id and pair of the merge line at the start of `text` when it is in exactly the
/// form [`write_bpe`] writes it, with a display string that needs no JSON escapes:
/// `{"id":N,"pair":[A,B],"text":"T","count":C}` (or `"hex"`; `T` with no `\u`
/// escape; no count in exports from other formats), then a newline or the end; and the text after that line. Anything else
/// returns `None` and goes through the JSON parser, which also words the errors.
/// Measured: the JSON parser took ~17 ms of the ~20 ms a 32k model took to load.
/// Reading on from the line's `}` instead of finding each line's end first: parse in
/// process 1.88 -> 1.66 ms, a whole run 4.14 -> 4.07 ms (medians).
fn parse_plain_merge(text: &[u8]) -> Option<(MergeFields, &[u8])> {
    let (id, rest) = json_u64(text.strip_prefix(b"{\"id\":")?)?;
    let (a, rest) = json_u64(rest.strip_prefix(b",\"pair\":[")?)?;
    let (b, rest) = json_u64(rest.strip_prefix(b",")?)?;
    let rest = rest.strip_prefix(b"],\"")?;
    let rest = rest
        .strip_prefix(b"text\":\"")
        .or_else(|| rest.strip_prefix(b"hex\":\""))?;
    // The string's end, past the escapes JSON gives one character (not `\u`, whose
    // surrogate rules are left to the JSON parser). Measured: 2,533 of the 32k model's
    // 32,512 merge lines have such escapes (a `\n`, a quote); read by the JSON parser,
    // they took ~1 ms of the ~9 ms load.
    //
    // Most display strings are ASCII, which needs no UTF-8 check (32k model: parse
    // 2.19 -> 2.05 ms without a call per ASCII line).
    let (mut end, mut ascii) = (0, true);
    loop {
        match *rest.get(end)? {
            b'"' => break,
            b'\\' if b"\"\\/bfnrt".contains(rest.get(end + 1)?) => end += 2,
            b'\\' => return None,
            b if b < 0x20 => return None,
            b => {
                ascii &= b < 0x80;
                end += 1;
            }
        }
    }
    if !ascii {
        std::str::from_utf8(&rest[..end]).ok()?;
    }
    let rest = rest[end..].strip_prefix(b"\"")?;
    // The count, when training wrote one (exports from other formats have none).
    let rest = match rest.strip_prefix(b",\"count\":") {
        Some(count) => json_u64(count)?.1,
        None => rest,
    };
    let rest = rest.strip_prefix(b"}")?;
    let after = match rest.split_first() {
        None => rest,
        Some((b'\n', after)) => after,
        Some(_) => return None,
    };
    Some(((id, (a, b)), after))
}

/// The id and pair of any valid merge line (fields in any order, escapes, no count).
fn parse_json_merge(line: &[u8]) -> std::result::Result<MergeFields, String> {
    let object = match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err("expected a merge object".to_string()),
        Err(e) => return Err(format!("malformed merge line: {e}")),
    };
    for key in object.keys() {
        if !matches!(key.as_str(), "id" | "pair" | "text" | "hex" | "count") {
            return Err(format!("unknown merge field {key:?}"));
        }
    }
    let Some(id) = object.get("id").and_then(Value::as_u64) else {
        return Err("merge has no integer \"id\"".to_string());
    };
    let pair = match object.get("pair") {
        Some(Value::Array(items)) if items.len() == 2 => {
            match (items[0].as_u64(), items[1].as_u64()) {
                (Some(a), Some(b)) => (a, b),
                _ => return Err("\"pair\" must hold two integer ids".to_string()),
            }
        }
        _ => return Err("merge has no \"pair\" of two ids".to_string()),
    };
    Ok((id, pair))
}

/// The pair of a merge that must have id `expected`, or what is wrong with it.
fn check_merge(
    id: u64,
    pair: (u64, u64),
    expected: u64,
) -> std::result::Result<(u32, u32), String> {
    if id != expected {
        return Err(format!(
            "merge id {id} out of order (expected {expected}: ids are consecutive from 256)"
        ));
    }
    for member in [pair.0, pair.1] {
        if member >= expected {
            return Err(format!(
                "pair member {member} is not defined before merge {expected}"
            ));
        }
    }
    Ok((pair.0 as u32, pair.1 as u32))
}

fn parse_bpe(
    header: &Map<String, Value>,
    body: &[u8],
    lines_hint: usize,
    source: ModelSource,
    file: &str,
) -> Result<BpeModel> {
    for key in header.keys() {
        if !matches!(
            key.as_str(),
            "kind" | "version" | "split" | "pattern" | "special_tokens" | "base_bytes"
        ) {
            return Err(header_error(file, format!("unknown header field {key:?}")));
        }
    }
    let split_name = match header.get("split") {
        None => "none".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(header_error(file, "\"split\" must be a string")),
    };
    let split = match (split_name.as_str(), header.get("pattern")) {
        ("none", None | Some(Value::Null)) => None,
        ("none", Some(_)) => {
            return Err(header_error(
                file,
                "\"split\" is \"none\" but a \"pattern\" is given",
            ))
        }
        (_, Some(Value::String(p))) => Some(SplitSpec {
            name: split_name.clone(),
            pattern: p.clone(),
        }),
        (_, _) => {
            return Err(header_error(
                file,
                format!("split {split_name:?} needs a \"pattern\" string"),
            ))
        }
    };
    if let Some(spec) = &split {
        crate::pretokenize::Splitter::new(spec)
            .map_err(|e| header_error(file, e.message().to_string()))?;
    }
    let base_id_of_byte = match header.get("base_bytes") {
        None | Some(Value::Null) => model::identity_bytes(),
        Some(Value::Array(items)) if items.len() == 256 => {
            let mut map = [u32::MAX; 256];
            for (id, item) in items.iter().enumerate() {
                let byte = item
                    .as_u64()
                    .filter(|&b| b < 256)
                    .ok_or_else(|| header_error(file, "\"base_bytes\" entries must be 0..255"))?;
                if map[byte as usize] != u32::MAX {
                    return Err(header_error(
                        file,
                        format!("\"base_bytes\" names byte {byte} twice"),
                    ));
                }
                map[byte as usize] = id as u32;
            }
            map
        }
        Some(_) => {
            return Err(header_error(
                file,
                "\"base_bytes\" must be an array of 256 bytes",
            ))
        }
    };
    let specials = parse_specials(header.get("special_tokens"), file)?;

    // The lines first, up to the first bad one; then the checks across lines, over the
    // merges read: a pair merged twice, tokens past the format's limit. Merge `k` is on
    // line `k + 2` (every line after the header is a merge), so whichever check finds
    // it, the problem on the earliest line is the one reported.
    let mut merges: Vec<(u32, u32)> = Vec::with_capacity(lines_hint);
    let mut stopped: Option<Error> = None;
    let mut rest = body;
    while !rest.is_empty() {
        let fields = match parse_plain_merge(rest) {
            Some((fields, after)) => {
                rest = after;
                Ok(fields)
            }
            None => {
                let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
                let line = &rest[..end];
                rest = rest.get(end + 1..).unwrap_or_default();
                parse_json_merge(line)
            }
        };
        let expected = 256 + merges.len() as u64;
        match fields.and_then(|(id, pair)| check_merge(id, pair, expected)) {
            Ok(pair) => merges.push(pair),
            Err(message) => {
                let line_no = merges.len() as u64 + 2;
                stopped = Some(Error::data(message).at_line(file, line_no));
                break;
            }
        }
    }
    let at_merge = |k: usize, message: String| Error::data(message).at_line(file, k as u64 + 2);
    // A slot table, which the encoder then reads in place (a hash map took ~25 ns per
    // insert, and the encoder built its own table from it); a map for models whose ids
    // do not fit a slot (over 2 M merges).
    let (merge_ids, twice) = if 256 + merges.len() < 1 << PAIR_ID_BITS {
        let mut table = PairTable::with_capacity(merges.len());
        // `insert` cannot say `None` here (the table has room for every merge, and ids
        // are below 2^21); it would be reported as a pair merged twice.
        let twice = merges
            .iter()
            .enumerate()
            .position(|(k, &(a, b))| table.insert(a, b, 256 + k as u32) != Some(true));
        (PairIds::from_table(table), twice)
    } else {
        let mut map: ahash::AHashMap<(u32, u32), u32> = ahash::AHashMap::new();
        map.reserve(merges.len());
        let twice = (merges.iter().enumerate())
            .position(|(k, &pair)| map.insert(pair, 256 + k as u32).is_some());
        (map.into(), twice)
    };
    // Token lengths only: the bytes are derived from the merges where they are needed
    // (a few lines can ask for gigabytes of them, see `model::token_table`).
    let distinct = twice.unwrap_or(merges.len());
    let token_offsets =
        model::token_offsets(&merges[..distinct]).map_err(|k| at_merge(k, over_limit(k)))?;
    if let Some(k) = twice {
        let (a, b) = merges[k];
        return Err(at_merge(k, format!("pair [{a},{b}] is merged twice")));
    }
    if let Some(error) = stopped {
        return Err(error);
    }
    let first_free = 256 + merges.len() as u32;
    for special in &specials {
        if special.id < first_free {
            return Err(header_error(
                file,
                format!(
                    "special token {:?} has id {}, which a merge already uses",
                    special.text, special.id
                ),
            ));
        }
    }
    Ok(BpeModel::from_merge_list(
        source,
        split,
        specials,
        base_id_of_byte,
        merges,
        merge_ids,
        token_offsets,
    ))
}

fn parse_specials(value: Option<&Value>, file: &str) -> Result<Vec<SpecialToken>> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(header_error(file, "\"special_tokens\" must be an array")),
    };
    let mut specials: Vec<SpecialToken> = Vec::new();
    for item in items {
        let text = item.get("text").and_then(Value::as_str);
        let id = item.get("id").and_then(Value::as_u64);
        let (Some(text), Some(id)) = (text, id) else {
            return Err(header_error(
                file,
                "each special token needs a \"text\" and an integer \"id\"",
            ));
        };
        if text.is_empty() || id > u64::from(u32::MAX) {
            return Err(header_error(
                file,
                "special tokens need non-empty text and an id below 2^32",
            ));
        }
        if specials
            .iter()
            .any(|s| s.text == text || u64::from(s.id) == id)
        {
            return Err(header_error(
                file,
                format!("special token {text:?} or id {id} appears twice"),
            ));
        }
        specials.push(SpecialToken {
            text: text.to_string(),
            id: id as u32,
        });
    }
    Ok(specials)
}

/// Writes a BPE model file: header, then one line per merge with display fields.
pub(crate) fn write_bpe(
    w: &mut dyn Write,
    split: Option<&SplitSpec>,
    specials: &[SpecialToken],
    merges: &[(u32, u32)],
    counts: &[u64],
) -> io::Result<()> {
    write_lines(
        w,
        split,
        specials,
        &model::identity_bytes(),
        merges,
        Some(counts),
    )
}

/// Writes any BPE model as a model file (a rank table by its recovered merges, see
/// [`model::merge_list`]), with `base_bytes` when its byte order is not the identity and
/// without counts, which only training knows.
pub(crate) fn write_model(w: &mut dyn Write, model: &BpeModel) -> Result<()> {
    let merges = model::merge_list::merge_list(model).map_err(Error::data)?;
    write_lines(
        w,
        model.split.as_ref(),
        &model.specials,
        &model.base_id_of_byte,
        &merges,
        None,
    )
    .map_err(Error::write)
}

fn write_lines(
    w: &mut dyn Write,
    split: Option<&SplitSpec>,
    specials: &[SpecialToken],
    base_id_of_byte: &[u32; 256],
    merges: &[(u32, u32)],
    counts: Option<&[u64]>,
) -> io::Result<()> {
    let (bytes, offsets) = model::token_table(base_id_of_byte, merges)
        .map_err(|k| io::Error::new(io::ErrorKind::InvalidData, over_limit(k)))?;
    let mut header = String::from("{\"kind\":\"bpe\",\"version\":1,\"split\":");
    match split {
        None => header.push_str("\"none\",\"pattern\":null"),
        Some(spec) => {
            header.push_str(&json_string(&spec.name));
            header.push_str(",\"pattern\":");
            header.push_str(&json_string(&spec.pattern));
        }
    }
    if !specials.is_empty() {
        header.push_str(",\"special_tokens\":[");
        for (k, s) in specials.iter().enumerate() {
            if k > 0 {
                header.push(',');
            }
            header.push_str(&format!(
                "{{\"text\":{},\"id\":{}}}",
                json_string(&s.text),
                s.id
            ));
        }
        header.push(']');
    }
    if *base_id_of_byte != model::identity_bytes() {
        let mut byte_of_id = [0u32; 256];
        for (byte, &id) in base_id_of_byte.iter().enumerate() {
            byte_of_id[id as usize] = byte as u32;
        }
        let list: Vec<String> = byte_of_id.iter().map(u32::to_string).collect();
        header.push_str(&format!(",\"base_bytes\":[{}]", list.join(",")));
    }
    header.push_str("}\n");
    w.write_all(header.as_bytes())?;

    let mut line = Vec::with_capacity(128);
    for (k, &(a, b)) in merges.iter().enumerate() {
        let id = 256 + k;
        let token = &bytes[offsets[id] as usize..offsets[id + 1] as usize];
        line.clear();
        line.extend_from_slice(format!("{{\"id\":{id},\"pair\":[{a},{b}],").as_bytes());
        match std::str::from_utf8(token) {
            Ok(text) => {
                line.extend_from_slice(b"\"text\":");
                line.extend_from_slice(json_string(text).as_bytes());
            }
            Err(_) => {
                line.extend_from_slice(b"\"hex\":\"");
                for byte in token {
                    line.extend_from_slice(format!("{byte:02x}").as_bytes());
                }
                line.push(b'"');
            }
        }
        match counts {
            Some(counts) => line.extend_from_slice(
                format!(",\"count\":{}}}\n", counts.get(k).copied().unwrap_or(0)).as_bytes(),
            ),
            None => line.extend_from_slice(b"}\n"),
        }
        w.write_all(&line)?;
    }
    Ok(())
}
