//! The encoder's lookup tables: pair -> merge id (a flat slot table with a Bloom filter
//! for models of up to [`FLAT_PAIRS_MAX`] pairs, a per-thread direct-mapped cache in
//! front of the model's table for larger ones), and the per-thread chunk -> ids cache
//! of split models.

use std::borrow::Cow;

use zerocopy::{FromBytes, FromZeros};

use super::{CACHE_ENTRIES, NONE};
use crate::hugemem::HugeBytes;
use crate::model::tables::{
    insert_pair, pair_bloom, pair_bloom_bit, pair_bloom_shift, pair_key, pair_table_bits,
    probe_pair, PAIR_EMPTY, PAIR_ID_BITS,
};
use crate::model::{PairIds, PairTable};

/// log2 of the pair cache's size (32K entries, 384 KB: fits in L2).
pub(super) const PAIR_CACHE_BITS: u32 = 15;

/// A direct-mapped cache of pair -> merge id in front of the model's large table.
pub(super) struct PairCache {
    /// `!key` of each slot's pair: all zeros (key u64::MAX, which no pair has: ids stay
    /// below u32::MAX) is empty, so that the cache starts as zeroed pages, mapped as
    /// they are first used (the built-ins never use it: it cost each run 96 page faults).
    pub(super) keys: Vec<u64>,
    pub(super) ids: Vec<u32>,
}

impl Default for PairCache {
    fn default() -> PairCache {
        PairCache {
            keys: vec![0; 1 << PAIR_CACHE_BITS],
            ids: vec![0; 1 << PAIR_CACHE_BITS],
        }
    }
}

/// Index of two adjacent bytes in `Encoder::byte_pairs` ([`Encoder`](super::Encoder)).
#[inline]
pub(super) fn byte_pair(w: &[u8]) -> usize {
    (w[0] as usize) << 8 | w[1] as usize
}

/// Chunk bytes -> ids in two levels. In front, 2^[`HOT_BITS`] direct-mapped entries of
/// 32 bytes that hold a chunk of up to [`HOT_MAX`] bytes and up to three ids in place,
/// so that a hit is one load from a table that stays in L2 (one thread, o200k_base,
/// 27 MB of mixed text: ~6% less CPU for the whole command, where the second level's
/// slot load had been a fifth of the time). Behind it every chunk the encoder sends
/// on (those of up to [`HOT_MAX`] bytes only until its BPE starts from units:
/// `Encoder::encode_chunk_cached`), open addressing over one arena: a slot holds the hash, so a probe touches the slot array and then one
/// arena spot (the key followed by its ids), two cache misses at most; no allocation
/// per entry. Cleared when full. A Bloom filter of the chunks it holds spares a chunk
/// seen for the first time the probe ([`SEEN_BITS`]).
///
/// The second level's slots start as a small table on the heap (a short run touches a
/// few of its pages) and move once, when it is half full, to their full size in huge
/// pages ([`HugeBytes`]): a random probe of the 12 MB table in small pages misses the
/// TLB as well as the cache. 27 MB of mixed text, AMD EPYC Zen 4, min and 10th
/// percentile of 12-16 alternated runs: one thread, o200k_base 493-500 ms against
/// 521-529, cl100k_base 477 against 493; two threads, o200k_base, 342-345 ms wall
/// against 391-395. The full table in huge pages from the start would cost a one-line
/// run 0.9 ms (3.0 -> 3.9 ms); as it is, that run is unchanged.
pub(super) struct ChunkCache {
    /// The recent short chunks, at [`ShortKey::index`].
    hot: Vec<Hot>,
    /// [`Slot`]s; a key length of 0 is empty.
    slots: HugeBytes,
    len: usize,
    /// Each entry: key bytes, then its ids as little-endian u32s.
    arena: Arena,
    /// Slots of the full table: 2 per entry ([`CACHE_ENTRIES`] but in tests).
    full_slots: usize,
    /// The cache is cleared before its arena would pass this many bytes
    /// ([`ARENA_RESERVE`] but in tests).
    arena_max: usize,
    /// A one-hash Bloom filter of the chunks in the second level: one bit per top
    /// [`SEEN_BITS`] bits of a hash, set as a chunk is cached, cleared with the cache.
    seen: Vec<u64>,
}

