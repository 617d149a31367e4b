//! Models in memory: BPE (merges, or a tiktoken rank table) and word vocabularies,
//! with their identity (built-in name or file hash) for id-stream headers, the pair
//! tables, and the built-in vocabularies. Files of models are read and written by
//! [`crate::format`].

mod builtin;
pub(crate) mod merge_list;
mod pairs;
pub(crate) mod tables;
pub(crate) mod units;

use std::borrow::Cow;
use std::sync::OnceLock;

use ahash::AHashMap;

pub(crate) use builtin::{builtin, builtin_units, decode_slots, BUILTINS};
pub(crate) use pairs::{PairIds, PairTable};

pub(crate) use crate::identity::ModelSource;
use crate::pretokenize::SplitSpec;
use crate::word::WordModel;

/// A special token: its text and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    pub text: String,
    pub id: u32,
}

/// A byte-pair-encoding model.
#[derive(Debug, Clone)]
pub struct BpeModel {
    pub(crate) source: ModelSource,
    /// `None` for byte-level BPE over each record as one sequence (`--split none`).
    pub(crate) split: Option<SplitSpec>,
    pub(crate) specials: Vec<SpecialToken>,
    /// `base_id_of_byte[b]` is the id that stands for byte `b` (identity for trained
    /// models; a permutation for the GPT vocabularies).
    pub(crate) base_id_of_byte: [u32; 256],
    /// For model files: `merges[k]` is the pair that made id `256 + k`. Empty for rank
    /// tables (tiktoken), whose pairs are all in `merge_ids`.
    pub(crate) merges: Vec<(u32, u32)>,
    /// Pair -> merged id. For model files, one pair per merge. For tiktoken rank tables,
    /// every split of a token into two tokens, so that "merge the adjacent pair with the
    /// lowest id, leftmost first" is exactly tiktoken's rank-based algorithm.
    pub(crate) merge_ids: PairIds,
    /// Where each non-special id's bytes lie in the table of all token bytes (see
    /// [`BpeModel::token_bytes`]): `token_offsets[i]..token_offsets[i + 1]`. An id whose
    /// span is empty is not in the vocabulary (rank tables may have gaps). The built-in
    /// models borrow it from the binary (see `builtin::from_blob`).
    pub(crate) token_offsets: Cow<'static, [u32]>,
    bytes: TokenBytes,
}

/// The bytes of a [`BpeModel`]'s tokens.
#[derive(Debug, Clone)]
enum TokenBytes {
    /// A rank table's, as its file (or the binary, for the built-ins) gives them.
    Stored(Cow<'static, [u8]>),
    /// A merge list's, derived from the merges: a few lines of merges can make
    /// gigabytes of tokens (each merge may double the longest), so they are built only
    /// when something asks for all of them ([`BpeModel::token_bytes`]); encoding and
    /// decoding work from the merges (30 merges each doubling the last token: `echo aaaa
    /// | bpe-encode -m it` 2.1 GB -> 4.5 MB peak, `bpe-decode` 4.2 GB -> 3.9 MB).
    /// `base_bytes[i]` is the byte base id `i` stands for.
    Derived {
        base_bytes: Box<[u8; 256]>,
        all: OnceLock<Vec<u8>>,
    },
}

impl BpeModel {
    /// A rank table's model (tiktoken files, built-ins): its tokens' bytes given at
    /// `token_offsets` in `token_bytes`.
    pub(crate) fn from_rank_table(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merge_ids: PairIds,
        token_bytes: Cow<'static, [u8]>,
        token_offsets: Cow<'static, [u32]>,
    ) -> BpeModel {
        BpeModel {
            source,
            split,
            specials,
            base_id_of_byte,
            merges: Vec::new(),
            merge_ids,
            token_offsets,
            bytes: TokenBytes::Stored(token_bytes),
        }
    }

