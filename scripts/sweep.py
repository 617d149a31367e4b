#!/usr/bin/env python3
"""Robustness sweep: feeds the four tools malformed and random input and reports every run
that panics, hangs, dies on a signal, exits outside 0/1/2, or fails without
`TOOL: error: ...` on its first line, and every encode -> decode round trip that does not give the
input back. Seeded, so a report can be replayed. Not run by the tests (it takes minutes);
its findings become tests.

Usage: scripts/sweep.py [BIN_DIR] [SEED...]
  BIN_DIR  folder with the release binaries
           (default target/release)
  SEED     seeds to run (default 1 2)
Exits 1 if any run misbehaved, printing each one.
"""
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(
    ROOT, "target", "release")
SEEDS = [int(s) for s in sys.argv[2:]] or [1, 2]
problems = []


def run(tool, args, data=b"", expect=None, timeout=60):
    """Runs TOOL with ARGS on DATA; records a problem, returns the result or None."""
    try:
        p = subprocess.run([os.path.join(BIN, tool)] + args, input=data,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        problems.append((tool, args, data[:80], "hang"))
        return None
    err = p.stderr.decode("utf-8", "replace")
    why = None
    if p.returncode not in (0, 1, 2):
        why = f"exit status {p.returncode}"
    elif "panicked" in err:
        why = "panic"
    elif p.returncode != 0 and not err.startswith(f"{tool}: error: "):
        why = "failure without a first line `TOOL: error: ...`"
    elif expect is not None and p.returncode != expect:
        why = f"exit status {p.returncode}, expected {expect}"
    if why:
        problems.append((tool, args, data[:80], why, err[:300]))
    return p


def text(rng, words=3000):
    """Mixed text: ASCII words, accents, CJK, invalid UTF-8, special-token look-alikes."""
    vocab = [w.encode() for w in ["the", "a", "Life", "is", "short", "café", "naïve", "日本語",
                                  "über", "\t", "\n", "  ", "<|endoftext|>", "<|e|>", "2024,",
                                  "don't"]] + [b"\xff", b"\xc3"]
    return b"".join(rng.choice(vocab) + rng.choice([b" ", b"", b"\n"]) for _ in range(words))


def mutate(rng, model):
    """One or two damaged lines of a model file, sometimes shuffled or shortened."""
    edits = [
        lambda s: s[:rng.randrange(len(s) + 1)],
        lambda s: s.replace(b'"id":', b'"id":-'),
        lambda s: s.replace(b'"pair":[', b'"pair":[9999999999,'),
        lambda s: s.replace(b'"pair":[', b'"pair":[1e3,'),
        lambda s: s + b"x",
        lambda s: bytes(rng.randrange(256) for _ in s),
        lambda s: s.replace(b'"', b""),
        lambda s: s.replace(b'"bpe"', b'"word"'),
        lambda s: s.replace(b'"word"', b'"bpe"'),
        lambda s: s.replace(b'"version":1', b'"version":99'),
        lambda s: s.replace(b'"split":"none"', b'"split":"gpt5"'),
        lambda s: s.replace(b'"pattern":null', b'"pattern":"(?<"'),
        lambda s: s.replace(b"}", b',"extra":1}'),
        lambda s: s.replace(b"}", b',"special_tokens":[{"text":"","id":300}]}'),
        lambda s: s.replace(b"}", b',"special_tokens":[{"text":"x","id":5}]}'),
        lambda s: s.replace(b"0", b"18446744073709551616"),
        lambda s: b"\xef\xbb\xbf" + s,
        lambda s: s + b"\r",
        lambda s: b"",
        lambda s: b"[" + s + b"]",
        lambda s: s + b"\n" + s,
    ]
    lines = model.split(b"\n")
    if rng.random() < 0.05:
        # Every merge pairs the one before with itself: tokens double, past the format's
        # 4 GiB by merge 286 (a loader once panicked on it).
        for k in range(2, len(lines)):
            lines[k] = re.sub(rb'"pair":\[\d+,\d+\]',
                              b'"pair":[%d,%d]' % (254 + k, 254 + k), lines[k])
    for _ in range(rng.randrange(1, 3)):
        k = rng.randrange(len(lines))
        lines[k] = rng.choice(edits)(lines[k])
    if rng.random() < 0.2:
        rng.shuffle(lines)
    return b"\n".join(lines)


def expected_lines(data):
    """What `bpe-encode | bpe-decode` gives back in line mode: every line, newline-ended."""
    if not data:
        return b""
    return data if data.endswith(b"\n") else data + b"\n"


def sweep(seed, work):
    rng = random.Random(seed)
    os.chdir(work)
    corpus = text(rng)
    p = run("bpe-train", ["-q", "--vocab-size", "320", "--split", "gpt4",
                          "--special", "<|e|>"], corpus, expect=0)
    open("bpe.json", "wb").write(p.stdout)
    p = run("bpe-train", ["--model-type", "word"], corpus, expect=0)
    open("word.json", "wb").write(p.stdout)
    models = {name: open(name, "rb").read() for name in ("bpe.json", "word.json")}

    # Damaged models, read by every tool that takes one.
    for _ in range(150):
        for model in models.values():
            open("bad.json", "wb").write(mutate(rng, model))
            run("bpe-encode", ["-m", "bad.json"] + rng.choice(
                [[], ["--whole"], ["--count"], ["--allowed-special", "all"]]),
                rng.choice([b"hello\n", corpus[:300], b"", b"\xff\n"]))
            run("bpe-decode", ["-m", "bad.json"], b"[0,1,2,300]\n[5]\n")
            run("bpe-decode", [], b'{"model":"bad.json"}\n[0,1]\n')

    # Id streams: bad records and headers, for the decoder and attn.
    atoms = [b"[1,2]", b"[", b"]", b"[-1]", b"[1.5]", b"[1e3]", b"[18446744073709551616]",
             b'{"model":"o200k_base"}', b'{"model":"nonexistent"}', b'{"model":"bpe.json"}',
             b'{"model":"bpe.json","sha256":"00"}', b"{}", b"[]", b"[[1]]", b'"abc"', b"null",
             b"\x00\x01", b"\xff\xfe", b"[1,]", b"[01]", b"[+1]", b"[4294967296]", b"[199999]",
             b"[200000]", b"[1,2]\r", b"[" + b"1," * 5000 + b"1]", b"[[0.1,0.2,0.3]]",
             b"[[NaN,1,1]]", b"[[1e39,0,0]]"]
    for _ in range(300):
        records = b"\n".join(rng.choice(atoms) for _ in range(rng.randrange(1, 6)))
        run("bpe-decode", rng.choice([[], ["--whole"], ["-m", "bpe.json"], ["-m", "word.json"],
                                      ["-m", "cl100k_base"]]), records)
        run("attn", rng.choice([[], ["--causal"], ["--heads", "3"], ["--vocab-size", "10"],
                                ["--vectors"], ["--print", "weights"],
                                ["--precision", "shortest"]]), records)

    # attn's sizes and a damaged weights file.
    run("attn", ["--dump-weights", "w.json", "--vocab-size", "20", "--heads", "2"], expect=0)
    weights = open("w.json", "rb").read()
    for _ in range(100):
        open("bad.json", "wb").write(mutate(rng, weights))
        run("attn", ["--weights", "bad.json"], rng.choice([b"[0,1,2]\n", b"[19]\n", b"[20]\n"]))
        args = []
        for flag, values in [("--dim", ["1", "7", "0"]), ("--d-kq", ["1", "0"]),
                             ("--d-v", ["1", "5", "0"]), ("--heads", ["1", "4", "0"]),
                             ("--vocab-size", ["1", "10", "0"]), ("--seed", ["0", "-5"]),
                             ("--precision", ["0", "9", "10", "x"])]:
            if rng.random() < 0.3:
                args += [flag, rng.choice(values)]
        run("attn", args, rng.choice([b"[0,1,2]\n", b"[]\n", b"[9]\n", b"\n"]))

    # Random bytes through encode and back, with every model kind.
    for _ in range(100):
        data = bytes(rng.choice(b"ab \n\t\xc3\xa9\xff<|e>") for _ in range(rng.randrange(400)))
        model = rng.choice(["bpe.json", "o200k_base", "cl100k_base"])
        for whole in (False, True):
            mode = ["--whole"] if whole else []
            p = run("bpe-encode", ["-m", model] + mode, data, expect=0)
            if p is None or p.returncode != 0:
                continue
            q = run("bpe-decode", mode, p.stdout, expect=0)
            want = data if whole else expected_lines(data)
            if q is not None and q.returncode == 0 and q.stdout != want:
                problems.append(("round trip", [model] + mode, data[:80], "not the input"))

    # Odd flag values and odd files for the trainer.
    os.makedirs("adir", exist_ok=True)
    for args in [["--vocab-size", "0"], ["--vocab-size", "18446744073709551615"],
                 ["--vocab-size", "-1"], ["--split", "("], ["--split", ""], ["--split", "a*"],
                 ["--special", ""], ["--special", "a", "--special", "a"],
                 ["--model-type", "word", "--vocab-size", "1"], ["-j", "0"], ["-o", "adir"],
                 ["-o", "/nonexistent/x"], ["adir"], ["/nonexistent"], ["/dev/null"],
                 ["/proc/self/status"]]:
        for data in (b"", b"a", b"aaaaaaaaab", corpus[:2000]):
            p = run("bpe-train", ["-q"] + args, data, timeout=30)
            if p is not None and p.returncode == 0 and p.stdout:
                # What the trainer writes, the other tools must read.
                open("trained.json", "wb").write(p.stdout)
                run("bpe-encode", ["-m", "trained.json"], data, expect=0)


def main():
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as work:
            sweep(seed, work)
    for problem in problems:
        print(problem)
    print(f"seeds {SEEDS}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
