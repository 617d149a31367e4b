//! Id streams as NDJSON: one JSON array of non-negative integers per line (a record),
//! and header objects (`{"model":...}`) that say which model the records after them use.
//! Parsing is hand-written for the array form (the hot path of `bpe-decode` and `attn`);
//! headers go through serde_json.

use std::io::{self, Write};

use serde_json::{Map, Value};

use super::json::{json_string, scan_digits, skip_ws, BOM, BOM_MESSAGE};
use crate::identity::ModelSource;

/// One line of an id stream.
#[derive(Debug, PartialEq)]
pub enum IdLine {
    /// A header object: the records that follow use the model it names.
    Header(Map<String, Value>),
    /// A record: token ids.
    Ids(Vec<u32>),
}

/// Parses a JSON array of non-negative integers that fit in u32 into `out` (cleared
/// first). Errors are short lowercase phrases for `WHERE: WHAT` messages.
pub fn parse_ids_into(line: &[u8], out: &mut Vec<u32>) -> std::result::Result<(), String> {
    out.clear();
    let mut i = skip_ws(line, 0);
    if line.get(i) != Some(&b'[') {
        return Err(expected_array(line));
    }
    i = skip_ws(line, i + 1);
    if line.get(i) == Some(&b']') {
        return trailing(line, i + 1);
    }
    loop {
        let start = i;
        let (value, digits) = scan_digits(&line[i..]);
        i += digits;
        let value = value.filter(|&v| v <= u64::from(u32::MAX));
        if digits > 0 && value.is_none() {
            return Err(format!(
                "id {} is out of range (ids are below 2^32)",
                number_text(line, start)
            ));
        }
        if i == start {
            return Err(match line.get(i) {
                Some(b'-') => format!("negative id {}", number_text(line, start + 1)),
                Some(_) => "expected a non-negative integer id".to_string(),
                None => "unterminated array".to_string(),
            });
        }
        if i - start > 1 && line[start] == b'0' {
            return Err("invalid number (leading zero)".to_string());
        }
        if matches!(line.get(i), Some(b'.' | b'e' | b'E')) {
            return Err(format!(
                "id {} is not an integer",
                String::from_utf8_lossy(&line[start..(i + 1).min(line.len())])
            ));
        }
        out.push(value.unwrap_or(0) as u32);
        i = skip_ws(line, i);
        match line.get(i) {
            Some(b',') => i = skip_ws(line, i + 1),
            Some(b']') => return trailing(line, i + 1),
            Some(_) => return Err("expected ',' or ']' in array".to_string()),
            None => return Err("unterminated array".to_string()),
        }
    }
}

fn number_text(line: &[u8], start: usize) -> String {
    let end = line[start..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .map_or(line.len(), |n| start + n);
    String::from_utf8_lossy(&line[start..end]).into_owned()
}

fn trailing(line: &[u8], i: usize) -> std::result::Result<(), String> {
    if skip_ws(line, i) == line.len() {
        Ok(())
    } else {
        Err("unexpected text after the array".to_string())
    }
}

fn expected_array(line: &[u8]) -> String {
    if line.starts_with(BOM) {
        BOM_MESSAGE.to_string()
    } else if skip_ws(line, 0) == line.len() {
        "empty line where a record (a JSON array of ids) was expected".to_string()
    } else {
        "expected a JSON array of ids".to_string()
    }
}

/// Parses a header line (a JSON object).
pub fn parse_header(line: &[u8]) -> std::result::Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("expected a header object".to_string()),
        Err(e) => Err(format!("malformed header: {e}")),
    }
}

/// Classifies and parses one line of an id stream.
pub fn parse_id_line(line: &[u8]) -> std::result::Result<IdLine, String> {
    if is_header(line) {
        return parse_header(line).map(IdLine::Header);
    }
    let mut ids = Vec::new();
    parse_ids_into(line, &mut ids)?;
    Ok(IdLine::Ids(ids))
}

