#!/bin/sh
# The whole attention job beside PyTorch's whole job, as users run them: one record of T
# random ids below 50000 (Python's random.Random(T)), embedding of 512 drawn after
# torch.manual_seed(123), 8 causal heads of 64 (torch.rand weights), output written.
#   attn --dim 512 --heads 8 --d-kq 64 --d-v 64 --causal --format npy|ndjson IDS
#   scripts/bench-attn-job.py IDS 512 8 64 64      (import, embed, project, SDPA, np.save)
# Each run REPS times, attn and torch alternating; prints per tool the range (min-max) of
# wall seconds and CPU seconds (user+sys) and the largest peak RSS, from /usr/bin/time.
# torch's "compute" row is its own clocks (wall, process CPU) from the embedding table to
# the attention output: no import, no reading, no output.
# Usage: scripts/bench-attn-job.sh PYTHON [REPS [T...]]   (a PYTHON with torch and numpy)
set -eu
cd "$(dirname "$0")/.."
PY=$1
REPS=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
SIZES=${*:-1024 4096 16384}
cargo build --release --quiet --bin attn
ATTN=${CARGO_TARGET_DIR:-target}/release/attn
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
avx512=no; grep -q avx512f /proc/cpuinfo && avx512=yes
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), avx512: $avx512, $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD), $(date -u '+%F %H:%M') UTC"
printf '%-14s %6s %13s %13s %8s\n' tool T wall_s cpu_s rss_MB
for T in $SIZES; do
    "$PY" -c "import random,sys; r=random.Random($T); print('[' + ','.join(str(r.randrange(50000)) for _ in range($T)) + ']')" > "$tmp/ids"
    : > "$tmp/npy"; : > "$tmp/json"; : > "$tmp/torch"; : > "$tmp/compute"
    i=0
    while [ $i -lt "$REPS" ]; do
        /usr/bin/time -f '%e %U %S %M' -a -o "$tmp/npy" "$ATTN" --dim 512 --heads 8 --d-kq 64 --d-v 64 --causal --format npy "$tmp/ids" > /dev/null
        /usr/bin/time -f '%e %U %S %M' -a -o "$tmp/json" "$ATTN" --dim 512 --heads 8 --d-kq 64 --d-v 64 --causal "$tmp/ids" > /dev/null
        /usr/bin/time -f '%e %U %S %M' -a -o "$tmp/torch" "$PY" scripts/bench-attn-job.py "$tmp/ids" 512 8 64 64 2>> "$tmp/compute" > /dev/null
        i=$((i + 1))
    done
    for f in npy json torch; do
        case $f in npy) name="attn npy";; json) name="attn ndjson";; torch) name="torch whole";; esac
        awk -v name="$name" -v t="$T" '
            { w = $1; c = $2 + $3; if (NR == 1 || w < wmin) wmin = w; if (w > wmax) wmax = w;
              if (NR == 1 || c < cmin) cmin = c; if (c > cmax) cmax = c; if ($4 > rss) rss = $4 }
            END { printf "%-14s %6s %6.2f-%-6.2f %6.2f-%-6.2f %8.0f\n", name, t, wmin, wmax, cmin, cmax, rss / 1024 }' "$tmp/$f"
    done
    awk -v t="$T" '/^compute/ { w = $2; c = $3; if (n++ == 0 || w < wmin) wmin = w; if (w > wmax) wmax = w;
              if (n == 1 || c < cmin) cmin = c; if (c > cmax) cmax = c }
        END { printf "%-14s %6s %6.2f-%-6.2f %6.2f-%-6.2f %8s\n", "torch compute", t, wmin, wmax, cmin, cmax, "-" }' "$tmp/compute"
done
