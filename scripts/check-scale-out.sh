#!/usr/bin/env bash
# Checks training and encoding on real engines against the single run, byte for byte
# (docs/scale-out.md):
#   - GNU parallel (Debian's `parallel`, installed with apt-get when missing):
#     `parallel --pipepart` shard counts (1, 2, 3, 7 jobs), merged in shuffled order and
#     trained from, give the merges of `bpe-train --records` for gpt2, gpt4 and o200k and
#     with special tokens; the same through one pipe (count | merge | train); encoding
#     through `parallel --pipepart -k` equals one bpe-encode run; a bad record fails it.
#   - Apache Spark in local mode (pyspark from PyPI into bench/spark-venv; Java 17 from
#     the machine, or Debian's openjdk-17-jre-headless when missing): the example job
#     examples/spark_bpe.py trains the single run's merges and encodes the single run's
#     ids, through mapPartitions + SparkFiles and through pipe(checkCode=True); a bad
#     record fails the job.
# Prints one line per check and `N passed, N failed`; exits 1 if any failed. Needs root
# for apt-get (or the tools already installed); runs without standard input.
#
# Usage: scripts/check-scale-out.sh          (builds the release binaries first)
# Environment: SCALE_BIN (folder with the binaries: no build), SCALE_SKIP_SPARK=1,
#   SCALE_VENV (default bench/spark-venv), SCALE_TMP (default: a fresh temporary folder).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${SCALE_VENV:-$ROOT/bench/spark-venv}
PYSPARK_PIN=pyspark==4.3.0
export LC_ALL=C DEBIAN_FRONTEND=noninteractive
TMP=${SCALE_TMP:-$(mktemp -d)}
mkdir -p "$TMP"
[ -z "${SCALE_TMP:-}" ] && trap 'rm -rf "$TMP"' EXIT
say() { printf '%s\n' "$*"; }
note() { printf 'check-scale-out: %s\n' "$*" >&2; }

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); say "ok     $*"; }
bad() { FAIL=$((FAIL + 1)); say "FAILED $*"; }
# same NAME A B: files A and B are equal byte for byte.
same() { if cmp -s "$2" "$3"; then ok "$1"; else bad "$1 ($2 and $3 differ)"; fi; }

# --- tools -----------------------------------------------------------------------------

if [ -n "${SCALE_BIN:-}" ]; then
  BIN=$SCALE_BIN
else
  note "cargo build --release"
  (cd "$ROOT" && cargo build --release --locked --bins -q)
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release
fi
BIN=$(cd "$BIN" && pwd)
TRAIN=$BIN/bpe-train ENCODE=$BIN/bpe-encode DECODE=$BIN/bpe-decode

apt_install() {
  note "apt-get install $*"
  if ! apt-get install -y -qq "$@" >"$TMP/apt.log" 2>&1; then
    apt-get update -qq >>"$TMP/apt.log" 2>&1 && apt-get install -y -qq "$@" >>"$TMP/apt.log" 2>&1
  fi
}
command -v parallel >/dev/null || apt_install parallel
# GNU parallel asks users to cite it once; this is a test run, not research output.
mkdir -p "$HOME/.parallel" && touch "$HOME/.parallel/will-cite"
PARALLEL_VERSION=$(parallel --version </dev/null | head -n 1)

if [ -z "${SCALE_SKIP_SPARK:-}" ]; then
  if ! command -v java >/dev/null; then apt_install openjdk-17-jre-headless; fi
  if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pyspark' 2>/dev/null; then
    note "creating $VENV with $PYSPARK_PIN"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "$PYSPARK_PIN" </dev/null
  fi
fi

# --- corpora -----------------------------------------------------------------------------

# corpus.txt: about 4 MB from the test fixtures, lines in a seeded order, with what makes
# the whole-stream split differ from the per-record one (runs of blank lines, `):\n\n`,
# whitespace-only lines, `\r`), end-of-text tokens between documents, and a few bytes
# that are not UTF-8. clean.txt: the same without `\r` and bad bytes (Spark's textFile
# changes those, see docs/scale-out.md).
python3 - "$ROOT/tests/fixtures" "$TMP" <<'EOF'
import random, sys
fix, out = sys.argv[1], sys.argv[2]
lines = []
for f in ["taylorswift.txt", "pretokenize/multilingual.txt", "word/mixed.txt"]:
    lines += open(f"{fix}/{f}", "rb").read().split(b"\n")
