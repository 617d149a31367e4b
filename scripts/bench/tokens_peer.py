"""The peer of the token-file rows (scripts/bench-tokens.sh): a JSONL corpus to a uint32
token file the way a Python preparation script does it — json.loads per line, tiktoken's
encode_ordinary_batch over batches of documents on all cores, the end-of-text id after
each document, numpy packing, one file written.

  tokens_peer.py JSONL OUT.u32 [--encoding o200k_base] [--vocab-dir assets] [--threads N]

Prints, on stderr, the seconds spent in json.loads, in tiktoken and in numpy packing
and writing, and the token count."""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import tiktoken_encoding  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("jsonl")
p.add_argument("out")
p.add_argument("--encoding", default="o200k_base")
p.add_argument("--vocab-dir", default=os.path.join(os.path.dirname(__file__), "../../assets"))
p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
p.add_argument("--batch", type=int, default=1024)
a = p.parse_args()

enc = tiktoken_encoding(a.encoding, a.vocab_dir)
eot = enc.eot_token
t_json = t_enc = t_pack = 0.0
tokens = 0


def flush(texts, out):
    global t_enc, t_pack, tokens
    t0 = time.perf_counter()
    ids = enc.encode_ordinary_batch(texts, num_threads=a.threads)
    t1 = time.perf_counter()
    arr = np.concatenate([np.array(doc + [eot], dtype=np.uint32) for doc in ids])
    arr.tofile(out)
    tokens += arr.size
    t_pack += time.perf_counter() - t1
    t_enc += t1 - t0


with open(a.jsonl, encoding="utf-8") as f, open(a.out, "wb") as out:
    batch = []
    for line in f:
        t0 = time.perf_counter()
        batch.append(json.loads(line)["text"])
        t_json += time.perf_counter() - t0
        if len(batch) == a.batch:
            flush(batch, out)
            batch = []
    if batch:
        flush(batch, out)
print(f"json {t_json:.2f} s, tiktoken {t_enc:.2f} s, numpy {t_pack:.2f} s, tokens {tokens}",
      file=sys.stderr)
