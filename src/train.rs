//! BPE training: the seed's byte-level algorithm over one sequence (`--split none`) and
//! minbpe RegexTokenizer's chunked variant (regex split modes), both incremental.
//!
//! # Exactness
//! Each round merges the most frequent adjacent pair. Counts include overlaps (`aaa` has two
//! `aa`), merging is left to right without overlap, and ties go to the pair whose first
//! occurrence in the *current* sequence is earliest: the seed's `max(stats, key=stats.get)`
//! returns the first maximum of a dict filled in sequence order. In chunked mode pairs never
//! cross chunks, counts are sums weighted by how often each distinct chunk occurs, and the
//! distinct chunks are laid out in first-appearance order, so "first in the text" is "first
//! in this layout" (the first text occurrence of a pair lies in the first appearance of the
//! first distinct chunk that contains it).
//!
//! # Data structures
//! - `tokens: Vec<u32>` over original positions. A merge writes the new id at the left
//!   position and deletes the right one; deleted slots carry the flag [`DEL`] and, at the two
//!   ends of each run of deleted slots, the live position beyond the run (gap encoding, as in
//!   Re-Pair), so `next`/`prev` are O(1) without link arrays (4 bytes per input byte
//!   instead of 12).
//! - One record per *tracked* pair (weighted count >= 2): exact count, live occurrence
//!   count, and its occurrence list in position order, validated lazily: an entry `p` is live
//!   iff `tokens[p] == a` and `tokens[next(p)] == b`. A position's token only ever grows to a
//!   newer id and `next(p)` only changes when `tokens[p]` does, so a dead entry never comes
//!   back to life. Existing pairs only lose occurrences; the occurrences of a new pair are
//!   found during the left-to-right merge pass, so they arrive in position order too.
//! - A max-heap keyed by (count, first live position), refreshed lazily: keys of existing
//!   pairs only get worse, so a popped entry whose key is still current is the true maximum;
//!   a stale one is re-pushed with its current key.
//! - Pairs of weighted count 1 are not tracked at all: counts never grow after a pair's
//!   creating pass, so such a pair can only be chosen when every pair has count 1, and then
//!   the tie rule picks the leftmost pair of the sequence, which a cursor finds.
//!
//! # Performance notes
//! (Measured on the 2-core AVX-512 machine of this project, release build.)
//! - See the module's report in the branch history; figures are filled in below.
//! - Per-merge caches indexed by neighbour token (not the hash map) resolve the pairs a
//!   merge touches: the map is consulted once per distinct neighbour, not per occurrence.

use ahash::AHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One learned merge: the pair, the new id (256 + index), and the pair's count when learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merge {
    /// The two ids merged, left then right.
    pub pair: (u32, u32),
    /// The new token's id: 256 for the first merge, then consecutive.
    pub id: u32,
    /// The pair's count (overlaps included; weighted in chunked mode) when it was chosen.
    pub count: u64,
}

/// The longest text (`train_bytes`) or total length of distinct chunks plus one separator
/// per chunk (`train_chunks`) the trainer accepts: positions and ids live in 31 bits.
/// Callers must reject longer input (the trainer panics on it).
pub const MAX_TRAIN_LEN: usize = (1 << 31) - 1024;

/// Flag of a deleted slot in `tokens`.
const DEL: u32 = 1 << 31;
/// Token of the separator slot between chunks; never part of a pair.
const SEP: u32 = DEL - 1;
/// "No position / no record" marker.
const NONE: u32 = u32::MAX;
/// Cache slot not looked up yet during the current merge.
const UNSET: u32 = u32::MAX - 1;

/// The seed's algorithm (`--split none`): byte-level BPE over `text` as ONE sequence, bytes
/// are ids 0..255. Learns up to `vocab_size - 256` merges; stops early only when no pair is
/// left. `on_merge` is called after each merge.
///
/// # Panics
/// If `text` is longer than [`MAX_TRAIN_LEN`].
pub fn train_bytes(text: &[u8], vocab_size: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
    assert!(
        text.len() <= MAX_TRAIN_LEN,
        "training input longer than {MAX_TRAIN_LEN} bytes"
    );
    let tokens: Vec<u32> = text.iter().map(|&b| u32::from(b)).collect();
    Engine::new(tokens, Unit).run(vocab_size, on_merge)
}

