//! A BPE model as a merge list and as a rank table, one into the other: what the export
//! formats need. HF's `tokenizer.json` and minbpe's `.model` hold merges ("join these two
//! tokens"); tiktoken's rank files hold ranks ("join the adjacent parts whose
//! concatenation has the lowest rank"). The two rules give the same ids only when, for
//! every merged token, tiktoken's rank BPE on the token's own bytes (with the ranks below
//! it) ends in exactly the two tokens of its merge (minbpe's `recover_merges`):
//!
//! - a rank table (a built-in, a rank file) becomes a merge list by running rank BPE on
//!   each token ([`merge_list`]); a token that does not end in two parts has no merge;
//! - a merge list can be written as a rank file only if rank BPE gives back every merge
//!   ([`check_rank_bpe`]); a hand-made list such as `(98,99), (97,98), (257,99)` does not
//!   (`abc` is `[97,256]` by its merges, `[258]` by ranks).
//!
//! Both rules run here naively, token by token (a token is a few bytes long): o200k_base's
//! 199,742 merges are recovered in ~0.1 s.

use std::borrow::Cow;

use ahash::AHashMap;

use super::BpeModel;

/// The bytes of `token` for messages: a JSON string when they are UTF-8, else hex.
pub(crate) fn show_bytes(token: &[u8]) -> String {
    match std::str::from_utf8(token) {
        Ok(text) => serde_json::to_string(text).unwrap_or_default(),
        Err(_) => {
            let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{hex}")
        }
    }
}

/// The ordinary (non-special) ids of `model` that have bytes, in id order.
pub(crate) fn token_ids(model: &BpeModel) -> impl Iterator<Item = u32> + '_ {
    let n = model.token_offsets.len().saturating_sub(1) as u32;
    (0..n).filter(move |&id| {
        let i = id as usize;
        model.token_offsets[i + 1] > model.token_offsets[i]
    })
}

/// The bytes of ordinary id `id` (empty for a gap).
fn bytes_of(model: &BpeModel, id: u32) -> &[u8] {
    let i = id as usize;
    &model.token_bytes()[model.token_offsets[i] as usize..model.token_offsets[i + 1] as usize]
}

/// Bytes -> id of every ordinary token, or what is wrong when two ids stand for the same
/// bytes (a merge list may do that; a rank file, a `tokenizer.json` vocab cannot).
pub(crate) fn ids_by_bytes(model: &BpeModel) -> Result<AHashMap<&[u8], u32>, String> {
    let mut map: AHashMap<&[u8], u32> =
        AHashMap::with_capacity(model.token_offsets.len().saturating_sub(1));
    for id in token_ids(model) {
        let token = bytes_of(model, id);
        if let Some(first) = map.insert(token, id) {
            return Err(format!(
                "ids {first} and {id} stand for the same bytes {}",
                show_bytes(token)
            ));
        }
    }
    Ok(map)
}

/// tiktoken's byte-pair merge of `token` using only the ranks below `below`: starting
/// from single bytes, join the adjacent parts whose concatenation has the lowest rank
/// (the leftmost of equals) until none has one. Returns where the parts start, and the
/// token's length last.
fn rank_bpe(token: &[u8], below: u32, ranks: &AHashMap<&[u8], u32>) -> Vec<usize> {
    let rank = |s: usize, e: usize| ranks.get(&token[s..e]).copied().filter(|&r| r < below);
    let mut starts: Vec<usize> = (0..=token.len()).collect();
    // joined[i]: the rank of parts i and i + 1 joined.
    let mut joined: Vec<Option<u32>> = (0..token.len().saturating_sub(1))
        .map(|i| rank(i, i + 2))
        .collect();
    loop {
        let mut best: Option<(u32, usize)> = None;
        for (i, r) in joined.iter().enumerate() {
            if let Some(r) = *r {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        starts.remove(i + 1);
        joined.remove(i);
        if i > 0 {
            joined[i - 1] = rank(starts[i - 1], starts[i + 1]);
        }
        if i < joined.len() {
            joined[i] = rank(starts[i], starts[i + 2]);
        }
    }
    starts
}

/// The ids of the parts that [`rank_bpe`] leaves.
fn parts(token: &[u8], starts: &[usize], ranks: &AHashMap<&[u8], u32>) -> Vec<u32> {
    starts
        .windows(2)
        .map(|w| ranks.get(&token[w[0]..w[1]]).copied().unwrap_or(u32::MAX))
        .collect()
}

/// [`rank_bpe`] on a rank table's own pairs: its `merge_ids` hold every split of every
/// token into two tokens, so joining parts `p` and `q` has the rank
/// `merge_ids.id(p, q)`, a slot-table probe where [`rank_bpe`] hashes the joined bytes
/// (o200k_base's recovery: ~0.1 s against ~0.5 s). Returns the parts' ids.
fn rank_bpe_by_pairs(model: &BpeModel, token: &[u8], below: u32) -> Vec<u32> {
    let join = |a: u32, b: u32| model.merge_ids.id(a, b).filter(|&r| r < below);
    let mut parts: Vec<u32> = token
        .iter()
        .map(|&b| model.base_id_of_byte[b as usize])
        .collect();
    let mut joined: Vec<Option<u32>> = parts.windows(2).map(|w| join(w[0], w[1])).collect();
    loop {
        let mut best: Option<(u32, usize)> = None;
        for (i, r) in joined.iter().enumerate() {
            if let Some(r) = *r {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, i));
                }
            }
        }
        let Some((r, i)) = best else { break };
        parts[i] = r;
        parts.remove(i + 1);
        joined.remove(i);
        if i > 0 {
            joined[i - 1] = join(parts[i - 1], parts[i]);
        }
        if i < joined.len() {
            joined[i] = join(parts[i], parts[i + 1]);
        }
    }
    parts
}

