//! bpe-encode: turns text into token ids (NDJSON records) with a BPE or word model.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::cmd::encode::{self, EncodeConfig};
use toksuite::encode::AllowedSpecial;
use toksuite::format;
use toksuite::pretokenize;

const EXAMPLES: &str = "\
Examples:
  echo 'hello world' | bpe-encode
  echo 'some text' | bpe-encode -m merges.json | bpe-decode
  bpe-encode -m tokenizer.json --allowed-special all chat.txt
  bpe-encode -m cl100k_base --count --whole book.txt
  echo 'Life is short eat dessert first' | bpe-encode -m words.json | attn";

/// Encode text into token ids: one NDJSON array per input line (or per input, --whole).
#[derive(Parser)]
#[command(name = "bpe-encode", version, after_help = EXAMPLES)]
struct Args {
    /// Model: a built-in name (o200k_base, cl100k_base, p50k_base, r50k_base), or a model
    /// file, an HF tokenizer.json, a minbpe .model or a tiktoken rank file (told apart by
    /// content)
    #[arg(short = 'm', long = "model", value_name = "MODEL", default_value = format::DEFAULT_MODEL)]
    model: String,

    /// The whole input is one record (default: each line is a record)
    #[arg(long)]
    whole: bool,

    /// Write the number of tokens of each record instead of the ids (with --whole, one total)
    #[arg(long)]
    count: bool,

    /// Leave out the header line that names the model
    #[arg(long)]
    no_header: bool,

    /// Print records, tokens, bytes per token (and the unknown-word rate of word models)
    /// to standard error at the end
    #[arg(long)]
    stats: bool,

    /// Recognise special tokens in the text: all, or a comma-separated list (default: none,
    /// special tokens are ordinary text)
    #[arg(long, value_name = "all|TOKEN[,TOKEN]")]
    allowed_special: Option<String>,

    /// Split pattern for a tiktoken rank file: a preset name or a regex
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
    let args = match cli::parse_args::<Args>("bpe-encode") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("bpe-encode", || {
        let sources = toksuite::input::sources(&args.common.files)?;
        let split = match &args.split {
            Some(value) => pretokenize::parse_split(value)?,
            None => None,
        };
        let model = format::load(&args.model, split)?;
        let allowed_special = match args.allowed_special.as_deref() {
            None => AllowedSpecial::None,
            Some("all") => AllowedSpecial::All,
            Some(list) => AllowedSpecial::Some(list.split(',').map(str::to_string).collect()),
        };
        let config = EncodeConfig {
            model,
            whole: args.whole,
            count: args.count,
            header: !args.no_header,
            allowed_special,
            threads: args.threads.count(),
            no_mmap: args.common.no_mmap,
            line_buffered: args.line_buffered.line_buffered,
        };
        let mut out = Output::create(args.common.output.as_deref())?
            .line_buffered(args.line_buffered.line_buffered);
        let result = encode::encode(&config, &sources, &mut out);
        // The process ends here: freeing a large model word by word (a 540k-word model
        // is 540k allocations) costs more than the system reclaiming it at exit.
        std::mem::forget(config);
        let stats = out.finish_with(result)?;
        if args.stats {
            cli::stderr_line(format_args!("bpe-encode: {}", stats.summary()));
        }
        Ok(())
    })
}
