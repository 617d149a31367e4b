//! Training and encoding past one machine: shards of a corpus counted on their own
//! (`--emit-counts --shard`), merged in any order (`--from-counts --emit-counts`) and
//! trained from (`--from-counts`) give the single run's merges (`--records`); encoded
//! shards concatenate to the single run's output. Record counting is held to a naive
//! twin. The command-line side is tests/scale_out.rs.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::cmd::encode::{self, EncodeConfig};
use crate::cmd::train::{self, TrainConfig};
use crate::encode::AllowedSpecial;
use crate::format::counts::{CountsMerger, ShardKey};
use crate::input::Source;
use crate::pretokenize::{
    count_chunks, count_records, parse_split, ChunkCounts, RecordCounter, SpecialCutter, Splitter,
};

use super::corpus::{corpus, EOT};
use super::{scratch, write, Rng};

/// `text` cut into `n` pieces at line ends near equal byte offsets, as coreutils'
/// `split -n l/K/N` and GNU parallel's `--pipepart` cut (some pieces may be empty).
fn line_shards(text: &[u8], n: usize) -> Vec<&[u8]> {
    let mut cuts = vec![0];
    for k in 1..n {
        let near = (text.len() * k / n).max(*cuts.last().unwrap());
        let cut = if near == 0 || text[near - 1] == b'\n' {
            near
        } else {
            text[near..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(text.len(), |p| near + p + 1)
        };
        cuts.push(cut);
    }
    cuts.push(text.len());
    cuts.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

fn config(split: &str, specials: &[&str]) -> TrainConfig {
    TrainConfig {
        split: parse_split(split).unwrap(),
        specials: specials.iter().map(|s| s.to_string()).collect(),
        threads: 2,
        ..TrainConfig::new()
    }
}

fn files(paths: &[PathBuf]) -> Vec<Source> {
    paths.iter().map(|p| Source::file(p)).collect()
}

/// Runs the driver in process (the binary's one library call) and returns its output.
fn run_train(config: &TrainConfig, sources: &[Source]) -> Vec<u8> {
    let mut out = Vec::new();
    train::train(config, sources, &mut out, &mut |_| {}).expect("training run");
    out
}

/// The merges of a model file (its lines after the header), for readable failures.
fn merge_lines(model: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(model)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The heart of the issue: for each split (and with a special token), counts of N
/// shards, merged in a shuffled order, give the single run's merges; so does training
/// straight from the shards' files and from a tree of merges, and the merged file is
/// the same bytes whichever way it was merged.
#[test]
fn sharded_counts_train_the_single_runs_merges() {
    let text = corpus(2_500_000, 0x5ca1e);
    let dir = scratch("scale-merges");
    let whole = write(&dir, "corpus.txt", &text);
    let mut rng = Rng(24);
    let cases: [(&str, &[&str]); 5] = [
        ("gpt2", &[]),
        ("gpt4", &[]),
        ("o200k", &[]),
        ("gpt4", &[EOT]),
        ("o200k", &[EOT, "<|pad|>"]),
    ];
    for (split, specials) in cases {
        let single = {
            let mut c = config(split, specials);
            c.records = true;
            c.vocab_size = Some(1500);
            run_train(&c, &files(std::slice::from_ref(&whole)))
        };
        assert!(merge_lines(&single).len() > 1000, "{split}: few merges");
        let mut merged_once: Option<Vec<String>> = None;
        for n in [1, 2, 3, 7] {
            let mut counts = Vec::new();
            for (k, shard) in line_shards(&text, n).into_iter().enumerate() {
                let input = write(&dir, &format!("shard-{n}-{k}.txt"), shard);
                let mut c = config(split, specials);
                c.emit_counts = true;
                c.shard = ShardKey::parse(&(k + 1).to_string());
                let bytes = run_train(&c, &files(&[input]));
                counts.push(write(&dir, &format!("c-{n}-{k}.counts"), &bytes));
            }
            // Shuffled file order.
            for i in (1..counts.len()).rev() {
                counts.swap(i, rng.below(i + 1));
            }
            let mut merge = config("none", &[]);
            merge.from_counts = true;
            merge.emit_counts = true;
            let merged = run_train(&merge, &files(&counts));
            // Chunks and counts, in order, whatever the sharding (the first positions
            // differ: they name the shards).
            let chunks_and_counts: Vec<String> = merge_lines(&merged)
                .iter()
                .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join("\t"))
                .collect();
            match &merged_once {
                None => merged_once = Some(chunks_and_counts),
                Some(first) => assert!(
                    first == &chunks_and_counts,
                    "{split}: merged counts of {n} shards differ from the first sharding's"
                ),
            }
            // A tree: merge the first half and the rest separately, then both.
            let half = counts.len().div_ceil(2);
            let left = write(
                &dir,
                "left.counts",
                run_train(&merge, &files(&counts[..half])),
            );
            let mut right = vec![left];
            right.extend_from_slice(&counts[half..]);
            let tree = run_train(&merge, &files(&right));
            assert!(
                tree == merged,
                "{split}: a tree of merges differs ({n} shards)"
            );

            let mut learn = config("none", &[]);
            learn.from_counts = true;
            learn.vocab_size = Some(1500);
            let all = write(&dir, "all.counts", &merged);
            for (what, sources) in [("merged", vec![all]), ("shard files", counts.clone())] {
                let model = run_train(&learn, &files(&sources));
                assert_eq!(
                    merge_lines(&model),
                    merge_lines(&single),
                    "{split} {specials:?}: {n} shards, from {what}"
                );
            }
        }
    }
}

/// Whole-stream splitting is not shard-invariant (why `--records` exists), while
/// record counts of any line-end cut add up to the whole's.
#[test]
fn records_are_shard_invariant_and_the_whole_stream_is_not() {
    let text = corpus(300_000, 7);
    let split = parse_split("gpt4").unwrap().unwrap();
    let splitter = Splitter::new(&split).unwrap();
    let none = SpecialCutter::new(&[]);
    let whole = count_records(&text, &splitter, &none, 1);
    let mut stream = crate::pretokenize::ChunkCounts::new();
    let mut by_records = crate::pretokenize::ChunkCounts::new();
    for shard in line_shards(&text, 3) {
        stream.merge(&count_chunks(shard, &splitter, 1));
        by_records.merge(&count_records(shard, &splitter, &none, 1));
    }
    assert!(by_records == whole);
    // The whole-stream split glues the newlines of `):\n\n` across the cut after `:\n`.
    let text = b"f():\n\nx\n";
    let (a, b) = text.split_at(5);
    let mut stream = count_chunks(a, &splitter, 1);
    stream.merge(&count_chunks(b, &splitter, 1));
    assert!(count_chunks(text, &splitter, 1) != stream);
    let mut records = count_records(a, &splitter, &none, 1);
    records.merge(&count_records(b, &splitter, &none, 1));
    assert!(count_records(text, &splitter, &none, 1) == records);
}

/// The records of line mode: each line with its `\n` (supplied at the end when missing).
fn naive_lines(text: &[u8]) -> Vec<Vec<u8>> {
    let mut records: Vec<Vec<u8>> = Vec::new();
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' {
            records.push(text[start..=i].to_vec());
            start = i + 1;
        }
    }
    if start < text.len() {
        let mut last = text[start..].to_vec();
        last.push(b'\n');
        records.push(last);
    }
    records
}

