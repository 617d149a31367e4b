//! The encoder's view of a model's units (`crate::model::units`, which holds the rule
//! and why it is exact): lookup tables by byte pair and by code point, and the test of a
//! unit's neighbours' bytes.

use crate::model::units::{UnitTables, CHAR3, CHAR3_END};

/// An entry's flag: a unit (whole, unless its neighbours' bytes forbid).
pub(super) const UNIT: u64 = 1 << 63;

/// Which pieces of a sequence its BPE may start from whole.
pub(super) struct Units {
    /// Per byte pair `x << 8 | y`: the merge id of its two bytes' ids in the low 32 bits
    /// (as `Encoder::byte_pairs`; `NONE`: none), and for a unit `UNIT | right << 48 |
    /// left << 32`, its byte sets' indices.
    pub(super) pairs: Box<[u64]>,
    /// Per three-byte code point less [`CHAR3`]: 0, or `UNIT | right << 48 | left << 32 |
    /// id`.
    chars: Box<[u64]>,
    left: Box<[[u64; 4]]>,
    right: Box<[[u64; 4]]>,
}

impl Units {
    /// The lookup tables of `tables`, with `byte_pairs` (`Encoder::byte_pairs`).
    pub(super) fn new(tables: &UnitTables, byte_pairs: &[u32]) -> Units {
        let mut pairs: Box<[u64]> = byte_pairs.iter().map(|&id| u64::from(id)).collect();
        let sets = |left: u32, right: u32| UNIT | u64::from(right) << 48 | u64::from(left) << 32;
        for &[xy, left, right] in &tables.pairs {
            pairs[xy as usize] |= sets(left.into(), right.into());
        }
        let mut chars = vec![0u64; (CHAR3_END - CHAR3) as usize].into_boxed_slice();
        for &[cp, id, lr] in &tables.chars {
            chars[(cp - CHAR3) as usize] = sets(lr & 0xFFFF, lr >> 16) | u64::from(id);
        }
        Units {
            pairs,
            chars,
            left: tables.left.clone().into_boxed_slice(),
            right: tables.right.clone().into_boxed_slice(),
        }
    }

    /// Whether the unit of entry `e`, `len` bytes at `bytes[at..]`, starts whole beside
    /// the bytes around it.
    #[inline(always)]
    pub(super) fn allowed(&self, e: u64, bytes: &[u8], at: usize, len: usize) -> bool {
        let has = |set: &[u64; 4], q: u8| set[q as usize / 64] >> (q % 64) & 1 != 0;
        if at > 0 && has(&self.left[(e >> 32 & 0x7FFF) as usize], bytes[at - 1]) {
            return false;
        }
        match bytes.get(at + len) {
            Some(&q) => !has(&self.right[(e >> 48 & 0x7FFF) as usize], q),
            None => true,
        }
    }

    /// The id of the three-byte character at `bytes[at..]` (whose first byte is
    /// 0xE0..=0xEF), if it starts whole there.
    #[inline(always)]
    pub(super) fn char3(&self, bytes: &[u8], at: usize) -> Option<u32> {
        let cont = |i: usize| {
            bytes
                .get(i)
                .filter(|&&c| c & 0xC0 == 0x80)
                .map(|&c| u32::from(c & 0x3F))
        };
        let cp = u32::from(bytes[at] & 0x0F) << 12 | cont(at + 1)? << 6 | cont(at + 2)?;
        let e = *self.chars.get(cp.checked_sub(CHAR3)? as usize)?;
        (e & UNIT != 0 && self.allowed(e, bytes, at, 3)).then_some(e as u32)
    }
}
