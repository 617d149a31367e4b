//! bpe-train: learns a BPE (or word) model from text and prints it as NDJSON.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::cmd::train::{self, ModelType, TrainConfig, TrainEvent};
use toksuite::pretokenize;

const EXAMPLES: &str = "\
Examples:
  cat corpus.txt | bpe-train --vocab-size 4096 > merges.json
  bpe-train --split gpt4 --vocab-size 32768 -o merges.json corpus.txt
  echo 'happily happiness unhappy' | bpe-train --vocab-size 259 --verbose > /dev/null
  echo 'Life is short eat dessert first' | bpe-train --model-type word > words.json";

/// Learn a byte-pair-encoding (or word) model from text; print it as NDJSON.
#[derive(Parser)]
#[command(name = "bpe-train", version, after_help = EXAMPLES)]
struct Args {
    /// Vocabulary size: 256 byte tokens plus the merges (BPE, default 512); for word
    /// models the kept words plus [UNK] (default: every word)
    #[arg(long, value_name = "N")]
    vocab_size: Option<usize>,

    /// Pre-split the text: none (byte-level BPE over the whole text), gpt2, gpt4, cl100k, o200k,
    /// r50k, p50k, or a regex; pairs never cross chunks
    #[arg(long, value_name = "NAME|REGEX", default_value = "none")]
    split: String,

    /// Register a special token (repeatable; non-empty, each once); its id follows the
    /// last merge, and its occurrences in the training text are cut out, not learned from
    #[arg(long, value_name = "TOKEN")]
    special: Vec<String>,

    /// Model type: bpe, or word (a word-level vocabulary: whitespace-separated words)
    #[arg(long, value_name = "TYPE", default_value = "bpe", value_parser = ["bpe", "word"])]
    model_type: String,

    /// Log each merge to standard error, in minbpe's verbose format
    #[arg(long)]
    verbose: bool,

    #[command(flatten)]
    threads: cli::ThreadsArg,

    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>("bpe-train") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("bpe-train", || {
        let sources = toksuite::input::sources(&args.common.files)?;
        let model_type = if args.model_type == "word" {
            ModelType::Word
        } else {
            ModelType::Bpe
        };
        let split = pretokenize::parse_split(&args.split)?;
        if model_type == ModelType::Word && (split.is_some() || !args.special.is_empty()) {
            return Err(toksuite::Error::usage(
                "--split and --special apply to BPE models only",
            ));
        }
        // `--split none` uses at most two threads (the large engine's set-up), so it
        // needs no core count: asking the system for one reads cgroup files (a dozen
        // system calls), a tenth of a millisecond of a short run.
        let threads = if model_type == ModelType::Word || split.is_some() {
            args.threads.count()
        } else if args.threads.threads == 1 {
            1
        } else {
            2
        };
        let config = TrainConfig {
            model_type,
            vocab_size: args.vocab_size,
            split,
            specials: args.special.clone(),
            threads,
            no_mmap: args.common.no_mmap,
        };
        let mut out = Output::create(args.common.output.as_deref())?;
        let mut bar = None;
        let result = train::train(&config, &sources, &mut out, &mut |event| match event {
            TrainEvent::Merged {
                merge,
                index,
                total,
                token,
            } => {
                if args.verbose {
                    let line = train::merge_log_line(merge, index, total, token);
                    cli::stderr_line(format_args!("{line}"));
                }
                let bar = bar.get_or_insert_with(|| {
                    cli::progress_bar(args.common.quiet || args.verbose, total as u64, "merges")
                });
                if let Some(bar) = bar {
                    bar.set_position(index as u64);
                }
            }
            TrainEvent::Exhausted { learned, wanted } => {
                cli::stderr_line(format_args!(
                    "bpe-train: stopped after {learned} of {wanted} merges: no pair left to merge"
                ));
            }
            TrainEvent::OverLimit { kept, wanted } => {
                cli::stderr_line(format_args!(
                    "bpe-train: stopped after {kept} of {wanted} merges: the next one would \
                     take the tokens past 4 GiB in all (the model format's limit)"
                ));
            }
        });
        if let Some(Some(bar)) = bar {
            bar.finish_and_clear();
        }
        out.finish_with(result)
    })
}
