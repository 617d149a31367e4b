//! The bytes of the tokens a training run learns, for a caller that shows a merge as it
//! comes (the `--verbose` log), without keeping every token's bytes: the tokens of a run
//! of one letter add up to 12 bytes per input byte, more than the trainer itself needs.
//!
//! # Invariants
//! A token up to [`KEPT_MAX`] bytes long has its bytes kept from its merge on; a longer
//! one is put together from kept pieces only when asked for, each piece a copy, so a
//! caller that never asks (a run without `--verbose`) holds no long token at all.

/// The longest token whose bytes are kept.
const KEPT_MAX: usize = 256;

/// The tokens learned so far: byte tokens, then one per merge.
pub struct TokenBytes {
    /// `pairs[k]` made token 256 + k.
    pairs: Vec<(u32, u32)>,
    /// Per token, its bytes' range in `kept`, or `None` if it is longer than [`KEPT_MAX`].
    ranges: Vec<Option<(usize, usize)>>,
    kept: Vec<u8>,
    /// The last long token put together.
    buf: Vec<u8>,
    stack: Vec<u32>,
}

impl Default for TokenBytes {
    fn default() -> TokenBytes {
        TokenBytes::new()
    }
}

impl TokenBytes {
    /// The 256 byte tokens.
    pub(crate) fn new() -> TokenBytes {
        TokenBytes {
            pairs: Vec::new(),
            ranges: (0..256).map(|b| Some((b, b + 1))).collect(),
            kept: (0..=255).collect(),
            buf: Vec::new(),
            stack: Vec::new(),
        }
    }

    /// Adds the token that merging `pair` makes (the next id).
    ///
    /// # Panics
    /// If `pair` names a token not learned yet.
    pub(crate) fn push(&mut self, pair: (u32, u32)) {
        // A part longer than the kept limit makes the token longer still.
        let range = match (self.ranges[pair.0 as usize], self.ranges[pair.1 as usize]) {
            (Some((s0, e0)), Some((s1, e1))) if (e0 - s0) + (e1 - s1) <= KEPT_MAX => {
                let start = self.kept.len();
                self.kept.extend_from_within(s0..e0);
                self.kept.extend_from_within(s1..e1);
                Some((start, self.kept.len()))
            }
            _ => None,
        };
        self.pairs.push(pair);
        self.ranges.push(range);
    }

    /// The bytes of token `id`.
    ///
    /// # Panics
    /// If `id` is not a token learned yet.
    pub fn bytes(&mut self, id: u32) -> &[u8] {
        if let Some((start, end)) = self.ranges[id as usize] {
            return &self.kept[start..end];
        }
        self.buf.clear();
        self.stack.clear();
        self.stack.push(id);
        while let Some(id) = self.stack.pop() {
            match self.ranges[id as usize] {
                Some((start, end)) => self.buf.extend_from_slice(&self.kept[start..end]),
                None => {
                    let (a, b) = self.pairs[id as usize - 256];
                    self.stack.extend([b, a]);
                }
            }
        }
        &self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::{TokenBytes, KEPT_MAX};

    /// Every token equals the naive concatenation of its pair's tokens, short and long
    /// (doubling chains pass the kept length), when it is made and when asked for again
    /// later, on random merge lists.
    #[test]
    fn tokens_equal_the_concatenation() {
        let mut random = crate::test_rng::below_usize(91);
        for round in 0..50 {
            let mut naive: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            let mut tokens = TokenBytes::new();
            for step in 0..200 {
                let pick = |random: &mut dyn FnMut(usize) -> usize| {
                    // Even rounds open with a doubling chain past the kept length.
                    if round % 2 == 0 && step < 12 {
                        return naive.len() as u32 - 1;
                    }
                    // Late tokens often, so that lengths grow past the kept limit.
                    let len = naive.len();
                    let id = if round % 2 == 0 && random(2) == 0 {
                        len - 1 - random(len.min(4))
                    } else {
                        random(len)
                    };
                    id as u32
                };
                let pair = (pick(&mut random), pick(&mut random));
                let mut want = naive[pair.0 as usize].clone();
                want.extend_from_slice(&naive[pair.1 as usize]);
                tokens.push(pair);
                let id = naive.len() as u32;
                assert_eq!(tokens.bytes(id), want);
                naive.push(want);
            }
            assert!(round % 2 == 1 || naive.iter().any(|t| t.len() > KEPT_MAX));
            // Earlier tokens, long and short, asked for again.
            for _ in 0..50 {
                let id = random(naive.len());
                assert_eq!(tokens.bytes(id as u32), naive[id]);
            }
        }
    }
}
