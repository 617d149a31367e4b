//! bpe-train: learns a BPE (or word) model from text and prints it as NDJSON.
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::cmd::train::{self, ModelType, TrainConfig, TrainEvent};
use toksuite::format::counts::ShardKey;
use toksuite::pretokenize;

// Out of memory is `TOOL: error: out of memory ...` and exit 1, not an abort.
#[global_allocator]
static ALLOC: cli::ExitOnOom = cli::ExitOnOom;

fn parse_shard(value: &str) -> Result<ShardKey, String> {
    ShardKey::parse(value).ok_or_else(|| {
        "a shard key is decimal integers joined by dots (3, 3.1048576), each below 2^64".to_string()
    })
}

const EXAMPLES: &str = "\
Examples:
  cat corpus.txt | bpe-train --vocab-size 4096 > merges.json
  bpe-train --split gpt4 --vocab-size 32768 -o merges.json corpus.txt
  echo 'happily happiness unhappy' | bpe-train --vocab-size 259 --verbose > /dev/null
  echo 'Life is short eat dessert first' | bpe-train --model-type word > words.json
  bpe-train --field text --split gpt4 --vocab-size 32768 -o merges.json docs.jsonl

Past one machine (docs/scale-out.md): count shards, merge, train from the counts;
the merges equal `bpe-train --records --split gpt4 ... corpus.txt` exactly:
  parallel --pipepart -a corpus.txt --block -1 -k \\
    'bpe-train --emit-counts --split gpt4 --shard {#} -o counts.{#}'
  bpe-train --from-counts --emit-counts counts.* > all.counts       # merge (any order)
  bpe-train --from-counts --vocab-size 32768 all.counts > merges.json";

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

    /// Pre-split each record on its own: each line with its \n (one is supplied after a
    /// last line without), so chunks never span lines and any cut of the input at line
    /// ends counts the same (needs --split; what sharded training reproduces)
    #[arg(long)]
    records: bool,

    /// Write the chunk counts of the input (a counts file) instead of a model, record by
    /// record (implies --records); with --from-counts, merge counts files into one
    #[arg(long)]
    emit_counts: bool,

    /// This input's place in the corpus, for --emit-counts: decimal integers joined by
    /// dots (3, 3.1048576), compared part by part; shards in input order need increasing
    /// keys (GNU parallel's {#}, $SLURM_ARRAY_TASK_ID) [default: 0]
    #[arg(long, value_name = "KEY", value_parser = parse_shard)]
    shard: Option<ShardKey>,

    /// The FILEs are counts files (from --emit-counts, in any order): train from their
    /// merged counts (split pattern and special tokens come from the files), or with
    /// --emit-counts write the merged counts
    #[arg(long)]
    from_counts: bool,

    /// Read JSONL: each line is a JSON object, and the string value of its member NAME is
    /// one document; no pair, chunk or word crosses from one document to the next
    #[arg(long, value_name = "NAME")]
    field: Option<String>,

    /// With --field: skip lines without a usable NAME and count them on standard error,
    /// instead of stopping at the first
    #[arg(long)]
    skip_invalid: bool,

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
        let threads = if model_type == ModelType::Word || split.is_some() || args.from_counts {
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
            records: args.records,
            emit_counts: args.emit_counts,
            shard: args.shard.clone(),
            from_counts: args.from_counts,
            field: args.field.clone(),
            skip_invalid: args.skip_invalid,
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
            TrainEvent::Skipped(skipped) => {
                let field = args.field.as_deref().unwrap_or_default();
                cli::stderr_line(format_args!("bpe-train: {}", skipped.summary(field)));
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
