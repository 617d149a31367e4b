"""The checks of scripts/check-tokens.sh: token files written by bpe-encode, read by numpy
and megatron-core, equal token for token to bpe-encode's NDJSON ids of the same JSONL.
Run in an empty scratch folder with BIN_DIR naming the tools' folder."""

import json
import os
import random
import struct
import subprocess
import sys

import numpy as np
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

BIN = os.environ["BIN_DIR"]
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)


def run(tool, *args):
    return subprocess.run([os.path.join(BIN, tool), *args], check=True,
                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL).stdout


def documents(seed, count):
    rng = random.Random(seed)
    pieces = ["the", " cat", " sat", "\n", "\n\n", "\0", " café", " 😀", "日本語", " 12345",
              "\t", "<|endoftext|>", "  ", "\r\n", "\U0010FFFF", " x", " naïve", "ü"]
    docs = []
    for k in range(count):
        if k % 11 == 3:
            docs.append("")
        else:
            docs.append("".join(rng.choice(pieces) for _ in range(rng.randrange(1, 300))))
    return docs


def write_jsonl(path, docs, seed):
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for k, doc in enumerate(docs):
            record = {"id": k, "text": doc, "meta": {"text": k}} if k % 2 else {"text": doc}
            f.write(json.dumps(record, ensure_ascii=rng.random() < 0.5) + "\n")


def ndjson_ids(model, path):
    out = run("bpe-encode", "-m", model, "--field", "text", "--no-header", path)
    return [json.loads(line) for line in out.decode().splitlines()]


docs = documents(2024, 2000)
write_jsonl("docs.jsonl", docs, 1)
# Parts, as split -n l/K/N cuts a corpus, for the merges.
cuts = [0, 1, 700, 700, 1333, 2000]
with open("docs.jsonl", "rb") as f:
    lines = f.readlines()
parts = []
for p in range(5):
    with open(f"part{p}.jsonl", "wb") as f:
        f.writelines(lines[cuts[p]:cuts[p + 1]])
    parts.append(f"part{p}.jsonl")

