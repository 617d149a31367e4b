//! The incremental merge engine: one implementation for every input, generic over the
//! slot layout (`slots`) and the occurrence weights.
//!
//! # Data
//! - The slots: per position its token and a link to the record of the pair starting
//!   there (see `slots` for the layouts and the gap-encoded deletions).
//! - One record per *tracked* pair (weighted count >= 2): the pair, its exact count and
//!   its occurrence list `arena[head..end]` in position order. A list entry `p` is live iff
//!   the pair at `p` is still the record's pair; dead entries are skipped lazily (a
//!   position's token only grows and its successor only changes with it, so a dead entry
//!   never comes back to life). A record whose count falls below 2 is released at once;
//!   pairs are never re-created, so a stale link to a reused record never matches its pair.
//! - The queue (`queue`), keyed by (count, first live position).
//! - Pairs of weighted count 1 are not tracked: counts never grow after a pair's creating
//!   pass, so such a pair is chosen only when every pair has count 1, and then the tie rule
//!   picks the leftmost pair of the sequence, which a cursor finds.
//!
//! # A merge pass
//! Walks the merged pair's list left to right, merging each live occurrence, taking one
//! occurrence from each old neighbour pair and adding the new neighbour pairs `(x, c)` and
//! `(c, y)`, counted in the pass's small table ([`NewPair`], first-level cache) and linked
//! from their slots at once. A `(c, a)` made by one occurrence and undone by the next (runs
//! like `aaaa`) is taken back from the pass buffer, so every buffered occurrence is live
//! when the pass ends. Then the new pairs of count >= 2 get records and lists: first in the
//! range the merged list leaves free, then at the arena's end.
//!
//! # Bounds
//! - Records held at once: fewer than `2 n + 2` (each old record has a live occurrence at
//!   its own position; a pass adds at most two new records per merged occurrence, and
//!   merged occurrences are at most `n / 2`); [`Packed`](super::slots::Packed) relies on it.
//! - Arena: the initial lists hold at most `n - 1` entries and all passes add at most
//!   `2 (n - 1)`, so `3 n + 1` words always do. Live entries never exceed the live
//!   positions, so an arena of any capacity from `n + 1` works: when a pass's lists do not
//!   fit, [`Engine::collect`] slides the live entries to the front first.
//!
//! # Kept decisions
//! - Record links in the slots instead of a pair -> record hash map: the link is in the
//!   cache line the merge already reads.
//! - All lists in one arena, each written once: a `Vec` per pair cost a malloc and a free
//!   each (27 MB: 4.63 -> 4.05 s).
//! - New pairs' counts and list cursors in the pass's table, not in their records: in
//!   process 3.39-3.42 -> 2.89-3.15 ms per taylorswift.txt call.
//! - The merge loop reads the slots of [`BATCH`] list entries in a tight loop before
//!   merging them, so their cache misses overlap (27 MB: merge phase 6.65 -> 5.45 s).
//! - Passes over lists of at least an eighth of the input buffer positions only and find
//!   each new occurrence's pair in the slots afterwards: 4 bytes per new occurrence, not 8
//!   (50 MB of one letter: peak 836 -> 763 MB, input included).
//! - Inputs from [`LARGE`] positions set up on two threads (27 MB: 0.72 -> 0.44 s) and
//!   queue counts in buckets; shorter ones count in the arena's free space on one thread
//!   (no thread, no pair tables to fault in).

use super::queue::{key, PairQueue, BUCKETS};
use super::slots::{Block, Layout, NONE, PAIRS};
use crate::parallel::both;
use std::hint::select_unpredictable;

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

/// From this many positions an input is large: two-thread set-up and bucket queue. Below
/// it one thread's set-up is cheaper than a thread and two fresh pair tables.
const LARGE: usize = 1 << 20;
/// How many list entries the merge loop touches before merging them.
const BATCH: usize = 32;
/// A pass-table entry not in use.
const UNSET: u32 = u32::MAX - 1;
/// The arena's first word is never read: dropped pairs' occurrences are written there, so
/// the loop that fills the new lists needs no branch.
const SCRATCH: u32 = 0;

