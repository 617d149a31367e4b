//! Models in memory: BPE (merges, or a tiktoken rank table) and word vocabularies,
//! with their identity (built-in name or file hash) for id-stream headers.
//! Loading and writing of model files lives in the submodules.

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::OnceLock;

use ahash::AHashMap;

/// Where a model came from; id-stream headers name it (CONTRACT.md, "Records").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A model compiled into the binaries (`o200k_base`, ...).
    Builtin(&'static str),
    /// A model file, by the name the user gave and the SHA-256 of its bytes (lowercase hex).
    File { name: String, sha256: String },
}

/// A split (pre-tokenization) pattern: a preset name (`gpt4`, `o200k`, ... or `custom`)
/// and the exact regex text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitSpec {
    pub name: String,
    pub pattern: String,
}

/// A special token: its text and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    pub text: String,
    pub id: u32,
}

/// A byte-pair-encoding model.
#[derive(Debug, Clone)]
pub struct BpeModel {
    pub source: ModelSource,
    /// `None` for the seed's whole-text BPE (`--split none`).
    pub split: Option<SplitSpec>,
    pub specials: Vec<SpecialToken>,
    /// `base_id_of_byte[b]` is the id that stands for byte `b` (identity for trained
    /// models; a permutation for the GPT vocabularies).
    pub base_id_of_byte: [u32; 256],
    /// For model files: `merges[k]` is the pair that made id `256 + k`. Empty for rank
    /// tables (tiktoken), whose pairs are all in `merge_ids`.
    pub merges: Vec<(u32, u32)>,
    /// Pair -> merged id. For model files, one pair per merge. For tiktoken rank tables,
    /// every split of a token into two tokens, so that "merge the adjacent pair with the
    /// lowest id, leftmost first" is exactly tiktoken's rank-based algorithm.
    pub merge_ids: PairIds,
    /// Bytes of every non-special id: `token_bytes[token_offsets[i]..token_offsets[i+1]]`.
    /// An id whose span is empty is not in the vocabulary (rank tables may have gaps).
    /// The built-in models borrow both from the binary (see `tiktoken::from_blob`).
    pub token_bytes: Cow<'static, [u8]>,
    pub token_offsets: Cow<'static, [u32]>,
}

impl BpeModel {
    /// The bytes id `id` stands for (special tokens included), or `None` for an id
    /// outside the vocabulary.
    pub fn token(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i + 1 < self.token_offsets.len() {
            let (start, end) = (
                self.token_offsets[i] as usize,
                self.token_offsets[i + 1] as usize,
            );
            if start < end {
                return Some(&self.token_bytes[start..end]);
            }
        }
        self.specials
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.text.as_bytes())
    }

    /// One more than the largest id, special tokens included.
    pub fn vocab_size(&self) -> usize {
        let ordinary = self.token_offsets.len().saturating_sub(1);
        self.specials
            .iter()
            .map(|s| s.id as usize + 1)
            .max()
            .unwrap_or(0)
            .max(ordinary)
    }
}

/// The pair -> merged id map of a [`BpeModel`], read as an `AHashMap` through `Deref`.
/// The built-in vocabularies carry it as a ready hash table compiled into the binary
/// ([`PairIds::id`] reads it directly) and fill the map only if something asks for the
/// map itself: filling o200k_base's 446k pairs took ~22 of the ~34 ms that
/// `echo hi | bpe-encode` took.
#[derive(Debug, Clone, Default)]
pub struct PairIds {
    map: OnceLock<AHashMap<(u32, u32), u32>>,
    table: PairTable,
}

/// A hash table of pairs in the layout `build.rs` writes: `2^bits` u64 slots
/// `a << 42 | b << 21 | id` (all ones: empty), linear probing from the multiplicative
/// hash of `a << 21 | b`. A built-in's is read in place from the binary; a model file's
/// is filled as its lines are read ([`PairTable::with_capacity`]), and the encoder reads
/// either in place.
#[derive(Debug, Clone, Default)]
pub struct PairTable {
    slots: Cow<'static, [u64]>,
    bits: u32,
    count: usize,
}