    /// A merge list's model (model files): `merge_ids` holds the merges' pairs, and
    /// `token_offsets` their [`token_offsets`] (which bound the tokens' size).
    pub(crate) fn from_merge_list(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merges: Vec<(u32, u32)>,
        merge_ids: PairIds,
        token_offsets: Vec<u32>,
    ) -> BpeModel {
        let mut base_bytes = Box::new([0u8; 256]);
        for (byte, &id) in base_id_of_byte.iter().enumerate() {
            base_bytes[id as usize & 255] = byte as u8;
        }
        BpeModel {
            source,
            split,
            specials,
            base_id_of_byte,
            merges,
            merge_ids,
            token_offsets: token_offsets.into(),
            bytes: TokenBytes::Derived {
                base_bytes,
                all: OnceLock::new(),
            },
        }
    }

    /// The bytes id `id` stands for (special tokens included), or `None` for an id
    /// outside the vocabulary. For a merge list this builds the bytes of all its tokens
    /// on first use ([`BpeModel::token_bytes`]); [`BpeModel::write_token`] does not.
    pub(crate) fn token(&self, id: u32) -> Option<&[u8]> {
        match self.ordinary_span(id) {
            Some((start, end)) => Some(&self.token_bytes()[start..end]),
            None => self.special_text(id),
        }
    }

    /// The bytes of every ordinary token, id `i`'s at
    /// `token_offsets[i]..token_offsets[i + 1]`. A merge list's are built on first use: for code that needs them all
    /// (writing them out); they can take gigabytes where the model file takes a few
    /// lines (the format's limit is [`MAX_TOKEN_BYTES`]).
    pub(crate) fn token_bytes(&self) -> &[u8] {
        match &self.bytes {
            TokenBytes::Stored(bytes) => bytes,
            TokenBytes::Derived { base_bytes, all } => all.get_or_init(|| {
                let mut base_id_of_byte = [0u32; 256];
                for (id, &byte) in base_bytes.iter().enumerate() {
                    base_id_of_byte[byte as usize] = id as u32;
                }
                token_bytes(&base_id_of_byte, &self.merges, &self.token_offsets)
            }),
        }
    }

    /// A rank table's token bytes (laid out as [`BpeModel::token_bytes`] says; borrowed
    /// from the binary for the built-ins); `None` for a merge list, whose bytes are
    /// derived.
    pub(crate) fn stored_token_bytes(&self) -> Option<&Cow<'static, [u8]>> {
        match &self.bytes {
            TokenBytes::Stored(bytes) => Some(bytes),
            TokenBytes::Derived { .. } => None,
        }
    }

    /// Whether the model is a merge list (a model file's), whose token bytes are
    /// derived from its merges.
    pub(crate) fn is_merge_list(&self) -> bool {
        matches!(self.bytes, TokenBytes::Derived { .. })
    }

    /// Appends the bytes of `id` (special tokens included) to `out`, without building
    /// the merge list's table of all tokens: false, with `out` as it was, for an id
    /// outside the vocabulary.
    pub(crate) fn write_token(&self, id: u32, out: &mut Vec<u8>) -> bool {
        let Some((start, end)) = self.ordinary_span(id) else {
            return match self.special_text(id) {
                Some(text) => {
                    out.extend_from_slice(text);
                    true
                }
                None => false,
            };
        };
        match &self.bytes {
            TokenBytes::Stored(bytes) => out.extend_from_slice(&bytes[start..end]),
            TokenBytes::Derived { base_bytes, all } => match all.get() {
                Some(bytes) => out.extend_from_slice(&bytes[start..end]),
                None => {
                    out.reserve(end - start);
                    // Down the merges, left part first; the right parts wait on a stack
                    // (not recursion: a chain of merges can be millions deep).
                    let mut right = Vec::new();
                    let mut t = id;
                    loop {
                        if t < 256 {
                            out.push(base_bytes[t as usize]);
                            match right.pop() {
                                Some(next) => t = next,
                                None => break,
                            }
                        } else {
                            let (a, b) = self.merges[t as usize - 256];
                            right.push(b);
                            t = a;
                        }
                    }
                }
            },
        }
        true
    }

