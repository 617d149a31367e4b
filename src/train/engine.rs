//! The incremental merge engine shared by both training modes (see the module doc of
//! `train` for the data structures and why they are exact).

use super::queue::{CountQueue, PairQueue};
use super::slots::{SlotRange, Slots};
use super::Merge;
use crate::parallel::both;
use std::hint::select_unpredictable;

/// Flag of a deleted slot's token.
pub(super) const DEL: u32 = 1 << 31;
/// Token of the separator slot between chunks; never part of a pair.
pub(super) const SEP: u32 = DEL - 1;
/// "No position / no record" marker.
pub(super) const NONE: u32 = u32::MAX;
/// How many list entries the merge loop touches before merging them (see `touch`).
const BATCH: usize = 32;
/// Per-merge cache slot not filled yet.
const UNSET: u32 = u32::MAX - 1;

/// The live position after live position `p` in a sequence of `n` slots, or `n`.
/// `slot(q)` is slot `q`'s token word: a token, or [`DEL`] and a position for a deleted
/// slot (both engines keep deleted runs this way; see [`delete_run`]).
#[inline(always)]
pub(super) fn next_live(p: u32, n: u32, slot: impl Fn(u32) -> u32) -> u32 {
    let q = p + 1;
    if q >= n {
        return n;
    }
    let t = slot(q);
    select_unpredictable(t & DEL != 0, t & !DEL, q)
}

/// The live position before live position `p`, or `NONE` (see [`next_live`]).
#[inline(always)]
pub(super) fn prev_live(p: u32, slot: impl Fn(u32) -> u32) -> u32 {
    if p == 0 {
        return NONE;
    }
    let q = p - 1;
    let t = slot(q);
    // Whether `q` is deleted is data the branch predictor cannot learn (a merge loop
    // meets both about equally often), so both answers are computed and one selected.
    let v = t & !DEL;
    // A run of one deleted slot stores the position after it (== p).
    let run_start = select_unpredictable(v < q, v, q.wrapping_sub(1));
    select_unpredictable(t & DEL != 0, run_start, q)
}

/// Deletes live slot `r`, the right half of a merge at `p`, `s` being the live slot
/// after it, by writing token words through `set`: the deleted run becomes `p+1..s`, and
/// its two ends record `s` and `p`, so that [`next_live`] and [`prev_live`] jump it.
#[inline(always)]
pub(super) fn delete_run(p: u32, r: u32, s: u32, mut set: impl FnMut(u32, u32)) {
    // `r` may end up inside the run, where nothing else would overwrite its token, and
    // a stale token there would make a dead list entry look live.
    set(r, DEL);
    // Both ends are written, the right one first: in a run of one slot the left end's
    // `s` stays (see `prev_live`). Whether the run is one slot long is data, and a
    // branch on it was mispredicted about as often as taken.
    set(s - 1, DEL | p);
    set(p + 1, DEL | s);
}

/// The weight of the occurrence of a pair starting at a position.
pub(super) trait Weights: Sync {
    /// Every weight is 1 (so a weighted count is an occurrence count).
    const UNIT: bool = false;
    fn at(&self, p: u32) -> u64;
}

/// Every occurrence counts once (`--split none`).
pub(super) struct Unit;
impl Weights for Unit {
    const UNIT: bool = true;
    #[inline(always)]
    fn at(&self, _p: u32) -> u64 {
        1
    }
}

/// Each position carries its chunk's occurrence count.
pub(super) struct PerPos(pub(super) Vec<u64>);
impl Weights for PerPos {
    #[inline(always)]
    fn at(&self, p: u32) -> u64 {
        self.0[p as usize]
    }
}

/// A tracked pair (weighted count >= 2). A free slot has `a == b == NONE`.
struct Rec {
    a: u32,
    b: u32,
    count: u64,
    /// Live occurrences (== count without weights); decides when to compact the list.
    live: u32,
    /// Entries before `head` are known dead.
    head: u32,
    touched: bool,
    /// The occurrence list: `pool[start..start + len]`, in position order.
    start: usize,
    len: u32,
}

impl Rec {
    /// A record for `(a, b)` with no list yet.
    fn new(a: u32, b: u32, count: u64, live: u32) -> Rec {
        Rec {
            a,
            b,
            count,
            live,
            head: 0,
            touched: false,
            start: 0,
            len: 0,
        }
    }
}

