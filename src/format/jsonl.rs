//! JSONL documents (`--field NAME`): one JSON object per line, whose string member NAME
//! is one document, read exactly — its bytes are the string's value, newlines, `\u0000`
//! and characters written as surrogate-pair escapes included (`docs/formats.md`,
//! "JSONL input").
//!
//! Invariants: a line yields a document only when it is valid UTF-8 and one complete
//! JSON object (whitespace around it allowed, a `\r` before the `\n` included) whose
//! member NAME is a string with no lone surrogate escape. Everything else is a
//! [`LineError`] naming what was found: a blank line, bad JSON (with its column), a
//! value that is not an object, no member NAME (the members there are listed), `null`,
//! or a value of another type (named). A member given twice counts once, the last one,
//! as in Python's `json` (Megatron's reader), jq and serde_json's `Value`. `""` is an
//! empty document.
//!
//! The parser is serde_json's, driven by a visitor that skips every other member without
//! building it (serde's `IgnoredAny`) and borrows the string when it has no escapes; a
//! twin test holds it equal to the plain reading through `serde_json::Value` on seeded
//! random lines. The line's UTF-8 is checked first, in one pass (std's validator), so that
//! invalid bytes anywhere — in other members too — are named as such.
//!
//! Performance note: on the 1 GB benchmark JSONL (about 2 KB per line) the reading runs
//! at about 1.5 GB/s on one core of the AMD EPYC host; the encoder behind it at about
//! 27 MB/s per core, so reading the JSON costs under 2% of an encoding run.

use std::borrow::Cow;
use std::fmt;

use serde_core::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::json::{json_string, skip_ws, BOM, BOM_MESSAGE};
use crate::error::Error;
use crate::input::{self, Source};

/// What kind of line yields no document: the classes `--skip-invalid` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    /// An empty line, or one of whitespace only.
    Blank,
    /// Not valid UTF-8, not one JSON value, or not an object.
    Malformed,
    /// The object has no member NAME.
    Missing,
    /// The member is `null`.
    Null,
    /// The member is a number, a boolean, an array or an object.
    NotString,
}

impl Problem {
    /// Every problem, in the order summaries list them.
    const ALL: [Problem; 5] = [
        Problem::Blank,
        Problem::Malformed,
        Problem::Missing,
        Problem::Null,
        Problem::NotString,
    ];