/// The naive twin of record counting: each record, in order, cut at specials by testing
/// every position (leftmost, then longest), each piece split; the chunks counted in the
/// order of their first appearance.
fn naive_record_counts(
    records: &[Vec<u8>],
    splitter: &Splitter,
    specials: &[String],
) -> Vec<(Vec<u8>, u64)> {
    let mut counts: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut add = |chunk: &[u8]| match index.get(chunk) {
        Some(&k) => counts[k].1 += 1,
        None => {
            index.insert(chunk.to_vec(), counts.len());
            counts.push((chunk.to_vec(), 1));
        }
    };
    for record in records {
        let (mut piece, mut i) = (0, 0);
        let mut pieces = Vec::new();
        while i < record.len() {
            let hit = specials
                .iter()
                .filter(|s| record[i..].starts_with(s.as_bytes()))
                .map(|s| s.len())
                .max();
            match hit {
                Some(len) => {
                    pieces.push(&record[piece..i]);
                    i += len;
                    piece = i;
                }
                None => i += 1,
            }
        }
        pieces.push(&record[piece..]);
        for p in pieces.into_iter().filter(|p| !p.is_empty()) {
            for chunk in splitter.chunks(p) {
                add(chunk);
            }
        }
    }
    counts
}

fn as_vec(counts: &ChunkCounts) -> Vec<(Vec<u8>, u64)> {
    counts.iter().map(|(c, n)| (c.to_vec(), n)).collect()
}

