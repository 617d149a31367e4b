//! minbpe's `.model` files, read and written exactly as minbpe's `Tokenizer.save` and
//! `Tokenizer.load` do.
//!
//! # Format
//!
//! UTF-8 lines: `minbpe v1`; the split pattern (empty for `BasicTokenizer`, i.e.
//! `--split none`); the number N of special tokens; N lines `TEXT ID`; then one line
//! `A B` per merge, merge `k` making id `256 + k`. minbpe reads each header line with
//! Python's `strip()` and the others with `split()`, so a pattern with surrounding
//! whitespace or a line break, and a special token holding whitespace, cannot be written;
//! its ids 0..255 are the bytes in order, so neither can a permuted byte order (the GPT
//! vocabularies). A blank line among the merges is an error in minbpe, and so here.
//!
//! minbpe's `load` asserts that the file name ends in `.model`, and
//! `RegexTokenizer().load(f)` keeps its default GPT-4 pattern whatever the file says:
//! load with `RegexTokenizer(pattern=<line 2>)` (or `BasicTokenizer()` when it is empty).
//! minbpe applies the pattern with `findall`, which drops text the pattern does not
//! match; the suite keeps such text as a chunk, so with a custom pattern the ids agree
//! only where the pattern matches every character (the presets do).

use std::io::Write;

use super::json::BOM;
use crate::error::{Error, Result};
use crate::model::merge_list::merge_list;
use crate::model::{BpeModel, ModelSource, SpecialToken, MAX_TOKEN_BYTES};
use crate::pretokenize::{self, Splitter};
use crate::word::is_python_whitespace;

/// The first line of every `.model` file.
const MAGIC: &str = "minbpe v1";

/// Whether `data` starts with minbpe's first line.
pub(crate) fn looks_like(data: &[u8]) -> bool {
    let first = data.split(|&b| b == b'\n').next().unwrap_or_default();
    std::str::from_utf8(first).is_ok_and(|line| python_strip(line) == MAGIC)
}

/// Python's `str.strip()`.
fn python_strip(text: &str) -> &str {
    text.trim_matches(is_python_whitespace)
}

/// A `.model` file read as a model, with notes (a custom pattern's `findall`).
pub(crate) fn read(
    bytes: &[u8],
    source: ModelSource,
    file: &str,
) -> Result<(BpeModel, Vec<String>)> {
    let at = |line: usize, message: String| Error::data(message).at_line(file, line as u64);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let line = 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            return Err(at(
                line,
                "invalid UTF-8 (minbpe reads its files as UTF-8)".into(),
            ));
        }
    };
    // Python's universal newlines: `\r\n` ends a line as `\n` does.
    let mut lines = text
        .split_terminator('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .enumerate()
        .map(|(i, l)| (i + 1, l));
    let mut next = |what: &str| {
        lines
            .next()
            .ok_or_else(|| Error::data(format!("the file ends before {what}")).in_file(file))
    };
    let (_, magic) = next("its first line")?;
    if python_strip(magic) != MAGIC {
        let message = if magic.as_bytes().starts_with(BOM) {
            "the file starts with a UTF-8 byte-order mark; minbpe files start with \"minbpe v1\""
                .to_string()
        } else {
            format!("the first line is not {MAGIC:?}")
        };
        return Err(at(1, message));
    }
    let (pattern_line, pattern) = next("the pattern line")?;
    let pattern = python_strip(pattern);
    let split = if pattern.is_empty() {
        None
    } else {
        let spec = pretokenize::split_of_pattern(pattern);
        Splitter::new(&spec)
            .map_err(|e| at(pattern_line, format!("the pattern: {}", e.message())))?;
        Some(spec)
    };
    let (count_line, count) = next("the number of special tokens")?;
    let count: usize = python_strip(count)
        .parse()
        .map_err(|_| at(count_line, "expected the number of special tokens".into()))?;
    let mut specials: Vec<(SpecialToken, usize)> = Vec::new();
    for k in 0..count {
        let (line_no, line) = next(&format!("special token {} of {count}", k + 1))?;
        let fields: Vec<&str> = line
            .split(is_python_whitespace)
            .filter(|f| !f.is_empty())
            .collect();
        let [text, id] = fields[..] else {
            return Err(at(line_no, "expected a special token and its id".into()));
        };
        let Some(id) = parse_id(id) else {
            return Err(at(
                line_no,
                format!("the id of special token {text:?} is not an id"),
            ));
        };
        if specials.iter().any(|(s, _)| s.text == text || s.id == id) {
            return Err(at(
                line_no,
                format!("special token {text:?} or id {id} appears twice"),
            ));
        }
        specials.push((
            SpecialToken {
                text: text.to_string(),
                id,
            },
            line_no,
        ));
    }
    let mut merges: Vec<(u32, u32)> = Vec::new();
    let mut merge_lines: Vec<usize> = Vec::new();
    let mut seen = ahash::AHashMap::new();
    for (line_no, line) in lines {
        let id = 256 + merges.len() as u32;
        let fields: Vec<&str> = line
            .split(is_python_whitespace)
            .filter(|f| !f.is_empty())
            .collect();
        let [a, b] = fields[..] else {
            return Err(at(line_no, format!("merge {id}: expected two ids")));
        };
        let (Some(a), Some(b)) = (parse_id(a), parse_id(b)) else {
            return Err(at(line_no, format!("merge {id}: expected two ids")));
        };
        for member in [a, b] {
            if member >= id {
                return Err(at(
                    line_no,
                    format!("merge {id} uses id {member}, which is not defined before it"),
                ));
            }
        }
        if let Some(first) = seen.insert((a, b), id) {
            return Err(at(
                line_no,
                format!("pair [{a},{b}] is merged twice (first by merge {first}); minbpe would lose id {first}"),
            ));
        }
        merges.push((a, b));
        merge_lines.push(line_no);
    }
    let first_free = 256 + merges.len() as u32;
    for (s, line_no) in &specials {
        if s.id < first_free {
            return Err(at(
                *line_no,
                format!(
                    "special token {:?} has id {}, which a byte or merge already has (ids 0..{first_free})",
                    s.text, s.id
                ),
            ));
        }
    }
    let mut notes = Vec::new();
    if split.as_ref().is_some_and(|s| s.name == "custom") {
        notes.push(
            "the pattern is custom: minbpe applies it with findall, which drops text it does not \
             match, where bpe-encode keeps such text as a chunk; the ids agree where the pattern \
             matches every character"
                .to_string(),
        );
    }
    let specials = specials.into_iter().map(|(s, _)| s).collect();
    let model = BpeModel::try_from_merges(
        source,
        split,
        specials,
        crate::model::identity_bytes(),
        merges,
    )
    .map_err(|k| {
        at(
            merge_lines[k],
            format!(
                "merge {} takes the tokens past {MAX_TOKEN_BYTES} bytes in all",
                256 + k
            ),
        )
    })?;
    Ok((model, notes))
}

