//! The suite's file and stream formats, read and written in one place: model files
//! (BPE and word), the model formats of the libraries the field uses (tiktoken rank
//! files, HF `tokenizer.json`, minbpe `.model`), id streams, JSONL documents, token files
//! (the binary id files LLM trainers read) and counts files (chunk counts of a corpus or a
//! shard, for training past one machine). Their normative description is
//! `docs/formats.md`. This module also resolves `-m MODEL` to a model, telling the formats
//! apart by content: a JSON object whose first key is one `tokenizers` writes is a
//! `tokenizer.json`, a first line `minbpe v1` a minbpe file, a first line `base64 number` a
//! rank file, anything else a model file (and the file name's extension decides only when
//! the content says nothing).

pub mod counts;
pub(crate) mod hf;
pub(crate) mod ids;
pub(crate) mod json;
pub mod jsonl;
pub(crate) mod minbpe;
pub(crate) mod model_file;
pub(crate) mod tiktoken;
pub mod tokens;
pub(crate) mod word_file;

use std::fs;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};
use crate::identity::{sha256_hex, ModelSource};
use crate::input;
use crate::model::{Model, SpecialToken};
use crate::pretokenize::SplitSpec;

/// The name of the default model of `bpe-encode` and `bpe-decode`.
pub const DEFAULT_MODEL: &str = "o200k_base";

/// The formats a model can be read from (and, but for the built-ins, written to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFormat {
    /// A model compiled into the binaries.
    Builtin,
    /// The suite's own model file (NDJSON).
    Ndjson,
    /// HF tokenizers' `tokenizer.json`.
    Hf,
    /// A tiktoken rank file.
    Tiktoken,
    /// A minbpe `.model` file.
    Minbpe,
}

impl ModelFormat {
    /// The name `bpe-model` uses for the format.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ModelFormat::Builtin => "builtin",
            ModelFormat::Ndjson => "ndjson",
            ModelFormat::Hf => "hf",
            ModelFormat::Tiktoken => "tiktoken",
            ModelFormat::Minbpe => "minbpe",
        }
    }
}

/// A model as loaded: the model, the format it was read from, and notes on what the
/// source library does that the suite's ids do not show (see [`hf`], [`minbpe`]).
#[derive(Debug)]
pub struct Loaded {
    pub model: Model,
    pub(crate) format: ModelFormat,
    pub(crate) notes: Vec<String>,
}

/// What a rank file needs beside it: the split pattern and the special tokens (tiktoken's
/// `pat_str` and `special_tokens`). Other formats carry their own, and refuse these.
#[derive(Debug, Clone, Default)]
pub struct RankFileOptions {
    /// `--split` (`None`: each record is one sequence, or no `--split` was given).
    pub split: Option<SplitSpec>,
    pub specials: Vec<SpecialToken>,
}

/// The flag that lets `-m` name a pipe (see [`input::WholeFile::pipes`]).
const MODEL_PIPE_FLAG: &str = "--model-pipe";

/// How `-m MODEL` may be read.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// `--model-pipe`: a pipe (`-m <(zcat m.json.gz)`) is read, up to the size limit.
    pipes: bool,
}

impl From<crate::cli::ModelPipeArg> for LoadOptions {
    fn from(arg: crate::cli::ModelPipeArg) -> LoadOptions {
        LoadOptions {
            pipes: arg.model_pipe,
        }
    }
}

/// Loads `-m MODEL`: a built-in name, or a file of any format the suite reads (a model
/// file, a tiktoken rank file split by `tiktoken_split`, an HF `tokenizer.json`, a minbpe
/// `.model`), told apart by content. Files are read only when they are regular files of
/// at most [`input::MODEL_FILE_LIMIT`] bytes.
pub fn load(spec: &str, tiktoken_split: Option<SplitSpec>) -> Result<Model> {
    load_with(spec, tiktoken_split, LoadOptions::default())
}

/// [`load`], with a pipe accepted when `options` says so.
pub fn load_with(
    spec: &str,
    tiktoken_split: Option<SplitSpec>,
    options: LoadOptions,
) -> Result<Model> {
    let rank = RankFileOptions {
        split: tiktoken_split,
        specials: Vec::new(),
    };
    Ok(open_with(spec, &rank, options)?.model)
}

/// Loads `-m MODEL` as [`load`] does, saying which format it was and with its notes.
/// `options` apply to a rank file only: given for another format, they are a usage error.
pub(crate) fn open(spec: &str, options: &RankFileOptions) -> Result<Loaded> {
    open_with(spec, options, LoadOptions::default())
}

