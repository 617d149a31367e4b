//! The BPE encoder: text bytes to token ids, exactly as the seed's `encode` (and, for
//! rank tables, exactly as tiktoken), one record at a time or spread over threads.
//!
//! Semantics. Within one sequence the adjacent pair with the lowest merge id is merged,
//! leftmost first, until no adjacent pair has a merge. For model files this equals the
//! seed's "merge every occurrence of the lowest pair, left to right" (a merge only
//! creates pairs with higher ids, and never recreates the pair it consumed); for
//! tiktoken rank tables, whose `merge_ids` hold every two-token split of every token,
//! it is tiktoken's `byte_pair_merge`, including its shortcut that a piece which is
//! itself a token is emitted whole. With a split pattern each chunk is its own
//! sequence. Allowed special tokens are found first (leftmost, longest at a position)
//! and cut the text into segments that are split and encoded separately, as tiktoken
//! does; special tokens that are not allowed are ordinary text.
//!
//! Performance notes:
//! - Chunks of a split pattern of up to [`TINY`] bytes (most of them) use two small
//!   arrays and a scalar scan: any set-up costs more than it saves there (measured:
//!   the packed scan below made o200k_base encoding ~8% slower when used for them).
//!   Short `--split none` records take the packed scan (with the 32k model, one
//!   thread: 1.12-1.19 s vs 1.15-1.22 s CPU through the scalar one).
//! - Sequences of up to [`SHORT`] bytes (nearly every text line) keep one u32 key
//!   `merge id << bits | position` per live pair and take the vectorized minimum of
//!   all keys before each merge: the lowest merge id at its leftmost position, with no
//!   branchy search; the sequence is a linked list, so a merge moves no memory.
//!   Measured on the 27 MB benchmark text with a 32k `--split none` model, one thread:
//!   2.3 s with a scalar scan below 64 bytes, 1.8 s with a vectorized scan to 256,
//!   1.37 s with packed keys to 1024. Longer sequences use the linked list plus a radix
//!   heap keyed by `(merge id, position)` with lazy deletion ([`MergeQueue`], a binary
//!   heap when ids are not monotone), O(n log n): 1 MB of one repeated byte, or of
//!   random letters, stays under a second.
//! - With a model file, sequences of more than 512 bytes are cut into pieces of
//!   [`PIECE_LEN`] bytes, each encoded by the scan, and mended where two pieces meet
//!   ([`Encoder::bpe_pieces`]; exact, see [`Encoder::compatible`]): the heap ran at
//!   4-10 MB/s on such sequences (cache misses on long lists). One thread, 32k
//!   `--split none` model, whole command (CPU s, old against new): the 27 MB text as
//!   one `--whole` record 9.36 -> 1.77 (and 5.83 -> 1.09 s wall on both cores), lines
//!   of 128 KB 1.08-1.23 -> 0.41-0.45, lines of 2 KB 0.81-1.13 -> 0.51-0.53; its text
//!   lines (few longer than 512 bytes) the same, 1.34-1.36 against 1.35-1.37.
//! - The first round of pairs comes from a 64K table of byte pairs; later pairs from a
//!   flat table of 8-byte slots (models of up to 128K pairs: 512 KB for a 32k model,
//!   L2-resident) behind a one-hash Bloom filter (most pairs a merge creates are no
//!   merge; the filter answers 15 in 16 of those from 64 KB: one thread, 32k model,
//!   27 MB of lines, 1.13 s against 1.30 s without it, means of 4 alternated runs), or a
//!   per-thread pair cache before the model's map.
//! - Caching whole `--split none` lines of up to 128 bytes, as split chunks are cached
//!   (13% of the benchmark text's bytes are in repeated lines), made that run slower:
//!   1.22 s against 1.10 s (means of 4 alternated runs). Not kept.
//! - Split models keep a per-thread chunk -> ids cache (words repeat: 4.9M chunks but
//!   448k distinct in the 27 MB benchmark text, hence [`CACHE_ENTRIES`] = 512K).
//! - Caches live in a pool inside the [`Encoder`], so it is `Sync` and each thread
//!   borrows one for a batch; a cache is cleared when it reaches [`CACHE_ENTRIES`].
//! - `--whole` input is cut only where the result cannot change: for `--split none`
//!   between two bytes that no token contains side by side; with a split pattern where
//!   the splitter says the chunks stay the same (`Splitter::find_safe_cut`).
//! - Where the 32k one-thread time goes (2026-12-01): 20.2 M merges for 26.4 M bytes,
//!   ~56 ns each; the scan reads 170 keys per merge on average, most of them in the
//!   13% of the text that is lines of 256-1024 bytes (17 MB/s there, 26 MB/s on the
//!   shorter lines). Tried that day and dropped (CPU s of the whole command, alternated
//!   runs, old against new): two records' scans interleaved, one merge of each in turn,
//!   so that their dependency chains overlap: 1.18-1.31 against 1.12-1.30 (no gain: the
//!   loop is not waiting on its own latency); the pair table as 8-slot cache-line
//!   buckets matched without branches, no Bloom filter: 1.32-1.40 against 1.13-1.22;
//!   the scan only to 512 bytes, the heap beyond: 1.20-1.45 against 1.11-1.33; the merge
//!   loop as a function of its own over slices (so the table's fields are not reloaded
//!   after each store), on the lines of up to 256 bytes: 0.88-1.09 against 0.88-1.01;
//!   moving the live tokens down to drop whole blocks of keys as the sequence shrinks
//!   (in process, best of 6: 1.027 against 1.028 s; 2 KB lines 0.340 against 0.312: the
//!   move chases the list, and a block of keys costs the scan only a few cycles); each
//!   key written as its whole 64-byte block, so that the next scan's loads could take
//!   it from the store: 1.64-2.01 against 1.19-1.46.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ahash::AHashMap;

use crate::error::{Error, Result};
use crate::model::tables::{
    insert_pair, pair_key, pair_table_bits, probe_pair, PAIR_EMPTY, PAIR_ID_BITS,
};
use crate::model::{BpeModel, ModelSource, PairIds};
use crate::parallel::Pool;
use crate::pretokenize::Splitter;

/// Which special tokens are recognised in the text (tiktoken's `allowed_special`).
/// Those not allowed are encoded as ordinary text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedSpecial {
    /// No special token is recognised.
    None,
    /// Every special token of the model is recognised.
    All,
    /// Only these (each must be a special token of the model).
    Some(Vec<String>),
}

