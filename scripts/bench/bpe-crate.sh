#!/usr/bin/env bash
# Builds a small program over GitHub's `bpe` crate (`bpe-openai` from crates.io), the
# peer of scripts/bench.sh and scripts/bench-long.sh, into bench/bpe-crate/ (git-ignored:
# the program is written here, the crate fetched by cargo; nothing of it is committed),
# and prints the path of its binary.
#
#   bench/bpe-crate/target/release/bpe-crate ENCODING FILE [--raw] [--ids OUT]
#
# ENCODING is o200k_base or cl100k_base. Without --raw the file (UTF-8) is encoded as
# tiktoken's encode_ordinary does it, pre-split by the encoding's pattern
# (`Tokenizer::encode`); with --raw its bytes are one sequence
# (`BytePairEncoding::encode_via_backtracking`, no pre-split: the `--split none` case).
# One thread. Prints `seconds=S tokens=N` (the work alone, after reading the file and
# building the tokenizer); --ids writes the ids as one JSON array and a newline.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=$ROOT/bench/bpe-crate
VERSION=${BPE_CRATE_VERSION:-0.3.0}
mkdir -p "$DIR/src"
cat >"$DIR/Cargo.toml.new" <<TOML
[package]
name = "bpe-crate"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
bpe-openai = "=$VERSION"

[profile.release]
lto = "fat"
codegen-units = 1

[workspace]
TOML
cat >"$DIR/src/main.rs.new" <<'RUST'
use std::io::Write;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: bpe-crate o200k_base|cl100k_base FILE [--raw] [--ids OUT]";
    let (name, file) = match (args.get(1), args.get(2)) {
        (Some(n), Some(f)) => (n.as_str(), f.as_str()),
        _ => panic!("{usage}"),
    };
    let raw = args.iter().any(|a| a == "--raw");
    let ids_out = args.iter().position(|a| a == "--ids").map(|i| args[i + 1].clone());
    let tokenizer = match name {
        "o200k_base" => bpe_openai::o200k_base(),
        "cl100k_base" => bpe_openai::cl100k_base(),
        _ => panic!("{usage}"),
    };
    let bytes = std::fs::read(file).expect("read FILE");
    // Touch the tokenizer once so that its lazy set-up is not timed.
    let _ = tokenizer.bpe.encode_via_backtracking(b"warm up");
    let t0 = Instant::now();
    let ids = if raw {
        tokenizer.bpe.encode_via_backtracking(&bytes)
    } else {
        let text = std::str::from_utf8(&bytes).expect("FILE is UTF-8 (or use --raw)");
        tokenizer.encode(text)
    };
    let seconds = t0.elapsed().as_secs_f64();
    println!("seconds={seconds:.3} tokens={}", ids.len());
    if let Some(path) = ids_out {
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).expect("create --ids"));
        let mut first = true;
        w.write_all(b"[").unwrap();
        for id in ids {
            if !first {
                w.write_all(b",").unwrap();
            }
            first = false;
            write!(w, "{id}").unwrap();
        }
        w.write_all(b"]\n").unwrap();
        w.flush().unwrap();
    }
}
RUST
for f in Cargo.toml src/main.rs; do
  if cmp -s "$DIR/$f.new" "$DIR/$f"; then rm "$DIR/$f.new"; else mv "$DIR/$f.new" "$DIR/$f"; fi
done
(cd "$DIR" && cargo build --release -q >&2)
echo "$DIR/target/release/bpe-crate"
