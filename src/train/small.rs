//! The merge engine for small inputs: `engine`'s algorithm (same records, same lazy heap,
//! same gap-encoded deletions, so the same merges) laid out for a short run, where page
//! faults and allocations, not random access, are what a run costs.
//!
//! # What differs from `engine`, and why
//! - All occurrence lists live in ONE arena, each a range: a list is written once (the
//!   initial count, or the pass that creates its pair) and afterwards only loses entries, so
//!   it never needs to grow. That replaces a `Vec` per pair (a malloc and a free each, tens
//!   of thousands per run) and the per-pass `Vec<Vec<_>>` of new lists. Lists are never
//!   compacted: a dead entry is skipped at most twice (by `first_live`, then by the merge
//!   of its pair), and the arena is bounded (below).
//! - A new pair's count lives in its record from the start; a record whose count falls
//!   below 2 is released at once (its pair is never re-created, so a stale position link
//!   to a reused record never matches its pair).
//! - One 4-byte slot per position instead of 8: a live slot packs the token (the low
//!   `tb` bits, enough for the vocabulary and the separator) and its record link (the
//!   rest); a deleted slot holds the flag and a position, as in `engine` (its link is
//!   never read). Random access into this array is what the merge loop waits on, and half
//!   the bytes is half the cache lines and pages. The link field bounds the number of live
//!   records: when a pass could run out, the run stops and `train` finishes it on `engine`
//!   (exact either way; only inputs with very many distinct pairs and large vocabularies
//!   get there).
//! - Memory is pre-faulted (see `slots`), counting uses one thread.
//!
//! # Arena bound
//! The initial lists hold at most `n - 1` entries. A pass adds at most two entries per
//! merged occurrence, and each merged occurrence deletes a position, so all passes add at
//! most `2 (n - 1)`: the arena never exceeds `3 n` entries. New lists go first into the
//! range the merged pair's list leaves free, then at the end.
//!
//! # Performance notes
//! taylorswift.txt (185,768 bytes) to vocab 512, in process (`train_bytes` called 200
//! times, minimum): `engine` 5.35 ms (0.93 ms of it the set-up), first version of this
//! engine (arena, 8-byte slots in a `Vec`) 3.16 ms.
//! - Touching the slot 16 list entries ahead: 6.2 -> 5.5 ms CPU per call (pre-faulted
//!   maps, so fresh pages every call); 4 or 8 ahead helped less, 32 no more.

use super::engine::{Weights, DEL, NONE, SEP};
use super::slots::Words;
use super::Merge;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Inputs with fewer positions than this train here; longer ones in `engine`.
pub(super) const SMALL_MAX: usize = 1 << 20;
/// How many list entries ahead the merge loop touches the token array.
const PREFETCH: usize = 16;
/// Per-pass cache slot not filled yet.
const UNSET: u32 = u32::MAX - 1;

/// A tracked pair (weighted count >= 2), its list `arena[head..end]`. Free: `a == NONE`.
/// While its creating pass runs, `end` counts the entries it will get.
struct Rec {
    a: u32,
    b: u32,
    count: u64,
    head: u32,
    end: u32,
}

pub(super) struct Small<W: Weights> {
    /// Per position: token (low `tb` bits) and the record of the pair starting there when
    /// last set (the bits above), or [`DEL`] and a position.
    slots: Words,
    n: u32,
    /// Bits of a live slot that hold the token.
    tb: u32,
    /// `(1 << tb) - 1`; as a token, the separator.
    tok_mask: u32,
    /// The separator token (`tok_mask`).
    sep: u32,
    /// The "no record" link, all ones in the link bits.
    no_link: u32,
    /// Record ids stay below this.
    max_recs: u32,
    weights: W,
    recs: Vec<Rec>,
    free: Vec<u32>,
    arena: Words,
    /// Entries in use at the front of `arena`.
    alen: usize,
    heap: BinaryHeap<(u64, Reverse<u32>, u32)>,
    next_id: u32,
    /// Leftmost position that may start a pair, for the all-counts-are-1 phase.
    cursor: u32,
    // Per-pass scratch: new pairs (x, c) by x and (c, y) by y, reset via `touched_*`.
    left_new: Vec<u32>,
    right_new: Vec<u32>,
    touched_left: Vec<u32>,
    touched_right: Vec<u32>,
    /// Records of the pairs the current pass created, in creation order.
    created: Vec<u32>,
    /// The current pass's new occurrences: (record, position), in position order.
    buf: Vec<(u32, u32)>,
}

