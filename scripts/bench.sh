#!/usr/bin/env bash
# Benchmarks bpe-train, bpe-encode and bpe-decode against their peers, as whole commands
# on the corpora of scripts/build-corpora.sh, and prints a Markdown table of figures:
# wall time, CPU time, peak resident memory, throughput, and the ratios the issues set as targets.
#
# Usage: scripts/bench.sh [CORPUS] [SECTION...]
#   CORPUS    the text for the 27 MB sections (default bench/corpora/mixed-27M.txt)
#   SECTION   seed train train100 split encode decode word (default: all of them);
#             `peers` runs only the peer tools of every section, `ours` only ours
#
# Environment:
#   BENCH_PYTHON   a python with the peers installed (default: bench/venv, created on
#                  first use with the pinned versions below)
#   BENCH_SYSTEM_PYTHON  a second python for the seed (default /usr/bin/python3, when it
#                  is another build than BENCH_PYTHON's; empty: none)
#   BENCH_VOCAB    folder with o200k_base.tiktoken and cl100k_base.tiktoken
#   BENCH_RUNS     runs per command, the fastest reported (default 1; commands under
#                  2 s are always run 3 times)
#   BENCH_OUT      folder for models, id streams and the log (default bench/out)
#   BENCH_NO_BUILD set to skip `cargo build --release`
#   BENCH_BIN      folder with the binaries to measure (no build then)
#   BENCH_VOCAB_SIZE  vocabulary of the 32k sections (default 32768; smaller for a smoke test)
#   BENCH_TIMEOUT  seconds after which a command is stopped and reported so (default 600)
#
# Threads: our tools use both cores unless -j 1 is shown; rustbpe and HF tokenizers get
# RAYON_NUM_THREADS=2, sentencepiece num_threads=2; tiktoken's encode_ordinary and the
# seed's Python are single-threaded; gzip is single-threaded.
#
# Ratios compare our whole command (start-up, model load, reading, output) with the
# peer's work alone (timed inside Python after its imports, model load and file read),
# which favours the peers; the peers' whole-process wall time is in the table too. The
# seed section also gives the like-for-like ratios: whole process against whole process,
# and training call against training call (examples/train-bench.rs, in process).
# "By CPU time" ratios compare user + system seconds of the whole processes (peers'
# start-up included): on a busy machine they are steadier than wall time.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CORPORA=${BENCH_CORPORA:-$ROOT/bench/corpora}
OUT=${BENCH_OUT:-$ROOT/bench/out}
VENV=$ROOT/bench/venv
PEERS=$ROOT/scripts/bench/peers.py
# The default (portable) release build; BENCH_BIN=target/x86_64-unknown-linux-gnu/release
# (with BENCH_NO_BUILD) measures the tuned build of scripts/build-tuned.sh instead.
BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release}
PIP_PINS=(tiktoken==0.14.0 rustbpe==0.1.0 tokenizers==0.23.3 sentencepiece==0.2.3)
export RAYON_NUM_THREADS=2 LC_ALL=C

CORPUS=$CORPORA/mixed-27M.txt
VS=${BENCH_VOCAB_SIZE:-32768}
LIMIT=${BENCH_TIMEOUT:-600}
SECTIONS=()
WHO=all
for a in "$@"; do
  case $a in
    seed | train | train100 | split | encode | decode | word) SECTIONS+=("$a") ;;
    peers | ours) WHO=$a ;;
    -h | --help) sed -n '2,/^set -uo/{/^set/d;s/^# \{0,1\}//;p;}' "$0"; exit 0 ;;
    *) if [ -f "$a" ]; then CORPUS=$a; else echo "bench: no such section or file: $a" >&2; exit 2; fi ;;
  esac
