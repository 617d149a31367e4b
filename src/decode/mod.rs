//! Decoding: token ids back to bytes, for BPE and word models: the plain decoder, the
//! fast table that decodes NDJSON records straight to bytes, and the stream engine.

pub(crate) mod stream;

use std::borrow::Cow;

use ahash::AHashMap;
use zerocopy::{FromBytes, Immutable, KnownLayout};

use crate::identity::ModelSource;
use crate::model::{BpeModel, Model};

/// Appends the bytes of `ids` under `model` to `out`; `Err(id)` names the first id that
/// is not in the vocabulary.
pub fn decode_ids(model: &Model, ids: &[u32], out: &mut Vec<u8>) -> std::result::Result<(), u32> {
    match model {
        Model::Bpe(bpe) => decode_bpe(bpe, ids, out),
        Model::Word(word) => crate::word::decode(word, ids, out),
    }
}

fn decode_bpe(model: &BpeModel, ids: &[u32], out: &mut Vec<u8>) -> std::result::Result<(), u32> {
    for &id in ids {
        if !model.write_token(id, out) {
            return Err(id);
        }
    }
    Ok(())
}

/// Bytes past the end of [`DecodeTable::bytes`], so that a token of up to this many
/// bytes can be copied as one fixed-width move.
const PAD: usize = 16;

/// The bytes of text whose ids [`DecodeTable::decode_ids_text`] finds in one step.
const BLOCK: usize = 64;

/// The most the ids of a [`BLOCK`] of text write past its start with short tokens:
/// [`PAD`] bytes for each.
const ROOM: usize = (BLOCK + 1) * PAD;

/// Output bytes for [`DecodeTable`]: a buffer kept initialised past its used length,
/// so that each token is one fixed-width copy and growing never re-zeroes what was
/// written (a `Vec` truncated after every record would be zero-filled again).
#[derive(Default)]
pub(crate) struct DecodeBuf {
    buf: Vec<u8>,
    used: usize,
    /// The right parts waiting while a merge list's long token is written from its parts.
    stack: Vec<u32>,
}

impl DecodeBuf {
    /// The bytes written so far.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.buf[..self.used]
    }

    /// Forgets the bytes written (keeps the memory).
    fn clear(&mut self) {
        self.used = 0;
    }

    /// Appends bytes.
    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.room(bytes.len());
        self.buf[self.used..self.used + bytes.len()].copy_from_slice(bytes);
        self.used += bytes.len();
    }

    /// Appends one byte.
    pub(crate) fn push(&mut self, byte: u8) {
        self.extend_from_slice(&[byte]);
    }

    /// Makes sure `n` more bytes fit after the used ones.
    #[inline]
    fn room(&mut self, n: usize) {
        if self.buf.len() < self.used + n {
            let size = (2 * self.buf.len()).max(self.used + n).max(1 << 16);
            self.buf.resize(size, 0);
        }
    }
}

/// One token of up to 15 bytes, its length in the last byte (0: longer, or not in the
/// vocabulary); aligned, so that reading it never touches two cache lines.
#[derive(Clone, Copy, Default, FromBytes, Immutable, KnownLayout)]
#[repr(C, align(16))]
struct Slot([u8; PAD]);