/// Sequences of at most this many bytes use the flat scan rather than the heap
/// (positions fit in the 8 low bits of the scan's keys; measured with a 32k
/// `--split none` model on text lines: the scan wins up to here).
const SHORT: usize = 1 << SHORT_BITS;
const SHORT_BITS: u32 = 10;
/// Sequences longer than twice this are encoded in pieces of this many bytes
/// ([`Encoder::bpe_pieces`]). Measured in process, one thread, 32k `--split none`
/// model, best of 5 (pieces of P bytes for sequences over 2P, against none): 27 MB of
/// text lines 0.967 s at P = 256 (64: 1.012, 96: 0.990, 128: 0.978; none: 1.003);
/// 2 KB lines 0.304 s (64: 0.357, 128: 0.317; none: 0.740); 128 KB lines 0.313 s
/// (64: 0.367, 128: 0.319; none: 0.934). Small pieces meet more cuts to mend.
const PIECE_LEN: usize = 256;
/// The widest window [`Encoder::mend`] encodes again before giving the sequence to the
/// whole-sequence encoder.
const MEND_MAX: usize = 1024;
/// Chunks of a split pattern of at most this many bytes take [`Encoder::bpe_tiny`].
const TINY: usize = 32;
/// Chunks longer than this are not cached (they rarely repeat).
const CACHE_MAX_CHUNK: usize = 128;
/// A cache that reaches this many entries is cleared (bounds memory per thread).
const CACHE_ENTRIES: usize = 1 << 19;
/// `--whole` input is cut into pieces of about this size for parallel work.
const PIECE: usize = 1 << 20;
/// How far past a target cut position we look for a safe cut.
const CUT_SEARCH: usize = 1 << 16;
/// No merge.
const NONE: u32 = u32::MAX;

/// Per-thread working memory: the chunk cache and reusable buffers.
#[derive(Default)]
struct Scratch {
    cache: ChunkCache,
    ids: Vec<u32>,
    ranks: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    queue: MergeQueue,
    pairs: PairCache,
    /// The ids of a window re-encoded where two pieces meet.
    window: Vec<u32>,
}

/// The min-queue of `merge id << 32 | position` keys for long sequences: a radix heap
/// while keys come in monotone order — true of model files (a merge only creates
/// pairs with higher ids) and of trained rank tables — else a binary heap.
///
/// Measured on 1 MB of random letters with o200k_base: the binary heap alone spent
/// most of ~1.6 s CPU in sift-downs over a million entries; the radix heap's buckets
/// are scanned sequentially.
#[derive(Default)]
struct MergeQueue {
    buckets: Vec<Vec<u64>>,
    last: u64,
    len: usize,
    monotone: bool,
    fallback: BinaryHeap<Reverse<u64>>,
}

impl MergeQueue {
    fn reset(&mut self) {
        self.buckets.resize_with(65, Vec::new);
        for b in &mut self.buckets {
            b.clear();
        }
        self.last = 0;
        self.len = 0;
        self.monotone = true;
        self.fallback.clear();
    }

    #[inline]
    fn bucket(x: u64) -> usize {
        (64 - x.leading_zeros()) as usize
    }

    #[inline]
    fn push(&mut self, key: u64) {
        if self.monotone {
            if key >= self.last {
                self.buckets[Self::bucket(key ^ self.last)].push(key);
                self.len += 1;
                return;
            }
            self.monotone = false;
            for b in &mut self.buckets {
                self.fallback.extend(b.drain(..).map(Reverse));
            }
            self.len = 0;
        }
        self.fallback.push(Reverse(key));
    }

    #[inline]
    fn pop(&mut self) -> Option<u64> {
        if !self.monotone {
            return self.fallback.pop().map(|Reverse(k)| k);
        }
        if self.len == 0 {
            return None;
        }
        if self.buckets[0].is_empty() {
            let i = (1..self.buckets.len()).find(|&i| !self.buckets[i].is_empty())?;
            let mut items = std::mem::take(&mut self.buckets[i]);
            let min = items.iter().copied().min()?;
            self.last = min;
            // Every item shares the bits above bucket i with `min`, so each lands in a
            // lower bucket; bucket i stays empty and gets its allocation back.
            for &k in &items {
                self.buckets[Self::bucket(k ^ min)].push(k);
            }
            items.clear();
            self.buckets[i] = items;
        }
        self.len -= 1;
        self.buckets[0].pop()
    }
}

/// log2 of the pair cache's size (32K entries, 384 KB: fits in L2).
const PAIR_CACHE_BITS: u32 = 15;

/// A direct-mapped cache of pair -> merge id in front of the model's large table.
struct PairCache {
    keys: Vec<u64>,
    ids: Vec<u32>,
}

impl Default for PairCache {
    fn default() -> PairCache {
        // No pair has key u64::MAX: ids stay below u32::MAX.
        PairCache {
            keys: vec![u64::MAX; 1 << PAIR_CACHE_BITS],
            ids: vec![NONE; 1 << PAIR_CACHE_BITS],
        }
    }
}

/// Index of two adjacent bytes in [`Encoder::byte_pairs`].
#[inline]
fn byte_pair(w: &[u8]) -> usize {
    (w[0] as usize) << 8 | w[1] as usize
}

/// Chunk bytes -> ids, open addressing over one arena: a slot holds the hash, so a
/// probe touches the slot array and then one arena spot (the key followed by its ids),
/// two cache misses at most; no allocation per entry. Cleared when full.
struct ChunkCache {
    /// `[hash, arena offset, key length | ids length << 16]`; length 0 is empty.
    slots: Vec<[u32; 3]>,
    len: usize,
    /// Each entry: key bytes, then its ids as little-endian u32s.
    arena: Vec<u8>,
}

impl Default for ChunkCache {
    fn default() -> ChunkCache {
        ChunkCache {
            slots: vec![[0; 3]; 2 * CACHE_ENTRIES],
            len: 0,
            arena: Vec::new(),
        }
    }
}