    /// The first and the last byte of every ordinary id's bytes (`[0, 0]` for an id
    /// without bytes), without building a merge list's table of all tokens: a merge's
    /// first byte is its left part's, its last byte its right part's.
    pub(crate) fn end_bytes(&self) -> Vec<[u8; 2]> {
        let ids = self.token_offsets.len().saturating_sub(1);
        match &self.bytes {
            TokenBytes::Stored(bytes) => (0..ids)
                .map(|id| match self.ordinary_span(id as u32) {
                    Some((start, end)) => [bytes[start], bytes[end - 1]],
                    None => [0, 0],
                })
                .collect(),
            TokenBytes::Derived { base_bytes, .. } => {
                let mut ends: Vec<[u8; 2]> = base_bytes.iter().map(|&b| [b, b]).collect();
                for &(a, b) in &self.merges {
                    let end = |id: u32| ends.get(id as usize).copied().unwrap_or([0, 0]);
                    ends.push([end(a)[0], end(b)[1]]);
                }
                ends.truncate(ids);
                ends
            }
        }
    }

    /// The model's units ([`units`]), found from its pairs (the built-ins' are compiled
    /// in: [`builtin_units`]).
    pub(crate) fn units(&self) -> units::UnitTables {
        let ends = self.end_bytes();
        let offsets = &self.token_offsets;
        let short = offsets.windows(2).enumerate().filter_map(|(id, span)| {
            let mut bytes = Vec::new();
            ((2..=3).contains(&(span[1] - span[0])) && self.write_token(id as u32, &mut bytes))
                .then_some((id as u32, bytes))
        });
        units::build(
            &self.base_id_of_byte,
            |a, b| self.merge_ids.id(a, b).unwrap_or(u32::MAX),
            short,
            self.merge_ids.each(),
            |id| ends.get(id as usize).copied(),
            ends.len(),
        )
    }

    /// The span of ordinary id `id` in the token table, if it has bytes.
    fn ordinary_span(&self, id: u32) -> Option<(usize, usize)> {
        let i = id as usize;
        let (start, end) = (
            *self.token_offsets.get(i)? as usize,
            *self.token_offsets.get(i + 1)? as usize,
        );
        (start < end).then_some((start, end))
    }

    fn special_text(&self, id: u32) -> Option<&[u8]> {
        self.specials
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.text.as_bytes())
    }

    /// One more than the largest id, special tokens included.
    pub(crate) fn vocab_size(&self) -> usize {
        let ordinary = self.token_offsets.len().saturating_sub(1);
        self.specials
            .iter()
            .map(|s| s.id as usize + 1)
            .max()
            .unwrap_or(0)
            .max(ordinary)
    }
}

/// Any model the tools read.
// A run holds one or two models, so the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Model {
    Bpe(BpeModel),
    Word(WordModel),
}

impl Model {
    /// The vocabulary size (one past the largest id), as "not in the vocabulary" messages
    /// and token files' dtypes see it.
    pub(crate) fn vocab_size(&self) -> usize {
        match self {
            Model::Bpe(bpe) => bpe.vocab_size(),
            Model::Word(word) => word.unk_id as usize + 1,
        }
    }

    /// Where the model came from.
    pub(crate) fn source(&self) -> &ModelSource {
        match self {
            Model::Bpe(m) => &m.source,
            Model::Word(m) => &m.source,
        }
    }
}

/// The most bytes a model's tokens may hold in all (4 GiB less one byte):
/// [`BpeModel::token_offsets`] are u32.
pub(crate) const MAX_TOKEN_BYTES: u64 = u32::MAX as u64;

