#!/usr/bin/env bash
# Streaming soak: SIZE bytes of seeded text (examples/soak-text.rs, generated on the
# fly) through `bpe-encode --whole | bpe-decode --whole`, both reading pipes, checked
# byte for byte against the text (by SHA-256 of a second, identical generation), with
# the peak resident memory (VmHWM) of each tool. Memory must stay flat whatever SIZE:
# the soak fails if either tool's peak passes LIMIT_MB.
#
# Usage: scripts/soak.sh [SIZE] [MODEL] [LIMIT_MB]
#   SIZE      bytes, with K, M or G (default 10G; CI runs 1G)
#   MODEL     -m for both tools (default o200k_base)
#   LIMIT_MB  the most memory either tool may use (default 100)
# Environment: BENCH_BIN (default target/release; built with `cargo build --release
#   --examples` when it is the default and the soak-text example is missing).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZE=${1:-10G}
MODEL=${2:-o200k_base}
LIMIT=${3:-100}
BIN=${BENCH_BIN:-$ROOT/target/release}
GEN=$BIN/examples/soak-text
if [ ! -x "$GEN" ] || [ ! -x "$BIN/bpe-encode" ]; then
  (cd "$ROOT" && cargo build --release --locked --bins --example soak-text)
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "soak: $SIZE bytes, model $MODEL, limit $LIMIT MB per tool"
want=$("$GEN" "$SIZE" 7 | sha256sum | cut -d' ' -f1)
start=$(date +%s)
got=$("$GEN" "$SIZE" 7 \
  | /usr/bin/time -f "%M %e %U %S" -o "$TMP/encode" "$BIN/bpe-encode" --whole -m "$MODEL" \
  | /usr/bin/time -f "%M %e %U %S" -o "$TMP/decode" "$BIN/bpe-decode" --whole -m "$MODEL" \
  | sha256sum | cut -d' ' -f1)
end=$(date +%s)
status=0
for tool in encode decode; do
  read -r rss wall user sys < <(tail -n 1 "$TMP/$tool")
  mb=$((rss / 1024))
  echo "bpe-$tool --whole: peak RSS $mb MB, CPU $(echo "$user + $sys" | bc) s"
  if [ "$mb" -gt "$LIMIT" ]; then
    echo "soak: bpe-$tool used $mb MB, over the $LIMIT MB limit" >&2
    status=1
  fi
done
echo "wall: $((end - start)) s"
if [ "$got" != "$want" ]; then
  echo "soak: the round trip changed the text (sha256 $got, expected $want)" >&2
  status=1
else
  echo "round trip: identical (sha256 $want)"
fi
exit $status
