//! The BPE encoder: text bytes to token ids, exactly as minbpe's `encode` (and, for
//! rank tables, exactly as tiktoken), one record at a time or spread over threads.
//!
//! Semantics. Within one sequence the adjacent pair with the lowest merge id is merged,
//! leftmost first, until no adjacent pair has a merge. For model files this equals
//! minbpe's "merge every occurrence of the lowest pair, left to right" (a merge only
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
//! - Sequences longer than `2 * `[`STEP`] bytes are encoded left to right in steps of
//!   [`STEP`] bytes, each step encoding again the last [`BACK`] ids with the new bytes
//!   and joined where the two are compatible ([`Encoder::bpe_long`]; exact, see there):
//!   working memory stays that of one step whatever the length, and every step is a
//!   short scan. With a model file compatibility is read from the merges
//!   ([`Encoder::compatible`]); with a rank table, by encoding the two tokens' bytes.
//!   10 MB without a split point, one thread, whole command (CPU s and peak RSS,
//!   before -> after; the `bpe` crate's backtracking encoder beside, BENCHMARKS.md "Long
//!   chunks"): random letters with o200k_base 8.2 s / 315 MiB -> 1.5 s / 45 MiB (crate
//!   3.6 s / 118 MiB). Before, model files' sequences were cut into pieces mended where
//!   they met, and rank tables' went to the heap below, which ran at 1-5 MB/s there.
//! - Sequences of up to `scan_max` bytes (every chunk of a split model but the longest)
//!   start BPE from units where they may: two-byte tokens and three-byte characters
//!   that provably make their own merges first beside the bytes around them
//!   (`crate::model::units` holds the rule and its proof; [`Units`]). That spares ~65%
//!   of the merges of the 27 MB benchmark text's first sightings (its non-ASCII
//!   characters whole, most ASCII letter pairs joined); one thread, whole command,
//!   Intel Xeon model 167, CPU s, 7 alternated runs: o200k_base 0.368-0.391 against
//!   0.431-0.484, cl100k_base 0.330-0.365 against 0.387-0.458. The built-ins' units are
//!   compiled in; other models' are found from their pairs, and every model's are
//!   built only once a thread has taken [`UNITS_AFTER_BUILTIN`] (built-ins) or
//!   [`UNITS_AFTER`] sequences through BPE, so that short runs do not pay for them.
//! - The first round of pairs comes from a 64K table of byte pairs; later pairs from a
//!   flat table of 8-byte slots (every model whose ids fit them: 512 KB for a 32k model,
//!   L2-resident; the built-ins' compiled in with their filters) behind a one-hash Bloom
//!   filter (most pairs a merge creates are no merge; the filter answers 15 in 16 of
//!   those from 64 KB: one thread, 32k model, 27 MB of lines, 1.13 s against 1.30 s
//!   without it, means of 4 alternated runs), or a per-thread pair cache before the
//!   model's map for ids too large for the slots.
//! - Split models encode chunks of one or two bytes directly (two: from the byte-pair
//!   table), and keep a per-thread chunk -> ids cache for longer ones (words repeat:
//!   4.9M chunks but 448k distinct in the 27 MB benchmark text, hence
//!   [`CACHE_ENTRIES`] = 512K), with a small level of short chunks in front of it, a
//!   Bloom filter that spares a chunk seen for the first time the probe, and its slots
//!   in huge pages once it grows (`tables::ChunkCache`). Once BPE starts from units,
//!   chunks of up to 16 bytes that miss the small level skip the large one: their BPE
//!   costs what its probe did (`Encoder::encode_chunk_cached`).
//! - Caches live in a pool inside the [`Encoder`], so it is `Sync` and each thread
//!   borrows one for a batch; a cache is cleared when it reaches [`CACHE_ENTRIES`].
//! - `--whole` input is cut only where the result cannot change: for `--split none`
//!   between two bytes that no token contains side by side; with a split pattern where
//!   the splitter says the chunks stay the same (`Splitter::find_safe_cut`).

mod long;
mod short;
mod tables;
mod units;
mod whole;

use ahash::AHashMap;