/// The tokens of the training sequence: bytes, and [`super::slots::SEP`] between chunks.
pub(crate) trait Tokens: Sync {
    /// The tokens from position `p` to the end.
    fn from(&self, p: usize) -> impl Iterator<Item = u32> + '_;
}

/// The weight of the occurrence of a pair starting at a position.
pub(crate) trait Weights: Sync {
    /// Every position has the same weight.
    const UNIFORM: bool;
    fn at(&self, p: u32) -> u64;
}

/// Every occurrence has the same weight (1 for `--split none`).
pub(crate) struct Uniform(pub(crate) u64);

impl Weights for Uniform {
    const UNIFORM: bool = true;
    #[inline(always)]
    fn at(&self, _p: u32) -> u64 {
        self.0
    }
}

/// Each position carries its chunk's weight.
pub(crate) struct PerPos(pub(crate) Vec<u64>);

impl Weights for PerPos {
    const UNIFORM: bool = false;
    #[inline(always)]
    fn at(&self, p: u32) -> u64 {
        self.0[p as usize]
    }
}

/// How a run is set up and kept.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// Set up by counting shards and queue counts in buckets (see [`LARGE`]).
    pub(crate) large: bool,
    /// With `large`: the second shard on a second thread.
    pub(crate) two_threads: bool,
    /// Passes over lists at least this long buffer positions only.
    pub(crate) lean_min: u32,
    /// Arena words (at least `n + 1`); a pass whose lists do not fit collects it first.
    pub(crate) arena_cap: usize,
}

impl Plan {
    /// What an input of `n` positions gets by default.
    pub(crate) fn auto(n: usize, threads: usize) -> Plan {
        let large = n >= LARGE;
        Plan {
            large,
            two_threads: large && threads > 1,
            // Passes below an eighth of the input buffer at most 2 n bytes; small inputs
            // never need the lean passes.
            lean_min: (n / 8).max(1 << 16) as u32,
            arena_cap: (3 * n + 1).min(u32::MAX as usize),
        }
    }
}

/// A tracked pair, its list `arena[head..end]`. Free: `a == NONE`. While its creating
/// pass runs, count and list are unset (0): the pass's [`NewPair`] counts them.
struct Rec {
    a: u32,
    b: u32,
    count: u64,
    head: u32,
    end: u32,
}

/// The records and the free list of released record slots.
struct Recs {
    recs: Vec<Rec>,
    free: Vec<u32>,
}

impl Recs {
    #[inline(always)]
    fn alloc(&mut self, rec: Rec) -> u32 {
        if let Some(id) = self.free.pop() {
            self.recs[id as usize] = rec;
            id
        } else {
            self.recs.push(rec);
            (self.recs.len() - 1) as u32
        }
    }

    #[inline(always)]
    fn release(&mut self, id: u32) {
        let r = &mut self.recs[id as usize];
        r.a = NONE;
        r.b = NONE;
        r.count = 0;
        self.free.push(id);
    }

    /// Subtracts one occurrence of weight `w` from record `id` if it is `(a, b)`'s record
    /// (the position's link may be stale or "no record": then the pair is untracked).
    #[inline(always)]
    fn dec_old(&mut self, id: u32, a: u32, b: u32, w: u64) {
        // "No record" is never a record id: the bounds check rejects it.
        let Some(r) = self.recs.get_mut(id as usize) else {
            return;
        };
        if r.a != a || r.b != b {
            return;
        }
        r.count -= w;
        if r.count < 2 {
            self.release(id);
        }
    }
}

/// A pair the current pass creates: its record, its count and occurrences so far; while
/// the lists are filled, the next free entry of its list (or the scratch word, `step` 0).
#[derive(Clone, Copy)]
struct NewPair {
    id: u32,
    len: u32,
    count: u64,
    at: u32,
    step: u32,
}

const NO_NEW_PAIR: NewPair = NewPair {
    id: UNSET,
    len: 0,
    count: 0,
    at: NONE,
    step: 0,
};