/// Pair slot tables, the compiled-in [`PairTable`]s and the encoder's own: each slot
/// one u64 `a << 42 | b << 21 | id` (ids up to 2^21 - 1), all ones when empty, linear
/// probing from the multiplicative hash of the key `a << 21 | b` (`build.rs` writes the
/// same layout).
pub(crate) const PAIR_ID_BITS: u32 = 21;
const PAIR_HASH: u64 = 0x9E37_79B9_7F4A_7C15;
pub(crate) const PAIR_EMPTY: u64 = u64::MAX;

/// The slot-table key of pair `(a, b)`, or `None` when an id does not fit a slot.
#[inline(always)]
pub(crate) fn pair_key(a: u32, b: u32) -> Option<u64> {
    let limit = 1u32 << PAIR_ID_BITS;
    (a < limit && b < limit).then(|| u64::from(a) << PAIR_ID_BITS | u64::from(b))
}

/// The id stored for `key` in a slot table of `2^bits` slots (`bits` at least 1),
/// reading slot `at` with `slot(at)`.
#[inline(always)]
pub(crate) fn probe_pair(key: u64, bits: u32, slot: impl Fn(usize) -> u64) -> Option<u32> {
    let mask = (1usize << bits) - 1;
    let mut at = (key.wrapping_mul(PAIR_HASH) >> (64 - bits)) as usize;
    loop {
        let value = slot(at);
        // An empty slot never matches: keys stay below 2^42.
        if value >> PAIR_ID_BITS == key {
            return Some((value & ((1 << PAIR_ID_BITS) - 1)) as u32);
        }
        if value == PAIR_EMPTY {
            return None;
        }
        at = (at + 1) & mask;
    }
}

/// Puts `key -> id` into a slot table of `2^bits` slots (at most half full), unless
/// `key` is there already: then it returns false and changes nothing.
pub(crate) fn insert_pair(slots: &mut [u64], bits: u32, key: u64, id: u32) -> bool {
    let mask = (1usize << bits) - 1;
    let mut at = (key.wrapping_mul(PAIR_HASH) >> (64 - bits)) as usize;
    loop {
        let value = slots[at];
        if value == PAIR_EMPTY {
            slots[at] = key << PAIR_ID_BITS | u64::from(id);
            return true;
        }
        if value >> PAIR_ID_BITS == key {
            return false;
        }
        at = (at + 1) & mask;
    }
}

/// The number of slot bits for a table of `pairs` pairs (at most half full).
pub(crate) fn pair_table_bits(pairs: usize) -> u32 {
    (2 * pairs.max(1))
        .next_power_of_two()
        .trailing_zeros()
        .max(4)
}

impl PairTable {
    /// The table in `slots` (`2^bits` little-endian slots holding `count` pairs), or
    /// `None` if the bytes are not that many slots.
    pub fn new(slots: &'static [u8], bits: u32, count: usize) -> Option<PairTable> {
        if !(1..40).contains(&bits) || slots.len() != 8 << bits {
            return None;
        }
        Some(PairTable {
            slots: crate::blob::le_words(slots, u64::from_le_bytes)?,
            bits,
            count,
        })
    }

    /// An empty table with room for `capacity` pairs, to fill with [`insert`](Self::insert).
    pub(crate) fn with_capacity(capacity: usize) -> PairTable {
        let bits = pair_table_bits(capacity);
        PairTable {
            slots: vec![PAIR_EMPTY; 1 << bits].into(),
            bits,
            count: 0,
        }
    }

