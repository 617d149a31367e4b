//! A BPE model's pair -> merged id map: a slot table in the layout of
//! [`super::tables`] (compiled in for the built-ins, filled as a model file is read),
//! read in place by the encoder, with a hash map beside it for code that wants one.

use std::borrow::Cow;
use std::ops::Deref;
use std::sync::OnceLock;

use ahash::AHashMap;

use super::tables::{
    insert_pair, pair_bloom_shift, pair_key, pair_table_bits, probe_pair, PAIR_EMPTY, PAIR_ID_BITS,
};

/// The pair -> merged id map of a [`BpeModel`](super::BpeModel), read as an `AHashMap` through `Deref`.
/// The built-in vocabularies carry it as a ready hash table compiled into the binary
/// ([`PairIds::id`] reads it directly) and fill the map only if something asks for the
/// map itself: filling o200k_base's 446k pairs took ~22 of the ~34 ms that
/// `echo hi | bpe-encode` took.
#[derive(Debug, Clone, Default)]
pub(crate) struct PairIds {
    map: OnceLock<AHashMap<(u32, u32), u32>>,
    table: PairTable,
}

/// A hash table of pairs in the layout `build.rs` writes: `2^bits` u64 slots
/// `a << 42 | b << 21 | id` (all ones: empty), linear probing from the multiplicative
/// hash of `a << 21 | b`. A built-in's is read in place from the binary; a model file's
/// is filled as its lines are read ([`PairTable::with_capacity`]), and the encoder reads
/// either in place.
#[derive(Debug, Clone, Default)]
pub(crate) struct PairTable {
    slots: Cow<'static, [u64]>,
    bits: u32,
    count: usize,
    /// A built-in's Bloom filter of its pairs (`super::tables::pair_bloom`), compiled in
    /// beside the table: building o200k_base's at start-up took ~3.5 ms of every
    /// encoding run.
    bloom: Option<&'static [u64]>,
}

impl PairTable {
    /// The table in `slots` (`2^bits` little-endian slots holding `count` pairs), or
    /// `None` if the bytes are not that many slots.
    pub(crate) fn new(slots: &'static [u8], bits: u32, count: usize) -> Option<PairTable> {
        if !(1..40).contains(&bits) || slots.len() != 8 << bits {
            return None;
        }
        Some(PairTable {
            slots: crate::blob::le_words(slots, u64::from_le_bytes)?,
            bits,
            count,
            bloom: None,
        })
    }

    /// The table with its Bloom filter `bloom` (little-endian words, read in place),
    /// or `None` if it is not of the size [`pair_bloom_shift`] gives.
    pub(crate) fn with_bloom(mut self, bloom: &'static [u8]) -> Option<PairTable> {
        let words = (1usize << (64 - pair_bloom_shift(self.count))) / 64;
        match crate::blob::le_words(bloom, u64::from_le_bytes)? {
            Cow::Borrowed(words_in_place) if words_in_place.len() == words => {
                self.bloom = Some(words_in_place);
                Some(self)
            }
            // (A big-endian target's copy: the encoder builds its own.)
            Cow::Owned(copy) if copy.len() == words => Some(self),
            _ => None,
        }
    }

    /// The compiled-in Bloom filter of the pairs, if the table has one.
    pub(crate) fn bloom(&self) -> Option<&'static [u64]> {
        self.bloom
    }

    /// The table of `slots` (`2^bits` of them, holding `count` pairs).
    pub(crate) fn from_slots(slots: Vec<u64>, bits: u32, count: usize) -> PairTable {
        PairTable {
            slots: slots.into(),
            bits,
            count,
            bloom: None,
        }
    }

    /// An empty table with room for `capacity` pairs, to fill with [`insert`](Self::insert).
    pub(crate) fn with_capacity(capacity: usize) -> PairTable {
        let bits = pair_table_bits(capacity);
        PairTable {
            slots: vec![PAIR_EMPTY; 1 << bits].into(),
            bits,
            count: 0,
            bloom: None,
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
        self.bloom = None;
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
    fn get(&self, a: u32, b: u32) -> Option<u32> {
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
    pub(crate) fn from_table(table: PairTable) -> PairIds {
        PairIds {
            map: OnceLock::new(),
            table,
        }
    }

    /// The id of pair `(a, b)`, from the compiled-in table when there is one (without
    /// filling the map).
    #[inline]
    pub(crate) fn id(&self, a: u32, b: u32) -> Option<u32> {
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

    /// Every `(a, b, id)`, from the slot table when there is one (without filling the
    /// map), in no particular order.
    pub(crate) fn each(&self) -> Box<dyn Iterator<Item = (u32, u32, u32)> + '_> {
        if self.table.slots.is_empty() {
            Box::new(self.iter().map(|(&(a, b), &id)| (a, b, id)))
        } else {
            Box::new(self.table.iter())
        }
    }

    /// The number of pairs (without filling the map).
    pub(crate) fn count(&self) -> usize {
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

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crate::model::{builtin, Model, ModelSource, BUILTINS};

    /// The built-ins' pair tables are read in place from the binary (their slots start
    /// 8-aligned in the blob), and a model file's table is the one its parse filled.
    #[test]
    fn pair_tables_are_read_in_place() {
        for name in BUILTINS {
            let model = builtin(name).unwrap();
            let table = model.merge_ids.table().unwrap();
            if cfg!(target_endian = "little") {
                assert!(matches!(table.slots, Cow::Borrowed(_)), "{name}");
            }
        }
        let file = b"{\"kind\":\"bpe\",\"version\":1,\"split\":\"none\"}\n\
            {\"id\":256,\"pair\":[97,98],\"text\":\"ab\",\"count\":2}\n";
        let model = crate::format::model_file::parse(file, ModelSource::Builtin("t"), "t").unwrap();
        let Model::Bpe(model) = model else { panic!() };
        assert_eq!(model.merge_ids.table().unwrap().count, 1);
        assert_eq!(model.merge_ids.id(97, 98), Some(256));
        assert_eq!(model.merge_ids.id(98, 97), None);
    }
}