/// Chunked training (regex split modes): distinct chunks in FIRST-APPEARANCE order with
/// their occurrence counts; pairs never cross chunks; counts are weighted sums; ties go to
/// the pair that occurs first in the text (= first in this chunk order, then position in
/// chunk). Gives exactly minbpe RegexTokenizer's merges. Chunks need not be distinct
/// (a repeated chunk behaves as its occurrences would); chunks of weight 0 are ignored.
///
/// # Panics
/// If the chunks of weight > 0 and length >= 2, plus one byte each, exceed
/// [`MAX_TRAIN_LEN`].
pub fn train_chunks<'a>(
    chunks: impl IntoIterator<Item = (&'a [u8], u64)>,
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    let mut tokens: Vec<u32> = Vec::new();
    let mut weights: Vec<u64> = Vec::new();
    for (chunk, w) in chunks {
        // Chunks of one byte never hold a pair, and merges never create one in them.
        if w == 0 || chunk.len() < 2 {
            continue;
        }
        if !tokens.is_empty() {
            tokens.push(SEP);
            weights.push(0);
        }
        assert!(
            tokens.len() + chunk.len() <= MAX_TRAIN_LEN,
            "training chunks longer than {MAX_TRAIN_LEN} bytes in all"
        );
        tokens.extend(chunk.iter().map(|&b| u32::from(b)));
        weights.extend(std::iter::repeat_n(w, chunk.len()));
    }
    Engine::new(tokens, PerPos(weights)).run(vocab_size, on_merge)
}

/// The weight of the occurrence of a pair starting at a position.
trait Weights: Sync {
    fn at(&self, p: u32) -> u64;
}

/// Every occurrence counts once (`--split none`).
struct Unit;
impl Weights for Unit {
    #[inline(always)]
    fn at(&self, _p: u32) -> u64 {
        1
    }
}

/// Each position carries its chunk's occurrence count.
struct PerPos(Vec<u64>);
impl Weights for PerPos {
    #[inline(always)]
    fn at(&self, p: u32) -> u64 {
        self.0[p as usize]
    }
}

/// A tracked pair (weighted count >= 2). A free slot has `count == 0`.
struct Rec {
    a: u32,
    b: u32,
    count: u64,
    /// Live occurrences (== count without weights); decides when to compact `list`.
    live: u32,
    /// Entries before `head` are known dead.
    head: u32,
    touched: bool,
    list: Vec<u32>,
}

/// A pair created during the current merge pass (its final count is known at the end).
struct Local {
    a: u32,
    b: u32,
    count: u64,
    live: u32,
    entries: u32,
}

#[inline(always)]
fn key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

struct Engine<W: Weights> {
    tokens: Vec<u32>,
    n: u32,
    weights: W,
    recs: Vec<Rec>,
    free: Vec<u32>,
    map: AHashMap<u64, u32>,
    heap: BinaryHeap<(u64, Reverse<u32>, u32)>,
    next_id: u32,
    /// Leftmost position that may start a pair, for the all-counts-are-1 phase.
    cursor: u32,
    // Per-merge scratch, indexed by neighbour token; reset through `touched_*`.
    left_old: Vec<u32>,
    right_old: Vec<u32>,
    left_new: Vec<u32>,
    right_new: Vec<u32>,
    touched_left: Vec<u32>,
    touched_right: Vec<u32>,
    touched_recs: Vec<u32>,
    locals: Vec<Local>,
    buf: Vec<(u32, u32)>,
}

impl<W: Weights> Engine<W> {
    fn new(tokens: Vec<u32>, weights: W) -> Engine<W> {
        let n = tokens.len() as u32;
        let mut e = Engine {
            tokens,
            n,
            weights,
            recs: Vec::new(),
            free: Vec::new(),
            map: AHashMap::new(),
            heap: BinaryHeap::new(),
            next_id: 256,
            cursor: 0,
            left_old: vec![UNSET; 256],
            right_old: vec![UNSET; 256],
            left_new: vec![UNSET; 256],
            right_new: vec![UNSET; 256],
            touched_left: Vec::new(),
            touched_right: Vec::new(),
            touched_recs: Vec::new(),
            locals: Vec::new(),
            buf: Vec::new(),
        };
        e.initial_count();
        e
    }

    /// The live position after live position `p`, or `n`.
    #[inline(always)]
    fn next(&self, p: u32) -> u32 {
        let q = p + 1;
        if q >= self.n {
            return self.n;
        }
        let t = self.tokens[q as usize];
        if t & DEL != 0 {
            t & !DEL
        } else {
            q
        }
    }

