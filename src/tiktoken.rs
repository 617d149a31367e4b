//! tiktoken rank files (`.tiktoken`: one `base64-token rank` per line) turned into
//! [`BpeModel`]s, and the built-in GPT vocabularies compiled into the binaries with
//! tiktoken's exact split patterns and special tokens (`tiktoken_ext/openai_public.py`).
//!
//! A rank table has no merge list: tiktoken repeatedly joins the adjacent pair of parts
//! whose concatenation has the lowest rank. [`load_rank_file`] therefore fills
//! `merge_ids` with every split of every token into two tokens (`(rank(a), rank(b)) ->
//! rank(a ++ b)`), so the encoder's "lowest merge id, leftmost first" loop is tiktoken's
//! algorithm exactly. The 256 single-byte tokens are the base ids (a permutation of the
//! bytes), and rank gaps (p50k_base has none at 50256, where its special token sits) are
//! ids outside the vocabulary.
//!
//! Performance notes: parsing o200k_base's rank file (base64, then every split of every
//! token looked up) took ~200 ms of CPU here, paid by every `echo hello | bpe-encode`.
//! So build.rs converts the shipped `assets/*.tiktoken` into ready tables at compile
//! time, and [`builtin`] reads them in place. Their pairs come as a ready hash table that
//! the encoder reads in place (`PairIds::id`): filling a map with o200k_base's 446k
//! pairs on first use took ~22 of the ~34 ms of `echo hi | bpe-encode`. The token bytes
//! and offsets are borrowed from the binary too: copying them (2.2 MB for o200k_base,
//! ~550 fresh pages, each a page fault) took ~1 of the ~2.6 ms of `bpe-encode` on an
//! empty input; borrowed, only the pages a run reads are mapped, from the page cache.

use std::borrow::Cow;

use ahash::AHashMap;

use crate::blob::{include_blob, le_words};
use crate::error::{Error, Result};
use crate::model::{BpeModel, ModelSource, PairIds, PairTable, SpecialToken, SplitSpec};
use crate::pretokenize;

