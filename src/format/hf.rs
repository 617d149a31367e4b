//! HF tokenizers' `tokenizer.json`, read and written for byte-level BPE only, exactly.
//!
//! # What is read
//!
//! A `tokenizer.json` is taken only when the suite reproduces HF's ids exactly: model
//! `BPE` whose vocab gives the 256 single bytes ids 0..255 and merge `r` id `256 + r`
//! (its two members made before it); pre-tokenizer `ByteLevel` (`add_prefix_space`
//! false; `use_regex` true is the `gpt2` split, false is none), or `Split(Regex)`
//! (`Isolated`, or `Removed` with `invert`, which is `findall`) followed by
//! `ByteLevel(use_regex: false)`; decoder `ByteLevel`; added tokens that are special
//! (`lstrip`, `rstrip`, `single_word` false). Everything else that changes ids is refused
//! with the file, the line and the feature: a normalizer, other pre-tokenizers, decoders
//! or model types, `byte_fallback`, `dropout`, a subword prefix or word suffix,
//! truncation, padding, non-special added tokens, ids in another order (HF's
//! `BpeTrainer` puts special tokens first), and `ignore_merges` unless every token
//! merges to itself (then it changes nothing). A post-processor changes only what
//! `encode(text, add_special_tokens=True)` adds around the ids: it is accepted, with a
//! note when it adds tokens. HF matches added tokens in any text; `bpe-encode` does so
//! with `--allowed-special all` (its default is HF's `encode_special_tokens=True`).
//!
//! # What is written
//!
//! The layout `tokenizers` itself writes (pretty, one vocab entry and one merge per
//! line), with merges in the `"a b"` form that every release since 0.13 reads (the
//! `["a","b"]` form is refused by those before 0.20), the pre-tokenizer and the decoder
//! always (a file with only its model loads, but drops bytes), and special tokens as
//! added tokens only.
//!
//! # Byte-level strings
//!
//! Token bytes are stored as characters: bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand
//! for themselves, the other 68 bytes, in increasing order, for U+0100 + n (space is
//! `Ġ`, newline `Ċ`).
//!
//! Reading builds no `serde_json::Value`: [`super::json::parse_tree`] keeps the offset
//! of every value, so that a refusal names its line (a 200k-merge file reads in ~0.1 s).

use std::io::Write;

use ahash::AHashMap;

use super::json::{json_string, line_of, parse_tree, Node};
use crate::error::{Error, Result};
use crate::model::merge_list::{ids_by_bytes, is_rank_table, merge_bpe, merge_list, show_bytes};
use crate::model::{BpeModel, ModelSource, SpecialToken, MAX_TOKEN_BYTES};
use crate::pretokenize::{self, SplitSpec, Splitter};

/// The character byte `b` stands as in a byte-level string.
pub(crate) fn byte_char(b: u8) -> char {
    let stands_for_itself = |b: u8| matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    if stands_for_itself(b) {
        char::from(b)
    } else {
        let n = (0..b).filter(|&x| !stands_for_itself(x)).count() as u32;
        char::from_u32(0x100 + n).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

/// The byte-level string of `bytes`.
fn byte_string(bytes: &[u8], table: &[char; 256]) -> String {
    bytes.iter().map(|&b| table[b as usize]).collect()
}

/// The bytes of a byte-level string, or the first character that stands for no byte.
fn string_bytes(text: &str, back: &Back, out: &mut Vec<u8>) -> std::result::Result<(), char> {
    for c in text.chars() {
        match back.get(c as usize) {
            Some(&b) if b != NO_BYTE => out.push(b as u8),
            _ => return Err(c),
        }
    }
    Ok(())
}

/// Byte of each code point below U+0144, or [`NO_BYTE`].
type Back = [u16; 0x144];
const NO_BYTE: u16 = u16::MAX;

/// `[byte_char(b) for b in 0..256]` and its inverse.
fn tables() -> ([char; 256], Back) {
    let forward: [char; 256] = std::array::from_fn(|b| byte_char(b as u8));
    let mut back = [NO_BYTE; 0x144];
    for (b, &c) in forward.iter().enumerate() {
        back[c as usize] = b as u16;
    }
    (forward, back)
}

/// Where a refusal points: the file and its bytes, for the line of an offset.
struct Place<'a> {
    file: &'a str,
    bytes: &'a [u8],
}

impl Place<'_> {
    fn at(&self, at: usize, message: impl Into<String>) -> Error {
        Error::data(message).at_line(self.file, line_of(self.bytes, at))
    }

    /// A feature that the suite cannot reproduce exactly.
    fn refuse(&self, at: usize, feature: impl std::fmt::Display, why: &str) -> Error {
        self.at(
            at,
            format!("{feature} is not supported: {why} (bpe-encode would not give HF's ids)"),
        )
    }

    /// Checks that the object `node` (called `what` in messages) has only `allowed` keys,
    /// each once.
    fn fields(&self, node: &Node, what: &str, allowed: &[&str]) -> Result<()> {
        let Some(members) = node.members() else {
            return Err(self.at(
                node.at,
                format!("{what} must be an object, not {}", node.kind()),
            ));
        };
        for (i, m) in members.iter().enumerate() {
            if !allowed.contains(&m.key.as_ref()) {
                return Err(self.at(
                    m.at,
                    format!(
                        "unknown field {:?} in {what} (this build cannot tell what it does to the ids)",
                        m.key
                    ),
                ));
            }
            if members[..i].iter().any(|o| o.key == m.key) {
                return Err(self.at(m.at, format!("field {:?} appears twice in {what}", m.key)));
            }
        }
        Ok(())
    }

    /// A boolean member (`default` when absent or null).
    fn flag(&self, node: &Node, key: &str, what: &str, default: bool) -> Result<bool> {
        match node.get(key) {
            None => Ok(default),
            Some(v) if v.is_null() => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.at(v.at, format!("{what}.{key} must be true or false"))),
        }
    }
}