use crate::error::{Error, Result};
use crate::model::{BpeModel, ModelSource};
use crate::parallel::Pool;
use crate::pretokenize::Emit;
use crate::pretokenize::Splitter;
use long::MergeQueue;
use tables::{
    byte_pair, hash_bytes, ChunkCache, FlatPairs, PairCache, ShortKey, FLAT_PAIRS_MAX, HOT_MAX,
    PAIR_CACHE_BITS,
};
use units::Units;
use whole::CutRule;

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
/// Sequences longer than twice this are encoded left to right in steps of this many
/// bytes ([`Encoder::bpe_long`]). Measured in process, one thread, 32k `--split none`
/// model, best of 5 (pieces of P bytes for sequences over 2P, against none): 27 MB of
/// text lines 0.967 s at P = 256 (64: 1.012, 96: 0.990, 128: 0.978; none: 1.003);
/// 2 KB lines 0.304 s (64: 0.357, 128: 0.317; none: 0.740); 128 KB lines 0.313 s
/// (64: 0.367, 128: 0.319; none: 0.934).
const STEP: usize = 256;
/// How many ids before the end of what is encoded each step of [`Encoder::bpe_long`]
/// encodes again with its new bytes (twice as many each time the join fails).
const BACK: usize = 2;
/// Chunks of a split pattern of at most this many bytes take [`Encoder::bpe_tiny`].
const TINY: usize = 32;
/// Chunks longer than this are not cached (they rarely repeat). Chunks of 129 bytes and
/// more are mostly rules drawn with box-drawing characters (` ┌────...`, 3 bytes each)
/// and runs of CJK letters, and the 2.3k of them in the 27 MB benchmark text are 632
/// distinct chunks, each seen 3.6 times on average: cached, one thread,
/// o200k_base, Intel Xeon model 167, CPU ms (min / p10 / median of 15 alternated runs)
/// 430 / 443 / 473 against 455 / 462 / 479 when only chunks of up to 128 bytes were
/// (cl100k_base 372 / 380 / 412 against 374 / 384 / 404). The arena's bound
/// ([`tables::ChunkCache`]) keeps the memory bounded whatever the chunks' length.
const CACHE_MAX_CHUNK: usize = 4096;
/// BPE starts from units ([`Encoder::units`]) once a thread has taken this many
/// sequences through it from bytes: finding a model file's units costs ~4 ms for a 32k
/// model (~30 ms for o200k_base as a rank file), which BPE from units saves back at
/// ~0.1-0.2 us a sequence, so that short runs do not pay for them.
const UNITS_AFTER: usize = 1 << 13;
/// The same for the built-ins, whose units are compiled in: reading them costs a run
/// ~0.3 ms (`echo 'привет мир' | bpe-encode`, 1.87 ms of CPU with them not read, 2.17
/// ms read from the first sequence; `perf stat -r 40`).
const UNITS_AFTER_BUILTIN: usize = 1 << 10;
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
    /// [`Encoder::bpe_tiny`]'s arrays.
    tiny: short::Tiny,
    /// The ids of [`Encoder::bpe_long`]'s window.
    window: Vec<u32>,
    /// Sequences this thread has taken through BPE from bytes while the encoder's
    /// units were not built ([`Encoder::units`]).
    without_units: usize,
    /// Two tokens' bytes and their ids, for [`Encoder::fits`].
    pair_bytes: Vec<u8>,
    pair_ids: Vec<u32>,
}

/// How [`Encoder::bpe_long`] checks that two ids meet as BPE leaves them, if it can.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Long {
    /// By the merges that made them: model files, whose ids come in merge order.
    Merges,
    /// By encoding their bytes again: rank tables.
    Bytes,
    /// Long sequences are encoded whole (vocabularies too large for the scan's keys).
    No,
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
    /// every BPE without touching the large table, and the ids of two-byte chunks.
    byte_pairs: Box<[u32]>,
    /// For models with few pairs (trained vocabularies): pair -> id, open addressing.
    flat_pairs: Option<FlatPairs<'m>>,
    /// Sequences up to this length take the scan ([`Encoder::bpe_scan`]): [`SHORT`]
    /// when every id fits beside a position in a u32 key, shorter for huge
    /// vocabularies.
    scan_max: usize,
    /// Bits of the position in a scan key.
    scan_shift: u32,
    /// Sequences longer than `2 * step` bytes are encoded left to right in steps of
    /// `step` bytes ([`Encoder::bpe_long`]), when `long` says how.
    step: usize,
    long: Long,
    /// The model's units ([`Units`]), built on first need.
    units: std::sync::OnceLock<Box<Units>>,
    /// BPE starts from units once a thread has taken this many sequences through it
    /// from bytes ([`UNITS_AFTER`]; see [`Encoder::with_units_after`]).
    units_after: usize,
    pool: Pool<Scratch>,
}

