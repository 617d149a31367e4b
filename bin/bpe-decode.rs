//! bpe-decode: turns token ids (NDJSON records) back into text.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::cmd::decode::{self, DecodeConfig};
use toksuite::format;
use toksuite::pretokenize;

const EXAMPLES: &str = "\
Examples:
  echo '[24912,2375]' | bpe-decode
  echo 'some text' | bpe-encode -m merges.json | bpe-decode
  bpe-encode --whole -m merges.json image.png | bpe-decode --whole > copy.png";

/// Decode token ids (one NDJSON array per line) back into bytes.
#[derive(Parser)]
#[command(name = "bpe-decode", version, after_help = EXAMPLES)]
struct Args {
    /// Model: a built-in name, or a model file, an HF tokenizer.json, a minbpe .model or a
    /// tiktoken rank file; default: the model the stream's header names, else o200k_base
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    model: Option<String>,

    /// Write each record's bytes only (default: each record followed by a newline)
    #[arg(long)]
    whole: bool,

    /// Split pattern for a tiktoken rank file (accepted for symmetry with bpe-encode)
    #[arg(long, value_name = "NAME|REGEX")]
    split: Option<String>,

    #[command(flatten)]
    threads: cli::ThreadsArg,

    #[command(flatten)]
    line_buffered: cli::LineBufferedArg,

    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>("bpe-decode") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("bpe-decode", || {
        let sources = toksuite::input::sources(&args.common.files)?;
        // Checked, but decoding needs no pattern: any model takes it, as before.
        if let Some(value) = &args.split {
            pretokenize::parse_split(value)?;
        }
        let model = match &args.model {
            Some(name) => Some(format::load(name, None)?),
            None => None,
        };
        let config = DecodeConfig {
            model,
            whole: args.whole,
            no_mmap: args.common.no_mmap,
            threads: args.threads.count(),
            line_buffered: args.line_buffered.line_buffered,
        };
        let mut out = Output::create(args.common.output.as_deref())?
            .line_buffered(args.line_buffered.line_buffered);
        let result = decode::decode(config, &sources, &mut out);
        out.finish_with(result)
    })
}
