//! Which pieces of text BPE may start from as one token (a "unit") instead of their
//! bytes, and beside which bytes: two-byte tokens and three-byte UTF-8 characters. Built
//! from a model's pairs alone (std only: `build.rs` includes this file to compile the
//! built-ins' in); the encoder reads them (`crate::encode`, module `units`).
//!
//! The rule, for a unit `u` at some place in a sequence, with `q` the byte before it and
//! `q'` the byte after it (no condition on a side that has no byte):
//!
//! - (A) at every step of BPE on `u`'s bytes alone, the merge id of that step is below
//!   the id of every pair the step's first piece can form with a token ending in `q`
//!   (`(X, piece)` for any token `X` whose last byte is `q`), and below that of every
//!   pair its last piece can form with a token starting with `q'`;
//! - (C) every pair `(X, u)` with `X` ending in `q`, and every `(u, Y)` with `Y` starting
//!   with `q'`, has an id above the largest id of `u`'s own merges.
//!
//! Then BPE from that sequence with `u` whole gives the ids BPE from its bytes gives,
//! and so for any set of units that do not overlap, each meeting the rule with its own
//! neighbours' bytes. Why: BPE merges the lowest pair, leftmost first. By (A) no merge
//! joins a piece of `u` to anything outside it while `u` is incomplete (whatever is
//! beside it ends in `q` or starts with `q'`, and `u`'s own next merge is lower, strictly,
//! so leftmost-first never decides it), so `u`'s merges are those it makes alone, in the
//! same order. Drop them from the run from bytes: at each step the run from units holds
//! the same sequence except that units still incomplete in the other are whole, which
//! adds only pairs `(X, u)` and `(u, Y)`; by (C) their ids are above `u`'s pending merge,
//! which is not below the merge the run from bytes makes, so the run from units makes
//! that same merge, and both end with the same ids. `q` and `q'` stand for whatever token
//! is beside `u` at any time (merges beside it only grow that token outward). The rule
//! holds for rank tables (a pair's id is its concatenation's rank) and model files (a
//! pair's id is its merge's) alike. Two overlapping two-byte units can never both meet
//! it (each would need its merge below the other's).
//!
//! The conditions depend on `q` and `q'` only through one 256-bit set per unit and side,
//! kept once each: o200k_base's 4,653 two-byte units and 4,471 three-byte characters
//! have ~1,490 distinct sets a side.

use std::collections::HashMap;

/// No merge.
const NO: u32 = u32::MAX;
/// At most this many distinct byte sets a side (indices fit 15 bits); a unit that would
/// need another is left out (it starts from its bytes).
pub(crate) const MAX_SETS: usize = 1 << 15;
/// Three-byte characters' code points start here.
pub(crate) const CHAR3: u32 = 0x800;
/// And end below this (UTF-8's three-byte range).
pub(crate) const CHAR3_END: u32 = 0x1_0000;

/// A model's units, as [`build`] finds them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct UnitTables {
    /// Two-byte units: `[x << 8 | y, left set, right set]` (bytes `x`, `y`).
    pub(crate) pairs: Vec<[u16; 3]>,
    /// Three-byte characters: `[code point, id, left set | right set << 16]`.
    pub(crate) chars: Vec<[u32; 3]>,
    /// Byte sets `q` before a unit beside which it starts from bytes (bit `q`).
    pub(crate) left: Vec<[u64; 4]>,
    /// Byte sets `q'` after a unit beside which it starts from bytes.
    pub(crate) right: Vec<[u64; 4]>,
}

/// A unit's merges alone: its id and the pieces whose outward pairs must stay above a
/// merge id, `(piece, id)`, on the left and on the right.
struct Alone {
    id: u32,
    left: Vec<(u32, u32)>,
    right: Vec<(u32, u32)>,
}