/// The merge id of every two bytes' base ids, by the bytes (`x << 8 | y`), [`NONE`]
/// where there is none. Every two-byte token is the merge of its two base ids (merges
/// never repeat a pair, and rank tables list every split), so the token table gives
/// them all; `check` confirms each in the pair table. The built-ins skip that (they
/// list every split: `byte_pairs_of_builtins_need_no_check`): its lookups in
/// o200k_base's 8 MB pair table were ~0.3 ms of every encoding run's start.
fn byte_pairs(model: &BpeModel, check: bool) -> Box<[u32]> {
    let mut byte_pairs = vec![NONE; 1 << 16].into_boxed_slice();
    let mut two = Vec::with_capacity(2);
    for (id, span) in model.token_offsets.windows(2).enumerate() {
        if span[1] == span[0] + 2 {
            two.clear();
            model.write_token(id as u32, &mut two);
            let pair = (
                model.base_id_of_byte[two[0] as usize],
                model.base_id_of_byte[two[1] as usize],
            );
            if !check || model.merge_ids.id(pair.0, pair.1) == Some(id as u32) {
                byte_pairs[byte_pair(&two)] = id as u32;
            }
        }
    }
    byte_pairs
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
        // their tokens into itself (src/tests/tiktoken_goldens.rs checks all of them), and
        // the map would cost ~10 ms of start-up.
        let builtin = matches!(model.source, ModelSource::Builtin(name)
            if crate::model::BUILTINS.contains(&name));
        let whole = (!model.is_merge_list() && !builtin).then(|| {
            let bytes = model.token_bytes();
            let offsets = &model.token_offsets;
            let mut map = AHashMap::with_capacity(offsets.len());
            for (id, span) in offsets.windows(2).enumerate() {
                if span[1] > span[0] {
                    map.insert(&bytes[span[0] as usize..span[1] as usize], id as u32);
                }
            }
            Box::new(map)
        });
        let byte_pairs = byte_pairs(model, !builtin);
        let flat_pairs = (model.merge_ids.count() <= FLAT_PAIRS_MAX)
            .then(|| FlatPairs::new(&model.merge_ids))
            .flatten();
        // Keys must stay below NONE: (vocab - 1) << shift | position < u32::MAX.
        let vocab = model.vocab_size() as u64;
        let (scan_max, scan_shift) = [SHORT_BITS, 8, 6]
            .into_iter()
            .find(|&bits| vocab < (1u64 << (32 - bits)) - 1)
            .map_or((0, 0), |bits| ((1usize << bits).min(SHORT), bits));
        // Model files' ids come in merge order (each above its pair's members, one pair
        // per id), which `compatible` rests on; rank tables keep their tokens' bytes.
        let step = STEP.min(scan_max / 2);
        let long = if step == 0 {
            Long::No
        } else if model.is_merge_list() && model.merge_ids.count() == model.merges.len() {
            Long::Merges
        } else {
            Long::Bytes
        };
        Ok(Encoder {
            model,
            scan_max,
            scan_shift,
            step,
            long,
            byte_pairs,
            flat_pairs,
            splitter,
            specials,
            special_start,
            whole,
            cut: std::sync::OnceLock::new(),
            units: std::sync::OnceLock::new(),
            units_after: if builtin {
                UNITS_AFTER_BUILTIN
            } else {
                UNITS_AFTER
            },
            pool: Pool::default(),
        })
    }

    /// Encodes one record, appending its ids to `out`.
    pub fn encode(&self, text: &[u8], out: &mut Vec<u32>) {
        let mut scratch = self.take_scratch();
        self.encode_with(&mut scratch, text, out);
        self.put_scratch(scratch);
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
            Some(splitter) => splitter.split_each(
                text,
                &mut ChunkStep {
                    encoder: self,
                    scratch,
                    out,
                },
            ),
            None => self.encode_sequence(scratch, text, out),
        }
    }

    /// One chunk of a split model: one or two bytes directly, then the cache, then (on
    /// a miss) tiktoken's whole-token rule and BPE.
    ///
    /// Two bytes are one token when their byte pair has a merge, else their two base
    /// ids: [`Encoder::bpe_tiny`]'s answer (and tiktoken's: a two-byte token is the
    /// merge of its bytes), from [`Encoder::byte_pairs`] without the cache's hashing and
    /// probe. They are 730k of the 4.9M chunks of the 27 MB benchmark text. One thread,
    /// o200k_base, AMD EPYC Zen 4, CPU ms (min / p10 / median of 20-24 alternated runs
    /// of the whole command): 424 / 433 / 466 against 437 / 465 / 506 (ndjson), 393 /
    /// 397 / 435 against 416 / 432 / 472 (`--format u32`); cl100k_base 389 / 394 / 430
    /// against 397 / 410 / 455.
    #[inline(always)]
    fn encode_chunk(&self, scratch: &mut Scratch, chunk: &[u8], out: &mut Vec<u32>) {
        let base = &self.model.base_id_of_byte;
        match *chunk {
            [b] => {
                out.push(base[b as usize]);
                return;
            }
            [x, y] => {
                match self.byte_pairs[byte_pair(chunk)] {
                    NONE => out.extend_from_slice(&[base[x as usize], base[y as usize]]),
                    id => out.push(id),
                }
                return;
            }
            _ => {}
        }
        if chunk.len() > CACHE_MAX_CHUNK {
            self.encode_sequence(scratch, chunk, out);
            return;
        }
        let short = (chunk.len() <= HOT_MAX).then(|| ShortKey::new(chunk));
        if let Some(key) = &short {
            if scratch.cache.get_hot(key, out) {
                return;
            }
        }
        self.encode_chunk_cached(scratch, chunk, short, out);
    }

    /// [`Encoder::encode_chunk`] past the hot level: the second level, then BPE.
    ///
    /// Once BPE starts from units ([`Encoder::units`]), a chunk the hot level could
    /// hold (up to [`HOT_MAX`] bytes) skips the second level: its BPE costs about what
    /// the level's probe (the seen filter's word, the slot, the arena entry) and insert
    /// cost, and the level then holds only longer chunks, so stays small. With the hot
    /// level at 2^15 entries instead of 2^14 (where it now stands in for both levels),
    /// one thread, whole command, 27 MB, Intel Xeon model 167, CPU ms (min / p10 /
    /// median of 11 alternated runs): o200k_base 335 / 355 / 369 against 371 / 380 /
    /// 397, cl100k_base 317 / 331 / 342 against 340 / 346 / 374; in process (best of 5,
    /// three rounds) o200k_base 0.304-0.308 s against 0.348-0.356.
    #[inline(never)]
    fn encode_chunk_cached(
        &self,
        scratch: &mut Scratch,
        chunk: &[u8],
        short: Option<ShortKey>,
        out: &mut Vec<u32>,
    ) {
        let start = out.len();
        if let Some(key) = &short {
            if self.units.get().is_some() {
                self.encode_sequence(scratch, chunk, out);
                scratch.cache.put_hot(key, &out[start..]);
                return;
            }
        }
        let hash = match &short {
            Some(key) => key.hash(),
            None => hash_bytes(chunk),
        };
        if !scratch.cache.get(hash, chunk, out) {
            self.encode_sequence(scratch, chunk, out);
            scratch.cache.insert(hash, chunk, &out[start..]);
        }
        if let Some(key) = &short {
            scratch.cache.put_hot(key, &out[start..]);
        }
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
        if cache.keys[slot] == !key {
            return cache.ids[slot];
        }
        let id = self.model.merge_ids.id(a, b).unwrap_or(NONE);
        cache.keys[slot] = !key;
        cache.ids[slot] = id;
        id
    }

    /// BPE over `bytes`: merge the lowest-id adjacent pair, leftmost first, until none
    /// is left; appends the ids.
    fn bpe(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        match bytes.len() {
            0 => {}
            1 => out.push(self.model.base_id_of_byte[bytes[0] as usize]),
            n if n >= 3
                && n <= self.scan_max
                && (n <= TINY || self.long == Long::No || n <= 2 * self.step) =>
            {
                match self.units(scratch) {
                    Some(units) => self.bpe_units(units, scratch, bytes, out),
                    None => self.bpe_bytes(scratch, bytes, out),
                }
            }
            _ => self.bpe_bytes(scratch, bytes, out),
        }
    }

    /// The model's units, once this thread has taken `units_after` sequences through
    /// BPE without them (read from the binary for the built-ins, found from the pairs
    /// for other models); `None` before.
    #[inline]
    fn units(&self, scratch: &mut Scratch) -> Option<&Units> {
        if let Some(units) = self.units.get() {
            return Some(units);
        }
        if scratch.without_units < self.units_after {
            scratch.without_units += 1;
            return None;
        }
        Some(self.units.get_or_init(|| {
            let tables = match &self.model.source {
                ModelSource::Builtin(name) => crate::model::builtin_units(name),
                _ => None,
            };
            let tables = tables.unwrap_or_else(|| self.model.units());
            Box::new(Units::new(&tables, &self.byte_pairs))
        }))
    }

    /// [`Encoder::bpe`] from bytes.
    fn bpe_bytes(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        match bytes.len() {
            0 => {}
            1 => out.push(self.model.base_id_of_byte[bytes[0] as usize]),
            n if n <= TINY && self.splitter.is_some() => self.bpe_tiny(scratch, bytes, out),
            n if self.long != Long::No && n > 2 * self.step => self.bpe_long(scratch, bytes, out),
            _ => self.bpe_one(scratch, bytes, out),
        }
    }

    /// Whether pairs are read from the flat table (else through the pair cache).
    #[cfg(test)]
    pub(crate) fn has_flat_pairs(&self) -> bool {
        self.flat_pairs.is_some()
    }

    /// The same encoder with steps of `step` bytes for long sequences (see
    /// [`Encoder::bpe_long`]; 0: none, each sequence is encoded whole): for tests, which
    /// use tiny steps to meet many joins and the whole-sequence encoder as a twin, and
    /// for tuning. The ids never change.
    pub fn with_step(mut self, step: usize) -> Encoder<'m> {
        if step == 0 {
            self.long = Long::No;
        } else if self.long != Long::No {
            self.step = step.min((self.scan_max / 2).max(1));
        }
        self
    }

    /// The same encoder starting BPE from units once a thread has taken `n` sequences
    /// through it from bytes (0: from the first; `usize::MAX`: never): for tests, which
    /// hold the two to the same ids, and for tuning. The ids never change.
    pub fn with_units_after(mut self, n: usize) -> Encoder<'m> {
        self.units_after = n;
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
}