done
[ ${#SECTIONS[@]} -eq 0 ] && SECTIONS=(seed train train100 split encode decode word)
want() { local s; for s in "${SECTIONS[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
ours() { [ "$WHO" != peers ]; }
peers() { [ "$WHO" != ours ]; }

mkdir -p "$OUT"
LOG=$OUT/bench.log
: >"$LOG"
say() { printf '%s\n' "$*"; }
note() { printf '%s\n' "$*" >&2; }

# --- setup -----------------------------------------------------------------------------

if ours && [ -z "${BENCH_NO_BUILD:-}" ] && [ -z "${BENCH_BIN:-}" ]; then
  note "bench: cargo build --release"
  (cd "$ROOT" && cargo build --release -q --bins --example train-bench --example spawn-bench) || { note "bench: build failed"; exit 1; }
fi

PY=${BENCH_PYTHON:-}
if peers && [ -z "$PY" ]; then
  PY=$VENV/bin/python
  if [ ! -x "$PY" ] || ! "$PY" -c 'import tiktoken, rustbpe, tokenizers, sentencepiece' 2>/dev/null; then
    note "bench: creating $VENV with ${PIP_PINS[*]}"
    if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q "${PIP_PINS[@]}"; }; then
      note "bench: could not create the venv (set BENCH_PYTHON to a python with the peers)"; exit 1
    fi
  fi
fi

# The seed section runs the seed on a second python too: the system's, when it is
# another build than PY (BENCH_SYSTEM_PYTHON to name another, or an empty value for none).
pyname() { "$1" -c 'import sys; print(sys.executable, sys.version.split()[0])' 2>/dev/null; }
SYSPY=${BENCH_SYSTEM_PYTHON-/usr/bin/python3} PYNAME="" SYSPYNAME=""
if peers; then
  PYNAME=$(pyname "$PY")
  if [ -n "$SYSPY" ] && [ -x "$SYSPY" ] && [ "$(readlink -f "$SYSPY")" != "$(readlink -f "$PY")" ]; then
    SYSPYNAME=$(pyname "$SYSPY")
  else SYSPY=""; fi
fi

VOCAB=${BENCH_VOCAB:-}
if [ -z "$VOCAB" ]; then
  for d in "$ROOT/../shared/vocab" "$ROOT/../../shared/vocab" /work/shared/vocab; do
    [ -f "$d/o200k_base.tiktoken" ] && { VOCAB=$d; break; }
  done
fi

for f in "$CORPUS" "$CORPORA/taylorswift.txt"; do
  [ -f "$f" ] || { note "bench: $f is missing: run scripts/build-corpora.sh"; exit 1; }
done
BYTES=$(wc -c <"$CORPUS")
CNAME=$(basename "$CORPUS")

# --- measuring -------------------------------------------------------------------------

# measure OUTFILE CMD...: runs CMD with stdout to OUTFILE, BENCH_RUNS times (3 when a run
# takes under 2 s); sets WALL (fastest, seconds), CPU (user + system seconds of that run)
# and RSS (largest peak, KiB); returns CMD's status.
measure() {
  local outfile=$1; shift
  local runs=${BENCH_RUNS:-1} i t0 t1 w r status=0
  WALL="" RSS=0 CPU=""
  for ((i = 0; i < runs; i++)); do
    t0=$(date +%s%N)
    timeout "$LIMIT" /usr/bin/time -f '%M %U %S' -o "$OUT/time.txt" "$@" >"$outfile" 2>>"$LOG"
    status=$?
    [ $status -eq 124 ] && { note "bench: over ${LIMIT}s, stopped: $*"; echo "over ${LIMIT}s" >"$OUT/why.txt"; return $status; }
    t1=$(date +%s%N)
    [ $status -ne 0 ] && { note "bench: failed ($status): $*"; echo "failed" >"$OUT/why.txt"; return $status; }
    w=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
    read -r r u s < <(tail -n 1 "$OUT/time.txt")
    if [ -z "$WALL" ] || awk -v w="$w" -v m="$WALL" 'BEGIN { exit !(w < m) }'; then
      WALL=$w CPU=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
    fi
    [ "$r" -gt "$RSS" ] && RSS=$r
    if [ "$runs" -lt 3 ] && awk -v w="$w" 'BEGIN { exit !(w < 2) }'; then runs=3; fi
  done
  return 0
}

# row TOOL INPUT_BYTES NOTE: one table row for the last measure.
row() {
  awk -v tool="$1" -v n="$2" -v w="$WALL" -v c="$CPU" -v r="$RSS" -v note="$3" 'BEGIN {
    mbs = n / 1e6 / w
    printf "| %s | %.2f | %.2f | %.1f | " (mbs < 10 ? "%.3f" : "%.1f") " | %.2f | %s |\n",
      tool, w, c, r / 1024, mbs, r * 1024 / n, note }'
}
failed_row() { printf '| %s | %s | | | | | see bench/out/bench.log |\n' "$1" "$(cat "$OUT/why.txt" 2>/dev/null)"; }
# Lines said after the current table (ratios, checks).
SUMMARY=()
summary() { SUMMARY+=("$*"); }
flush_summary() {
  local l
  [ ${#SUMMARY[@]} -gt 0 ] && { say ""; for l in "${SUMMARY[@]}"; do say "- $l"; done; }
  SUMMARY=()
}
header() {
  flush_summary
  say ""
  say "### $1"
  say ""
  say "| command | wall s | CPU s | peak RSS MiB | input MB/s | RSS bytes/input byte | notes |"
  say "|---|---:|---:|---:|---:|---:|---|"
}
# ratio A B: A / B to two decimals, n/a when either is missing.
ratio() {
  if [ -n "$1" ] && [ -n "$2" ]; then awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; else printf 'n/a'; fi
}
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" "$2"; }

# Runs one of our commands: bench_ours LABEL INPUT_BYTES OUTFILE NOTE CMD...; sets T
# (wall) and C (CPU seconds).
bench_ours() {
  local label=$1 n=$2 outfile=$3 note=$4; shift 4
  T="" C=""
  if measure "$outfile" "$@"; then row "$label" "$n" "$note"; T=$WALL C=$CPU; else failed_row "$label"; fi
}
# Runs a peer through peers.py: bench_peer LABEL INPUT_BYTES ARGS...; sets T (wall), C
# (CPU seconds) and P (its own figure of the work alone, without start-up and reading).
bench_peer() {
  local label=$1 n=$2; shift 2
  T="" P="" C=""
  if measure "$OUT/peer.txt" "$PY" "$PEERS" "$@"; then
    P=$(field seconds "$OUT/peer.txt")
    row "$label" "$n" "work alone $P s; $(sed 's/seconds=[^ ]* *//' "$OUT/peer.txt")"
    T=$WALL C=$CPU
  else failed_row "$label"; fi
}

# --- header --------------------------------------------------------------------------

COMMIT=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && git diff --quiet HEAD 2>/dev/null || echo "+dirty")
say "## Benchmark run $(date -u '+%Y-%m-%d %H:%M UTC')"
say ""
say "- commit: $COMMIT"
say "- machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB"
say "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
say "- corpus: $CNAME, $BYTES bytes, sha256 $(sha256sum "$CORPUS" | cut -c1-16)…"
[ -n "$PY" ] && say "- peers: $("$PY" -c 'import sys, tiktoken, tokenizers, sentencepiece; from importlib.metadata import version as v; print("python", sys.version.split()[0], "tiktoken", v("tiktoken"), "rustbpe", v("rustbpe"), "tokenizers", v("tokenizers"), "sentencepiece", v("sentencepiece"))' 2>/dev/null)"
say "- gzip: $(gzip --version | head -n 1)"

MODEL32=$OUT/none-32k.json

# --- sections ------------------------------------------------------------------------

if want seed; then
  TS=$CORPORA/taylorswift.txt
  TSB=$(wc -c <"$TS")
  header "Train, vocab 512, taylorswift.txt ($TSB bytes), --split none"
  A="" B=""
  if ours; then
    # One run takes milliseconds, below what the harness can time: time 100 runs in a row
    # (then one more that writes the model, checked below) and report the mean per run,
    # process start-up included; the harness's own start-up (timeout, time, the launcher:
    # ~3 ms) is spread over the 101 runs. The launcher is examples/spawn-bench.rs, a small
    # program that starts each run (posix_spawn), as GNU time, a small program, starts the
    # peer's one process; a bash loop is timed too (as in runs before 2026-12-01): a copy
    # of the shell (fork) per turn adds 0.15-0.25 ms to each run.
    A="" AC="" AB=""
    if [ -x "$BIN/examples/spawn-bench" ]; then
      bench_ours "bpe-train --vocab-size 512, 101 runs (examples/spawn-bench)" "$((101 * TSB))" "$OUT/ts512.json" \
        "wall and CPU for all 101 runs; RSS per byte of 101 inputs" \
        "$BIN/examples/spawn-bench" 101 "$BIN/bpe-train" -q --vocab-size 512 "$TS"
      A=$(awk -v t="$T" 'BEGIN { if (t != "") printf "%.4f", t / 101 }')
      AC=$(awk -v t="$C" 'BEGIN { if (t != "") printf "%.4f", t / 101 }')
    fi
    # shellcheck disable=SC2016 # expanded by the inner shell
    bench_ours "bpe-train --vocab-size 512, 101 runs (bash loop)" "$((101 * TSB))" "$OUT/ts512.json" \
      "wall and CPU for all 101 runs, each turn a bash fork" \
      bash -c 'for i in $(seq 100); do "$1" -q --vocab-size 512 "$2" >/dev/null; done
               "$1" -q --vocab-size 512 "$2"' _ "$BIN/bpe-train" "$TS"
    AB=$(awk -v t="$T" 'BEGIN { if (t != "") printf "%.4f", t / 101 }')
    if [ -z "$A" ]; then A=$AB AC=$(awk -v t="$C" 'BEGIN { if (t != "") printf "%.4f", t / 101 }'); fi
    [ -n "$A" ] && summary "bpe-train --vocab-size 512: $A s per run (process start-up included); $AB s per turn of a bash loop"
    # The training call alone, in process: the scope of the seed's own figure (mean of
    # 300 calls; the best is printed beside it).
    W="" WB=""
    if [ -x "$BIN/examples/train-bench" ]; then
      "$BIN/examples/train-bench" "$TS" 512 300 >"$OUT/train-bench.txt" 2>>"$LOG"
      W=$(field mean "$OUT/train-bench.txt") WB=$(field seconds "$OUT/train-bench.txt")
    fi
  fi
  if peers; then
    bench_peer "seed's Python BPE.train ($PYNAME)" "$TSB" seed "$TS" --vocab-size 512 --dump "$OUT/seed512.txt"
    B=$P BC=$C BW=$T
    # The seed needs only the standard library, so it also runs on the system's python3
    # when that is another build (on the project machine Debian's python3.11 runs it ~20%
    # faster than the default python3, pyenv's build of 3.11.7).
    SB="" SBW=""
    if [ -n "$SYSPY" ]; then
      PEERPY=$PY PY=$SYSPY
      bench_peer "seed's Python BPE.train ($SYSPYNAME)" "$TSB" seed "$TS" --vocab-size 512
      PY=$PEERPY SB=$P SBW=$T
    fi
  fi
  if [ -n "$A" ] && [ -n "$B" ]; then
    "$PY" "$PEERS" pairs "$OUT/ts512.json" >"$OUT/ours512.txt" 2>>"$LOG"
    if cmp -s "$OUT/ours512.txt" "$OUT/seed512.txt"; then summary "merges identical to the seed's: yes"
    else summary "merges identical to the seed's: **NO**"; fi
  fi
  # Speed-ups (target >= 1000x), like for like first, then the most conservative pairing.
  [ -n "$A" ] && [ -n "$B" ] && summary "speed-up, whole process against whole process (python3 running the seed's code on the file, start-up included, against one bpe-train run): **$(ratio "$BW" "$A")×** (target ≥ 1000×); by CPU time $(ratio "$BC" "$AC")×; against a turn of the bash loop $(ratio "$BW" "$AB")×"
  [ -n "${W:-}" ] && [ -n "$B" ] && summary "speed-up, training call against training call (the seed's own timer against examples/train-bench.rs in process, mean of 300 calls: $W s, best $WB s): **$(ratio "$B" "$W")×**"
  [ -n "$A" ] && [ -n "$B" ] && summary "the seed's training call against our whole process (the most conservative pairing): $(ratio "$B" "$A")×"
  [ -n "$A" ] && [ -n "$SB" ] && summary "on $SYSPYNAME: whole process against whole process $(ratio "$SBW" "$A")×; its training call against our whole process $(ratio "$SB" "$A")×"
fi

train_vs_gzip() {
  local file=$1 name; name=$(basename "$1")
  local n; n=$(wc -c <"$file")
  header "Train, vocab $VS, --split none, $name"
  local A="" G="" AC="" GC=""
  if ours; then
    bench_ours "bpe-train --vocab-size $VS" "$n" "$2" "" "$BIN/bpe-train" -q --vocab-size "$VS" -o "$2" "$file"
    A=$T AC=$C; local rss=$RSS
  fi
  bench_ours "gzip -6" "$n" /dev/null "reference for speed" gzip -6 -c "$file"
  G=$T GC=$C
  if [ -n "$A" ]; then
    summary "bpe-train / gzip -6 time: **$(ratio "$A" "$G")** (target ≤ 4), by CPU time $(ratio "$AC" "$GC"); peak memory $(awk -v r="$rss" -v n="$n" 'BEGIN { printf "%.1f", r * 1024 / n }') bytes per input byte (target ≤ 25)"
  fi
}
if want train; then train_vs_gzip "$CORPUS" "$MODEL32"; fi
if want train100; then
  if [ -f "$CORPORA/mixed-100M.txt" ]; then
    train_vs_gzip "$CORPORA/mixed-100M.txt" "$OUT/none-32k-100M.json"
  else note "bench: mixed-100M.txt missing, skipping train100"; fi
fi

if want split; then
  header "Train, vocab $VS, --split gpt4, $CNAME"
  A=""
  if ours; then
    bench_ours "bpe-train --split gpt4 --vocab-size $VS" "$BYTES" "$OUT/gpt4-32k.json" "both cores" \
      "$BIN/bpe-train" -q --split gpt4 --vocab-size "$VS" "$CORPUS"
    A=$T AC=$C
  fi
  if peers; then
    bench_peer "rustbpe train_from_iterator" "$BYTES" rustbpe "$CORPUS" --vocab-size "$VS"; R=$P RC=$C
    bench_peer "HF tokenizers BpeTrainer (byte-level, GPT-4 split)" "$BYTES" hf "$CORPUS" --vocab-size "$VS"; H=$P HC=$C
    bench_peer "sentencepiece --model_type bpe" "$BYTES" spm "$CORPUS" --vocab-size "$VS"; S=$P SC=$C
    if [ -n "$A" ]; then
      summary "speed-up: over rustbpe **$(ratio "$R" "$A")×** (target ≥ 2), over HF tokenizers **$(ratio "$H" "$A")×**, over sentencepiece **$(ratio "$S" "$A")×** (targets > 1); by CPU time $(ratio "$RC" "$AC")×, $(ratio "$HC" "$AC")×, $(ratio "$SC" "$AC")×"
    fi
  fi
fi

ensure_model32() {
  [ -s "$MODEL32" ] && "$BIN/bpe-encode" -q -m "$MODEL32" --count --whole /dev/null >/dev/null 2>&1 && return 0
  note "bench: training $MODEL32 for the encode figures"
  "$BIN/bpe-train" -q --vocab-size "$VS" -o "$MODEL32" "$CORPUS" 2>>"$LOG"
}

if want encode; then
  header "Encode, $CNAME"
  declare -A OURS_COUNT=()
  # One short line, as a shell loop over small files encodes: the model's set-up is the
  # whole cost. 101 runs started by examples/spawn-bench (see the seed section).
  if ours && [ -x "$BIN/examples/spawn-bench" ]; then
    printf 'hello world\n' >"$OUT/hello.txt"
    for m in o200k_base cl100k_base "$MODEL32"; do
      if [ "$m" = "$MODEL32" ]; then ensure_model32 || continue; fi
      bench_ours "bpe-encode -m $(basename "$m") on one short line, 101 runs" 1212 /dev/null \
        "wall and CPU for all 101 runs" \
        "$BIN/examples/spawn-bench" 101 "$BIN/bpe-encode" -m "$m" "$OUT/hello.txt"
      [ -n "$T" ] && summary "start-up: bpe-encode -m $(basename "$m") on one short line: $(awk -v t="$T" 'BEGIN { printf "%.1f", 1000 * t / 101 }') ms per run"
    done
  fi
  if ours && ensure_model32; then
    bench_ours "bpe-encode -m none-32k.json -j 1 (lines)" "$BYTES" "$OUT/ids-32k.jsonl" "single thread" \
      "$BIN/bpe-encode" -q -j 1 -m "$MODEL32" "$CORPUS"
    bench_ours "bpe-encode -m none-32k.json (lines)" "$BYTES" /dev/null "both cores" \
      "$BIN/bpe-encode" -q -m "$MODEL32" "$CORPUS"
    # The whole text as one record: one long sequence, in pieces mended where they meet.
    bench_ours "bpe-encode -m none-32k.json --whole -j 1" "$BYTES" /dev/null "single thread" \
      "$BIN/bpe-encode" -q -j 1 --whole -m "$MODEL32" "$CORPUS"
    bench_ours "bpe-encode -m none-32k.json --whole" "$BYTES" /dev/null "both cores" \
      "$BIN/bpe-encode" -q --whole -m "$MODEL32" "$CORPUS"
  fi
  for enc in o200k_base cl100k_base; do
    A=""
    if ours; then
      bench_ours "bpe-encode -m $enc --whole -j 1" "$BYTES" "$OUT/ids-$enc.jsonl" "single thread" \
        "$BIN/bpe-encode" -q -j 1 -m "$enc" --whole "$CORPUS"
      A1=$T A1C=$C
      bench_ours "bpe-encode -m $enc --whole" "$BYTES" /dev/null "both cores" \
        "$BIN/bpe-encode" -q -m "$enc" --whole "$CORPUS"
      A=$T
      bench_ours "bpe-encode -m $enc (lines)" "$BYTES" /dev/null "both cores" \
        "$BIN/bpe-encode" -q -m "$enc" "$CORPUS"
      bench_ours "bpe-encode -m $enc --whole --count" "$BYTES" "$OUT/count-$enc.txt" "both cores" \
        "$BIN/bpe-encode" -q -m "$enc" --whole --count "$CORPUS"
      OURS_COUNT[$enc]=$(tr -dc '0-9' <"$OUT/count-$enc.txt")
    fi
    if peers && [ -n "$VOCAB" ]; then
      bench_peer "tiktoken $enc encode_ordinary (whole text)" "$BYTES" tiktoken "$CORPUS" --encoding "$enc" --vocab-dir "$VOCAB"
      TT=$P TTC=$C; TC=$(field tokens "$OUT/peer.txt")
      if [ -n "$A" ] && [ -n "$TT" ]; then
        summary "$enc: speed-up over tiktoken **$(ratio "$TT" "$A")×** on both cores, **$(ratio "$TT" "$A1")×** on one (target ≥ 2), by CPU time on one $(ratio "$TTC" "$A1C")×; token count: ours ${OURS_COUNT[$enc]:-?}, tiktoken $TC ($([ "${OURS_COUNT[$enc]:-}" = "$TC" ] && echo equal || echo DIFFERENT))"
      fi
    elif peers; then note "bench: no o200k_base.tiktoken found (set BENCH_VOCAB): tiktoken skipped"; fi
  done
fi

# same_as_corpus FILE: FILE is the corpus, with a final newline added if it lacked one
# (line-mode decoding ends every record with one).
same_as_corpus() {
  if [ "$(tail -c 1 "$CORPUS" | od -An -tx1 | tr -d ' ')" = 0a ] || [ "$2" = whole ]; then
    cmp -s "$1" "$CORPUS"
  else
    cat "$CORPUS" <(echo) | cmp -s "$1" -
  fi
}

if want decode && ours; then
  header "Decode, $CNAME"
  # The timed runs write to /dev/null: on this VM writing 27 MB into a file costs about
  # as long as decoding them (`cat` of the corpus into a file: ~0.05 s), so a file
  # would time the file system. The last row of each kind writes the file and checks
  # the round trip.
  [ -s "$OUT/ids-32k.jsonl" ] || { ensure_model32 && "$BIN/bpe-encode" -q -m "$MODEL32" "$CORPUS" >"$OUT/ids-32k.jsonl" 2>>"$LOG"; }
  [ -s "$OUT/ids-o200k_base.jsonl" ] || "$BIN/bpe-encode" -q -m o200k_base --whole "$CORPUS" >"$OUT/ids-o200k_base.jsonl" 2>>"$LOG"
  if [ -s "$OUT/ids-32k.jsonl" ]; then
    bench_ours "bpe-decode (none-32k ids, lines) > /dev/null" "$BYTES" /dev/null "MB/s of text written" \
      "$BIN/bpe-decode" -q "$OUT/ids-32k.jsonl"
    bench_ours "bpe-decode (none-32k ids, lines) > file" "$BYTES" "$OUT/decoded.txt" "MB/s of text written" \
      "$BIN/bpe-decode" -q "$OUT/ids-32k.jsonl"
    if same_as_corpus "$OUT/decoded.txt" lines; then summary "line-mode round trip: exact"
    else summary "line-mode round trip: **DIFFERS**"; fi
  fi
  if [ -s "$OUT/ids-o200k_base.jsonl" ]; then
    bench_ours "bpe-decode --whole (o200k_base ids) > /dev/null" "$BYTES" /dev/null "MB/s of text written" \
      "$BIN/bpe-decode" -q --whole "$OUT/ids-o200k_base.jsonl"
    bench_ours "bpe-decode --whole (o200k_base ids) > file" "$BYTES" "$OUT/decoded.txt" "MB/s of text written" \
      "$BIN/bpe-decode" -q --whole "$OUT/ids-o200k_base.jsonl"
    if same_as_corpus "$OUT/decoded.txt" whole; then summary "--whole round trip: exact"
    else summary "--whole round trip: **DIFFERS**"; fi
  fi
  rm -f "$OUT/decoded.txt"
  bench_ours "cat corpus > file (the file system's share)" "$BYTES" "$OUT/decoded.txt" "" cat "$CORPUS"
  rm -f "$OUT/decoded.txt"
  # A larger input, where start-up and loading the model count for less.
  BIG=$CORPORA/mixed-100M.txt
  if [ -f "$BIG" ] && ensure_model32; then
    BIGB=$(wc -c <"$BIG")
    # (Encoded again when the model is newer: its header names the model by content.)
    [ "$OUT/ids-32k-100M.jsonl" -nt "$MODEL32" ] || "$BIN/bpe-encode" -q -m "$MODEL32" "$BIG" >"$OUT/ids-32k-100M.jsonl" 2>>"$LOG"
    [ -s "$OUT/ids-o200k_base-100M.jsonl" ] || "$BIN/bpe-encode" -q -m o200k_base --whole "$BIG" >"$OUT/ids-o200k_base-100M.jsonl" 2>>"$LOG"
    bench_ours "bpe-decode (none-32k ids of mixed-100M.txt, lines) > /dev/null" "$BIGB" /dev/null "MB/s of text written" \
      "$BIN/bpe-decode" -q "$OUT/ids-32k-100M.jsonl"
    bench_ours "bpe-decode --whole (o200k_base ids of mixed-100M.txt) > /dev/null" "$BIGB" /dev/null "MB/s of text written" \
      "$BIN/bpe-decode" -q --whole "$OUT/ids-o200k_base-100M.jsonl"
  fi
fi

if want word && ours; then
  header "Word model (--model-type word), $CNAME"
  bench_ours "bpe-train --model-type word" "$BYTES" "$OUT/words.json" "target < 2 s" \
    "$BIN/bpe-train" -q --model-type word -o "$OUT/words.json" "$CORPUS"
  if [ -s "$OUT/words.json" ]; then
    bench_ours "bpe-encode -m words.json (lines)" "$BYTES" "$OUT/ids-words.jsonl" "target ≥ 100 MB/s" \
      "$BIN/bpe-encode" -q -m "$OUT/words.json" "$CORPUS"
    bench_ours "bpe-encode -m words.json --count --whole" "$BYTES" /dev/null "" \
      "$BIN/bpe-encode" -q -m "$OUT/words.json" --count --whole "$CORPUS"
    bench_ours "bpe-decode (word ids)" "$BYTES" /dev/null "input MB/s of the text" \
      "$BIN/bpe-decode" -q "$OUT/ids-words.jsonl"
  fi
  # Every distinct word of the text makes a model nearly as large as the text (the
  # rows above pay for loading it); a 64k vocabulary is the size users train.
  bench_ours "bpe-train --model-type word --vocab-size 65536" "$BYTES" "$OUT/words64k.json" "" \
    "$BIN/bpe-train" -q --model-type word --vocab-size 65536 -o "$OUT/words64k.json" "$CORPUS"
  if [ -s "$OUT/words64k.json" ]; then
    bench_ours "bpe-encode -m words64k.json (lines)" "$BYTES" /dev/null "target ≥ 100 MB/s" \
      "$BIN/bpe-encode" -q -m "$OUT/words64k.json" "$CORPUS"
  fi
fi

flush_summary
say ""
say "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$OUT/time.txt" "$OUT/peer.txt"