/// The current pass's new pairs and their occurrences.
struct Pass {
    /// The new pair `(x, c)` at `2 x`, the new pair `(c, y)` at `2 y + 1`.
    new: Vec<NewPair>,
    /// Entries of `new` in use, in creation order.
    touched: Vec<u32>,
    /// (entry of `new`, position) of every new occurrence, in position order.
    buf: Vec<(u32, u32)>,
    /// A lean pass's new occurrences: positions only.
    lean: Vec<u32>,
}

impl Pass {
    /// Adds an occurrence of weight `w` at `pos` of the new pair `(a, b)`: `(x, c)` when
    /// `left` (`key` is x), `(c, y)` otherwise (`key` is y). Returns its record.
    #[inline(always)]
    fn add<const LEAN: bool>(
        &mut self,
        recs: &mut Recs,
        left: bool,
        key: u32,
        pair: (u32, u32),
        pos: u32,
        w: u64,
    ) -> u32 {
        let entry = 2 * key + u32::from(!left);
        let new = &mut self.new[entry as usize];
        if new.id == UNSET {
            new.id = recs.alloc(Rec {
                a: pair.0,
                b: pair.1,
                count: 0,
                head: 0,
                end: 0,
            });
            self.touched.push(entry);
        }
        new.count += w;
        new.len += 1;
        if LEAN {
            self.lean.push(pos);
        } else {
            self.buf.push((entry, pos));
        }
        new.id
    }

    /// Takes back the last occurrence added, the pair `(c, a)` that the merge now at its
    /// right has just undone.
    #[inline(always)]
    fn undo_last<const LEAN: bool>(&mut self, a: u32, w: u64) {
        let new = &mut self.new[2 * a as usize + 1];
        new.count -= w;
        new.len -= 1;
        if LEAN {
            self.lean.pop();
        } else {
            self.buf.pop();
        }
    }
}

/// Loads the slots of a batch of list entries in a tight loop of independent loads, so
/// that their cache misses overlap; met one by one in the merge loop, each would stall it
/// (safe Rust has no prefetch instruction).
#[inline(always)]
fn touch<L: Layout>(slots: &[L::Slot], batch: &[u32]) {
    let mut sink = 0u32;
    for &p in batch {
        sink = sink.wrapping_add(L::word(slots[p as usize]));
    }
    std::hint::black_box(sink);
}

pub(crate) struct Engine<L: Layout, W: Weights> {
    lay: L,
    /// Slots and arena.
    block: Block<L::Slot>,
    weights: W,
    recs: Recs,
    /// Arena words in use at the front.
    alen: u32,
    arena_cap: u32,
    queue: PairQueue,
    next_id: u32,
    /// Leftmost position that may start a pair, for the all-counts-are-1 phase.
    cursor: u32,
    pass: Pass,
    lean_min: u32,
}

impl<L: Layout, W: Weights> Engine<L, W> {
    /// An engine over the `lay.n()` tokens of `tokens`, set up as `plan` says.
    pub(crate) fn new(lay: L, tokens: &impl Tokens, weights: W, plan: Plan) -> Engine<L, W> {
        let n = lay.n() as usize;
        let arena_cap = plan.arena_cap.clamp(n + 1, u32::MAX as usize);
        // Room for what a run usually needs, reserved up front: growing a vector copies it
        // into fresh pages, each a fault, while reserved pages are only faulted in when
        // written (taylorswift.txt: 304 -> 253 faults, 6.1 -> 5.9 ms).
        let reserve = n.min(1 << 20);
        let mut e = Engine {
            lay,
            block: Block::new(n, arena_cap),
            weights,
            recs: Recs {
                recs: Vec::with_capacity(reserve),
                free: Vec::new(),
            },
            alen: SCRATCH + 1,
            arena_cap: arena_cap as u32,
            queue: PairQueue::new(0, 0),
            next_id: 256,
            cursor: 0,
            pass: Pass {
                new: vec![NO_NEW_PAIR; 512],
                touched: Vec::new(),
                buf: Vec::with_capacity((n / 2 + 1).min(2 * plan.lean_min as usize)),
                lean: Vec::new(),
            },
            lean_min: plan.lean_min,
        };
        if plan.large {
            e.setup_sharded(tokens, plan.two_threads);
        } else {
            e.setup_serial(tokens, reserve);
        }
        e
    }

