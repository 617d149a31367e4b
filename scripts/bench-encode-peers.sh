#!/usr/bin/env bash
# Encoding ordinary text on one thread against GitHub's `bpe` crate (bpe-openai) and
# tiktoken, and decoding on two threads: prints a Markdown table with a range over
# alternating runs.
#
# Usage: scripts/bench-encode-peers.sh [FILE]   (default bench/corpora/mixed-27M.txt)
#
# All figures are CPU seconds (user + system, the shell's `times`): on a shared, loaded machine wall
# time measures the neighbours. Ours: `bpe-encode -q -j 1 --whole -m ENC FILE >
# /dev/null`, the whole process, twice: writing JSON id arrays (the default, ndjson),
# and writing the raw ids (`--format u32`); and the work alone, as the peers' is counted
# (examples/encode-bench: the encoder on the file in memory, its ids kept in memory, one
# thread, this thread's CPU time; no start-up, model load, reading or output). The
# crate (scripts/bench/bpe-crate.sh, `Tokenizer::encode`) and tiktoken
# (`encode_ordinary` on the whole text, scripts/bench/peers.py): their process's CPU
# less that of the same process on a one-line file (start-up, imports, model load:
# ~0.1 s for the crate, ~1.3 s for tiktoken), so the first two ratios set our whole
# process against the peers' work, the third like against like. Decode:
# `bpe-decode -q --whole` of our o200k_base ids of FILE into /dev/null, both threads:
# CPU s, wall s, and MB/s of text by wall.
#
# Environment:
#   BENCH_BIN     folder with our binaries (default target/release, built first)
#   BENCH_BASE    folder with other binaries of ours to measure beside (e.g. an older build)
#   BENCH_RUNS    alternating runs of each command (default 5)
#   BENCH_PYTHON  a python with tiktoken (default bench/venv/bin/python; none: skipped)
#   BENCH_VOCAB   folder with o200k_base.tiktoken and cl100k_base.tiktoken
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FILE=${1:-$ROOT/bench/corpora/mixed-27M.txt}
RUNS=${BENCH_RUNS:-5}
OUT=$ROOT/bench/out/encode-peers
mkdir -p "$OUT"
if [ -z "${BENCH_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release -q --bins --example encode-bench) || { echo "bench-encode-peers: build failed" >&2; exit 1; }
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
else
  BIN=$BENCH_BIN
fi
# The work alone (absent from a BENCH_BIN folder without examples/: the column stays empty).
WORK=$BIN/examples/encode-bench
[ -x "$WORK" ] || WORK=""
CRATE=$("$ROOT/scripts/bench/bpe-crate.sh") || { echo "bench-encode-peers: could not build the bpe crate's program" >&2; exit 1; }
PY=${BENCH_PYTHON:-$ROOT/bench/venv/bin/python}
[ -x "$PY" ] && "$PY" -c 'import tiktoken' 2>/dev/null || PY=""
VOCAB=${BENCH_VOCAB:-}
if [ -z "$VOCAB" ]; then
  for d in "$ROOT/../shared/vocab" /work/shared/vocab; do
    [ -f "$d/o200k_base.tiktoken" ] && { VOCAB=$d; break; }
  done
fi
BYTES=$(wc -c <"$FILE")

# shellcheck source=scripts/bench/cpu-time.sh
. "$ROOT/scripts/bench/cpu-time.sh"
# wall CMD...: wall seconds of one run, stdout to /dev/null.
wall() {
  local t0 t1
  t0=$(date +%s%N); "$@" >/dev/null 2>>"$OUT/log.txt"; t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}

echo "## Encode one thread and decode two, $(basename "$FILE") ($BYTES bytes)"
echo
echo "- commit: $(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD || echo +dirty)"
echo "- host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $RUNS alternating runs, min-max"
echo
echo "| model | ours CPU s | ours u32 CPU s | ours work CPU s | before CPU s | bpe crate CPU s | tiktoken CPU s | x crate (best) | x tiktoken (best) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for enc in o200k_base cl100k_base; do
  O=() U=() K=() B=() C=() T=()
  echo hi >"$OUT/one-line.txt"
  START_CRATE=$(START=0 cpu "$CRATE" "$enc" "$OUT/one-line.txt")
  START_TT=0
  if [ -n "$PY" ] && [ -n "$VOCAB" ]; then
    START_TT=$(cpu "$PY" "$ROOT/scripts/bench/peers.py" tiktoken "$OUT/one-line.txt" --encoding "$enc" --vocab-dir "$VOCAB")
  fi
  # One run of each program, in the order given; every other round reverses it, so
  # that no program always follows the same one (the host's memory and caches carry
  # a program's traces into the next).
  run_one() {
    case $1 in
      O) O+=("$(cpu "$BIN/bpe-encode" -q -j 1 --whole -m "$enc" "$FILE")") ;;
      U) U+=("$(cpu "$BIN/bpe-encode" -q -j 1 --whole --format u32 -m "$enc" "$FILE")") ;;
      K) [ -n "$WORK" ] && K+=("$("$WORK" "$enc" "$FILE" whole '' 1 2>>"$OUT/log.txt" | sed -n 's/.* cpu=\([0-9.]*\).*/\1/p')") ;;
      B) [ -n "${BENCH_BASE:-}" ] && B+=("$(cpu "$BENCH_BASE/bpe-encode" -q -j 1 --whole -m "$enc" "$FILE")") ;;
      C) START=$START_CRATE; C+=("$(work "$CRATE" "$enc" "$FILE")") ;;
      T) if [ -n "$PY" ] && [ -n "$VOCAB" ] && [ "$i" -lt 3 ]; then
           START=$START_TT; T+=("$(work "$PY" "$ROOT/scripts/bench/peers.py" tiktoken "$FILE" --encoding "$enc" --vocab-dir "$VOCAB")")
         fi ;;
    esac
    return 0
  }
  for ((i = 0; i < RUNS; i++)); do
    order="O U K B C T"
    [ $((i % 2)) -eq 1 ] && order="T C B K U O"
    for p in $order; do run_one "$p"; done
  done
  t=""; [ "${#T[@]}" -gt 0 ] && t=$(range "${T[@]}")
  b=""; [ "${#B[@]}" -gt 0 ] && b=$(range "${B[@]}")
  # Ratios "ndjson / u32 / work".
  k=""; kl=0; [ "${#K[@]}" -gt 0 ] && { k=$(range "${K[@]}"); kl=$(lo "${K[@]}"); }
  all() { echo "$(ratio "$1" "$(lo "${O[@]}")") / $(ratio "$1" "$(lo "${U[@]}")") / $(ratio "$1" "$kl")"; }
  tr=""; [ "${#T[@]}" -gt 0 ] && tr=$(all "$(lo "${T[@]}")")
  echo "| $enc | $(range "${O[@]}") | $(range "${U[@]}") | $k | $b | $(range "${C[@]}") | $t | $(all "$(lo "${C[@]}")") | $tr |"
