"""Train and encode with the bpe-* tools on Apache Spark (PySpark), equal to one process.

    spark-submit examples/spark_bpe.py train  --bin DIR --split gpt4 --vocab-size N INPUT MODEL
    spark-submit examples/spark_bpe.py count  --bin DIR --split gpt4 INPUT COUNTS
    spark-submit examples/spark_bpe.py encode --bin DIR -m MODEL INPUT OUTDIR
    spark-submit examples/spark_bpe.py decode --bin DIR -m MODEL INPUT OUTDIR

INPUT is text read with sc.textFile (one record per line; any path Spark reads: file://,
hdfs://, s3a://). DIR holds the bpe-train, bpe-encode and bpe-decode binaries; they and
the model are shipped to the executors with addFile and run there via SparkFiles.get
inside mapPartitions (the portable way), or, with --pipe, through RDD.pipe(...,
checkCode=True) by absolute path (DIR and MODEL must then exist at that path on every
node). Either way a tool that fails on a record fails the task, and so the job.

- count: each partition is counted by `bpe-train --emit-counts --shard INDEX` (the
  partitions of one textFile come in file order, so the index is a valid shard key);
  reduceByKey sums the counts and keeps the smallest (shard, rank); the merged counts
  are written on the driver to COUNTS.
- train: count, then `bpe-train --from-counts` on the driver writes MODEL: the same merges
  as `bpe-train --records --split ... INPUT` in one process.
- encode / decode: one output line per input line, in input order, saved with
  saveAsTextFile (OUTDIR/part-00000, ...; `cat OUTDIR/part-*` is the single run's
  output, without the id-stream header: the shards write none).

Spark's textFile also ends lines at \\r\\n and \\r and turns bytes that are not UTF-8
into U+FFFD: for output equal to the local run byte for byte, the input should be UTF-8
with \\n line ends (see docs/scale-out.md).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading

from pyspark import SparkContext, SparkFiles


def run_tool(argv, lines):
    """Runs argv with `lines` on its stdin (one per line) and yields its stdout lines.

    Raises when the tool exits non-zero, with its stderr in the message.
    """
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)

        def feed():
            try:
                for line in lines:
                    proc.stdin.write(line.encode("utf-8") + b"\n")
            except BrokenPipeError:
                pass  # the tool stopped early: its exit status says why
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    pass

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        for out in proc.stdout:
            yield out.decode("utf-8").rstrip("\n")
        writer.join()
        if proc.wait() != 0:
            err.seek(0)
            raise RuntimeError(
                f"{os.path.basename(argv[0])} exited with status {proc.returncode}: "
                + err.read().decode("utf-8", "replace").strip()
            )


def shipped(name):
    """The executor-local path of a file shipped with addFile (call on the executor)."""
    return SparkFiles.get(name)


def count_args(args):
    flags = ["--emit-counts", "--split", args.split, "-j", "1"]
    for token in args.special or []:
        flags += ["--special", token]
    return flags


def counts_rdd(sc, args):
    """The merged counts as (key, (count, shard, rank)) pairs; headers keyed by their text."""
    lines = sc.textFile(args.input, args.partitions)
    if args.pipe:
        cmd = " ".join([os.path.join(os.path.abspath(args.bin), "bpe-train")] + count_args(args))
        # pipe runs one command for all partitions (shard key 0): tag each partition's
        # count lines with its index afterwards.
        counted = lines.pipe(cmd, checkCode=True).mapPartitionsWithIndex(
            lambda idx, it: (retag(line, idx) for line in it)
        )
    else:
        flags = count_args(args)
        counted = lines.mapPartitionsWithIndex(
            lambda idx, it: run_tool([shipped("bpe-train")] + flags + ["--shard", str(idx)], it)
        )
    return counted.map(parse_count).reduceByKey(merge_counts)


def retag(line, shard):
    if line.startswith("{"):
        return line
    key, count, _, rank = line.split("\t")
    return f"{key}\t{count}\t{shard}\t{rank}"


def parse_count(line):
    if line.startswith("{"):  # a header: kept once, as its own key
        return (line, (0, (), 0))
    key, count, shard, rank = line.split("\t")
    return (key, (int(count), tuple(int(p) for p in shard.split(".")), int(rank)))


def merge_counts(a, b):
    """Sum the counts, keep the smallest first position (shard key, then rank)."""
    return (a[0] + b[0],) + min(a[1:], b[1:])


def write_counts(merged, path):
    with open(path, "w", encoding="utf-8") as f:
        for key, (count, shard, rank) in merged.toLocalIterator():
            if key.startswith("{"):
                f.write(key + "\n")
            else:
                f.write(f"{key}\t{count}\t{'.'.join(map(str, shard))}\t{rank}\n")


def tool_lines(sc, args, tool, flags):
    """INPUT's lines through `tool` (bpe-encode or bpe-decode) with the model."""
    lines = sc.textFile(args.input, args.partitions)
    if args.pipe:
        cmd = [os.path.join(os.path.abspath(args.bin), tool), "-m", os.path.abspath(args.model)] + flags
        return lines.pipe(" ".join(cmd), checkCode=True)
    model = os.path.basename(args.model)
    return lines.mapPartitions(
        lambda it: run_tool([shipped(tool), "-m", shipped(model)] + flags, it)
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("step", choices=["count", "train", "encode", "decode"])
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--bin", required=True, help="folder with bpe-train, bpe-encode, bpe-decode")
    p.add_argument("--split", default="gpt4")
    p.add_argument("--special", action="append")
    p.add_argument("--vocab-size", type=int, default=512)
    p.add_argument("-m", "--model")
    p.add_argument("--partitions", type=int, default=None, help="minPartitions of textFile")
    p.add_argument("--pipe", action="store_true", help="RDD.pipe by absolute path")
    args = p.parse_args()
    if args.step in ("encode", "decode") and not args.model:
        p.error("encode and decode need -m MODEL")

    sc = SparkContext(appName=f"bpe-{args.step}")
    sc.setLogLevel("WARN")
    try:
        if args.step in ("count", "train"):
            if not args.pipe:
                sc.addFile(os.path.join(args.bin, "bpe-train"))
            merged = counts_rdd(sc, args)
            if args.step == "count":
                write_counts(merged, args.output)
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    counts = os.path.join(tmp, "merged.counts")
                    write_counts(merged, counts)
                    subprocess.run(
                        [os.path.join(args.bin, "bpe-train"), "-q", "--from-counts",
                         "--vocab-size", str(args.vocab_size), "-o", args.output, counts],
                        check=True,
                    )
        else:
            tool = "bpe-encode" if args.step == "encode" else "bpe-decode"
            flags = ["--no-header", "-j", "1"] if tool == "bpe-encode" else ["-j", "1"]
            if not args.pipe:
                sc.addFile(os.path.join(args.bin, tool))
                sc.addFile(args.model)
            tool_lines(sc, args, tool, flags).saveAsTextFile(args.output)
    finally:
        sc.stop()


if __name__ == "__main__":
    sys.exit(main())
