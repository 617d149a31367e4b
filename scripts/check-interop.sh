#!/usr/bin/env bash
# Live interop check: installs the real HF tokenizers and tiktoken (pinned, from PyPI)
# into a venv, then runs scripts/check-interop.py: models trained by bpe-train on a
# generated corpus, exported by bpe-model, must load in HF tokenizers, tiktoken and
# minbpe and give line for line the ids bpe-encode gives; the built-ins exported to
# tokenizer.json must give HF tiktoken's ids. minbpe is not on PyPI: the check uses the
# real one when MINBPE_DIR names a checkout of it, else a stand-in written from its
# format (see check-interop.py).
#
# Usage: scripts/check-interop.sh [BIN_DIR]   (default: builds target/debug; .ci/run passes
# target/debug after `cargo test` has built the tools there)
# The venv goes to $INTEROP_VENV (default ${TMPDIR:-/tmp}/toksuite-interop-venv) and is
# reused when its pins match. Runs in CI (.ci/run): a couple of minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

TOKENIZERS=0.23.3
TIKTOKEN=0.14.0
REGEX=2026.11.19
VENV=${INTEROP_VENV:-${TMPDIR:-/tmp}/toksuite-interop-venv}
PINS="tokenizers==$TOKENIZERS tiktoken==$TIKTOKEN regex==$REGEX"

if [ $# -ge 1 ]; then
    BIN=$1
else
    cargo build --locked --bins
    BIN=target/debug
fi

if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/pins" 2>/dev/null)" != "$PINS" ]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install --quiet --disable-pip-version-check $PINS
    echo "$PINS" > "$VENV/pins"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/toksuite-interop.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# tiktoken caches rank files it loads by path; this check parses them itself, but keep
# any cache out of the way of a rewritten file.
export TIKTOKEN_CACHE_DIR=""
"$VENV/bin/python" scripts/check-interop.py "$BIN" "$WORK" assets