/// BPE of two or three base ids alone, if it ends in one token.
fn alone(pieces: &[u32], pair: &impl Fn(u32, u32) -> u32) -> Option<Alone> {
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let (id, largest) = match *pieces {
        [x, y] => {
            let r = pair(x, y);
            left.push((x, r));
            right.push((y, r));
            (r, r)
        }
        [x, y, z] => {
            let (a, b) = (pair(x, y), pair(y, z));
            if a == NO && b == NO {
                return None;
            }
            if a <= b {
                let r = pair(a, z);
                left.extend([(x, a), (a, r)]);
                right.extend([(z, a), (z, r)]);
                (r, a.max(r))
            } else {
                let r = pair(x, b);
                left.extend([(x, b), (x, r)]);
                right.extend([(z, b), (b, r)]);
                (r, b.max(r))
            }
        }
        _ => return None,
    };
    if id == NO {
        return None;
    }
    left.push((id, largest));
    right.push((id, largest));
    Some(Alone { id, left, right })
}

/// The units of a model: `base[b]` is byte `b`'s id, `pair(a, b)` the merge id of a pair
/// (`u32::MAX`: none), `short` its tokens of two and three bytes as `(id, bytes)`,
/// `pairs` every `(a, b, id)` of the model, `ends(id)` a token's first and last byte,
/// and every id below `ids`.
pub(crate) fn build(
    base: &[u32; 256],
    pair: impl Fn(u32, u32) -> u32,
    short: impl Iterator<Item = (u32, Vec<u8>)>,
    pairs: impl Iterator<Item = (u32, u32, u32)>,
    ends: impl Fn(u32) -> Option<[u8; 2]>,
    ids: usize,
) -> UnitTables {
    // (key, unit): keys below 2^16 are byte pairs, the others code points + 2^16.
    let mut units: Vec<(u32, Alone)> = Vec::new();
    for (id, bytes) in short {
        let key = match *bytes.as_slice() {
            [x, y] => u32::from(x) << 8 | u32::from(y),
            [_, _, _] => {
                let one = std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|s| s.chars().next());
                match one.filter(|c| c.len_utf8() == 3) {
                    Some(c) => u32::from(c) + (1 << 16),
                    None => continue,
                }
            }
            _ => continue,
        };
        let pieces: Vec<u32> = bytes.iter().map(|&b| base[b as usize]).collect();
        match alone(&pieces, &pair) {
            Some(a) if a.id == id => units.push((key, a)),
            _ => {}
        }
    }
    units.sort_unstable_by_key(|u| u.0);
    // The lowest id of a pair (X, piece) per last byte of X, and of (piece, Y) per first
    // byte of Y, for every piece above: `at[side][piece]` indexes `lows[side]`.
    let mut at = [vec![NO; ids], vec![NO; ids]];
    let mut lows: [Vec<Vec<(u8, u32)>>; 2] = Default::default();
    for (_, a) in &units {
        for (side, list) in [&a.left, &a.right].into_iter().enumerate() {
            for &(piece, _) in list {
                if let Some(slot) = at[side].get_mut(piece as usize) {
                    if *slot == NO {
                        *slot = lows[side].len() as u32;
                        lows[side].push(Vec::new());
                    }
                }
            }
        }
    }
    let index = |side: usize, id: u32| at[side].get(id as usize).copied().unwrap_or(NO);
    for (a, b, id) in pairs {
        let (left, right) = (index(0, b), index(1, a));
        if left != NO {
            if let Some([_, q]) = ends(a) {
                low(&mut lows[0][left as usize], q, id);
            }
        }
        if right != NO {
            if let Some([q, _]) = ends(b) {
                low(&mut lows[1][right as usize], q, id);
            }
        }
    }
    let mut tables = UnitTables::default();
    let mut known: [HashMap<[u64; 4], u32>; 2] = Default::default();
    'units: for (key, a) in units {
        let mut sets = [[0u64; 4]; 2];
        for (side, list) in [a.left, a.right].into_iter().enumerate() {
            for (piece, above) in list {
                let i = index(side, piece);
                if i == NO {
                    continue 'units;
                }
                for &(q, id) in &lows[side][i as usize] {
                    if id <= above {
                        sets[side][q as usize / 64] |= 1 << (q % 64);
                    }
                }
            }
        }
        let mut index = [0u32; 2];
        for side in 0..2 {
            let kept = if side == 0 {
                &mut tables.left
            } else {
                &mut tables.right
            };
            index[side] = match known[side].get(&sets[side]) {
                Some(&i) => i,
                None if kept.len() < MAX_SETS => {
                    let i = kept.len() as u32;
                    kept.push(sets[side]);
                    known[side].insert(sets[side], i);
                    i
                }
                None => continue 'units,
            };
        }
        if key < 1 << 16 {
            tables
                .pairs
                .push([key as u16, index[0] as u16, index[1] as u16]);
        } else {
            tables
                .chars
                .push([key - (1 << 16), a.id, index[0] | index[1] << 16]);
        }
    }
    tables
}

