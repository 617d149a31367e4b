#!/usr/bin/env bash
# The token-file rows of BENCHMARKS.md ("Token files"): JSONL in, u32 / Megatron out,
# o200k_base, all threads, against NDJSON text mode on the same text and against
# tiktoken's encode_ordinary_batch + numpy packing (scripts/bench/tokens_peer.py); peak
# memory at 100 MB and 1 GB of JSONL. Prints a Markdown table; the peer's file is
# compared with ours (token for token).
#
#   scripts/build-jsonl.py          # once: bench/corpora/mixed-100M.jsonl, mixed-1G.jsonl
#   scripts/bench-tokens.sh
#
# Environment: BENCH_BIN (folder of release binaries; default: cargo build --release),
# BENCH_CORPORA (bench/corpora), BENCH_TEXT (the text the JSONL was made from; default
# BENCH_CORPORA/mixed-100M.txt), BENCH_PYTHON (a python with tiktoken 0.14.0 and numpy;
# default bench/venv, created on first use), BENCH_RUNS (runs per 100 MB row, default 3;
# ranges are min-max), BENCH_OUT (bench/out/tokens).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPORA=${BENCH_CORPORA:-$ROOT/bench/corpora}
TEXT=${BENCH_TEXT:-$CORPORA/mixed-100M.txt}
JSONL=$CORPORA/mixed-100M.jsonl
BIG=$CORPORA/mixed-1G.jsonl
OUT=${BENCH_OUT:-$ROOT/bench/out/tokens}
RUNS=${BENCH_RUNS:-3}
export LC_ALL=C
for f in "$TEXT" "$JSONL" "$BIG"; do
  [ -f "$f" ] || { echo "bench-tokens: $f is missing (scripts/build-corpora.sh, scripts/build-jsonl.py)" >&2; exit 2; }
done
if [ -n "${BENCH_BIN:-}" ]; then
  BIN=$BENCH_BIN
else
  (cd "$ROOT" && cargo build --release --locked --bins --quiet) || exit 1
  BIN=$ROOT/target/release
fi
PY=${BENCH_PYTHON:-$ROOT/bench/venv/bin/python}
if ! "$PY" -c 'import tiktoken, numpy' 2>/dev/null; then
  python3 -m venv "$ROOT/bench/venv" && "$ROOT/bench/venv/bin/pip" install --quiet \
    tiktoken==0.14.0 numpy==2.4.6 </dev/null || exit 1
  PY=$ROOT/bench/venv/bin/python
fi
mkdir -p "$OUT"
ENC="$BIN/bpe-encode -m o200k_base"
EOT="<|endoftext|>"

# row NAME BYTES RUNS CMD...: wall and CPU (user + system) ranges over RUNS runs, peak
# memory, MB/s of BYTES at the fastest wall time.
row() {
  local name=$1 bytes=$2 runs=$3
  shift 3
  local walls=() cpus=() rss=0 t
  for _ in $(seq "$runs"); do
    /usr/bin/time -f '%e %U %S %M' -o "$OUT/time" "$@" > /dev/null 2> "$OUT/stderr" || {
      echo "| $name | failed: $(tail -n 1 "$OUT/stderr") | | | |"; return; }
    read -r w u s m < <(tail -n 1 "$OUT/time")
    walls+=("$w"); cpus+=("$(echo "$u + $s" | bc)")
    [ "$m" -gt "$rss" ] && rss=$m
  done
  local wmin wmax cmin cmax
  wmin=$(printf '%s\n' "${walls[@]}" | sort -g | head -n 1); wmax=$(printf '%s\n' "${walls[@]}" | sort -g | tail -n 1)
  cmin=$(printf '%s\n' "${cpus[@]}" | sort -g | head -n 1); cmax=$(printf '%s\n' "${cpus[@]}" | sort -g | tail -n 1)
  echo "| $name | $wmin-$wmax | $cmin-$cmax | $((rss / 1024)) | $(echo "scale=1; $bytes / 1000000 / $wmin" | bc) |"
}

text_bytes=$(stat -c %s "$TEXT")
echo "Host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) threads, avx512f: $(grep -q avx512f /proc/cpuinfo && echo yes || echo no); commit $(git -C "$ROOT" rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| command (o200k_base, all threads) | wall s | CPU s | peak MB | MB/s of text |"
echo "|---|---|---|---|---|"
row "bpe-encode, text lines -> NDJSON (mixed-100M.txt)" "$text_bytes" "$RUNS" \
  $ENC -o "$OUT/text.ndjson" "$TEXT"
row "bpe-encode --field text -> NDJSON (mixed-100M.jsonl)" "$text_bytes" "$RUNS" \
  $ENC --field text -o "$OUT/jsonl.ndjson" "$JSONL"
row "bpe-encode --field text --format u32 --eot" "$text_bytes" "$RUNS" \
  $ENC --field text --format u32 --eot "$EOT" -o "$OUT/ours.u32" "$JSONL"
row "bpe-encode --field text --format megatron --eot" "$text_bytes" "$RUNS" \
  $ENC --field text --format megatron --eot "$EOT" -o "$OUT/corpus" "$JSONL"
row "tiktoken encode_ordinary_batch + numpy -> u32" "$text_bytes" 1 \
  "$PY" "$ROOT/scripts/bench/tokens_peer.py" "$JSONL" "$OUT/peer.u32"
echo
echo "Peer's time split: $(tail -n 1 "$OUT/stderr")"
if cmp -s "$OUT/ours.u32" "$OUT/peer.u32"; then
  echo "The peer's file equals ours: $(( $(stat -c %s "$OUT/ours.u32") / 4 )) tokens."
else
  echo "The peer's file DIFFERS from ours."
fi
echo
echo "| memory: 1 GB of JSONL (mixed-1G.jsonl) | wall s | CPU s | peak MB | MB/s of text |"
echo "|---|---|---|---|---|"
row "bpe-encode --field text --format u32 --eot" "$((10 * text_bytes))" 1 \
  $ENC --field text --format u32 --eot "$EOT" -o "$OUT/big.u32" "$BIG"
row "bpe-encode --field text --format megatron --eot" "$((10 * text_bytes))" 1 \
  $ENC --field text --format megatron --eot "$EOT" -o "$OUT/big" "$BIG"
rm -f "$OUT/big.u32" "$OUT/big.bin" "$OUT/big.idx"