    /// Fills the slots, counts all byte pairs and builds the tracked records, their lists
    /// (a counting sort of the positions by pair) and the queue, on one thread.
    ///
    /// The pair table lives in the arena after the `n` entries the initial lists can
    /// fill: the arena is written before it is read beyond its used front, so the table
    /// is free space once counting is done (taylorswift.txt: one huge page instead of
    /// two, 5.9-6.2 -> 5.5-5.7 ms). Both passes read the tokens, not the slots (6.8 ->
    /// 6.0 ms).
    fn setup_serial(&mut self, tokens: &impl Tokens, reserve: usize) {
        // Two words per byte pair: its occurrences, which become `FLAG | record` when its
        // first position is met in the second pass, and then the next free entry of its
        // list. Only the entries of pairs that occur are touched: a sweep of the whole
        // table cost most of a run on a tiny input.
        const FLAG: u32 = 1 << 31;
        let lay = self.lay;
        let n = lay.n() as usize;
        let (slots, arena) = self.block.parts();
        let (lists, table) = arena.split_at_mut(n + 1);
        let occ = &mut table[..2 * PAIRS];
        let mut wsum = if W::UNIFORM {
            Vec::new()
        } else {
            vec![0u64; PAIRS]
        };
        let mut it = tokens.from(0);
        let Some(mut x) = it.next() else {
            return;
        };
        let mut pairs = 0usize;
        for (p, y) in it.enumerate() {
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                occ[2 * k] += 1;
                pairs += 1;
                if !W::UNIFORM {
                    wsum[k] += self.weights.at(p as u32);
                }
            }
            x = y;
        }
        let lists = &mut lists[..pairs + 1];
        let recs = &mut self.recs;
        let mut total = SCRATCH + 1;
        let mut it = tokens.from(0);
        let Some(mut x) = it.next() else {
            return;
        };
        for (p, y) in it.enumerate() {
            let mut id = NONE;
            if x < 256 && y < 256 {
                let k = ((x << 8) | y) as usize;
                let v = occ[2 * k];
                if v & FLAG != 0 {
                    id = v & !FLAG;
                    let at = occ[2 * k + 1];
                    lists[at as usize] = p as u32;
                    occ[2 * k + 1] = at + 1;
                } else {
                    let count = if W::UNIFORM {
                        u64::from(v) * self.weights.at(0)
                    } else {
                        wsum[k]
                    };
                    if count >= 2 {
                        id = recs.alloc(Rec {
                            a: x,
                            b: y,
                            count,
                            head: total,
                            end: total + v,
                        });
                        lists[total as usize] = p as u32;
                        occ[2 * k] = FLAG | id;
                        occ[2 * k + 1] = total + 1;
                        total += v;
                    }
                }
            }
            slots[p] = lay.live(lay.input(x), id);
            x = y;
        }
        slots[n - 1] = lay.live(lay.input(x), NONE);
        self.alen = total;
        let mut keys = Vec::with_capacity(reserve);
        keys.extend(
            recs.recs
                .iter()
                .enumerate()
                .map(|(id, r)| key(r.count, arena[r.head as usize], id as u32)),
        );
        self.queue = PairQueue::from_heap_entries(keys);
    }

    /// [`Engine::setup_serial`]'s work for a large input: the text cut in two shards that
    /// both cores count and then fill (the fill writes fresh memory, and on a virtual
    /// machine first touches are costly), records and lists laid out in pair order.
    fn setup_sharded(&mut self, tokens: &impl Tokens, two_threads: bool) {
        self.queue = PairQueue::new(BUCKETS, 0);
        let lay = self.lay;
        let n = lay.n();
        if n == 0 {
            return;
        }
        // Shard `i` owns slots `bounds[i]..bounds[i + 1]` and the pairs starting there.
        let mid = if two_threads { n / 2 } else { n };
        let bounds = [0, mid, n];
        let weights = &self.weights;
        let count_shard = |i: usize| {
            let (lo, hi) = (bounds[i], bounds[i + 1].min(n - 1));
            let mut counts = vec![0u64; PAIRS];
            let mut lives = vec![0u32; PAIRS];
            if lo < hi {
                let mut it = tokens.from(lo as usize);
                let mut x = it.next().unwrap_or(NONE);
                for (p, y) in (lo..hi).zip(it) {
                    if x < 256 && y < 256 {
                        let k = ((x << 8) | y) as usize;
                        counts[k] += weights.at(p);
                        lives[k] += 1;
                    }
                    x = y;
                }
            }
            (counts, lives)
        };
        let ((counts, lives0), (counts1, lives1)) =
            both(mid < n, || count_shard(0), || count_shard(1));
        // Byte pairs of count >= 2 become records 0, 1, ... in pair order, their lists
        // laid out in the arena in the same order.
        let mut rec_of = vec![NONE; PAIRS];
        let mut total = SCRATCH + 1;
        for k in 0..PAIRS {
            let count = counts[k] + counts1[k];
            if count >= 2 {
                let live = lives0[k] + lives1[k];
                rec_of[k] = self.recs.alloc(Rec {
                    a: (k >> 8) as u32,
                    b: (k & 255) as u32,
                    count,
                    head: total,
                    end: total + live,
                });
                total += live;
            }
        }
        self.alen = total;
        let (slots, arena) = self.block.parts();
        // Each shard fills its slots and its part of every list (the first shard's
        // entries come first, so lists stay in position order).
        let recs = &self.recs.recs;
        let mut firsts: Vec<&mut [u32]> = Vec::with_capacity(recs.len());
        let mut seconds: Vec<&mut [u32]> = Vec::with_capacity(recs.len());
        let mut rest = &mut arena[(SCRATCH + 1) as usize..total as usize];
        for r in recs {
            let (list, after) = rest.split_at_mut((r.end - r.head) as usize);
            let k = ((r.a << 8) | r.b) as usize;
            let (first, second) = list.split_at_mut(lives0[k] as usize);
            firsts.push(first);
            seconds.push(second);
            rest = after;
        }
        let (slots0, slots1) = slots.split_at_mut(mid as usize);
        let rec_of = &rec_of;
        let fill_shard = |slots: &mut [L::Slot], lists: &mut [&mut [u32]], i: usize| {
            let lo = bounds[i];
            let mut at = vec![0u32; lists.len()];
            let mut it = tokens.from(lo as usize);
            let mut x = it.next().unwrap_or(NONE);
            for (p, slot) in (lo..).zip(slots.iter_mut()) {
                let y = if p + 1 < n {
                    it.next().unwrap_or(NONE)
                } else {
                    NONE
                };
                let id = if x < 256 && y < 256 {
                    rec_of[((x << 8) | y) as usize]
                } else {
                    NONE
                };
                *slot = lay.live(lay.input(x), id);
                if id != NONE {
                    let at = &mut at[id as usize];
                    lists[id as usize][*at as usize] = p;
                    *at += 1;
                }
                x = y;
            }
        };
        both(
            mid < n,
            || fill_shard(slots0, &mut firsts, 0),
            || fill_shard(slots1, &mut seconds, 1),
        );
        for (id, r) in self.recs.recs.iter().enumerate() {
            self.queue.push(r.count, arena[r.head as usize], id as u32);
        }
    }

    /// Learns up to `num_merges` merges, calling `on_merge` after each.
    pub(crate) fn run(mut self, num_merges: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
        let mut merges = Vec::with_capacity(num_merges.min(self.lay.n() as usize));
        while merges.len() < num_merges {
            let m = match self.pick() {
                Some(id) => {
                    let r = &self.recs.recs[id as usize];
                    if r.end - r.head >= self.lean_min {
                        self.merge_pass::<true>(id)
                    } else {
                        self.merge_pass::<false>(id)
                    }
                }
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

    /// Advances the record's head to its first live entry and returns that position.
    fn first_live(&mut self, id: u32) -> Option<u32> {
        let lay = self.lay;
        let r = &self.recs.recs[id as usize];
        let (a, b, end) = (r.a, r.b, r.end as usize);
        let mut h = r.head as usize;
        let (slots, arena) = self.block.parts();
        while h < end && !lay.occurs(slots, arena[h], a, b) {
            h += 1;
        }
        self.recs.recs[id as usize].head = h as u32;
        arena[..end].get(h).copied()
    }

    /// Pops the queue until its top is current; that record is the pair to merge.
    fn pick(&mut self) -> Option<u32> {
        let mut queue = std::mem::replace(&mut self.queue, PairQueue::new(0, 0));
        let id = queue.pick_current(|id| {
            let count = self.recs.recs[id as usize].count;
            if count < 2 {
                return None;
            }
            Some((count, self.first_live(id)?))
        });
        self.queue = queue;
        id
    }

    /// Merges every occurrence of tracked pair `id`, left to right, updating neighbours.
    fn merge_pass<const LEAN: bool>(&mut self, id: u32) -> Merge {
        let (a, b, count, head, end) = {
            let r = &self.recs.recs[id as usize];
            (r.a, r.b, r.count, r.head as usize, r.end as usize)
        };
        let c = self.next_id;
        self.next_id += 1;
        self.pass
            .new
            .resize(2 * (self.next_id as usize + 1), NO_NEW_PAIR);
        let lay = self.lay;
        let n = lay.n();
        let sep = lay.sep();
        // Local borrows of disjoint fields: the loop keeps the slices in registers
        // instead of reloading them through `self` after every store (5.9 -> 5.7 ms).
        let (slots, arena) = self.block.parts();
        let recs = &mut self.recs;
        let pass = &mut self.pass;
        let weights = &self.weights;
        for batch in arena[head..end].chunks(BATCH) {
            touch::<L>(slots, batch);
            for &p in batch {
                let vp = slots[p as usize];
                if lay.tok(vp) != a {
                    continue;
                }
                let r = lay.next(slots, p);
                if r >= n {
                    continue;
                }
                let vr = slots[r as usize];
                if lay.tok(vr) != b {
                    continue;
                }
                let w = weights.at(p);
                let s = lay.next(slots, r);
                let l = lay.prev(slots, p);
                if l != NONE {
                    let vl = slots[l as usize];
                    let x = lay.tok(vl);
                    if x != sep {
                        if x == c {
                            // The previous occurrence made (c, a) at `l`; it is (c, c) now.
                            pass.undo_last::<LEAN>(a, w);
                        } else {
                            let rec_l = lay.rec(vl);
                            if rec_l != id {
                                recs.dec_old(rec_l, x, a, w);
                            }
                        }
                        let nid = pass.add::<LEAN>(recs, true, x, (x, c), l, w);
                        slots[l as usize] = lay.with_rec(vl, nid);
                    }
                }
                // `c` at `p`, linked to the new pair it starts, if any: one store.
                let mut merged = lay.live(c, NONE);
                if s < n {
                    let y = lay.tok(slots[s as usize]);
                    if y != sep {
                        let rec_r = lay.rec(vr);
                        if rec_r != id {
                            recs.dec_old(rec_r, b, y, w);
                        }
                        merged = lay.live(c, pass.add::<LEAN>(recs, false, y, (c, y), p, w));
                    }
                }
                slots[p as usize] = merged;
                lay.delete(slots, p, r, s);
            }
        }
        self.recs.release(id);
        self.finish_pass::<LEAN>(head as u32, end as u32, c);
        Merge {
            pair: (a, b),
            id: c,
            count,
        }
    }

    /// Turns the pass's new pairs into records with lists (count >= 2) or frees them.
    /// The merged pair's list `arena[hole..hole_end]` is free space for the new lists.
    fn finish_pass<const LEAN: bool>(&mut self, mut hole: u32, mut hole_end: u32, c: u32) {
        let kept: u64 = self
            .pass
            .touched
            .iter()
            .map(|&e| &self.pass.new[e as usize])
            .filter(|new| new.count >= 2)
            .map(|new| u64::from(new.len))
            .sum();
        if u64::from(self.alen) + kept > u64::from(self.arena_cap) {
            self.collect();
            hole_end = hole;
        }
        let mut total = self.alen;
        let recs = &mut self.recs;
        let pass = &mut self.pass;
        // Which pairs reach a count of 2, and which lists fit the hole, is data: the
        // branches that are left are taken once per new pair, the filling loop has none
        // (in process 2.81 -> 2.69 ms).
        for &entry in &pass.touched {
            let new = &mut pass.new[entry as usize];
            if new.count >= 2 {
                let fits = new.len <= hole_end - hole;
                let head = select_unpredictable(fits, hole, total);
                hole += new.len * u32::from(fits);
                total += new.len * u32::from(!fits);
                let r = &mut recs.recs[new.id as usize];
                r.count = new.count;
                r.head = head;
                r.end = head + new.len;
                new.at = head;
                new.step = 1;
            } else {
                recs.release(new.id);
                new.at = SCRATCH;
            }
        }
        self.alen = total;
        let lay = self.lay;
        let (slots, arena) = self.block.parts();
        if LEAN {
            // The pair at each position is the one added there (see the module doc).
            for &pos in &pass.lean {
                let t = lay.tok(slots[pos as usize]);
                let entry = if t != c {
                    2 * t
                } else {
                    let u = lay.tok(slots[lay.next(slots, pos) as usize]);
                    select_unpredictable(u == c, 2 * c, 2 * u + 1)
                };
                let new = &mut pass.new[entry as usize];
                arena[new.at as usize] = pos;
                new.at += new.step;
            }
        } else {
            for &(entry, pos) in &pass.buf {
                let new = &mut pass.new[entry as usize];
                arena[new.at as usize] = pos;
                new.at += new.step;
            }
        }
        for &entry in &pass.touched {
            let new = &mut pass.new[entry as usize];
            if new.step != 0 {
                let head = new.at - new.len;
                self.queue.push(new.count, arena[head as usize], new.id);
            }
            *new = NO_NEW_PAIR;
        }
        pass.touched.clear();
        pass.buf.clear();
        pass.lean.clear();
    }

    /// Slides every live list entry to the front of the arena, list by list in arena
    /// order, so that the arena holds at most one entry per live position.
    #[cold]
    fn collect(&mut self) {
        let mut order: Vec<(u32, u32)> = (self.recs.recs.iter().enumerate())
            .filter(|(_, r)| r.a != NONE && r.head < r.end)
            .map(|(id, r)| (r.head, id as u32))
            .collect();
        order.sort_unstable();
        let lay = self.lay;
        let (slots, arena) = self.block.parts();
        let mut w = SCRATCH + 1;
        for (head, id) in order {
            let r = &mut self.recs.recs[id as usize];
            let start = w;
            for i in head..r.end {
                let p = arena[i as usize];
                if lay.occurs(slots, p, r.a, r.b) {
                    arena[w as usize] = p;
                    w += 1;
                }
            }
            r.head = start;
            r.end = w;
        }
        self.alen = w;
    }

    /// Merges the leftmost pair of the sequence; used once every pair has count 1 (then no
    /// pair is tracked, and every pair a merge creates has count 1 too).
    fn merge_leftmost(&mut self) -> Option<Merge> {
        let lay = self.lay;
        let (n, sep) = (lay.n(), lay.sep());
        let (slots, _) = self.block.parts();
        let tok = |slots: &[L::Slot], p: u32| lay.tok(slots[p as usize]);
        let mut p = self.cursor;
        loop {
            if p >= n {
                self.cursor = p;
                return None;
            }
            if tok(slots, p) == sep {
                p += 1;
                continue;
            }
            let r = lay.next(slots, p);
            if r < n && tok(slots, r) != sep {
                break;
            }
            p = r;
        }
        self.cursor = p;
        let r = lay.next(slots, p);
        let s = lay.next(slots, r);
        let (a, b) = (tok(slots, p), tok(slots, r));
        let c = self.next_id;
        self.next_id += 1;
        let count = self.weights.at(p);
        slots[p as usize] = lay.with_tok(slots[p as usize], c);
        lay.delete(slots, p, r, s);
        Some(Merge {
            pair: (a, b),
            id: c,
            count,
        })
    }
}
