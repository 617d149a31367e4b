//! Decoding: token ids back to bytes, for BPE and word models.

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
    let offsets = &model.token_offsets;
    for &id in ids {
        let i = id as usize;
        if i + 1 < offsets.len() {
            let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
            if start < end {
                out.extend_from_slice(&model.token_bytes[start..end]);
                continue;
            }
        }
        match model.specials.iter().find(|s| s.id == id) {
            Some(special) => out.extend_from_slice(special.text.as_bytes()),
            None => return Err(id),
        }
    }
    Ok(())
}

/// The vocabulary size shown in "not in the vocabulary" messages.
pub fn vocab_size(model: &Model) -> usize {
    match model {
        Model::Bpe(bpe) => bpe.vocab_size(),
        Model::Word(word) => word.unk_id as usize + 1,
    }
}