/// log2 of the bits of [`ChunkCache::seen`] (512 KB: 8 bits per entry when full). Half
/// the chunks that miss the hot level are first sightings (447k of 864k in the 27 MB
/// benchmark text); the filter answers most of those without the slot probe, and
/// prefetches the slot their insert will need while BPE runs. One thread, o200k_base,
/// min and 10th percentile of 16 alternated runs: 463-474 ms against 521-538 without
/// the filter; 500-510 without the prefetch; 2^21 bits 484-487, 2^23 478-483.
const SEEN_BITS: u32 = 22;

/// A hash's bit in [`ChunkCache::seen`].
#[inline(always)]
fn seen_bit(hash: u64) -> usize {
    (hash >> (64 - SEEN_BITS)) as usize
}

/// A second-level slot: `[hash >> 32, arena offset, key length | ids length << 16]`.
type Slot = [u32; 3];
/// Slots of the second level's first, small table (384 KB).
const SMALL_SLOTS: usize = 1 << 15;

/// log2 of the entries of the hot level ([`ChunkCache`]): 1 MB, mapped as it is first
/// touched. Since short chunks skip the second level once BPE starts from units
/// (`Encoder::encode_chunk_cached`), 2^15 and 2^16 entries measure 2-3% faster than
/// 2^14 in process (o200k_base, 27 MB, Intel Xeon model 167: best of 5, three rounds,
/// 0.304-0.308 and 0.296-0.312 s against 0.312-0.324), and the same as each other
/// in whole commands.
const HOT_BITS: u32 = 15;
/// Chunks of at most this many bytes can be hot.
pub(super) const HOT_MAX: usize = 16;

/// One hot chunk: its [`ShortKey`] words, `length | ids << 8` (0: empty), its ids.
#[derive(Clone, Copy, Default, FromZeros)]
#[repr(C, align(32))]
struct Hot {
    words: [u64; 2],
    meta: u32,
    ids: [u32; 3],
}

/// A chunk of 2 to [`HOT_MAX`] bytes as two words that, with its length, name it: its
/// first and last eight bytes (which overlap below 16), or first and last four, or its
/// first, middle and last byte (which cover a chunk of up to three).
#[derive(Clone, Copy)]
pub(super) struct ShortKey {
    words: [u64; 2],
    len: u32,
}

impl ShortKey {
    #[inline(always)]
    pub(super) fn new(chunk: &[u8]) -> ShortKey {
        let n = chunk.len();
        debug_assert!((2..=HOT_MAX).contains(&n));
        let le8 = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let le4 = |b: &[u8]| u64::from(u32::from_le_bytes(b.try_into().expect("4 bytes")));
        let words = if n >= 8 {
            [le8(&chunk[..8]), le8(&chunk[n - 8..])]
        } else if n >= 4 {
            [le4(&chunk[..4]) | le4(&chunk[n - 4..]) << 32, 0]
        } else {
            let b = |i: usize| u64::from(chunk[i]);
            [b(0) | b(n / 2) << 8 | b(n - 1) << 16, 0]
        };
        ShortKey {
            words,
            len: n as u32,
        }
    }