fn random_text(rng: &mut Rng, len: usize) -> Vec<u8> {
    let parts: [&[u8]; 16] = [
        b"a",
        b"ab",
        b" ",
        b"\n",
        b"\n\n",
        b"\r\n",
        b"<s>",
        b"<s",
        b"s>",
        b"1",
        b"23",
        b"'s",
        b"\t",
        "é".as_bytes(),
        "日本".as_bytes(),
        b"\xff",
    ];
    let mut out = Vec::new();
    while out.len() < len {
        out.extend_from_slice(parts[rng.below(parts.len())]);
    }
    out
}

#[test]
fn record_counting_equals_the_naive_twin() {
    let mut rng = Rng(0x2024);
    let specials_sets: [Vec<String>; 3] = [
        vec![],
        vec!["<s>".to_string()],
        vec!["<s".to_string(), "<s>".to_string(), "s>".to_string()],
    ];
    for round in 0..300 {
        let len = rng.below(400);
        let text = random_text(&mut rng, len);
        let split = ["gpt2", "gpt4", "o200k", r"\w+|\s+|[^\w\s]+"][round % 4];
        let spec = parse_split(split).unwrap().unwrap();
        let splitter = Splitter::new(&spec).unwrap();
        let specials = &specials_sets[rng.below(3)];
        let cutter = SpecialCutter::new(specials);
        let naive = naive_record_counts(&naive_lines(&text), &splitter, specials);
        let fast = as_vec(&count_records(&text, &splitter, &cutter, 1 + rng.below(3)));
        assert_eq!(
            fast,
            naive,
            "round {round}: {:?}",
            String::from_utf8_lossy(&text)
        );
        // Streamed in random blocks with a tiny batch: the same.
        let mut counter = RecordCounter::new(&splitter, &cutter, 1 + rng.below(2));
        counter.set_batch(1 + rng.below(64));
        let mut rest = &text[..];
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len().min(50));
            counter.feed(&rest[..n]);
            rest = &rest[n..];
        }
        let streamed = as_vec(&counter.finish());
        assert_eq!(streamed, naive, "round {round}, streamed");
    }
}

/// Whole records (JSONL documents: empty ones, `\n` inside, specials across what would
/// be line ends) fed one by one in batches of any size, on one to three threads, count
/// as the naive twin counts them; and texts of several MiB, sharded over the threads at
/// record ends, lines and documents alike.
#[test]
fn document_counting_equals_the_naive_twin() {
    let mut rng = Rng(0x2025);
    let specials = vec!["<s".to_string(), "<s>".to_string()];
    let cutter = SpecialCutter::new(&specials);
    for round in 0..200 {
        let split = ["gpt2", "gpt4", "o200k", r"\w+|\s+|[^\w\s]+"][round % 4];
        let splitter = Splitter::new(&parse_split(split).unwrap().unwrap()).unwrap();
        let big = round % 50 == 0;
        let mut docs = Vec::new();
        let mut total = 0;
        while total < if big { 3 << 20 } else { 300 } {
            let len = rng.below(if big { 3000 } else { 40 });
            docs.push(random_text(&mut rng, len));
            total += docs.last().unwrap().len();
        }
        let naive = naive_record_counts(&docs, &splitter, &specials);
        let threads = 1 + rng.below(3);
        let mut counter = RecordCounter::new(&splitter, &cutter, threads);
        if !big {
            counter.set_batch(1 + rng.below(100));
        }
        for doc in &docs {
            counter.feed_record(doc);
        }
        assert_eq!(as_vec(&counter.finish()), naive, "round {round}, documents");
        if big {
            let text = docs.concat();
            let naive = naive_record_counts(&naive_lines(&text), &splitter, &specials);
            let fast = as_vec(&count_records(&text, &splitter, &cutter, threads));
            assert_eq!(fast, naive, "round {round}, {threads} threads, lines");
        }
    }
}