/// The `"type"` of an object, or `None`.
fn type_of<'n>(node: &'n Node) -> Option<&'n str> {
    node.get("type").and_then(Node::as_str)
}

/// Whether `data` looks like a `tokenizer.json`: a JSON object whose first key is one of
/// the top-level keys `tokenizers` writes (or `"version"` with a string value; the
/// suite's model files start with `"kind"`, or `"version"` with a number).
pub(crate) fn looks_like(data: &[u8]) -> bool {
    let data = data.strip_prefix(super::json::BOM).unwrap_or(data);
    let i = super::json::skip_ws(data, 0);
    if data.get(i) != Some(&b'{') {
        return false;
    }
    let i = super::json::skip_ws(data, i + 1);
    let rest = &data[i..];
    const KEYS: [&[u8]; 8] = [
        b"\"truncation\"",
        b"\"padding\"",
        b"\"added_tokens\"",
        b"\"normalizer\"",
        b"\"pre_tokenizer\"",
        b"\"post_processor\"",
        b"\"decoder\"",
        b"\"model\"",
    ];
    if KEYS.iter().any(|k| rest.starts_with(k)) {
        return true;
    }
    if let Some(after) = rest.strip_prefix(b"\"version\"") {
        let j = super::json::skip_ws(after, 0);
        if after.get(j) == Some(&b':') {
            return after.get(super::json::skip_ws(after, j + 1)) == Some(&b'"');
        }
    }
    false
}

/// A `tokenizer.json` read as a model, with notes on what HF does that the ids alone do
/// not show (a post-processor adding tokens, a custom pattern applied as `findall`).
pub(crate) fn read(
    bytes: &[u8],
    source: ModelSource,
    file: &str,
) -> Result<(BpeModel, Vec<String>)> {
    let place = Place { file, bytes };
    let root =
        parse_tree(bytes).map_err(|e| place.at(e.at, format!("malformed JSON: {}", e.message)))?;
    let mut notes = Vec::new();
    place.fields(
        &root,
        "the tokenizer",
        &[
            "version",
            "truncation",
            "padding",
            "added_tokens",
            "normalizer",
            "pre_tokenizer",
            "post_processor",
            "decoder",
            "model",
        ],
    )?;
    match root.get("version") {
        Some(v) if v.as_str() == Some("1.0") => {}
        Some(v) => {
            return Err(place.at(
                v.at,
                "unsupported tokenizer.json version (HF reads only \"1.0\")",
            ))
        }
        None => {
            return Err(place.at(
                root.at,
                "no \"version\" (a tokenizer.json has \"version\": \"1.0\")",
            ))
        }
    }
    for key in ["truncation", "padding"] {
        if let Some(v) = root.get(key).filter(|v| !v.is_null()) {
            return Err(place.refuse(
                v.at,
                key,
                "bpe-encode never cuts or pads a sequence; set it to null",
            ));
        }
    }
    if let Some(v) = root.get("normalizer").filter(|v| !v.is_null()) {
        let empty_sequence = type_of(v) == Some("Sequence")
            && v.get("normalizers")
                .and_then(Node::items)
                .is_some_and(<[_]>::is_empty);
        if !empty_sequence {
            return Err(place.refuse(
                v.at,
                format_args!("normalizer {}", type_of(v).unwrap_or("(no type)")),
                "the suite tokenizes the raw bytes",
            ));
        }
    }
    let (split, findall) = read_pre_tokenizer(&place, root.get("pre_tokenizer"), root.at)?;
    if let (true, Some(spec)) = (findall, &split) {
        if spec.name == "custom" {
            notes.push(
                "the split pattern is applied as findall (Split Removed, invert): HF drops text \
                 the pattern does not match, bpe-encode keeps it as a chunk, so the ids agree \
                 where the pattern matches every character"
                    .to_string(),
            );
        }
    }
    match root.get("decoder") {
        Some(d) if type_of(d) == Some("ByteLevel") => {}
        Some(d) => {
            let what = if d.is_null() {
                "null"
            } else {
                type_of(d).unwrap_or("(no type)")
            };
            return Err(place.refuse(
                d.at,
                format_args!("decoder {what}"),
                "only the ByteLevel decoder turns the tokens back into their bytes",
            ));
        }
        None => {
            return Err(place.refuse(
                root.at,
                "a tokenizer without a decoder",
                "only the ByteLevel decoder turns the tokens back into their bytes",
            ))
        }
    }
    if let Some(p) = root.get("post_processor") {
        post_processor_notes(p, &mut notes);
    }
    let Some(model) = root.get("model") else {
        return Err(place.at(root.at, "no \"model\""));
    };
    let specials_node = root.get("added_tokens");
    let (model, ignore_merges) = read_model(&place, model, specials_node, source, split)?;
    if ignore_merges {
        check_ignore_merges(&place, root.get("model").map_or(0, |m| m.at), &model)?;
    }
    Ok((model, notes))
}