    /// The key's 64-bit hash for the second level ([`chunk_hash`]): the chunk's two
    /// words mixed, with no loop or branch on its length as [`hash_bytes`] has. One
    /// thread, AMD EPYC Zen 4, whole command, CPU ms (min / p10 / median of 20
    /// alternated runs) against `hash_bytes` for every chunk: o200k_base 400 / 405 / 416
    /// against 410 / 411 / 425, with `--format u32` 364 / 369 / 378 against 371 / 374 /
    /// 382, cl100k_base 358 / 360 / 375 against 370 / 372 / 380.
    #[inline(always)]
    pub(super) fn hash(&self) -> u64 {
        let mut h = (self.words[0] ^ u64::from(self.len)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.words[1].wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        h ^= h >> 32;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^ (h >> 29)
    }

    /// The key's entry in the hot level.
    #[inline(always)]
    fn index(&self) -> usize {
        let h = (self.words[0] ^ u64::from(self.len)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.words[1].wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        (h.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> (64 - HOT_BITS)) as usize
    }
}

impl Default for ChunkCache {
    fn default() -> ChunkCache {
        ChunkCache::with_entries(SMALL_SLOTS, CACHE_ENTRIES, ARENA_RESERVE)
    }
}

/// Asks the CPU to bring the cache line of `r` into its level-1 cache: a hint, which
/// changes no result (a no-op where there is no such instruction here).
#[inline(always)]
pub(super) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: `prefetcht0` reads nothing the program can see and never faults; the SSE
    // it belongs to is part of every x86_64 CPU (the target's baseline).
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

impl ChunkCache {
    /// A cache whose second level starts with `small` slots and holds up to `entries`
    /// chunks (both powers of two, `small <= 2 * entries`) in an arena of up to
    /// `arena_max` bytes: tests use small sizes to meet the move and the clearing often.
    pub(super) fn with_entries(small: usize, entries: usize, arena_max: usize) -> ChunkCache {
        ChunkCache {
            // Zeroed pages, mapped as they are first used: written here, the 512 KB
            // cost every run 128 page faults.
            hot: Hot::new_vec_zeroed(1 << HOT_BITS)
                .unwrap_or_else(|_| vec![Hot::default(); 1 << HOT_BITS]),
            slots: HugeBytes::zeroed(small * size_of::<Slot>(), usize::MAX),
            len: 0,
            arena: Arena::default(),
            full_slots: 2 * entries,
            arena_max: arena_max.min(ARENA_RESERVE),
            seen: vec![0; (1 << SEEN_BITS) / 64],
        }
    }

    #[inline(always)]
    fn slots(&self) -> &[Slot] {
        <[Slot]>::ref_from_bytes(self.slots.bytes()).expect("whole slots")
    }

    #[inline(always)]
    fn slots_mut(&mut self) -> &mut [Slot] {
        slots_in(&mut self.slots)
    }

    /// Whether the filter may hold `hash` (false: the second level surely does not).
    #[inline(always)]
    fn maybe_seen(&self, hash: u64) -> bool {
        let bit = seen_bit(hash);
        self.seen[bit / 64] & 1 << (bit % 64) != 0
    }

    /// Appends the ids of the hot chunk `key` to `out`; false if it is not hot.
    ///
    /// All three id words are appended and the length cut back to the entry's count:
    /// no branch on the count (1 to 3, mixed among the 3.1M hits of the benchmark text).
    /// One thread, AMD EPYC Zen 4, whole command, CPU ms (min / p10 / median of 20
    /// alternated runs) against a `match` on the count: o200k_base 408 / 416 / 440
    /// against 417 / 422 / 446, with `--format u32` 374 / 385 / 406 against 380 / 396 /
    /// 417, cl100k_base 372 / 377 / 409 against 378 / 380 / 415.
    #[inline(always)]
    pub(super) fn get_hot(&self, key: &ShortKey, out: &mut Vec<u32>) -> bool {
        let e = &self.hot[key.index()];
        if e.words != key.words || e.meta & 0xFF != key.len {
            return false;
        }
        let len = out.len() + (e.meta >> 8) as usize;
        out.extend_from_slice(&e.ids);
        out.truncate(len);
        true
    }

    /// Makes `key` hot with `ids` if they fit in an entry.
    #[inline(always)]
    pub(super) fn put_hot(&mut self, key: &ShortKey, ids: &[u32]) {
        if ids.is_empty() || ids.len() > 3 {
            return;
        }
        let mut e = Hot {
            words: key.words,
            meta: key.len | (ids.len() as u32) << 8,
            ids: [0; 3],
        };
        e.ids[..ids.len()].copy_from_slice(ids);
        self.hot[key.index()] = e;
    }

    /// Appends the ids cached for `key` to `out`; false if `key` is not cached (then,
    /// when the filter tells, without a probe, prefetching the slot of its insert).
    #[inline]
    pub(super) fn get(&self, hash: u64, key: &[u8], out: &mut Vec<u32>) -> bool {
        let slots = self.slots();
        let mask = slots.len() - 1;
        let mut at = hash as usize & mask;
        if !self.maybe_seen(hash) {
            prefetch(&slots[at]);
            return false;
        }
        let tag = (hash >> 32) as u32;
        loop {
            let [h, off, lens] = slots[at];
            if lens == 0 {
                return false;
            }
            if h == tag && (lens & 0xFFFF) as usize == key.len() {
                let off = off as usize;
                let end = off + key.len();
                let arena = self.arena.bytes();
                if same_bytes(&arena[off..end], key) {
                    let n = (lens >> 16) as usize;
                    out.extend(
                        arena[end..end + 4 * n]
                            .chunks_exact(4)
                            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                    );
                    return true;
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Caches `ids` for `key` (at most [`CACHE_MAX_CHUNK`](super::CACHE_MAX_CHUNK)
    /// bytes, so both lengths fit in 16 bits and are non-zero). A full cache (half its
    /// slots used, or its arena at `arena_max` bytes) is cleared first.
    pub(super) fn insert(&mut self, hash: u64, key: &[u8], ids: &[u32]) {
        if 2 * self.len >= self.full_slots
            || self.arena.len() + key.len() + 4 * ids.len() > self.arena_max
        {
            self.slots.bytes_mut().fill(0);
            self.seen.fill(0);
            self.len = 0;
            self.arena.clear();
        } else if 2 * (self.len + 1) > self.slots().len() {
            self.grow();
        }
        let off = self.arena.len() as u32;
        self.arena.push(key, ids);
        let slot = [
            (hash >> 32) as u32,
            off,
            key.len() as u32 | (ids.len() as u32) << 16,
        ];
        place(self.slots_mut(), hash, slot);
        let bit = seen_bit(hash);
        self.seen[bit / 64] |= 1 << (bit % 64);
        self.len += 1;
    }

    /// Moves the slots to the full table, in huge pages.
    #[cold]
    fn grow(&mut self) {
        let mut full = HugeBytes::zeroed(self.full_slots * size_of::<Slot>(), 0);
        let slots = slots_in(&mut full);
        for &slot in self.slots().iter().filter(|s| s[2] != 0) {
            let off = slot[1] as usize;
            let key = &self.arena.bytes()[off..off + (slot[2] & 0xFFFF) as usize];
            place(slots, chunk_hash(key), slot);
        }
        self.slots = full;
    }
}

/// Whether `a` equals `b`, which has its length: up to 16 bytes by two overlapping
/// loads from each, without a call to `memcmp`, which took 4.5% of a one-thread
/// o200k_base encode of the benchmark text (1.1% after), nearly all from the second
/// level's probes, whose keys are mostly short. Intel Xeon (family 6 model 167), whole
/// command, CPU ms (min / p10 / median of 15 alternated runs): o200k_base 403 / 404 /
/// 416 against 410 / 413 / 424, cl100k_base 349 / 350 / 359 against 353 / 359 / 365.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = b.len();
    debug_assert_eq!(a.len(), n);
    let le8 = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8"));
    let le4 = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4"));
    match n {
        8..=16 => le8(a, 0) == le8(b, 0) && le8(a, n - 8) == le8(b, n - 8),
        4..=7 => le4(a, 0) == le4(b, 0) && le4(a, n - 4) == le4(b, n - 4),
        _ => a == b,
    }
}

/// The second level's slots in `bytes`.
#[inline(always)]
fn slots_in(bytes: &mut HugeBytes) -> &mut [Slot] {
    <[Slot]>::mut_from_bytes(bytes.bytes_mut()).expect("whole slots")
}

/// The second level's entries, appended one after another: on the heap while small, then
/// in one map of [`ARENA_RESERVE`] bytes (or twice what is needed, if more) advised to
/// use huge pages, whose pages are mapped as they are first written. In 4 KB pages the
/// arena of the 27 MB benchmark text cost ~3,800 page faults, 70% of the run's, and its
/// random reads missed the TLB. One thread, whole command, AMD EPYC Zen 4 in a quiet
/// phase, CPU ms (min / p10 / median of 16 alternated runs): o200k_base 358 / 360 / 364
/// against 369 / 370 / 371 with a `Vec`, cl100k_base 325 / 325 / 330 against 334 / 335
/// / 336; page faults 2,703 against 5,384. A one-line run does not reach the map.
#[derive(Default)]
struct Arena {
    mem: Option<HugeBytes>,
    heap: Vec<u8>,
    len: usize,
}

/// An arena grows on the heap up to this many bytes.
const ARENA_HEAP_MAX: usize = 1 << 20;
/// The map an arena moves to past [`ARENA_HEAP_MAX`]: address space, not memory, and
/// the most an arena holds (the cache is cleared before it would pass this): with
/// [`CACHE_ENTRIES`] it bounds a thread's cache at about 80 MB whatever the chunks.
/// Before, only the entry count bounded it: 80 MB of random 120-letter words with
/// o200k_base, one thread, peaked at 377 MB, now 177 MB (80 MB of it the mapped input).
const ARENA_RESERVE: usize = 64 << 20;

impl Arena {
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        match &self.mem {
            Some(mem) => &mem.bytes()[..self.len],
            None => &self.heap[..self.len],
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends `key`, then `ids` as little-endian u32s.
    #[inline]
    fn push(&mut self, key: &[u8], ids: &[u32]) {
        let start = self.len;
        let end = start + key.len() + 4 * ids.len();
        let buf = match &mut self.mem {
            Some(mem) if end <= mem.bytes().len() => &mut mem.bytes_mut()[start..end],
            None if end <= ARENA_HEAP_MAX => {
                self.heap.resize(end, 0);
                &mut self.heap[start..end]
            }
            _ => {
                self.grow(end);
                return self.push(key, ids);
            }
        };
        buf[..key.len()].copy_from_slice(key);
        for (dst, id) in buf[key.len()..].chunks_exact_mut(4).zip(ids) {
            dst.copy_from_slice(&id.to_le_bytes());
        }
        self.len = end;
    }

    /// Moves the entries to a map of at least `need` bytes.
    #[cold]
    fn grow(&mut self, need: usize) {
        let mut mem = HugeBytes::zeroed(ARENA_RESERVE.max(2 * need), 0);
        mem.bytes_mut()[..self.len].copy_from_slice(self.bytes());
        self.mem = Some(mem);
        self.heap = Vec::new();
    }
}

/// Puts `slot` in the first empty slot from `hash`'s.
#[inline]
fn place(slots: &mut [Slot], hash: u64, slot: Slot) {
    let mask = slots.len() - 1;
    let mut at = hash as usize & mask;
    while slots[at][2] != 0 {
        at = (at + 1) & mask;
    }
    slots[at] = slot;
}

/// The second level's hash of a chunk: its [`ShortKey`]'s when it has one (the rule
/// `Encoder::encode_chunk` follows with the key it already has).
#[inline]
pub(super) fn chunk_hash(chunk: &[u8]) -> u64 {
    if (2..=HOT_MAX).contains(&chunk.len()) {
        ShortKey::new(chunk).hash()
    } else {
        hash_bytes(chunk)
    }
}

/// A fast 64-bit hash of a short byte string (multiply-mix over 8-byte words).
#[inline]
pub(super) fn hash_bytes(bytes: &[u8]) -> u64 {
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

/// Models with at most this many pairs get a [`FlatPairs`] table: every model whose ids
/// fit its slots. The table is the model's own (read in place for the built-ins, filled
/// as a model file is read); the Bloom filter is compiled in for the built-ins (building
/// o200k_base's took `echo hi | bpe-encode` from 3.8 to 7.6 ms) and built at start-up for
/// model files.
pub(super) const FLAT_PAIRS_MAX: usize = 1 << 30;

/// Pair -> merge id, linear probing, load factor at most 1/2, for models whose ids fit
/// in [`PAIR_ID_BITS`] bits: each slot is one u64, `a << 42 | b << 21 | id` (the layout
/// of the built-ins' compiled-in tables, `crate::model::probe_pair`), so a probe is one
/// load from a table half the size of a (key, id) layout (512 KB for a 32k model: it
/// stays in L2). Measured on line records with a 32k `--split none` model: about twice
/// as fast as the model's hash map behind the pair cache, and the 8-byte slots a
/// further ~15% over 16-byte ones.
pub(super) struct FlatPairs<'m> {
    /// The model's own slot table when it has one (built-ins, model files), read in
    /// place; else built here from its map.
    pub(super) slots: Cow<'m, [u64]>,
    pub(super) bits: u32,
    /// One bit per hash of a pair, set for every merge's pair (a one-hash Bloom filter):
    /// most pairs a merge creates are no merge, and this array of 16 bits per merge
    /// (64 KB for a 32k model) answers that for 15 in 16 of them without a probe of the
    /// table (16 bytes per merge, 512 KB). One thread, 32k model, 27 MB of lines, means
    /// of 4 alternated runs: 1.30 s without it, 1.13 s with it (8 bits per merge: 1.16 s;
    /// 4 bits: 1.19 s). A built-in's is compiled in ([`PairTable::bloom`]).
    pub(super) bloom: Cow<'m, [u64]>,
    pub(super) bloom_shift: u32,
}

impl<'m> FlatPairs<'m> {
    /// The table for `pairs`, or `None` when an id does not fit in [`PAIR_ID_BITS`].
    pub(super) fn new(pairs: &'m PairIds) -> Option<FlatPairs<'m>> {
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
        let count = pairs.count();
        let bloom = match pairs.table().and_then(PairTable::bloom) {
            Some(bloom) => Cow::Borrowed(bloom),
            None => Cow::Owned(pair_bloom(&slots, count)),
        };
        let bloom_shift = pair_bloom_shift(count);
        Some(FlatPairs {
            slots,
            bits,
            bloom,
            bloom_shift,
        })
    }

    #[inline(always)]
    pub(super) fn get(&self, a: u32, b: u32) -> u32 {
        let Some(key) = pair_key(a, b) else {
            return NONE;
        };
        let bit = pair_bloom_bit(key, self.bloom_shift);
        if self.bloom[bit / 64] & (1 << (bit % 64)) == 0 {
            return NONE;
        }
        probe_pair(key, self.bits, |at| self.slots[at]).unwrap_or(NONE)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::test_rng::Rng;

    /// `same_bytes` answers as `==` for every length up to 40: equal slices, and slices
    /// that differ in one byte at each position (by one bit and by every bit), seeded.
    #[test]
    fn same_bytes_is_equality() {
        let mut rng = Rng::new(0x5A3E_B7E5);
        for n in 0..=40 {
            for _ in 0..50 {
                let a: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
                assert!(same_bytes(&a, &a.clone()), "{a:?}");
                for at in 0..n {
                    for flip in [1u8 << rng.below(8), 0xFF] {
                        let mut b = a.clone();
                        b[at] ^= flip;
                        assert!(!same_bytes(&a, &b), "{a:?} {b:?}");
                        assert!(!same_bytes(&b, &a), "{b:?} {a:?}");
                    }
                }
            }
        }
    }

    /// Two chunks share a hot key only when they are equal, and the two levels give back
    /// exactly the ids stored for a chunk until the second level is cleared (a `HashMap`
    /// of chunk -> (ids, the clearing it was stored after) is the twin), over seeded
    /// random chunks from a three-letter alphabet (so that chunks share prefixes,
    /// suffixes and middles) and random id lists, with the hot level's entries
    /// replaced many times over; at the real sizes (the move to the full table once),
    /// at tiny ones (the move and the clearing many times), and with a small arena
    /// (cleared for its bytes before its entries; some chunks then are hundreds of
    /// bytes long).
    #[test]
    fn chunk_cache_returns_what_was_stored() {
        let sizes = [
            (SMALL_SLOTS, CACHE_ENTRIES, ARENA_RESERVE),
            (64, 1024, ARENA_RESERVE),
            (4, 8, ARENA_RESERVE),
            (64, 1024, 4096),
        ];
        for (small, entries, arena_max) in sizes {
            let long = arena_max < ARENA_RESERVE;
            let mut rng = Rng::new(0x5EED_CACE);
            let mut keys: HashMap<([u64; 2], u32), Vec<u8>> = HashMap::new();
            let mut twin: HashMap<Vec<u8>, (Vec<u32>, usize)> = HashMap::new();
            let mut cache = ChunkCache::with_entries(small, entries, arena_max);
            let (mut clearings, mut stored, mut bytes) = (0, 0, 0);
            for _ in 0..200_000 {
                let len = if long && rng.below(8) == 0 {
                    2 + rng.below(600)
                } else {
                    2 + rng.below(HOT_MAX + 8)
                };
                let chunk = rng.bytes_from(b"ab\x00", len);
                let short = (len <= HOT_MAX).then(|| ShortKey::new(&chunk));
                if let Some(key) = &short {
                    let other = keys.entry((key.words, key.len)).or_insert(chunk.clone());
                    assert_eq!(*other, chunk, "two chunks with one hot key");
                }
                let hash = chunk_hash(&chunk);
                let mut out = vec![7];
                let known = twin.get(&chunk).cloned();
                if let Some((ids, _)) = &known {
                    if short
                        .as_ref()
                        .is_some_and(|key| cache.get_hot(key, &mut out))
                    {
                        assert_eq!(out[1..], ids[..], "{chunk:?}");
                        continue;
                    }
                } else if let Some(key) = &short {
                    assert!(!cache.get_hot(key, &mut out));
                }
                let cached = cache.get(hash, &chunk, &mut out);
                match &known {
                    Some((ids, at)) if *at == clearings => {
                        assert!(cached, "{chunk:?} not cached ({small}, {entries})");
                        assert_eq!(out[1..], ids[..], "{chunk:?}");
                    }
                    _ => assert!(!cached && out == [7], "{chunk:?} cached"),
                }
                let ids = match known {
                    Some((ids, _)) => ids,
                    None => (0..1 + rng.below(5)).map(|_| rng.below(1 << 20)).collect(),
                };
                if !cached {
                    let need = chunk.len() + 4 * ids.len();
                    if stored == entries || bytes + need > arena_max {
                        (clearings, stored, bytes) = (clearings + 1, 0, 0);
                    }
                    cache.insert(hash, &chunk, &ids);
                    (stored, bytes) = (stored + 1, bytes + need);
                    twin.insert(chunk, (ids.clone(), clearings));
                }
                if let Some(key) = &short {
                    cache.put_hot(key, &ids);
                }
            }
            let full = cache.slots().len() == 2 * entries;
            let cleared = if entries == CACHE_ENTRIES {
                clearings == 0
            } else {
                clearings > 100
            };
            assert!(full && cleared, "{small} {entries} {clearings}");
        }
    }
}
