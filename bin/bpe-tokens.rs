//! bpe-tokens: summarises and merges the token files bpe-encode writes (llm.c, Megatron,
//! raw ids).
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use toksuite::cli::{self, Output};
use toksuite::cmd::tokens::{self, InfoConfig, MergeConfig, TokensInput};
use toksuite::format;
use toksuite::format::tokens::Format;

const EXAMPLES: &str = "\
Examples:
  bpe-tokens info data/corpus
  bpe-tokens info -m r50k_base --eot '<|endoftext|>' --format u16 train.bin
  bpe-tokens merge -o data/corpus part-1 part-2 part-3
  bpe-tokens merge --shard-tokens 100000000 -o data/fineweb part-*.bin
  bpe-tokens merge --format u32 -o all.bin part-1.bin part-2.bin";

/// Summarise or merge token files (llm.c, Megatron .bin/.idx, raw u16/u32 ids).
#[derive(Parser)]
#[command(name = "bpe-tokens", version, after_help = EXAMPLES, arg_required_else_help = false)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

/// Flags both subcommands take.
#[derive(clap::Args)]
struct InputArgs {
    /// Input format: u16, u32 (raw ids: no magic says so), llmc, megatron (a PREFIX);
    /// default: llm.c and Megatron files are recognised
    #[arg(long, value_name = "FORMAT",
          value_parser = clap::builder::PossibleValuesParser::new(&Format::NAMES[1..]))]
    format: Option<String>,

    /// Read files normally instead of memory-mapping them
    #[arg(long = "no-mmap")]
    no_mmap: bool,

    /// Token files: FILE, or a Megatron PREFIX (PREFIX.idx and PREFIX.bin)
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Print one JSON line per file: format, dtype, tokens, documents, largest id
    ///
    /// The line also counts sequences and empty documents, after checking the file's
    /// header, index and size.
    #[command(after_help = EXAMPLES)]
    Info {
        /// Count the records of raw and llm.c files as ending with TOKEN (a special
        /// token's text, a token, or an id)
        #[arg(long, value_name = "TOKEN")]
        eot: Option<String>,

        /// Count the records of raw and llm.c files as starting with TOKEN
        #[arg(long, value_name = "TOKEN")]
        bos: Option<String>,

        /// The model that names --eot/--bos tokens given as text (default o200k_base)
        #[arg(short = 'm', long = "model", value_name = "MODEL")]
        model: Option<String>,

        #[command(flatten)]
        input: InputArgs,
    },
    /// Combine the token files of runs over consecutive parts of a corpus into one
    ///
    /// The result is the dataset one run over the whole corpus writes, byte for byte
    /// (Megatron: one .bin/.idx pair; llm.c: one file, or shards; raw: concatenated).
    #[command(after_help = EXAMPLES)]
    Merge {
        /// The merged dataset: FILE, or a PREFIX (Megatron; llm.c with --shard-tokens)
        #[arg(
            short = 'o',
            long = "output",
            value_name = "FILE|PREFIX",
            required = true
        )]
        output: PathBuf,

        /// llm.c: write shards of N tokens each, PREFIX_000000.bin, ...
        #[arg(long, value_name = "N")]
        shard_tokens: Option<u64>,

        #[command(flatten)]
        input: InputArgs,
    },
}

impl InputArgs {
    fn config(&self) -> TokensInput {
        TokensInput {
            format: self.format.as_deref().and_then(Format::parse),
            no_mmap: self.no_mmap,
        }
    }
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>("bpe-tokens") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("bpe-tokens", || match &args.command {
        Command::Info {
            eot,
            bos,
            model,
            input,
        } => {
            let sources = toksuite::input::sources(&input.files)?;
            let model = match model {
                Some(name) => Some(format::load(name, None)?),
                None => None,
            };
            let config = InfoConfig {
                input: input.config(),
                eot: eot.clone(),
                bos: bos.clone(),
                model,
            };
            let mut out = Output::create(None)?;
            let result = tokens::info(config, &sources, &mut out);
            out.finish_with(result)
        }
        Command::Merge {
            output,
            shard_tokens,
            input,
        } => {
            let sources = toksuite::input::sources(&input.files)?;
            let config = MergeConfig {
                input: input.config(),
                output: output.clone(),
                shard_tokens: *shard_tokens,
            };
            tokens::merge(config, &sources).map(|_| ())
        }
    })
}