    /// The live position before live position `p`, or `NONE`.
    #[inline(always)]
    fn prev(&self, p: u32) -> u32 {
        if p == 0 {
            return NONE;
        }
        let q = p - 1;
        let t = self.tokens[q as usize];
        if t & DEL != 0 {
            let v = t & !DEL;
            // A run of one deleted slot stores the position after it (== p).
            if v < q {
                v
            } else {
                q - 1
            }
        } else {
            q
        }
    }

    /// Whether `(a, b)` currently occurs at `p` (`p` may be a dead entry).
    #[inline(always)]
    fn occurs(&self, p: u32, a: u32, b: u32) -> bool {
        if self.tokens[p as usize] != a {
            return false;
        }
        let q = self.next(p);
        q < self.n && self.tokens[q as usize] == b
    }

    fn alloc_rec(&mut self, rec: Rec) -> u32 {
        if let Some(id) = self.free.pop() {
            self.recs[id as usize] = rec;
            id
        } else {
            self.recs.push(rec);
            (self.recs.len() - 1) as u32
        }
    }

    fn release_rec(&mut self, id: u32) {
        let r = &mut self.recs[id as usize];
        self.map.remove(&key(r.a, r.b));
        r.count = 0;
        r.live = 0;
        r.list = Vec::new();
        self.free.push(id);
    }

    /// Advances the record's head to its first live entry and returns that position.
    fn first_live(&mut self, id: u32) -> u32 {
        let (a, b) = (self.recs[id as usize].a, self.recs[id as usize].b);
        let mut h = self.recs[id as usize].head as usize;
        let len = self.recs[id as usize].list.len();
        while h < len {
            let p = self.recs[id as usize].list[h];
            if self.occurs(p, a, b) {
                break;
            }
            h += 1;
        }
        self.recs[id as usize].head = h as u32;
        if h < len {
            self.recs[id as usize].list[h]
        } else {
            NONE
        }
    }

    /// Counts all byte pairs once and builds the tracked records.
    fn initial_count(&mut self) {
        let n = self.n as usize;
        if n < 2 {
            return;
        }
        let (counts, lives) = self.count_byte_pairs();
        let mut rec_of = vec![NONE; 1 << 16];
        for k in 0..(1usize << 16) {
            if counts[k] >= 2 {
                let id = self.alloc_rec(Rec {
                    a: (k >> 8) as u32,
                    b: (k & 255) as u32,
                    count: counts[k],
                    live: lives[k],
                    head: 0,
                    touched: false,
                    list: Vec::with_capacity(lives[k] as usize),
                });
                self.map.insert(key((k >> 8) as u32, (k & 255) as u32), id);
                rec_of[k] = id;
            }
        }
        let t = &self.tokens;
        for p in 0..n - 1 {
            let (x, y) = (t[p], t[p + 1]);
            if x < 256 && y < 256 {
                let id = rec_of[((x << 8) | y) as usize];
                if id != NONE {
                    self.recs[id as usize].list.push(p as u32);
                }
            }
        }
        let mut entries = Vec::with_capacity(self.recs.len());
        for (id, r) in self.recs.iter().enumerate() {
            if r.count >= 2 {
                entries.push((r.count, Reverse(r.list[0]), id as u32));
            }
        }
        self.heap = BinaryHeap::from(entries);
    }

    /// Weighted counts and occurrence counts of every byte pair, on both cores.
    fn count_byte_pairs(&self) -> (Vec<u64>, Vec<u32>) {
        let n = self.n as usize;
        let count_range = |lo: usize, hi: usize| {
            let mut counts = vec![0u64; 1 << 16];
            let mut lives = vec![0u32; 1 << 16];
            let t = &self.tokens;
            for p in lo..hi {
                let (x, y) = (t[p], t[p + 1]);
                if x < 256 && y < 256 {
                    let k = ((x << 8) | y) as usize;
                    counts[k] += self.weights.at(p as u32);
                    lives[k] += 1;
                }
            }
            (counts, lives)
        };
        // Pairs start at 0..n-1; each half counts the pairs starting in it.
        let mid = (n - 1) / 2;
        if n < 1 << 16 {
            return count_range(0, n - 1);
        }
        let ((mut c0, mut l0), (c1, l1)) = std::thread::scope(|s| {
            let h = s.spawn(|| count_range(mid, n - 1));
            let first = count_range(0, mid);
            (first, h.join().unwrap_or_else(|_| count_range(mid, n - 1)))
        });
        for k in 0..(1usize << 16) {
            c0[k] += c1[k];
            l0[k] += l1[k];
        }
        (c0, l0)
    }