    /// A short description for counts: `3 without "text"`.
    fn label(self, field: &str) -> String {
        let field = json_string(field);
        match self {
            Problem::Blank => "blank".to_string(),
            Problem::Malformed => "not a JSON object".to_string(),
            Problem::Missing => format!("without {field}"),
            Problem::Null => format!("{field} null"),
            Problem::NotString => format!("{field} not a string"),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a line gave no document, and the message for `FILE:LINE: MESSAGE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    problem: Problem,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn fail<T>(problem: Problem, message: impl Into<String>) -> Result<T, LineError> {
    Err(LineError {
        problem,
        message: message.into(),
    })
}

/// Appends the document of one JSONL line (without its `\n`) to `out`: the value of
/// member `field`, unescaped. On error `out` is left as it was.
pub fn document(line: &[u8], field: &str, out: &mut Vec<u8>) -> Result<(), LineError> {
    if line.starts_with(BOM) {
        return fail(Problem::Malformed, BOM_MESSAGE);
    }
    if skip_ws(line, 0) == line.len() {
        return fail(
            Problem::Blank,
            "blank line where a JSON object was expected",
        );
    }
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(e) => {
            return fail(
                Problem::Malformed,
                format!("invalid UTF-8 at column {}", e.valid_up_to() + 1),
            )
        }
    };
    let mut parser = serde_json::Deserializer::from_str(text);
    let found = parser
        .deserialize_any(ObjectVisitor { field })
        .and_then(|found| parser.end().map(|()| found))
        .map_err(|e| LineError {
            problem: Problem::Malformed,
            message: format!("bad JSON: {}", without_position(&e)),
        })?;
    match found {
        Found::Str(value) => {
            out.extend_from_slice(value.as_bytes());
            Ok(())
        }
        Found::Missing => fail(
            Problem::Missing,
            format!(
                "no field {} (keys: {})",
                json_string(field),
                keys_of(text).unwrap_or_default()
            ),
        ),
        Found::Null => fail(
            Problem::Null,
            format!("field {} is null", json_string(field)),
        ),
        Found::Other(kind) => fail(
            Problem::NotString,
            format!("field {} is {kind}, not a string", json_string(field)),
        ),
        Found::NotObject(kind) => fail(
            Problem::Malformed,
            format!("expected a JSON object, found {kind}"),
        ),
    }
}

/// serde_json's message without its ` at line 1 column N` (a line is parsed alone, so
/// the line is always 1); the column is kept.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let Some(message) = text.strip_suffix(&suffix) else {
        return text;
    };
    // serde_json's two words for an escape \ud800-\udfff not in a pair (it meets them
    // only there), in plainer words.
    let message = match message {
        "lone leading surrogate in hex escape" | "unexpected end of hex escape" => {
            "a lone surrogate escape (\\ud800-\\udfff not in a pair), which is no character"
        }
        other => other,
    };
    if e.column() > 0 {
        format!("{message} at column {}", e.column())
    } else {
        message.to_string()
    }
}

/// The members of a valid object line, for the "no field" message (read again only on
/// that error path): `id, url`, or `none`.
fn keys_of(text: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(text).ok()? else {
        return None;
    };
    if map.is_empty() {
        return Some("none".to_string());
    }
    const SHOWN: usize = 8;
    let mut keys: Vec<String> = map.keys().take(SHOWN).map(|k| key_text(k)).collect();
    if map.len() > SHOWN {
        keys.push(format!("and {} more", map.len() - SHOWN));
    }
    Some(keys.join(", "))
}

/// A key as the message shows it: bare when it is a plain word, else quoted.
fn key_text(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.');
    if plain {
        key.to_string()
    } else {
        json_string(key)
    }
}

/// What the object held at the field.
enum Found<'de> {
    Str(Cow<'de, str>),
    Missing,
    Null,
    Other(&'static str),
    NotObject(&'static str),
}

/// Reads the top-level value: an object (its members scanned for the field), or
/// anything else (consumed and named).
struct ObjectVisitor<'f> {
    field: &'f str,
}

impl<'de> Visitor<'de> for ObjectVisitor<'_> {
    type Value = Found<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found<'de>, A::Error> {
        let mut found = Found::Missing;
        while let Some(is_field) = map.next_key_seed(KeyIs(self.field))? {
            if is_field {
                // Last one wins, as in Python's json and serde_json's Value.
                found = map.next_value_seed(ValueSeed)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::NotObject("an array"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("a string"))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("a number"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Found<'de>, E> {
        Ok(Found::NotObject("null"))
    }
}

/// A member name, compared with the field without being copied.
struct KeyIs<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

/// The field's value: a string (borrowed when it has no escapes), or its kind.
struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Found<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Found<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Found<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Owned(s.to_string())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Found<'de>, E> {
        Ok(Found::Str(Cow::Owned(s)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Found<'de>, E> {
        Ok(Found::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Found<'de>, E> {
        Ok(Found::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Found<'de>, E> {
        Ok(Found::Other("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Found<'de>, E> {
        Ok(Found::Other("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Found<'de>, E> {
        Ok(Found::Other("a number"))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Found<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an object"))
    }
}

/// Calls `each` with the document of every line of the JSONL `sources`, in order (see
/// [`document`]). A line without one is an error at `FILE:LINE`, or, with `skip_invalid`,
/// counted in the result and left out. Memory stays bounded by the longest line.
pub(crate) fn for_each_document(
    sources: &[Source],
    no_mmap: bool,
    field: &str,
    skip_invalid: bool,
    each: &mut dyn FnMut(&[u8]) -> crate::Result<()>,
) -> crate::Result<Skipped> {
    let mut skipped = Skipped::default();
    let mut doc = Vec::new();
    input::for_each_line(sources, no_mmap, &mut |file, line_no, line| {
        doc.clear();
        match document(line, field, &mut doc) {
            Ok(()) => each(&doc),
            Err(why) if skip_invalid => {
                skipped.add(&why, file, line_no);
                Ok(())
            }
            Err(why) => Err(Error::data(why.message).at_line(file, line_no)),
        }
    })?;
    Ok(skipped)
}

/// Lines skipped by `--skip-invalid`: how many, by problem, and the first one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub lines: u64,
    by_problem: [u64; 5],
    /// `FILE:LINE: MESSAGE` of the first line skipped.
    first: Option<String>,
}

impl Skipped {
    /// Counts one skipped line, at `file:line`.
    pub(crate) fn add(&mut self, error: &LineError, file: &str, line: u64) {
        self.lines += 1;
        self.by_problem[error.problem.index()] += 1;
        if self.first.is_none() {
            self.first = Some(format!("{file}:{line}: {}", error.message));
        }
    }

    /// How many lines were skipped for `problem`.
    fn count(&self, problem: Problem) -> u64 {
        self.by_problem[problem.index()]
    }

    /// The stderr summary: `skipped 3 lines (2 without "text", 1 blank); first at
    /// docs.jsonl:7: no field "text" (keys: id)`.
    pub fn summary(&self, field: &str) -> String {
        let parts: Vec<String> = Problem::ALL
            .iter()
            .filter(|&&p| self.count(p) > 0)
            .map(|&p| format!("{} {}", self.count(p), p.label(field)))
            .collect();
        let mut line = format!(
            "skipped {} line{} ({})",
            self.lines,
            if self.lines == 1 { "" } else { "s" },
            parts.join(", ")
        );
        if let Some(first) = &self.first {
            line.push_str("; first at ");
            line.push_str(first);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::below_usize;

    type Rng = dyn FnMut(usize) -> usize;

    fn doc(line: &str) -> Result<Vec<u8>, LineError> {
        let mut out = b"kept".to_vec();
        let result = document(line.as_bytes(), "text", &mut out);
        match result {
            Ok(()) => Ok(out[4..].to_vec()),
            Err(e) => {
                assert_eq!(out, b"kept", "an error leaves the buffer as it was");
                Err(e)
            }
        }
    }

    fn message(line: &str) -> String {
        doc(line).unwrap_err().message
    }

    #[test]
    fn reads_the_string_exactly() {
        assert_eq!(doc(r#"{"text":"a\nb"}"#).unwrap(), b"a\nb");
        assert_eq!(doc(r#"{"text":"nul\u0000!"}"#).unwrap(), b"nul\0!");
        assert_eq!(
            doc(r#"{"text":"\ud83d\ude00 \u00e9"}"#).unwrap(),
            "\u{1F600} é".as_bytes()
        );
        assert_eq!(doc(r#"{"text":""}"#).unwrap(), b"");
        assert_eq!(doc(" {\"id\":1, \"text\" : \"x\"} \r").unwrap(), b"x");
        assert_eq!(doc(r#"{"text":"a","text":"b"}"#).unwrap(), b"b");
        assert_eq!(
            doc(r#"{"meta":{"text":1},"text":"top","x":[{"text":null}]}"#).unwrap(),
            b"top"
        );
    }

    #[test]
    fn names_what_it_found() {
        assert_eq!(
            message(r#"{"id":1,"url":"u"}"#),
            r#"no field "text" (keys: id, url)"#
        );
        assert_eq!(message("{}"), r#"no field "text" (keys: none)"#);
        assert_eq!(message(r#"{"text":null}"#), r#"field "text" is null"#);
        assert_eq!(
            message(r#"{"text":12}"#),
            r#"field "text" is a number, not a string"#
        );
        assert_eq!(
            message(r#"{"text":["a"]}"#),
            r#"field "text" is an array, not a string"#
        );
        assert_eq!(
            message(r#"["text"]"#),
            "expected a JSON object, found an array"
        );
        assert_eq!(doc("").unwrap_err().problem, Problem::Blank);
        assert_eq!(doc(" \r").unwrap_err().problem, Problem::Blank);
        assert!(message(r#"{"text":"a"} x"#).starts_with("bad JSON: trailing characters at column"));
        assert!(message(r#"{"text":"a""#).starts_with("bad JSON: "));
        assert!(message(r#"{"text":"\ud800"}"#).contains("surrogate"));
        assert!(message("\u{feff}{\"text\":\"a\"}").contains("byte-order mark"));
        let mut out = Vec::new();
        let bad = document(b"{\"text\":\"a\xff\"}", "text", &mut out).unwrap_err();
        assert_eq!(bad.message, "invalid UTF-8 at column 11");
        let bad = document(b"{\"x\":\"\xc3\",\"text\":\"a\"}", "text", &mut out).unwrap_err();
        assert_eq!(bad.problem, Problem::Malformed);
    }

    /// The twin: the plain reading through `serde_json::Value`.
    fn through_value(line: &str) -> Option<Option<String>> {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        let serde_json::Value::Object(map) = value else {
            return Some(None);
        };
        Some(map.get("text").and_then(|v| v.as_str()).map(str::to_string))
    }

    fn random_string(rng: &mut Rng) -> String {
        let pieces = [
            "a",
            "text",
            " ",
            "\\n",
            "\\\"",
            "\\\\",
            "\\u0000",
            "\\ud83d\\ude00",
            "é",
            "日本",
            "\\t",
            "\\/",
            "\\u00e9",
            "x y",
            "\u{1F600}",
            "\\b\\f\\r",
        ];
        let mut s = String::from("\"");
        for _ in 0..rng(6) {
            s.push_str(pieces[rng(pieces.len())]);
        }
        s.push('"');
        s
    }

    fn random_value(rng: &mut Rng, depth: usize) -> String {
        match rng(if depth > 2 { 5 } else { 7 }) {
            0 => random_string(rng),
            1 => "null".to_string(),
            2 => ["0", "-1.5e3", "12", "1E2"][rng(4)].to_string(),
            3 => ["true", "false"][rng(2)].to_string(),
            4 => random_string(rng),
            5 => {
                let items: Vec<String> =
                    (0..rng(3)).map(|_| random_value(rng, depth + 1)).collect();
                format!("[{}]", items.join(","))
            }
            _ => random_object(rng, depth + 1),
        }
    }

    fn random_object(rng: &mut Rng, depth: usize) -> String {
        let keys = [
            "\"text\"",
            "\"id\"",
            "\"te\\u0078t\"",
            "\"url\"",
            "\"Text\"",
        ];
        let members: Vec<String> = (0..rng(4))
            .map(|_| {
                let ws = [" ", "", "\t"][rng(3)];
                format!(
                    "{ws}{}{ws}:{ws}{}",
                    keys[rng(keys.len())],
                    random_value(rng, depth)
                )
            })
            .collect();
        format!("{{{}}}", members.join(","))
    }

    #[test]
    fn agrees_with_serde_json_value_on_random_lines() {
        let mut rng = below_usize(0x5EED_150A);
        let mut seen = [0usize; 3];
        for _ in 0..20_000 {
            let mut line = random_object(&mut rng, 0);
            // Now and then a damaged line.
            match rng(10) {
                0 => {
                    let mut cut = rng(line.len() + 1);
                    while !line.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    line.truncate(cut);
                }
                1 => line.push_str(["x", " ", ",", "}"][rng(4)]),
                _ => {}
            }
            let mut out = Vec::new();
            let ours = document(line.as_bytes(), "text", &mut out);
            match through_value(&line) {
                None => {
                    assert!(ours.is_err(), "{line:?} is not JSON but gave a document");
                    seen[0] += 1;
                }
                Some(None) => {
                    assert!(ours.is_err(), "{line:?}");
                }
                Some(Some(text)) => {
                    assert_eq!(ours, Ok(()), "{line:?}");
                    assert_eq!(out, text.as_bytes(), "{line:?}");
                    seen[1] += 1;
                }
            }
            if ours.is_err() {
                seen[2] += 1;
            }
        }
        assert!(
            seen.iter().all(|&n| n > 1000),
            "both outcomes exercised: {seen:?}"
        );
    }

    #[test]
    fn skipped_lines_are_counted_by_problem() {
        let mut skipped = Skipped::default();
        let missing = doc(r#"{"id":1}"#).unwrap_err();
        let blank = doc("").unwrap_err();
        skipped.add(&missing, "a.jsonl", 3);
        skipped.add(&blank, "a.jsonl", 9);
        skipped.add(&missing, "a.jsonl", 10);
        assert_eq!(skipped.lines, 3);
        assert_eq!(
            skipped.summary("text"),
            r#"skipped 3 lines (1 blank, 2 without "text"); first at a.jsonl:3: no field "text" (keys: id)"#
        );
    }
}