impl ChunkCache {
    /// Appends the ids cached for `key` to `out`; false if `key` is not cached.
    #[inline]
    fn get(&self, hash: u64, key: &[u8], out: &mut Vec<u32>) -> bool {
        let mask = self.slots.len() - 1;
        let tag = (hash >> 32) as u32;
        let mut at = hash as usize & mask;
        loop {
            let [h, off, lens] = self.slots[at];
            if lens == 0 {
                return false;
            }
            if h == tag && (lens & 0xFFFF) as usize == key.len() {
                let off = off as usize;
                let end = off + key.len();
                if &self.arena[off..end] == key {
                    let n = (lens >> 16) as usize;
                    out.extend(
                        self.arena[end..end + 4 * n]
                            .chunks_exact(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                    );
                    return true;
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Caches `ids` for `key` (at most [`CACHE_MAX_CHUNK`] bytes, so both lengths fit
    /// in 16 bits and are non-zero).
    fn insert(&mut self, hash: u64, key: &[u8], ids: &[u32]) {
        if self.len >= CACHE_ENTRIES || self.arena.len() > u32::MAX as usize / 2 {
            self.slots.fill([0; 3]);
            self.len = 0;
            self.arena.clear();
        }
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        while self.slots[at][2] != 0 {
            at = (at + 1) & mask;
        }
        let off = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        for id in ids {
            self.arena.extend_from_slice(&id.to_le_bytes());
        }
        self.slots[at] = [
            (hash >> 32) as u32,
            off,
            key.len() as u32 | (ids.len() as u32) << 16,
        ];
        self.len += 1;
    }
}

/// A fast 64-bit hash of a short byte string (multiply-mix over 8-byte words).
#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut buf = [0u8; 8];
        buf.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(buf)).wrapping_mul(K);
        h ^= h >> 32;
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(buf)).wrapping_mul(K);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^ (h >> 32)
}

/// Where the encoder may cut a `--whole` text for parallel work.
enum CutRule {
    /// `--split none`: between bytes `x`, `y` when no token contains `x y`.
    /// Bit `x * 256 + y` is set when some token does.
    BytePairs(Box<[u64; 1024]>),
    /// A split pattern: where the splitter says cutting changes no chunk (the preset
    /// patterns have such places; custom ones none).
    Splitter,
}

impl CutRule {
    /// The rule for `model`'s `--whole` texts.
    fn of(model: &BpeModel) -> CutRule {
        match model.split {
            Some(_) => CutRule::Splitter,
            None if !model.merges.is_empty()
                && model.token_offsets.len() == 257 + model.merges.len() =>
            {
                CutRule::BytePairs(Self::pairs_where_merges_meet(model))
            }
            None => CutRule::BytePairs(Self::pairs_inside_tokens(model)),
        }
    }

    /// The byte pairs inside some token of `model`: bit `x * 256 + y` set for `x y`.
    fn pairs_inside_tokens(model: &BpeModel) -> Box<[u64; 1024]> {
        let mut bits = Box::new([0u64; 1024]);
        for ends in model.token_offsets.windows(2) {
            let token = &model.token_bytes[ends[0] as usize..ends[1] as usize];
            for w in token.windows(2) {
                set_byte_pair(&mut bits, w[0], w[1]);
            }
        }
        bits
    }

    /// The same set for a merge list's model, from the merges alone: each token is its
    /// pair's two tokens end to end, so the byte pairs inside it are theirs and the one
    /// where they meet; over all tokens, the pairs where the merges' two tokens meet
    /// (32k model: 32k lookups instead of a walk over 250 KB of token bytes).
    fn pairs_where_merges_meet(model: &BpeModel) -> Box<[u64; 1024]> {
        let mut bits = Box::new([0u64; 1024]);
        for &(a, b) in model.merges.iter() {
            let last = model.token(a).and_then(|t| t.last());
            if let (Some(&x), Some(&y)) = (last, model.token(b).and_then(|t| t.first())) {
                set_byte_pair(&mut bits, x, y);
            }
        }
        bits
    }
}

fn set_byte_pair(bits: &mut [u64; 1024], x: u8, y: u8) {
    let bit = (x as usize) << 8 | y as usize;
    bits[bit >> 6] |= 1 << (bit & 63);
}

/// Encodes text with one model. Cheap to share across threads (`Sync`).
pub struct Encoder<'m> {
    model: &'m BpeModel,
    splitter: Option<Splitter>,
    /// Allowed special tokens: (text, id), longest first.
    specials: Vec<(Vec<u8>, u32)>,
    /// `special_start[b]`: some allowed special starts with byte `b`.
    special_start: Box<[bool; 256]>,
    /// Rank tables only: token bytes -> id (tiktoken emits a piece that is a token whole).
    whole: Option<Box<AHashMap<&'m [u8], u32>>>,
    /// Built when a `--whole` text is first cut ([`CutRule::of`]): line records never are.
    cut: std::sync::OnceLock<CutRule>,
    /// Merge id of every two base ids, by their bytes (`x << 8 | y`): the first round of
    /// every BPE without touching the large table.
    byte_pairs: Box<[u32]>,
    /// For models with few pairs (trained vocabularies): pair -> id, open addressing.
    flat_pairs: Option<FlatPairs<'m>>,
    /// Sequences up to this length take the scan ([`Encoder::bpe_scan`]): [`SHORT`]
    /// when every id fits beside a position in a u32 key, shorter for huge
    /// vocabularies.
    scan_max: usize,
    /// Bits of the position in a scan key.
    scan_shift: u32,
    /// Model files only (ids above their pair's members, one pair per id): sequences
    /// longer than `2 * piece_len` bytes are encoded in pieces of `piece_len` bytes,
    /// mended where pieces meet ([`Encoder::bpe_pieces`]); 0 when not.
    piece_len: usize,
    pool: Pool<Scratch>,
}

/// Models with at most this many pairs get a [`FlatPairs`] table (3 MB at most, built
/// in about a millisecond); the big rank tables (o200k_base: 446k pairs) would pay
/// start-up time for it, and use the pair cache instead.
const FLAT_PAIRS_MAX: usize = 1 << 17;

/// Pair -> merge id, linear probing, load factor at most 1/2, for models whose ids fit
/// in [`PAIR_ID_BITS`] bits: each slot is one u64, `a << 42 | b << 21 | id` (the layout
/// of the built-ins' compiled-in tables, `crate::model::probe_pair`), so a probe is one
/// load from a table half the size of a (key, id) layout (512 KB for a 32k model: it
/// stays in L2). Measured on line records with a 32k `--split none` model: about twice
/// as fast as the model's hash map behind the pair cache, and the 8-byte slots a
/// further ~15% over 16-byte ones.
struct FlatPairs<'m> {
    /// The model's own slot table when it has one (built-ins, model files), read in
    /// place; else built here from its map.
    slots: Cow<'m, [u64]>,
    bits: u32,
    /// One bit per hash of a pair, set for every merge's pair (a one-hash Bloom filter):
    /// most pairs a merge creates are no merge, and this array of 16 bits per merge
    /// (64 KB for a 32k model) answers that for 15 in 16 of them without a probe of the
    /// table (16 bytes per merge, 512 KB). One thread, 32k model, 27 MB of lines, means
    /// of 4 alternated runs: 1.30 s without it, 1.13 s with it (8 bits per merge: 1.16 s;
    /// 4 bits: 1.19 s).
    bloom: Vec<u64>,
    bloom_shift: u32,
}

impl<'m> FlatPairs<'m> {
    /// The table for `pairs`, or `None` when an id does not fit in [`PAIR_ID_BITS`].
    fn new(pairs: &'m PairIds) -> Option<FlatPairs<'m>> {
        let (slots, bits) = match pairs.table() {
            Some(table) => (Cow::Borrowed(table.slots()), table.bits()),
            None => {
                let bits = pair_table_bits(pairs.len());
                let mut slots = vec![PAIR_EMPTY; 1 << bits];
                for (&(a, b), &id) in pairs.iter() {
                    if id >= 1 << PAIR_ID_BITS {
                        return None;
                    }
                    insert_pair(&mut slots, bits, pair_key(a, b)?, id);
                }
                (Cow::Owned(slots), bits)
            }
        };
        // Sixteen bits per pair, in whole u64 words: one false positive in 16.
        let count = pairs.count();
        let bloom_bits = (16 * count.max(1)).next_power_of_two().max(64);
        let mut bloom = vec![0u64; bloom_bits / 64];
        let bloom_shift = 64 - bloom_bits.trailing_zeros();
        for &slot in slots.iter().filter(|&&slot| slot != PAIR_EMPTY) {
            let bit = Self::bloom_bit(slot >> PAIR_ID_BITS, bloom_shift);
            bloom[bit / 64] |= 1 << (bit % 64);
        }
        Some(FlatPairs {
            slots,
            bits,
            bloom,
            bloom_shift,
        })
    }

    /// The bloom bit of `key`: a second multiplicative hash, independent of the table's.
    #[inline(always)]
    fn bloom_bit(key: u64, bloom_shift: u32) -> usize {
        (key.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> bloom_shift) as usize
    }

    #[inline(always)]
    fn get(&self, a: u32, b: u32) -> u32 {
        let Some(key) = pair_key(a, b) else {
            return NONE;
        };
        let bit = Self::bloom_bit(key, self.bloom_shift);
        if self.bloom[bit / 64] & (1 << (bit % 64)) == 0 {
            return NONE;
        }
        probe_pair(key, self.bits, |at| self.slots[at]).unwrap_or(NONE)
    }
}

impl<'m> Encoder<'m> {
    /// An encoder for `model` recognising the `allowed` special tokens; naming a special
    /// token the model does not have is a usage error.
    pub fn new(model: &'m BpeModel, allowed: &AllowedSpecial) -> Result<Encoder<'m>> {
        let mut specials: Vec<(Vec<u8>, u32)> = match allowed {
            AllowedSpecial::None => Vec::new(),
            AllowedSpecial::All => model
                .specials
                .iter()
                .map(|s| (s.text.as_bytes().to_vec(), s.id))
                .collect(),
            AllowedSpecial::Some(names) => {
                let mut v = Vec::with_capacity(names.len());
                for name in names {
                    let Some(s) = model.specials.iter().find(|s| &s.text == name) else {
                        let known: Vec<&str> =
                            model.specials.iter().map(|s| s.text.as_str()).collect();
                        return Err(Error::usage(if known.is_empty() {
                            format!("unknown special token {name:?}: the model has none")
                        } else {
                            format!(
                                "unknown special token {name:?} (the model has {})",
                                known.join(", ")
                            )
                        }));
                    };
                    v.push((s.text.as_bytes().to_vec(), s.id));
                }
                v
            }
        };
        specials.retain(|(text, _)| !text.is_empty());
        // Longest first, so the first one matching at a position is the longest.
        specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        specials.dedup();
        let mut special_start = Box::new([false; 256]);
        for (text, _) in &specials {
            special_start[text[0] as usize] = true;
        }

        let splitter = match &model.split {
            Some(spec) => Some(Splitter::new(spec)?),
            None => None,
        };
        // The built-in vocabularies need no whole-token map: BPE turns every one of
        // their tokens into itself (tests/tiktoken_goldens.rs checks all of them), and
        // the map would cost ~10 ms of start-up.
        let builtin = matches!(model.source, ModelSource::Builtin(name)
            if crate::model::BUILTINS.contains(&name));
        let rank_table = model.merges.is_empty() && !builtin;
        let whole = rank_table.then(|| {
            let mut map = AHashMap::with_capacity(model.token_offsets.len());
            for id in 0..model.token_offsets.len().saturating_sub(1) {
                let (s, e) = (
                    model.token_offsets[id] as usize,
                    model.token_offsets[id + 1] as usize,
                );
                if e > s {
                    map.insert(&model.token_bytes[s..e], id as u32);
                }
            }
            Box::new(map)
        });
        // Every two-byte token is the merge of its two base ids (merges never repeat a
        // pair, and rank tables list every split), so the token table gives them all.
        let mut byte_pairs = vec![NONE; 1 << 16].into_boxed_slice();
        for id in 0..model.token_offsets.len().saturating_sub(1) {
            let (s, e) = (
                model.token_offsets[id] as usize,
                model.token_offsets[id + 1] as usize,
            );
            if e == s + 2 {
                let pair = (
                    model.base_id_of_byte[model.token_bytes[s] as usize],
                    model.base_id_of_byte[model.token_bytes[s + 1] as usize],
                );
                if model.merge_ids.id(pair.0, pair.1) == Some(id as u32) {
                    byte_pairs[byte_pair(&model.token_bytes[s..e])] = id as u32;
                }
            }
        }
        let flat_pairs = (model.merge_ids.count() <= FLAT_PAIRS_MAX)
            .then(|| FlatPairs::new(&model.merge_ids))
            .flatten();
        // Keys must stay below NONE: (vocab - 1) << shift | position < u32::MAX.
        let vocab = model.vocab_size() as u64;
        let (scan_max, scan_shift) = [SHORT_BITS, 8, 6]
            .into_iter()
            .find(|&bits| vocab < (1u64 << (32 - bits)) - 1)
            .map_or((0, 0), |bits| ((1usize << bits).min(SHORT), bits));
        // The piecewise encoding rests on a model file's order: every id above its pair's
        // members and one pair per id, so merges happen in id order (see `compatible`).
        let piece_len = if !rank_table && !builtin && model.merge_ids.count() == model.merges.len()
        {
            PIECE_LEN.min(scan_max)
        } else {
            0
        };
        Ok(Encoder {
            model,
            scan_max,
            scan_shift,
            piece_len,
            byte_pairs,
            flat_pairs,
            splitter,
            specials,
            special_start,
            whole,
            cut: std::sync::OnceLock::new(),
            pool: Pool::default(),
        })
    }

    /// The model this encoder uses.
    pub fn model(&self) -> &'m BpeModel {
        self.model
    }

