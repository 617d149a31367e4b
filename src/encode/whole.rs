//! One long record (`--whole`) cut where the result cannot change, so that its pieces
//! encode on several threads and stream out in order with bounded memory.

use super::{Encoder, Scratch, CUT_SEARCH, PIECE};
use crate::model::BpeModel;

/// Where the encoder may cut a `--whole` text for parallel work.
pub(super) enum CutRule {
    /// `--split none`: between bytes `x`, `y` when no token contains `x y`.
    /// Bit `x * 256 + y` is set when some token does.
    BytePairs(Box<[u64; 1024]>),
    /// A split pattern: where the splitter says cutting changes no chunk (the preset
    /// patterns have such places; custom ones none).
    Splitter,
}

impl CutRule {
    /// The rule for `model`'s `--whole` texts.
    pub(super) fn of(model: &BpeModel) -> CutRule {
        match model.split {
            Some(_) => CutRule::Splitter,
            None if model.is_merge_list() => {
                CutRule::BytePairs(Self::pairs_where_merges_meet(model))
            }
            None => CutRule::BytePairs(Self::pairs_inside_tokens(model)),
        }
    }

    /// The byte pairs inside some token of `model`: bit `x * 256 + y` set for `x y`.
    pub(super) fn pairs_inside_tokens(model: &BpeModel) -> Box<[u64; 1024]> {
        let mut bits = Box::new([0u64; 1024]);
        let bytes = model.token_bytes();
        for ends in model.token_offsets.windows(2) {
            let token = &bytes[ends[0] as usize..ends[1] as usize];
            for w in token.windows(2) {
                set_byte_pair(&mut bits, w[0], w[1]);
            }
        }
        bits
    }

    /// The same set for a merge list's model, from the merges alone: each token is its
    /// pair's two tokens end to end, so the byte pairs inside it are theirs and the one
    /// where they meet; over all tokens, the pairs where the merges' two tokens meet,
    /// each token's first and last byte being its pair's (32k model: 32k steps instead
    /// of a walk over 250 KB of token bytes, which a merge list does not keep).
    pub(super) fn pairs_where_merges_meet(model: &BpeModel) -> Box<[u64; 1024]> {
        let mut bits = Box::new([0u64; 1024]);
        let mut ends: Vec<(u8, u8)> = vec![(0, 0); 256 + model.merges.len()];
        for (byte, &id) in model.base_id_of_byte.iter().enumerate() {
            if let Some(end) = ends.get_mut(id as usize) {
                *end = (byte as u8, byte as u8);
            }
        }
        for (k, &(a, b)) in model.merges.iter().enumerate() {
            let ((first, x), (y, last)) = (ends[a as usize], ends[b as usize]);
            set_byte_pair(&mut bits, x, y);
            ends[256 + k] = (first, last);
        }
        bits
    }
}

pub(super) fn set_byte_pair(bits: &mut [u64; 1024], x: u8, y: u8) {
    let bit = (x as usize) << 8 | y as usize;
    bits[bit >> 6] |= 1 << (bit & 63);
}

/// A unit of `--whole` work.
pub(super) enum Piece {
    /// `text[start..end]`, and whether it is part of a longer ordinary stretch.
    Text(usize, usize, bool),
    Special(u32),
}

