//! Starts a command many times in a row, for timing whole processes of a few milliseconds
//! (`scripts/bench.sh`'s seed section): a small program starts each run (`posix_spawn`,
//! through `std::process::Command`), as GNU time starts the peer's one process, so a
//! run's figure is that process's start-up, work and exit, without the copy of a shell a
//! bash loop makes per turn (0.15-0.25 ms of each turn on the project machine).
//!
//! Usage: `spawn-bench RUNS COMMAND [ARG...]`: runs COMMAND RUNS times, one after the
//! other; the last run's standard output is this program's, the others' go to
//! /dev/null. Exits 1 (naming the run) if a run fails, and prints
//! `runs=N seconds=TOTAL mean=MEAN` to standard error.
#![deny(unsafe_code)]

use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(runs), Some(program)) = (
        args.first().and_then(|r| r.parse::<u32>().ok()),
        args.get(1),
    ) else {
        eprintln!("usage: spawn-bench RUNS COMMAND [ARG...]");
        return ExitCode::from(2);
    };
    let start = Instant::now();
    for run in 1..=runs {
        let stdout = if run == runs {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        match Command::new(program)
            .args(&args[2..])
            .stdout(stdout)
            .status()
        {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("spawn-bench: run {run} of {program}: {status}");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("spawn-bench: {program}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    eprintln!(
        "runs={runs} seconds={seconds:.6} mean={:.6}",
        seconds / f64::from(runs.max(1))
    );
    ExitCode::SUCCESS
}