for model, eot, vocab, dtype, code in [("o200k_base", 199999, 200019, np.int32, 4),
                                       ("r50k_base", 50256, 50257, np.uint16, 8)]:
    ids = ndjson_ids(model, "docs.jsonl")
    check(f"{model}: NDJSON has a record per document, an empty one included",
          len(ids) == len(docs) and [] in ids)
    # Megatron, read by megatron-core.
    prefix = f"mega-{model}"
    run("bpe-encode", "-m", model, "--field", "text", "--format", "megatron",
        "--eot", "<|endoftext|>", "-o", prefix, "docs.jsonl")
    ds = IndexedDataset(prefix, multimodal=False, mmap=True)
    expected = [doc + [eot] for doc in ids if doc]
    check(f"{model}: IndexedDataset reads {len(ds)} sequences, dtype {ds.index.dtype.__name__}",
          len(ds) == len(expected) and ds.index.dtype == dtype,
          f"{len(ds)} sequences of {ds.index.dtype}")
    check(f"{model}: every sequence equals the NDJSON ids + eot",
          all(ds[i].tolist() == expected[i] for i in range(len(ds))))
    doc_index = [0]
    for doc in ids:
        doc_index.append(doc_index[-1] + (1 if doc else 0))
    check(f"{model}: document index as --append-eod writes it (empty documents: no sequence)",
          ds.document_indices.tolist() == doc_index)
    with open(prefix + ".idx", "rb") as f:
        check(f"{model}: .idx dtype code {code}", f.read(18)[17] == code)
    # megatron-core's own writer, fed the same ids as preprocess_data.py feeds it.
    builder = IndexedDatasetBuilder(f"ref-{model}.bin", dtype=dtype)
    for doc in ids:
        tokens = doc + [eot] if doc else []
        builder.add_document(tokens, [len(tokens)] if tokens else [])
    builder.finalize(f"ref-{model}.idx")
    for ending in ("bin", "idx"):
        with open(f"{prefix}.{ending}", "rb") as a, open(f"ref-{model}.{ending}", "rb") as b:
            check(f"{model}: IndexedDatasetBuilder writes the same .{ending}", a.read() == b.read())
    # Parts merged: by bpe-tokens merge and by megatron-core's add_index, equal to the single run.
    prefixes = []
    for p, part in enumerate(parts):
        run("bpe-encode", "-m", model, "--field", "text", "--format", "megatron",
            "--eot", "<|endoftext|>", "-o", f"{prefix}-part{p}", part)
        prefixes.append(f"{prefix}-part{p}")
    run("bpe-tokens", "merge", "-o", f"{prefix}-merged", *prefixes)
    builder = IndexedDatasetBuilder(f"{prefix}-added.bin", dtype=dtype)
    for part in prefixes:
        builder.add_index(part)
    builder.finalize(f"{prefix}-added.idx")
    for ending in ("bin", "idx"):
        with open(f"{prefix}.{ending}", "rb") as a, \
                open(f"{prefix}-merged.{ending}", "rb") as b, \
                open(f"{prefix}-added.{ending}", "rb") as c:
            single, merged, added = a.read(), b.read(), c.read()
        check(f"{model}: bpe-tokens merge of 5 parts == the single run == add_index (.{ending})",
              single == merged == added)

    flat_eot = [t for doc in ids for t in doc + [eot]]
    flat_bos = [t for doc in ids for t in [eot] + doc]
    run("bpe-encode", "-m", model, "--field", "text", "--format", "u32",
        "--eot", "<|endoftext|>", "-o", f"{model}.u32", "docs.jsonl")
    a = np.fromfile(f"{model}.u32", np.uint32)
    check(f"{model}: u32 read by np.fromfile == NDJSON ids + eot", a.tolist() == flat_eot)
    if vocab <= 65536:
        # nanoGPT: prepare.py's layout, train.py's reading.
        run("bpe-encode", "-m", model, "--field", "text", "--format", "u16",
            "--eot", "<|endoftext|>", "-o", "train.bin", "docs.jsonl")
        a = np.memmap("train.bin", dtype=np.uint16, mode="r")
        check(f"{model}: nanoGPT train.bin (np.memmap uint16) == NDJSON ids + eot",
              a.tolist() == flat_eot)
        check(f"{model}: nanoGPT checks: max < n_vocab, ends in eot, one eot per document",
              a.max() < vocab and a[-1] == eot and int((a == eot).sum()) == len(docs))
        # llm.c: data_common.py's header, dataloader.h's size check; shards.
        run("bpe-encode", "-m", model, "--field", "text", "--format", "llmc",
            "--bos", "<|endoftext|>", "-o", "all.bin", "docs.jsonl")
        h = np.fromfile("all.bin", "<i4", 256)
        t = np.fromfile("all.bin", "<u2", offset=1024)
        check(f"{model}: llm.c header (20240520, 1, count) and size 1024 + 2 x count",
              h[0] == 20240520 and h[1] == 1 and t.size == h[2]
              and os.path.getsize("all.bin") == 1024 + 2 * int(h[2]))
        check(f"{model}: llm.c tokens == eot + NDJSON ids per document", t.tolist() == flat_bos)
        n = 10000
        run("bpe-encode", "-m", model, "--field", "text", "--format", "llmc",
            "--bos", "<|endoftext|>", "--shard-tokens", str(n), "-o", "shard", "docs.jsonl")
        shards = sorted(f for f in os.listdir(".") if f.startswith("shard_"))
        tokens, ok = [], True
        for k, name in enumerate(shards):
            h = np.fromfile(name, "<i4", 256)
            s = np.fromfile(name, "<u2", offset=1024)
            ok &= bool(h[0] == 20240520 and h[1] == 1 and s.size == h[2])
            ok &= s.size == n or k == len(shards) - 1
            tokens.extend(s.tolist())
        check(f"{model}: {len(shards)} llm.c shards of {n} tokens, together the single file",
              ok and tokens == flat_bos and len(shards) == -(-len(flat_bos) // n))

failed = results.count(False)
print(f"{len(results) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