impl<W: Weights> Small<W> {
    /// An engine over the `n` tokens `toks` (bytes and [`SEP`]), for at most `num_merges`
    /// merges, with at most `max_recs` live records (tests lower it). `None` when the
    /// vocabulary does not fit the slot layout or the byte pairs alone need more records
    /// than it links: then nothing was learned, and `engine` must do the work.
    pub(super) fn new(
        n: usize,
        toks: impl Iterator<Item = u32> + Clone,
        weights: W,
        num_merges: usize,
        max_recs: u32,
    ) -> Option<Small<W>> {
        // Ids stay below 256 + merges, and a run learns fewer merges than positions.
        let vocab = 256 + num_merges.min(n) as u64;
        // Token bits: room for every id and the separator (all ones) above them.
        let tb = 64 - vocab.leading_zeros();
        if tb > 20 {
            return None;
        }
        let tok_mask = (1u32 << tb) - 1;
        let no_link = (1u32 << (31 - tb)) - 1;
        let mut e = Small {
            slots: Words::new(n),
            n: n as u32,
            tb,
            tok_mask,
            sep: tok_mask,
            no_link,
            max_recs: max_recs.min(no_link),
            weights,
            recs: Vec::new(),
            free: Vec::new(),
            arena: Words::new(3 * n),
            alen: 0,
            heap: BinaryHeap::new(),
            next_id: 256,
            cursor: 0,
            left_new: vec![UNSET; 256],
            right_new: vec![UNSET; 256],
            touched_left: Vec::new(),
            touched_right: Vec::new(),
            created: Vec::new(),
            buf: Vec::new(),
        };
        e.slots.prefault(n);
        if e.initial_count(toks.take(n)) {
            Some(e)
        } else {
            None
        }
    }

    /// The raw slot of position `p`.
    #[inline(always)]
    fn raw(&self, p: u32) -> u32 {
        self.slots.get(p as usize)
    }

    /// The token at `p`; a deleted slot gives a value with [`DEL`] set (never a token).
    #[inline(always)]
    fn tok(&self, p: u32) -> u32 {
        self.raw(p) & (DEL | self.tok_mask)
    }

    /// The token at live position `p` and the record of the pair that started at `p` when
    /// last set.
    #[inline(always)]
    fn get(&self, p: u32) -> (u32, u32) {
        let v = self.raw(p);
        (v & (DEL | self.tok_mask), self.rec_of_link(v >> self.tb))
    }

    /// Sets the token of live position `p`, keeping its link.
    #[inline(always)]
    fn set_tok(&mut self, p: u32, t: u32) {
        let v = self.raw(p);
        self.slots.set(p as usize, (v & !self.tok_mask) | t);
    }

    /// Sets the record link of live position `p` (`NONE`: no record).
    #[inline(always)]
    fn set_rec(&mut self, p: u32, id: u32) {
        let v = self.raw(p);
        let link = if id == NONE { self.no_link } else { id };
        self.slots.set(p as usize, (v & self.tok_mask) | (link << self.tb));
    }

    /// Marks position `p` deleted, pointing at position `to`.
    #[inline(always)]
    fn set_del(&mut self, p: u32, to: u32) {
        self.slots.set(p as usize, DEL | to);
    }

    /// The record a link names, or `NONE`.
    #[inline(always)]
    fn rec_of_link(&self, link: u32) -> u32 {
        if link == self.no_link {
            NONE
        } else {
            link
        }
    }

