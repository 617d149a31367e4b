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
use crate::model::tables::{self, RankTables};
use crate::model::{BpeModel, ModelSource, PairIds, PairTable, SpecialToken};
use crate::pretokenize::SplitSpec;

/// Parses a tiktoken rank file into a model with the given split pattern (`None`: each
/// record is one sequence) and special tokens. Every single byte must have a token,
/// tokens and ranks must be unique, and special ids must not collide with ranks; the
/// first problem is reported with its line as a data error.
pub fn load_rank_file(
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
