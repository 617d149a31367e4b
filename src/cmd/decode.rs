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
    input::for_each_line_run(
        sources,
        config.no_mmap,
        DECODE_RUN,
        config.line_buffered,
        &mut |file, first, run| decoder.run(file, first, run, out),
    )
}