    /// Encodes one record, appending its ids to `out`.
    pub fn encode(&self, text: &[u8], out: &mut Vec<u32>) {
        let mut scratch = self.take_scratch();
        self.encode_with(&mut scratch, text, out);
        self.put_scratch(scratch);
    }

    /// Encodes one record as [`encode`](Self::encode) does, cutting it at safe places
    /// and spreading the pieces over `threads` threads; the ids are the same.
    pub fn encode_whole_parallel(&self, text: &[u8], threads: usize, out: &mut Vec<u32>) {
        let result: std::result::Result<(), std::convert::Infallible> = self
            .encode_whole_streaming(text, threads, &mut |ids| {
                out.extend_from_slice(ids);
                Ok(())
            });
        let Ok(()) = result;
    }

    /// Like [`encode_whole_parallel`](Self::encode_whole_parallel) but hands the ids to
    /// `sink` in order, a few megabytes of text at a time, so memory stays bounded
    /// whatever the size of `text`. Stops at the first error `sink` returns.
    pub fn encode_whole_streaming<E>(
        &self,
        text: &[u8],
        threads: usize,
        sink: &mut dyn FnMut(&[u32]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let threads = threads.max(1);
        let pieces = self.pieces(text);
        if threads == 1 || pieces.len() < 2 {
            let mut scratch = self.take_scratch();
            let mut ids = Vec::new();
            for piece in pieces {
                ids.clear();
                self.encode_piece(&mut scratch, text, &piece, &mut ids);
                sink(&ids)?;
            }
            self.put_scratch(scratch);
            return Ok(());
        }
        // Windows of a few pieces per thread: bounded memory, order kept by index.
        let window = threads * 4;
        for group in pieces.chunks(window) {
            let mut results: Vec<Vec<u32>> = vec![Vec::new(); group.len()];
            crate::parallel::on_demand(
                threads,
                results.iter_mut().zip(group.iter()),
                || self.take_scratch(),
                |scratch, (slot, piece)| self.encode_piece(scratch, text, piece, slot),
                |scratch| self.put_scratch(scratch),
            );
            for ids in &results {
                sink(ids)?;
            }
        }
        Ok(())
    }

    /// Appends the ids of each record to `ids`, and after each record the length of
    /// `ids` to `ends`.
    pub fn encode_records(&self, records: &[&[u8]], ids: &mut Vec<u32>, ends: &mut Vec<usize>) {
        let mut scratch = self.take_scratch();
        for record in records {
            self.encode_with(&mut scratch, record, ids);
            ends.push(ids.len());
        }
        self.put_scratch(scratch);
    }

    fn take_scratch(&self) -> Scratch {
        self.pool.take()
    }

    fn put_scratch(&self, scratch: Scratch) {
        self.pool.put(scratch);
    }

    /// Encodes one record with the given working memory.
    fn encode_with(&self, scratch: &mut Scratch, text: &[u8], out: &mut Vec<u32>) {
        if self.specials.is_empty() {
            self.encode_ordinary(scratch, text, out);
            return;
        }
        let mut start = 0;
        while let Some((at, len, id)) = self.find_special(text, start) {
            self.encode_ordinary(scratch, &text[start..at], out);
            out.push(id);
            start = at + len;
        }
        self.encode_ordinary(scratch, &text[start..], out);
    }

    /// The leftmost allowed special token at or after `from`, longest at its position:
    /// (position, length, id).
    fn find_special(&self, text: &[u8], from: usize) -> Option<(usize, usize, u32)> {
        let mut pos = from;
        while pos < text.len() {
            let rest = &text[pos..];
            let offset = rest.iter().position(|&b| self.special_start[b as usize])?;
            let at = pos + offset;
            for (s, id) in &self.specials {
                if text[at..].starts_with(s) {
                    return Some((at, s.len(), *id));
                }
            }
            pos = at + 1;
        }
        None
    }

    /// Encodes text that contains no allowed special token.
    fn encode_ordinary(&self, scratch: &mut Scratch, text: &[u8], out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        match &self.splitter {
            Some(splitter) => splitter.split(text, &mut |chunk: &[u8]| {
                self.encode_chunk(scratch, chunk, out);
            }),
            None => self.encode_sequence(scratch, text, out),
        }
    }

    /// One chunk of a split model: single bytes directly, then the cache, then (on a
    /// miss) tiktoken's whole-token rule and BPE.
    fn encode_chunk(&self, scratch: &mut Scratch, chunk: &[u8], out: &mut Vec<u32>) {
        if chunk.len() == 1 {
            out.push(self.model.base_id_of_byte[chunk[0] as usize]);
            return;
        }
        if chunk.len() > CACHE_MAX_CHUNK {
            self.encode_sequence(scratch, chunk, out);
            return;
        }
        let hash = hash_bytes(chunk);
        if scratch.cache.get(hash, chunk, out) {
            return;
        }
        let start = out.len();
        self.encode_sequence(scratch, chunk, out);
        scratch.cache.insert(hash, chunk, &out[start..]);
    }

    /// One whole sequence (no split pattern), with tiktoken's whole-token shortcut for
    /// rank tables.
    fn encode_sequence(&self, scratch: &mut Scratch, text: &[u8], out: &mut Vec<u32>) {
        if let Some(whole) = &self.whole {
            if let Some(&id) = whole.get(text) {
                out.push(id);
                return;
            }
        }
        self.bpe(scratch, text, out);
    }

    /// The merge id of `(a, b)`, or [`NONE`]: from the encoder's flat table for models
    /// of up to [`FLAT_PAIRS_MAX`] pairs, else first the thread's small pair cache, then
    /// the model's map (whose random accesses dominate BPE on chunk-cache misses).
    #[inline(always)]
    fn pair(&self, cache: &mut PairCache, a: u32, b: u32) -> u32 {
        if let Some(table) = &self.flat_pairs {
            return table.get(a, b);
        }
        let key = u64::from(a) << 32 | u64::from(b);
        let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PAIR_CACHE_BITS)) as usize;
        if cache.keys[slot] == key {
            return cache.ids[slot];
        }
        let id = self.model.merge_ids.id(a, b).unwrap_or(NONE);
        cache.keys[slot] = key;
        cache.ids[slot] = id;
        id
    }

