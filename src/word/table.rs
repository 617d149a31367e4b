//! A word model's lookup table: every word in one open-addressing array (linear
//! probing, load at most 0.7), built in id order ([`BigTable::build`]) and probed in
//! groups whose cache misses overlap ([`BigTable::probe`], [`BigTable::touch`],
//! [`BigTable::find`]).
//!
//! A model that keeps every distinct word of the 27 MB benchmark text has ~540 000 words
//! and the text 3.18 M running words: lookups and inserts land on random slots of a
//! table of tens of megabytes, so they are bound by cache and TLB misses. Three things
//! answer that: a slot holds a word of up to 24 bytes in full (zero padded) with its
//! length and id, so finding such a word reads one cache line (longer words are then
//! checked against their bytes in the [`WordList`]); the slots live in huge pages
//! ([`HugeBytes`]); and both the build and the encoder read the home slots of a group of
//! [`GROUP`] words before looking any of them up. Loading that model and encoding the
//! text takes 0.37 CPU s this way, against 0.78 s with a hash map (other layouts tried
//! are in docs/performance-notes.md).

use ahash::RandomState;

use super::{Repeat, WordList};
use crate::hugemem::HugeBytes;

/// How many bytes of a word a slot holds.
const INLINE: usize = 24;

/// One slot: the word's first 24 bytes (zero padded) as three numbers, its length (0: an
/// empty slot) and its id. Two slots per cache line.
#[derive(Clone, Copy)]
struct Slot {
    lanes: [u64; 3],
    len: u32,
    id: u32,
}

/// Bytes of a slot in [`SlotMem`].
const SLOT_BYTES: usize = 32;

/// The slots, as bytes, in huge pages when the table is large ([`HugeBytes`]): lookups
/// land on random slots of a table of tens of megabytes, where TLB misses cost as much as
/// cache misses (measured: ~5-10% of encoding with the 540k-word model).
#[derive(Clone)]
struct SlotMem(HugeBytes);

/// Tables from this size on are mapped (a huge page is 2 MiB).
const MAP_MIN_BYTES: usize = 4 << 20;

impl SlotMem {
    fn new(slots: usize) -> SlotMem {
        SlotMem(HugeBytes::zeroed(slots * SLOT_BYTES, MAP_MIN_BYTES))
    }

    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.0.bytes()
    }

    #[inline(always)]
    fn u64_at(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes()[at..at + 8].try_into().unwrap_or([0; 8]))
    }

    #[inline(always)]
    fn get(&self, i: usize) -> Slot {
        let at = i * SLOT_BYTES;
        let tail = self.u64_at(at + 24);
        Slot {
            lanes: [self.u64_at(at), self.u64_at(at + 8), self.u64_at(at + 16)],
            len: tail as u32,
            id: (tail >> 32) as u32,
        }
    }

    /// The length field of slot `i` (0: empty).
    #[inline(always)]
    fn len_at(&self, i: usize) -> u32 {
        self.u64_at(i * SLOT_BYTES + 24) as u32
    }

    /// The id field of slot `i`.
    #[inline(always)]
    fn id_at(&self, i: usize) -> u32 {
        (self.u64_at(i * SLOT_BYTES + 24) >> 32) as u32
    }

    /// Writes slot `i`.
    fn set(&mut self, i: usize, slot: Slot) {
        let mut bytes = [0u8; SLOT_BYTES];
        for (k, lane) in slot.lanes.iter().enumerate() {
            bytes[8 * k..8 * k + 8].copy_from_slice(&lane.to_le_bytes());
        }
        let tail = slot.len as u64 | (slot.id as u64) << 32;
        bytes[24..].copy_from_slice(&tail.to_le_bytes());
        let target = self.0.bytes_mut();
        target[i * SLOT_BYTES..(i + 1) * SLOT_BYTES].copy_from_slice(&bytes);
    }
}

/// Up to eight bytes as one little-endian number, zero padded, without copying through
/// a buffer (two overlapping 4-byte reads, or three single bytes).
#[inline(always)]
fn lane(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 4 {
        let lo = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64;
        let hi =
            u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]) as u64;
        lo | hi << (8 * (n - 4))
    } else if n > 0 {
        bytes[0] as u64
            | (bytes[n / 2] as u64) << (8 * (n / 2))
            | (bytes[n - 1] as u64) << (8 * (n - 1))
    } else {
        0
    }
}

/// The first [`INLINE`] bytes of `word`, zero padded, as three numbers.
#[inline(always)]
fn lanes_of(word: &[u8]) -> [u64; 3] {
    let mut lanes = [0u64; 3];
    for (k, lane_value) in lanes.iter_mut().enumerate() {
        let start = 8 * k;
        if word.len() >= start + 8 {
            *lane_value = u64::from_le_bytes(word[start..start + 8].try_into().unwrap_or([0; 8]));
        } else if word.len() > start {
            *lane_value = lane(&word[start..]);
        }
    }
    lanes
}

/// The high half of a 128-bit product folded into the low half: a fast, well-mixing
/// combination of two numbers.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = (a as u128) * (b as u128);
    (product as u64) ^ ((product >> 64) as u64)
}

