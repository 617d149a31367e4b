#!/usr/bin/env bash
# What memory-mapping the inputs is worth: each tool on the benchmark corpus with its
# files mapped (the default) and read (`--no-mmap`), alternated, printing the range
# (min-max) of wall and CPU (user+system) seconds over the runs, and the peak resident
# memory. Used to decide how inputs are read (BENCHMARKS.md, "Robustness").
#
# Usage: scripts/bench-mmap.sh [CORPUS] [RUNS]
#   CORPUS  text to encode (default bench/corpora/mixed-27M.txt)
#   RUNS    runs of each variant (default 5)
# Environment: BENCH_BIN (default target/release), BENCH_OUT (default bench/out/mmap).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${1:-$ROOT/bench/corpora/mixed-27M.txt}
RUNS=${2:-5}
BIN=${BENCH_BIN:-$ROOT/target/release}
OUT=${BENCH_OUT:-$ROOT/bench/out/mmap}
mkdir -p "$OUT"
export LC_ALL=C

# Inputs: the corpus as lines of ids and as one --whole record (o200k_base), and a
# small trained model for the training and word sections.
[ -s "$OUT/ids.jsonl" ] || "$BIN/bpe-encode" "$CORPUS" > "$OUT/ids.jsonl"
[ -s "$OUT/whole.jsonl" ] || "$BIN/bpe-encode" --whole "$CORPUS" > "$OUT/whole.jsonl"

# run LABEL CMD...: RUNS alternated runs of CMD with and without --no-mmap.
run() {
  local label=$1; shift
  local a b
  a=$(mktemp); b=$(mktemp)
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %U %S %M" -a -o "$a" "$@" > /dev/null
    /usr/bin/time -f "%e %U %S %M" -a -o "$b" "$@" --no-mmap > /dev/null
  done
  for v in mapped read; do
    f=$a; [ $v = read ] && f=$b
    awk -v label="$label" -v v="$v" '
      { w = $1; c = $2 + $3; m = $4
        if (NR == 1 || w < wmin) wmin = w; if (w > wmax) wmax = w
        if (NR == 1 || c < cmin) cmin = c; if (c > cmax) cmax = c
        if (m > mmax) mmax = m }
      END { printf "| %-34s | %-6s | %5.2f-%5.2f | %5.2f-%5.2f | %6.0f |\n", label, v, wmin, wmax, cmin, cmax, mmax / 1024 }' "$f"
  done
  rm -f "$a" "$b"
}

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'no AVX-512'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "corpus: $CORPUS ($(stat -c %s "$CORPUS") bytes), $RUNS runs each, alternated"
echo
echo "| command | input | wall s (min-max) | CPU s (min-max) | max RSS MB |"
echo "|---|---|---|---|---|"
run "bpe-decode ids.jsonl" "$BIN/bpe-decode" "$OUT/ids.jsonl"
run "bpe-decode -j1 ids.jsonl" "$BIN/bpe-decode" -j1 "$OUT/ids.jsonl"
run "bpe-decode --whole whole.jsonl" "$BIN/bpe-decode" --whole "$OUT/whole.jsonl"
run "bpe-encode CORPUS" "$BIN/bpe-encode" "$CORPUS"
run "bpe-encode --whole CORPUS" "$BIN/bpe-encode" --whole "$CORPUS"
run "bpe-encode --count CORPUS" "$BIN/bpe-encode" --count "$CORPUS"
run "bpe-train --vocab-size 512 CORPUS" "$BIN/bpe-train" --vocab-size 512 "$CORPUS"
run "bpe-train --split gpt4 CORPUS" "$BIN/bpe-train" --split gpt4 --vocab-size 512 "$CORPUS"
