//! What the hand-written JSON readers and writers of the formats share: the one integer
//! scanner, whitespace, string quoting, the byte-order-mark message, and a tree reader
//! that keeps each value's offset (for the formats other tools write, whose refusals
//! must name a line).

use std::borrow::Cow;

/// The leading ASCII digits of `text`: how many there are, and their value when it fits
/// a u64 (`None` past `u64::MAX`). Every reader of integers in the formats goes through
/// this, so they agree on what a number is and where it overflows.
#[inline]
pub(crate) fn scan_digits(text: &[u8]) -> (Option<u64>, usize) {
    let mut value = Some(0u64);
    let mut digits = 0;
    for &b in text {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(digit)));
        digits += 1;
    }
    (value, digits)
}

/// A JSON non-negative integer that fits a u64 at the start of `text` (no sign, no
/// leading zeros, no fraction or exponent after it), and the text after it.
#[inline]
pub(crate) fn json_u64(text: &[u8]) -> Option<(u64, &[u8])> {
    let (value, digits) = scan_digits(text);
    if digits == 0 || (digits > 1 && text[0] == b'0') {
        return None;
    }
    let rest = &text[digits..];
    if matches!(rest.first(), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((value?, rest))
}

/// The index of the first byte at or after `i` that is not JSON whitespace.
#[inline]
pub(crate) fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// `text` as a JSON string literal, quotes included.
pub(crate) fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a reader says of a line that starts with [`BOM`]: JSON text has none, and
/// without this the error would only say that the first character is unexpected.
pub(crate) const BOM_MESSAGE: &str =
    "the line starts with a UTF-8 byte-order mark (U+FEFF), which JSON lines may not have; \
     remove it (an editor's \"UTF-8 without BOM\", or sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)";

/// A JSON value read by [`parse_tree`], with the byte offset where it starts, so that a
/// reader can name the line of anything it refuses. Strings borrow from the text unless
/// they hold escapes.
#[derive(Debug)]
pub(crate) struct Node<'a> {
    pub(crate) at: usize,
    value: Json<'a>,
}

/// One member of a JSON object: the key (with the offset of its opening quote) and the
/// value. Members keep the file's order and duplicates; readers decide about those.
#[derive(Debug)]
pub(crate) struct Member<'a> {
    pub(crate) at: usize,
    pub(crate) key: Cow<'a, str>,
    pub(crate) value: Node<'a>,
}

/// The value of a [`Node`].
#[derive(Debug)]
enum Json<'a> {
    Null,
    Bool(bool),
    /// The number's text, as written (checked against JSON's grammar).
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    Object(Vec<Member<'a>>),
}

impl<'a> Node<'a> {
    /// The value as a non-negative integer that fits a u64 (`12`, not `12.0` or `-1`).
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self.value {
            Json::Number(text) => match json_u64(text.as_bytes()) {
                Some((value, [])) => Some(value),
                _ => None,
            },
            _ => None,
        }
    }

    /// The value as a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a boolean.
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self.value {
            Json::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// True for `null`.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self.value, Json::Null)
    }

    /// The members of an object.
    pub(crate) fn members(&self) -> Option<&[Member<'a>]> {
        match &self.value {
            Json::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The items of an array.
    pub(crate) fn items(&self) -> Option<&[Node<'a>]> {
        match &self.value {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The value of member `key` of an object (the first, if the key is repeated).
    pub(crate) fn get(&self, key: &str) -> Option<&Node<'a>> {
        self.members()?
            .iter()
            .find(|m| m.key == key)
            .map(|m| &m.value)
    }

    /// What kind of JSON value this is, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// A JSON syntax error: the byte offset where it was found and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) at: usize,
    pub(crate) message: String,
}

/// How deep arrays and objects may nest: enough for any real document (tokenizer.json
/// nests 5 deep), and a bound on the recursion a hostile file can cause.
const MAX_DEPTH: usize = 128;

/// Parses one JSON document (RFC 8259: UTF-8, no trailing commas, no comments, strings
/// with well-formed escapes and no lone surrogates) into a tree of [`Node`]s. The first
/// problem is returned with its offset.
pub(crate) fn parse_tree(bytes: &[u8]) -> Result<Node<'_>, SyntaxError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        // A character cut at the end: the text is cut short, which the parse says.
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(e) => {
            return Err(SyntaxError {
                at: e.valid_up_to(),
                message: "invalid UTF-8 (JSON text is UTF-8)".into(),
            })
        }
    };
    if text.as_bytes().starts_with(BOM) {
        return Err(SyntaxError {
            at: 0,
            message: BOM_MESSAGE.into(),
        });
    }
    let mut parser = TreeParser { text, pos: 0 };
    parser.pos = skip_ws(text.as_bytes(), 0);
    let node = parser.value(0)?;
    parser.pos = skip_ws(text.as_bytes(), parser.pos);
    if parser.pos < text.len() {
        return Err(parser.error("unexpected text after the end of the JSON value"));
    }
    Ok(node)
}

