"""Runs one peer tool on one file, for scripts/bench.sh.

Each subcommand (but `pairs`) reads FILE, does its work once, and prints one line of `key=value`
figures on stdout: `seconds` is the work alone (after imports and reading the file),
plus what lets bench.sh check the result (merges learned, tokens produced). Wall time
and peak memory of the whole process are measured outside, by /usr/bin/time.

Threads: the Rust-backed trainers (rustbpe, HF tokenizers) use rayon; bench.sh sets
RAYON_NUM_THREADS=2. sentencepiece gets num_threads=2. tiktoken's encode_ordinary is
single-threaded by design (its best configuration for one text).
"""

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time

# minbpe's GPT4_SPLIT_PATTERN, the pattern `bpe-train --split gpt4` uses.
GPT4_SPLIT_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def blocks(text, lines_per_block=1000):
    """The text in blocks of whole lines, so rayon-based trainers get parallel work.

    Cutting only after a newline keeps almost every regex chunk the same as in the
    whole text (a run of blank lines across a cut is the only difference).
    """
    lines = text.splitlines(keepends=True)
    return ["".join(lines[i : i + lines_per_block]) for i in range(0, len(lines), lines_per_block)]


def seed_train(path, vocab_size, dump):
    """The seed's BPE.train (tokenizer-and-self-attention.txt), its code as printed.

    get_stats and merge as nested functions, the pair count rebuilt every round, the id
    list rebuilt on every merge, the vocabulary grown as it goes, and the article's
    `print(pair)` (sent to a buffer, not the terminal). Only the line indentation differs.
    """
    text = read_text(path)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        merges = _seed_bpe_train(text, vocab_size)
    dt = time.perf_counter() - t0
    print(f"seconds={dt:.3f} merges={len(merges)}")
    if dump:
        with open(dump, "w") as f:
            for (a, b), _ in sorted(merges.items(), key=lambda kv: kv[1]):
                f.write(f"{a} {b}\n")


def _seed_bpe_train(text, vocab_size, verbose=False):
    def get_stats(ids, counts=None):
        counts = {} if counts is None else counts
        for pair in zip(ids, ids[1:]):  # iterate consecutive elements
            counts[pair] = counts.get(pair, 0) + 1
        return counts

    def merge(ids, pair, idx):
        newids = []
        i = 0
        while i < len(ids):
            # if not at the very last position AND the pair matches, replace it
            if ids[i] == pair[0] and i < len(ids) - 1 and ids[i + 1] == pair[1]:
                newids.append(idx)
                i += 2
            else:
                newids.append(ids[i])
                i += 1
        return newids

    assert vocab_size >= 256
    num_merges = vocab_size - 256
    text_bytes = text.encode("utf-8")  # raw bytes
    ids = list(text_bytes)  # list of integers in range 0..255
    merges = {}  # (int, int) -> int
    vocab = {idx: bytes([idx]) for idx in range(256)}  # int -> bytes
    for i in range(num_merges):
        stats = get_stats(ids)
        pair = max(stats, key=stats.get)
        print(pair)
        idx = 256 + i
        ids = merge(ids, pair, idx)
        merges[pair] = idx
        vocab[idx] = vocab[pair[0]] + vocab[pair[1]]
        if verbose:
            print(f"merge {i+1}/{num_merges}: {pair} -> {idx} ({vocab[idx]}) had {stats[pair]} occurrences")
    return merges


def model_pairs(path):
    """The merges of one of our model files, as `seed --dump` writes them."""
    import json

    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if "pair" in rec:
                print(*rec["pair"])


def rustbpe_train(path, vocab_size):
    import rustbpe

    text = read_text(path)
    t0 = time.perf_counter()
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(blocks(text)), vocab_size, pattern=GPT4_SPLIT_PATTERN)
    dt = time.perf_counter() - t0
    print(f"seconds={dt:.3f} vocab={tok.vocab_size}")


