#!/usr/bin/env bash
# The portable default build beside the tuned build (scripts/build-tuned.sh), job by job,
# the two run in pairs whose order alternates (portable first, then tuned first), so that
# the host's drift hits both alike (hyperfine runs one command's runs in a block, and a
# two-thread row moved by 10% between such blocks):
# train 27 MB (--split none and gpt4), encode o200k_base on one thread and on all, decode,
# the attention kernel, and start-up. Prints a Markdown table: mean wall time of each,
# and its CPU time (user + system, the steadier figure on a shared host), and
# portable/tuned of each (above 1: the portable build is slower).
#
# Needs: python3, bench/corpora/mixed-27M.txt (scripts/build-corpora.sh).
# Usage: scripts/bench-builds.sh [RUNS]   (default 5 pairs of runs, after one warm-up each)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=${1:-5}
CORPUS=$ROOT/bench/corpora/mixed-27M.txt
[ -f "$CORPUS" ] || { echo "bench-builds: run scripts/build-corpora.sh first" >&2; exit 1; }

echo "bench-builds: building both" >&2
cargo build --quiet --release --locked --bins --example attn-bench
scripts/build-tuned.sh --quiet --bins --example attn-bench 2>/dev/null
P=$ROOT/target/release
T=$ROOT/target/x86_64-unknown-linux-gnu/release
OUT=$ROOT/bench/out/builds
mkdir -p "$OUT"
"$P/bpe-encode" "$CORPUS" -o "$OUT/o200k.ids"

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
avx512=$(grep -qw avx512f /proc/cpuinfo && echo "AVX-512" || echo "no AVX-512")
echo "Host: $cpu ($avx512), $(nproc) cores; commit $(git rev-parse --short HEAD); $(date -u +%F\ %H:%M) UTC; $RUNS runs each"
echo
echo "| job | portable wall s | tuned wall s | portable/tuned wall | portable CPU s | tuned CPU s | portable/tuned CPU |"
echo "|---|---:|---:|---:|---:|---:|---:|"
row() {
    python3 - "$1" "$RUNS" "${2//@/$P}" "${2//@/$T}" <<'PY' || echo "| $1 | failed | | | | | |"
import resource, shlex, subprocess, sys, time

name, runs, commands = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def run(command):
    """Wall and CPU (user + system of the children) seconds of one run."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(shlex.split(command), check=True, stdout=subprocess.DEVNULL)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

for command in commands:
    run(command)
times = [[], []]
for k in range(runs):
    for i in (0, 1) if k % 2 == 0 else (1, 0):
        times[i].append(run(commands[i]))
(pw, pc), (tw, tc) = [[sum(x) / runs for x in zip(*t)] for t in times]
print(f"| {name.replace('|', chr(92) + '|')} | {pw:.3f} | {tw:.3f} | {pw / tw:.3f} | {pc:.3f} | {tc:.3f} | {pc / tc:.3f} |")
PY
}
row "train 27 MB, vocab 32768, --split none" "@/bpe-train -q --vocab-size 32768 $CORPUS -o /dev/null"
row "train 27 MB, vocab 32768, --split gpt4" "@/bpe-train -q --vocab-size 32768 --split gpt4 $CORPUS -o /dev/null"
row "encode 27 MB, o200k_base, 1 thread" "@/bpe-encode -j 1 $CORPUS -o /dev/null"
row "encode 27 MB, o200k_base, all threads" "@/bpe-encode $CORPUS -o /dev/null"
row "decode 27 MB of text (o200k_base ids)" "@/bpe-decode $OUT/o200k.ids -o /dev/null"
row "attention kernel, T 4096, 8x64 heads, causal" "@/examples/attn-bench 4096 8 64 causal 3"
row "start-up: echo hi | bpe-encode (100 runs)" "sh -c 'for i in \$(seq 100); do echo hi | @/bpe-encode >/dev/null; done'"