/// Where each id's bytes start in the token table of `merges` (and, last, where they
/// end), or `Err(k)` when merge `k` takes the tokens past [`MAX_TOKEN_BYTES`] in all.
///
/// # Panics
/// If a merge uses an id not defined before it.
pub(crate) fn token_offsets(merges: &[(u32, u32)]) -> std::result::Result<Vec<u32>, usize> {
    let mut offsets: Vec<u32> = Vec::with_capacity(257 + merges.len());
    offsets.extend(0..=256);
    let mut end = 256u32;
    for (k, &(a, b)) in merges.iter().enumerate() {
        let len = |t: u32| offsets[t as usize + 1] - offsets[t as usize];
        end = end
            .checked_add(len(a))
            .and_then(|e| e.checked_add(len(b)))
            .ok_or(k)?;
        offsets.push(end);
    }
    Ok(offsets)
}

/// How many merges of `merges`, from the first, keep their tokens within
/// [`MAX_TOKEN_BYTES`] in all: the longest prefix that is a valid model.
///
/// # Panics
/// If a merge uses an id not defined before it.
pub(crate) fn merges_within_limit(merges: &[(u32, u32)]) -> usize {
    token_offsets(merges).map_or_else(|k| k, |_| merges.len())
}

/// Builds the bytes of every id of a merge list over `base_id_of_byte`: returns
/// `(token_bytes, token_offsets)` as `BpeModel` stores them, or `Err(k)` when merge `k`
/// (0-based) takes the tokens past [`MAX_TOKEN_BYTES`] in all. Tokens can grow that long
/// from few merges: each can double the longest one, and on text without repeats the
/// minbpe tie rule merges onto the same token again and again (30 KB of random bytes trained
/// to the end: 26,427 merges, 350 MB of tokens).
///
/// # Panics
/// If a merge uses an id not defined before it.
pub(crate) fn token_table(
    base_id_of_byte: &[u32; 256],
    merges: &[(u32, u32)],
) -> std::result::Result<(Vec<u8>, Vec<u32>), usize> {
    let offsets = token_offsets(merges)?;
    Ok((token_bytes(base_id_of_byte, merges, &offsets), offsets))
}

/// The token bytes of `merges` (the second half of [`token_table`]), placed at
/// `offsets`, their [`token_offsets`].
fn token_bytes(base_id_of_byte: &[u32; 256], merges: &[(u32, u32)], offsets: &[u32]) -> Vec<u8> {
    let end = offsets[offsets.len() - 1];
    // Most tokens are short: each is copied as one fixed block of CHUNK bytes, which
    // compiles to a load and a store where a copy of the exact length calls `memmove`
    // (0.55 -> 0.09-0.2 ms for a 32k model). The bytes a block copies past its token are
    // overwritten by the next copy, or fall in the CHUNK bytes of slack cut at the end.
    const CHUNK: usize = 16;
    let total = end as usize;
    let mut bytes = vec![0u8; total + CHUNK];
    for (byte, &id) in base_id_of_byte.iter().enumerate() {
        bytes[id as usize] = byte as u8;
    }
    for (k, &(a, b)) in merges.iter().enumerate() {
        let mut at = offsets[256 + k] as usize;
        for t in [a, b] {
            let (s, e) = (
                offsets[t as usize] as usize,
                offsets[t as usize + 1] as usize,
            );
            if e - s <= CHUNK {
                bytes.copy_within(s..s + CHUNK, at);
            } else {
                bytes.copy_within(s..e, at);
            }
            at += e - s;
        }
    }
    bytes.truncate(total);
    bytes
}

/// The identity byte mapping of trained models.
pub(crate) fn identity_bytes() -> [u32; 256] {
    std::array::from_fn(|i| i as u32)
}

