#!/bin/sh
# attn's attention kernel beside PyTorch's scaled_dot_product_attention, side by side:
# fp32, batch 1, 8 heads of 64, T = 1024, 4096, 16384, causal and not, 2 threads each.
# GFLOP/s counts 4*T*T*d*heads for full attention and 4*(T*(T+1)/2)*d*heads for causal.
# Usage: scripts/bench-attn.sh [PYTHON]   (PYTHON defaults to /opt/pyenv/bin/python)
set -eu
cd "$(dirname "$0")/.."
PY=${1:-/opt/pyenv/bin/python}
cargo build --release --quiet --example attn-bench
BIN=${CARGO_TARGET_DIR:-target}/release/examples/attn-bench
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus, commit $(git rev-parse --short HEAD), $(date -u +%F)"
printf '%-6s %6s %5s %3s %-6s %9s %8s\n' tool T heads d mode seconds GFLOP/s
for T in 1024 4096 16384; do
    reps=3; [ "$T" -ge 16384 ] && reps=1
    for mode in full causal; do
        "$BIN" "$T" 8 64 "$mode" "$reps" | awk '{printf "%-6s %6s %5s %3s %-6s %9s %8s\n",$1,$2,$3,$4,$5,$6,$7}'
        "$PY" scripts/bench-attn.py "$T" 8 64 "$mode" "$reps" | awk '{printf "%-6s %6s %5s %3s %-6s %9s %8s\n",$1,$2,$3,$4,$5,$6,$7}'
    done
done