    /// BPE over `bytes`: merge the lowest-id adjacent pair, leftmost first, until none
    /// is left; appends the ids.
    fn bpe(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        match bytes.len() {
            0 => {}
            1 => out.push(self.model.base_id_of_byte[bytes[0] as usize]),
            n if n <= TINY && self.splitter.is_some() => self.bpe_tiny(scratch, bytes, out),
            n if self.piece_len > 0 && n > 2 * self.piece_len => {
                self.bpe_pieces(scratch, bytes, out)
            }
            _ => self.bpe_one(scratch, bytes, out),
        }
    }

    /// The same encoder with pieces of `piece_len` bytes for long sequences (see
    /// [`Encoder::bpe_pieces`]; 0: none), where the model allows them: for tests, which
    /// use tiny pieces to meet many cuts, and for tuning. The ids never change.
    pub fn with_piece_len(mut self, piece_len: usize) -> Encoder<'m> {
        if self.piece_len > 0 {
            self.piece_len = piece_len.clamp(1, self.scan_max.max(1));
        }
        self
    }

    /// BPE over `bytes` as one sequence: the scan or the heap.
    fn bpe_one(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        match bytes.len() {
            0 => {}
            1 => out.push(self.model.base_id_of_byte[bytes[0] as usize]),
            n if n <= self.scan_max => self.bpe_scan(scratch, bytes, out),
            _ => self.bpe_heap(scratch, bytes, out),
        }
    }