impl BpeModel {
    #[cfg(test)]
    /// A model from a merge list (ids 256.. in order), as `bpe-train` produces it.
    ///
    /// # Panics
    /// If a merge uses an id not defined before it, or the tokens hold more than
    /// [`MAX_TOKEN_BYTES`] in all.
    pub(crate) fn from_merges(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merges: Vec<(u32, u32)>,
    ) -> BpeModel {
        Self::try_from_merges(source, split, specials, base_id_of_byte, merges)
            .unwrap_or_else(|k| panic!("merge {k}: tokens over {MAX_TOKEN_BYTES} bytes"))
    }

    /// `BpeModel::from_merges` (the tests'), or `Err(k)` when merge `k` (0-based) takes the tokens
    /// past [`MAX_TOKEN_BYTES`] in all.
    ///
    /// # Panics
    /// If a merge uses an id not defined before it.
    pub(crate) fn try_from_merges(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merges: Vec<(u32, u32)>,
    ) -> std::result::Result<BpeModel, usize> {
        let token_offsets = token_offsets(&merges)?;
        // A slot table, which the encoder reads in place, when the ids fit one; a pair
        // listed twice keeps its first id.
        let merge_ids = if 256 + merges.len() < 1 << tables::PAIR_ID_BITS {
            let mut table = PairTable::with_capacity(merges.len());
            for (k, &(a, b)) in merges.iter().enumerate() {
                table.insert(a, b, 256 + k as u32);
            }
            PairIds::from_table(table)
        } else {
            let mut map = AHashMap::with_capacity(merges.len());
            for (k, &pair) in merges.iter().enumerate() {
                map.entry(pair).or_insert(256 + k as u32);
            }
            map.into()
        };
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The token table (built with block copies) holds each token's bytes: its pair's
    /// two tokens end to end, as a plain recursive build gives them, on random merge
    /// lists with short and long tokens, over the identity and a reversed byte order.
    #[test]
    fn token_table_equals_a_plain_build() {
        let mut below = crate::test_rng::below_usize(0x2545_F491_4F6C_DD1D);
        for case in 0..200 {
            let mut base = identity_bytes();
            if case % 2 == 1 {
                base.reverse();
            }
            let mut plain: Vec<Vec<u8>> = vec![Vec::new(); 256];
            for (byte, &id) in base.iter().enumerate() {
                plain[id as usize] = vec![byte as u8];
            }
            let mut merges = Vec::new();
            for _ in 0..below(300) {
                // Often a new id and a byte, so that tokens grow past the copy block.
                let a = match below(2) {
                    0 => below(plain.len()),
                    _ => plain.len() - 1 - below(plain.len().min(3)),
                } as u32;
                let b = match below(3) {
                    0 => below(plain.len()),
                    _ => below(256),
                } as u32;
                merges.push((a, b));
                plain.push([plain[a as usize].clone(), plain[b as usize].clone()].concat());
            }
            let (bytes, offsets) = token_table(&base, &merges).unwrap();
            assert_eq!(offsets.len(), plain.len() + 1, "case {case}");
            for (id, token) in plain.iter().enumerate() {
                let got = &bytes[offsets[id] as usize..offsets[id + 1] as usize];
                assert_eq!(got, &token[..], "case {case}, id {id}");
            }
            assert_eq!(bytes.len(), offsets[plain.len()] as usize);
        }
    }

    /// Tokens that double with each merge pass the 4 GiB limit at the merge that takes
    /// their sum past it (a model file of a few dozen lines must not make a loader panic).
    #[test]
    fn tokens_past_the_limit_are_refused() {
        let chain: Vec<(u32, u32)> = std::iter::once((97, 97))
            .chain((257..297).map(|id| (id - 1, id - 1)))
            .collect();
        // After merge k the tokens hold 256 + (2^(k+2) - 2) bytes: past 2^32 - 1 at k = 30.
        assert_eq!(merges_within_limit(&chain), 30);
        assert_eq!(merges_within_limit(&chain[..30]), 30);
        assert_eq!(token_table(&identity_bytes(), &chain), Err(30));
    }
}