/// Id -> bytes in one flat table for the decoder's fast path: `slots[id]` holds a token
/// of up to 15 bytes; longer ones are spans into `bytes` in a small map. Word models
/// store each word followed by the space that joins it to the next.
///
/// Each id is parsed eight bytes at a time without a branch on its length, and its token
/// copied as one 16-byte move from its slot into a buffer that is never re-zeroed; the
/// lines go in one pass ([`decode_lines`]), a record's ids (and the pieces of a long one)
/// by blocks of 64 bytes ([`decode_ids_text`]). The loops wait mostly on the slot loads
/// (o200k_base's table is 3.2 MB, the level-2 cache 2 MB): one thread decodes the 7.07M
/// ids of 27 MB of mixed text, `--whole`, in 67-70 ms of CPU for the whole command
/// (Intel AVX-512 host; docs/performance-notes.md, "Decoding", has the steps and what
/// did not help).
///
/// A built-in vocabulary's slots are written by build.rs and read in place from the
/// binary ([`crate::model::decode_slots`]; its long tokens where the model keeps them,
/// its special tokens in the map): nothing is built at start-up. Building o200k_base's
/// 3.2 MB of slots cost every run 3.4 ms and ~1200 page faults: a run decoding one
/// record took 5.7-6.2 ms of wall time with 1390 page faults, read in place 2.2-2.6 ms
/// with 179 (AMD EPYC Zen 4 host, 40 alternated runs); 27 MB of text, two threads:
/// best 27.8 ms against 30.3 ms. The slot tables add 6.4 MB to `bpe-decode`.
///
/// Other models' tables are built at the start of the run: each slot is one
/// fixed-width copy, and only the long tokens get a span, in a map (o200k_base built:
/// a run decoding one record took 18% less CPU than with a `memmove` call per slot and
/// a dense span table, 340 fewer page faults; 100 runs a sample, 6 interleaved
/// samples).
///
/// [`decode_lines`]: DecodeTable::decode_lines
/// [`decode_ids_text`]: DecodeTable::decode_ids_text
pub(crate) struct DecodeTable {
    /// `slots[id]`: the bytes and length of a token of up to 15 bytes (most are), so
    /// that each token is one aligned load of 16 bytes, where a size table, a span
    /// table and `bytes` were three loads (two dependent): measured on the 32k stream
    /// with one thread, 73 -> 70 ms CPU for the whole command. Length 0: a longer
    /// token (in `long` or `spans`) or an id outside the vocabulary. Borrowed from the
    /// binary for a built-in vocabulary.
    slots: Cow<'static, [Slot]>,
    /// Ids at or past this are not in the table: the general reader decodes them. Ids
    /// from `slots.len()` on (a built-in's special tokens) are in `long`.
    limit: usize,
    /// A built-in's token offsets and bytes, where its tokens of 16 bytes or more are
    /// read (token `id` is `bytes[offsets[id]..offsets[id + 1]]`).
    spans: Option<(&'static [u32], &'static [u8])>,
    /// `offset << 32 | length` in `bytes` of each token that neither the slots nor
    /// `spans` hold: a built table's tokens of 16 bytes or more, a built-in's special
    /// tokens; offset [`DERIVED`]: a merge list's token, written from its parts.
    long: AHashMap<u32, u64>,
    bytes: Vec<u8>,
    /// A merge list's pairs (`merges[k]` made id `256 + k`): its longer tokens are not
    /// kept but written from their parts' slots, so that a model of a few lines whose
    /// tokens hold gigabytes (each merge may double one) decodes in kilobytes.
    merges: Vec<(u32, u32)>,
    /// Word models: drop the last joining space of a record.
    joined: bool,
}

/// The offset of a span whose token is written from its parts.
const DERIVED: u64 = u32::MAX as u64;

/// Fills the slot or the long span of one token while a [`DecodeTable`] is built.
struct Builder {
    slots: Vec<Slot>,
    long: AHashMap<u32, u64>,
}

impl Builder {
    /// Token `id` is `size` bytes at `offset` of `bytes` (which ends with [`PAD`] zero
    /// bytes), or ([`DERIVED`]) written from its parts.
    #[inline(always)]
    fn add(&mut self, bytes: &[u8], id: usize, offset: u64, size: usize) {
        if self.slots.len() <= id {
            self.slots.resize(id + 1, Slot::default());
        }
        let mut slot = Slot::default();
        if size < PAD && offset != DERIVED {
            // Sixteen bytes from the token's, the ones past it masked off: a fixed-width
            // copy (one of `size` bytes was a `memmove` call per token).
            let offset = offset as usize;
            let word: [u8; PAD] = bytes[offset..offset + PAD].try_into().expect("PAD");
            let mask = (1u128 << (8 * size)) - 1;
            slot.0 = (u128::from_le_bytes(word) & mask).to_le_bytes();
            slot.0[PAD - 1] = size as u8;
        } else if size > 0 {
            self.long.insert(id as u32, offset << 32 | size as u64);
        }
        self.slots[id] = slot;
    }
}

impl DecodeTable {
    /// The table of `model` (special tokens included).
    pub(crate) fn new(model: &Model) -> DecodeTable {
        DecodeTable::prebuilt(model).unwrap_or_else(|| DecodeTable::built(model))
    }

