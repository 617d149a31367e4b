//! `bpe-tokens`' work: `info` summarises token files (format, dtype, tokens, documents,
//! largest id), `merge` combines the token files of several runs over consecutive parts
//! of a corpus into the dataset a single run writes. The formats themselves are
//! [`crate::format::tokens`].

use std::io::Write;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::tokens::{self, Boundary, Format, Input, Kind};
use crate::input::Source;
use crate::model::Model;

/// How the inputs are read.
pub struct TokensInput {
    /// `--format`: what the inputs are (default: detected; raw ids need it).
    pub format: Option<Format>,
    pub no_mmap: bool,
}

/// What `bpe-tokens info` was asked to do.
pub struct InfoConfig {
    pub input: TokensInput,
    /// `--eot` / `--bos`: count the records of raw and llm.c files cut at this token.
    pub eot: Option<String>,
    pub bos: Option<String>,
    /// The model that names `--eot`/`--bos` tokens given as text.
    pub model: Option<Model>,
}

/// What `bpe-tokens merge` was asked to do.
pub struct MergeConfig {
    pub input: TokensInput,
    /// `-o`: a FILE, or a Megatron PREFIX, or the PREFIX of llm.c shards.
    pub output: PathBuf,
    pub shard_tokens: Option<u64>,
}

/// The token files among `sources`, with their kinds; an id stream is an error.
fn token_inputs(sources: &[Source], input: &TokensInput) -> Result<Vec<Input>> {
    let mut inputs = Vec::with_capacity(sources.len());
    for source in sources {
        if source.is_stdin() && input.format.is_none() {
            return Err(Error::usage(
                "bpe-tokens reads named files (standard input has no magic to tell its format \
                 by: give --format u16|u32|llmc)",
            ));
        }
        let kind = tokens::detect(source, input.format)?;
        if kind == Kind::Ndjson {
            return Err(Error::data(
                "not a token file (no llm.c or Megatron magic); give --format u16|u32 for raw ids",
            )
            .in_file(&source.name));
        }
        inputs.push(Input {
            source: source.clone(),
            kind,
        });
    }
    Ok(inputs)
}

/// Writes one JSON line per input to `out` (see [`tokens::Summary::json_line`]).
pub fn info(config: InfoConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let inputs = token_inputs(sources, &config.input)?;
    let boundary = match (&config.eot, &config.bos) {
        (None, None) => Boundary::None,
        (Some(_), Some(_)) => return Err(Error::usage("give --eot or --bos, not both")),
        (eot, bos) => {
            let model = match config.model {
                Some(model) => model,
                None => crate::format::load(crate::format::DEFAULT_MODEL, None)?,
            };
            match (eot, bos) {
                (Some(eot), _) => Boundary::Eot(tokens::resolve_token(&model, "--eot", eot)?),
                (_, Some(bos)) => Boundary::Bos(tokens::resolve_token(&model, "--bos", bos)?),
                _ => Boundary::None,
            }
        }
    };
    for input in &inputs {
        let summary = tokens::summarize(input, boundary, config.input.no_mmap)?;
        let mut line = summary.json_line();
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(Error::write)?;
    }
    Ok(())
}

/// Merges `sources` into `config.output`; returns the tokens written.
pub fn merge(config: MergeConfig, sources: &[Source]) -> Result<u64> {
    let inputs = token_inputs(sources, &config.input)?;
    tokens::merge(
        &inputs,
        &config.output,
        config.shard_tokens,
        config.input.no_mmap,
    )
}
