//! bpe-decode: turns token ids (NDJSON records) back into text.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::cmd::decode::{self, DecodeConfig};
use toksuite::format;
use toksuite::format::tokens::Format;
use toksuite::pretokenize;

// Out of memory is `TOOL: error: out of memory ...` and exit 1, not an abort.
#[global_allocator]
static ALLOC: cli::ExitOnOom = cli::ExitOnOom;

const EXAMPLES: &str = "\
Examples:
  echo '[24912,2375]' | bpe-decode
  echo 'some text' | bpe-encode -m merges.json | bpe-decode
  bpe-encode --whole -m merges.json image.png | bpe-decode --whole > copy.png
  bpe-decode --eot '<|endoftext|>' data/corpus | head -n 3
  bpe-decode -m r50k_base --format u16 --eot '<|endoftext|>' train.bin | less
  bpe-encode -m r50k_base --field text --format llmc docs.jsonl | bpe-decode -m r50k_base";

/// Decode token ids (one NDJSON array per line, or a token file: llm.c, Megatron, raw)
/// back into bytes.
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

    /// Input format: ndjson, u16, u32 (raw ids: no magic says so), llmc, megatron (a
    /// PREFIX); default: llm.c and Megatron files are recognised, anything else is ndjson
    #[arg(long, value_name = "FORMAT",
          value_parser = clap::builder::PossibleValuesParser::new(Format::NAMES))]
    format: Option<String>,

    /// Token files: each record ends with TOKEN (a special token's text, a token, or an
    /// id), which is not written; without it a file (a Megatron document) is one record
    #[arg(long, value_name = "TOKEN")]
    eot: Option<String>,

    /// Token files: each record starts with TOKEN, which is not written
    #[arg(long, value_name = "TOKEN")]
    bos: Option<String>,

    #[command(flatten)]
    model_pipe: cli::ModelPipeArg,

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
            Some(name) => Some(format::load_with(name, None, args.model_pipe.into())?),
            None => None,
        };
        let config = DecodeConfig {
            model,
            whole: args.whole,
            no_mmap: args.common.no_mmap,
            threads: args.threads.count(),
            line_buffered: args.line_buffered.line_buffered,
            format: args.format.as_deref().and_then(Format::parse),
            eot: args.eot.clone(),
            bos: args.bos.clone(),
        };
        let mut out = Output::create(args.common.output.as_deref())?
            .line_buffered(args.line_buffered.line_buffered);
        let result = decode::decode(config, &sources, &mut out);
        out.finish_with(result)
    })
}