    fn run(mut self, vocab_size: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
        let num_merges = vocab_size.saturating_sub(256);
        let mut merges = Vec::with_capacity(num_merges.min(self.n as usize));
        while merges.len() < num_merges {
            let m = match self.pick() {
                Some(id) => self.merge_tracked(id),
                None => match self.merge_leftmost() {
                    Some(m) => m,
                    None => break,
                },
            };
            on_merge(&m);
            merges.push(m);
        }
        merges
    }

    /// Pops the heap until its top is current; that record is the pair to merge.
    fn pick(&mut self) -> Option<u32> {
        while let Some((count, Reverse(pos), id)) = self.heap.pop() {
            let cur = self.recs[id as usize].count;
            if cur < 2 {
                continue; // released slot
            }
            let first = self.first_live(id);
            if first == NONE {
                continue; // cannot happen for a count >= 2; be safe
            }
            if cur == count && first == pos {
                return Some(id);
            }
            self.heap.push((cur, Reverse(first), id));
        }
        None
    }

    fn grow_caches(&mut self) {
        let size = self.next_id as usize + 1;
        for v in [
            &mut self.left_old,
            &mut self.right_old,
            &mut self.left_new,
            &mut self.right_new,
        ] {
            v.resize(size, UNSET);
        }
    }

    /// Looks up (through the per-merge cache) the tracked record of an old pair.
    #[inline(always)]
    fn old_rec(&mut self, left_side: bool, x: u32, y: u32) -> u32 {
        let (cache, slot) = if left_side {
            (&mut self.left_old, x)
        } else {
            (&mut self.right_old, y)
        };
        let v = cache[slot as usize];
        if v != UNSET {
            return v;
        }
        let id = self.map.get(&key(x, y)).copied().unwrap_or(NONE);
        cache[slot as usize] = id;
        if left_side {
            self.touched_left.push(slot);
        } else {
            self.touched_right.push(slot);
        }
        id
    }

    #[inline(always)]
    fn dec_rec(&mut self, id: u32, w: u64) {
        let r = &mut self.recs[id as usize];
        r.count -= w;
        r.live -= 1;
        if !r.touched {
            r.touched = true;
            self.touched_recs.push(id);
        }
    }

    #[inline(always)]
    fn new_local(&mut self, left_side: bool, slot: u32, a: u32, b: u32) -> u32 {
        let cache = if left_side {
            &mut self.left_new
        } else {
            &mut self.right_new
        };
        let v = cache[slot as usize];
        if v != UNSET {
            return v;
        }
        let lid = self.locals.len() as u32;
        cache[slot as usize] = lid;
        self.locals.push(Local {
            a,
            b,
            count: 0,
            live: 0,
            entries: 0,
        });
        if left_side {
            self.touched_left.push(slot);
        } else {
            self.touched_right.push(slot);
        }
        lid
    }

    #[inline(always)]
    fn add_local(&mut self, lid: u32, pos: u32, w: u64) {
        let l = &mut self.locals[lid as usize];
        l.count += w;
        l.live += 1;
        l.entries += 1;
        self.buf.push((lid, pos));
    }

    /// Deletes live slot `r`, the right half of a merge at `p`; `s` is the live slot after it.
    #[inline(always)]
    fn delete(&mut self, p: u32, r: u32, s: u32) {
        // `r` may end up inside the run, where nothing else would overwrite its token, and
        // a stale token there would make a dead list entry look live.
        self.tokens[r as usize] = DEL;
        let g0 = p + 1;
        let g1 = s - 1;
        self.tokens[g0 as usize] = DEL | s;
        if g1 != g0 {
            self.tokens[g1 as usize] = DEL | p;
        }
    }

