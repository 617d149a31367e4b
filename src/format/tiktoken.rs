//! tiktoken rank files (`.tiktoken`: one `base64-token rank` per line) as [`BpeModel`]s.
//!
//! A rank table has no merge list: tiktoken repeatedly joins the adjacent pair of parts
//! whose concatenation has the lowest rank. The model's `merge_ids` therefore hold every
//! split of every token into two tokens (`(rank(a), rank(b)) -> rank(a ++ b)`), so the
//! encoder's "lowest merge id, leftmost first" loop is tiktoken's algorithm exactly. The
//! 256 single-byte tokens are the base ids (a permutation of the bytes), and rank gaps
//! (p50k_base has none at 50256, where its special token sits) are ids outside the
//! vocabulary. The parse itself is [`crate::model::tables::parse_rank_file`], which
//! `build.rs` uses for the built-in vocabularies.

use ahash::AHashMap;

use crate::error::{Error, Result};
use crate::model::merge_list;
use crate::model::tables::{self, RankTables};
use crate::model::{BpeModel, ModelSource, PairIds, PairTable, SpecialToken};
use crate::pretokenize::SplitSpec;

/// Parses a tiktoken rank file into a model with the given split pattern (`None`: each
/// record is one sequence) and special tokens. Every single byte must have a token,
/// tokens and ranks must be unique, and special ids must not collide with ranks; the
/// first problem is reported with its line as a data error.
pub(crate) fn load_rank_file(
    bytes: &[u8],
    source: ModelSource,
    split: Option<SplitSpec>,
    specials: Vec<SpecialToken>,
) -> Result<BpeModel> {
    let file = match &source {
        ModelSource::Builtin(name) => name.to_string(),
        ModelSource::File { name, .. } => name.clone(),
    };
    let RankTables {
        token_bytes,
        token_offsets,
        base_id_of_byte,
        pairs,
    } = tables::parse_rank_file::<ahash::RandomState>(bytes).map_err(|(line, message)| {
        let error = Error::data(message);
        if line == 0 {
            error.in_file(&file)
        } else {
            error.at_line(&file, line as u64)
        }
    })?;
    let n = token_offsets.len() - 1;
    let is_token = |id: u32| {
        let i = id as usize;
        i < n && token_offsets[i + 1] > token_offsets[i]
    };
    for (k, s) in specials.iter().enumerate() {
        if s.text.is_empty() {
            return Err(Error::data("special token text is empty").in_file(&file));
        }
        if is_token(s.id) {
            return Err(Error::data(format!(
                "special token {} has id {} which is already an ordinary token",
                s.text, s.id
            ))
            .in_file(&file));
        }
        if specials[..k].iter().any(|t| t.text == s.text) {
            return Err(
                Error::data(format!("special token {} is listed twice", s.text)).in_file(&file),
            );
        }
    }
    let merge_ids = match tables::pair_slots(&pairs) {
        Some((bits, slots)) => PairIds::from_table(PairTable::from_slots(slots, bits, pairs.len())),
        None => {
            let mut map = AHashMap::with_capacity(pairs.len());
            for (a, b, id) in pairs {
                map.entry((a, b)).or_insert(id);
            }
            map.into()
        }
    };
    Ok(BpeModel::from_rank_table(
        source,
        split,
        specials,
        base_id_of_byte,
        merge_ids,
        token_bytes.into(),
        token_offsets.into(),
    ))
}

/// Writes `model` as a tiktoken rank file: `base64(token) id` for every ordinary id, in
/// id order. A rank table (a built-in, a rank file) is written as it is; a merge list
/// only when tiktoken's rank BPE gives back each of its merges (see
/// [`crate::model::merge_list`]), and never with two ids for the same bytes. The file
/// holds neither the split pattern nor the special tokens: they go to
/// `tiktoken.Encoding(pat_str=..., special_tokens=...)`, and to `--split` when the suite
/// reads the file back.
pub(crate) fn write_rank_file(model: &BpeModel, w: &mut dyn std::io::Write) -> Result<()> {
    let ranks = merge_list::ids_by_bytes(model)
        .map_err(|e| Error::data(format!("{e}, which a rank file cannot hold")))?;
    if !model.merges.is_empty() {
        merge_list::check_rank_bpe(model, &model.merges, &ranks).map_err(Error::data)?;
    }
    let mut out = Vec::with_capacity(model.token_bytes().len() * 2 + 8 * ranks.len());
    for id in merge_list::token_ids(model) {
        if let Some(token) = model.token(id) {
            encode_base64(token, &mut out);
            out.extend_from_slice(format!(" {id}\n").as_bytes());
        }
        if out.len() > 1 << 20 {
            w.write_all(&out).map_err(Error::write)?;
            out.clear();
        }
    }
    w.write_all(&out).map_err(Error::write)
}

/// Standard base64 with `=` padding, as tiktoken writes it, onto `out`.
fn encode_base64(bytes: &[u8], out: &mut Vec<u8>) {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in bytes.chunks(3) {
        let mut acc = [0u8; 3];
        acc[..chunk.len()].copy_from_slice(chunk);
        let n = u32::from(acc[0]) << 16 | u32::from(acc[1]) << 8 | u32::from(acc[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * k) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

/// Whether `data` looks like a rank file: its first non-blank line is a base64 token, a
/// space and a number.
pub(crate) fn looks_like(data: &[u8]) -> bool {
    let Some(line) = data
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
    else {
        return false;
    };
    let mut fields = line.split(|&b| b == b' ');
    let (Some(token), Some(rank), None) = (fields.next(), fields.next(), fields.next()) else {
        return false;
    };
    let mut decoded = Vec::new();
    !token.is_empty()
        && tables::decode_base64(token, &mut decoded)
        && !rank.is_empty()
        && rank.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        let mut below = crate::test_rng::below_usize(0xBA5E_0064);
        for _ in 0..500 {
            let bytes: Vec<u8> = (0..below(20)).map(|_| below(256) as u8).collect();
            let mut text = Vec::new();
            encode_base64(&bytes, &mut text);
            let mut back = Vec::new();
            assert!(tables::decode_base64(&text, &mut back));
            assert_eq!(back, bytes);
        }
        let mut text = Vec::new();
        encode_base64(b"hello", &mut text);
        assert_eq!(text, b"aGVsbG8=");
    }

    #[test]
    fn sniffing() {
        assert!(looks_like(b"IQ== 0\nIg== 1\n"));
        assert!(looks_like(b"\nIQ== 0\r\n"));
        assert!(!looks_like(b"{\"kind\":\"bpe\"}"));
        assert!(!looks_like(b"minbpe v1\n"));
        assert!(!looks_like(b"97 98\n"));
    }
}
