#!/usr/bin/env bash
# Benchmark rows for training past one machine (docs/scale-out.md), as a Markdown table
# of wall time, CPU time (user + system) and peak memory per command:
#   - map-side counting (`--emit-counts -j 1`) against today's single-process counting
#     (`--split gpt4 --vocab-size 256 -j 1`: the count with no merge after it), per core;
#   - merging counts files of growing total size (linear?);
#   - training from the merged counts against single-process split training;
#   - end to end through GNU parallel (count | merge | train) beside rustbpe and HF
#     tokenizers on the same file (peers as in scripts/bench.sh, from its venv).
#
# Usage: scripts/bench-scale-out.sh [CORPUS]   (default bench/corpora/mixed-100M.txt)
# Environment: BENCH_BIN (binaries; default target/release, built first),
#   BENCH_PYTHON (a python with rustbpe and tokenizers; default bench/venv's; none: no
#   peers), BENCH_VOCAB_SIZE (default 32768), BENCH_OUT (default bench/out/scale).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPUS=${1:-$ROOT/bench/corpora/mixed-100M.txt}
OUT=${BENCH_OUT:-$ROOT/bench/out/scale}
VS=${BENCH_VOCAB_SIZE:-32768}
PY=${BENCH_PYTHON:-$ROOT/bench/venv/bin/python}
export LC_ALL=C RAYON_NUM_THREADS=2
mkdir -p "$OUT"
if [ -z "${BENCH_BIN:-}" ]; then (cd "$ROOT" && cargo build --release --locked --bins -q) || exit 1; fi
BIN=${BENCH_BIN:-$ROOT/target/release}
T=$BIN/bpe-train
[ -f "$CORPUS" ] || { echo "bench-scale-out: $CORPUS missing (scripts/build-corpora.sh)" >&2; exit 1; }
N=$(wc -c <"$CORPUS")

# run LABEL BYTES CMD...: one row (stdout of CMD to $OUT/last.out).
run() {
  local label=$1 bytes=$2; shift 2
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f '%M %U %S' -o "$OUT/time.txt" "$@" >"$OUT/last.out" 2>>"$OUT/log.txt" ||
    { printf '| %s | failed | | | |\n' "$label"; return 1; }
  t1=$(date +%s%N)
  read -r rss u s <"$OUT/time.txt"
  awk -v l="$label" -v a="$t0" -v b="$t1" -v u="$u" -v s="$s" -v r="$rss" -v n="$bytes" 'BEGIN {
    w = (b - a) / 1e9; c = u + s
    printf "| %s | %.2f | %.2f | %.0f | %.1f |\n", l, w, c, r / 1024, n / 1e6 / c }'
}

echo "## Scale-out run $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- commit $(cd "$ROOT" && git rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, avx512f: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- corpus $(basename "$CORPUS"), $N bytes; vocabulary $VS; $(parallel --version </dev/null 2>/dev/null | head -n 1)"
echo
echo "| command | wall s | CPU s | peak RSS MiB | MB per CPU second |"
echo "|---|---:|---:|---:|---:|"
run "count, today: bpe-train --split gpt4 --vocab-size 256 -j 1 (whole stream, no merge)" "$N" "$T" -q --split gpt4 --vocab-size 256 -j 1 "$CORPUS"
run "count, today, stdin: the same from a pipe" "$N" sh -c "\"$T\" -q --split gpt4 --vocab-size 256 -j 1 < \"$CORPUS\""
run "map side: bpe-train --emit-counts --split gpt4 -j 1" "$N" "$T" --emit-counts --split gpt4 -j 1 "$CORPUS"
cp "$OUT/last.out" "$OUT/whole.counts"
run "map side, stdin: the same from a pipe" "$N" sh -c "\"$T\" --emit-counts --split gpt4 -j 1 < \"$CORPUS\""
run "map side, both cores: --emit-counts -j 2" "$N" "$T" --emit-counts --split gpt4 -j 2 "$CORPUS"

# Shards: 8 counts files from split -n l/K/8.
rm -f "$OUT"/shard.*.counts
for k in 1 2 3 4 5 6 7 8; do
  split -n "l/$k/8" "$CORPUS" | "$T" --emit-counts --split gpt4 -j 1 --shard "$k" >"$OUT/shard.$k.counts"
done
for m in 1 2 4 8; do
  files=()
  for k in $(seq 1 "$m"); do files+=("$OUT/shard.$k.counts"); done
  bytes=$(cat "${files[@]}" | wc -c)
  run "merge $m shard counts files ($((bytes / 1000000)) MB of counts)" "$bytes" "$T" --from-counts --emit-counts "${files[@]}"
done
cp "$OUT/last.out" "$OUT/merged.counts"
echo "| (merged counts: $(wc -c <"$OUT/merged.counts") bytes, $(($(wc -l <"$OUT/merged.counts") - 1)) distinct chunks) | | | | |"

run "train, today: bpe-train --split gpt4 --vocab-size $VS (both cores)" "$N" "$T" -q --split gpt4 --vocab-size "$VS" "$CORPUS"
cp "$OUT/last.out" "$OUT/split.json"
run "train, records: bpe-train --records --split gpt4 --vocab-size $VS" "$N" "$T" -q --records --split gpt4 --vocab-size "$VS" "$CORPUS"
cp "$OUT/last.out" "$OUT/records.json"
run "train from merged counts: bpe-train --from-counts --vocab-size $VS" "$N" "$T" -q --from-counts --vocab-size "$VS" "$OUT/merged.counts"
cp "$OUT/last.out" "$OUT/from-counts.json"
cmp -s "$OUT/records.json" "$OUT/from-counts.json" && same=yes || same=NO
if command -v parallel >/dev/null; then
  # shellcheck disable=SC2016
  run "end to end: parallel --pipepart -j 2 count | merge | train" "$N" bash -c '
    parallel -q --pipepart -a "$2" --block -4 -j 2 "$1" --emit-counts --split gpt4 -j 1 --shard "{#}" |
      "$1" --from-counts --emit-counts | "$1" -q --from-counts --vocab-size "$3"' _ "$T" "$CORPUS" "$VS"
  cmp -s "$OUT/records.json" "$OUT/last.out" && same2=yes || same2=NO
else
  echo "| end to end through GNU parallel: skipped (parallel not installed) | | | | |"
  same2="not run (no GNU parallel)"
fi
if [ -x "$PY" ] && "$PY" -c 'import rustbpe, tokenizers' 2>/dev/null; then
  run "rustbpe train_from_iterator (GPT-4 split, RAYON 2 threads; whole process)" "$N" "$PY" "$ROOT/scripts/bench/peers.py" rustbpe "$CORPUS" --vocab-size "$VS"
  echo "| (rustbpe's own figure, training alone: $(sed 's/.*seconds=\([^ ]*\).*/\1/' "$OUT/last.out") s) | | | | |"
  run "HF tokenizers BpeTrainer (GPT-4 split, byte-level; whole process)" "$N" "$PY" "$ROOT/scripts/bench/peers.py" hf "$CORPUS" --vocab-size "$VS"
  echo "| (HF's own figure, training alone: $(sed 's/.*seconds=\([^ ]*\).*/\1/' "$OUT/last.out") s) | | | | |"
fi
echo
echo "- merges from the merged counts == --records single run: $same; end to end through parallel == single run: $same2"
