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
