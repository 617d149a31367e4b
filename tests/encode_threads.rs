//! `bpe-encode` from the outside on inputs big enough for its threads: a mapped file, a
//! file read without mmap and standard input give the same ids and the same `--stats`
//! line on any thread count, in line mode and with `--whole`. That these ids are the
//! ones of one record at a time is checked inside the crate, on the same driver
//! (src/tests/parallel_props.rs, src/tests/word_props.rs).

use std::fs;

use crate::common::{scratch, tool, Rng};

/// About 1.3 MB of lines of random words (some invalid UTF-8), empty lines, `\r`, one
/// line longer than a thread's item (256 KB), and no `\n` at the end.
fn lines(rng: &mut Rng) -> Vec<u8> {
    let mut text = Vec::new();
    let mut long_done = false;
    while text.len() < 1_300_000 {
        let words = if !long_done && text.len() > 400_000 {
            long_done = true;
            70_000
        } else {
            rng.below(25usize)
        };
        for k in 0..words {
            if k > 0 {
                text.push(b' ');
            }
            let len = 1 + rng.below(8usize);
            text.extend(rng.bytes_from(b"abcdxyz\xc3\xa9\xff", len));
        }
        if rng.below(12u64) == 0 {
            text.push(b'\r');
        }
        text.push(b'\n');
    }
    text.extend_from_slice(b"no end");
    text
}

/// The ids in an output of `[..]` records, one per line.
fn id_count(out: &[u8]) -> usize {
    out.split(|&b| b == b'\n')
        .filter(|line| line.len() > 2)
        .map(|line| 1 + line.iter().filter(|&&b| b == b',').count())
        .sum()
}

/// Runs `bpe-encode` with `args` on `in.txt` read each way and on each thread count, and
/// checks that every run gives the output and the `--stats` line of the first.
fn alike_every_way(dir: &std::path::Path, text: &[u8], args: &[&str]) {
    let mut first: Option<(Vec<u8>, String)> = None;
    for threads in ["1", "2", "3"] {
        for mode in ["file", "no-mmap", "stdin"] {
            let mut cmd = tool("bpe-encode", dir);
            cmd.args(args)
                .args(["--no-header", "--stats", "-j", threads]);
            match mode {
                "file" => cmd.arg("in.txt"),
                "no-mmap" => cmd.args(["--no-mmap", "in.txt"]),
                _ => cmd.write_stdin(text.to_vec()),
            };
            let out = cmd.assert().success().get_output().clone();
            let stats = String::from_utf8(out.stderr).unwrap();
            let what = format!("{args:?}, -j {threads}, {mode}");
            match &first {
                None => {
                    let tokens = id_count(&out.stdout);
                    assert!(tokens > 1000, "{what}: {tokens} ids");
                    assert!(
                        stats.starts_with("bpe-encode: records ")
                            && stats.contains(&format!(" tokens {tokens} ")),
                        "{what}: {stats}"
                    );
                    first = Some((out.stdout, stats));
                }
                Some((ids, want)) => {
                    assert!(&out.stdout == ids, "{what}: ids differ from -j 1 on a file");
                    assert_eq!(&stats, want, "{what}");
                }
            }
        }
    }
}

#[test]
fn lines_encode_alike_every_way_on_any_thread_count() {
    let dir = scratch("encode-threads");
    let text = lines(&mut Rng::new(21));
    fs::write(dir.join("in.txt"), &text).unwrap();
    fs::write(dir.join("part.txt"), &text[..200_000]).unwrap();
    for (name, args) in [
        ("bpe.json", &["--vocab-size", "400"][..]),
        ("words.json", &["--model-type", "word"][..]),
    ] {
        tool("bpe-train", &dir)
            .args(args)
            .args(["-q", "-o", name, "part.txt"])
            .assert()
            .success();
        alike_every_way(&dir, &text, &["-m", name]);
        alike_every_way(&dir, &text, &["-m", name, "--whole"]);
    }
}
