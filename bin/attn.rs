//! attn: scaled dot-product attention over records of token ids (or vectors), with
//! weights drawn bit for bit as PyTorch draws them (PyTorch-compatible generator).
#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use toksuite::attn::kernel::Simd;
use toksuite::attn::{
    self, Attn, DrawSpec, Format, NormalFill, Options, Precision, PrintKind, Weights,
};
use toksuite::cli::{self, CommonArgs, Output};
use toksuite::error::Error;
use toksuite::format::tokens::Format as TokenFormat;
use toksuite::input;

const EXAMPLES: &str = "\
Examples:
  echo '[0,4,5,2,1,3]' | attn                    # the classic 6x4 SelfAttention table
  echo '[0,4,5,2,1,3]' | attn --print weights    # its softmax weights, 6x6
  echo '[0,4,5,2,1,3]' | attn --heads 4 --d-v 1  # four heads, side by side
  echo 'Life is short eat dessert first' > s.txt
  bpe-train --model-type word s.txt > words.json
  bpe-encode -m words.json s.txt | attn --causal
  bpe-encode -m merges.json book.txt | attn --dim 64 --d-kq 64 --d-v 64 --heads 8
  attn --dump-weights w.json </dev/null; attn --weights w.json ids.jsonl
  attn --format npy ids.jsonl > out.npy
  attn --vocab-size 50257 --eot 50256 book.bin       # an llm.c token file   # python: f = open('out.npy', 'rb'); np.load(f)
  attn --format f32 --heads 8 --d-v 64 ids.jsonl | od -f | head";

#[derive(Clone, Copy, ValueEnum)]
enum PrintArg {
    /// Context vectors: T rows of HEADS x D_V numbers
    Context,
    /// Attention weights: T rows of HEADS x S numbers (0 where masked)
    Weights,
    /// Raw scores q.k before scaling and masking: T rows of HEADS x S numbers
    Scores,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// One line per record: a JSON array of T rows of numbers
    Ndjson,
    /// Raw little-endian float32, T x C numbers per record, row after row, records back to
    /// back
    F32,
    /// One NPY stream per record (float32, shape (T, C)): numpy.load on an open file
    /// reads one record per call
    Npy,
}

#[derive(Clone, Copy, ValueEnum)]
enum FillArg {
    /// PyTorch's portable normal_ kernel (ARM, Apple, ATEN_CPU_CAPABILITY=default): the
    /// digits PyTorch prints on those machines
    Scalar,
    /// x86-64 PyTorch's AVX2 normal_ kernel, bit for bit
    Avx2,
}

/// Scaled dot-product attention over token-id records (one JSON array per line).
///
/// Each record is embedded (nn.Embedding drawn after torch.manual_seed), projected by
/// each head's W_query, W_key, W_value (torch.rand, in that order, after seeding again)
/// and attended; each output line is a JSON array of T rows (context vectors, heads side
/// by side). With no options this is the classic worked example (vocabulary 50000, dimension 3,
/// d_kq 2, d_v 4, seed 123).
#[derive(Parser)]
#[command(name = "attn", version, after_help = EXAMPLES)]
struct Args {
    /// Rows of the drawn embedding table; ids must be below it
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    vocab_size: usize,

    /// Embedding width (d_in)
    #[arg(long, value_name = "N", default_value_t = 3)]
    dim: usize,

    /// Query and key width per head
    #[arg(long, value_name = "N", default_value_t = 2)]
    d_kq: usize,

    /// Value width per head
    #[arg(long, value_name = "N", default_value_t = 4)]
    d_v: usize,

    /// Number of heads; their outputs are concatenated
    #[arg(long, value_name = "N", default_value_t = 1)]
    heads: usize,

    /// torch.manual_seed value for the embedding and, again, for the weights
    #[arg(long, value_name = "N", default_value_t = 123)]
    seed: u64,

    /// Which PyTorch normal_ kernel draws the embedding
    #[arg(long, value_enum, value_name = "KERNEL", default_value = "scalar")]
    normal_fill: FillArg,

    /// Position i attends only to positions j <= i
    #[arg(long)]
    causal: bool,

    /// Cross-attention: keys and values from the record on the same line of FILE
    #[arg(long, value_name = "FILE")]
    context: Option<std::path::PathBuf>,

    /// Use the embedding and heads in this JSON file instead of drawing them
    #[arg(long, value_name = "FILE", conflicts_with_all = ["vocab_size", "dim", "d_kq", "d_v", "heads", "seed", "normal_fill"])]
    weights: Option<std::path::PathBuf>,

    /// Write the weights in use (embedding and heads) to FILE as JSON
    #[arg(long, value_name = "FILE")]
    dump_weights: Option<std::path::PathBuf>,

