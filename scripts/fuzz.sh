#!/usr/bin/env bash
# Runs each fuzz target (fuzz/, cargo-fuzz on nightly) for a set time or a set number of
# executions, on its committed seed corpus (fuzz/corpus/TARGET/seed-*) plus what earlier
# runs found there, and prints each target's executions and outcome. A crash leaves its
# input in fuzz/artifacts/TARGET/ (replay: cargo +nightly fuzz run TARGET FILE) and makes
# the script exit 1.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   model_file ids split roundtrip attn_record attn_weights (default all)
# Environment:
#   FUZZ_RUNS  run each target this many executions instead of for SECONDS
#   FUZZ_SEED  libFuzzer's random seed (default: a new one each run), so that a run
#              can be repeated exactly; CI fixes it
#   FUZZ_SANITIZER  cargo-fuzz's sanitizer (default address; `none` for long runs: the
#              targets are safe Rust, and without ASan's allocator model_file ran at
#              250-350 executions/s instead of 76 on a grown corpus)
# Needs: rustup's nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_EACH=${1:-60}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(model_file ids split roundtrip attn_record attn_weights)
fi
cd "$ROOT/fuzz"
SAN=(-s "${FUZZ_SANITIZER:-address}")
for t in "${TARGETS[@]}"; do
  cargo +nightly fuzz build -O "${SAN[@]}" "$t" || exit 1
done
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t"
  limit=(-max_total_time="$SECONDS_EACH")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  [ -n "${FUZZ_SEED:-}" ] && limit+=(-seed="$FUZZ_SEED")
  # The split target runs fancy-regex on each input: keep inputs short.
  len=4096
  [ "$t" = split ] && len=1024
  log=$(mktemp)
  cargo +nightly fuzz run -O "${SAN[@]}" "$t" "corpus/$t" -- "${limit[@]}" -max_len=$len \
    -rss_limit_mb=3072 -print_final_stats=1 > "$log" 2>&1
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  secs=$(grep -m1 'stat::slowest_unit_time_sec' "$log" | awk '{print $2}')
  if [ $rc -eq 0 ]; then
    echo "fuzz $t: ok, ${execs:-?} executions (slowest input ${secs:-?} s)"
  else
    echo "fuzz $t: FAILED (exit $rc) after ${execs:-?} executions; the input is in fuzz/artifacts/$t/"
    grep -E 'panicked|ERROR|SUMMARY|assert' "$log" | head -n 10
    status=1
  fi
  rm -f "$log"
done
exit $status