    /// BPE over a long sequence in pieces of `piece_len` bytes, each encoded on its own
    /// (a short scan instead of one over the whole sequence), then mended where each
    /// meets the ids before it ([`Encoder::mend`]), so that the result is exactly the
    /// whole sequence's. Should mending need too wide a window (long runs of one byte
    /// can), the sequence is encoded whole instead.
    fn bpe_pieces(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        let first = out.len();
        let mut window = std::mem::take(&mut scratch.window);
        let mut at = 0;
        while at < bytes.len() {
            let mut end = (at + self.piece_len).min(bytes.len());
            if bytes.len() - end < self.piece_len / 2 {
                end = bytes.len();
            }
            let cut = out.len();
            self.bpe_one(scratch, &bytes[at..end], out);
            if at > 0 && !self.mend(scratch, &mut window, bytes, at, first, cut, out) {
                out.truncate(first);
                self.bpe_one(scratch, bytes, out);
                break;
            }
            at = end;
        }
        scratch.window = window;
    }

    /// Given `out[first..cut]`, the ids of `bytes[..at]`, followed by the ids of the
    /// piece that starts at byte `at`, makes `out[first..]` the ids of the whole run of
    /// bytes: where the two ids that meet at the cut are [`compatible`](Self::compatible)
    /// nothing changes; otherwise a window of ids around the cut is encoded again from
    /// its bytes, and put in when its ends are compatible with the ids beside it
    /// (widened until they are). False when the window would pass [`MEND_MAX`] bytes.
    ///
    /// Why this is exact: a sequence of tokens is the BPE of its bytes exactly when each
    /// token is its own BPE and every two neighbours are (see `compatible`). Each side of
    /// the cut is the BPE of its bytes, so only the pairs the window touches can fail.
    #[allow(clippy::too_many_arguments)]
    fn mend(
        &self,
        scratch: &mut Scratch,
        window: &mut Vec<u32>,
        bytes: &[u8],
        at: usize,
        first: usize,
        cut: usize,
        out: &mut Vec<u32>,
    ) -> bool {
        if self.compatible(&mut scratch.pairs, out[cut - 1], out[cut]) {
            return true;
        }
        let offsets = &self.model.token_offsets;
        let len = |id: u32| (offsets[id as usize + 1] - offsets[id as usize]) as usize;
        let mut reach = 2;
        loop {
            let lo = cut.saturating_sub(reach).max(first);
            let hi = (cut + reach).min(out.len());
            let start = at - out[lo..cut].iter().map(|&id| len(id)).sum::<usize>();
            let end = at + out[cut..hi].iter().map(|&id| len(id)).sum::<usize>();
            if end - start > MEND_MAX {
                return false;
            }
            window.clear();
            self.bpe_one(scratch, &bytes[start..end], window);
            let left_ok =
                lo == first || self.compatible(&mut scratch.pairs, out[lo - 1], window[0]);
            let right_ok = hi == out.len()
                || self.compatible(&mut scratch.pairs, window[window.len() - 1], out[hi]);
            if left_ok && right_ok {
                out.splice(lo..hi, window.iter().copied());
                return true;
            }
            reach *= 2;
        }
    }

    /// Whether the BPE of token `a`'s bytes followed by token `b`'s is `[a, b]`, for
    /// tokens that are each their own BPE (every token of a BPE result is).
    ///
    /// With a model file's ids, merges happen in id order, and while no merge joins the
    /// two sides each side goes through the merges that build its token, in the same
    /// order as alone. The token at the left side's right end is, in turn, the bytes
    /// and tokens down `a`'s right edge (`a`, its right part, that one's right part,
    /// ...), each from the merge that made it until the merge that takes it into the
    /// next; likewise down `b`'s left edge. A merge joins the sides exactly when some
    /// such `x` and `y`, present at the same time, form a pair whose merge id comes
    /// before `x` is taken away and no later than `y` is: the one tie, `y` taken by a
    /// merge of the very same pair to its right (`x`, `y` and the next one the same
    /// token, as in a run of spaces), goes to the leftmost, which joins the sides.
    /// Walking both edges from the top, always down the side whose current token was
    /// made later, visits every `x`, `y` present together: at most the two edges'
    /// lengths of pair lookups. The same argument, token by token, gives the rule
    /// [`Encoder::mend`] rests on: tokens that are each their own BPE, every two
    /// neighbours compatible, are the BPE of their bytes (a first merge across any
    /// boundary would be one across that boundary alone), and conversely.
    fn compatible(&self, cache: &mut PairCache, a: u32, b: u32) -> bool {
        let merges = &self.model.merges;
        let (mut x, mut y) = (a, b);
        let (mut x_until, mut y_until) = (NONE, NONE);
        loop {
            let m = self.pair(cache, x, y);
            if m != NONE && m < x_until && m <= y_until {
                return false;
            }
            if x < 256 && y < 256 {
                return true;
            }
            if x >= y {
                x_until = x;
                x = merges[x as usize - 256].1;
            } else {
                y_until = y;
                y = merges[y as usize - 256].0;
            }
        }
    }

    /// BPE for the shortest sequences (most chunks of a split pattern): two small
    /// arrays, a scalar scan for the lowest pair, removal by shifting; no set-up of
    /// links or keys, which costs more than it saves at this length.
    fn bpe_tiny(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        let base = &self.model.base_id_of_byte;
        let ids = &mut scratch.ids;
        let ranks = &mut scratch.ranks;
        ids.clear();
        ids.extend(bytes.iter().map(|&b| base[b as usize]));
        ranks.clear();
        ranks.extend(bytes.windows(2).map(|w| self.byte_pairs[byte_pair(w)]));
        let pc = &mut scratch.pairs;
        loop {
            let mut best = NONE;
            let mut at = 0;
            for (i, &r) in ranks.iter().enumerate() {
                if r < best {
                    best = r;
                    at = i;
                }
            }
            if best == NONE {
                break;
            }
            ids[at] = best;
            ids.remove(at + 1);
            ranks.remove(at);
            if at > 0 {
                ranks[at - 1] = self.pair(pc, ids[at - 1], best);
            }
            if at < ranks.len() {
                ranks[at] = self.pair(pc, best, ids[at + 1]);
            }
        }
        out.extend_from_slice(ids);
    }