/// How many lookups or inserts read their home slots together before any goes on.
pub(crate) const GROUP: usize = 16;

/// A word looked up in a [`BigTable`]: its inline form and home slot, computed once.
#[derive(Clone, Copy)]
pub(crate) struct Probe<'w> {
    word: &'w [u8],
    lanes: [u64; 3],
    len: u32,
    home: usize,
}

/// Where words live in a table of `2^(64 - shift)` slots: a seeded hash.
#[derive(Clone)]
struct Homes {
    seeds: [u64; 4],
    shift: u32,
}

impl Homes {
    #[inline(always)]
    fn probe<'w>(&self, word: &'w [u8]) -> Probe<'w> {
        let lanes = lanes_of(word);
        let len = u32::try_from(word.len()).unwrap_or(u32::MAX);
        let s = &self.seeds;
        let hash = fold(
            fold(lanes[0] ^ s[0], lanes[1] ^ s[1]) ^ lanes[2],
            (len as u64) ^ s[2] ^ s[3].rotate_left(32),
        );
        Probe {
            word,
            lanes,
            len,
            home: (hash >> self.shift) as usize,
        }
    }
}

/// The slot of `probe`'s word in `slots`, or the empty slot where it would go (`Err`).
/// `word_of` gives the bytes of an id, to compare words longer than a slot holds.
#[inline(always)]
fn seek<'t>(
    slots: &SlotMem,
    mask: usize,
    probe: &Probe,
    word_of: impl Fn(u32) -> &'t [u8],
) -> Result<usize, usize> {
    let mut i = probe.home;
    loop {
        let slot = slots.get(i);
        if slot.len == 0 {
            return Err(i);
        }
        if slot.lanes == probe.lanes
            && slot.len == probe.len
            && (probe.word.len() <= INLINE || word_of(slot.id) == probe.word)
        {
            return Ok(i);
        }
        i = (i + 1) & mask;
    }
}

/// Every word of a [`WordList`] (ids `0..n`); lookups take the list, to compare words
/// longer than a slot holds.
#[derive(Clone)]
pub(crate) struct BigTable {
    slots: SlotMem,
    mask: usize,
    homes: Homes,
}

impl BigTable {
    /// The table of the words of `list`, or the first word that repeats an earlier one
    /// (words go in in id order, each looked up first).
    pub(crate) fn build(list: &WordList) -> Result<BigTable, Repeat> {
        let n = list.len();
        // Load factor at most 0.7 keeps probes short.
        let bits = ((n * 10 / 7 + 1).next_power_of_two().trailing_zeros()).max(4);
        let random = RandomState::new();
        let homes = Homes {
            seeds: [0, 1, 2, 3].map(|k: u64| random.hash_one(k) | 1),
            shift: 64 - bits,
        };
        let mask = (1usize << bits) - 1;
        let mut slots = SlotMem::new(1 << bits);
        let word_of = |id: u32| list.word(id);
        // Words are inserted in id order (reading the words in order), GROUP at a time:
        // the home slots of a group are read first, all at once, so their cache misses
        // overlap instead of following one another. (Two designs measured worse: sorting
        // the words by table region first, so that inserts stay within a few kilobytes,
        // whose scatter and extra memory cost more than the misses it saved; and reading
        // the slot of one word eight ids ahead, which still waited for each miss in turn.)
        let mut probes = Vec::with_capacity(GROUP);
        for first in (0..n).step_by(GROUP) {
            probes.clear();
            let last = (first + GROUP).min(n);
            probes.extend((first..last).map(|id| homes.probe(word_of(id as u32))));
            let touched =
                (probes.iter()).fold(0u32, |acc, p| acc.wrapping_add(slots.len_at(p.home)));
            std::hint::black_box(touched);
            for (probe, id) in probes.iter().zip(first as u32..) {
                match seek(&slots, mask, probe, word_of) {
                    Ok(i) => {
                        let earlier = slots.id_at(i);
                        return Err(Repeat { id, earlier });
                    }
                    Err(i) => slots.set(
                        i,
                        Slot {
                            lanes: probe.lanes,
                            len: probe.len,
                            id,
                        },
                    ),
                }
            }
        }
        drop(probes);
        Ok(BigTable { slots, mask, homes })
    }

    /// Prepares the lookup of `word`: its inline form and home slot.
    #[inline(always)]
    pub(crate) fn probe<'w>(&self, word: &'w [u8]) -> Probe<'w> {
        self.homes.probe(word)
    }

    /// Reads the probe's home slot and returns something of it: called for a group of
    /// probes before any of them is looked up, so that their cache misses overlap.
    #[inline(always)]
    pub(crate) fn touch(&self, probe: &Probe) -> u32 {
        self.slots.len_at(probe.home)
    }

    /// The id of the probed word, a word of `list`.
    #[inline(always)]
    pub(crate) fn find(&self, probe: &Probe, list: &WordList) -> Option<u32> {
        let word_of = |id: u32| list.word(id);
        seek(&self.slots, self.mask, probe, word_of)
            .ok()
            .map(|i| self.slots.id_at(i))
    }
}