    /// Records are arrays of embedding rows (arrays of DIM numbers) instead of ids
    #[arg(long)]
    vectors: bool,

    /// Token files: u16 or u32 for raw ids (llm.c files and Megatron datasets are
    /// recognised without it)
    #[arg(long, value_name = "FORMAT",
          value_parser = clap::builder::PossibleValuesParser::new(&TokenFormat::NAMES[1..]))]
    input_format: Option<String>,

    /// Token files: a record ends at each id ID, which is not part of it
    #[arg(long, value_name = "ID")]
    eot: Option<u32>,

    /// Token files: a record starts at each id ID, which is not part of it
    #[arg(long, value_name = "ID")]
    bos: Option<u32>,

    /// What to print for each record
    #[arg(long, value_enum, value_name = "WHAT", default_value = "context")]
    print: PrintArg,

    /// Output format of each record
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "ndjson")]
    format: FormatArg,

    /// JSON digits after the decimal point (0-9), or "shortest" for float32 round-trip text
    #[arg(long, value_name = "N", default_value = "4", value_parser = parse_precision)]
    precision: Precision,

    #[command(flatten)]
    threads: cli::ThreadsArg,

    #[command(flatten)]
    line_buffered: cli::LineBufferedArg,

    #[command(flatten)]
    common: CommonArgs,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    if s == "shortest" {
        return Ok(Precision::Shortest);
    }
    match s.parse::<usize>() {
        Ok(n) if n <= 9 => Ok(Precision::Fixed(n)),
        _ => Err("expected a number of digits from 0 to 9, or \"shortest\"".to_string()),
    }
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>("attn") {
        Ok(args) => args,
        Err(status) => return status,
    };
    cli::run_main("attn", || {
        for (name, n) in [
            ("--vocab-size", args.vocab_size),
            ("--dim", args.dim),
            ("--d-kq", args.d_kq),
            ("--d-v", args.d_v),
            ("--heads", args.heads),
        ] {
            if n == 0 {
                return Err(Error::usage(format!("{name} must be at least 1")));
            }
        }
        // The drawn table is computed lazily, but its draws are counted in u64 and a
        // dump holds it whole: keep sizes far from overflow.
        let cells = |a: usize, b: usize| a.checked_mul(b).filter(|&n| n <= 1 << 40);
        let head_cols = args
            .d_kq
            .checked_mul(2)
            .and_then(|n| n.checked_add(args.d_v))
            .and_then(|n| n.checked_mul(args.heads));
        if cells(args.vocab_size, args.dim).is_none()
            || head_cols.and_then(|n| cells(args.dim, n)).is_none()
        {
            return Err(Error::usage("the requested sizes are too large"));
        }
        let spec = DrawSpec {
            vocab_size: args.vocab_size,
            dim: args.dim,
            d_kq: args.d_kq,
            d_v: args.d_v,
            heads: args.heads,
            seed: args.seed,
            fill: match args.normal_fill {
                FillArg::Scalar => NormalFill::Scalar,
                FillArg::Avx2 => NormalFill::Avx2,
            },
        };
        let weights = match &args.weights {
            Some(path) => Weights::read_file(path)?,
            None => {
                spec.check()?;
                Weights::draw(&spec)
            }
        };
        if let Some(path) = &args.dump_weights {
            let mut out = Output::create(Some(path))?;
            weights
                .write_json(&mut out)
                .map_err(|e| Error::io("write failed", e).in_file(&path.display().to_string()))?;
            out.finish()?;
        }
        let options = Options {
            causal: args.causal,
            print: match args.print {
                PrintArg::Context => PrintKind::Context,
                PrintArg::Weights => PrintKind::Weights,
                PrintArg::Scores => PrintKind::Scores,
            },
            format: match args.format {
                FormatArg::Ndjson => Format::Ndjson,
                FormatArg::F32 => Format::F32,
                FormatArg::Npy => Format::Npy,
            },
            precision: args.precision,
            vectors: args.vectors,
            threads: args.threads.count(),
            simd: Simd::from_env()?,
        };
        let stage = Attn::new(weights, options)?;
        let sources = input::sources(&args.common.files)?;
        let context = args.context.as_deref().map(input::Source::file);
        let mut out = Output::create(args.common.output.as_deref())?
            .line_buffered(args.line_buffered.line_buffered);
        let result = attn::run(
            &stage,
            &sources,
            args.common.no_mmap,
            context.as_ref(),
            attn::TokenInput {
                format: args.input_format.as_deref().and_then(TokenFormat::parse),
                eot: args.eot,
                bos: args.bos,
            },
            &mut out,
        );
        out.finish_with(result)
    })
}
