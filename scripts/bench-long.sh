#!/usr/bin/env bash
# Long chunks: bpe-encode against GitHub's `bpe` crate (bpe-openai, one thread) on inputs
# without a split point, and prints a Markdown table: CPU seconds (user + system), wall
# seconds, peak resident memory, the ratios, and whether the ids are the same.
#
# Usage: scripts/bench-long.sh [MB]     (default 10)
#
# Inputs, written once into bench/long/ (git-ignored) from a fixed seed: MB megabytes of
# random lowercase letters and of `a` (one chunk for every built-in split pattern), and of
# random bytes other than newline (one line; encoded with a rank file and `--split none`,
# the crate with its byte-pair encoding alone, `--raw`).
#
# Environment:
#   BENCH_BIN    folder with our binaries (default: target/release, built first)
#   BENCH_BASE   folder with other binaries of ours to measure beside (e.g. an older build)
#   BENCH_RUNS   runs of each command, alternating, the fastest reported (default 3)
#   BENCH_VOCAB  folder with o200k_base.tiktoken and cl100k_base.tiktoken (for random bytes)
#
# The crate's program (scripts/bench/bpe-crate.sh) times its work alone; the table's
# figures are of whole processes for both (GNU time), start-up and model load included.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MB=${1:-10}
RUNS=${BENCH_RUNS:-3}
DIR=$ROOT/bench/long
OUT=$ROOT/bench/out/long
mkdir -p "$DIR" "$OUT"

if [ -z "${BENCH_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release -q --bins) || { echo "bench-long: build failed" >&2; exit 1; }
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
else
  BIN=$BENCH_BIN
fi
CRATE=$("$ROOT/scripts/bench/bpe-crate.sh") || { echo "bench-long: could not build the bpe crate's program" >&2; exit 1; }
VOCAB=${BENCH_VOCAB:-}
if [ -z "$VOCAB" ]; then
  for d in "$ROOT/../shared/vocab" /work/shared/vocab; do
    [ -f "$d/o200k_base.tiktoken" ] && { VOCAB=$d; break; }
  done
fi

python3 - "$DIR" "$MB" <<'PY'
import os, random, sys
d, mb = sys.argv[1], int(sys.argv[2])
n = mb * 1_000_000
def make(name, gen):
    path = os.path.join(d, name)
    if not os.path.exists(path) or os.path.getsize(path) != n:
        with open(path, "wb") as f:
            f.write(gen())
r = random.Random(26)
make(f"letters-{mb}M.txt", lambda: bytes(r.choices(b"abcdefghijklmnopqrstuvwxyz", k=n)))
make(f"a-{mb}M.txt", lambda: b"a" * n)
make(f"bytes-{mb}M.bin", lambda: bytes(b if b != 10 else 11 for b in r.randbytes(n)))
PY

# run LABEL OUTFILE CMD...: one run; sets CPU (user + system), WALL, RSS (KiB).
run() {
  local outfile=$2; shift 2
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f '%M %U %S' -o "$OUT/time.txt" "$@" >"$outfile" 2>>"$OUT/log.txt" || return 1
  t1=$(date +%s%N)
  read -r RSS u s <"$OUT/time.txt"
  CPU=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
  WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
}

# best KEY CPU WALL RSS: keeps the lowest CPU and wall and the highest RSS per KEY.
declare -A BCPU BWALL BRSS
best() {
  local k=$1
  if [ -z "${BCPU[$k]:-}" ] || awk -v a="$2" -v b="${BCPU[$k]}" 'BEGIN { exit !(a < b) }'; then BCPU[$k]=$2; fi
  if [ -z "${BWALL[$k]:-}" ] || awk -v a="$3" -v b="${BWALL[$k]}" 'BEGIN { exit !(a < b) }'; then BWALL[$k]=$3; fi
  if [ -z "${BRSS[$k]:-}" ] || [ "$4" -gt "${BRSS[$k]}" ]; then BRSS[$k]=$4; fi
}

mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

echo "## Long chunks, $MB MB, one thread"
echo
echo "- commit: $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD || echo +dirty)"
echo "- host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- peer: bpe-openai $(sed -n 's/^bpe-openai = "=\(.*\)"/\1/p' "$ROOT/bench/bpe-crate/Cargo.toml"), ${RUNS} alternating runs each, fastest CPU and wall, largest RSS"
echo
HEAD="| input | model | ours CPU s | ours wall s | ours MiB |"
SEP="|---|---|---:|---:|---:|"
if [ -n "${BENCH_BASE:-}" ]; then HEAD="$HEAD before CPU s | before MiB |"; SEP="$SEP---:|---:|"; fi
echo "$HEAD crate CPU s | crate wall s | crate MiB | speed (crate CPU / ours) | memory (ours / crate) | same ids |"
echo "$SEP---:|---:|---:|---:|---:|---|"

case_row() {
  local input=$1 model=$2 file=$3 crate_args=$4; shift 4
  local key=$input-$model i same=yes
  for ((i = 0; i < RUNS; i++)); do
    if run ours "$OUT/ours.jsonl" "$BIN/bpe-encode" -q -j 1 --no-header "$@" "$file"; then best "$key-ours" "$CPU" "$WALL" "$RSS"; fi
    if [ -n "${BENCH_BASE:-}" ] && run base "$OUT/base.jsonl" "$BENCH_BASE/bpe-encode" -q -j 1 --no-header "$@" "$file"; then best "$key-base" "$CPU" "$WALL" "$RSS"; fi
    # shellcheck disable=SC2086 # the flags after the encoding's name are a list of words
    if run crate "$OUT/crate.txt" "$CRATE" "${crate_args%% *}" "$file" ${crate_args#"${crate_args%% *}"} --ids "$OUT/crate.jsonl"; then best "$key-crate" "$CPU" "$WALL" "$RSS"; fi
  done
  cmp -s "$OUT/ours.jsonl" "$OUT/crate.jsonl" || same=NO
  local row="| $input | $model | ${BCPU[$key-ours]:-} | ${BWALL[$key-ours]:-} | $(mib "${BRSS[$key-ours]:-0}") |"
  if [ -n "${BENCH_BASE:-}" ]; then row="$row ${BCPU[$key-base]:-} | $(mib "${BRSS[$key-base]:-0}") |"; fi
  echo "$row ${BCPU[$key-crate]:-} | ${BWALL[$key-crate]:-} | $(mib "${BRSS[$key-crate]:-0}") | $(ratio "${BCPU[$key-crate]:-0}" "${BCPU[$key-ours]:-0}") | $(ratio "${BRSS[$key-ours]:-0}" "${BRSS[$key-crate]:-0}") | $same |"
}

for enc in o200k_base cl100k_base; do
  case_row "random letters" "$enc" "$DIR/letters-${MB}M.txt" "$enc" -m "$enc"
done
for enc in o200k_base cl100k_base; do
  case_row "a run of \`a\`" "$enc" "$DIR/a-${MB}M.txt" "$enc" -m "$enc"
done
if [ -n "$VOCAB" ]; then
  for enc in o200k_base cl100k_base; do
    case_row "random bytes" "$enc.tiktoken --split none" "$DIR/bytes-${MB}M.bin" "$enc --raw" -m "$VOCAB/$enc.tiktoken" --split none
  done
else
  echo "bench-long: no o200k_base.tiktoken found (set BENCH_VOCAB): random bytes skipped" >&2
fi
echo
echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
