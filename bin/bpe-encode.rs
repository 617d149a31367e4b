//! bpe-encode: turns text into token ids (NDJSON records) with a BPE or word model.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs};
use toksuite::cmd::encode::{self, EncodeConfig};
use toksuite::encode::AllowedSpecial;
use toksuite::format;
use toksuite::format::tokens::Format;
use toksuite::pretokenize;

// Out of memory is `TOOL: error: out of memory ...` and exit 1, not an abort.
#[global_allocator]
static ALLOC: cli::ExitOnOom = cli::ExitOnOom;

const EXAMPLES: &str = "\
Examples:
  echo 'hello world' | bpe-encode
  echo 'some text' | bpe-encode -m merges.json | bpe-decode
  bpe-encode -m tokenizer.json --allowed-special all chat.txt
  bpe-encode -m cl100k_base --count --whole book.txt
  bpe-encode --field text --format megatron --eot '<|endoftext|>' -o data/corpus docs.jsonl
  bpe-encode -m r50k_base --field text --format u16 --eot '<|endoftext|>' -o train.bin docs.jsonl
  bpe-encode -m r50k_base --field text --format llmc --bos '<|endoftext|>' --shard-tokens 100000000 -o data/fineweb docs.jsonl
  bpe-encode -m r50k_base --whole --format llmc book.txt | bpe-decode -m r50k_base --whole
  echo 'Life is short eat dessert first' | bpe-encode -m words.json | attn
  bpe-encode --model-pipe -m <(zcat merges.json.gz) book.txt";

/// Encode text into token ids: one NDJSON array per input line (or per input, --whole, or
/// per JSONL document, --field), or a token file for LLM trainers (--format).
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

    /// Read JSONL: each line is a JSON object, and the string value of its member NAME is
    /// one record, exactly (newlines included)
    #[arg(long, value_name = "NAME")]
    field: Option<String>,

    /// With --field: skip lines without a usable NAME (blank, bad JSON, missing, null, not
    /// a string) and count them on standard error, instead of stopping at the first
    #[arg(long)]
    skip_invalid: bool,

    /// Output: ndjson (id arrays), u16 or u32 (raw little-endian ids), llmc (llm.c's
    /// header and uint16 ids), megatron (PREFIX.bin and PREFIX.idx, with -o PREFIX)
    #[arg(long, value_name = "FORMAT", default_value = "ndjson",
          value_parser = clap::builder::PossibleValuesParser::new(Format::NAMES))]
    format: String,

    /// Write TOKEN (a special token's text, a token, or an id) after each record
    /// (nanoGPT, Megatron's --append-eod; Megatron: not after an empty document)
    #[arg(long, value_name = "TOKEN")]
    eot: Option<String>,

    /// Write TOKEN (a special token's text, a token, or an id) before each record
    /// (llm.c's FineWeb files)
    #[arg(long, value_name = "TOKEN")]
    bos: Option<String>,

    /// --format llmc: write shards of N tokens each, -o PREFIX giving PREFIX_000000.bin,
    /// PREFIX_000001.bin, ... (a document is cut where a shard fills, as llm.c does)
    #[arg(long, value_name = "N")]
    shard_tokens: Option<u64>,

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
        let model = format::load_with(&args.model, split, args.model_pipe.into())?;
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
            field: args.field.clone(),
            skip_invalid: args.skip_invalid,
            format: Format::parse(&args.format).unwrap_or(Format::Ndjson),
            eot: args.eot.clone(),
            bos: args.bos.clone(),
            shard_tokens: args.shard_tokens,
            output: args.common.output.clone(),
        };
        let result = encode::encode(&config, &sources);
        // The process ends here: freeing a large model word by word (a 540k-word model
        // is 540k allocations) costs more than the system reclaiming it at exit.
        std::mem::forget(config);
        let report = result?;
        if report.skipped.lines > 0 {
            let field = args.field.as_deref().unwrap_or_default();
            cli::stderr_line(format_args!(
                "bpe-encode: {}",
                report.skipped.summary(field)
            ));
        }
        if args.stats {
            cli::stderr_line(format_args!("bpe-encode: {}", report.stats.summary()));
        }
        Ok(())
    })
}
