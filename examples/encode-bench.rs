//! Times the BPE encoder alone, in process, on one thread: no process start, no model
//! load, no reading of the file, no output. For tuning the encoder's thresholds and for
//! profiling it (`valgrind --tool=callgrind target/release/examples/encode-bench ...`).
//!
//! Usage: `encode-bench MODEL FILE [lines|whole] [STEP] [REPEATS]`: encodes FILE with
//! MODEL (a built-in name or a model file), each line a record (`lines`, the default) or
//! the whole file as one record (`whole`, one thread), with long sequences in steps of
//! STEP bytes (default: the encoder's own; 0: each sequence whole). A new encoder
//! each run, so that its chunk cache starts empty as in a run of the tool. Prints
//! `seconds=BEST mean=MEAN cpu=BEST_CPU tokens=N` over REPEATS runs (default 5): wall
//! seconds, and on Linux the thread's CPU seconds (from `/proc/thread-self/schedstat`),
//! which a machine busy with other work inflates less.
#![deny(unsafe_code)]

use std::time::Instant;

use toksuite::encode::{AllowedSpecial, Encoder};
use toksuite::model::Model;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(spec), Some(path)) = (args.first(), args.get(1)) else {
        eprintln!("usage: encode-bench MODEL FILE [lines|whole] [STEP] [REPEATS]");
        std::process::exit(2);
    };
    let whole = args.get(2).is_some_and(|a| a == "whole");
    let step: Option<usize> = args.get(3).and_then(|s| s.parse().ok());
    let repeats: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(5);
    let Model::Bpe(model) = toksuite::format::load(spec, None).expect("model") else {
        panic!("a BPE model");
    };
    let text = std::fs::read(path).expect("FILE");
    let records: Vec<&[u8]> = if whole {
        vec![&text[..]]
    } else {
        text.split(|&b| b == b'\n').collect()
    };
    let (mut best, mut total, mut tokens) = (f64::MAX, 0.0, 0);
    let mut best_cpu = f64::MAX;
    let (mut ids, mut ends) = (Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        // A new encoder each time: its chunk cache starts empty, as in a run of the tool.
        let mut encoder = Encoder::new(&model, &AllowedSpecial::None).expect("encoder");
        if let Some(step) = step {
            encoder = encoder.with_step(step);
        }
        ids.clear();
        ends.clear();
        let (start, cpu) = (Instant::now(), thread_cpu());
        encoder.encode_records(&records, &mut ids, &mut ends);
        let seconds = start.elapsed().as_secs_f64();
        best_cpu = best_cpu.min(thread_cpu() - cpu);
        best = best.min(seconds);
        total += seconds;
        tokens = ids.len();
    }
    println!(
        "seconds={best:.4} mean={:.4} cpu={best_cpu:.4} tokens={tokens}",
        total / repeats.max(1) as f64
    );
}

/// This thread's CPU seconds so far (0 where the kernel does not say).
fn thread_cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}