/// The names of the built-in models, the default first.
pub const BUILTINS: &[&str] = &["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

// The rank files converted by build.rs (layout described there).
static O200K_BASE: &[u8] = include_blob!("o200k_base.bin");
static CL100K_BASE: &[u8] = include_blob!("cl100k_base.bin");
static P50K_BASE: &[u8] = include_blob!("p50k_base.bin");
static R50K_BASE: &[u8] = include_blob!("r50k_base.bin");

const ENDOFTEXT: &str = "<|endoftext|>";
const FIM_PREFIX: &str = "<|fim_prefix|>";
const FIM_MIDDLE: &str = "<|fim_middle|>";
const FIM_SUFFIX: &str = "<|fim_suffix|>";
const ENDOFPROMPT: &str = "<|endofprompt|>";

/// Ranks above this are refused: the id tables are dense, and real vocabularies stay
/// far below it.
const MAX_RANK: u32 = 1 << 24;

/// The built-in model `name` (one of [`BUILTINS`]) with tiktoken's split pattern and
/// special tokens, or `None` for any other name.
pub fn builtin(name: &str) -> Option<BpeModel> {
    let (name, bytes, split, specials): (&'static str, &[u8], &str, &[(&str, u32)]) = match name {
        "o200k_base" => (
            "o200k_base",
            O200K_BASE,
            "o200k",
            &[(ENDOFTEXT, 199_999), (ENDOFPROMPT, 200_018)],
        ),
        "cl100k_base" => (
            "cl100k_base",
            CL100K_BASE,
            "cl100k",
            &[
                (ENDOFTEXT, 100_257),
                (FIM_PREFIX, 100_258),
                (FIM_MIDDLE, 100_259),
                (FIM_SUFFIX, 100_260),
                (ENDOFPROMPT, 100_276),
            ],
        ),
        "p50k_base" => ("p50k_base", P50K_BASE, "p50k", &[(ENDOFTEXT, 50_256)]),
        "r50k_base" => ("r50k_base", R50K_BASE, "r50k", &[(ENDOFTEXT, 50_256)]),
        _ => return None,
    };
    let pattern = pretokenize::preset_pattern(split)?;
    let split = SplitSpec {
        name: split.to_string(),
        pattern: pattern.to_string(),
    };
    let specials = specials
        .iter()
        .map(|&(text, id)| SpecialToken {
            text: text.to_string(),
            id,
        })
        .collect();
    from_blob(bytes, ModelSource::Builtin(name), split, specials)
}

/// Reads a blob written by build.rs; `None` if it is malformed (it never is: the tests
/// compare every built-in with a parse of its rank file).
fn from_blob(
    blob: &'static [u8],
    source: ModelSource,
    split: SplitSpec,
    specials: Vec<SpecialToken>,
) -> Option<BpeModel> {
    let word = |i: usize| -> Option<u32> {
        let b = blob.get(4 * i..4 * i + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let n = word(0)? as usize;
    let mut base_id_of_byte = [0u32; 256];
    base_id_of_byte.copy_from_slice(&le_words(blob.get(4..4 * 257)?, u32::from_le_bytes)?);
    let token_offsets = le_words(blob.get(4 * 257..4 * (257 + n + 1))?, u32::from_le_bytes)?;
    let pairs_at = 257 + n + 1;
    let n_pairs = word(pairs_at)? as usize;
    let bits = word(pairs_at + 1)?;
    let table_at = (4 * (pairs_at + 2)).next_multiple_of(8);
    let table_len = 8usize.checked_shl(bits)?;
    let table = PairTable::new(blob.get(table_at..table_at + table_len)?, bits, n_pairs)?;
    let merge_ids = PairIds::from_table(table);
    let tokens_at = table_at + table_len;
    let token_bytes = Cow::Borrowed(blob.get(tokens_at..)?);
    if token_offsets.last().copied()? as usize != token_bytes.len() {
        return None;
    }
    Some(BpeModel {
        source,
        split: Some(split),
        specials,
        base_id_of_byte,
        merges: Vec::new(),
        merge_ids,
        token_bytes,
        token_offsets,
    })
}

/// Parses a tiktoken rank file (`base64-token rank` per line, blank lines ignored) into
/// a model with the given split pattern (`None`: each record is one sequence) and
/// special tokens. Every single byte must have a token, tokens and ranks must be unique,
/// and special ids must not collide with ranks; the first problem is reported with its
/// line (for a file source) as a data error.
pub fn load_rank_file(
    bytes: &[u8],
    source: ModelSource,
    split: Option<SplitSpec>,
    specials: Vec<SpecialToken>,
) -> Result<BpeModel> {
    let where_ = match &source {
        ModelSource::Builtin(name) => name.to_string(),
        ModelSource::File { name, .. } => name.clone(),
    };
    let at = |line: usize, msg: String| Error::data(msg).at_line(&where_, line as u64);

    // Pass 1: decode every line into (rank, span of `token_bytes`).
    let mut token_bytes: Vec<u8> = Vec::with_capacity(bytes.len() * 3 / 4);
    let mut entries: Vec<(u32, u32, u32)> = Vec::with_capacity(bytes.len() / 8);
    let mut max_rank: Option<u32> = None;
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut fields = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let Some(token) = fields.next() else { continue };
        let (Some(rank), None) = (fields.next(), fields.next()) else {
            return Err(at(
                line_no,
                "expected two fields: a base64 token and its rank".into(),
            ));
        };
        let rank = parse_rank(rank)
            .ok_or_else(|| at(line_no, "rank is not a non-negative integer".into()))?;
        if rank >= MAX_RANK {
            return Err(at(
                line_no,
                format!("rank {rank} is too large (limit {MAX_RANK})"),
            ));
        }
        let start = token_bytes.len();
        if !decode_base64(token, &mut token_bytes) {
            return Err(at(line_no, "token is not valid base64".into()));
        }
        if token_bytes.len() == start {
            return Err(at(line_no, "empty token".into()));
        }
        entries.push((rank, start as u32, token_bytes.len() as u32));
        max_rank = Some(max_rank.map_or(rank, |m: u32| m.max(rank)));
    }
    let Some(max_rank) = max_rank else {
        return Err(Error::data("rank file has no tokens").in_file(&where_));
    };

    // Dense id -> span table; empty spans are gaps.
    let n = max_rank as usize + 1;
    let mut spans = vec![(0u32, 0u32); n];
    let mut line_of_rank = vec![0u32; n];
    let mut by_bytes: AHashMap<&[u8], u32> = AHashMap::with_capacity(entries.len());
    let mut base_id_of_byte = [u32::MAX; 256];
    // Blank lines are skipped above, so recover each entry's line for messages.
    let line_numbers = entry_line_numbers(bytes);
    for (k, &(rank, start, end)) in entries.iter().enumerate() {
        let line_no = line_numbers.get(k).copied().unwrap_or(0);
        if spans[rank as usize].1 > spans[rank as usize].0 {
            let first = line_of_rank[rank as usize];
            return Err(at(
                line_no,
                format!("rank {rank} is used twice (first on line {first})"),
            ));
        }
        let tok = &token_bytes[start as usize..end as usize];
        if let Some(&other) = by_bytes.get(tok) {
            return Err(at(
                line_no,
                format!("token is listed twice (ranks {other} and {rank})"),
            ));
        }
        by_bytes.insert(tok, rank);
        spans[rank as usize] = (start, end);
        line_of_rank[rank as usize] = line_no as u32;
        if tok.len() == 1 {
            base_id_of_byte[tok[0] as usize] = rank;
        }
    }
    if let Some(b) = base_id_of_byte.iter().position(|&id| id == u32::MAX) {
        return Err(
            Error::data(format!("rank file has no token for byte 0x{b:02x}")).in_file(&where_),
        );
    }

    // Tokens laid out in id order, as BpeModel stores them.
    let mut ordered = Vec::with_capacity(token_bytes.len());
    let mut token_offsets = Vec::with_capacity(n + 1);
    token_offsets.push(0u32);
    for &(start, end) in &spans {
        ordered.extend_from_slice(&token_bytes[start as usize..end as usize]);
        token_offsets.push(ordered.len() as u32);
    }

    let mut merge_ids: AHashMap<(u32, u32), u32> = AHashMap::with_capacity(entries.len() * 3);
    for &(rank, start, end) in &entries {
        let tok = &token_bytes[start as usize..end as usize];
        for k in 1..tok.len() {
            if let (Some(&a), Some(&b)) = (by_bytes.get(&tok[..k]), by_bytes.get(&tok[k..])) {
                merge_ids.insert((a, b), rank);
            }
        }
    }

    let mut seen_special: AHashMap<&str, u32> = AHashMap::new();
    for s in &specials {
        if s.text.is_empty() {
            return Err(Error::data("special token text is empty").in_file(&where_));
        }
        if (s.id as usize) < n && spans[s.id as usize].1 > spans[s.id as usize].0 {
            return Err(Error::data(format!(
                "special token {} has id {} which is already an ordinary token",
                s.text, s.id
            ))
            .in_file(&where_));
        }
        if seen_special.insert(&s.text, s.id).is_some() {
            return Err(
                Error::data(format!("special token {} is listed twice", s.text)).in_file(&where_),
            );
        }
    }
    drop(seen_special);
    drop(by_bytes);

    Ok(BpeModel {
        source,
        split,
        specials,
        base_id_of_byte,
        merges: Vec::new(),
        merge_ids: merge_ids.into(),
        token_bytes: ordered.into(),
        token_offsets: token_offsets.into(),
    })
}

/// Line numbers (1-based) of the non-blank lines, in order.
fn entry_line_numbers(bytes: &[u8]) -> Vec<usize> {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| line.iter().any(|b| !b.is_ascii_whitespace()))
        .map(|(i, _)| i + 1)
        .collect()
}

fn parse_rank(field: &[u8]) -> Option<u32> {
    if field.is_empty() || field.len() > 10 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u64::from(b - b'0');
    }
    u32::try_from(value).ok()
}

/// Decodes standard base64 (with `=` padding, as tiktoken writes it) onto `out`;
/// false on any malformed input.
fn decode_base64(text: &[u8], out: &mut Vec<u8>) -> bool {
    fn value(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    if !text.len().is_multiple_of(4) {
        return false;
    }
    let quads = text.len() / 4;
    for (q, quad) in text.chunks_exact(4).enumerate() {
        let last = q + 1 == quads;
        let pad = if last {
            quad.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return false;
        }
        let mut acc = 0u32;
        for &c in &quad[..4 - pad] {
            let Some(v) = value(c) else { return false };
            acc = (acc << 6) | v;
        }
        acc <<= 6 * pad as u32;
        let bytes = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    true
}