/// An id as minbpe writes it: ASCII digits, below 2^32.
fn parse_id(field: &str) -> Option<u32> {
    if field.is_empty() || field.len() > 10 || !field.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    field.parse().ok()
}

/// Writes `model` as a minbpe `.model` file, or says why minbpe cannot hold it.
pub(crate) fn write(model: &BpeModel, w: &mut dyn Write) -> Result<()> {
    if model.base_id_of_byte != crate::model::identity_bytes() {
        return Err(Error::data(
            "minbpe cannot hold this model: its base ids are the bytes in a permuted order (as \
             in the GPT vocabularies), and minbpe's ids 0..255 are bytes 0..255",
        ));
    }
    let pattern = model.split.as_ref().map_or("", |s| s.pattern.as_str());
    if pattern.contains(['\n', '\r']) || python_strip(pattern) != pattern {
        return Err(Error::data(
            "minbpe cannot hold this model's pattern: minbpe reads it back with strip() from one \
             line, and the pattern has a line break or whitespace at an end",
        ));
    }
    for s in &model.specials {
        if s.text.contains(is_python_whitespace) || s.text.contains(['\n', '\r']) {
            return Err(Error::data(format!(
                "minbpe cannot hold special token {:?}: minbpe reads `TEXT ID` lines with split(), \
                 so a special token cannot hold whitespace",
                s.text
            )));
        }
    }
    let merges = merge_list(model).map_err(Error::data)?;
    let mut out = Vec::with_capacity(16 * merges.len() + 256);
    out.extend_from_slice(format!("{MAGIC}\n{pattern}\n{}\n", model.specials.len()).as_bytes());
    for s in &model.specials {
        out.extend_from_slice(format!("{} {}\n", s.text, s.id).as_bytes());
    }
    for &(a, b) in merges.iter() {
        out.extend_from_slice(format!("{a} {b}\n").as_bytes());
    }
    w.write_all(&out).map_err(Error::write)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> ModelSource {
        ModelSource::Builtin("t")
    }

    #[test]
    fn reads_what_it_writes() {
        let text = "minbpe v1\n\n1\n<|end|> 258\n104 97\n256 97\n";
        let (model, notes) = read(text.as_bytes(), source(), "m.model").unwrap();
        assert!(notes.is_empty());
        assert_eq!(model.merges, vec![(104, 97), (256, 97)]);
        assert_eq!(model.split, None);
        assert_eq!(model.specials[0].text, "<|end|>");
        let mut out = Vec::new();
        write(&model, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), text);
    }

    #[test]
    fn lies_name_their_line() {
        let cases = [
            ("minbpe v2\n\n0\n", "m.model:1: the first line is not \"minbpe v1\""),
            ("minbpe v1\n\n0\n97 97\n256 300\n", "m.model:5: merge 257 uses id 300, which is not defined before it"),
            ("minbpe v1\n\n0\n97 97\n97 97\n", "m.model:5: pair [97,97] is merged twice (first by merge 256); minbpe would lose id 256"),
            ("minbpe v1\n\n0\n97 97\n\n", "m.model:5: merge 257: expected two ids"),
            ("minbpe v1\n\n2\n<a> 300\n", "m.model: the file ends before special token 2 of 2"),
            ("minbpe v1\n\n1\n<a> 256\n97 97\n", "m.model:4: special token \"<a>\" has id 256, which a byte or merge already has (ids 0..257)"),
            ("minbpe v1\n(\n0\n", "m.model:2: the pattern: invalid split pattern"),
        ];
        for (text, want) in cases {
            let err = read(text.as_bytes(), source(), "m.model")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(want), "{text:?}: {err}");
        }
    }
}