/// The encoder's chunk step as a splitter's [`Emit`]: the split loop takes its hot path
/// ([`Encoder::encode_chunk`] up to the hot level) inline, where it called a closure per
/// chunk. The first 8 MB of the benchmark text, o200k_base: 718M instructions against
/// 731M (cachegrind); whole command, one thread, AMD EPYC Zen 4 in a quiet phase, CPU
/// ms (min / p10 / median of 24 alternated runs): o200k_base 368 / 369 / 371 against 370
/// / 371 / 373, cl100k_base 332 / 333 / 335 against 336 / 337 / 340.
struct ChunkStep<'e, 'm> {
    encoder: &'e Encoder<'m>,
    scratch: &'e mut Scratch,
    out: &'e mut Vec<u32>,
}

impl<'t> Emit<'t> for ChunkStep<'_, '_> {
    #[inline(always)]
    fn emit(&mut self, chunk: &'t [u8]) {
        self.encoder.encode_chunk(self.scratch, chunk, self.out);
    }
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
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

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

    /// The built-in vocabularies' byte pairs, taken from their two-byte tokens without a
    /// look in the pair table, are the ones the pair table confirms.
    #[test]
    fn byte_pairs_of_builtins_need_no_check() {
        for name in crate::model::BUILTINS {
            let model = crate::model::builtin(name).unwrap();
            let checked = byte_pairs(&model, true);
            assert_eq!(byte_pairs(&model, false), checked, "{name}");
            assert!(
                checked.iter().filter(|&&id| id != NONE).count() > 1000,
                "{name}"
            );
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
