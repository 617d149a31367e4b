//! Word-based tokenizer (placeholder until the word work lands).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::model::{ModelSource, WordModel};

/// Parses the lines of a word model file after its header.
pub fn parse_model(
    _header: &Map<String, Value>,
    _lines: &mut dyn Iterator<Item = (u64, &[u8])>,
    _source: ModelSource,
    file: &str,
) -> Result<WordModel> {
    Err(Error::data("word models are not supported yet").in_file(file))
}

/// Appends the words of `ids` joined by single spaces; `Err(id)` for an unknown id.
pub fn decode(_model: &WordModel, ids: &[u32], _out: &mut Vec<u8>) -> std::result::Result<(), u32> {
    Err(ids.first().copied().unwrap_or(0))
}

/// Learns a word vocabulary.
pub fn train(_text: &[u8], _vocab_size: Option<usize>, _threads: usize) -> Result<WordModel> {
    Err(Error::data("word models are not supported yet"))
}

/// Writes a word model file.
pub fn write_model(_w: &mut dyn std::io::Write, _model: &WordModel) -> std::io::Result<()> {
    Ok(())
}

/// Encodes one record.
pub fn encode(_model: &WordModel, _record: &[u8], _out: &mut Vec<u32>) {}