/// True when the line is a header object rather than a record.
pub fn is_header(line: &[u8]) -> bool {
    line.get(skip_ws(line, 0)) == Some(&b'{')
}

/// Appends `ids` as a compact JSON array (no newline) to `buf`.
pub fn push_ids(buf: &mut Vec<u8>, ids: &[u32]) {
    buf.push(b'[');
    for (k, &id) in ids.iter().enumerate() {
        if k > 0 {
            buf.push(b',');
        }
        push_u32(buf, id);
    }
    buf.push(b']');
}

/// Appends the decimal digits of `value`.
pub fn push_u32(buf: &mut Vec<u8>, mut value: u32) {
    let mut digits = [0u8; 10];
    let mut n = digits.len();
    loop {
        n -= 1;
        digits[n] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[n..]);
}

/// Writes `ids` as one NDJSON record line.
pub fn write_ids(w: &mut dyn Write, ids: &[u32]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(ids.len() * 6 + 3);
    push_ids(&mut buf, ids);
    buf.push(b'\n');
    w.write_all(&buf)
}

/// The header line of an id stream for `model` (without newline).
pub fn stream_header(source: &ModelSource) -> String {
    match source {
        ModelSource::Builtin(name) => format!("{{\"model\":{}}}", json_string(name)),
        ModelSource::File { name, sha256 } => format!(
            "{{\"model\":{},\"sha256\":{}}}",
            json_string(name),
            json_string(sha256)
        ),
    }
}

/// What an id-stream header names: a model name and, for files, its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamModel {
    pub name: String,
    pub sha256: Option<String>,
}

/// Reads an id-stream header object.
pub fn parse_stream_header(
    header: &Map<String, Value>,
) -> std::result::Result<StreamModel, String> {
    let name = header
        .get("model")
        .and_then(Value::as_str)
        .ok_or("header has no \"model\" name")?
        .to_string();
    let sha256 = match header.get("sha256") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("header \"sha256\" must be a string".to_string()),
    };
    Ok(StreamModel { name, sha256 })
}

/// True when `source` is the model a stream header names (same built-in, or same file
/// content).
pub fn same_model(source: &ModelSource, named: &StreamModel) -> bool {
    match (source, &named.sha256) {
        (ModelSource::Builtin(name), None) => *name == named.name,
        (ModelSource::File { sha256, .. }, Some(hash)) => sha256 == hash,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> std::result::Result<Vec<u32>, String> {
        let mut out = Vec::new();
        parse_ids_into(text.as_bytes(), &mut out).map(|()| out)
    }

    #[test]
    fn parses_arrays_and_rejects_malformed_ones() {
        assert_eq!(ids("[]"), Ok(vec![]));
        assert_eq!(ids(" [ 1 , 22,333 ] \r"), Ok(vec![1, 22, 333]));
        assert_eq!(ids("[4294967295]"), Ok(vec![u32::MAX]));
        assert!(ids("[4294967296]").unwrap_err().contains("out of range"));
        assert!(ids("[-1]").unwrap_err().contains("negative"));
        assert!(ids("[1.5]").unwrap_err().contains("not an integer"));
        assert!(ids("[1,]").is_err());
        assert!(ids("[1 2]").is_err());
        assert!(ids("[01]").is_err());
        assert!(ids("[1] x").is_err());
        assert!(ids("[1").is_err());
        assert!(ids("").unwrap_err().contains("empty line"));
        assert!(ids("\"x\"").is_err());
    }

    #[test]
    fn writes_compact_arrays() {
        let mut buf = Vec::new();
        push_ids(&mut buf, &[0, 7, 4294967295, 10]);
        assert_eq!(buf, b"[0,7,4294967295,10]");
        assert!(matches!(
            parse_id_line(br#"{"model":"x"}"#),
            Ok(IdLine::Header(_))
        ));
    }
}
