#!/usr/bin/env python3
"""Builds the JSONL benchmark corpora of the token-file rows (BENCHMARKS.md, "Token
files") from the text corpora of scripts/build-corpora.sh, reproducibly: each paragraph
(the text between two "\\n\\n") of mixed-100M.txt is one document, written as
{"id":"mixed-100M/N","text":...} with json.dumps(ensure_ascii=False), one per line.

  scripts/build-jsonl.py [SOURCE] [OUT_DIR]

mixed-100M.jsonl is the corpus once (135876 documents, 122 of them empty); mixed-1G.jsonl
is it ten times over (ids mixed-100M/K/N), for the memory row. Prints their sha256."""

import hashlib
import json
import os
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "bench/corpora/mixed-100M.txt")
out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "bench/corpora")
os.makedirs(out_dir, exist_ok=True)
with open(source, encoding="utf-8", newline="") as f:
    paragraphs = f.read().split("\n\n")
lines = [json.dumps({"id": f"mixed-100M/{k}", "text": p}, ensure_ascii=False) + "\n"
         for k, p in enumerate(paragraphs)]
once = "".join(lines).encode("utf-8")
for name, copies in [("mixed-100M.jsonl", 1), ("mixed-1G.jsonl", 10)]:
    path = os.path.join(out_dir, name)
    digest = hashlib.sha256()
    with open(path + ".tmp", "wb") as f:
        for c in range(copies):
            chunk = once if copies == 1 else "".join(
                line.replace('"mixed-100M/', f'"mixed-100M/{c}/', 1) for line in lines
            ).encode("utf-8")
            f.write(chunk)
            digest.update(chunk)
    os.replace(path + ".tmp", path)
    print(f"{digest.hexdigest()}  {name}  {os.path.getsize(path)} bytes")