/// The split pattern of the pre-tokenizer (`None`: the whole text is one sequence) and
/// whether HF applies it as `findall` (dropping what it does not match).
fn read_pre_tokenizer(
    place: &Place,
    node: Option<&Node>,
    root_at: usize,
) -> Result<(Option<SplitSpec>, bool)> {
    let Some(node) = node.filter(|n| !n.is_null()) else {
        return Err(place.refuse(
            node.map_or(root_at, |n| n.at),
            "a tokenizer without a pre-tokenizer",
            "without ByteLevel, HF gives the model characters, not bytes, and drops those \
             not in the vocab",
        ));
    };
    let steps: Vec<&Node> = match type_of(node) {
        Some("Sequence") => {
            place.fields(node, "pre_tokenizer", &["type", "pretokenizers"])?;
            match node.get("pretokenizers").and_then(Node::items) {
                Some(items) => items.iter().collect(),
                None => {
                    return Err(place.at(node.at, "pre_tokenizer.pretokenizers must be an array"))
                }
            }
        }
        _ => vec![node],
    };
    let names: Vec<&str> = steps
        .iter()
        .map(|s| type_of(s).unwrap_or("(no type)"))
        .collect();
    match steps[..] {
        [byte_level] if type_of(byte_level) == Some("ByteLevel") => {
            let use_regex = read_byte_level(place, byte_level)?;
            Ok((
                use_regex.then(|| pretokenize::split_of_pattern(pretokenize::GPT2_PATTERN)),
                false,
            ))
        }
        [split, byte_level]
            if type_of(split) == Some("Split") && type_of(byte_level) == Some("ByteLevel") =>
        {
            if read_byte_level(place, byte_level)? {
                return Err(place.refuse(
                    byte_level.at,
                    "ByteLevel with use_regex true after a Split",
                    "it splits the pieces again by the GPT-2 pattern",
                ));
            }
            let (spec, findall) = read_split(place, split)?;
            Ok((Some(spec), findall))
        }
        _ => Err(place.refuse(
            node.at,
            format_args!("pre-tokenizer {}", names.join(" + ")),
            "only ByteLevel, or Split(Regex) then ByteLevel, give the suite's byte-level chunks",
        )),
    }
}

/// Checks a ByteLevel pre-tokenizer; returns its `use_regex`.
fn read_byte_level(place: &Place, node: &Node) -> Result<bool> {
    place.fields(
        node,
        "the ByteLevel pre-tokenizer",
        &["type", "add_prefix_space", "trim_offsets", "use_regex"],
    )?;
    if place.flag(node, "add_prefix_space", "ByteLevel", true)? {
        return Err(place.refuse(
            node.get("add_prefix_space").map_or(node.at, |v| v.at),
            "ByteLevel add_prefix_space",
            "it puts a space before the text",
        ));
    }
    place.flag(node, "use_regex", "ByteLevel", true)
}

