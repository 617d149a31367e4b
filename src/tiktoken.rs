//! tiktoken rank files and the built-in GPT vocabularies (placeholder until the
//! encoder work lands).

use crate::error::{Error, Result};
use crate::model::{BpeModel, ModelSource, SpecialToken, SplitSpec};

/// The built-in model with this name.
pub fn builtin(_name: &str) -> Option<BpeModel> {
    None
}

/// Loads a tiktoken rank file.
pub fn load_rank_file(
    _bytes: &[u8],
    _source: ModelSource,
    _split: Option<SplitSpec>,
    _specials: Vec<SpecialToken>,
) -> Result<BpeModel> {
    Err(Error::data("tiktoken rank files are not supported yet"))
}
