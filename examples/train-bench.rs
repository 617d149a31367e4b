//! Times the library's `--split none` trainer alone, in process: the scope of the seed's
//! own figure in `scripts/bench.sh` (the training call; no process start, no reading of
//! the file, no writing of the model), for a second, like-for-like ratio beside the
//! whole-process one the target is judged on.
//!
//! Usage: `train-bench FILE VOCAB_SIZE [REPEATS [LAYOUT]]`; prints `seconds=BEST
//! mean=MEAN merges=N` (BEST and MEAN over REPEATS calls, default 200). LAYOUT `packed` or
//! `wide` forces the trainer's slot layout and plan (see `train::EngineChoice`), to
//! measure what each costs on the same input; the default chooses by input.
#![deny(unsafe_code)]

use std::time::Instant;
use toksuite::train::{train_bytes_with, EngineChoice};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(vocab_size)) = (args.first(), args.get(1)) else {
        eprintln!("usage: train-bench FILE VOCAB_SIZE [REPEATS [packed|wide]]");
        std::process::exit(2);
    };
    let text = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("train-bench: {path}: {e}");
        std::process::exit(1);
    });
    let vocab_size: usize = vocab_size.parse().unwrap_or(512);
    let repeats: usize = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200)
        .max(1);
    let choice = match args.get(3).map(String::as_str) {
        None | Some("auto") => EngineChoice::Auto,
        Some("packed") => EngineChoice::Packed,
        Some("wide") => EngineChoice::Wide,
        Some(other) => {
            eprintln!("train-bench: unknown layout {other:?} (auto, packed, wide)");
            std::process::exit(2);
        }
    };
    let (mut best, mut total, mut merges) = (f64::MAX, 0.0, 0);
    for _ in 0..repeats {
        let start = Instant::now();
        let learned = train_bytes_with(choice, 2, &text, vocab_size, &mut |_| {});
        let seconds = start.elapsed().as_secs_f64();
        merges = std::hint::black_box(learned).len();
        best = best.min(seconds);
        total += seconds;
    }
    println!(
        "seconds={best:.6} mean={:.6} merges={merges}",
        total / repeats as f64
    );
}