/// The pattern of a Split pre-tokenizer, and whether it is applied as `findall`.
fn read_split(place: &Place, node: &Node) -> Result<(SplitSpec, bool)> {
    place.fields(
        node,
        "the Split pre-tokenizer",
        &["type", "pattern", "behavior", "invert"],
    )?;
    let pattern = node.get("pattern");
    let regex = pattern.and_then(|p| p.get("Regex")).and_then(Node::as_str);
    let Some(regex) = regex else {
        return Err(place.refuse(
            pattern.map_or(node.at, |p| p.at),
            "a Split pattern that is not {\"Regex\": ...}",
            "only regex splits are reproduced",
        ));
    };
    let behavior = node
        .get("behavior")
        .and_then(Node::as_str)
        .unwrap_or("(none)");
    let invert = place.flag(node, "invert", "Split", false)?;
    let findall = match (behavior, invert) {
        ("Isolated", false) => false,
        ("Removed", true) => true,
        _ => {
            return Err(place.refuse(
                node.get("behavior").map_or(node.at, |v| v.at),
                format_args!("Split behavior {behavior} with invert {invert}"),
                "only Isolated, or Removed with invert, keep each match as a chunk",
            ))
        }
    };
    let spec = pretokenize::split_of_pattern(regex);
    Splitter::new(&spec).map_err(|e| {
        place.at(
            pattern.map_or(node.at, |p| p.at),
            format!("the Split regex: {}", e.message()),
        )
    })?;
    Ok((spec, findall))
}

/// Notes on a post-processor that adds tokens when HF's `encode` is called with
/// `add_special_tokens=True` (its default).
fn post_processor_notes(node: &Node, notes: &mut Vec<String>) {
    match type_of(node) {
        None | Some("ByteLevel") => {}
        Some("Sequence") => {
            for p in node.get("processors").and_then(Node::items).unwrap_or(&[]) {
                post_processor_notes(p, notes);
            }
        }
        Some(kind) => {
            let mut added: Vec<String> = Vec::new();
            if let Some(single) = node.get("single").and_then(Node::items) {
                for piece in single {
                    if let Some(id) = piece
                        .get("SpecialToken")
                        .and_then(|s| s.get("id"))
                        .and_then(Node::as_str)
                    {
                        added.push(id.to_string());
                    }
                }
            }
            let what = if added.is_empty() {
                String::new()
            } else {
                format!(" ({})", added.join(", "))
            };
            notes.push(format!(
                "the {kind} post-processor adds tokens{what} around each encoding when HF's \
                 encode is called with add_special_tokens=True (its default); bpe-encode does \
                 not: its ids are HF's encode(text, add_special_tokens=False)"
            ));
        }
    }
}