    /// The table of a built-in vocabulary, its slots read in place from the binary and
    /// its special tokens (past its ordinary ids) in `long`; `None` for any other model.
    fn prebuilt(model: &Model) -> Option<DecodeTable> {
        let Model::Bpe(bpe) = model else {
            return None;
        };
        let ModelSource::Builtin(name) = bpe.source else {
            return None;
        };
        let slots = <[Slot]>::ref_from_bytes(crate::model::decode_slots(name)?).ok()?;
        let ordinary = bpe.token_offsets.len().checked_sub(1)?;
        // A special token of an ordinary id must have a gap there (p50k_base's
        // `<|endoftext|>`): its slot is then empty and sends it to `long`.
        let gap = |id: usize| bpe.token_offsets[id] == bpe.token_offsets[id + 1];
        if slots.len() != ordinary
            || bpe
                .specials
                .iter()
                .any(|s| (s.id as usize) < ordinary && !gap(s.id as usize))
        {
            return None;
        }
        // The tokens of 16 bytes or more are read where the model has them.
        let (Some(Cow::Borrowed(stored)), Cow::Borrowed(offsets)) =
            (bpe.stored_token_bytes(), &bpe.token_offsets)
        else {
            return None;
        };
        let mut bytes = Vec::new();
        let mut long = AHashMap::new();
        let mut limit = ordinary;
        for special in &bpe.specials {
            let id = special.id as usize;
            // As in `built`: special ids far past the ordinary ones are the general
            // reader's.
            if !special.text.is_empty() && id < ordinary + (1 << 16) {
                long.insert(
                    special.id,
                    (bytes.len() as u64) << 32 | special.text.len() as u64,
                );
                bytes.extend_from_slice(special.text.as_bytes());
                limit = limit.max(id + 1);
            }
        }
        bytes.extend_from_slice(&[0; PAD]);
        Some(DecodeTable {
            slots: Cow::Borrowed(slots),
            limit,
            spans: Some((offsets, stored)),
            long,
            bytes,
            merges: Vec::new(),
            joined: false,
        })
    }

    /// Whether the slots are read in place (a built-in's, from the binary).
    #[cfg(test)]
    pub(crate) fn reads_in_place(&self) -> bool {
        matches!(self.slots, Cow::Borrowed(_))
    }

    /// The table of `model`, its slots built.
    pub(crate) fn built(model: &Model) -> DecodeTable {
        let mut bytes = Vec::new();
        let mut merges = Vec::new();
        // Tokens appended to `bytes` (specials, words): (id, offset, size).
        let mut added: Vec<(usize, u64, usize)> = Vec::new();
        let put = |bytes: &mut Vec<u8>,
                   added: &mut Vec<(usize, u64, usize)>,
                   id: usize,
                   token: &[u8],
                   joiner: Option<u8>| {
            let start = bytes.len();
            bytes.extend_from_slice(token);
            bytes.extend(joiner);
            added.push((id, start as u64, bytes.len() - start));
        };
        let mut ordinary = 0;
        let joined = match model {
            Model::Bpe(bpe) => {
                ordinary = bpe.token_offsets.len().saturating_sub(1);
                match bpe.stored_token_bytes() {
                    // The model's own table, whole: o200k_base's 200k tokens one at a
                    // time took ~5 ms, a tenth of the time of a 27 MB `--whole` decode.
                    Some(stored) => bytes.extend_from_slice(stored),
                    None => merges.clone_from(&bpe.merges),
                }
                // Special ids far past the ordinary ones would make the dense table
                // huge; the general reader decodes those.
                let limit = ordinary + (1 << 16);
                for special in &bpe.specials {
                    if !special.text.is_empty() && (special.id as usize) < limit {
                        let text = special.text.as_bytes();
                        put(&mut bytes, &mut added, special.id as usize, text, None);
                    }
                }
                false
            }
            Model::Word(word) => {
                for id in 0..=word.unk_id {
                    if let Some(w) = crate::word::word_bytes(word, id) {
                        put(&mut bytes, &mut added, id as usize, &w, Some(b' '));
                    }
                }
                true
            }
        };
        bytes.extend_from_slice(&[0; PAD]);
        let mut table = Builder {
            slots: vec![Slot::default(); ordinary],
            long: AHashMap::new(),
        };
        if let Model::Bpe(bpe) = model {
            let sizes = bpe
                .token_offsets
                .windows(2)
                .map(|w| (w[0], (w[1] - w[0]) as usize));
            if bpe.stored_token_bytes().is_some() {
                for (id, (offset, size)) in sizes.enumerate() {
                    table.add(&bytes, id, u64::from(offset), size);
                }
            } else {
                // A merge list's short tokens, each its pair's two slots end to end; the
                // longer ones written from their parts.
                let slots = &mut table.slots;
                for (byte, &id) in bpe.base_id_of_byte.iter().enumerate() {
                    if let Some(slot) = slots.get_mut(id as usize) {
                        slot.0[0] = byte as u8;
                        slot.0[PAD - 1] = 1;
                    }
                }
                for (k, &(a, b)) in merges.iter().enumerate() {
                    let (x, y) = (slots[a as usize], slots[b as usize]);
                    let (m, n) = (usize::from(x.0[PAD - 1]), usize::from(y.0[PAD - 1]));
                    if m > 0 && n > 0 && m + n < PAD {
                        let slot = &mut slots[256 + k];
                        slot.0[..m].copy_from_slice(&x.0[..m]);
                        slot.0[m..m + n].copy_from_slice(&y.0[..n]);
                        slot.0[PAD - 1] = (m + n) as u8;
                    }
                }
                for (id, (_, size)) in sizes.enumerate() {
                    if size > 0 && table.slots[id].0[PAD - 1] == 0 {
                        table.long.insert(id as u32, DERIVED << 32 | size as u64);
                    }
                }
            }
        }
        // Specials and words last: a special's bytes win over a token of its id.
        for &(id, offset, size) in &added {
            table.long.remove(&(id as u32));
            table.add(&bytes, id, offset, size);
        }
        let Builder { slots, long } = table;
        DecodeTable {
            limit: slots.len(),
            spans: None,
            slots: Cow::Owned(slots),
            long,
            bytes,
            merges,
            joined,
        }
    }