    /// BPE for short sequences (at most `scan_max` bytes): the sequence is a linked list
    /// over the byte positions, so a merge moves nothing (removing from arrays cost two
    /// `memmove` calls per merge), and each live pair is a key `merge id << scan_shift |
    /// position` in one array, so the lowest key is the lowest merge id at its
    /// leftmost position: one vectorized minimum per merge, no search for the index.
    /// Compiled for AVX2 and SSE4.1 too, chosen at run time: the baseline x86-64 has no
    /// unsigned 32-bit minimum instruction, and its emulation made this path ~40% slower.
    fn bpe_scan(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        bpe_scan(self, scratch, bytes, out);
    }
}

/// [`Encoder::bpe_scan`]'s body, a free function for the multiversioning macro.
#[multiversion::multiversion(targets("x86_64+avx2", "x86_64+sse4.1"))]
fn bpe_scan<'m>(enc: &Encoder<'m>, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
    let base = &enc.model.base_id_of_byte;
    let Scratch {
        ids: tok,
        ranks: keys,
        next,
        prev,
        pairs,
        ..
    } = scratch;
    let shift = enc.scan_shift;
    let key = |id: u32, at: usize| {
        if id == NONE {
            NONE
        } else {
            id << shift | at as u32
        }
    };
    linked_bytes(bytes, base, tok, next, prev);
    keys.clear();
    keys.extend(
        bytes
            .windows(2)
            .enumerate()
            .map(|(at, w)| key(enc.byte_pairs[byte_pair(w)], at)),
    );
    // Whole blocks of SCAN_LANES keys for `lowest_key`; the padding stays NONE.
    keys.resize((bytes.len() + 1).next_multiple_of(SCAN_LANES), NONE);
    loop {
        let lowest = lowest_key(keys);
        if lowest == NONE {
            break;
        }
        let (r, i) = (lowest >> shift, (lowest & ((1 << shift) - 1)) as usize);
        let j = next[i] as usize;
        tok[i] = r;
        let k = next[j];
        next[i] = k;
        keys[j] = NONE;
        keys[i] = if k != NONE {
            prev[k as usize] = i as u32;
            key(enc.pair(pairs, r, tok[k as usize]), i)
        } else {
            NONE
        };
        let p = prev[i];
        if p != NONE {
            let p = p as usize;
            keys[p] = key(enc.pair(pairs, tok[p], r), p);
        }
    }
    push_linked(tok, next, out);
}

impl Encoder<'_> {
    fn bpe_heap(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        let base = &self.model.base_id_of_byte;
        let Scratch {
            ids: tok,
            ranks: rank,
            next,
            prev,
            queue,
            pairs,
            ..
        } = scratch;
        linked_bytes(bytes, base, tok, next, prev);
        rank.clear();
        rank.extend(bytes.windows(2).map(|w| self.byte_pairs[byte_pair(w)]));
        rank.push(NONE);
        queue.reset();
        for (i, &r) in rank.iter().enumerate() {
            if r != NONE {
                queue.push(u64::from(r) << 32 | i as u64);
            }
        }
        while let Some(key) = queue.pop() {
            let r = (key >> 32) as u32;
            let i = key as u32 as usize;
            // Stale entries: the pair at `i` changed (or `i` died) since the push. A
            // pair's id never repeats at a position: its bytes only grow.
            if rank[i] != r {
                continue;
            }
            let j = next[i] as usize;
            tok[i] = r;
            let k = next[j];
            next[i] = k;
            rank[j] = NONE;
            if k != NONE {
                prev[k as usize] = i as u32;
                let nr = self.pair(pairs, r, tok[k as usize]);
                rank[i] = nr;
                if nr != NONE {
                    queue.push(u64::from(nr) << 32 | i as u64);
                }
            } else {
                rank[i] = NONE;
            }
            let p = prev[i];
            if p != NONE {
                let p = p as usize;
                let nr = self.pair(pairs, tok[p], r);
                rank[p] = nr;
                if nr != NONE {
                    queue.push(u64::from(nr) << 32 | p as u64);
                }
            }
        }
        push_linked(tok, next, out);
    }

    /// Cuts a `--whole` text into pieces whose encodings concatenate to the text's:
    /// allowed special tokens are pieces of their own, ordinary stretches are cut at
    /// safe places about every [`PIECE`] bytes.
    fn pieces(&self, text: &[u8]) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut start = 0;
        let push_ordinary = |from: usize, to: usize, pieces: &mut Vec<Piece>| {
            let mut s = from;
            while to - s > PIECE + PIECE / 2 {
                match self.safe_cut(&text[..to], s + PIECE) {
                    Some(c) => {
                        pieces.push(Piece::Text(s, c, true));
                        s = c;
                    }
                    None => break,
                }
            }
            if to > s {
                pieces.push(Piece::Text(s, to, s > from));
            }
        };
        if !self.specials.is_empty() {
            while let Some((at, len, id)) = self.find_special(text, start) {
                push_ordinary(start, at, &mut pieces);
                pieces.push(Piece::Special(id));
                start = at + len;
            }
        }
        push_ordinary(start, text.len(), &mut pieces);
        pieces
    }

    /// A position `c` in `target..` (searching a bounded distance) such that encoding
    /// `text[..c]` and `text[c..]` separately gives the ids of `text` (with no special
    /// token inside), or `None`.
    fn safe_cut(&self, text: &[u8], target: usize) -> Option<usize> {
        let end = text.len().min(target.saturating_add(CUT_SEARCH));
        if target < 2 || target >= end {
            return None;
        }
        match self.cut.get_or_init(|| CutRule::of(self.model)) {
            // No token contains the bytes on both sides, so no merge can ever join them:
            // the two sides merge independently (and the whole text is no token).
            CutRule::BytePairs(bits) => (target..end).find(|&c| {
                let bit = (text[c - 1] as usize) << 8 | text[c] as usize;
                bits[bit >> 6] & (1 << (bit & 63)) == 0
            }),
            CutRule::Splitter => {
                let splitter = self.splitter.as_ref()?;
                let piece = &text[..end];
                splitter
                    .find_safe_cut(piece, target)
                    .filter(|&c| c > target - PIECE / 2 && c < piece.len())
            }
        }
    }

    fn encode_piece(&self, scratch: &mut Scratch, text: &[u8], piece: &Piece, out: &mut Vec<u32>) {
        match *piece {
            Piece::Special(id) => out.push(id),
            // A part of a segment must not take the whole-token shortcut meant for the
            // segment (only `--split none` rank tables have it at this level).
            Piece::Text(s, e, true) if self.splitter.is_none() => {
                self.bpe(scratch, &text[s..e], out)
            }
            Piece::Text(s, e, _) => self.encode_ordinary(scratch, &text[s..e], out),
        }
    }
}

/// The scan's keys are padded to a multiple of this: the width of the vectorized loop
/// of [`lowest_key`] (four 512-bit vectors of u32).
const SCAN_LANES: usize = 64;