/// The BPE model and the special tokens; returns the model and its `ignore_merges`.
fn read_model(
    place: &Place,
    node: &Node,
    added: Option<&Node>,
    source: ModelSource,
    split: Option<SplitSpec>,
) -> Result<(BpeModel, bool)> {
    match type_of(node) {
        Some("BPE") => {}
        None if node.get("merges").is_some() => {}
        other => {
            return Err(place.refuse(
                node.at,
                format_args!("model type {}", other.unwrap_or("(none)")),
                "only byte-level BPE models are reproduced",
            ))
        }
    }
    place.fields(
        node,
        "the model",
        &[
            "type",
            "dropout",
            "unk_token",
            "continuing_subword_prefix",
            "end_of_word_suffix",
            "fuse_unk",
            "byte_fallback",
            "ignore_merges",
            "vocab",
            "merges",
        ],
    )?;
    if let Some(v) = node.get("dropout").filter(|v| !v.is_null()) {
        return Err(place.refuse(v.at, "BPE dropout", "it leaves out merges at random"));
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if let Some(v) = node
            .get(key)
            .filter(|v| !v.is_null() && v.as_str() != Some(""))
        {
            return Err(place.refuse(v.at, format_args!("a {key}"), "byte-level BPE has none"));
        }
    }
    if place.flag(node, "byte_fallback", "model", false)? {
        return Err(place.refuse(
            node.get("byte_fallback").map_or(node.at, |v| v.at),
            "byte_fallback",
            "it stands for SentencePiece-style <0xNN> tokens",
        ));
    }
    let ignore_merges = place.flag(node, "ignore_merges", "model", false)?;
    if let Some(v) = node
        .get("fuse_unk")
        .filter(|v| !v.is_null() && v.as_bool().is_none())
    {
        return Err(place.at(v.at, "model.fuse_unk must be true or false"));
    }
    if let Some(v) = node
        .get("unk_token")
        .filter(|v| !v.is_null() && v.as_str().is_none())
    {
        return Err(place.at(v.at, "model.unk_token must be a string or null"));
    }
    let Some(vocab) = node.get("vocab") else {
        return Err(place.at(node.at, "the model has no \"vocab\""));
    };
    let Some(entries) = vocab.members() else {
        return Err(place.at(vocab.at, "model.vocab must be an object"));
    };
    let Some(merges_node) = node.get("merges") else {
        return Err(place.at(node.at, "the model has no \"merges\""));
    };
    let Some(merge_nodes) = merges_node.items() else {
        return Err(place.at(merges_node.at, "model.merges must be an array"));
    };
    let specials = read_added_tokens(place, added)?;

    // Every vocab entry: id -> (key, offset), each key and id once.
    let first_free = 256 + merge_nodes.len();
    let mut by_id: Vec<Option<(&str, usize)>> = vec![None; first_free];
    let mut by_key: AHashMap<&str, u32> = AHashMap::with_capacity(entries.len());
    for entry in entries {
        let key: &str = &entry.key;
        let Some(id) = entry.value.as_u64().filter(|&id| id <= u64::from(u32::MAX)) else {
            return Err(place.at(
                entry.value.at,
                format!("model.vocab: the id of {key:?} is not an integer id"),
            ));
        };
        if by_key.insert(key, id as u32).is_some() {
            return Err(place.at(entry.at, format!("model.vocab lists {key:?} twice")));
        }
        let id = id as usize;
        if id < first_free {
            if let Some((other, _)) = by_id[id] {
                return Err(place.at(
                    entry.at,
                    format!("model.vocab gives id {id} to both {other:?} and {key:?}"),
                ));
            }
            by_id[id] = Some((key, entry.at));
        } else if !specials
            .iter()
            .any(|(s, _)| s.id as usize == id && s.text == key)
        {
            return Err(place.refuse(
                entry.at,
                format_args!("vocab token {key:?} (id {id})"),
                &format!(
                    "it is neither one of the 256 bytes, nor made by one of the {} merges \
                     (ids 256..{first_free}), nor a special token with that id",
                    merge_nodes.len()
                ),
            ));
        }
    }
    for (s, at) in &specials {
        if (s.id as usize) < first_free {
            return Err(place.at(
                *at,
                format!(
                    "special token {:?} has id {}, which a byte or merge already has (ids 0..{first_free})",
                    s.text, s.id
                ),
            ));
        }
        if let Some(&id) = by_key.get(s.text.as_str()) {
            if id != s.id {
                return Err(place.at(
                    *at,
                    format!(
                        "special token {:?} has id {}, but model.vocab gives that text id {id}",
                        s.text, s.id
                    ),
                ));
            }
        }
    }

    // The 256 single bytes at ids 0..255, in any order.
    let (_, back) = tables();
    let mut base_id_of_byte = [u32::MAX; 256];
    let mut scratch = Vec::new();
    for (id, entry) in by_id.iter().enumerate().take(256) {
        let &Some((key, at)) = entry else {
            return Err(place.at(
                vocab.at,
                format!("model.vocab has no id {id}: the 256 single bytes must have ids 0..255"),
            ));
        };
        scratch.clear();
        let single = string_bytes(key, &back, &mut scratch).is_ok() && scratch.len() == 1;
        if !single {
            return Err(place.refuse(
                at,
                format_args!("vocab token {key:?} at id {id}"),
                "the 256 single bytes must have ids 0..255, and this build does not renumber \
                 ids (HF's BpeTrainer puts special tokens first)",
            ));
        }
        let byte = scratch[0] as usize;
        if base_id_of_byte[byte] != u32::MAX {
            return Err(place.at(at, format!("model.vocab gives byte 0x{byte:02x} two ids")));
        }
        base_id_of_byte[byte] = id as u32;
    }

    // Merge r: two tokens made before it whose strings join to the string of id 256 + r.
    let mut merges: Vec<(u32, u32)> = Vec::with_capacity(merge_nodes.len());
    for (r, m) in merge_nodes.iter().enumerate() {
        let id = 256 + r;
        let (a, b) = match (m.as_str(), m.items()) {
            (Some(text), _) => match text.split_once(' ') {
                Some((a, b)) if !b.contains(' ') => (a, b),
                _ => {
                    return Err(place.at(
                        m.at,
                        format!("merge {id}: {text:?} is not two tokens separated by one space"),
                    ))
                }
            },
            (_, Some([a, b])) => match (a.as_str(), b.as_str()) {
                (Some(a), Some(b)) => (a, b),
                _ => return Err(place.at(m.at, format!("merge {id} must hold two strings"))),
            },
            _ => {
                return Err(place.at(
                    m.at,
                    format!(
                        "merge {id} must be \"a b\" or [\"a\", \"b\"], not {}",
                        m.kind()
                    ),
                ))
            }
        };
        let mut pair = [0u32; 2];
        for (slot, part) in pair.iter_mut().zip([a, b]) {
            let Some(&part_id) = by_key.get(part) else {
                return Err(place.at(
                    m.at,
                    format!("merge {id} ({a:?} + {b:?}): {part:?} is not in model.vocab"),
                ));
            };
            if part_id as usize >= id {
                return Err(place.at(
                    m.at,
                    format!(
                        "merge {id} ({a:?} + {b:?}) uses {part:?}, whose id {part_id} is not made \
                         before it (merge r makes id 256 + r)"
                    ),
                ));
            }
            *slot = part_id;
        }
        match by_id[id] {
            Some((key, _))
                if key.len() == a.len() + b.len() && key.starts_with(a) && key.ends_with(b) => {}
            Some((key, _)) => {
                return Err(place.refuse(
                    m.at,
                    format_args!("merge {id} ({a:?} + {b:?})"),
                    &format!(
                        "model.vocab gives id {id} to {key:?}; the suite numbers merge r as id \
                         256 + r"
                    ),
                ))
            }
            None => {
                return Err(place.at(
                    m.at,
                    format!(
                        "merge {id} ({a:?} + {b:?}): model.vocab has no id {id} for its result"
                    ),
                ))
            }
        }
        merges.push((pair[0], pair[1]));
    }
    // Every vocab key stands for bytes (those of 0..255 were checked above).
    for (id, entry) in by_id.iter().enumerate().skip(256) {
        if let Some((key, at)) = entry {
            scratch.clear();
            if let Err(c) = string_bytes(key, &back, &mut scratch) {
                return Err(place.at(
                    *at,
                    format!(
                        "model.vocab: token {key:?} (id {id}) holds {c:?} (U+{:04X}), which stands \
                         for no byte in a byte-level vocab",
                        c as u32
                    ),
                ));
            }
        }
    }
    let last_at = merge_nodes.last().map_or(node.at, |m| m.at);
    let specials = specials.into_iter().map(|(s, _)| s).collect();
    let model = BpeModel::try_from_merges(source, split, specials, base_id_of_byte, merges)
        .map_err(|k| {
            place.at(
                merge_nodes.get(k).map_or(last_at, |m| m.at),
                format!(
                    "merge {} takes the tokens past {MAX_TOKEN_BYTES} bytes in all",
                    256 + k
                ),
            )
        })?;
    Ok((model, ignore_merges))
}

