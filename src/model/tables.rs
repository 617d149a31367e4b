//! The one definition of a BPE vocabulary's tables as bytes, shared by `build.rs` (which
//! includes this file with `#[path]` to compile the built-in vocabularies into the
//! binaries) and the runtime (which reads them in place, and parses `.tiktoken` files
//! with the same code). Plain `std` only: nothing here may name the crate.
//!
//! - A tiktoken rank file is one `base64-token rank` per line ([`parse_rank_file`]).
//! - A pair slot table holds `2^bits` u64 slots `a << 42 | b << 21 | id` (all ones:
//!   empty), at most half full, linear probing from the multiplicative hash of the key
//!   `a << 21 | b` ([`insert_pair`], [`probe_pair`]).
//! - A built-in blob, integers little-endian: `n` (ids, gaps included), the base id of
//!   each byte (256), token offsets (`n + 1`), the number of pairs and `bits` (u32 each),
//!   a zero u32 where needed to align what follows to 8 bytes, the pair slot table, then
//!   the token bytes in id order ([`write_blob`], [`BlobLayout`]).

use std::collections::HashMap;
use std::hash::BuildHasher;

/// Bits per id in a pair slot: ids up to 2^21 - 1 fit a slot.
pub(crate) const PAIR_ID_BITS: u32 = 21;
/// The multiplicative hash of the slot tables.
const PAIR_HASH: u64 = 0x9E37_79B9_7F4A_7C15;
/// An empty slot.
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

/// Ranks at or above this are refused: the id tables are dense, and real vocabularies
/// stay far below it.
const MAX_RANK: u32 = 1 << 24;

/// A rank file's vocabulary in the layout of a model's tables.
pub(crate) struct RankTables {
    /// The bytes of every id, in id order (gaps are empty).
    pub(crate) token_bytes: Vec<u8>,
    /// `token_offsets[i]..token_offsets[i + 1]` is id `i`'s span; `n + 1` entries.
    pub(crate) token_offsets: Vec<u32>,
    /// The id of each single byte.
    pub(crate) base_id_of_byte: [u32; 256],
    /// Every split of every token into two tokens: `(a, b, id)`.
    pub(crate) pairs: Vec<(u32, u32, u32)>,
}

/// A problem in a rank file: the 1-based line (0 for the file as a whole) and what.
type RankError = (usize, String);