/// Whether `model` is a rank table (a built-in, a rank file): no merge list, and pairs
/// for every split of every token.
pub(crate) fn is_rank_table(model: &BpeModel) -> bool {
    model.merges.is_empty() && model.merge_ids.count() > 0
}

/// The model's merges, in id order: its own list, or, for a rank table, each token's
/// pair recovered by rank BPE. A rank table has a merge list only when its single bytes
/// have ids 0..255, its other ids follow without gaps, and every token ends in two parts;
/// otherwise the message says which id fails.
pub(crate) fn merge_list(model: &BpeModel) -> Result<Cow<'_, [(u32, u32)]>, String> {
    if !is_rank_table(model) {
        return Ok(Cow::Borrowed(&model.merges));
    }
    if let Some(byte) = model.base_id_of_byte.iter().position(|&id| id >= 256) {
        return Err(format!(
            "byte 0x{byte:02x} has id {}; a merge list needs the 256 single bytes at ids 0..255",
            model.base_id_of_byte[byte]
        ));
    }
    let n = model.token_offsets.len() - 1;
    let mut merges = Vec::with_capacity(n.saturating_sub(256));
    for id in 256..n as u32 {
        let token = bytes_of(model, id);
        if token.is_empty() {
            return Err(format!(
                "id {id} has no token (a gap in the ranks); a merge list numbers its tokens \
                 256, 257, ... without gaps"
            ));
        }
        match rank_bpe_by_pairs(model, token, id)[..] {
            [a, b] => merges.push((a, b)),
            ref other => {
                return Err(format!(
                    "token {id} ({}) is not the join of two earlier tokens under tiktoken's rank \
                     BPE (it ends in {} parts), so it has no merge",
                    show_bytes(token),
                    other.len()
                ))
            }
        }
    }
    Ok(Cow::Owned(merges))
}

/// Checks that tiktoken's rank BPE gives back every merge of `merges` (ids `256 + k`):
/// then a rank file of the model encodes as the merges do. The message names the first
/// merge that fails and what rank BPE makes of its token.
pub(crate) fn check_rank_bpe(
    model: &BpeModel,
    merges: &[(u32, u32)],
    ranks: &AHashMap<&[u8], u32>,
) -> Result<(), String> {
    for (k, &(a, b)) in merges.iter().enumerate() {
        let id = 256 + k as u32;
        let token = bytes_of(model, id);
        let starts = rank_bpe(token, id, ranks);
        let got = parts(token, &starts, ranks);
        if got != [a, b] {
            return Err(format!(
                "merge {id} ([{a},{b}] -> {}) is not what tiktoken's rank BPE makes of those \
                 bytes ({got:?}): ranks join any two parts whose bytes form a token, merges \
                 only the pairs listed, so a rank file would encode differently",
                show_bytes(token)
            ));
        }
    }
    Ok(())
}