def hf_train(path, vocab_size):
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    text = read_text(path)
    t0 = time.perf_counter()
    tok = Tokenizer(models.BPE())
    # minbpe-style byte-level BPE: the GPT-4 split, then bytes mapped to printable
    # characters (no second regex, no prefix space).
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(GPT4_SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    parts = blocks(text)
    tok.train_from_iterator(parts, trainer=trainer, length=len(parts))
    dt = time.perf_counter() - t0
    print(f"seconds={dt:.3f} vocab={tok.get_vocab_size()}")


def spm_train(path, vocab_size):
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        spm.SentencePieceTrainer.train(
            input=path,
            model_prefix=os.path.join(d, "m"),
            model_type="bpe",
            vocab_size=vocab_size,
            num_threads=2,
            byte_fallback=True,
            hard_vocab_limit=False,
            minloglevel=2,
        )
        dt = time.perf_counter() - t0
        sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "m.model"))
        print(f"seconds={dt:.3f} vocab={sp.get_piece_size()}")


def tiktoken_encoding(name, vocab_dir):
    """tiktoken's own definition of NAME, with its rank file read from VOCAB_DIR.

    tiktoken_ext.openai_public builds each encoding from a URL; here the loader is
    pointed at the local, sha256-identical file instead, so pattern and special tokens
    stay tiktoken's.
    """
    import tiktoken
    import tiktoken.load
    import tiktoken_ext.openai_public as public

    local = os.path.join(vocab_dir, f"{name}.tiktoken")
    public.load_tiktoken_bpe = lambda *_a, **_k: tiktoken.load.load_tiktoken_bpe(local)
    return tiktoken.Encoding(**getattr(public, name)())


def tiktoken_encode(path, name, vocab_dir):
    enc = tiktoken_encoding(name, vocab_dir)
    text = read_text(path)
    t0 = time.perf_counter()
    ids = enc.encode_ordinary(text)
    dt = time.perf_counter() - t0
    print(f"seconds={dt:.3f} tokens={len(ids)}")


def first_sightings(path, name, vocab_dir, out):
    """Writes to OUT each distinct chunk of FILE (tiktoken's split pattern for NAME) of
    three bytes or more, without line breaks, once, in the order first seen, one a line:
    a text whose every chunk is a first sighting (scripts/bench-first-sightings.sh)."""
    import regex

    pattern = regex.compile(tiktoken_encoding(name, vocab_dir)._pat_str)
    seen = set()
    with open(out, "w", encoding="utf-8") as f:
        for m in pattern.finditer(read_text(path)):
            chunk = m.group()
            if len(chunk.encode("utf-8")) > 2 and "\n" not in chunk and not chunk.isspace():
                if chunk not in seen:
                    seen.add(chunk)
                    f.write(chunk + "\n")
    print(f"chunks={len(seen)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "tool", choices=["seed", "rustbpe", "hf", "spm", "tiktoken", "pairs", "first-sightings"]
    )
    p.add_argument("file")
    p.add_argument("--vocab-size", type=int, default=32768)
    p.add_argument("--encoding", default="o200k_base")
    p.add_argument("--vocab-dir", default="")
    p.add_argument("--dump", default="", help="seed: write its merges here, one pair a line")
    p.add_argument("--out", default="", help="first-sightings: the file to write")
    a = p.parse_args()
    if a.tool == "seed":
        seed_train(a.file, a.vocab_size, a.dump)
    elif a.tool == "pairs":
        model_pairs(a.file)
    elif a.tool == "rustbpe":
        rustbpe_train(a.file, a.vocab_size)
    elif a.tool == "hf":
        hf_train(a.file, a.vocab_size)
    elif a.tool == "spm":
        spm_train(a.file, a.vocab_size)
    elif a.tool == "first-sightings":
        first_sightings(a.file, a.encoding, a.vocab_dir, a.out)
    else:
        tiktoken_encode(a.file, a.encoding, a.vocab_dir)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