    /// Adds `(a, b) -> id`: `Some(true)` if the pair was new, `Some(false)` (and nothing
    /// changed) if it was there; `None` if an id does not fit [`PAIR_ID_BITS`] bits or the
    /// table is as full as its capacity.
    pub(crate) fn insert(&mut self, a: u32, b: u32, id: u32) -> Option<bool> {
        let key = pair_key(a, b)?;
        if id >= 1 << PAIR_ID_BITS || 2 * self.count >= self.slots.len() {
            return None;
        }
        let new = insert_pair(self.slots.to_mut(), self.bits, key, id);
        self.count += usize::from(new);
        Some(new)
    }

    /// The slots, `2^bits` of them.
    pub(crate) fn slots(&self) -> &[u64] {
        &self.slots
    }

    pub(crate) fn bits(&self) -> u32 {
        self.bits
    }

    /// The id of pair `(a, b)`.
    #[inline]
    pub fn get(&self, a: u32, b: u32) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        probe_pair(pair_key(a, b)?, self.bits, |at| self.slots[at])
    }

    /// Every `(a, b, id)` in the table.
    fn iter(&self) -> impl Iterator<Item = (u32, u32, u32)> + '_ {
        let field = u64::from((1u32 << PAIR_ID_BITS) - 1);
        self.slots
            .iter()
            .copied()
            .filter(|&slot| slot != PAIR_EMPTY)
            .map(move |slot| {
                (
                    (slot >> (2 * PAIR_ID_BITS)) as u32,
                    (slot >> PAIR_ID_BITS & field) as u32,
                    (slot & field) as u32,
                )
            })
    }
}

impl PairIds {
    /// Pairs read from a table (compiled in, or filled from a model file); the map is
    /// filled from it on first use.
    pub fn from_table(table: PairTable) -> PairIds {
        PairIds {
            map: OnceLock::new(),
            table,
        }
    }

    /// The id of pair `(a, b)`, from the compiled-in table when there is one (without
    /// filling the map).
    #[inline]
    pub fn id(&self, a: u32, b: u32) -> Option<u32> {
        if self.table.slots.is_empty() {
            self.get(&(a, b)).copied()
        } else {
            self.table.get(a, b)
        }
    }

    /// The slot table, when the pairs came as one (built-ins and model files).
    pub(crate) fn table(&self) -> Option<&PairTable> {
        (!self.table.slots.is_empty()).then_some(&self.table)
    }

    /// The number of pairs (without filling the map).
    pub fn count(&self) -> usize {
        if self.table.slots.is_empty() {
            self.len()
        } else {
            self.table.count
        }
    }
}

impl From<AHashMap<(u32, u32), u32>> for PairIds {
    fn from(map: AHashMap<(u32, u32), u32>) -> PairIds {
        PairIds {
            map: OnceLock::from(map),
            table: PairTable::default(),
        }
    }
}

impl Deref for PairIds {
    type Target = AHashMap<(u32, u32), u32>;
    fn deref(&self) -> &Self::Target {
        self.map.get_or_init(|| {
            let mut map = AHashMap::with_capacity(self.table.count);
            map.extend(self.table.iter().map(|(a, b, id)| ((a, b), id)));
            map
        })
    }
}

impl PartialEq for PairIds {
    fn eq(&self, other: &PairIds) -> bool {
        **self == **other
    }
}

/// A word-level vocabulary (the seed's first tokenizer): words by id, and `[UNK]`.
#[derive(Debug, Clone)]
pub struct WordModel {
    pub source: ModelSource,
    /// Counts when learned, parallel to the words (display only).
    pub counts: Vec<u64>,
    /// The words (ids `0..`) and the table from a word (its bytes) to its id.
    pub ids: crate::word::WordIds,
    /// The unknown-word token's text and id (`[UNK]`, the number of words).
    pub unk_text: String,
    pub unk_id: u32,
}