/// A pair created during the current merge pass; its final count is known at the end.
/// Its record slot is taken at once, so positions can link to it while they are hot.
struct Local {
    id: u32,
    count: u64,
    live: u32,
    entries: u32,
}

pub(super) struct Engine<W: Weights> {
    slots: Slots,
    n: u32,
    weights: W,
    recs: Vec<Rec>,
    free: Vec<u32>,
    queue: CountQueue,
    next_id: u32,
    /// Leftmost position that may start a pair, for the all-counts-are-1 phase.
    cursor: u32,
    // Per-merge scratch: new pairs (x, c) by x and (c, y) by y; reset via `touched_*`.
    left_new: Vec<u32>,
    right_new: Vec<u32>,
    touched_left: Vec<u32>,
    touched_right: Vec<u32>,
    touched_recs: Vec<u32>,
    locals: Vec<Local>,
    buf: Vec<(u32, u32)>,
    /// Every record's occurrence list, end to end; lists that die leave holes (`dead`
    /// entries in all) until [`Engine::collect_pool`] slides the live ones together. One
    /// array instead of a vector per pair: a long run creates over a million short lists,
    /// and their allocations and frees cost a fifth of its later merges.
    pool: Vec<u32>,
    dead: usize,
}

impl<W: Weights> Engine<W> {
    /// An engine over the `n` tokens (bytes and [`SEP`]) that `tok_at` gives by position;
    /// its set-up uses a second thread if `threads > 1`.
    pub(super) fn new(
        n: u32,
        tok_at: impl Fn(u32) -> u32 + Sync,
        weights: W,
        threads: usize,
    ) -> Engine<W> {
        let mut e = Engine {
            slots: Slots::new(n as usize),
            n,
            weights,
            recs: Vec::new(),
            free: Vec::new(),
            queue: CountQueue::new(),
            next_id: 256,
            cursor: 0,
            left_new: vec![UNSET; 256],
            right_new: vec![UNSET; 256],
            touched_left: Vec::new(),
            touched_right: Vec::new(),
            touched_recs: Vec::new(),
            locals: Vec::new(),
            buf: Vec::new(),
            pool: Vec::new(),
            dead: 0,
        };
        e.initial_fill(&tok_at, threads > 1);
        e
    }

    /// The live position after live position `p`, or `n`.
    #[inline(always)]
    fn next(&self, p: u32) -> u32 {
        next_live(p, self.n, |q| self.slots.tok(q))
    }

    /// The live position before live position `p`, or `NONE`.
    #[inline(always)]
    fn prev(&self, p: u32) -> u32 {
        prev_live(p, |q| self.slots.tok(q))
    }

    /// Whether `(a, b)` currently occurs at `p` (`p` may be a dead entry).
    #[inline(always)]
    fn occurs(&self, p: u32, a: u32, b: u32) -> bool {
        if self.slots.tok(p) != a {
            return false;
        }
        let q = self.next(p);
        q < self.n && self.slots.tok(q) == b
    }

    /// Deletes live slot `r`, the right half of a merge at `p`; `s` is the live slot after
    /// it.
    #[inline(always)]
    fn delete(&mut self, p: u32, r: u32, s: u32) {
        delete_run(p, r, s, |q, v| self.slots.set_tok(q, v));
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
        r.live = 0;
        self.dead += r.len as usize;
        r.len = 0;
        self.free.push(id);
    }

    /// Advances the record's head to its first live entry and returns that position.
    fn first_live(&mut self, id: u32) -> u32 {
        let r = &self.recs[id as usize];
        let (a, b) = (r.a, r.b);
        let list = &self.pool[r.start..r.start + r.len as usize];
        let mut h = r.head as usize;
        while h < list.len() && !self.occurs(list[h], a, b) {
            h += 1;
        }
        let first = list.get(h).copied().unwrap_or(NONE);
        self.recs[id as usize].head = h as u32;
        first
    }

