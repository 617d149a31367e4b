#!/usr/bin/env bash
# Checks the token files bpe-encode writes with the real readers from the package
# registry: numpy (nanoGPT's np.fromfile / np.memmap, llm.c's header reading) and
# megatron-core's IndexedDataset (read back) and IndexedDatasetBuilder (written the same
# way from the NDJSON ids, and merged with add_index: the bytes must be equal). Prints
# one "ok"/"FAIL" line per check and "N passed, M failed"; exits 1 on any failure.
#
#   scripts/check-tokens.sh            # builds the tools (debug), the venv on first use
#   BIN_DIR=target/release scripts/check-tokens.sh
#
# The venv (bench/venv-tokens, git-ignored; TOKENS_VENV overrides) holds numpy, torch and
# megatron-core 0.16.1. megatron-core is installed with --no-deps (its own requirements
# pull in far more than IndexedDataset needs); torch comes from PyPI, whose Linux wheel
# brings CUDA libraries (a few GB, once), since `import megatron.core` imports torch.
# Runs with no standard input; a few minutes from scratch, ~30 s with the venv present.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${TOKENS_VENV:-$root/bench/venv-tokens}
python=${PYTHON:-python3}

if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import megatron.core, numpy' 2>/dev/null; then
    echo "check-tokens: installing numpy, torch and megatron-core into $venv" >&2
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        numpy==2.4.6 torch==2.15.0 packaging==26.4 </dev/null
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        megatron-core==0.16.1 </dev/null
fi

if [[ -z ${BIN_DIR:-} ]]; then
    cargo build --locked --bins --quiet </dev/null
    BIN_DIR=$root/target/debug
fi
export BIN_DIR
work=$(mktemp -d "${TMPDIR:-/tmp}/check-tokens.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
PYTHONWARNINGS=ignore "$venv/bin/python" "$root/scripts/check-tokens.py" </dev/null
