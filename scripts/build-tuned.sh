#!/bin/sh
# The opt-in tuned build: x86-64 Linux binaries for THIS machine's CPU, statically linked
# and non-PIE. Not the default (`cargo build --release` / `cargo install --path .` are
# portable: they run on every CPU of their architecture and choose SIMD paths at run
# time), and not for shipping: these binaries die with SIGILL on an older CPU.
#
# What it changes, and what that buys (BENCHMARKS.md, "Portable and tuned builds"):
#   -C target-cpu=native            the whole program compiled for this CPU; the hot
#                                   kernels already get their SIMD at run time
#   +crt-static, relocation-model   a static, non-PIE executable: no dynamic loader or
#                                   relocations at start-up (a few tenths of a ms per call)
#   -prefer-256-bit (AVX-512 hosts) target-cpu=native on Intel's AVX-512 server parts makes
#                                   LLVM prefer 256-bit vectors, and the attention kernel's
#                                   AVX-512 path then spills its 4x64 tile to the stack:
#                                   1.12 s of CPU against 0.56 with this flag and 0.52 for
#                                   the portable build (attn-bench 4096 8 64 causal, family
#                                   6 model 207); rustc warns that the feature is unstable
#
# `--target` is given explicitly so that cargo builds proc-macros and build scripts for
# the host without these flags (a static host cannot load proc-macros). The binaries land
# in target/x86_64-unknown-linux-gnu/release/.
#
# Usage: scripts/build-tuned.sh [CARGO BUILD ARGS...]
set -eu
cd "$(dirname "$0")/.."
wide=""
grep -q avx512f /proc/cpuinfo 2>/dev/null && wide="-C target-feature=-prefer-256-bit"
RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native -C target-feature=+crt-static -C relocation-model=static $wide" \
    cargo build --release --locked --target x86_64-unknown-linux-gnu "$@"
echo "build-tuned: binaries in ${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/" >&2
