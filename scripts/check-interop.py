#!/usr/bin/env python3
"""The live interop check (run by scripts/check-interop.sh, which installs the pinned
libraries): models trained by bpe-train on a generated corpus, exported by bpe-model,
must load in HF tokenizers, tiktoken and minbpe and give, line by line, exactly the ids
bpe-encode gives; the built-ins exported to tokenizer.json must give HF the ids tiktoken
gives; and every export read back by bpe-encode must give the same ids again.

Usage: check-interop.py BIN_DIR WORK_DIR [ASSETS_DIR]

minbpe is not on PyPI. With MINBPE_DIR set to a checkout of karpathy/minbpe the real one
is imported; otherwise `MiniBpe` below stands in for it: minbpe's documented `.model`
loader (version line, pattern, special tokens, merges; lines stripped and split as
minbpe's `load` does) and its encoder (findall with the pattern, then in each chunk merge
the adjacent pair with the lowest merge id, every occurrence left to right, until none
is left), written from the format's description.
"""
import base64
import json
import os
import random
import subprocess
import sys

import regex
import tiktoken
import tokenizers

BIN, WORK = sys.argv[1], sys.argv[2]
ASSETS = sys.argv[3] if len(sys.argv) > 3 else "assets"
SPECIALS = ["<|endoftext|>", "<|fim_middle|>"]
O200K = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
R50K = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
FAILURES = []


