#!/usr/bin/env bash
# Portability check (CI runs it): the default build
#   1. type-checks for other platforms (aarch64 Linux, Apple ARM macOS),
#   2. runs on an older x86-64 CPU: the tools from `cargo build --release` run under
#      `qemu-x86_64 -cpu Nehalem` (SSE4.2, no AVX: the runtime-dispatched fallbacks) and
#      `-cpu qemu64` (the x86-64 baseline, SSE2 only), and give the native run's output:
#      train, encode, decode byte for byte; attn's numbers within 1e-4 (its SIMD paths
#      round differently in the last bits, and it prints 4 decimals).
# It also builds with the oldest Rust the package declares (Cargo.toml's rust-version).
# Needs: rustup (for the extra targets and toolchain), qemu-user (Debian; installed when missing and
# apt-get is there), python3. Usage: scripts/check-portable.sh [BIN_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { printf 'check-portable: %s\n' "$*" >&2; }

# 1. Other platforms: the library and the tools compile (no linker needed for check).
for target in aarch64-unknown-linux-gnu aarch64-apple-darwin; do
    rustup target list --installed | grep -qx "$target" || rustup target add "$target" >/dev/null
    say "cargo check --target $target"
    cargo check --quiet --locked --target "$target" --lib --bins
done

# The declared minimum Rust version builds the library and the tools.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
rustup toolchain list | grep -q "^$msrv" || rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1
say "cargo +$msrv check (rust-version)"
CARGO_TARGET_DIR=$ROOT/target/msrv cargo "+$msrv" check --quiet --locked --lib --bins

# 2. An older CPU, emulated.
if ! command -v qemu-x86_64 >/dev/null; then
    if command -v apt-get >/dev/null; then
        say "installing qemu-user"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null
    else
        say "error: qemu-x86_64 not found"; exit 1
    fi
fi
BIN=${1:-}
if [ -z "$BIN" ]; then
    say "cargo build --release"
    cargo build --quiet --release --locked --bins
    BIN=$ROOT/target/release
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CORPUS=$ROOT/tests/fixtures/taylorswift.txt
head -n 400 "$CORPUS" > "$WORK/corpus.txt"
printf 'Life is short eat dessert first\n' > "$WORK/words.txt"

# Every command once; $RUN is empty (native) or the emulator with its CPU.
jobs() {
    local out=$1
    mkdir -p "$out"
    $RUN "$BIN/bpe-train" --vocab-size 400 "$WORK/corpus.txt" > "$out/none.json"
    $RUN "$BIN/bpe-train" --vocab-size 400 --split gpt4 --special '<|end|>' "$WORK/corpus.txt" > "$out/gpt4.json"
    $RUN "$BIN/bpe-train" --model-type word "$WORK/words.txt" > "$out/words.json"
    for m in "$out/none.json" "$out/gpt4.json" o200k_base cl100k_base; do
        local tag; tag=$(basename "$m" .json)
        # Model paths differ between runs: compare the records, not the header.
        $RUN "$BIN/bpe-encode" --no-header -m "$m" "$WORK/corpus.txt" > "$out/$tag.ids"
        $RUN "$BIN/bpe-encode" --no-header --whole -m "$m" "$WORK/corpus.txt" > "$out/$tag.whole.ids"
        $RUN "$BIN/bpe-decode" -m "$m" "$out/$tag.ids" > "$out/$tag.txt"
    done
    $RUN "$BIN/bpe-encode" --no-header -m "$out/words.json" "$WORK/words.txt" > "$out/words.ids"
    $RUN "$BIN/attn" "$out/words.ids" > "$out/attn-seed.txt"
    $RUN "$BIN/bpe-encode" --no-header "$WORK/corpus.txt" | head -n 20 > "$out/rec.ids"
    $RUN "$BIN/attn" --vocab-size 200019 --dim 64 --heads 2 --d-kq 32 --d-v 32 "$out/rec.ids" > "$out/attn-full.txt"
    $RUN "$BIN/attn" --vocab-size 200019 --dim 64 --heads 2 --d-kq 32 --d-v 32 --causal "$out/rec.ids" > "$out/attn-causal.txt"
}

RUN="" jobs "$WORK/native"
cmp -s "$WORK/native/o200k_base.txt" "$WORK/corpus.txt" || { say "error: native round trip differs"; exit 1; }
status=0
for cpu in Nehalem qemu64; do
    say "running the tools under qemu-x86_64 -cpu $cpu"
    RUN="qemu-x86_64 -cpu $cpu" jobs "$WORK/$cpu"
    for f in "$WORK/native"/*; do
        name=$(basename "$f")
        case $name in
            attn-*)
                python3 - "$f" "$WORK/$cpu/$name" <<'PY' || { say "error: $cpu: $name differs beyond 1e-4"; status=1; }
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
def flat(x):
    return [v for r in x for v in (flat(r) if isinstance(r, list) else [r])]
fa, fb = flat(a), flat(b)
sys.exit(0 if len(fa) == len(fb) and all(abs(x - y) <= 1e-4 + 1e-12 for x, y in zip(fa, fb)) else 1)
PY
                ;;
            *) cmp -s "$f" "$WORK/$cpu/$name" || { say "error: $cpu: $name differs"; status=1; } ;;
        esac
    done
done
[ "$status" = 0 ] && say "ok: native, Nehalem and qemu64 agree"
exit "$status"