    /// Appends the bytes of one record in the compact form the encoder writes
    /// (`[1,22,333]`: no spaces, no leading zeros, ids below 10^9) to `out` and
    /// returns true; returns false, with `out` as it was, for anything else
    /// (whitespace, an unknown id, a malformed line), which the caller hands to the
    /// general parser for its exact reading or error message.
    pub(crate) fn decode_record(&self, line: &[u8], out: &mut DecodeBuf) -> bool {
        let [b'[', inner @ .., b']'] = line else {
            return false;
        };
        let start = out.used;
        if inner.is_empty() {
            return true;
        }
        if !self.decode_ids_text(inner, out) {
            out.used = start;
            return false;
        }
        if self.joined {
            out.used -= 1;
        }
        true
    }

    /// Appends the bytes of `text`, ids joined by commas (`1,22,333`), to `out`; false
    /// (with `out` in an unspecified state) when `text` is not of that form or names
    /// an id outside the vocabulary.
    ///
    /// The text is read [`BLOCK`] bytes at a time, in two steps. First its ids: one mask
    /// of the bytes that are not digits ([`nondigits64`]), then a step per set bit, the
    /// end of an id whose digits run from the bit before; the ids go to a short list.
    /// Then the list's tokens are copied, a few instructions each, so that many of
    /// their slots' loads are under way at once (o200k_base's table is larger than the
    /// level-2 cache). Reading each id's length from its own bytes and copying its token
    /// at once, as the lines' pass does, made each step wait on the last (27 MB of text,
    /// 7.07M o200k_base ids, one thread: 9% less CPU for the whole command; the lines'
    /// pass with a list was 8% slower, so it keeps its way).
    fn decode_ids_text(&self, text: &[u8], out: &mut DecodeBuf) -> bool {
        let n = text.len();
        let mut len = out.used;
        // Where the digits of the next id start.
        let mut start = 0;
        let mut base = 0;
        // The ids of a block: at most one a byte, and one for the end of the text.
        let mut ids = [0u32; BLOCK + 1];
        loop {
            let mut mask = match text.get(base..base + BLOCK) {
                Some(block) => nondigits64(block.try_into().expect("BLOCK bytes")),
                None => {
                    // The last bytes, digits after them, and their end as a separator.
                    let mut tail = [b'0'; BLOCK];
                    tail[..n - base].copy_from_slice(&text[base..]);
                    nondigits64(&tail) | 1 << (n - base)
                }
            };
            let mut k = 0;
            let mut end = false;
            while mask != 0 {
                let p = base + mask.trailing_zeros() as usize;
                mask &= mask - 1;
                // An id of 1 to 7 digits, no leading zero, in the table.
                let digits = p - start;
                if digits == 0 || digits > 7 {
                    return false;
                }
                let word = load8(text, start);
                let id = parse_digits(word, digits);
                if (digits > 1 && word as u8 == b'0') || id >= self.limit {
                    return false;
                }
                ids[k] = id as u32;
                k += 1;
                match text.get(p) {
                    Some(b',') => start = p + 1,
                    Some(_) => return false,
                    None => {
                        end = true;
                        break;
                    }
                }
            }
            len = match self.write_ids(&ids[..k], len, out) {
                Some(len) => len,
                None => return false,
            };
            if end {
                out.used = len;
                return true;
            }
            base += BLOCK;
        }
    }

