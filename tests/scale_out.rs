//! `bpe-train` past one machine, from the outside: shards counted on their own
//! (`--emit-counts --shard`), merged in any order (`--from-counts --emit-counts`) and
//! trained from (`--from-counts`) give the single run's merges, and every error of a
//! counts file names its file and line. The library side (the same on the driver, record
//! counting against its naive twin) is src/tests/scale_out.rs.

use std::path::{Path, PathBuf};

use crate::common::corpus::{corpus, EOT};
use crate::common::{scratch, tool};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The command line: stdin and files, flags, exit statuses and messages.
#[test]
fn cli_counts_merge_and_train() {
    let dir = scratch("scale-cli");
    let text = corpus(200_000, 11);
    let cut = text[..text.len() / 2]
        .iter()
        .rposition(|&x| x == b'\n')
        .unwrap()
        + 1;
    let (a, b) = (&text[..cut], &text[cut..]);
    write(&dir, "a.txt", a);
    write(&dir, "b.txt", b);
    write(&dir, "all.txt", &text);
    let emit = |shard: &str, input: &str| {
        let out = tool("bpe-train", &dir)
            .args([
                "--emit-counts",
                "--split",
                "gpt4",
                "--special",
                EOT,
                "--shard",
                shard,
                input,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    // stdin (streamed) and a mapped file count the same.
    let from_file = emit("1", "a.txt");
    let from_stdin = tool("bpe-train", &dir)
        .args([
            "--emit-counts",
            "--split",
            "gpt4",
            "--special",
            EOT,
            "--shard",
            "1",
        ])
        .write_stdin(a.to_vec())
        .output()
        .unwrap();
    assert_eq!(from_stdin.stdout, from_file);
    assert!(from_file.starts_with(b"{\"kind\":\"counts\",\"version\":1,\"split\":\"gpt4\""));
    write(&dir, "a.counts", &from_file);
    write(&dir, "b.counts", &emit("2", "b.txt"));
    let single = tool("bpe-train", &dir)
        .args([
            "--records",
            "--split",
            "gpt4",
            "--special",
            EOT,
            "--vocab-size",
            "600",
            "all.txt",
        ])
        .output()
        .unwrap();
    assert!(single.status.success());
    let sharded = tool("bpe-train", &dir)
        .args([
            "--from-counts",
            "--vocab-size",
            "600",
            "b.counts",
            "a.counts",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&sharded.stdout),
        String::from_utf8_lossy(&single.stdout)
    );
    // The same flags may be repeated with --from-counts, not changed.
    tool("bpe-train", &dir)
        .args([
            "--from-counts",
            "--split",
            "gpt4",
            "--special",
            EOT,
            "a.counts",
        ])
        .assert()
        .success();
    tool("bpe-train", &dir)
        .args(["--from-counts", "--split", "o200k", "a.counts"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "differs from the counts' split gpt4",
        ));

    // Empty input: exit 0, the header alone; an empty id stream without header.
    let empty = tool("bpe-train", &dir)
        .args(["--emit-counts", "--split", "gpt4"])
        .write_stdin(Vec::new())
        .output()
        .unwrap();
    assert!(empty.status.success());
    assert_eq!(empty.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    tool("bpe-encode", &dir)
        .args(["--no-header"])
        .write_stdin(Vec::new())
        .assert()
        .success()
        .stdout("");
    write(&dir, "empty.counts", &empty.stdout);
    tool("bpe-train", &dir)
        .args(["--from-counts", "-q", "empty.counts"])
        .assert()
        .success()
        .stdout(predicates::str::contains("\"split\":\"gpt4\""));
    // Merging to standard output.
    tool("bpe-train", &dir)
        .args(["--from-counts", "--emit-counts", "a.counts", "b.counts"])
        .assert()
        .success();

    // Usage errors: exit 2.
    for (args, says) in [
        (
            vec!["--emit-counts", "all.txt"],
            "--emit-counts needs a split pattern",
        ),
        (
            vec!["--records", "all.txt"],
            "--records needs a split pattern",
        ),
        (
            vec!["--shard", "3", "--split", "gpt4", "all.txt"],
            "--shard KEY goes with --emit-counts",
        ),
        (
            vec![
                "--emit-counts",
                "--split",
                "gpt4",
                "--shard",
                "x",
                "all.txt",
            ],
            "joined by dots",
        ),
        (
            vec![
                "--emit-counts",
                "--split",
                "gpt4",
                "--vocab-size",
                "600",
                "all.txt",
            ],
            "--vocab-size does not apply",
        ),
        (
            vec!["--from-counts", "--shard", "1", "a.counts"],
            "--shard KEY goes with",
        ),
        (
            vec!["--model-type", "word", "--records", "all.txt"],
            "BPE models only",
        ),
    ] {
        tool("bpe-train", &dir)
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicates::str::starts_with("bpe-train: error: "))
            .stderr(predicates::str::contains(says));
    }
}

#[test]
fn bad_counts_files_fail_with_file_and_line() {
    let dir = scratch("scale-bad");
    let header = "{\"kind\":\"counts\",\"version\":1,\"split\":\"gpt4\",\"pattern\":\"'(?i:[sdmt]|ll|ve|re)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?+\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]++[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]|\\\\s+(?!\\\\S)|\\\\s+\"}\n";
    // The header above is the one bpe-train writes for gpt4.
    let good = tool("bpe-train", &dir)
        .args(["--emit-counts", "--split", "gpt4"])
        .write_stdin("ab\n")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&good.stdout).starts_with(header));
    let o200k = String::from_utf8_lossy(
        &tool("bpe-train", &dir)
            .args(["--emit-counts", "--split", "o200k"])
            .write_stdin("")
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{header}\"ab\"\t1\t0\t0\n\n"),
            "x.counts:3: empty line",
        ),
        (
            format!("{header}ab\t1\t0\t0\n"),
            "x.counts:2: a count line starts with its chunk",
        ),
        (
            format!("{header}\"ab\"\t1\t0\n"),
            "x.counts:2: a count line is",
        ),
        (
            format!("{header}\"ab\"\tx\t0\t0\n"),
            "the count must be a decimal integer",
        ),
        (
            format!("{header}\"ab\"\t1\t0.\t0\n"),
            "x.counts:2: the shard key must be",
        ),
        (format!("{header}\"ab\"\t1\t0\t0\r\n"), "the rank must be"),
        (format!("{header}\"a\\qb\"\t1\t0\t0\n"), "unknown escape"),
        (format!("{header}\"a\\ud800\"\t1\t0\t0\n"), "surrogate"),
        (
            format!("{header}\"ab\"\t18446744073709551615\t0\t0\n\"ab\"\t1\t1\t0\n"),
            "add up past",
        ),
        (
            format!("{header}\"ab\"\t1\t1\t0\n\"cd\"\t1\t1\t0\n"),
            "both first occur at shard 1 rank 0",
        ),
        (
            format!("{header}{o200k}"),
            "x.counts:2: split o200k conflicts with split gpt4 of the header at x.counts:1",
        ),
        ("\"ab\"\t1\t0\t0\n".to_string(), "no header line"),
        (
            "{\"kind\":\"bpe\",\"version\":1}\n".to_string(),
            "not a counts file",
        ),
        (
            "{\"kind\":\"counts\",\"version\":2}\n".to_string(),
            "unsupported counts format version 2",
        ),
        (
            header.replacen("{\"kind\"", "{\"extra\":1,\"kind\"", 1),
            "unknown field \"extra\"",
        ),
    ];
    for (content, says) in cases {
        write(&dir, "x.counts", content.as_bytes());
        tool("bpe-train", &dir)
            .args(["--from-counts", "x.counts"])
            .assert()
            .code(1)
            .stderr(predicates::str::starts_with("bpe-train: error: "))
            .stderr(predicates::str::contains(says));
    }
}
