//! The suite's file and stream formats, read and written in one place: model files
//! (BPE and word), tiktoken rank files, id streams, JSONL documents and token files.
//! Their normative description is `docs/formats.md`; this module also resolves
//! `-m MODEL` to a model.

pub mod ids;
pub(crate) mod json;
pub mod jsonl;
pub mod model_file;
pub mod tiktoken;
pub mod tokens;
pub mod word_file;

use std::fs;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::identity::{sha256_hex, ModelSource};
use crate::input::{self, Source};
use crate::model::Model;
use crate::pretokenize::SplitSpec;

/// The name of the default model of `bpe-encode` and `bpe-decode`.
pub const DEFAULT_MODEL: &str = "o200k_base";

/// Loads `-m MODEL`: a built-in name, a tiktoken rank file (`*.tiktoken`, split by
/// `tiktoken_split`), or a model file.
pub fn load(spec: &str, tiktoken_split: Option<SplitSpec>) -> Result<Model> {
    if let Some(model) = crate::model::builtin(spec) {
        return Ok(Model::Bpe(model));
    }
    let path = Path::new(spec);
    // A bare name that is no file was most likely meant as a built-in: say which exist.
    if !spec.contains(['/', '.'])
        && fs::symlink_metadata(path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    {
        return Err(Error::data(format!(
            "no such file, and not a built-in model ({})",
            crate::model::BUILTINS.join(", ")
        ))
        .in_file(spec));
    }
    let source = Source::file(path);
    let data = input::read_source(&source, false)?;
    let named = |sha256| ModelSource::File {
        name: spec.to_string(),
        sha256,
    };
    if spec.ends_with(".tiktoken") {
        let model =
            tiktoken::load_rank_file(&data, named(sha256_hex(&data)), tiktoken_split, vec![])
                .map_err(|e| e.in_file(spec))?;
        return Ok(Model::Bpe(model));
    }
    let (model, sha256) =
        model_file::parse_beside(&data, named(String::new()), spec, || sha256_hex(&data));
    let mut model = model?;
    match &mut model {
        Model::Bpe(bpe) => bpe.source = named(sha256),
        Model::Word(word) => word.source = named(sha256),
    }
    Ok(model)
}