    /// Merges every occurrence of a tracked pair, left to right, updating neighbours.
    fn merge_tracked(&mut self, id: u32) -> Merge {
        let (a, b, count) = {
            let r = &self.recs[id as usize];
            (r.a, r.b, r.count)
        };
        let c = self.next_id;
        self.next_id += 1;
        self.grow_caches();
        let list = std::mem::take(&mut self.recs[id as usize].list);
        let head = self.recs[id as usize].head as usize;
        let n = self.n;
        for &p in &list[head..] {
            if self.tokens[p as usize] != a {
                continue;
            }
            let r = self.next(p);
            if r >= n || self.tokens[r as usize] != b {
                continue;
            }
            let w = self.weights.at(p);
            let s = self.next(r);
            let l = self.prev(p);
            if l != NONE {
                let x = self.tokens[l as usize];
                if x != SEP {
                    if x == c {
                        // (c, a) was created by the previous occurrence in this pass.
                        let lid = self.right_new[a as usize];
                        let loc = &mut self.locals[lid as usize];
                        loc.count -= w;
                        loc.live -= 1;
                    } else {
                        let rid = self.old_rec(true, x, a);
                        if rid != NONE && rid != id {
                            self.dec_rec(rid, w);
                        }
                    }
                    let lid = self.new_local(true, x, x, c);
                    self.add_local(lid, l, w);
                }
            }
            if s < n {
                let y = self.tokens[s as usize];
                if y != SEP {
                    let rid = self.old_rec(false, b, y);
                    if rid != NONE && rid != id {
                        self.dec_rec(rid, w);
                    }
                    let lid = self.new_local(false, y, c, y);
                    self.add_local(lid, p, w);
                }
            }
            self.tokens[p as usize] = c;
            self.delete(p, r, s);
        }
        drop(list);
        self.release_rec(id);
        self.finish_pass();
        Merge {
            pair: (a, b),
            id: c,
            count,
        }
    }

    /// Settles the records a pass touched and turns its new pairs into records.
    fn finish_pass(&mut self) {
        for i in 0..self.touched_recs.len() {
            let id = self.touched_recs[i];
            let r = &mut self.recs[id as usize];
            r.touched = false;
            if r.count < 2 {
                self.release_rec(id);
            } else if (r.list.len() - r.head as usize) > 2 * r.live as usize + 16 {
                self.compact(id);
            }
        }
        self.touched_recs.clear();

        let mut rec_of = Vec::with_capacity(self.locals.len());
        for i in 0..self.locals.len() {
            let l = &self.locals[i];
            if l.count >= 2 {
                let (a, b) = (l.a, l.b);
                let rec = Rec {
                    a,
                    b,
                    count: l.count,
                    live: l.live,
                    head: 0,
                    touched: false,
                    list: Vec::with_capacity(l.entries as usize),
                };
                let id = self.alloc_rec(rec);
                self.map.insert(key(a, b), id);
                rec_of.push(id);
            } else {
                rec_of.push(NONE);
            }
        }
        for &(lid, pos) in &self.buf {
            let id = rec_of[lid as usize];
            if id != NONE {
                self.recs[id as usize].list.push(pos);
            }
        }
        for &id in &rec_of {
            if id != NONE {
                let first = self.first_live(id);
                self.heap
                    .push((self.recs[id as usize].count, Reverse(first), id));
            }
        }
        self.locals.clear();
        self.buf.clear();
        for &x in &self.touched_left {
            self.left_old[x as usize] = UNSET;
            self.left_new[x as usize] = UNSET;
        }
        for &y in &self.touched_right {
            self.right_old[y as usize] = UNSET;
            self.right_new[y as usize] = UNSET;
        }
        self.touched_left.clear();
        self.touched_right.clear();
    }

    /// Drops the dead entries of a record's list.
    fn compact(&mut self, id: u32) {
        let mut list = std::mem::take(&mut self.recs[id as usize].list);
        let (a, b, head) = {
            let r = &self.recs[id as usize];
            (r.a, r.b, r.head as usize)
        };
        let mut w = 0;
        for i in head..list.len() {
            let p = list[i];
            if self.occurs(p, a, b) {
                list[w] = p;
                w += 1;
            }
        }
        list.truncate(w);
        list.shrink_to_fit();
        let r = &mut self.recs[id as usize];
        r.list = list;
        r.head = 0;
    }

    /// Merges the leftmost pair of the sequence; used once every pair has count 1 (then no
    /// pair is tracked and every neighbour pair, old or new, also has count 1).
    fn merge_leftmost(&mut self) -> Option<Merge> {
        let n = self.n;
        let mut p = self.cursor;
        loop {
            if p >= n {
                self.cursor = p;
                return None;
            }
            if self.tokens[p as usize] == SEP {
                p += 1;
                continue;
            }
            let r = self.next(p);
            if r < n && self.tokens[r as usize] != SEP {
                break;
            }
            p = r;
        }
        self.cursor = p;
        let r = self.next(p);
        let s = self.next(r);
        let (a, b) = (self.tokens[p as usize], self.tokens[r as usize]);
        let c = self.next_id;
        self.next_id += 1;
        self.grow_caches();
        let count = self.weights.at(p);
        self.tokens[p as usize] = c;
        self.delete(p, r, s);
        Some(Merge {
            pair: (a, b),
            id: c,
            count,
        })
    }
}
