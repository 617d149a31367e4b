#!/bin/sh
# attn's attention kernel beside PyTorch's scaled_dot_product_attention, side by side:
# fp32, batch 1, 8 heads of 64, T = 1024, 4096, 16384, causal and not, 2 threads each, on
# uniform(-1, 1) data and on seed-style data (N(0, 1) embeddings of 512 projected by
# uniform [0, 1) weights: large scores, mostly-zero softmax weights).
# GFLOP/s counts 4*T*T*d*heads for full attention and 4*(T*(T+1)/2)*d*heads for causal;
# seconds are the best of the repeats. The whole job (embedding, projections, output,
# process start) is scripts/bench-attn-job.sh.
# Usage: scripts/bench-attn.sh PYTHON [T...]   (a PYTHON with torch)
set -eu
cd "$(dirname "$0")/.."
PY=$1
shift
SIZES=${*:-1024 4096 16384}
cargo build --release --quiet --example attn-bench
BIN=${CARGO_TARGET_DIR:-target}/release/examples/attn-bench
avx512=no; grep -q avx512f /proc/cpuinfo && avx512=yes
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), avx512: $avx512, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD), $(date -u '+%F %H:%M') UTC"
fmt='%-6s %6s %5s %3s %-6s %-7s %-8s %9s %8s\n'
printf "$fmt" tool T heads d mode data path seconds GFLOP/s
for T in $SIZES; do
    reps=3; [ "$T" -ge 16384 ] && reps=1
    for data in uniform seed; do
        for mode in full causal; do
            "$BIN" "$T" 8 64 "$mode" "$reps" "$data" | awk -v f="$fmt" '{printf f,$1,$2,$3,$4,$5,$6,$7,$8,$9}'
            "$PY" scripts/bench-attn.py "$T" 8 64 "$mode" "$reps" "$data" | awk -v f="$fmt" '{printf f,$1,$2,$3,$4,$5,$6,$7,$8,$9}'
        done
    done
done