    /// The live position after live position `p`, or `n`.
    #[inline(always)]
    fn next(&self, p: u32) -> u32 {
        let q = p + 1;
        if q >= self.n {
            return self.n;
        }
        let t = self.raw(q);
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
        let t = self.raw(q);
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
        if self.tok(p) != a {
            return false;
        }
        let q = self.next(p);
        q < self.n && self.tok(q) == b
    }

    /// Deletes live slot `r`, the right half of a merge at `p`; `s` is the live slot after
    /// it. The deleted run becomes `p+1..s`; its two ends record `s` and `p`.
    #[inline(always)]
    fn delete(&mut self, p: u32, r: u32, s: u32) {
        // `r` may end up inside the run, where nothing else would overwrite its token, and
        // a stale token there would make a dead list entry look live.
        self.set_del(r, 0);
        let g0 = p + 1;
        let g1 = s - 1;
        self.set_del(g0, s);
        if g1 != g0 {
            self.set_del(g1, p);
        }
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
        r.a = NONE;
        r.b = NONE;
        r.count = 0;
        self.free.push(id);
    }

    /// Advances the record's head to its first live entry and returns that position.
    fn first_live(&mut self, id: u32) -> u32 {
        let r = &self.recs[id as usize];
        let (a, b, end) = (r.a, r.b, r.end);
        let mut h = r.head;
        while h < end && !self.occurs(self.arena.get(h as usize), a, b) {
            h += 1;
        }
        self.recs[id as usize].head = h;
        if h < end {
            self.arena.get(h as usize)
        } else {
            NONE
        }
    }

