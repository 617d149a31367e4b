//! `bpe-decode`'s work, from a [`DecodeConfig`] to bytes on a writer: id streams go to
//! the stream engine ([`crate::decode::stream`]), token files (llm.c, Megatron, raw ids)
//! are read as records ([`crate::format::tokens`]) and decoded piece by piece.

use std::io::Write;

use crate::decode::stream::{self, StreamDecoder, DECODE_RUN};
use crate::error::{Error, Result};
use crate::format::tokens::{self, Boundary, Format, Input, Kind};
use crate::input::{self, Source};
use crate::model::Model;

/// What `bpe-decode` was asked to do.
pub struct DecodeConfig {
    /// `-m MODEL`, if given: every header in the stream must name this model.
    pub model: Option<Model>,
    /// `--whole`: write bytes only, no newline after each record.
    pub whole: bool,
    /// Read files without memory-mapping them.
    pub no_mmap: bool,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// `--line-buffered`: decode the lines of a stream as soon as they arrive.
    pub line_buffered: bool,
    /// `--format`: what the inputs are (default: detected; raw ids need it).
    pub format: Option<Format>,
    /// `--eot TOKEN` / `--bos TOKEN`: token files' records end / start at this id.
    pub eot: Option<String>,
    pub bos: Option<String>,
}

/// Decodes `sources` to `out`: id streams, whose header lines select the model of the
/// records after them (or, with `-m`, must name it; without either, `o200k_base`), or
/// token files, decoded with `-m` (or `o200k_base`): each record's bytes, then a newline
/// unless `--whole`. An error names its line (token files: its token), after everything
/// before it is written.
pub fn decode(config: DecodeConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let mut inputs = Vec::with_capacity(sources.len());
    for source in sources {
        let kind = tokens::detect(source, config.format)?;
        inputs.push(Input {
            source: source.clone(),
            kind,
        });
    }
    let streams = inputs.iter().filter(|i| i.kind == Kind::Ndjson).count();
    if streams == inputs.len() {
        if config.eot.is_some() || config.bos.is_some() {
            return Err(Error::usage(
                "--eot and --bos apply to token files (the records of an id stream are its lines)",
            ));
        }
        let mut decoder = StreamDecoder::new(config.model, config.whole, config.threads);
        return input::for_each_run(
            sources,
            config.no_mmap,
            DECODE_RUN,
            config.line_buffered,
            &mut |file, run| decode_run(&mut decoder, file, run, out),
        );
    }
    if streams > 0 {
        let (stream, file) = match inputs.iter().position(|i| i.kind == Kind::Ndjson) {
            Some(k) if k > 0 => (&inputs[k], &inputs[0]),
            _ => (&inputs[0], &inputs[inputs.len() - 1]),
        };
        return Err(Error::usage(format!(
            "{} is an id stream but {} is a token file ({}): decode them separately",
            stream.source.name,
            file.source.name,
            file.kind.format().name()
        )));
    }
    let model = match config.model {
        Some(model) => model,
        None => crate::format::load(crate::format::DEFAULT_MODEL, None)?,
    };
    let boundary = match (&config.eot, &config.bos) {
        (Some(_), Some(_)) => return Err(Error::usage("give --eot or --bos, not both")),
        (Some(eot), None) => Boundary::Eot(tokens::resolve_token(&model, "--eot", eot)?),
        (None, Some(bos)) => Boundary::Bos(tokens::resolve_token(&model, "--bos", bos)?),
        (None, None) => Boundary::None,
    };
    stream::decode_token_files(&model, config.whole, &inputs, boundary, config.no_mmap, out)
}

/// [`decode`] of one stream from `reader`, named `name`, read in runs of about `run`
/// bytes (a longer line in parts): how the tool reads a pipe, with the run size as a
/// parameter, so that tests and fuzzing can reach the reading of long lines in parts
/// with small inputs.
#[doc(hidden)]
pub fn decode_reader(
    config: DecodeConfig,
    name: &str,
    reader: Box<dyn std::io::BufRead + '_>,
    run: usize,
    out: &mut dyn Write,
) -> Result<()> {
    let mut decoder = StreamDecoder::new(config.model, config.whole, config.threads);
    input::for_each_run_of(name, reader, run, config.line_buffered, &mut |file, run| {
        decode_run(&mut decoder, file, run, out)
    })
}

fn decode_run(
    decoder: &mut StreamDecoder,
    file: &str,
    run: input::Run,
    out: &mut dyn Write,
) -> Result<usize> {
    match run {
        input::Run::Lines(first, lines) => decoder.run(file, first, lines, out).map(|()| 0),
        input::Run::Part {
            line,
            bytes,
            first,
            last,
        } => decoder.part(file, line, bytes, first, last, out),
    }
}
