//! BPE of long sequences: left to right in windows of a few hundred bytes, each joined
//! to the ids before it where the two are compatible ([`Encoder::bpe_long`]), and, for
//! the rare sequence this cannot take (vocabularies too large for the scan's keys), one
//! linked list with a merge queue ([`Encoder::bpe_heap`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::short::{linked_bytes, push_linked};
use super::tables::{byte_pair, PairCache};
use super::{Encoder, Long, Scratch, BACK, NONE};

/// The min-queue of `merge id << 32 | position` keys for long sequences: a radix heap
/// while keys come in monotone order — true of model files (a merge only creates
/// pairs with higher ids) and of trained rank tables — else a binary heap.
///
/// Measured on 1 MB of random letters with o200k_base: the binary heap alone spent
/// most of ~1.6 s CPU in sift-downs over a million entries; the radix heap's buckets
/// are scanned sequentially.
#[derive(Default)]
pub(super) struct MergeQueue {
    pub(super) buckets: Vec<Vec<u64>>,
    pub(super) last: u64,
    pub(super) len: usize,
    pub(super) monotone: bool,
    pub(super) fallback: BinaryHeap<Reverse<u64>>,
}

impl MergeQueue {
    pub(super) fn reset(&mut self) {
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
    pub(super) fn bucket(x: u64) -> usize {
        (64 - x.leading_zeros()) as usize
    }

    #[inline]
    pub(super) fn push(&mut self, key: u64) {
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
    pub(super) fn pop(&mut self) -> Option<u64> {
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

impl Encoder<'_> {
    /// BPE over a long sequence, left to right in steps of [`Encoder::step`] bytes, in
    /// working memory that does not grow with the sequence (its ids in `out` aside).
    /// After each step `out[first..]` holds the BPE of the bytes so far. The next step
    /// encodes again the bytes of the last [`BACK`] of those ids together with the next
    /// `step` bytes, and puts the result in their place when its first id is compatible
    /// with the id before it ([`Encoder::fits`]); if not, it starts twice as many ids
    /// back (a merge at the right end can change tokens further left).
    ///
    /// Why this is exact: a sequence of tokens is the BPE of its bytes exactly when each
    /// token is its own BPE and every two neighbours are compatible (see
    /// [`Encoder::compatible`]; the same argument holds for tiktoken's rank BPE, ties
    /// included). The ids kept are a prefix of a BPE result and the window is one, so
    /// the pair where they meet is the only one that can fail, and it is checked. A
    /// change at the right end that reaches far to the right (a run of one byte whose
    /// tokens fall into another phase) needs nothing more: the window reaches the end.
    pub(super) fn bpe_long(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
        let first = out.len();
        let mut window = std::mem::take(&mut scratch.window);
        let offsets = &self.model.token_offsets;
        let len = |id: u32| (offsets[id as usize + 1] - offsets[id as usize]) as usize;
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + self.step).min(bytes.len());
            let mut back = BACK;
            loop {
                let lo = out.len().saturating_sub(back).max(first);
                let start = at - out[lo..].iter().map(|&id| len(id)).sum::<usize>();
                window.clear();
                self.bpe_one(scratch, &bytes[start..end], &mut window);
                if lo == first || self.fits(scratch, out[lo - 1], window[0]) {
                    out.truncate(lo);
                    out.extend_from_slice(&window);
                    break;
                }
                back *= 2;
            }
            at = end;
        }
        scratch.window = window;
    }

    /// Whether the BPE of token `a`'s bytes followed by token `b`'s is `[a, b]`, for
    /// tokens that are each their own BPE: by the merges for a merge list
    /// ([`Encoder::compatible`]), else by encoding the two tokens' bytes again.
    pub(super) fn fits(&self, scratch: &mut Scratch, a: u32, b: u32) -> bool {
        match self.long {
            Long::Merges => self.compatible(&mut scratch.pairs, a, b),
            Long::Bytes | Long::No => {
                let mut bytes = std::mem::take(&mut scratch.pair_bytes);
                let mut ids = std::mem::take(&mut scratch.pair_ids);
                bytes.clear();
                ids.clear();
                for id in [a, b] {
                    self.model.write_token(id, &mut bytes);
                }
                self.bpe_one(scratch, &bytes, &mut ids);
                let fits = ids == [a, b];
                scratch.pair_bytes = bytes;
                scratch.pair_ids = ids;
                fits
            }
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
    /// [`Encoder::bpe_long`] rests on: tokens that are each their own BPE, every two
    /// neighbours compatible, are the BPE of their bytes (a first merge across any
    /// boundary would be one across that boundary alone), and conversely.
    pub(super) fn compatible(&self, cache: &mut PairCache, a: u32, b: u32) -> bool {
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

    pub(super) fn bpe_heap(&self, scratch: &mut Scratch, bytes: &[u8], out: &mut Vec<u32>) {
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
}
