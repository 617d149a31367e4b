#!/usr/bin/env bash
# First sightings alone, against GitHub's `bpe` crate: every distinct chunk of FILE
# (tiktoken's split pattern, three bytes or more, no line break) once, one a line, so
# that our chunk cache never hits and every chunk goes through BPE, as the crate's
# backtracking encoder takes every chunk. Prints a Markdown table: CPU seconds, min-max
# over alternating runs, of ours (`bpe-encode -q -j 1 --whole --format u32`, the whole
# process, and examples/encode-bench, the work alone) and of the crate's work (its
# process less the same process on a one-line file).
#
# Usage: scripts/bench-first-sightings.sh [FILE]   (default bench/corpora/mixed-27M.txt)
#
# Environment: BENCH_RUNS (default 7), BENCH_PYTHON (a python with tiktoken and regex;
# default bench/venv/bin/python), BENCH_VOCAB (folder with the .tiktoken files).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FILE=${1:-$ROOT/bench/corpora/mixed-27M.txt}
RUNS=${BENCH_RUNS:-7}
OUT=$ROOT/bench/out/first-sightings
mkdir -p "$OUT"
(cd "$ROOT" && cargo build --release -q --bins --example encode-bench) || { echo "bench-first-sightings: build failed" >&2; exit 1; }
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
CRATE=$("$ROOT/scripts/bench/bpe-crate.sh") || { echo "bench-first-sightings: could not build the bpe crate's program" >&2; exit 1; }
PY=${BENCH_PYTHON:-$ROOT/bench/venv/bin/python}
"$PY" -c 'import tiktoken, regex' 2>/dev/null || { echo "bench-first-sightings: needs a python with tiktoken and regex (BENCH_PYTHON)" >&2; exit 1; }
VOCAB=${BENCH_VOCAB:-}
if [ -z "$VOCAB" ]; then
  for d in "$ROOT/../shared/vocab" /work/shared/vocab; do
    [ -f "$d/o200k_base.tiktoken" ] && { VOCAB=$d; break; }
  done
fi
[ -n "$VOCAB" ] || { echo "bench-first-sightings: no vocabulary folder (BENCH_VOCAB)" >&2; exit 1; }

# shellcheck source=scripts/bench/cpu-time.sh
. "$ROOT/scripts/bench/cpu-time.sh"

echo "## First sightings alone: the distinct chunks of $(basename "$FILE")"
echo
echo "- commit: $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD || echo +dirty)"
echo "- host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512'); $RUNS alternating runs, CPU s, min-max"
echo
echo "| model | chunks | bytes | ours CPU s | ours work CPU s | bpe crate CPU s | crate / ours (best) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo hi >"$OUT/one-line.txt"
for enc in o200k_base cl100k_base; do
  TEXT=$OUT/$enc.txt
  CHUNKS=$("$PY" "$ROOT/scripts/bench/peers.py" first-sightings "$FILE" --encoding "$enc" --vocab-dir "$VOCAB" --out "$TEXT" | sed -n 's/^chunks=//p')
  START=$(cpu "$CRATE" "$enc" "$OUT/one-line.txt")
  O=() K=() C=()
  for ((i = 0; i < RUNS; i++)); do
    order="O K C"
    [ $((i % 2)) -eq 1 ] && order="C K O"
    for p in $order; do
      case $p in
        O) O+=("$(cpu "$BIN/bpe-encode" -q -j 1 --whole --format u32 -m "$enc" "$TEXT")") ;;
        K) K+=("$("$BIN/examples/encode-bench" "$enc" "$TEXT" whole '' 1 2>>"$OUT/log.txt" | sed -n 's/.* cpu=\([0-9.]*\).*/\1/p')") ;;
        C) C+=("$(work "$CRATE" "$enc" "$TEXT")") ;;
      esac
    done
  done
  echo "| $enc | $CHUNKS | $(wc -c <"$TEXT") | $(range "${O[@]}") | $(range "${K[@]}") | $(range "${C[@]}") | $(ratio "$(lo "${C[@]}")" "$(lo "${O[@]}")") / $(ratio "$(lo "${C[@]}")" "$(lo "${K[@]}")") |"
done
echo
echo "- crate / ours: the crate's best work over our best whole command / over our best work alone."
