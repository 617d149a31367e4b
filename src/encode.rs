//! BPE encoding (placeholder: the seed's naive algorithm, until the fast encoder lands).

use crate::error::Result;
use crate::model::BpeModel;
use crate::pretokenize::Splitter;

/// Which special tokens are recognised in the text (tiktoken's `allowed_special`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedSpecial {
    None,
    All,
    Some(Vec<String>),
}

/// An encoder for one model.
pub struct Encoder<'m> {
    model: &'m BpeModel,
    splitter: Option<Splitter>,
}

impl<'m> Encoder<'m> {
    /// Prepares an encoder.
    pub fn new(model: &'m BpeModel, _allowed: &AllowedSpecial) -> Result<Encoder<'m>> {
        let splitter = match &model.split {
            Some(spec) => Some(Splitter::new(spec)?),
            None => None,
        };
        Ok(Encoder { model, splitter })
    }

    /// Encodes one record, appending ids.
    pub fn encode(&self, text: &[u8], out: &mut Vec<u32>) {
        match &self.splitter {
            Some(splitter) => splitter.split(text, &mut |chunk| self.encode_chunk(chunk, out)),
            None => self.encode_chunk(text, out),
        }
    }

    /// Encodes one large record using several threads.
    pub fn encode_whole_parallel(&self, text: &[u8], _threads: usize, out: &mut Vec<u32>) {
        self.encode(text, out)
    }

    fn encode_chunk(&self, chunk: &[u8], out: &mut Vec<u32>) {
        let mut ids: Vec<u32> = chunk
            .iter()
            .map(|&b| self.model.base_id_of_byte[b as usize])
            .collect();
        while ids.len() >= 2 {
            let best = ids
                .windows(2)
                .filter_map(|w| self.model.merge_ids.get(&(w[0], w[1])).copied())
                .min();
            let Some(new_id) = best else { break };
            let mut merged = Vec::with_capacity(ids.len());
            let mut i = 0;
            while i < ids.len() {
                if i + 1 < ids.len()
                    && self.model.merge_ids.get(&(ids[i], ids[i + 1])) == Some(&new_id)
                {
                    merged.push(new_id);
                    i += 2;
                } else {
                    merged.push(ids[i]);
                    i += 1;
                }
            }
            ids = merged;
        }
        out.extend_from_slice(&ids);
    }
}

/// Encodes many records, preserving order.
pub fn encode_batch(enc: &Encoder, records: &[&[u8]], _threads: usize) -> Vec<Vec<u32>> {
    records
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            enc.encode(r, &mut out);
            out
        })
        .collect()
}