/// The 1-based line of byte offset `at` in `bytes`.
pub(crate) fn line_of(bytes: &[u8], at: usize) -> u64 {
    1 + memchr::memchr_iter(b'\n', &bytes[..at.min(bytes.len())]).count() as u64
}

struct TreeParser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> TreeParser<'a> {
    fn error(&self, message: impl Into<String>) -> SyntaxError {
        SyntaxError {
            at: self.pos,
            message: message.into(),
        }
    }

    fn eof(&self, inside: &str) -> SyntaxError {
        self.error(format!(
            "the JSON text ends inside {inside} (is the file cut short?)"
        ))
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Node<'a>, SyntaxError> {
        let at = self.pos;
        let bytes = self.text.as_bytes();
        let value = match self.peek() {
            None => return Err(self.eof("a value")),
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(self.error(format!("JSON nested deeper than {MAX_DEPTH} levels")));
                }
                self.pos += 1;
                let mut members = Vec::new();
                self.pos = skip_ws(bytes, self.pos);
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        self.pos = skip_ws(bytes, self.pos);
                        let key_at = self.pos;
                        match self.peek() {
                            Some(b'"') => {}
                            None => return Err(self.eof("an object")),
                            Some(_) => return Err(self.error("expected a string key")),
                        }
                        let key = self.string()?;
                        self.pos = skip_ws(bytes, self.pos);
                        match self.peek() {
                            Some(b':') => self.pos += 1,
                            None => return Err(self.eof("an object")),
                            Some(_) => return Err(self.error("expected ':' after an object key")),
                        }
                        self.pos = skip_ws(bytes, self.pos);
                        let value = self.value(depth + 1)?;
                        members.push(Member {
                            at: key_at,
                            key,
                            value,
                        });
                        self.pos = skip_ws(bytes, self.pos);
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            None => return Err(self.eof("an object")),
                            Some(_) => return Err(self.error("expected ',' or '}' in an object")),
                        }
                    }
                }
                Json::Object(members)
            }
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(self.error(format!("JSON nested deeper than {MAX_DEPTH} levels")));
                }
                self.pos += 1;
                let mut items = Vec::new();
                self.pos = skip_ws(bytes, self.pos);
                if self.peek() == Some(b']') {
                    self.pos += 1;
                } else {
                    loop {
                        self.pos = skip_ws(bytes, self.pos);
                        items.push(self.value(depth + 1)?);
                        self.pos = skip_ws(bytes, self.pos);
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            None => return Err(self.eof("an array")),
                            Some(_) => return Err(self.error("expected ',' or ']' in an array")),
                        }
                    }
                }
                Json::Array(items)
            }
            Some(b'"') => Json::String(self.string()?),
            Some(b't') => self.literal("true", Json::Bool(true))?,
            Some(b'f') => self.literal("false", Json::Bool(false))?,
            Some(b'n') => self.literal("null", Json::Null)?,
            Some(b'-' | b'0'..=b'9') => Json::Number(self.number()?),
            Some(_) => return Err(self.error("expected a JSON value")),
        };
        Ok(Node { at, value })
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, SyntaxError> {
        let rest = &self.text.as_bytes()[self.pos..];
        if rest.starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else if word.as_bytes().starts_with(rest) {
            Err(self.eof("a value"))
        } else {
            Err(self.error("expected a JSON value"))
        }
    }

    fn number(&mut self) -> Result<&'a str, SyntaxError> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut i = start;
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        let (_, int_digits) = scan_digits(&bytes[i.min(bytes.len())..]);
        if int_digits == 0 || (int_digits > 1 && bytes[i] == b'0') {
            self.pos = i;
            return Err(self.error("malformed number"));
        }
        i += int_digits;
        if bytes.get(i) == Some(&b'.') {
            let (_, frac) = scan_digits(&bytes[i + 1..]);
            if frac == 0 {
                self.pos = i;
                return Err(self.error("malformed number"));
            }
            i += 1 + frac;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let (_, exp) = scan_digits(&bytes[i.min(bytes.len())..]);
            if exp == 0 {
                self.pos = i;
                return Err(self.error("malformed number"));
            }
            i += exp;
        }
        self.pos = i;
        Ok(&self.text[start..i])
    }

    /// A string at `pos` (which holds its opening quote).
    fn string(&mut self) -> Result<Cow<'a, str>, SyntaxError> {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        let mut i = start;
        // Most strings have no escapes: borrow them.
        loop {
            match bytes.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.eof("a string"));
                }
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Borrowed(&self.text[start..i]));
                }
                Some(b'\\') => break,
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.error("control character in a string (write it as an escape)"));
                }
                Some(_) => i += 1,
            }
        }
        let mut owned = String::with_capacity(i - start + 16);
        owned.push_str(&self.text[start..i]);
        loop {
            match bytes.get(i) {
                None => {
                    self.pos = i;
                    return Err(self.eof("a string"));
                }
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Cow::Owned(owned));
                }
                Some(b'\\') => {
                    let escape = bytes.get(i + 1).copied();
                    let simple = match escape {
                        Some(b'"') => Some('"'),
                        Some(b'\\') => Some('\\'),
                        Some(b'/') => Some('/'),
                        Some(b'b') => Some('\u{8}'),
                        Some(b'f') => Some('\u{c}'),
                        Some(b'n') => Some('\n'),
                        Some(b'r') => Some('\r'),
                        Some(b't') => Some('\t'),
                        _ => None,
                    };
                    if let Some(c) = simple {
                        owned.push(c);
                        i += 2;
                        continue;
                    }
                    match escape {
                        None => {
                            self.pos = i + 1;
                            return Err(self.eof("a string"));
                        }
                        Some(b'u') => {}
                        Some(_) => {
                            self.pos = i;
                            return Err(self.error("unknown escape in a string"));
                        }
                    }
                    self.pos = i;
                    let unit = self.hex4(i + 2)?;
                    i += 6;
                    let c = if (0xD800..0xDC00).contains(&unit) {
                        let low = if bytes.get(i) == Some(&b'\\') && bytes.get(i + 1) == Some(&b'u')
                        {
                            self.hex4(i + 2)?
                        } else {
                            0
                        };
                        if !(0xDC00..0xE000).contains(&low) {
                            return Err(self.error(format!(
                                "lone surrogate \\u{unit:04X} in a string (no Unicode character)"
                            )));
                        }
                        i += 6;
                        char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                    } else {
                        char::from_u32(unit)
                    };
                    let Some(c) = c else {
                        return Err(self.error(format!(
                            "lone surrogate \\u{unit:04X} in a string (no Unicode character)"
                        )));
                    };
                    owned.push(c);
                }
                Some(&b) if b < 0x20 => {
                    self.pos = i;
                    return Err(self.error("control character in a string (write it as an escape)"));
                }
                Some(_) => {
                    // Copy up to the next quote, backslash or control character.
                    let run = bytes[i..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .unwrap_or(bytes.len() - i);
                    owned.push_str(&self.text[i..i + run]);
                    i += run;
                }
            }
        }
    }

    fn hex4(&mut self, at: usize) -> Result<u32, SyntaxError> {
        let digits = self.text.as_bytes().get(at..at + 4);
        match digits {
            None => Err(self.eof("a string")),
            Some(d) => std::str::from_utf8(d)
                .ok()
                .filter(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|s| u32::from_str_radix(s, 16).ok())
                .ok_or_else(|| self.error("malformed \\u escape in a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_one_way() {
        assert_eq!(json_u64(b"0,"), Some((0, &b","[..])));
        assert_eq!(json_u64(b"42]"), Some((42, &b"]"[..])));
        assert_eq!(
            json_u64(b"18446744073709551615"),
            Some((u64::MAX, &b""[..]))
        );
        assert_eq!(json_u64(b"18446744073709551616"), None);
        assert_eq!(json_u64(b"01"), None);
        assert_eq!(json_u64(b"1.5"), None);
        assert_eq!(json_u64(b"1e3"), None);
        assert_eq!(json_u64(b"-1"), None);
        assert_eq!(json_u64(b""), None);
        assert_eq!(scan_digits(b"99999999999999999999x"), (None, 20));
    }

    /// A random JSON document: nested arrays and objects of numbers, literals and strings
    /// with escapes, surrogate pairs and raw non-ASCII, with random whitespace.
    fn random_json(below: &mut dyn FnMut(usize) -> usize, depth: usize, out: &mut String) {
        const WS: [&str; 4] = ["", " ", "\n", "\t "];
        const NUMBERS: [&str; 8] = [
            "0",
            "-0",
            "12",
            "1.5",
            "-2e3",
            "3E+2",
            "1.0e-2",
            "18446744073709551616",
        ];
        const PIECES: [&str; 10] = [
            "a",
            "é",
            "😀",
            "\\\"",
            "\\\\",
            "\\n",
            "\\u00e9",
            "\\ud83d\\ude00",
            "\\/",
            " ",
        ];
        out.push_str(WS[below(4)]);
        match below(if depth > 4 { 4 } else { 6 }) {
            0 => out.push_str(["null", "true", "false"][below(3)]),
            1 => out.push_str(NUMBERS[below(NUMBERS.len())]),
            2 | 3 => {
                out.push('"');
                for _ in 0..below(5) {
                    out.push_str(PIECES[below(PIECES.len())]);
                }
                out.push('"');
            }
            4 => {
                out.push('[');
                for k in 0..below(4) {
                    if k > 0 {
                        out.push(',');
                    }
                    random_json(below, depth + 1, out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                for k in 0..below(4) {
                    if k > 0 {
                        out.push(',');
                    }
                    out.push_str(&format!(
                        "{}\"k{}\"{}:",
                        WS[below(4)],
                        below(3),
                        WS[below(4)]
                    ));
                    random_json(below, depth + 1, out);
                }
                out.push('}');
            }
        }
        out.push_str(WS[below(4)]);
    }

    fn to_value(node: &Node) -> serde_json::Value {
        use serde_json::Value;
        match &node.value {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(text) => serde_json::from_str(text).unwrap(),
            Json::String(s) => Value::String(s.to_string()),
            Json::Array(items) => Value::Array(items.iter().map(to_value).collect()),
            // serde_json keeps the last of a repeated key.
            Json::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.to_string(), to_value(&m.value)))
                    .collect(),
            ),
        }
    }

    /// The tree reader accepts exactly the documents serde_json accepts and reads the same
    /// values, on random documents and on random damage to them (a byte cut, doubled or
    /// replaced); its errors point inside the text.
    #[test]
    fn tree_reader_agrees_with_serde_json() {
        let mut below = crate::test_rng::below_usize(0x5EED_0150);
        const DAMAGE: &[u8] = b"{}[],:\"\\ 0123456789.eE+-aflnrstu\x01\xff";
        let mut accepted = 0;
        for case in 0..4000 {
            let mut doc = String::new();
            random_json(&mut below, 0, &mut doc);
            let mut bytes = doc.into_bytes();
            if case % 2 == 1 && !bytes.is_empty() {
                let at = below(bytes.len());
                match below(3) {
                    0 => {
                        bytes.remove(at);
                    }
                    1 => bytes.insert(at, bytes[at]),
                    _ => bytes[at] = DAMAGE[below(DAMAGE.len())],
                }
            }
            let ours = parse_tree(&bytes);
            let theirs = serde_json::from_slice::<serde_json::Value>(&bytes);
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(
                        &to_value(a),
                        b,
                        "case {case}: {:?}",
                        String::from_utf8_lossy(&bytes)
                    );
                    accepted += 1;
                }
                (Err(e), Err(_)) => assert!(e.at <= bytes.len(), "case {case}"),
                _ => panic!(
                    "case {case}: ours {:?}, serde_json {:?}, on {:?}",
                    ours.as_ref().map(|_| ()),
                    theirs.as_ref().map(|_| ()),
                    String::from_utf8_lossy(&bytes)
                ),
            }
        }
        assert!(accepted > 2000, "{accepted}");
    }

    #[test]
    fn tree_reader_errors_say_where_and_what() {
        let err = parse_tree(b"{\n  \"a\": [1, 2,\n").unwrap_err();
        assert_eq!(line_of(b"{\n  \"a\": [1, 2,\n", err.at), 3);
        assert!(err.message.contains("ends inside"), "{}", err.message);
        let err = parse_tree(b"\"\\ud800\"").unwrap_err();
        assert!(err.message.contains("lone surrogate"), "{}", err.message);
        let deep = "[".repeat(200);
        assert!(parse_tree(deep.as_bytes())
            .unwrap_err()
            .message
            .contains("nested deeper"));
        let tree = parse_tree(b"{\"k\": 7, \"s\": \"x\\ny\"}").unwrap();
        assert_eq!(tree.get("k").and_then(Node::as_u64), Some(7));
        assert_eq!(tree.get("s").and_then(Node::as_str), Some("x\ny"));
    }
}