/// Keeps the lowest id per byte in a short list of `(byte, id)`.
fn low(list: &mut Vec<(u8, u32)>, q: u8, id: u32) {
    match list.iter_mut().find(|(b, _)| *b == q) {
        Some((_, low)) => *low = (*low).min(id),
        None => list.push((q, id)),
    }
}

impl UnitTables {
    /// The tables as bytes (little-endian u32 words: the four counts, the pairs as
    /// `x << 8 | y | left << 16` and `right`, the characters' three words, the sets'
    /// eight words each), for `build.rs`.
    #[cfg_attr(not(test), allow(dead_code))] // (build.rs writes them)
    pub(crate) fn to_bytes(&self) -> Vec<u8> {
        let mut words: Vec<u32> = vec![
            self.pairs.len() as u32,
            self.chars.len() as u32,
            self.left.len() as u32,
            self.right.len() as u32,
        ];
        for &[xy, l, r] in &self.pairs {
            words.extend([u32::from(xy) | u32::from(l) << 16, u32::from(r)]);
        }
        for c in &self.chars {
            words.extend(c);
        }
        for set in self.left.iter().chain(&self.right) {
            for w in set {
                words.extend([*w as u32, (*w >> 32) as u32]);
            }
        }
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// The tables [`UnitTables::to_bytes`] wrote, or `None` if `bytes` are not such.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<UnitTables> {
        let mut words = bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        let mut next = || words.next();
        let counts = [next()?, next()?, next()?, next()?].map(|c| c as usize);
        let mut tables = UnitTables::default();
        for _ in 0..counts[0] {
            let (w, r) = (next()?, next()?);
            tables
                .pairs
                .push([w as u16, (w >> 16) as u16, u16::try_from(r).ok()?]);
        }
        for _ in 0..counts[1] {
            tables.chars.push([next()?, next()?, next()?]);
        }
        for side in 0..2 {
            for _ in 0..counts[2 + side] {
                let mut set = [0u64; 4];
                for w in &mut set {
                    *w = u64::from(next()?) | u64::from(next()?) << 32;
                }
                if side == 0 {
                    tables.left.push(set);
                } else {
                    tables.right.push(set);
                }
            }
        }
        let sets_ok = |i: u32, side: usize| (i as usize) < counts[2 + side];
        let fits = tables
            .pairs
            .iter()
            .all(|p| sets_ok(p[1].into(), 0) && sets_ok(p[2].into(), 1))
            && tables.chars.iter().all(|c| {
                (CHAR3..CHAR3_END).contains(&c[0])
                    && sets_ok(c[2] & 0xFFFF, 0)
                    && sets_ok(c[2] >> 16, 1)
            });
        (fits && next().is_none()).then_some(tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes `build.rs` writes read back as the same tables, and a blob cut short,
    /// lengthened or naming a set it lacks is refused.
    #[test]
    fn tables_round_trip_through_bytes() {
        let model = crate::model::builtin("cl100k_base").unwrap();
        let tables = model.units();
        assert!(!tables.pairs.is_empty() && !tables.chars.is_empty());
        let bytes = tables.to_bytes();
        assert_eq!(UnitTables::from_bytes(&bytes), Some(tables));
        assert_eq!(UnitTables::from_bytes(&bytes[..bytes.len() - 4]), None);
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0; 4]);
        assert_eq!(UnitTables::from_bytes(&longer), None);
        let mut bad = bytes;
        // The first pair's left set: one past the last set.
        let sets = u32::from_le_bytes(bad[8..12].try_into().unwrap());
        bad[18..20].copy_from_slice(&(sets as u16).to_le_bytes());
        assert_eq!(UnitTables::from_bytes(&bad), None);
    }
}
