#!/bin/sh
# The seed in one pipe: from the sentence "Life is short, eat dessert first" to the seed's
# table of self-attention context vectors, with the suite's binaries only.
#
#   1. bpe-train --model-type word learns the word vocabulary, exactly the seed's
#      dc = {s:i for i,s in enumerate(sorted(sentence.replace(',', '').split()))}
#      = {'Life': 0, 'dessert': 1, 'eat': 2, 'first': 3, 'is': 4, 'short': 5}, [UNK] = 6;
#   2. bpe-encode turns the sentence into ids: [0,4,5,2,1,3];
#   3. attn embeds them and applies the seed's self-attention (its defaults are the seed's
#      example: vocabulary 50000, dim 3, d_kq 2, d_v 4, seed 123) and prints the 6x4 table.
#
# Usage: examples/seed-pipeline.sh [DIR]   (DIR keeps words.json; default: a temporary one)
# Binaries come from $TOKSUITE_BIN if set, else this checkout's release build if there is
# one (cargo build --release), else PATH.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${TOKSUITE_BIN:-}" ]; then
    PATH="$TOKSUITE_BIN:$PATH"
elif [ -x "$root/target/release/bpe-train" ]; then
    PATH="$root/target/release:$PATH"
fi
for tool in bpe-train bpe-encode attn; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "seed-pipeline: error: $tool not found (cargo build --release, or set TOKSUITE_BIN)" >&2
        exit 1
    }
done

if [ $# -ge 1 ]; then
    dir=$1
    mkdir -p "$dir"
else
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
fi
cd "$dir"

echo 'Life is short, eat dessert first' | tr -d , | bpe-train --model-type word > words.json
echo 'Life is short eat dessert first' | bpe-encode -m words.json | attn
