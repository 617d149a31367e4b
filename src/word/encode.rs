//! Words to ids: each word looked up, unknown words to `[UNK]`.

use super::split_generic;
use super::table::{Probe, GROUP};
use super::{WordIds, WordModel};

#[cfg(test)]
/// Appends the ids of the words of `record` to `out`; words outside the vocabulary
/// become `[UNK]`'s id. Returns how many words were unknown.
pub(crate) fn encode(model: &WordModel, record: &[u8], out: &mut Vec<u32>) -> u64 {
    let mut unknown = 0;
    split_generic(record, &mut |w: &[u8]| {
        out.push(model.ids.get(w).unwrap_or_else(|| {
            unknown += 1;
            model.unk_id
        }));
    });
    unknown
}

/// A word model's encoder: its word table (keyed by bytes, short words inline), shared
/// by the threads.
pub(crate) struct WordEncoder<'m> {
    ids: &'m WordIds,
    unk_id: u32,
}

impl<'m> WordEncoder<'m> {
    /// The encoder of `model` (nothing to build: the model holds the table).
    pub(crate) fn new(model: &'m WordModel) -> WordEncoder<'m> {
        WordEncoder {
            ids: &model.ids,
            unk_id: model.unk_id,
        }
    }

    /// Appends the ids of the words of `record` to `out` (unknown words become
    /// `[UNK]`'s id) and returns how many words were unknown; the same as `word::encode` (the tests' one-record encoder).
    pub(crate) fn encode(&self, record: &[u8], out: &mut Vec<u32>) -> u64 {
        let mut ends = Vec::new();
        self.encode_records(&[record], out, &mut ends)
    }

    /// Appends the ids of the words of each record to `ids`, and after each record the
    /// length of `ids` to `ends`; returns how many words were unknown.
    ///
    /// Words are looked up in batches, a group of them reading their home slots together
    /// first, so that their cache misses overlap instead of following one another.
    pub(crate) fn encode_records(
        &self,
        records: &[&[u8]],
        ids: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> u64 {
        let mut unknown = 0;
        let mut pending = Vec::with_capacity(PENDING);
        for record in records {
            split_generic(record, &mut |w: &[u8]| {
                pending.push((ids.len(), self.ids.table.probe(w)));
                ids.push(self.unk_id);
                // Within a record too: one `--whole` record holds every word of the input.
                if pending.len() >= PENDING {
                    unknown += self.resolve(&mut pending, ids);
                }
            });
            ends.push(ids.len());
        }
        unknown += self.resolve(&mut pending, ids);
        unknown
    }

    /// Looks up the pending words, writes their ids in place (unknown words keep
    /// `[UNK]`'s id) and returns how many were unknown.
    fn resolve(&self, pending: &mut Vec<(usize, Probe)>, ids: &mut [u32]) -> u64 {
        let (table, words) = (&self.ids.table, &self.ids.words);
        let mut unknown = 0;
        for group in pending.chunks(GROUP) {
            let touched = (group.iter()).fold(0u32, |acc, (_, p)| acc.wrapping_add(table.touch(p)));
            std::hint::black_box(touched);
            for (at, probe) in group {
                match table.find(probe, words) {
                    Some(id) => ids[*at] = id,
                    None => unknown += 1,
                }
            }
        }
        pending.clear();
        unknown
    }
}

/// How many words wait for the table before the encoder looks them up.
const PENDING: usize = 512;

impl std::fmt::Debug for WordEncoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WordEncoder")
            .field("words", &self.ids.len())
            .field("unk_id", &self.unk_id)
            .finish()
    }
}
