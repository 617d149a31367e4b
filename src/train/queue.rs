//! The trainer's priority queue of pairs: largest count first, ties to the smallest first
//! position, with entries that go stale and are corrected lazily.
//!
//! # Invariants
//! An entry's key is an upper bound of its record's current key: keys of existing pairs
//! only get worse (counts fall, first live positions move right), so a popped entry whose
//! key is still current is the true maximum, and a stale one goes back with its current key.
//! The largest count never grows (a new pair occurs at most as often as the pair whose
//! merge made it).
//!
//! # Kept decisions
//! - One binary heap of 128-bit keys (count, position's complement, record): a comparison
//!   is two word compares and no branch on equal counts (taylorswift.txt to 512, whole
//!   process: 4.30 -> 4.17 ms against tuples compared field by field).
//! - For large inputs, counts below [`BUCKETS`] in buckets, each a small heap by position:
//!   a long run tracks over a million pairs, most never picked, and in one heap each pop
//!   walked ~20 levels of cache misses (27 MB, the last 29 k merges: 2.24 -> 1.99 s). The
//!   highest non-empty bucket is found by walking down from the highest one used so far.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Counts below this have a bucket of their own in a queue with buckets.
pub(crate) const BUCKETS: usize = 4096;

/// A queue of (count, first position, record) entries, largest count first, then smallest
/// position.
pub(crate) struct PairQueue {
    /// Entries of counts from `buckets.len()` on.
    heap: BinaryHeap<u128>,
    /// Entries of count `c` at `buckets[c]`, by position then record.
    buckets: Vec<BinaryHeap<Reverse<u64>>>,
    /// No bucket above this one holds an entry.
    top: usize,
}

/// The heap key of an entry: larger counts first, then smaller positions.
#[inline(always)]
pub(crate) fn key(count: u64, pos: u32, id: u32) -> u128 {
    (u128::from(count) << 64) | (u128::from(!pos) << 32) | u128::from(id)
}

impl PairQueue {
    /// A queue with `buckets` buckets (0: one heap) and room for `capacity` heap entries.
    pub(crate) fn new(buckets: usize, capacity: usize) -> PairQueue {
        PairQueue {
            heap: BinaryHeap::with_capacity(capacity),
            buckets: (0..buckets).map(|_| BinaryHeap::new()).collect(),
            top: 0,
        }
    }

    /// A queue of one heap holding `entries` (count, first position, record).
    pub(crate) fn from_heap_entries(entries: Vec<u128>) -> PairQueue {
        PairQueue {
            heap: BinaryHeap::from(entries),
            buckets: Vec::new(),
            top: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, count: u64, pos: u32, id: u32) {
        if count >= self.buckets.len() as u64 {
            self.heap.push(key(count, pos, id));
        } else {
            let bucket = count as usize;
            self.buckets[bucket].push(Reverse((u64::from(pos) << 32) | u64::from(id)));
            self.top = self.top.max(bucket);
        }
    }

    fn pop(&mut self) -> Option<(u64, u32, u32)> {
        if let Some(k) = self.heap.pop() {
            return Some(((k >> 64) as u64, !((k >> 32) as u32), k as u32));
        }
        loop {
            let bucket = self.buckets.get_mut(self.top)?;
            if let Some(Reverse(k)) = bucket.pop() {
                return Some((self.top as u64, (k >> 32) as u32, k as u32));
            }
            self.top = self.top.checked_sub(1)?;
        }
    }

    /// Pops until the top entry is current and returns its record. `current(id)` gives a
    /// record's count and first live position, or `None` for a record that is released or
    /// has no live occurrence.
    pub(crate) fn pick_current(
        &mut self,
        mut current: impl FnMut(u32) -> Option<(u64, u32)>,
    ) -> Option<u32> {
        while let Some((count, pos, id)) = self.pop() {
            let Some((cur, first)) = current(id) else {
                continue;
            };
            if cur == count && first == pos {
                return Some(id);
            }
            self.push(cur, first, id);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{PairQueue, BUCKETS};

    /// The naive queue: every entry in a vector, the largest count first, then the
    /// smallest position (positions are distinct here, so no other tie is left).
    fn naive_pop(entries: &mut Vec<(u64, u32, u32)>) -> Option<(u64, u32, u32)> {
        let best = (0..entries.len()).max_by_key(|&i| (entries[i].0, u32::MAX - entries[i].1))?;
        Some(entries.swap_remove(best))
    }

    /// Pushes and pops in random order, counts on both sides of the bucket limit and
    /// counts that rise after pops, give the naive queue's order, with buckets or without.
    #[test]
    fn queue_pops_like_the_naive_queue() {
        let mut random = crate::test_rng::below_u64(0x2545_F491_4F6C_DD1D);
        for round in 0..400 {
            let mut queue = PairQueue::new([0, BUCKETS][round % 2], 16);
            let mut naive = Vec::new();
            let mut next_pos = 0u32;
            let spread = [3, 40, BUCKETS as u64 + 50, 1 << 20][round / 2 % 4];
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