done
echo
echo "- x crate, x tiktoken: the peer's best over our best: whole command writing ndjson / whole command writing u32 / the work alone."
"$BIN/bpe-encode" -q --whole -m o200k_base "$FILE" >"$OUT/ids.jsonl"
W=() D=() WC=() DC=()
for ((i = 0; i < RUNS; i++)); do
  W+=("$(wall "$BIN/bpe-decode" -q --whole "$OUT/ids.jsonl")")
  WC+=("$(cpu "$BIN/bpe-decode" -q --whole "$OUT/ids.jsonl")")
  if [ -n "${BENCH_BASE:-}" ]; then
    D+=("$(wall "$BENCH_BASE/bpe-decode" -q --whole "$OUT/ids.jsonl")")
    DC+=("$(cpu "$BENCH_BASE/bpe-decode" -q --whole "$OUT/ids.jsonl")")
  fi
done
mbs() { awk -v b="$BYTES" -v s="$1" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }
echo "- decode --whole (o200k_base ids) > /dev/null, two threads: $(range "${WC[@]}") s CPU, $(range "${W[@]}") s wall, best $(mbs "$(lo "${W[@]}")") MB/s$([ "${#D[@]}" -gt 0 ] && echo "; before $(range "${DC[@]}") s CPU, $(range "${D[@]}") s wall, best $(mbs "$(lo "${D[@]}")") MB/s")"
echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
