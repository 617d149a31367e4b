//! bpe-decode on big streams, from the outside: models switched by headers, long lines
//! cut between ids, several threads, and an error deep inside that stops the output at
//! the right line.

use std::fs;

use predicates::prelude::*;

use crate::common::{scratch, tool, Rng};

/// Streams with what the threads must not get wrong: a header in the middle that
/// changes the model (items after it decoded with the old table must be decoded
/// again), a line over a megabyte between short ones (cut into pieces), and such a
/// line with a space in it (the general reader reads it); the same bytes on one thread
/// or two, from a file or a pipe.
#[test]
fn streams_switch_models_and_cut_long_lines() {
    let dir = scratch("decodeswitch");
    let mut rng = Rng::new(31);
    let mut texts = Vec::new();
    for (k, alphabet) in [&b"abcd ef\n"[..], &b"uvwxyz\n"[..]].iter().enumerate() {
        let mut text: Vec<u8> = (0..1_200_000)
            .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
            .collect();
        // One line of 600 KB: over a megabyte of ids; in the middle (its last piece holds
        // the next lines too: the thread finds where it ends, the items cut after it are
        // cut again), then at the end (cut into pieces to the end).
        let at = [300_000, 600_000][k];
        for b in &mut text[at..at + 600_000] {
            if *b == b'\n' {
                *b = b' ';
            }
        }
        text.push(b'\n');
        let name = format!("t{k}.txt");
        fs::write(dir.join(&name), &text).unwrap();
        tool("bpe-train", &dir)
            .args(["--vocab-size", "300", "-o", &format!("m{k}.json"), &name])
            .assert()
            .success();
        texts.push(text);
    }
    let mut ids = Vec::new();
    for k in 0..2 {
        let out = tool("bpe-encode", &dir)
            .args(["-m", &format!("m{k}.json"), &format!("t{k}.txt")])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        ids.extend_from_slice(&out);
    }
    let want: Vec<u8> = texts.concat();
    fs::write(dir.join("ids.jsonl"), &ids).unwrap();
    // The long line of the second stream, spaced: valid JSON for the general reader.
    let mut spaced = ids.clone();
    let long = spaced
        .split(|&b| b == b'\n')
        .map(<[u8]>::len)
        .enumerate()
        .filter(|&(_, len)| len > 1 << 20)
        .map(|(k, _)| k)
        .collect::<Vec<_>>();
    assert_eq!(long.len(), 2, "two long lines");
    let start: usize = spaced
        .split(|&b| b == b'\n')
        .take(long[1])
        .map(|l| l.len() + 1)
        .sum();
    let comma = start + spaced[start..].iter().position(|&b| b == b',').unwrap();
    spaced.insert(comma + 1, b' ');
    fs::write(dir.join("spaced.jsonl"), &spaced).unwrap();
    for threads in ["1", "2", "3"] {
        for file in ["ids.jsonl", "spaced.jsonl"] {
            tool("bpe-decode", &dir)
                .args(["-j", threads, file])
                .assert()
                .success()
                .stdout(predicate::eq(want.clone()));
        }
        tool("bpe-decode", &dir)
            .args(["-j", threads])
            .write_stdin(ids.clone())
            .assert()
            .success()
            .stdout(predicate::eq(want.clone()));
    }
}