/// minbpe's BPE of one chunk with the model's own pairs: merge the adjacent pair with
/// the lowest id (all its occurrences, left to right) until no pair has one.
pub(crate) fn merge_bpe(model: &BpeModel, bytes: &[u8]) -> Vec<u32> {
    let mut ids: Vec<u32> = bytes
        .iter()
        .map(|&b| model.base_id_of_byte[b as usize])
        .collect();
    loop {
        let best = ids
            .windows(2)
            .filter_map(|w| model.merge_ids.id(w[0], w[1]).map(|id| (id, (w[0], w[1]))))
            .min();
        let Some((id, pair)) = best else { break };
        let mut out = Vec::with_capacity(ids.len());
        let mut i = 0;
        while i < ids.len() {
            if i + 1 < ids.len() && (ids[i], ids[i + 1]) == pair {
                out.push(id);
                i += 2;
            } else {
                out.push(ids[i]);
                i += 1;
            }
        }
        ids = out;
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{identity_bytes, ModelSource};

    fn model(merges: Vec<(u32, u32)>) -> BpeModel {
        BpeModel::from_merges(
            ModelSource::Builtin("t"),
            None,
            vec![],
            identity_bytes(),
            merges,
        )
    }

    /// Every token's bytes, as a rank table would list them.
    fn ranks_of(m: &BpeModel) -> AHashMap<&[u8], u32> {
        ids_by_bytes(m).unwrap()
    }

    /// The hand-made model of the module doc: `abc` is `[97,256]` by its merges and
    /// `[258]` by ranks, so it has no rank-file form; a trained-looking chain has one.
    #[test]
    fn rank_bpe_gives_back_merges_only_where_it_should() {
        let hand = model(vec![(98, 99), (97, 98), (257, 99)]);
        let err = check_rank_bpe(&hand, &hand.merges, &ranks_of(&hand)).unwrap_err();
        assert!(err.contains("merge 258 ([257,99]"), "{err}");
        assert_eq!(merge_bpe(&hand, b"abc"), vec![97, 256]);

        let chain = model(vec![(97, 98), (256, 99), (257, 100)]);
        check_rank_bpe(&chain, &chain.merges, &ranks_of(&chain)).unwrap();
    }

    /// A naive twin of [`rank_bpe`]: recompute every adjacent rank each round.
    fn rank_bpe_naive(token: &[u8], below: u32, ranks: &AHashMap<&[u8], u32>) -> Vec<usize> {
        let mut starts: Vec<usize> = (0..=token.len()).collect();
        loop {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..starts.len().saturating_sub(2) {
                if let Some(&r) = ranks.get(&token[starts[i]..starts[i + 2]]) {
                    if r < below && best.is_none_or(|(b, _)| r < b) {
                        best = Some((r, i));
                    }
                }
            }
            match best {
                Some((_, i)) => {
                    starts.remove(i + 1);
                }
                None => return starts,
            }
        }
    }

    /// On random merge lists over a small alphabet (so that tokens overlap in many ways),
    /// rank BPE with its incremental ranks equals the naive twin on every token and on
    /// random texts, and the merge list recovered from the rank table of a model whose
    /// merges pass `check_rank_bpe` is the model's own.
    #[test]
    fn rank_bpe_equals_the_naive_twin_and_recovery_inverts_the_check() {
        let mut below = crate::test_rng::below_usize(0xC0FF_EE11);
        let mut recovered = 0;
        for case in 0..300 {
            let mut merges: Vec<(u32, u32)> = Vec::new();
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            for _ in 0..below(40) {
                let pick = |below: &mut dyn FnMut(usize) -> usize| {
                    if below(3) == 0 || tokens.len() == 256 {
                        97 + below(3) as u32
                    } else {
                        256 + below(tokens.len() - 256) as u32
                    }
                };
                let (a, b) = (pick(&mut below), pick(&mut below));
                let t = [tokens[a as usize].clone(), tokens[b as usize].clone()].concat();
                if !tokens.contains(&t) {
                    tokens.push(t);
                    merges.push((a, b));
                }
            }
            let m = model(merges.clone());
            let ranks = ranks_of(&m);
            for id in 256..tokens.len() as u32 {
                let t = &tokens[id as usize];
                assert_eq!(
                    rank_bpe(t, id, &ranks),
                    rank_bpe_naive(t, id, &ranks),
                    "case {case}"
                );
            }
            let text: Vec<u8> = (0..below(30)).map(|_| 97 + below(3) as u8).collect();
            assert_eq!(
                rank_bpe(&text, u32::MAX, &ranks),
                rank_bpe_naive(&text, u32::MAX, &ranks),
                "case {case}"
            );
            if check_rank_bpe(&m, &merges, &ranks).is_ok() {
                recovered += 1;
                let mut table = m.clone();
                table.merges = Vec::new();
                assert_eq!(
                    merge_list(&table).unwrap().into_owned(),
                    merges,
                    "case {case}"
                );
            }
        }
        assert!(recovered > 50, "only {recovered} cases had a rank form");
    }

    #[test]
    fn duplicate_bytes_are_named() {
        // 257 and 259 are both "abc".
        let dupe = model(vec![(98, 99), (97, 256), (256, 99), (97, 98), (259, 99)]);
        let err = ids_by_bytes(&dupe).unwrap_err();
        assert_eq!(err, "ids 257 and 260 stand for the same bytes \"abc\"");
        assert!(ids_by_bytes(&model(vec![(97, 98), (256, 99)])).is_ok());
        assert_eq!(show_bytes(b"ab"), "\"ab\"");
        assert_eq!(show_bytes(b"\xff"), "0xff");
    }
}