/// Parses a tiktoken rank file (`base64-token rank` per line, blank lines ignored, a
/// `\r` before the newline allowed). Every single byte must have a token; tokens and
/// ranks must be unique; ranks below [`MAX_RANK`]. The first problem is returned with
/// its line. `S` is the hasher of the token lookup (the runtime passes a fast one).
pub(crate) fn parse_rank_file<S: BuildHasher + Default>(
    bytes: &[u8],
) -> Result<RankTables, RankError> {
    // Pass 1: decode every line into (rank, span of `decoded`, line).
    let mut decoded: Vec<u8> = Vec::with_capacity(bytes.len() * 3 / 4);
    let mut entries: Vec<(u32, u32, u32, usize)> = Vec::with_capacity(bytes.len() / 8);
    let mut max_rank: Option<u32> = None;
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut fields = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let Some(token) = fields.next() else { continue };
        let (Some(rank), None) = (fields.next(), fields.next()) else {
            return Err((
                line_no,
                "expected two fields: a base64 token and its rank".into(),
            ));
        };
        let rank = parse_rank(rank)
            .ok_or_else(|| (line_no, "rank is not a non-negative integer".to_string()))?;
        if rank >= MAX_RANK {
            return Err((
                line_no,
                format!("rank {rank} is too large (limit {MAX_RANK})"),
            ));
        }
        let start = decoded.len();
        if !decode_base64(token, &mut decoded) {
            return Err((line_no, "token is not valid base64".into()));
        }
        if decoded.len() == start {
            return Err((line_no, "empty token".into()));
        }
        entries.push((rank, start as u32, decoded.len() as u32, line_no));
        max_rank = Some(max_rank.map_or(rank, |m: u32| m.max(rank)));
    }
    let Some(max_rank) = max_rank else {
        return Err((0, "rank file has no tokens".into()));
    };

    // Pass 2: the dense id -> span table; empty spans are gaps.
    let n = max_rank as usize + 1;
    let mut spans = vec![(0u32, 0u32); n];
    let mut line_of_rank = vec![0usize; n];
    let mut by_bytes: HashMap<&[u8], u32, S> =
        HashMap::with_capacity_and_hasher(entries.len(), S::default());
    let mut base_id_of_byte = [u32::MAX; 256];
    for &(rank, start, end, line_no) in &entries {
        let r = rank as usize;
        if spans[r].1 > spans[r].0 {
            let first = line_of_rank[r];
            return Err((
                line_no,
                format!("rank {rank} is used twice (first on line {first})"),
            ));
        }
        let token = &decoded[start as usize..end as usize];
        if let Some(&other) = by_bytes.get(token) {
            return Err((
                line_no,
                format!("token is listed twice (ranks {other} and {rank})"),
            ));
        }
        by_bytes.insert(token, rank);
        spans[r] = (start, end);
        line_of_rank[r] = line_no;
        if token.len() == 1 {
            base_id_of_byte[token[0] as usize] = rank;
        }
    }
    if let Some(b) = base_id_of_byte.iter().position(|&id| id == u32::MAX) {
        return Err((0, format!("rank file has no token for byte 0x{b:02x}")));
    }

    let mut token_bytes = Vec::with_capacity(decoded.len());
    let mut token_offsets = Vec::with_capacity(n + 1);
    token_offsets.push(0u32);
    for &(start, end) in &spans {
        token_bytes.extend_from_slice(&decoded[start as usize..end as usize]);
        token_offsets.push(token_bytes.len() as u32);
    }
    let mut pairs = Vec::with_capacity(entries.len() * 3);
    for &(rank, start, end, _) in &entries {
        let token = &decoded[start as usize..end as usize];
        for k in 1..token.len() {
            if let (Some(&a), Some(&b)) = (by_bytes.get(&token[..k]), by_bytes.get(&token[k..])) {
                pairs.push((a, b, rank));
            }
        }
    }
    Ok(RankTables {
        token_bytes,
        token_offsets,
        base_id_of_byte,
        pairs,
    })
}

fn parse_rank(field: &[u8]) -> Option<u32> {
    if field.is_empty() || field.len() > 10 || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = field
        .iter()
        .fold(0u64, |v, &d| v * 10 + u64::from(d - b'0'));
    u32::try_from(value).ok()
}