/// A stream big enough for the threads (several parts), with records only the
/// general reader accepts, then an error deep inside: the output is everything before
/// the error, the message names its line, through a file (mapped) or standard input,
/// on one thread or two.
#[test]
fn big_streams_decode_in_parallel_and_stop_at_the_right_line() {
    let dir = scratch("decodebig");
    let mut rng = Rng::new(11);
    let text: Vec<u8> = (0..1_500_000)
        .map(|k| {
            if k % 60 == 59 {
                b'\n'
            } else {
                b"abcd efg"[rng.below(8) as usize]
            }
        })
        .collect();
    fs::write(dir.join("text.txt"), &text).unwrap();
    tool("bpe-train", &dir)
        .args(["--vocab-size", "300", "-o", "m.json", "text.txt"])
        .assert()
        .success();
    let ids = tool("bpe-encode", &dir)
        .args(["-m", "m.json", "text.txt"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let mut lines: Vec<Vec<u8>> = ids.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    lines.pop();
    // Spaces in a few records: valid JSON, read by the general reader, same bytes.
    for k in [5usize, 9000, 17_000] {
        let line = &mut lines[k];
        let at = line.iter().position(|&b| b == b',').unwrap_or(1);
        line.insert(at + 1, b' ');
        line.insert(1, b' ');
    }
    let join = |lines: &[Vec<u8>]| -> Vec<u8> {
        let mut all = Vec::new();
        for l in lines {
            all.extend_from_slice(l);
            all.push(b'\n');
        }
        all
    };
    fs::write(dir.join("ids.jsonl"), join(&lines)).unwrap();
    for threads in ["1", "2"] {
        tool("bpe-decode", &dir)
            .args(["-j", threads, "ids.jsonl"])
            .assert()
            .success()
            .stdout(predicate::eq(text.clone()));
        tool("bpe-decode", &dir)
            .args(["-j", threads])
            .write_stdin(join(&lines))
            .assert()
            .success()
            .stdout(predicate::eq(text.clone()));
    }
    // An unknown id on line 18001 (the header is line 1).
    let bad = 18_000;
    lines[bad] = b"[97,70000]".to_vec();
    fs::write(dir.join("bad.jsonl"), join(&lines)).unwrap();
    let before: Vec<u8> = text
        .split(|&b| b == b'\n')
        .take(bad - 1)
        .fold(Vec::new(), |mut v, l| {
            v.extend_from_slice(l);
            v.push(b'\n');
            v
        });
    for threads in ["1", "2"] {
        tool("bpe-decode", &dir)
            .args(["-j", threads, "bad.jsonl"])
            .assert()
            .code(1)
            .stdout(predicate::eq(before.clone()))
            .stderr(format!(
                "bpe-decode: error: bad.jsonl:{}: id 70000 is not in the vocabulary (size 300)\n",
                bad + 1
            ));
        tool("bpe-decode", &dir)
            .args(["-j", threads])
            .write_stdin(join(&lines))
            .assert()
            .code(1)
            .stdout(predicate::eq(before.clone()))
            .stderr(predicate::str::starts_with(format!(
                "bpe-decode: error: <stdin>:{}: id 70000",
                bad + 1
            )));
    }
}

/// `--whole` streams are one long record: cut between ids for the threads, read by
/// the general reader when it has spaces, and an error in it names line 2.
#[test]
fn whole_streams_are_cut_between_ids() {
    let dir = scratch("decodewhole");
    let mut rng = Rng::new(12);
    let text: Vec<u8> = (0..400_000).map(|_| rng.below(256) as u8).collect();
    fs::write(dir.join("bin"), &text).unwrap();
    let ids = tool("bpe-encode", &dir)
        .args(["--whole", "bin"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    fs::write(dir.join("ids.jsonl"), &ids).unwrap();
    for threads in ["1", "2"] {
        tool("bpe-decode", &dir)
            .args(["--whole", "-j", threads, "ids.jsonl"])
            .assert()
            .success()
            .stdout(predicate::eq(text.clone()));
    }
    let spaced: Vec<u8> = ids
        .iter()
        .flat_map(|&b| if b == b',' { vec![b',', b' '] } else { vec![b] })
        .collect();
    tool("bpe-decode", &dir)
        .args(["--whole", "-j", "2"])
        .write_stdin(spaced)
        .assert()
        .success()
        .stdout(predicate::eq(text.clone()));
    // One space late in the record: the pieces before it are written by the fast path,
    // the general reader reads the record again and writes only the rest.
    for threads in ["1", "2"] {
        let mut late = ids.clone();
        let at = late.len() * 2 / 3;
        let comma = at + late[at..].iter().position(|&b| b == b',').unwrap();
        late.insert(comma + 1, b' ');
        tool("bpe-decode", &dir)
            .args(["--whole", "-j", threads])
            .write_stdin(late)
            .assert()
            .success()
            .stdout(predicate::eq(text.clone()));
    }
    let mut bad = ids.clone();
    let at = bad.len() * 2 / 3;
    let comma = at + bad[at..].iter().position(|&b| b == b',').unwrap();
    bad.insert(comma + 1, b'-');
    // The pieces before the bad one are written as they decode (memory stays bounded),
    // nothing from the bad id on: a prefix of what the header and the ids before the
    // bad one decode to as a record of their own.
    let mut good = ids[..comma].to_vec();
    good.extend_from_slice(b"]\n");
    let before_bad = tool("bpe-decode", &dir)
        .write_stdin(good)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    for threads in ["1", "2"] {
        let out = tool("bpe-decode", &dir)
            .args(["--whole", "-j", threads])
            .write_stdin(bad.clone())
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with(
                "bpe-decode: error: <stdin>:2: negative id",
            ))
            .get_output()
            .stdout
            .clone();
        assert!(!out.is_empty(), "-j {threads}: the pieces before were held");
        assert!(
            before_bad.starts_with(&out),
            "-j {threads}: {} bytes written, not a prefix of the {} before the bad id",
            out.len(),
            before_bad.len()
        );
    }
}