    /// Fills the slots with `tok_at`'s tokens, counts all byte pairs once and builds the
    /// tracked records with their lists. From 2^20 positions on, the text is cut in two
    /// shards that both cores count and then fill: the fill writes 12 fresh bytes per
    /// position, and on a virtual machine first touches of memory are costly (27 MB: the
    /// whole set-up 0.40-1.0 s on one core, the range depending on how recently the host
    /// backed the pages).
    fn initial_fill(&mut self, tok_at: &(impl Fn(u32) -> u32 + Sync), two_threads: bool) {
        let n = self.n;
        if n == 0 {
            return;
        }
        // Shard `i` owns slots `bounds[i]..bounds[i + 1]` and the pairs starting there.
        let mid = if two_threads && n >= 1 << 20 {
            n / 2
        } else {
            n
        };
        let bounds = [0, mid, n];
        let weights = &self.weights;
        let count_shard = |i: usize| {
            let (lo, hi) = (bounds[i], bounds[i + 1].min(n - 1));
            let mut counts = vec![0u64; 1 << 16];
            let mut lives = vec![0u32; 1 << 16];
            for p in lo..hi {
                let (x, y) = (tok_at(p), tok_at(p + 1));
                if x < 256 && y < 256 {
                    let k = ((x << 8) | y) as usize;
                    counts[k] += weights.at(p);
                    lives[k] += 1;
                }
            }
            (counts, lives)
        };
        let ((counts, lives0), (counts1, lives1)) =
            both(mid < n, || count_shard(0), || count_shard(1));
        // Byte pairs of count >= 2 become records 0, 1, ... in pair order, their lists
        // laid out in the pool in the same order.
        let mut rec_of = vec![NONE; 1 << 16];
        let mut total = 0usize;
        for k in 0..(1usize << 16) {
            let count = counts[k] + counts1[k];
            if count >= 2 {
                let live = lives0[k] + lives1[k];
                let mut rec = Rec::new((k >> 8) as u32, (k & 255) as u32, count, live);
                rec.start = total;
                rec.len = live;
                total += live as usize;
                rec_of[k] = self.alloc_rec(rec);
            }
        }
        self.pool = vec![0; total];
        // Each shard fills its slots and its part of every list (the first shard's
        // entries come first, so lists stay in position order).
        let mut firsts: Vec<&mut [u32]> = Vec::with_capacity(self.recs.len());
        let mut seconds: Vec<&mut [u32]> = Vec::with_capacity(self.recs.len());
        let mut rest = &mut self.pool[..];
        for r in &self.recs {
            let (list, after) = rest.split_at_mut(r.len as usize);
            let (first, second) = list.split_at_mut(lives0[((r.a << 8) | r.b) as usize] as usize);
            firsts.push(first);
            seconds.push(second);
            rest = after;
        }
        let (slots0, slots1) = self.slots.split_at_mut(mid);
        let rec_of = &rec_of;
        let fill_shard = |mut slots: SlotRange<'_>, lists: &mut [&mut [u32]], i: usize| {
            let mut at = vec![0u32; lists.len()];
            for p in bounds[i]..bounds[i + 1] {
                let x = tok_at(p);
                let y = if p + 1 < n { tok_at(p + 1) } else { NONE };
                let id = if x < 256 && y < 256 {
                    rec_of[((x << 8) | y) as usize]
                } else {
                    NONE
                };
                slots.set(p, x, id);
                if id != NONE {
                    let at = &mut at[id as usize];
                    lists[id as usize][*at as usize] = p;
                    *at += 1;
                }
            }
        };
        both(
            mid < n,
            || fill_shard(slots0, &mut firsts, 0),
            || fill_shard(slots1, &mut seconds, 1),
        );
        for (id, r) in self.recs.iter().enumerate() {
            self.queue.push(r.count, self.pool[r.start], id as u32);
        }
    }

    /// Learns up to `num_merges` merges, calling `on_merge` after each.
    pub(super) fn run(mut self, num_merges: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
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

    /// Pops the queue until its top is current; that record is the pair to merge.
    fn pick(&mut self) -> Option<u32> {
        let mut queue = std::mem::replace(&mut self.queue, CountQueue::EMPTY);
        let id = queue.pick_current(|id| {
            let count = self.recs[id as usize].count;
            (count >= 2).then(|| (count, self.first_live(id)))
        });
        self.queue = queue;
        id
    }

    fn grow_caches(&mut self) {
        let size = self.next_id as usize + 1;
        self.left_new.resize(size, UNSET);
        self.right_new.resize(size, UNSET);
    }

    /// Subtracts one occurrence of weight `w` from record `id` if it is `(a, b)`'s record
    /// (the position's record link may be stale: then the pair is untracked).
    #[inline(always)]
    fn dec_old(&mut self, id: u32, a: u32, b: u32, w: u64) {
        // `NONE` is never a record id: the bounds check rejects it.
        let Some(r) = self.recs.get_mut(id as usize) else {
            return;
        };
        if r.a != a || r.b != b {
            return;
        }
        r.count -= w;
        r.live -= 1;
        if !r.touched {
            r.touched = true;
            self.touched_recs.push(id);
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
        let mut lid = cache[slot as usize];
        if lid == UNSET {
            lid = self.locals.len() as u32;
            cache[slot as usize] = lid;
            if left_side {
                self.touched_left.push(slot);
            } else {
                self.touched_right.push(slot);
            }
            let id = self.alloc_rec(Rec::new(a, b, 0, 0));
            self.locals.push(Local {
                id,
                count: 0,
                live: 0,
                entries: 0,
            });
        }
        let l = &mut self.locals[lid as usize];
        l.count += w;
        l.live += 1;
        l.entries += 1;
        let id = l.id;
        self.buf.push((lid, pos));
        self.slots.set_rec(pos, id);
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
        // The pass writes no list, so the pool can be lent out for it.
        let pool = std::mem::take(&mut self.pool);
        let r = &self.recs[id as usize];
        let list = &pool[r.start + r.head as usize..r.start + r.len as usize];
        for batch in list.chunks(BATCH) {
            self.touch(batch);
            for &p in batch {
                self.merge_at(p, a, b, c, id);
            }
        }
        self.pool = pool;
        self.release_rec(id);
        self.finish_pass();
        Merge {
            pair: (a, b),
            id: c,
            count,
        }
    }

    /// Loads the slots of a batch of list entries in a tight loop of independent loads, so
    /// that their cache misses overlap; met one by one in the merge loop, each would stall
    /// it (safe Rust has no prefetch instruction, and a load issued a few entries ahead
    /// inside the merge loop must still retire in order: 16% slower on 27 MB). Touching the
    /// neighbours' records as well gained nothing.
    #[inline(always)]
    fn touch(&self, batch: &[u32]) {
        let mut sink = 0u32;
        for &p in batch {
            sink = sink.wrapping_add(self.slots.tok(p));
        }
        std::hint::black_box(sink);
    }

    /// Merges the occurrence of `(a, b)` (record `id`) into `c` at `p`, if it is live.
    #[inline(always)]
    fn merge_at(&mut self, p: u32, a: u32, b: u32, c: u32, id: u32) {
        let n = self.n;
        if self.slots.tok(p) != a {
            return;
        }
        let r = self.next(p);
        if r >= n {
            return;
        }
        let (tr, rec_r) = self.slots.get(r);
        if tr != b {
            return;
        }
        let w = self.weights.at(p);
        let s = self.next(r);
        let l = self.prev(p);
        if l != NONE {
            let (x, rec_l) = self.slots.get(l);
            if x != SEP {
                if x == c {
                    // (c, a) was created by the previous occurrence in this pass.
                    let lid = self.right_new[a as usize];
                    let loc = &mut self.locals[lid as usize];
                    loc.count -= w;
                    loc.live -= 1;
                } else if rec_l != id {
                    self.dec_old(rec_l, x, a, w);
                }
                self.add_new(true, x, x, c, l, w);
            }
        }
        if s < n {
            let y = self.slots.tok(s);
            if y != SEP {
                if rec_r != id {
                    self.dec_old(rec_r, b, y, w);
                }
                self.add_new(false, y, c, y, p, w);
            }
        }
        self.slots.set_tok(p, c);
        self.delete(p, r, s);
    }

    /// Settles the records a pass touched and turns its new pairs into records.
    fn finish_pass(&mut self) {
        for i in 0..self.touched_recs.len() {
            let id = self.touched_recs[i];
            let r = &mut self.recs[id as usize];
            r.touched = false;
            if r.count < 2 {
                self.release_rec(id);
            } else if (r.len - r.head) as usize > 8 * r.live as usize + 64 {
                self.compact(id);
            }
        }
        self.touched_recs.clear();

        // New lists go to the end of the pool, one after another; `entries` turns into
        // each list's fill cursor.
        let mut end = self.pool.len();
        for i in 0..self.locals.len() {
            let l = &mut self.locals[i];
            if l.count >= 2 {
                let r = &mut self.recs[l.id as usize];
                r.start = end;
                r.len = l.entries;
                end += l.entries as usize;
                l.entries = 0;
            } else {
                let id = l.id;
                self.release_rec(id);
            }
        }
        self.pool.resize(end, 0);
        for &(lid, pos) in &self.buf {
            let l = &mut self.locals[lid as usize];
            if l.count >= 2 {
                self.pool[self.recs[l.id as usize].start + l.entries as usize] = pos;
                l.entries += 1;
            }
        }
        for l in &self.locals {
            if l.count >= 2 {
                let r = &mut self.recs[l.id as usize];
                r.count = l.count;
                r.live = l.live;
                // The first entry may be dead (a transient (c, a)); an earlier position
                // only makes the key an upper bound, which `pick` corrects lazily.
                self.queue.push(l.count, self.pool[r.start], l.id);
            }
        }
        self.locals.clear();
        self.buf.clear();
        for &x in &self.touched_left {
            self.left_new[x as usize] = UNSET;
        }
        for &y in &self.touched_right {
            self.right_new[y as usize] = UNSET;
        }
        self.touched_left.clear();
        self.touched_right.clear();
        if self.dead > self.n as usize / 8 + 64 && self.dead > self.pool.len() / 2 {
            self.collect_pool();
        }
    }

    /// Slides the live lists to the front of the pool, in pool order, and drops each
    /// list's known-dead head; the pool keeps most of its memory (fresh pages are costly
    /// here).
    fn collect_pool(&mut self) {
        let mut order: Vec<(usize, u32)> = (0..self.recs.len() as u32)
            .filter(|&id| self.recs[id as usize].len > self.recs[id as usize].head)
            .map(|id| (self.recs[id as usize].start, id))
            .collect();
        order.sort_unstable();
        let mut end = 0;
        for (start, id) in order {
            let r = &mut self.recs[id as usize];
            let (from, len) = (start + r.head as usize, (r.len - r.head) as usize);
            self.pool.copy_within(from..from + len, end);
            r.start = end;
            r.len = len as u32;
            r.head = 0;
            end += len;
        }
        for r in &mut self.recs {
            if r.len == r.head {
                r.start = 0;
                r.len = 0;
                r.head = 0;
            }
        }
        self.pool.truncate(end);
        // Keep room to grow, but hand back what the early, long lists needed and the
        // later passes will not (a shrinking map is returned without a copy).
        if self.pool.capacity() > 8 * end {
            self.pool.shrink_to(2 * end);
        }
        self.dead = 0;
    }

    /// Drops the dead entries of a record's list.
    fn compact(&mut self, id: u32) {
        let mut pool = std::mem::take(&mut self.pool);
        let r = &self.recs[id as usize];
        let (a, b) = (r.a, r.b);
        let list = &mut pool[r.start..r.start + r.len as usize];
        let mut w = 0usize;
        for i in r.head as usize..list.len() {
            let p = list[i];
            if self.occurs(p, a, b) {
                list[w] = p;
                w += 1;
            }
        }
        self.pool = pool;
        let r = &mut self.recs[id as usize];
        self.dead += r.len as usize - w;
        r.len = w as u32;
        r.head = 0;
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
            if self.slots.tok(p) == SEP {
                p += 1;
                continue;
            }
            let r = self.next(p);
            if r < n && self.slots.tok(r) != SEP {
                break;
            }
            p = r;
        }
        self.cursor = p;
        let r = self.next(p);
        let s = self.next(r);
        let (a, b) = (self.slots.tok(p), self.slots.tok(r));
        let c = self.next_id;
        self.next_id += 1;
        let count = self.weights.at(p);
        self.slots.set_tok(p, c);
        self.delete(p, r, s);
        Some(Merge {
            pair: (a, b),
            id: c,
            count,
        })
    }
}