class MiniBpe:
    """minbpe's .model loading and encoding (see the module doc)."""

    def __init__(self, path, pattern_override=None):
        with open(path, encoding="utf-8") as f:
            assert f.readline().strip() == "minbpe v1"
            self.pattern = f.readline().strip()
            self.special = {}
            for _ in range(int(f.readline().strip())):
                text, idx = f.readline().strip().split()
                self.special[text] = int(idx)
            self.merges = {}
            for idx, line in enumerate(f, start=256):
                a, b = map(int, line.split())
                self.merges[(a, b)] = idx
        self.compiled = regex.compile(self.pattern) if self.pattern else None

    def _chunk(self, ids):
        while len(ids) >= 2:
            pairs = set(zip(ids, ids[1:]))
            best = min(pairs, key=lambda p: self.merges.get(p, float("inf")))
            if best not in self.merges:
                break
            idx, out, i = self.merges[best], [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                    out.append(idx)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            ids = out
        return ids

    def encode(self, text, allowed_special="none"):
        pieces = [text]
        if allowed_special == "all" and self.special:
            pieces = regex.split("(" + "|".join(regex.escape(s) for s in self.special) + ")", text)
        out = []
        for piece in pieces:
            if piece in self.special and allowed_special == "all":
                out.append(self.special[piece])
                continue
            chunks = self.compiled.findall(piece) if self.compiled else [piece]
            for chunk in chunks:
                out.extend(self._chunk(list(chunk.encode("utf-8"))))
        return out


def minbpe_loader():
    path = os.environ.get("MINBPE_DIR")
    if not path:
        return lambda model, pattern: MiniBpe(model)
    sys.path.insert(0, path)
    from minbpe import BasicTokenizer, RegexTokenizer

    def load(model, pattern):
        tok = RegexTokenizer(pattern=pattern) if pattern else BasicTokenizer()
        tok.load(model)
        return tok

    return load


def run(*args, stdin=None):
    return subprocess.run(args, check=True, input=stdin, stdout=subprocess.PIPE).stdout


def corpus(rng, lines):
    """Mixed text: English-like words, several scripts, code, numbers, odd spacing."""
    words = (
        "the of and to in is was that for it with as his on be at by had are but from or have "
        "they which one you were her all she there would their we him been has when who will "
        "don't I'm You'LL it's THEY'RE 42 7 1234567 3.14 2024-01-01 foo_bar fooBar x==y a+b "
        "日本語 東京 中国 北京 서울 한국어 Москва Россия القاهرة مصر Ελλάδα ประเทศไทย हिन्दी "
        "naïve café über straße ÀÉÎ ǅ ß 😀 👍🏽 👨‍👩‍👧 🇯🇵 ♥ → ∑ ∞ ≠ © ™ € def fn let return "
        "{ } ( ) [ ] ; :: -> => // /* */ <div> </div> &amp; \\n \\t"
    ).split()
    seps = [" ", " ", " ", "  ", "\t", ", ", ". ", "", "   ", " \u00a0", "\r"]
    out = []
    for _ in range(lines):
        parts = []
        for _ in range(rng.randint(0, 30)):
            parts.append(rng.choice(words))
            parts.append(rng.choice(seps))
            if rng.random() < 0.01:
                parts.append(rng.choice(SPECIALS))
        out.append("".join(parts))
    return out


def compare(label, want, got, lines):
    bad = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
    if len(want) != len(got):
        bad.append(min(len(want), len(got)))
    if bad:
        i = bad[0]
        line = lines[i] if i < len(lines) else None
        FAILURES.append(f"{label}: {len(bad)} of {len(lines)} lines differ; first line {i + 1}: {line!r}")
    print(f"{label}: {len(lines) - len(bad)}/{len(lines)} lines equal", file=sys.stderr)


def bpe_encode(model, text_path, *flags):
    out = run(os.path.join(BIN, "bpe-encode"), "--no-header", "-m", model, *flags, text_path)
    return [json.loads(l) for l in out.decode().splitlines()]


def main():
    os.makedirs(WORK, exist_ok=True)
    rng = random.Random(2212)
    train = os.path.join(WORK, "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.write("\n".join(corpus(rng, 12000)) + "\n")
    test_lines = corpus(rng, 2000)
    test = os.path.join(WORK, "test.txt")
    with open(test, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(test_lines) + "\n")
    load_minbpe = minbpe_loader()

    for split in ["none", "gpt4", "gpt2", "o200k"]:
        name = f"{split}"
        base = os.path.join(WORK, name)
        run(os.path.join(BIN, "bpe-train"), "-q", "--vocab-size", "1500", "--split", split,
            *[f"--special={s}" for s in SPECIALS], train, "-o", base + ".json")
        for to, ext in [("hf", ".tokenizer.json"), ("tiktoken", ".tiktoken"), ("minbpe", ".model")]:
            run(os.path.join(BIN, "bpe-model"), "convert", "-q", "--to", to, "-m", base + ".json", "-o", base + ext)
        header = json.loads(open(base + ".json").readline())
        pattern = header["pattern"]
        specials = {s["text"]: s["id"] for s in header["special_tokens"]}
        for allowed, flags in [("none", []), ("all", ["--allowed-special", "all"])]:
            want = bpe_encode(base + ".json", test, *flags)
            hf = tokenizers.Tokenizer.from_file(base + ".tokenizer.json")
            hf.encode_special_tokens = allowed == "none"
            compare(f"{name} hf {allowed}", want, [hf.encode(l, add_special_tokens=False).ids for l in test_lines], test_lines)
            with open(base + ".tiktoken", "rb") as f:
                ranks = {base64.b64decode(t): int(r) for t, r in (l.split() for l in f if l.strip())}
            enc = tiktoken.Encoding(name=name, pat_str=pattern or r"[\s\S]+", mergeable_ranks=ranks, special_tokens=specials)
            got = enc.encode_batch(test_lines, allowed_special="all" if allowed == "all" else set(), disallowed_special=())
            compare(f"{name} tiktoken {allowed}", want, got, test_lines)
            mb = load_minbpe(base + ".model", pattern)
            if pattern or allowed == "none":
                got = [mb.encode(l, allowed_special=allowed) if pattern else mb.encode(l) for l in test_lines]
                compare(f"{name} minbpe {allowed}", want, got, test_lines)
            for ext, more in [(".tokenizer.json", []), (".model", []),
                              (".tiktoken", ["--split", split] + [])]:
                if ext == ".tiktoken" and allowed == "all":
                    continue  # a rank file read by bpe-encode has no special tokens
                compare(f"{name} bpe-encode -m {ext} {allowed}", want, bpe_encode(base + ext, test, *flags, *more), test_lines)

    # The built-ins, exported: HF with the export gives tiktoken's ids (GPT-2 and GPT-4o
    # style), and so does bpe-encode reading the export back.
    for builtin, pattern, specials in [("r50k_base", R50K, {"<|endoftext|>": 50256}),
                                       ("o200k_base", O200K, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018})]:
        path = os.path.join(WORK, builtin + ".tokenizer.json")
        run(os.path.join(BIN, "bpe-model"), "convert", "-q", "--to", "hf", "-m", builtin, "-o", path)
        with open(os.path.join(ASSETS, builtin + ".tiktoken"), "rb") as f:
            ranks = {base64.b64decode(t): int(r) for t, r in (l.split() for l in f if l.strip())}
        enc = tiktoken.Encoding(name=builtin, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
        want = enc.encode_batch(test_lines, allowed_special=set(), disallowed_special=())
        hf = tokenizers.Tokenizer.from_file(path)
        hf.encode_special_tokens = True
        compare(f"{builtin} export: hf vs tiktoken", want, [hf.encode(l, add_special_tokens=False).ids for l in test_lines], test_lines)
        compare(f"{builtin} export: bpe-encode -m export vs tiktoken", want, bpe_encode(path, test), test_lines)
        compare(f"{builtin} built-in: bpe-encode vs tiktoken", want, bpe_encode(builtin, test), test_lines)

    if FAILURES:
        print("FAILED:\n  " + "\n  ".join(FAILURES), file=sys.stderr)
        sys.exit(1)
    print("check-interop: all exports give identical ids", file=sys.stderr)


if __name__ == "__main__":
    main()
