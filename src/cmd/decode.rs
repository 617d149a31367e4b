//! `bpe-decode`'s work, from a [`DecodeConfig`] to bytes on a writer; the stream engine
//! is [`crate::decode::stream`].

use std::io::Write;

use crate::decode::stream::{StreamDecoder, DECODE_RUN};
use crate::error::Result;
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
}

/// Decodes id streams from `sources` to `out`. Header lines select the model of the
/// records after them (or, with `-m`, must name it); without either, `o200k_base`. An
/// error names its line, after everything before it is written.
pub fn decode(config: DecodeConfig, sources: &[Source], out: &mut dyn Write) -> Result<()> {
    let mut decoder = StreamDecoder::new(config.model, config.whole, config.threads);
    input::for_each_run(
        sources,
        config.no_mmap,
        DECODE_RUN,
        config.line_buffered,
        &mut |file, run| decode_run(&mut decoder, file, run, out),
    )
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