impl Encoder<'_> {
    #[cfg(test)]
    /// Encodes one record as [`encode`](Self::encode) does, cutting it at safe places
    /// and spreading the pieces over `threads` threads; the ids are the same.
    pub(crate) fn encode_whole_parallel(&self, text: &[u8], threads: usize, out: &mut Vec<u32>) {
        let result: std::result::Result<(), std::convert::Infallible> = self
            .encode_whole_streaming(text, threads, &mut |ids| {
                out.extend_from_slice(ids);
                Ok(())
            });
        let Ok(()) = result;
    }

    #[cfg(test)]
    /// Like [`encode_whole_parallel`](Self::encode_whole_parallel) but hands the ids to
    /// `sink` in order, a few megabytes of text at a time, so memory stays bounded
    /// whatever the size of `text`. Stops at the first error `sink` returns.
    fn encode_whole_streaming<E>(
        &self,
        text: &[u8],
        threads: usize,
        sink: &mut dyn FnMut(&[u32]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.encode_pieces(text, self.pieces(text), threads, sink)
    }

    /// Encodes a part of one record read in parts (a `--whole` input or a long line,
    /// from a stream): `first` when the part starts the record, `last` when it ends it.
    /// Returns how many bytes of `text` it encoded, handing their ids to `sink` in
    /// order as `encode_whole_streaming` (the tests' whole-text driver) does: all of a
    /// last part; of another, the longest prefix found whose ids cannot depend on what
    /// follows (ending at a safe cut, or just after an allowed special token), or 0 when
    /// there is none yet (the caller then gives a longer part). The parts' ids together
    /// are the record's.
    pub(crate) fn encode_part<E>(
        &self,
        text: &[u8],
        first: bool,
        last: bool,
        threads: usize,
        sink: &mut dyn FnMut(&[u32]) -> std::result::Result<(), E>,
    ) -> std::result::Result<usize, E> {
        let end = if last {
            text.len()
        } else {
            self.part_cut(text)
        };
        if end == 0 && !last {
            return Ok(0);
        }
        let text = &text[..end];
        let pieces = self.pieces_in(text, !first, !last);
        self.encode_pieces(text, pieces, threads, sink)?;
        Ok(end)
    }

    /// The end of the longest prefix of `text` (a part of a record, more of which
    /// follows) whose ids do not depend on what follows; 0 if none is found. Allowed
    /// special tokens are found from the part's start as the whole record's encoding
    /// finds them (the part starts where no special token is under way); only those
    /// that start where every longer special token would be seen whole are certain.
    fn part_cut(&self, text: &[u8]) -> usize {
        let longest = self.specials.first().map_or(0, |(s, _)| s.len());
        // Positions before `decided` start a special token, or not, whatever follows.
        let decided = (text.len() + 1).saturating_sub(longest.max(1));
        let mut after = 0;
        if !self.specials.is_empty() {
            let mut from = 0;
            while let Some((at, len, _)) = self.find_special(text, from) {
                if at >= decided {
                    break;
                }
                after = at + len;
                from = after;
            }
        }
        // The last safe cut in the ordinary text after the last special token, looking
        // back from `decided` (no special token starts between them) a bounded way.
        let lo = (after + 1).max(decided.saturating_sub(CUT_SEARCH));
        let cut = match self.cut.get_or_init(|| CutRule::of(self.model)) {
            CutRule::BytePairs(bits) => (lo..decided).rev().find(|&c| {
                let bit = (text[c - 1] as usize) << 8 | text[c] as usize;
                bits[bit >> 6] & (1 << (bit & 63)) == 0
            }),
            CutRule::Splitter => self.splitter.as_ref().and_then(|splitter| {
                let lo = (after + 1).max(decided.saturating_sub(PIECE));
                splitter.last_safe_cut(&text[..decided], lo, decided.saturating_sub(1))
            }),
        };
        cut.filter(|&c| c > after && c < decided).unwrap_or(after)
    }

    /// Encodes `pieces` of `text` in order, on up to `threads` threads.
    fn encode_pieces<E>(
        &self,
        text: &[u8],
        pieces: Vec<Piece>,
        threads: usize,
        sink: &mut dyn FnMut(&[u32]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let threads = threads.max(1);
        if threads == 1 || pieces.len() < 2 {
            let mut scratch = self.take_scratch();
            let mut ids = Vec::new();
            for piece in pieces {
                ids.clear();
                self.encode_piece(&mut scratch, text, &piece, &mut ids);
                sink(&ids)?;
            }
            self.put_scratch(scratch);
            return Ok(());
        }
        // Windows of a few pieces per thread: bounded memory, order kept by index.
        let window = threads * 4;
        for group in pieces.chunks(window) {
            let mut results: Vec<Vec<u32>> = vec![Vec::new(); group.len()];
            crate::parallel::on_demand(
                threads,
                results.iter_mut().zip(group.iter()),
                || self.take_scratch(),
                |scratch, (slot, piece)| self.encode_piece(scratch, text, piece, slot),
                |scratch| self.put_scratch(scratch),
            );
            for ids in &results {
                sink(ids)?;
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// Cuts a `--whole` text into pieces whose encodings concatenate to the text's:
    /// allowed special tokens are pieces of their own, ordinary stretches are cut at
    /// safe places about every [`PIECE`] bytes.
    pub(super) fn pieces(&self, text: &[u8]) -> Vec<Piece> {
        self.pieces_in(text, false, false)
    }

    /// The pieces of a part of a record (as `pieces` cuts a whole one): with `before`,
    /// the ordinary text at its start continues a stretch begun before it; with `after`,
    /// the ordinary text at its end goes on after it (either way, those pieces are parts
    /// of a stretch).
    pub(super) fn pieces_in(&self, text: &[u8], before: bool, after: bool) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut start = 0;
        let push_ordinary = |from: usize, to: usize, pieces: &mut Vec<Piece>| {
            let continued = (before && from == 0) || (after && to == text.len());
            let mut s = from;
            while to - s > PIECE + PIECE / 2 {
                match self.safe_cut(&text[..to], s + PIECE) {
                    Some(c) => {
                        pieces.push(Piece::Text(s, c, true));
                        s = c;
                    }
                    None => break,
                }
            }
            if to > s {
                pieces.push(Piece::Text(s, to, s > from || continued));
            }
        };
        if !self.specials.is_empty() {
            while let Some((at, len, id)) = self.find_special(text, start) {
                push_ordinary(start, at, &mut pieces);
                pieces.push(Piece::Special(id));
                start = at + len;
            }
        }
        push_ordinary(start, text.len(), &mut pieces);
        pieces
    }

    /// A position `c` in `target..` (searching a bounded distance) such that encoding
    /// `text[..c]` and `text[c..]` separately gives the ids of `text` (with no special
    /// token inside), or `None`.
    pub(super) fn safe_cut(&self, text: &[u8], target: usize) -> Option<usize> {
        let end = text.len().min(target.saturating_add(CUT_SEARCH));
        if target < 2 || target >= end {
            return None;
        }
        match self.cut.get_or_init(|| CutRule::of(self.model)) {
            // No token contains the bytes on both sides, so no merge can ever join them:
            // the two sides merge independently (and the whole text is no token).
            CutRule::BytePairs(bits) => (target..end).find(|&c| {
                let bit = (text[c - 1] as usize) << 8 | text[c] as usize;
                bits[bit >> 6] & (1 << (bit & 63)) == 0
            }),
            CutRule::Splitter => {
                let splitter = self.splitter.as_ref()?;
                let piece = &text[..end];
                splitter
                    .find_safe_cut(piece, target)
                    .filter(|&c| c > target - PIECE / 2 && c < piece.len())
            }
        }
    }

    pub(super) fn encode_piece(
        &self,
        scratch: &mut Scratch,
        text: &[u8],
        piece: &Piece,
        out: &mut Vec<u32>,
    ) {
        match *piece {
            Piece::Special(id) => out.push(id),
            // A part of a segment must not take the whole-token shortcut meant for the
            // segment (only `--split none` rank tables have it at this level).
            Piece::Text(s, e, true) if self.splitter.is_none() => {
                self.bpe(scratch, &text[s..e], out)
            }
            Piece::Text(s, e, _) => self.encode_ordinary(scratch, &text[s..e], out),
        }
    }
}