impl WordModel {
    /// The words, by id (`[UNK]` is not among them).
    pub fn words(&self) -> &crate::word::WordList {
        self.ids.words()
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
    /// Where the model came from.
    pub fn source(&self) -> &ModelSource {
        match self {
            Model::Bpe(m) => &m.source,
            Model::Word(m) => &m.source,
        }
    }
}

/// The model-file format version this build reads and writes.
pub const FORMAT_VERSION: u64 = 1;

/// The most bytes a model's tokens may hold in all (4 GiB less one byte):
/// [`BpeModel::token_offsets`] are u32.
pub const MAX_TOKEN_BYTES: u64 = u32::MAX as u64;

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
pub fn merges_within_limit(merges: &[(u32, u32)]) -> usize {
    token_offsets(merges).map_or_else(|k| k, |_| merges.len())
}

/// Builds the bytes of every id of a merge list over `base_id_of_byte`: returns
/// `(token_bytes, token_offsets)` as `BpeModel` stores them, or `Err(k)` when merge `k`
/// (0-based) takes the tokens past [`MAX_TOKEN_BYTES`] in all. Tokens can grow that long
/// from few merges: each can double the longest one, and on text without repeats the
/// seed's ties merge onto the same token again and again (30 KB of random bytes trained
/// to the end: 26,427 merges, 350 MB of tokens).
///
/// # Panics
/// If a merge uses an id not defined before it.
pub fn token_table(
    base_id_of_byte: &[u32; 256],
    merges: &[(u32, u32)],
) -> std::result::Result<(Vec<u8>, Vec<u32>), usize> {
    let offsets = token_offsets(merges)?;
    Ok((token_bytes(base_id_of_byte, merges, &offsets), offsets))
}

/// The token bytes of `merges` (the second half of [`token_table`]), placed at
/// `offsets`, their [`token_offsets`].
pub(crate) fn token_bytes(
    base_id_of_byte: &[u32; 256],
    merges: &[(u32, u32)],
    offsets: &[u32],
) -> Vec<u8> {
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
pub fn identity_bytes() -> [u32; 256] {
    std::array::from_fn(|i| i as u32)
}

impl BpeModel {
    /// A model from a merge list (ids 256.. in order), as `bpe-train` produces it.
    ///
    /// # Panics
    /// If a merge uses an id not defined before it, or the tokens hold more than
    /// [`MAX_TOKEN_BYTES`] in all.
    pub fn from_merges(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merges: Vec<(u32, u32)>,
    ) -> BpeModel {
        let (token_bytes, token_offsets) = token_table(&base_id_of_byte, &merges)
            .unwrap_or_else(|k| panic!("merge {k}: tokens over {MAX_TOKEN_BYTES} bytes"));
        let merge_ids = merges
            .iter()
            .enumerate()
            .map(|(k, &pair)| (pair, 256 + k as u32))
            .collect::<AHashMap<_, _>>()
            .into();
        BpeModel {
            source,
            split,
            specials,
            base_id_of_byte,
            merges,
            merge_ids,
            token_bytes: token_bytes.into(),
            token_offsets: token_offsets.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-ins' pair tables are read in place from the binary (their slots start
    /// 8-aligned in the blob), and a model file's table is the one its parse filled.
    #[test]
    fn pair_tables_are_read_in_place() {
        for name in crate::tiktoken::BUILTINS {
            let model = crate::tiktoken::builtin(name).unwrap();
            let table = model.merge_ids.table().unwrap();
            if cfg!(target_endian = "little") {
                assert!(matches!(table.slots, Cow::Borrowed(_)), "{name}");
            }
        }
        let file = b"{\"kind\":\"bpe\",\"version\":1,\"split\":\"none\"}\n\
            {\"id\":256,\"pair\":[97,98],\"text\":\"ab\",\"count\":2}\n";
        let model = crate::modelfile::parse(file, ModelSource::Builtin("t"), "t").unwrap();
        let Model::Bpe(model) = model else { panic!() };
        assert_eq!(model.merge_ids.table().unwrap().count, 1);
        assert_eq!(model.merge_ids.id(97, 98), Some(256));
        assert_eq!(model.merge_ids.id(98, 97), None);
    }

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