/// The added tokens, each special with its offset; anything else is refused.
fn read_added_tokens(place: &Place, node: Option<&Node>) -> Result<Vec<(SpecialToken, usize)>> {
    let Some(node) = node.filter(|n| !n.is_null()) else {
        return Ok(Vec::new());
    };
    let Some(items) = node.items() else {
        return Err(place.at(node.at, "added_tokens must be an array"));
    };
    let mut specials: Vec<(SpecialToken, usize)> = Vec::new();
    let mut normalized_flags = Vec::new();
    for item in items {
        place.fields(
            item,
            "an added token",
            &[
                "id",
                "content",
                "single_word",
                "lstrip",
                "rstrip",
                "normalized",
                "special",
            ],
        )?;
        let id = item
            .get("id")
            .and_then(Node::as_u64)
            .filter(|&id| id <= u64::from(u32::MAX));
        let content = item.get("content").and_then(Node::as_str);
        let (Some(id), Some(content)) = (id, content) else {
            return Err(place.at(
                item.at,
                "an added token needs an integer \"id\" and a \"content\" string",
            ));
        };
        if content.is_empty() {
            return Err(place.at(item.at, "an added token's content is empty"));
        }
        if !place.flag(item, "special", "the added token", false)? {
            return Err(place.refuse(
                item.at,
                format_args!("added token {content:?} (not special)"),
                "HF matches non-special added tokens before the model, whatever the caller asks",
            ));
        }
        for key in ["single_word", "lstrip", "rstrip"] {
            if place.flag(item, key, "the added token", false)? {
                return Err(place.refuse(
                    item.get(key).map_or(item.at, |v| v.at),
                    format_args!("{key} on added token {content:?}"),
                    "it changes where the token matches and what whitespace it takes",
                ));
            }
        }
        normalized_flags.push(place.flag(item, "normalized", "the added token", false)?);
        if let Some((other, _)) = specials
            .iter()
            .find(|(s, _)| s.text == content || u64::from(s.id) == id)
        {
            return Err(place.at(
                item.at,
                format!(
                    "added tokens {:?} (id {}) and {content:?} (id {id}) share a text or an id",
                    other.text, other.id
                ),
            ));
        }
        specials.push((
            SpecialToken {
                text: content.to_string(),
                id: id as u32,
            },
            item.at,
        ));
    }
    // Without a normalizer, `normalized` changes only which group HF matches first:
    // tokens of the two groups that can overlap could then match differently.
    for (i, (s, at)) in specials.iter().enumerate() {
        for (j, (t, _)) in specials.iter().enumerate() {
            if normalized_flags[i] != normalized_flags[j] && can_overlap(&s.text, &t.text) {
                return Err(place.refuse(
                    *at,
                    format_args!(
                        "added tokens {:?} and {:?} with different \"normalized\"",
                        s.text, t.text
                    ),
                    "HF matches the two groups one after the other, and these two can overlap",
                ));
            }
        }
    }
    Ok(specials)
}

