//! The suite's file and stream formats, read and written in one place: model files
//! (BPE and word), tiktoken rank files, and id streams. Their normative description is
//! `docs/formats.md`; this module also resolves `-m MODEL` to a model.

pub mod ids;
pub(crate) mod json;
pub mod model_file;
pub mod tiktoken;
pub mod word_file;

use std::fs;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::identity::{sha256_hex, ModelSource};
use crate::input;
use crate::model::Model;
use crate::pretokenize::SplitSpec;

/// The name of the default model of `bpe-encode` and `bpe-decode`.
pub const DEFAULT_MODEL: &str = "o200k_base";

/// The flag that lets `-m` name a pipe (see [`input::WholeFile::pipes`]).
pub const MODEL_PIPE_FLAG: &str = "--model-pipe";

/// How `-m MODEL` may be read.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// `--model-pipe`: a pipe (`-m <(zcat m.json.gz)`) is read, up to the size limit.
    pub pipes: bool,
}

/// Loads `-m MODEL`: a built-in name, a tiktoken rank file (`*.tiktoken`, split by
/// `tiktoken_split`), or a model file (a regular file of at most
/// [`input::MODEL_FILE_LIMIT`] bytes).
pub fn load(spec: &str, tiktoken_split: Option<SplitSpec>) -> Result<Model> {
    load_with(spec, tiktoken_split, LoadOptions::default())
}

/// [`load`], with a pipe accepted when `options` says so.
pub fn load_with(
    spec: &str,
    tiktoken_split: Option<SplitSpec>,
    options: LoadOptions,
) -> Result<Model> {
    let rules = input::WholeFile {
        what: "model file",
        limit: input::MODEL_FILE_LIMIT,
        pipes: options.pipes,
        pipe_flag: Some(MODEL_PIPE_FLAG),
    };
    load_file(spec, tiktoken_split, &rules)
}

/// Loads the model an id stream's header names: a built-in by name; a file by its path
/// (relative to the current folder, as the encoder was given it) only when it is a
/// regular file within the size limit whose SHA-256 is the header's, checked by reading
/// it in small blocks before it is read whole. A header is data: it must not make a
/// tool read a device, wait on a FIFO, or hold a file that is not the model. Each error
/// says what the header names and what is wrong.
pub fn load_named(named: &ids::StreamModel) -> Result<Model> {
    let described = named.describe();
    let cannot = |e: Error| {
        Error::data(format!(
            "the stream names model {described}, which cannot be loaded ({e}); give it with -m"
        ))
    };
    if let Some(model) = crate::model::builtin(&named.name) {
        if named.sha256.is_some() {
            return Err(Error::data(format!(
                "the stream names built-in model {:?} with a \"sha256\" (built-in models have \
                 none, so the header was not written for it); give the model with -m",
                named.name
            )));
        }
        return Ok(Model::Bpe(model));
    }
    let Some(expected) = named.sha256.as_deref() else {
        return Err(Error::data(format!(
            "the stream names model {described} but no \"sha256\" of its file, so the file \
             cannot be checked (bpe-encode writes both; built-in models: {}); give the model \
             with -m",
            crate::model::BUILTINS.join(", ")
        )));
    };
    let rules = input::WholeFile {
        what: "model file named by a stream header",
        limit: input::MODEL_FILE_LIMIT,
        pipes: false,
        pipe_flag: None,
    };
    let path = Path::new(&named.name);
    if fs::symlink_metadata(path).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Err(cannot(
            Error::data("no such file in the current folder").in_file(&named.name),
        ));
    }
    let found = input::whole_file_sha256(path, &named.name, &rules).map_err(cannot)?;
    if found != expected {
        return Err(other_content(named));
    }
    let model = load_file(&named.name, None, &rules).map_err(cannot)?;
    if !ids::same_model(model.source(), named) {
        // Changed between the check and the reading.
        return Err(other_content(named));
    }
    Ok(model)
}

fn other_content(named: &ids::StreamModel) -> Error {
    Error::data(format!(
        "the stream names model {}, but that file now has other content; give the right \
         model with -m",
        named.describe()
    ))
}

fn load_file(
    spec: &str,
    tiktoken_split: Option<SplitSpec>,
    rules: &input::WholeFile,
) -> Result<Model> {
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
    let data = input::read_whole_file(path, spec, rules)?;
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
