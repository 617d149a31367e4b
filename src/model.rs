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

/// Builds the bytes of every id of a merge list over `base_id_of_byte`: returns
/// `(token_bytes, token_offsets)` as `BpeModel` stores them.
pub fn token_table(base_id_of_byte: &[u32; 256], merges: &[(u32, u32)]) -> (Vec<u8>, Vec<u32>) {
    let mut byte_of_base = [0u8; 256];
    for (byte, &id) in base_id_of_byte.iter().enumerate() {
        byte_of_base[id as usize] = byte as u8;
    }
    let mut bytes: Vec<u8> = byte_of_base.to_vec();
    let mut offsets: Vec<u32> = (0..=256).collect();
    for &(a, b) in merges {
        let (a0, a1) = (
            offsets[a as usize] as usize,
            offsets[a as usize + 1] as usize,
        );
        let (b0, b1) = (
            offsets[b as usize] as usize,
            offsets[b as usize + 1] as usize,
        );
        bytes.extend_from_within(a0..a1);
        bytes.extend_from_within(b0..b1);
        offsets.push(bytes.len() as u32);
    }
    (bytes, offsets)
}

/// The identity byte mapping of trained models.
pub fn identity_bytes() -> [u32; 256] {
    std::array::from_fn(|i| i as u32)
}

impl BpeModel {
    /// A model from a merge list (ids 256.. in order), as `bpe-train` produces it.
    pub fn from_merges(
        source: ModelSource,
        split: Option<SplitSpec>,
        specials: Vec<SpecialToken>,
        base_id_of_byte: [u32; 256],
        merges: Vec<(u32, u32)>,
    ) -> BpeModel {
        let (token_bytes, token_offsets) = token_table(&base_id_of_byte, &merges);
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
}