/// [`open`], with a pipe accepted when `load` says so.
pub(crate) fn open_with(
    spec: &str,
    options: &RankFileOptions,
    load: LoadOptions,
) -> Result<Loaded> {
    let rules = input::WholeFile {
        what: "model file",
        limit: input::MODEL_FILE_LIMIT,
        pipes: load.pipes,
        pipe_flag: Some(MODEL_PIPE_FLAG),
    };
    open_file(spec, options, &rules)
}

/// Loads the model an id stream's header names: a built-in by name; a file by its path
/// (relative to the current folder, as the encoder was given it) only when it is a
/// regular file within the size limit whose SHA-256 is the header's, checked by reading
/// it in small blocks before it is read whole. A header is data: it must not make a
/// tool read a device, wait on a FIFO, or hold a file that is not the model. Each error
/// says what the header names and what is wrong.
pub(crate) fn load_named(named: &ids::StreamModel) -> Result<Model> {
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
    let model = open_file(&named.name, &RankFileOptions::default(), &rules)
        .map_err(cannot)?
        .model;
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

fn open_file(spec: &str, options: &RankFileOptions, rules: &input::WholeFile) -> Result<Loaded> {
    if let Some(model) = crate::model::builtin(spec) {
        rank_options_unused(options, spec, "a built-in model")?;
        return Ok(Loaded {
            model: Model::Bpe(model),
            format: ModelFormat::Builtin,
            notes: Vec::new(),
        });
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
    parse(&data, spec, options)
}

/// Which format `data` is in, by its content; by the file name's extension when the
/// content says nothing (an empty or damaged file, whose parser then names the problem).
pub(crate) fn detect(data: &[u8], name: &str) -> ModelFormat {
    if hf::looks_like(data) {
        ModelFormat::Hf
    } else if minbpe::looks_like(data) {
        ModelFormat::Minbpe
    } else if tiktoken::looks_like(data) {
        ModelFormat::Tiktoken
    } else if data.first() == Some(&b'{') || data.starts_with(json::BOM) {
        ModelFormat::Ndjson
    } else if name.ends_with(".tiktoken") {
        ModelFormat::Tiktoken
    } else if name.ends_with(".model") {
        ModelFormat::Minbpe
    } else {
        ModelFormat::Ndjson
    }
}

/// Parses the bytes of a model file named `name` (for messages and the id-stream header),
/// whatever its format.
pub fn parse(data: &[u8], name: &str, options: &RankFileOptions) -> Result<Loaded> {
    let named = |sha256| ModelSource::File {
        name: name.to_string(),
        sha256,
    };
    let format = detect(data, name);
    let (model, notes) = match format {
        ModelFormat::Tiktoken => {
            let model = tiktoken::load_rank_file(
                data,
                named(sha256_hex(data)),
                options.split.clone(),
                options.specials.clone(),
            )
            .map_err(|e| e.in_file(name))?;
            (Model::Bpe(model), Vec::new())
        }
        ModelFormat::Hf | ModelFormat::Minbpe => {
            rank_options_unused(options, name, "this file")?;
            let (result, sha256) = crate::parallel::both(
                true,
                || match format {
                    ModelFormat::Hf => hf::read(data, named(String::new()), name),
                    _ => minbpe::read(data, named(String::new()), name),
                },
                || sha256_hex(data),
            );
            let (mut model, notes) = result?;
            model.source = named(sha256);
            (Model::Bpe(model), notes)
        }
        ModelFormat::Ndjson | ModelFormat::Builtin => {
            rank_options_unused(options, name, "a model file")?;
            let (model, sha256) =
                model_file::parse_beside(data, named(String::new()), name, || sha256_hex(data));
            let mut model = model?;
            match &mut model {
                Model::Bpe(bpe) => bpe.source = named(sha256),
                Model::Word(word) => word.source = named(sha256),
            }
            (model, Vec::new())
        }
    };
    Ok(Loaded {
        model,
        format,
        notes,
    })
}

/// `--split` and `--special` are for rank files, which carry neither; every other model
/// carries its own.
fn rank_options_unused(options: &RankFileOptions, name: &str, what: &str) -> Result<()> {
    if options.split.is_some() {
        return Err(Error::usage(format!(
            "--split applies only to tiktoken rank files, and {name} is {what}, which carries its \
             own pattern"
        )));
    }
    if !options.specials.is_empty() {
        return Err(Error::usage(format!(
            "--special applies only to tiktoken rank files, and {name} is {what}, which carries \
             its own special tokens"
        )));
    }
    Ok(())
}
