//! Cutting training text at special tokens: specials are boundaries, never training
//! text. Matches are leftmost, then longest (the rule tiktoken applies to allowed
//! specials), and the pieces between them are what the split pattern sees.
//!
//! Performance notes: each special's next occurrence is found with `memchr::memmem`
//! and kept until the scan passes it, so the text is searched once per special, not
//! tested at every byte (27 MB with one special: a fraction of the split's time).

use memchr::memmem::Finder;

/// Cuts text at the occurrences of a set of special tokens (non-empty, as
/// `bpe-train --special` checks).
pub(crate) struct SpecialCutter {
    finders: Vec<Finder<'static>>,
}

impl SpecialCutter {
    /// A cutter for `specials` (none: the text is one piece).
    pub(crate) fn new(specials: &[String]) -> SpecialCutter {
        SpecialCutter {
            finders: specials
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| Finder::new(s.as_bytes()).into_owned())
                .collect(),
        }
    }

    /// Whether there are no specials (every text is one piece).
    pub(crate) fn is_empty(&self) -> bool {
        self.finders.is_empty()
    }

    /// Calls `piece` with each non-empty stretch of `text` between special tokens, in
    /// order; at each position the leftmost occurrence wins, and the longest special
    /// among those starting there.
    pub(crate) fn for_each_piece<'t>(&self, text: &'t [u8], piece: &mut dyn FnMut(&'t [u8])) {
        if self.finders.is_empty() {
            if !text.is_empty() {
                piece(text);
            }
            return;
        }
        // next[k]: where special k next occurs at or after `pos` (None: no more).
        let mut next: Vec<Option<usize>> = self.finders.iter().map(|f| f.find(text)).collect();
        let mut start = 0;
        while let Some(at) = next.iter().flatten().copied().min() {
            let len = self
                .finders
                .iter()
                .zip(&next)
                .filter(|(_, n)| **n == Some(at))
                .map(|(f, _)| f.needle().len())
                .max()
                .unwrap_or(0);
            if at > start {
                piece(&text[start..at]);
            }
            start = at + len;
            for (f, n) in self.finders.iter().zip(next.iter_mut()) {
                if matches!(*n, Some(p) if p < start) {
                    *n = f.find(&text[start..]).map(|p| start + p);
                }
            }
        }
        if start < text.len() {
            piece(&text[start..]);
        }
    }

    /// [`SpecialCutter::for_each_piece`], collected.
    pub(crate) fn pieces<'t>(&self, text: &'t [u8]) -> Vec<&'t [u8]> {
        let mut out = Vec::new();
        self.for_each_piece(text, &mut |p| out.push(p));
        out
    }
}