/// Whether an occurrence of `a` can overlap one of `b` in some text.
fn can_overlap(a: &str, b: &str) -> bool {
    a.contains(b)
        || b.contains(a)
        || (1..a.len()).any(|k| a.is_char_boundary(k) && b.starts_with(&a[k..]))
        || (1..b.len()).any(|k| b.is_char_boundary(k) && a.starts_with(&b[k..]))
}

/// With `ignore_merges`, HF takes a chunk that is a whole vocab token as that token
/// without merging: the same ids only if every token merges to itself, and no special
/// token in the vocab can be a whole chunk.
fn check_ignore_merges(place: &Place, at: usize, model: &BpeModel) -> Result<()> {
    let n = model.token_offsets.len() - 1;
    for id in 256..n as u32 {
        let Some(token) = model.token(id) else {
            continue;
        };
        let ids = merge_bpe(model, token);
        if ids != [id] {
            return Err(place.refuse(
                at,
                "ignore_merges",
                &format!(
                    "token {id} ({}) does not merge to itself (the merges give {ids:?}), so HF \
                     would give one token where the merges give several",
                    show_bytes(token)
                ),
            ));
        }
    }
    Ok(())
}

/// A byte-level string (or two joined by a space) as a JSON string: its characters are
/// all printable (U+0021 and up), so only `"` and `\\` need escapes.
fn push_byte_level(out: &mut Vec<u8>, first: &str, second: Option<&str>) {
    out.push(b'"');
    let mut push = |s: &str| {
        for b in s.bytes() {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
    };
    push(first);
    if let Some(second) = second {
        push(" ");
        push(second);
    }
    out.push(b'"');
}

/// Writes `model` as a `tokenizer.json`. Refused, with the reason: a model whose merges
/// cannot be listed (a rank table without a merge form), two ids with the same bytes (a
/// vocab maps each string to one id), a special token whose text is an ordinary token's
/// byte-level string (HF would give it that token's id).
pub(crate) fn write(model: &BpeModel, w: &mut dyn Write) -> Result<()> {
    let merges = merge_list(model).map_err(Error::data)?;
    // A rank table's tokens are distinct by construction (its reader refuses repeats).
    if !is_rank_table(model) {
        ids_by_bytes(model)
            .map_err(|e| Error::data(format!("{e}, which a tokenizer.json vocab cannot hold")))?;
    }
    let (chars, _) = tables();
    let n = 256 + merges.len();
    let strings: Vec<String> = (0..n as u32)
        .map(|id| byte_string(model.token(id).unwrap_or_default(), &chars))
        .collect();
    let mut specials = model.specials.clone();
    specials.sort_by_key(|s| s.id);
    for s in &specials {
        if let Some(id) = strings.iter().position(|t| *t == s.text) {
            return Err(Error::data(format!(
                "special token {:?} is also the byte-level string of token {id}, so HF would \
                 give it id {id}",
                s.text
            )));
        }
    }
    let io = Error::write;
    let mut out = Vec::with_capacity(64 * n);
    out.extend_from_slice(
        b"{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n",
    );
    if specials.is_empty() {
        out.extend_from_slice(b"  \"added_tokens\": [],\n");
    } else {
        out.extend_from_slice(b"  \"added_tokens\": [\n");
        for (k, s) in specials.iter().enumerate() {
            out.extend_from_slice(
                format!(
                    "    {{\n      \"id\": {},\n      \"content\": {},\n      \"single_word\": false,\n      \
                     \"lstrip\": false,\n      \"rstrip\": false,\n      \"normalized\": false,\n      \
                     \"special\": true\n    }}{}\n",
                    s.id,
                    json_string(&s.text),
                    if k + 1 < specials.len() { "," } else { "" }
                )
                .as_bytes(),
            );
        }
        out.extend_from_slice(b"  ],\n");
    }
    out.extend_from_slice(b"  \"normalizer\": null,\n");
    match &model.split {
        None => out.extend_from_slice(
            b"  \"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": false,\n    \
              \"trim_offsets\": false,\n    \"use_regex\": false\n  },\n",
        ),
        Some(spec) => {
            out.extend_from_slice(
                b"  \"pre_tokenizer\": {\n    \"type\": \"Sequence\",\n    \"pretokenizers\": [\n      {\n        \
                  \"type\": \"Split\",\n        \"pattern\": {\n          \"Regex\": ",
            );
            out.extend_from_slice(json_string(&spec.pattern).as_bytes());
            out.extend_from_slice(
                b"\n        },\n        \"behavior\": \"Isolated\",\n        \"invert\": false\n      },\n      {\n        \
                  \"type\": \"ByteLevel\",\n        \"add_prefix_space\": false,\n        \"trim_offsets\": false,\n        \
                  \"use_regex\": false\n      }\n    ]\n  },\n",
            );
        }
    }
    out.extend_from_slice(
        b"  \"post_processor\": null,\n  \"decoder\": {\n    \"type\": \"ByteLevel\",\n    \
          \"add_prefix_space\": false,\n    \"trim_offsets\": false,\n    \"use_regex\": false\n  },\n",
    );
    out.extend_from_slice(
        b"  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \
          \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \
          \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \
          \"vocab\": {\n",
    );
    for (id, s) in strings.iter().enumerate() {
        out.extend_from_slice(b"      ");
        push_byte_level(&mut out, s, None);
        out.extend_from_slice(format!(": {id}{}\n", if id + 1 < n { "," } else { "" }).as_bytes());
    }
    out.extend_from_slice(b"    },\n    \"merges\": [");
    for (k, &(a, b)) in merges.iter().enumerate() {
        out.extend_from_slice(if k == 0 { b"\n      " } else { b",\n      " });
        push_byte_level(&mut out, &strings[a as usize], Some(&strings[b as usize]));
        if out.len() > 1 << 20 {
            w.write_all(&out).map_err(io)?;
            out.clear();
        }
    }
    out.extend_from_slice(if merges.is_empty() {
        b"]\n  }\n}\n"
    } else {
        b"\n    ]\n  }\n}\n"
    });
    w.write_all(&out).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mapping is GPT-2's `bytes_to_unicode`: printable Latin-1 for itself, the rest
    /// from U+0100 up in byte order (space is Ġ, newline Ċ, 0xAD is the last, U+0143).
    #[test]
    fn byte_level_characters() {
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(0), 'Ā');
        assert_eq!(byte_char(b'!'), '!');
        assert_eq!(byte_char(0xAD), '\u{143}');
        let (forward, back) = tables();
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            assert!(seen.insert(forward[b as usize]));
            let mut out = Vec::new();
            string_bytes(&forward[b as usize].to_string(), &back, &mut out).unwrap();
            assert_eq!(out, [b]);
        }
        assert_eq!(string_bytes("a b", &back, &mut Vec::new()), Err(' '));
        assert_eq!(
            string_bytes("\u{ad}", &back, &mut Vec::new()),
            Err('\u{ad}')
        );
        assert_eq!(string_bytes("é", &back, &mut Vec::new()), Ok(()));
        assert_eq!(
            string_bytes("\u{144}", &back, &mut Vec::new()),
            Err('\u{144}')
        );
    }

    #[test]
    fn sniffing_tells_tokenizer_json_from_model_files() {
        assert!(looks_like(b"{\n  \"version\": \"1.0\",\n"));
        assert!(looks_like(b"{\"model\":{}}"));
        assert!(looks_like(b"\xEF\xBB\xBF{\"added_tokens\":[]}"));
        assert!(!looks_like(b"{\"kind\":\"bpe\",\"version\":1}"));
        assert!(!looks_like(b"{\"version\":1,\"kind\":\"bpe\"}"));
        assert!(!looks_like(b"minbpe v1\n"));
        assert!(!looks_like(b""));
    }

    #[test]
    fn overlap() {
        assert!(can_overlap("<a>", "a>b"));
        assert!(can_overlap("<|x|>", "x"));
        assert!(!can_overlap("<a>", "<b>"));
    }
}