    /// Fills the slots from `toks`, counts all byte pairs and builds the tracked records,
    /// their lists in the arena (a counting sort of the positions by pair) and the heap.
    /// False if the tracked pairs need more than `max_recs` records.
    ///
    /// Both passes read `toks` (for `--split none`, the text itself), not the slots: the
    /// first version counted from the slots and took 18% of a taylorswift.txt run.
    fn initial_count(&mut self, toks: impl Iterator<Item = u32> + Clone) -> bool {
        let n = self.n as usize;
        let (sep, tb, no_link) = (self.sep, self.tb, self.no_link);
        let slot = |t: u32, link: u32| (if t == SEP { sep } else { t }) | (link << tb);
        let mut it = toks.clone();
        let Some(mut x) = it.next() else {
            return true;
        };
        // Occurrences per byte pair; a pair's entry becomes `FLAG | record` when its first
        // position is met in the second pass. Only the entries of pairs that occur are
        // touched: a full sweep of the 65,536 entries cost 64 page faults and a loop, which
        // is most of a run on a tiny input.
        const FLAG: u32 = 1 << 31;
        let mut occ = vec![0u32; 1 << 16];
        let mut wsum = if W::UNIT {
            Vec::new()
        } else {
            vec![0u64; 1 << 16]
        };
        let mut pairs = 0usize;
        for (p, y) in it.enumerate() {
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                occ[k] += 1;
                pairs += 1;
                if !W::UNIT {
                    wsum[k] += self.weights.at(p as u32);
                }
            }
            x = y;
        }
        // Room for every byte pair's position; untracked pairs' share is left unused.
        self.arena.prefault(pairs);
        let mut total = 0u32;
        let mut it = toks;
        let Some(mut x) = it.next() else {
            return true;
        };
        for (p, y) in it.enumerate() {
            let mut link = no_link;
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                let v = occ[k];
                if v & FLAG != 0 {
                    link = v & !FLAG;
                } else {
                    let count = if W::UNIT { u64::from(v) } else { wsum[k] };
                    if count >= 2 {
                        if self.recs.len() as u32 >= self.max_recs {
                            return false;
                        }
                        link = self.alloc_rec(Rec {
                            a: x,
                            b: y,
                            count,
                            head: total,
                            end: total,
                        });
                        total += v;
                        occ[k] = FLAG | link;
                    }
                }
                if link != no_link {
                    let r = &mut self.recs[link as usize];
                    let at = r.end as usize;
                    r.end += 1;
                    self.arena.set(at, p as u32);
                }
            }
            self.slots.set(p, slot(x, link));
            x = y;
        }
        self.slots.set(n - 1, slot(x, no_link));
        self.alen = total as usize;
        let entries: Vec<_> = self
            .recs
            .iter()
            .enumerate()
            .map(|(id, r)| (r.count, Reverse(self.arena.get(r.head as usize)), id as u32))
            .collect();
        self.heap = BinaryHeap::from(entries);
        true
    }

    /// Learns up to `num_merges` merges, calling `on_merge` after each. The flag is false
    /// if the run stopped early because the next pass could need more records than slots
    /// can link; the merges so far are right, and `engine` must learn the rest.
    pub(super) fn run(
        mut self,
        num_merges: usize,
        on_merge: &mut dyn FnMut(&Merge),
    ) -> (Vec<Merge>, bool) {
        let mut merges = Vec::with_capacity(num_merges.min(self.n as usize));
        while merges.len() < num_merges {
            let m = match self.pick() {
                Some(id) => {
                    // A pass creates at most two records per occurrence of its pair.
                    let r = &self.recs[id as usize];
                    let need = 2 * u64::from(r.end - r.head);
                    let room = u64::from(self.max_recs) - self.recs.len() as u64
                        + self.free.len() as u64;
                    if need > room {
                        return (merges, false);
                    }
                    self.merge_tracked(id)
                }
                None => match self.merge_leftmost() {
                    Some(m) => m,
                    None => break,
                },
            };
            on_merge(&m);
            merges.push(m);
        }
        (merges, true)
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
                continue; // impossible for a count >= 2; never loop on it
            }
            if cur == count && first == pos {
                return Some(id);
            }
            self.heap.push((cur, Reverse(first), id));
        }
        None
    }

    /// Subtracts one occurrence of weight `w` from record `id` if it is `(a, b)`'s record
    /// (the position's record link may be stale: then the pair is untracked).
    #[inline(always)]
    fn dec_old(&mut self, id: u32, a: u32, b: u32, w: u64) {
        if id == NONE {
            return;
        }
        let r = &mut self.recs[id as usize];
        if r.a != a || r.b != b {
            return;
        }
        r.count -= w;
        if r.count < 2 {
            self.release_rec(id);
        }
    }

    /// Adds an occurrence at `pos` of the new pair `(a, b)`, found by `slot` in the left
    /// (`(x, c)` by x) or right (`(c, y)` by y) cache.
    #[inline(always)]
    fn add_new(&mut self, left_side: bool, slot: u32, a: u32, b: u32, pos: u32, w: u64) {
        let cache = if left_side {
            &mut self.left_new
        } else {
            &mut self.right_new
        };
        let mut id = cache[slot as usize];
        if id == UNSET {
            id = self.alloc_rec(Rec {
                a,
                b,
                count: 0,
                head: 0,
                end: 0,
            });
            if left_side {
                self.touched_left.push(slot);
                self.left_new[slot as usize] = id;
            } else {
                self.touched_right.push(slot);
                self.right_new[slot as usize] = id;
            }
            self.created.push(id);
        }
        let r = &mut self.recs[id as usize];
        r.count += w;
        r.end += 1;
        self.buf.push((id, pos));
        self.set_rec(pos, id);
    }

    /// Merges every occurrence of a tracked pair, left to right, updating neighbours.
    fn merge_tracked(&mut self, id: u32) -> Merge {
        let (a, b, count, head, end) = {
            let r = &self.recs[id as usize];
            (r.a, r.b, r.count, r.head as usize, r.end as usize)
        };
        let c = self.next_id;
        self.next_id += 1;
        let size = self.next_id as usize + 1;
        self.left_new.resize(size, UNSET);
        self.right_new.resize(size, UNSET);
        let n = self.n;
        let mut sink = 0u32;
        for i in head..end {
            let p = self.arena.get(i);
            // Touch the slot a few entries ahead: its miss overlaps with this entry's work
            // instead of stalling behind a branch that depends on it.
            if i + PREFETCH < end {
                sink = sink.wrapping_add(self.tok(self.arena.get(i + PREFETCH)));
            }
            if self.tok(p) != a {
                continue;
            }
            let r = self.next(p);
            if r >= n {
                continue;
            }
            let (tr, rec_r) = self.get(r);
            if tr != b {
                continue;
            }
            let w = self.weights.at(p);
            let s = self.next(r);
            let l = self.prev(p);
            if l != NONE {
                let (x, rec_l) = self.get(l);
                if x != self.sep {
                    if x == c {
                        // (c, a) was created by the previous occurrence in this pass.
                        let lid = self.right_new[a as usize];
                        self.recs[lid as usize].count -= w;
                    } else if rec_l != id {
                        self.dec_old(rec_l, x, a, w);
                    }
                    self.add_new(true, x, x, c, l, w);
                }
            }
            if s < n {
                let y = self.tok(s);
                if y != self.sep {
                    if rec_r != id {
                        self.dec_old(rec_r, b, y, w);
                    }
                    self.add_new(false, y, c, y, p, w);
                }
            }
            self.set_tok(p, c);
            self.delete(p, r, s);
        }
        std::hint::black_box(sink);
        self.release_rec(id);
        self.finish_pass(head as u32, end as u32);
        Merge {
            pair: (a, b),
            id: c,
            count,
        }
    }

    /// Turns the pass's new pairs into records with lists (count >= 2) or frees them.
    /// The merged pair's list `arena[hole..hole_end]` is free space for the new lists.
    fn finish_pass(&mut self, mut hole: u32, hole_end: u32) {
        let mut total = self.alen as u32;
        for i in 0..self.created.len() {
            let id = self.created[i];
            let r = &mut self.recs[id as usize];
            if r.count >= 2 {
                let len = r.end;
                if len <= hole_end - hole {
                    r.head = hole;
                    hole += len;
                } else {
                    r.head = total;
                    total += len;
                }
                r.end = r.head;
            } else {
                self.release_rec(id);
            }
        }
        self.alen = total as usize;
        self.arena.prefault(self.alen);
        for &(id, pos) in &self.buf {
            let r = &mut self.recs[id as usize];
            // Released records (count < 2) are free slots: `a == NONE`; a slot freed
            // this pass is never reused before this point.
            if r.a != NONE {
                let at = r.end as usize;
                r.end += 1;
                self.arena.set(at, pos);
            }
        }
        for &id in &self.created {
            let r = &self.recs[id as usize];
            if r.a != NONE {
                // The first entry may be dead (a transient (c, a)); an earlier position
                // only makes the key an upper bound, which `pick` corrects.
                let first = self.arena.get(r.head as usize);
                self.heap.push((r.count, Reverse(first), id));
            }
        }
        self.created.clear();
        self.buf.clear();
        for &x in &self.touched_left {
            self.left_new[x as usize] = UNSET;
        }
        for &y in &self.touched_right {
            self.right_new[y as usize] = UNSET;
        }
        self.touched_left.clear();
        self.touched_right.clear();
    }

    /// Merges the leftmost pair of the sequence; used once every pair has count 1 (then no
    /// pair is tracked, and every pair a merge creates has count 1 too).
    fn merge_leftmost(&mut self) -> Option<Merge> {
        let n = self.n;
        let mut p = self.cursor;
        loop {
            if p >= n {
                self.cursor = p;
                return None;
            }
            if self.tok(p) == self.sep {
                p += 1;
                continue;
            }
            let r = self.next(p);
            if r < n && self.tok(r) != self.sep {
                break;
            }
            p = r;
        }
        self.cursor = p;
        let r = self.next(p);
        let s = self.next(r);
        let (a, b) = (self.tok(p), self.tok(r));
        let c = self.next_id;
        self.next_id += 1;
        let count = self.weights.at(p);
        self.set_tok(p, c);
        self.delete(p, r, s);
        Some(Merge {
            pair: (a, b),
            id: c,
            count,
        })
    }
}