/// The lowest of `keys`. LLVM vectorizes this into a loop over 64 keys with 8-wide and
/// scalar remainder loops; with the keys padded to a multiple of 64 (with `NONE`) the
/// remainder loops never run. Measured with the 32k model, one thread, 27 MB: 1.45-1.51 s
/// vs 1.54-1.71 s unpadded (their trip counts varied from line to line and mispredicted).
/// Written as 16-lane blocks with an array accumulator instead, LLVM kept the lanes in
/// memory: 2.05 s.
#[inline(always)]
fn lowest_key(keys: &[u32]) -> u32 {
    keys.iter().copied().fold(NONE, u32::min)
}

/// The ids of `bytes` as a linked list over their positions (`NONE` ends both ways):
/// the set-up of [`Encoder::bpe_scan`] and [`Encoder::bpe_heap`].
fn linked_bytes(
    bytes: &[u8],
    base: &[u32; 256],
    tok: &mut Vec<u32>,
    next: &mut Vec<u32>,
    prev: &mut Vec<u32>,
) {
    let n = bytes.len();
    tok.clear();
    tok.extend(bytes.iter().map(|&b| base[b as usize]));
    next.clear();
    next.extend((1..=n as u32).map(|i| if i as usize == n { NONE } else { i }));
    prev.clear();
    prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
}

/// Appends the ids of a linked list that starts at position 0.
fn push_linked(tok: &[u32], next: &[u32], out: &mut Vec<u32>) {
    let mut i = 0u32;
    while i != NONE {
        out.push(tok[i as usize]);
        i = next[i as usize];
    }
}

/// A unit of `--whole` work.
enum Piece {
    /// `text[start..end]`, and whether it is part of a longer ordinary stretch.
    Text(usize, usize, bool),
    Special(u32),
}

/// Encodes each record (in order) over `threads` threads; the result is what
/// [`Encoder::encode`] gives for each record.
pub fn encode_batch(enc: &Encoder, records: &[&[u8]], threads: usize) -> Vec<Vec<u32>> {
    let mut results = Vec::with_capacity(records.len());
    for block in encode_blocks(enc, records, threads) {
        results.extend(block.records().map(<[u32]>::to_vec));
    }
    results
}

/// The ids of consecutive records, all in one vector: record `k` is
/// `ids[ends[k - 1]..ends[k]]` (from 0 for the first).
#[derive(Default)]
pub struct IdBlock {
    pub ids: Vec<u32>,
    pub ends: Vec<usize>,
}

impl IdBlock {
    /// Each record's ids, in order.
    pub fn records(&self) -> impl Iterator<Item = &[u32]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.ids[s..e])
    }
}

/// Encodes `records` over `threads` threads into blocks of consecutive records, in
/// order: one vector of ids per block rather than one per record (whose allocation and
/// growth were a visible share of encoding short lines).
pub fn encode_blocks(enc: &Encoder, records: &[&[u8]], threads: usize) -> Vec<IdBlock> {
    let threads = threads.max(1).min(records.len().max(1));
    // Blocks handed out on demand keep both threads busy when record lengths vary.
    let block = if threads == 1 {
        records.len().max(1)
    } else {
        (records.len() / (threads * 8)).clamp(1, 256)
    };
    let mut blocks: Vec<IdBlock> = (0..records.len().div_ceil(block))
        .map(|_| IdBlock::default())
        .collect();
    let work = blocks.iter_mut().zip(records.chunks(block));
    let encode_block = |(out, recs): (&mut IdBlock, &[&[u8]])| {
        enc.encode_records(recs, &mut out.ids, &mut out.ends)
    };
    if threads == 1 {
        work.for_each(encode_block);
    } else {
        crate::parallel::on_demand(threads, work, || (), |_, item| encode_block(item), |_| ());
    }
    blocks
}

/// Convenience for callers that do not keep an [`Encoder`]: the ids of `text`.
pub fn encode(model: &BpeModel, allowed: &AllowedSpecial, text: &[u8]) -> Result<Vec<u32>> {
    let enc = Encoder::new(model, allowed)?;
    let mut out = Vec::new();
    enc.encode(text, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{identity_bytes, ModelSource};

    /// The radix queue pops what a plain binary min-heap pops, pushes and pops
    /// interleaved as the encoder does them (each push at or above the last pop while
    /// monotone; in some cases, now and then a smaller key, which moves everything to
    /// the fallback heap), with few and many items, narrow and wide key spreads.
    #[test]
    fn merge_queue_pops_like_a_binary_heap() {
        let mut below = crate::test_rng::below_u64(0x2545_F491_4F6C_DD1D);
        let mut queue = MergeQueue::default();
        for case in 0..24u64 {
            queue.reset();
            let mut naive = BinaryHeap::new();
            let items = [10, 1000, 70_000, 200_000][(case % 4) as usize];
            let spread = [1 << 3, 1 << 20, 1 << 40][(case % 3) as usize];
            let breaks_monotone = case % 5 == 4;
            for _ in 0..items {
                let key = below(spread);
                queue.push(key);
                naive.push(Reverse(key));
            }
            while let Some(Reverse(last)) = naive.pop() {
                assert_eq!(queue.pop(), Some(last), "case {case}");
                if below(3) == 0 {
                    let key = if breaks_monotone && below(50) == 0 {
                        below(spread)
                    } else {
                        last + below(spread)
                    };
                    queue.push(key);
                    naive.push(Reverse(key));
                }
            }
            assert_eq!(queue.pop(), None, "case {case}");
        }
    }

    /// The cut rule's byte pairs from the merges alone equal those read from every
    /// token's bytes, on random merge lists (tiny alphabets, long tokens) over the
    /// identity and a permuted byte order.
    #[test]
    fn byte_pairs_from_merges_equal_those_inside_tokens() {
        let mut below = crate::test_rng::below_usize(0x9E37_79B9_7F4A_7C15);
        for case in 0..300 {
            let alphabet: Vec<u32> = (0..1 + below(if case % 2 == 0 { 3 } else { 256 }))
                .map(|_| below(256) as u32)
                .collect();
            let mut ids = alphabet.clone();
            let mut merges = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..below(400) {
                let pair = (ids[below(ids.len())], ids[below(ids.len())]);
                if seen.insert(pair) {
                    merges.push(pair);
                    ids.push(255 + merges.len() as u32);
                }
            }
            let mut base = identity_bytes();
            if case % 3 == 0 {
                base.reverse();
            }
            let model =
                BpeModel::from_merges(ModelSource::Builtin("test"), None, vec![], base, merges);
            assert_eq!(
                CutRule::pairs_where_merges_meet(&model),
                CutRule::pairs_inside_tokens(&model),
                "case {case}"
            );
        }
    }
}