#[test]
fn special_cutting_equals_the_naive_scan() {
    let mut rng = Rng(77);
    let specials: Vec<String> = ["<s", "<s>", "s>", "ss", "a"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for _ in 0..2000 {
        let len = rng.below(60);
        let text = random_text(&mut rng, len);
        let k = 1 + rng.below(specials.len());
        let set = &specials[..k];
        let cutter = SpecialCutter::new(set);
        let fast = cutter.pieces(&text);
        // Naive: test every position.
        let (mut start, mut i, mut naive) = (0, 0, Vec::new());
        while i < text.len() {
            match set
                .iter()
                .filter(|s| text[i..].starts_with(s.as_bytes()))
                .map(|s| s.len())
                .max()
            {
                Some(len) => {
                    naive.push(&text[start..i]);
                    i += len;
                    start = i;
                }
                None => i += 1,
            }
        }
        naive.push(&text[start..]);
        naive.retain(|p| !p.is_empty());
        assert_eq!(fast, naive);
    }
}

/// Random shardings with dotted shard keys (file.offset), merged in random order and
/// random groups, order the chunks exactly as one count of the whole.
#[test]
fn merged_counts_restore_first_appearance_order() {
    let mut rng = Rng(99);
    let spec = parse_split("gpt4").unwrap().unwrap();
    let splitter = Splitter::new(&spec).unwrap();
    let none = SpecialCutter::new(&[]);
    let header = crate::format::counts::CountsHeader {
        split: spec.clone(),
        specials: vec![],
    };
    for round in 0..100 {
        let len = 50 + rng.below(2000);
        let text = random_text(&mut rng, len);
        let whole = count_records(&text, &splitter, &none, 1);
        let shards = line_shards(&text, 1 + rng.below(9));
        let mut files: Vec<Vec<u8>> = Vec::new();
        let mut offset = 0;
        for shard in &shards {
            let key = ShardKey::parse(&format!("{}.{offset}", round % 3)).unwrap();
            let mut out = Vec::new();
            crate::format::counts::write_counts(
                &mut out,
                &header,
                &count_records(shard, &splitter, &none, 1),
                &key,
            )
            .unwrap();
            files.push(out);
            offset += shard.len();
        }
        for i in (1..files.len()).rev() {
            files.swap(i, rng.below(i + 1));
        }
        let mut merger = CountsMerger::new();
        for (k, f) in files.iter().enumerate() {
            merger.read_bytes(f, &format!("f{k}")).unwrap();
        }
        let order = merger.ordered().unwrap();
        let merged: Vec<(Vec<u8>, u64)> = order
            .iter()
            .map(|&i| {
                let (c, n) = merger.chunk(i);
                (c.to_vec(), n)
            })
            .collect();
        let expect: Vec<(Vec<u8>, u64)> = whole.iter().map(|(c, n)| (c.to_vec(), n)).collect();
        assert_eq!(merged, expect, "round {round}");
    }
}

/// Encoding per shard and concatenating equals the single run: without headers byte
/// for byte, and with the header written once.
#[test]
fn encoded_shards_concatenate_to_the_single_run() {
    let text = corpus(1_000_000, 3);
    let dir = scratch("scale-encode");
    let whole = write(&dir, "corpus.txt", &text);
    let mut c = config("gpt4", &[EOT]);
    c.records = true;
    c.vocab_size = Some(1000);
    let model_path = write(
        &dir,
        "model.json",
        run_train(&c, &files(std::slice::from_ref(&whole))),
    );
    let model_name = model_path.to_str().unwrap();
    let out_path = dir.join("out.ndjson");
    let run = |sources: &[Source], header: bool, allowed: bool| {
        let config = EncodeConfig {
            header,
            allowed_special: if allowed {
                AllowedSpecial::All
            } else {
                AllowedSpecial::None
            },
            threads: 2,
            ..super::encode_config(crate::format::load(model_name, None).unwrap(), &out_path)
        };
        encode::encode(&config, sources).unwrap();
        std::fs::read(&out_path).unwrap()
    };
    for allowed in [false, true] {
        let single = run(&files(std::slice::from_ref(&whole)), true, allowed);
        let header_only = run(&files(&[write(&dir, "empty.txt", b"")]), true, allowed);
        assert!(single.starts_with(&header_only) && header_only.ends_with(b"}\n"));
        for n in [1, 2, 3, 7] {
            let mut joined = header_only.clone();
            for (k, shard) in line_shards(&text, n).into_iter().enumerate() {
                let input = write(&dir, &format!("e-{n}-{k}.txt"), shard);
                joined.extend(run(&files(&[input]), false, allowed));
            }
            assert!(joined == single, "{n} shards, allowed specials {allowed}");
        }
    }
}