    /// Appends the bytes of `text`, whole lines in the compact form (each `[1,22,333]`
    /// followed by `\n`; the last line may lack it), to `out`, each record followed by a
    /// newline when `newlines` is set, and returns the number of records. `None` (with
    /// `out` in an unspecified state) for anything else: the caller then reads the lines
    /// one at a time, for their exact reading or error message.
    ///
    /// One pass over the lines, with no per-line call or search for the line's end:
    /// measured on the 32k stream (558,607 lines of 10 ids on average), the per-line
    /// `memchr` and call of [`decode_record`](Self::decode_record) cost ~15% more.
    pub(crate) fn decode_lines(
        &self,
        text: &[u8],
        newlines: bool,
        out: &mut DecodeBuf,
    ) -> Option<u64> {
        // Every byte is checked once: a digit by `nondigits`, the others where they must
        // be. (A first pass that checked the bytes' set, as `decode_ids_text` once did,
        // took ~20% of this function's time, being the one that met the input in memory.)
        let n = text.len();
        let mut i = 0;
        let mut len = out.used;
        let mut records = 0;
        while i < n {
            if text[i] != b'[' {
                return None;
            }
            i += 1;
            if text.get(i) == Some(&b']') {
                i += 1;
            } else {
                loop {
                    let word = load8(text, i);
                    let digits = (nondigits(word).trailing_zeros() / 8) as usize;
                    if digits == 0 || digits == 8 || (digits > 1 && word as u8 == b'0') {
                        return None;
                    }
                    len = self.put_checked(parse_digits(word, digits), len, out)?;
                    i += digits;
                    match text.get(i) {
                        Some(b',') => i += 1,
                        Some(b']') => {
                            i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                if self.joined {
                    len -= 1;
                }
            }
            records += 1;
            if newlines {
                if out.buf.len() <= len {
                    out.used = len;
                    out.room(1);
                }
                out.buf[len] = b'\n';
                len += 1;
            }
            match text.get(i) {
                Some(b'\n') => i += 1,
                None => {}
                Some(_) => return None,
            }
        }
        out.used = len;
        Some(records)
    }

    /// Copies the bytes of `id` to `out` at `len` (the used length, not yet stored in
    /// `out`), returning the new length; `None` for an id outside the table. The lines'
    /// pass writes each token as its id is read: a list of them cost it 8% more.
    #[inline(always)]
    fn put_checked(&self, id: usize, len: usize, out: &mut DecodeBuf) -> Option<usize> {
        let Some(slot) = self.slots.get(id) else {
            return self.put_long(id, len, out);
        };
        let size = usize::from(slot.0[PAD - 1]);
        if size == 0 {
            return self.put_long(id, len, out);
        }
        if out.buf.len() < len + PAD {
            out.used = len;
            out.room(PAD);
        }
        out.buf[len..len + PAD].copy_from_slice(&slot.0);
        Some(len + size)
    }

    /// Writes the tokens of `ids` (in the table) to `out` at `len` and returns the new
    /// length; `None` for an id outside the vocabulary.
    #[inline(always)]
    fn write_ids(&self, ids: &[u32], mut len: usize, out: &mut DecodeBuf) -> Option<usize> {
        // Room for all of them (`put_long` keeps as much past a long token), so that
        // each short token's copy needs no check of its own.
        out.used = len;
        out.room(ROOM);
        for &id in ids {
            match self.slots.get(id as usize) {
                Some(slot) if slot.0[PAD - 1] != 0 => {
                    out.buf[len..len + PAD].copy_from_slice(&slot.0);
                    len += usize::from(slot.0[PAD - 1]);
                }
                _ => len = self.put_long(id as usize, len, out)?,
            }
        }
        Some(len)
    }

    /// Copies a token of 16 bytes or more to `out` at `len`, returning the new length;
    /// `None` for an id outside the vocabulary.
    #[cold]
    #[inline(never)]
    fn put_long(&self, id: usize, len: usize, out: &mut DecodeBuf) -> Option<usize> {
        let (bytes, offset, size) = match self.spans {
            Some((offsets, bytes)) if id < self.slots.len() && offsets[id] < offsets[id + 1] => {
                let (start, end) = (offsets[id], offsets[id + 1]);
                (bytes, u64::from(start), (end - start) as usize)
            }
            _ => {
                let span = *self.long.get(&(id as u32))?;
                (self.bytes.as_slice(), span >> 32, span as u32 as usize)
            }
        };
        if out.buf.len() < len + size + ROOM {
            out.used = len;
            out.room(size + ROOM);
        }
        if offset == DERIVED {
            self.put_parts(id, len, out);
        } else {
            let offset = offset as usize;
            out.buf[len..len + size].copy_from_slice(&bytes[offset..offset + size]);
        }
        Some(len + size)
    }

    /// Writes a merge list's token `id` at `len` in `out` (which has room for it and
    /// [`PAD`] bytes more) from the slots of its parts: down the merges, left part
    /// first, the right parts waiting on a stack (a chain of merges can be millions
    /// deep).
    fn put_parts(&self, id: usize, mut len: usize, out: &mut DecodeBuf) {
        let mut right = std::mem::take(&mut out.stack);
        let mut t = id;
        loop {
            let slot = &self.slots[t];
            let size = usize::from(slot.0[PAD - 1]);
            if size > 0 {
                out.buf[len..len + PAD].copy_from_slice(&slot.0);
                len += size;
                match right.pop() {
                    Some(next) => t = next as usize,
                    None => break,
                }
            } else {
                let (a, b) = self.merges[t - 256];
                right.push(b);
                t = a as usize;
            }
        }
        out.stack = right;
    }

    /// Appends the bytes of a piece of a long record's ids (the text between its
    /// brackets cut after commas): `text` ends with the comma before the next piece
    /// unless it is the `last`. False (with `out` in an unspecified state) when the
    /// piece is not of that form or names an id outside the vocabulary.
    pub(crate) fn decode_piece(&self, text: &[u8], last: bool, out: &mut DecodeBuf) -> bool {
        let ids = match text.split_last() {
            Some((b',', ids)) if !last => ids,
            _ if !last => return false,
            _ => text,
        };
        if !self.decode_ids_text(ids, out) {
            return false;
        }
        if last && self.joined {
            out.used -= 1;
        }
        true
    }
}

/// The eight bytes of `text` from `i`, zeros past its end (a zero is not a digit).
#[inline(always)]
fn load8(text: &[u8], i: usize) -> u64 {
    match text.get(i..i + 8) {
        Some(word) => u64::from_le_bytes(word.try_into().expect("8 bytes")),
        None => {
            let mut word = [0u8; 8];
            let rest = text.get(i..).unwrap_or_default();
            word[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(word)
        }
    }
}

/// Bit `k` set when byte `k` of `block` is not an ASCII digit: [`nondigits`] of each
/// eight bytes, their top bits gathered by one multiplication (the bits of byte `j`
/// and factor byte `7 - j` land on bit `56 + j`; no two products share a bit, so
/// nothing carries).
#[inline(always)]
fn nondigits64(block: &[u8; BLOCK]) -> u64 {
    let mut mask = 0;
    for (k, word) in block.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        let tops = nondigits(word) >> 7;
        mask |= (tops.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    mask
}

/// The top bit of each byte of `word` set when that byte is not an ASCII digit: with
/// `t` the byte xor `0x30` (digits become 0..9), `t >= 0x80` or `(t & 0x7f) + 0x76 >=
/// 0x80`, the sum never carrying into the next byte.
#[inline(always)]
fn nondigits(word: u64) -> u64 {
    let t = word ^ 0x3030_3030_3030_3030;
    (((t & 0x7F7F_7F7F_7F7F_7F7F) + 0x7676_7676_7676_7676) | t) & 0x8080_8080_8080_8080
}

/// The value of the first `digits` (0 to 7) ASCII digits of `word` (little-endian:
/// the first digit in the lowest byte), without a loop: the digits are moved to the
/// top bytes (zeros before them) and combined pairwise, then by fours, then by eights.
#[inline(always)]
fn parse_digits(word: u64, digits: usize) -> usize {
    if digits == 0 {
        return 0;
    }
    let values = word.wrapping_sub(0x3030_3030_3030_3030) << (8 * (8 - digits));
    let pairs = (values.wrapping_mul(10) + (values >> 8)) & 0x00FF_00FF_00FF_00FF;
    let fours = (pairs.wrapping_mul(100) + (pairs >> 16)) & 0x0000_FFFF_0000_FFFF;
    let eights = (fours.wrapping_mul(10000) + (fours >> 32)) & 0xFFFF_FFFF;
    eights as usize
}