rng = random.Random(24)
extras = [b"\n\n\n", b"   \n", b"<|endoftext|>", b"):\n\n", b"\xff"]
raw, clean = bytearray(), bytearray()
while len(raw) < 4_000_000:
    line = rng.choice(lines)
    pre = rng.choice(extras) if rng.random() < 0.12 else b""
    post = rng.choice([b"  ", b"\r", b".\t"]) if rng.random() < 0.15 else b""
    raw += pre + line + post + b"\n"
    clean += pre.replace(b"\xff", b"") + line.replace(b"\r", b"") + post.replace(b"\r", b"") + b"\n"
open(f"{out}/corpus.txt", "wb").write(raw)
open(f"{out}/clean.txt", "wb").write(clean)
EOF
C=$TMP/corpus.txt
note "corpus $(wc -c <"$C") bytes, $(wc -l <"$C") lines; $PARALLEL_VERSION"

# shuffled FILE...: the files in a seeded random order.
shuffled() { printf '%s\n' "$@" | shuf --random-source=<(yes 24); }

# --- GNU parallel ------------------------------------------------------------------------

VS=1000
for spec in gpt2 gpt4 o200k "gpt4 --special <|endoftext|>"; do
  read -r split special_flag special <<<"$spec"
  flags=(--split "$split")
  [ -n "${special:-}" ] && flags+=("$special_flag" "$special")
  label="parallel $spec"
  "$TRAIN" -q --records "${flags[@]}" --vocab-size "$VS" -o "$TMP/single.json" "$C"
  for n in 1 2 3 7; do
    rm -rf "$TMP/counts" && mkdir -p "$TMP/counts"
    parallel -q --pipepart -a "$C" --block -1 -j "$n" \
      "$TRAIN" --emit-counts "${flags[@]}" -j 1 --shard '{#}' -o "$TMP/counts/{#}.counts"
    mapfile -t files < <(shuffled "$TMP"/counts/*.counts)
    "$TRAIN" --from-counts --emit-counts "${files[@]}" >"$TMP/merged.counts"
    "$TRAIN" -q --from-counts --vocab-size "$VS" -o "$TMP/sharded.json" "$TMP/merged.counts"
    same "$label: $n jobs (${#files[@]} shards), merged in shuffled order, trained" "$TMP/single.json" "$TMP/sharded.json"
  done
  # The issue's one pipeline: count shards | merge | train, all through pipes.
  parallel -q --pipepart -a "$C" --block -3 -j 2 "$TRAIN" --emit-counts "${flags[@]}" -j 1 --shard '{#}' |
    "$TRAIN" --from-counts --emit-counts |
    "$TRAIN" -q --from-counts --vocab-size "$VS" >"$TMP/piped.json"
  same "$label: count | merge | train through pipes" "$TMP/single.json" "$TMP/piped.json"
done

M=$TMP/model.json
"$TRAIN" -q --records --split gpt4 --special '<|endoftext|>' --vocab-size "$VS" -o "$M" "$C"
"$ENCODE" -q -m "$M" --allowed-special all "$C" >"$TMP/ids.jsonl"
for n in 1 2 3 7; do
  { "$ENCODE" -m "$M" --allowed-special all </dev/null
    parallel -q --pipepart -a "$C" --block -1 -j "$n" -k "$ENCODE" -m "$M" --allowed-special all -j 1 --no-header
  } >"$TMP/ids-par.jsonl"
  same "parallel encode: $n jobs, -k, header once" "$TMP/ids.jsonl" "$TMP/ids-par.jsonl"
done
"$DECODE" -q "$TMP/ids.jsonl" >"$TMP/decoded.txt"
same "bpe-decode of the ids gives the corpus back" "$C" "$TMP/decoded.txt"

# A bad record (an id outside the vocabulary) in the middle of the stream fails the job,
# and so parallel.
{ head -n 20000 "$TMP/ids.jsonl"; echo '[1,2,99999999]'; tail -n +20001 "$TMP/ids.jsonl"; } >"$TMP/bad.jsonl"
if parallel --pipepart -a "$TMP/bad.jsonl" --block -1 -j 2 -k "$DECODE" -q -m "$M" >/dev/null 2>"$TMP/bad.err"; then
  bad "parallel: a bad record fails the run (it exited 0)"
else
  if grep -q 'bpe-decode: error: .*99999999' "$TMP/bad.err"; then ok "parallel: a bad record fails the run, the tool says which"
  else bad "parallel: a bad record fails the run, but the message is: $(head -c 300 "$TMP/bad.err")"; fi
fi
: >"$TMP/empty.txt"
if "$ENCODE" -m "$M" --no-header "$TMP/empty.txt" >"$TMP/empty.out" && [ ! -s "$TMP/empty.out" ] &&
  "$TRAIN" --emit-counts --split gpt4 <"$TMP/empty.txt" >"$TMP/empty.counts" &&
  [ "$(wc -l <"$TMP/empty.counts")" -eq 1 ]; then
  ok "empty input: exit 0; no ids, a counts file that is the header alone"
else bad "empty input"; fi

# --- Spark --------------------------------------------------------------------------------

if [ -z "${SCALE_SKIP_SPARK:-}" ]; then
  export SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON=$VENV/bin/python PYSPARK_DRIVER_PYTHON=$VENV/bin/python
  export PATH=$VENV/bin:$PATH
  S=$TMP/clean.txt
  submit() {
    "$VENV/bin/spark-submit" --master 'local[2]' --conf spark.ui.enabled=false \
      --conf spark.driver.extraJavaOptions=-Dlog4j.rootLogger=WARN \
      "$ROOT/examples/spark_bpe.py" "$@" </dev/null >>"$TMP/spark.log" 2>&1
  }
  note "spark: $("$VENV/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)'), $(java -version 2>&1 | head -n 1)"
  "$TRAIN" -q --records --split gpt4 --vocab-size "$VS" -o "$TMP/s-single.json" "$S"
  if submit train --bin "$BIN" --split gpt4 --vocab-size "$VS" --partitions 5 "$S" "$TMP/s-spark.json"; then
    same "spark (mapPartitions + SparkFiles): trained merges" "$TMP/s-single.json" "$TMP/s-spark.json"
  else bad "spark train failed: see the log below"; tail -n 30 "$TMP/spark.log"; fi
  "$TRAIN" -q --records --split o200k --special '<|endoftext|>' --vocab-size "$VS" -o "$TMP/s-single2.json" "$S"
  if submit train --pipe --bin "$BIN" --split o200k --special '<|endoftext|>' --vocab-size "$VS" --partitions 3 "$S" "$TMP/s-spark2.json"; then
    same "spark (pipe, checkCode=True): trained merges, o200k with a special token" "$TMP/s-single2.json" "$TMP/s-spark2.json"
  else bad "spark train --pipe failed"; tail -n 30 "$TMP/spark.log"; fi

  "$ENCODE" -q -m "$TMP/s-single.json" --no-header "$S" >"$TMP/s-ids.jsonl"
  for via in "" --pipe; do
    rm -rf "$TMP/s-out"
    if submit encode $via --bin "$BIN" -m "$TMP/s-single.json" --partitions 4 "$S" "$TMP/s-out"; then
      cat "$TMP"/s-out/part-* >"$TMP/s-ids-spark.jsonl"
      same "spark encode ${via:-(mapPartitions)}: part files == one bpe-encode run" "$TMP/s-ids.jsonl" "$TMP/s-ids-spark.jsonl"
    else bad "spark encode $via failed"; tail -n 30 "$TMP/spark.log"; fi
  done

  { head -n 20000 "$TMP/s-ids.jsonl"; echo '[1,2,99999999]'; tail -n +20001 "$TMP/s-ids.jsonl"; } >"$TMP/s-bad.jsonl"
  for via in "" --pipe; do
    rm -rf "$TMP/s-out"
    if submit decode $via --bin "$BIN" -m "$TMP/s-single.json" --partitions 3 "$TMP/s-bad.jsonl" "$TMP/s-out"; then
      bad "spark ${via:-(mapPartitions)}: a bad record fails the job (it succeeded)"
    elif grep -q '99999999' "$TMP/spark.log"; then
      ok "spark ${via:-(mapPartitions)}: a bad record fails the job"
    else bad "spark ${via:-(mapPartitions)}: the job failed, but not for the bad record"; tail -n 30 "$TMP/spark.log"; fi
  done
fi

say "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