/// Decodes standard base64 (with `=` padding, as tiktoken writes it) onto `out`;
/// false on any malformed input.
pub(crate) fn decode_base64(text: &[u8], out: &mut Vec<u8>) -> bool {
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
        let pad = if q + 1 == quads {
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

/// A pair slot table holding `pairs`: `(bits, slots)`; `None` when an id does not fit a
/// slot. A pair listed twice keeps its first id.
pub(crate) fn pair_slots(pairs: &[(u32, u32, u32)]) -> Option<(u32, Vec<u64>)> {
    let bits = pair_table_bits(pairs.len());
    let mut slots = vec![PAIR_EMPTY; 1 << bits];
    for &(a, b, id) in pairs {
        if id >= 1 << PAIR_ID_BITS {
            return None;
        }
        insert_pair(&mut slots, bits, pair_key(a, b)?, id);
    }
    Some((bits, slots))
}

/// The built-in blob of a vocabulary (layout in the module doc); `None` when its ids do
/// not fit the pair slots.
// Called by build.rs (and the tests); the library itself only reads blobs.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn write_blob(tables: &RankTables) -> Option<Vec<u8>> {
    let (bits, slots) = pair_slots(&tables.pairs)?;
    let n = tables.token_offsets.len() - 1;
    let mut blob = Vec::new();
    let push = |blob: &mut Vec<u8>, v: u32| blob.extend_from_slice(&v.to_le_bytes());
    push(&mut blob, n as u32);
    for id in tables.base_id_of_byte {
        push(&mut blob, id);
    }
    for &offset in &tables.token_offsets {
        push(&mut blob, offset);
    }
    push(&mut blob, tables.pairs.len() as u32);
    push(&mut blob, bits);
    while !blob.len().is_multiple_of(8) {
        push(&mut blob, 0);
    }
    debug_assert_eq!(blob.len(), BlobLayout::of(n, bits).slots);
    for slot in slots {
        blob.extend_from_slice(&slot.to_le_bytes());
    }
    blob.extend_from_slice(&tables.token_bytes);
    Some(blob)
}

/// The shift of [`pair_bloom_bit`] for a filter of `count` pairs: sixteen bits per pair,
/// rounded up to a power of two (at least one u64 word): one false positive in 16.
pub(crate) fn pair_bloom_shift(count: usize) -> u32 {
    let bits = (16 * count.max(1)).next_power_of_two().max(64);
    64 - bits.trailing_zeros()
}

/// The bit of the pair key `key` (see [`pair_key`]) in a pair Bloom filter: a second
/// multiplicative hash, independent of the table's.
#[inline(always)]
pub(crate) fn pair_bloom_bit(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> shift) as usize
}

/// The one-hash Bloom filter of the pairs in `slots` (a pair table holding `count`
/// pairs), as u64 words: the encoder's (`FlatPairs`), compiled in for the built-ins.
pub(crate) fn pair_bloom(slots: &[u64], count: usize) -> Vec<u64> {
    let shift = pair_bloom_shift(count);
    let mut bloom = vec![0u64; (1usize << (64 - shift)) / 64];
    for &slot in slots.iter().filter(|&&slot| slot != PAIR_EMPTY) {
        let bit = pair_bloom_bit(slot >> PAIR_ID_BITS, shift);
        bloom[bit / 64] |= 1 << (bit % 64);
    }
    bloom
}

/// The decoder's table of 16-byte slots of a vocabulary (`Slot` in `src/decode/mod.rs`):
/// for each id, its token's bytes when it has 1 to 15 of them, zeros after them and the
/// length in the last byte; all zeros for a longer token or a gap.
// Called by build.rs (and the tests); the library reads the built-in ones in place.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn write_decode_slots(tables: &RankTables) -> Vec<u8> {
    const SLOT: usize = 16;
    let offsets = &tables.token_offsets;
    let mut slots = vec![0u8; SLOT * (offsets.len() - 1)];
    for (slot, span) in slots.chunks_exact_mut(SLOT).zip(offsets.windows(2)) {
        let token = &tables.token_bytes[span[0] as usize..span[1] as usize];
        if (1..SLOT).contains(&token.len()) {
            slot[..token.len()].copy_from_slice(token);
            slot[SLOT - 1] = token.len() as u8;
        }
    }
    slots
}

/// Where the parts of a built-in blob of `n` ids and `2^bits` pair slots start (byte
/// offsets); the token bytes run from `tokens` to the end.
pub(crate) struct BlobLayout {
    pub(crate) base: usize,
    pub(crate) offsets: usize,
    pub(crate) pair_count: usize,
    pub(crate) slots: usize,
    pub(crate) tokens: usize,
}

impl BlobLayout {
    /// The layout of a blob of `n` ids and `2^bits` slots.
    pub(crate) fn of(n: usize, bits: u32) -> BlobLayout {
        let pair_count = 4 * (1 + 256 + n + 1);
        let slots = (pair_count + 8).next_multiple_of(8);
        BlobLayout {
            base: 4,
            offsets: 4 * (1 + 256),
            pair_count,
            slots,
            tokens: slots + (8 << bits),
        }
    }
}
