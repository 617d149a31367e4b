//! The trainers' priority queues of pairs: largest count first, ties to the leftmost
//! first position, with entries that go stale and are corrected lazily.

use super::engine::NONE;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A queue of (count, first position, record) entries, largest count first, then
/// smallest position.
pub(super) trait PairQueue {
    fn push(&mut self, count: u64, pos: u32, id: u32);
    fn pop(&mut self) -> Option<(u64, u32, u32)>;

    /// Pops until the top entry is current and returns its record. `current(id)` gives
    /// a record's count and first live position, or `None` for a released record (count
    /// < 2). Keys of existing pairs only get worse, so a current top is the maximum; a
    /// stale one goes back with its current key.
    fn pick_current(&mut self, mut current: impl FnMut(u32) -> Option<(u64, u32)>) -> Option<u32> {
        while let Some((count, pos, id)) = self.pop() {
            let Some((cur, first)) = current(id) else {
                continue; // released slot
            };
            if first == NONE {
                continue; // impossible for a count >= 2; never loop on it
            }
            if cur == count && first == pos {
                return Some(id);
            }
            self.push(cur, first, id);
        }
        None
    }
}

/// One binary heap: the small engine's queue (a few thousand entries). An entry is one
/// 128-bit key, count, then the position's complement, then the record, so that a
/// comparison is two word compares and no branch: counts are often equal, and comparing
/// tuples field by field branched on that.
#[derive(Default)]
pub(super) struct PairHeap(BinaryHeap<u128>);

impl PairHeap {
    pub(super) const fn new() -> PairHeap {
        PairHeap(BinaryHeap::new())
    }

    /// A heap of the given entries (count, first position, record), with room for
    /// `capacity` entries in all.
    pub(super) fn from_entries(
        entries: impl Iterator<Item = (u64, u32, u32)>,
        capacity: usize,
    ) -> PairHeap {
        let mut keys = Vec::with_capacity(capacity);
        keys.extend(entries.map(|(count, pos, id)| key(count, pos, id)));
        PairHeap(BinaryHeap::from(keys))
    }
}

/// The heap key of an entry: larger counts first, then smaller positions.
#[inline(always)]
fn key(count: u64, pos: u32, id: u32) -> u128 {
    (u128::from(count) << 64) | (u128::from(!pos) << 32) | u128::from(id)
}

impl PairQueue for PairHeap {
    #[inline]
    fn push(&mut self, count: u64, pos: u32, id: u32) {
        self.0.push(key(count, pos, id));
    }

    #[inline]
    fn pop(&mut self) -> Option<(u64, u32, u32)> {
        self.0
            .pop()
            .map(|k| ((k >> 64) as u64, !((k >> 32) as u32), k as u32))
    }
}

/// Counts below this have a bucket of their own in [`CountQueue`].
const BUCKETS: usize = 4096;

/// The large engine's queue: one small heap by first position per count below
/// [`BUCKETS`], one heap for the larger counts. A long run tracks over a million pairs,
/// most of them rare and never picked; in one heap each pop walked down ~20 levels of
/// cache misses. The largest count never grows (a new pair occurs at most as often as
/// the pair whose merge made it), so the highest non-empty bucket is found by walking
/// down from the highest one used so far (a push above it raises it).
pub(super) struct CountQueue {
    large: PairHeap,
    buckets: Vec<BinaryHeap<Reverse<(u32, u32)>>>,
    /// No bucket above this one holds an entry.
    top: usize,
}

impl CountQueue {
    /// A queue with no buckets, to stand in while the real one is moved out.
    pub(super) const EMPTY: CountQueue = CountQueue {
        large: PairHeap::new(),
        buckets: Vec::new(),
        top: 0,
    };

    pub(super) fn new() -> CountQueue {
        CountQueue {
            large: PairHeap::new(),
            buckets: (0..BUCKETS).map(|_| BinaryHeap::new()).collect(),
            top: 0,
        }
    }
}

impl PairQueue for CountQueue {
    #[inline]
    fn push(&mut self, count: u64, pos: u32, id: u32) {
        if count >= BUCKETS as u64 {
            PairQueue::push(&mut self.large, count, pos, id);
        } else {
            let bucket = count as usize;
            self.buckets[bucket].push(Reverse((pos, id)));
            self.top = self.top.max(bucket);
        }
    }

    fn pop(&mut self) -> Option<(u64, u32, u32)> {
        if let Some(entry) = PairQueue::pop(&mut self.large) {
            return Some(entry);
        }
        loop {
            if let Some(Reverse((pos, id))) = self.buckets[self.top].pop() {
                return Some((self.top as u64, pos, id));
            }
            if self.top == 0 {
                return None;
            }
            self.top -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CountQueue, PairQueue, BUCKETS};

    /// The naive queue: every entry in a vector, the largest count first, then the
    /// smallest position (positions are distinct here, so no other tie is left).
    fn naive_pop(entries: &mut Vec<(u64, u32, u32)>) -> Option<(u64, u32, u32)> {
        let best = (0..entries.len()).max_by_key(|&i| (entries[i].0, u32::MAX - entries[i].1))?;
        Some(entries.swap_remove(best))
    }

    /// Pushes and pops in random order, counts on both sides of the bucket limit and
    /// counts that rise after pops, give the naive queue's order.
    #[test]
    fn count_queue_pops_like_the_naive_queue() {
        let mut random = crate::test_rng::below_u64(0x2545_F491_4F6C_DD1D);
        for round in 0..200 {
            let mut queue = CountQueue::new();
            let mut naive = Vec::new();
            let mut next_pos = 0u32;
            let spread = [3, 40, BUCKETS as u64 + 50, 1 << 20][round % 4];
            for _ in 0..400 {
                if random(3) == 0 {
                    assert_eq!(queue.pop(), naive_pop(&mut naive));
                } else {
                    let count = random(spread);
                    // Distinct positions, pushed in no particular order.
                    let pos = (next_pos * 7919) % 100_003;
                    next_pos += 1;
                    queue.push(count, pos, next_pos);
                    naive.push((count, pos, next_pos));
                }
            }
            while !naive.is_empty() {
                assert_eq!(queue.pop(), naive_pop(&mut naive));
            }
            assert_eq!(queue.pop(), None);
        }
    }
}
