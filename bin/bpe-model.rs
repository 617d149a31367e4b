//! bpe-model: converts BPE models between the suite's model files, HF tokenizer.json,
//! tiktoken rank files and minbpe .model files, exactly, and describes them.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use toksuite::cli::{self, Output, OutputArg};
use toksuite::cmd::model::{self, ModelCommand, ModelConfig};
use toksuite::format::{ModelFormat, RankFileOptions};
use toksuite::model::SpecialToken;
use toksuite::pretokenize;

const EXAMPLES: &str = "\
Examples:
  bpe-model convert --to hf -m merges.json -o tokenizer.json
  bpe-model convert --to ndjson -m tokenizer.json -o merges.json
  bpe-model convert --to tiktoken -m o200k_base -o o200k_base.tiktoken
  bpe-model convert --to minbpe -m merges.json -o toy.model
  bpe-model convert --to ndjson -m ranks.tiktoken --split gpt4 --special '<|endoftext|>=100257'
  bpe-model info -m tokenizer.json | jq .merges";

/// Convert BPE models between formats, exactly, or describe one.
#[derive(Parser)]
#[command(name = "bpe-model", version, after_help = EXAMPLES)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the model in another format, exactly (or refuse, saying why)
    #[command(after_help = EXAMPLES)]
    Convert {
        /// The format to write: hf (tokenizer.json), tiktoken (rank file), minbpe (.model),
        /// ndjson (the suite's model file)
        #[arg(long = "to", value_name = "FORMAT")]
        to: Target,

        #[command(flatten)]
        model: ModelArgs,

        #[command(flatten)]
        output: OutputArg,
    },
    /// Describe the model as one JSON object
    #[command(after_help = EXAMPLES)]
    Info {
        #[command(flatten)]
        model: ModelArgs,

        #[command(flatten)]
        output: OutputArg,
    },
}

/// The formats `convert` writes.
#[derive(Clone, Copy, ValueEnum)]
enum Target {
    Hf,
    Tiktoken,
    Minbpe,
    Ndjson,
}

#[derive(clap::Args)]
struct ModelArgs {
    /// Model: a built-in name (o200k_base, cl100k_base, p50k_base, r50k_base), or a model
    /// file, an HF tokenizer.json, a minbpe .model or a tiktoken rank file (told apart by
    /// content); - reads standard input
    #[arg(short = 'm', long = "model", value_name = "MODEL")]
    model: String,

    /// Split pattern of a tiktoken rank file (which holds none): a preset name or a regex
    #[arg(long, value_name = "NAME|REGEX")]
    split: Option<String>,

    /// A special token of a tiktoken rank file (which holds none), as TEXT=ID; repeatable
    #[arg(long = "special", value_name = "TEXT=ID")]
    special: Vec<String>,

    /// No notes on standard error
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
}

impl ModelArgs {
    fn rank_file(&self) -> toksuite::Result<RankFileOptions> {
        let split = match &self.split {
            Some(value) => pretokenize::parse_split(value)?,
            None => None,
        };
        let mut specials = Vec::new();
        for item in &self.special {
            let parsed = item
                .rsplit_once('=')
                .and_then(|(text, id)| Some((text, id.parse::<u32>().ok()?)))
                .filter(|(text, _)| !text.is_empty());
            let Some((text, id)) = parsed else {
                return Err(toksuite::Error::usage(format!(
                    "--special {item:?}: expected TEXT=ID, e.g. '<|endoftext|>=100257'"
                )));
            };
            specials.push(SpecialToken {
                text: text.to_string(),
                id,
            });
        }
        Ok(RankFileOptions { split, specials })
    }
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>("bpe-model") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("bpe-model", || {
        let (command, model_args, output) = match &args.command {
            Command::Convert { to, model, output } => {
                let to = match to {
                    Target::Hf => ModelFormat::Hf,
                    Target::Tiktoken => ModelFormat::Tiktoken,
                    Target::Minbpe => ModelFormat::Minbpe,
                    Target::Ndjson => ModelFormat::Ndjson,
                };
                (ModelCommand::Convert { to }, model, output)
            }
            Command::Info { model, output } => (ModelCommand::Info, model, output),
        };
        let config = ModelConfig {
            model: model_args.model.clone(),
            rank_file: model_args.rank_file()?,
            command,
        };
        let quiet = model_args.quiet;
        let mut out = Output::create(output.output.as_deref())?;
        let result = model::run(&config, &mut out, &mut |note| {
            if !quiet {
                cli::stderr_line(format_args!("bpe-model: note: {note}"));
            }
        });
        out.finish_with(result)
    })
}
