//! bpe-decode's fast path (one pass over compact records, threads over parts of the
//! input and inside long records) against the general JSON reader it falls back to:
//! the same bytes for every record either reads, the same errors on the same lines.

use std::fs;

use predicates::prelude::*;
use toksuite::decode::{decode_ids, DecodeBuf, DecodeTable};
use toksuite::format::ids as ndjson;
use toksuite::model::{Model, ModelSource, SpecialToken};

use crate::common::{scratch, tool, Rng};
use crate::encode_props::{model_from_merges, random_merges};

/// The general reader: the JSON parse, then id by id.
fn slow_decode(model: &Model, line: &[u8]) -> Option<Vec<u8>> {
    let mut ids = Vec::new();
    ndjson::parse_ids_into(line, &mut ids).ok()?;
    let mut out = Vec::new();
    decode_ids(model, &ids, &mut out).ok()?;
    Some(out)
}

fn word_model() -> Model {
    let text = "{\"kind\":\"word\",\"version\":1}\n\
        {\"id\":0,\"word\":\"Life\",\"count\":1}\n\
        {\"id\":1,\"word\":\"dessert\",\"count\":1}\n\
        {\"id\":2,\"word\":\"eat\",\"count\":1}\n";
    let source = ModelSource::File {
        name: "w".into(),
        sha256: String::new(),
    };
    toksuite::format::model_file::parse(text.as_bytes(), source, "w").unwrap()
}

/// A record line: mostly the encoder's compact form, sometimes with the things only
/// the general reader accepts (spaces) or that nobody accepts.
fn random_line(rng: &mut Rng, vocab: u64) -> Vec<u8> {
    let n = rng.below(12) as usize;
    let ids: Vec<u64> = (0..n)
        .map(|_| match rng.below(20) {
            0 => vocab + rng.below(5),                    // outside the vocabulary
            1 => 123_456_789 + rng.below(10_000_000_000), // long numbers
            _ => rng.below(vocab),
        })
        .collect();
    let mut line = String::from("[");
    for (k, id) in ids.iter().enumerate() {
        if k > 0 {
            line.push(',');
        }
        line.push_str(&id.to_string());
    }
    line.push(']');
    let mut bytes = line.into_bytes();
    match rng.below(12) {
        0 if !bytes.is_empty() => {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes.insert(at, b' ');
        }
        1 if !bytes.is_empty() => {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes.insert(at, b"0,-x.e]["[rng.below(8) as usize]);
        }
        2 if !bytes.is_empty() => {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes.remove(at);
        }
        3 => bytes.push(b'\r'),
        _ => {}
    }
    bytes
}

#[test]
fn fast_records_equal_the_general_reader() {
    let mut rng = Rng::new(5);
    let mut fast_count = 0;
    for case in 0..40 {
        let merges = random_merges(&mut rng_small(case), b"abc \xff", 30);
        let specials = vec![SpecialToken {
            text: "<|end|>".into(),
            id: 300,
        }];
        let models = [
            Model::Bpe(model_from_merges(&merges, None, specials)),
            word_model(),
        ];
        for model in &models {
            let table = DecodeTable::new(model);
            let vocab = model.vocab_size() as u64;
            for _ in 0..300 {
                let line = random_line(&mut rng, vocab);
                let mut buf = DecodeBuf::default();
                buf.extend_from_slice(b"before");
                let fast = table.decode_record(&line, &mut buf);
                let slow = slow_decode(model, &line);
                let text = String::from_utf8_lossy(&line);
                if fast {
                    fast_count += 1;
                    let mut want = b"before".to_vec();
                    want.extend(slow.unwrap_or_else(|| panic!("fast read {text}, slow did not")));
                    assert_eq!(buf.as_slice(), want, "{text}");
                } else {
                    assert_eq!(buf.as_slice(), b"before", "{text}: refused but wrote");
                    // Refusals are for what the compact form does not cover.
                    if let Some(bytes) = &slow {
                        let mut ids = Vec::new();
                        ndjson::parse_ids_into(&line, &mut ids).unwrap();
                        let mut canonical = Vec::new();
                        ndjson::push_ids(&mut canonical, &ids);
                        assert!(
                            canonical != line || ids.iter().any(|&id| id >= 100_000_000),
                            "{text}: compact and valid ({} bytes) but refused",
                            bytes.len()
                        );
                    }
                }
            }
        }
    }
    assert!(
        fast_count > 5000,
        "the fast path took only {fast_count} records"
    );
}

fn rng_small(case: u64) -> crate::encode_props::Rng {
    crate::encode_props::Rng::new(case + 1)
}

/// Many lines in one pass ([`DecodeTable::decode_lines`]) against one line at a time:
/// taken exactly when every line is, with the same bytes (a newline after each record
/// or not), for BPE models (with a special token longer than a table slot) and word
/// models.
#[test]
fn fast_lines_equal_one_line_at_a_time() {
    let mut rng = Rng::new(21);
    let mut taken = 0;
    for case in 0..30 {
        let merges = random_merges(&mut rng_small(case + 100), b"ab c", 60);
        let specials = vec![SpecialToken {
            text: "<|a special token longer than sixteen bytes|>".into(),
            id: 400,
        }];
        let models = [
            Model::Bpe(model_from_merges(&merges, None, specials)),
            word_model(),
        ];
        for model in &models {
            let table = DecodeTable::new(model);
            let vocab = model.vocab_size() as u64 + 100;
            for _ in 0..200 {
                let count = 1 + rng.below(12) as usize;
                let mut text = Vec::new();
                let mut lines = Vec::new();
                for k in 0..count {
                    let line = match rng.below(40) {
                        0 => b"{\"model\":\"o200k_base\"}".to_vec(),
                        1 => Vec::new(),
                        2 => b"[400]".to_vec(),
                        _ if rng.below(3) == 0 => {
                            // Clean compact records, so that most blocks are taken whole.
                            let ids: Vec<u32> = (0..rng.below(9))
                                .map(|_| rng.below(vocab - 100) as u32)
                                .collect();
                            let mut line = Vec::new();
                            ndjson::push_ids(&mut line, &ids);
                            line
                        }
                        _ if rng.below(2) == 0 => random_line(&mut rng, vocab - 100),
                        _ => {
                            let mut line = random_line(&mut rng, vocab - 100);
                            line.retain(|&b| b != b' ' && b != b'\r');
                            line
                        }
                    };
                    text.extend_from_slice(&line);
                    // (A last line left without its `\n` must not be empty: the text
                    // would not have it.)
                    if k + 1 < count || line.is_empty() || rng.below(2) == 0 {
                        text.push(b'\n');
                    }
                    lines.push(line);
                }
                if text.is_empty() {
                    continue;
                }
                for newlines in [true, false] {
                    let mut want = DecodeBuf::default();
                    let each = lines.iter().all(|line| {
                        let ok = table.decode_record(line, &mut want);
                        if newlines {
                            want.push(b'\n');
                        }
                        ok
                    });
                    let mut buf = DecodeBuf::default();
                    buf.extend_from_slice(b"before");
                    let got = table.decode_lines(&text, newlines, &mut buf);
                    let shown = String::from_utf8_lossy(&text);
                    assert_eq!(got.is_some(), each, "{shown}");
                    if let Some(records) = got {
                        taken += 1;
                        assert_eq!(records, count as u64, "{shown}");
                        assert_eq!(&buf.as_slice()[..6], b"before");
                        assert_eq!(&buf.as_slice()[6..], want.as_slice(), "{shown}");
                    }
                }
            }
        }
    }
    assert!(taken > 1000, "only {taken} blocks were taken whole");
}

/// The pieces of a long record, cut after commas and decoded one after the other
/// ([`DecodeTable::decode_piece`]), give the record's bytes, and are refused exactly
/// when the record is.
#[test]
fn long_records_cut_between_ids_equal_one_pass() {
    let mut rng = Rng::new(9);
    let merges = random_merges(&mut rng_small(3), b"ab", 40);
    for model in [
        Model::Bpe(model_from_merges(&merges, None, vec![])),
        word_model(),
    ] {
        let table = DecodeTable::new(&model);
        let vocab = model.vocab_size() as u64;
        for case in 0..40 {
            let ids: Vec<u32> = (0..2_000).map(|_| rng.below(vocab) as u32).collect();
            let mut line = Vec::new();
            ndjson::push_ids(&mut line, &ids);
            let inner_at = 1 + rng.below(line.len() as u64 - 2) as usize;
            match case % 5 {
                1 => line.insert(inner_at, b' '),
                2 => {
                    let at = line.len() - 1;
                    line.insert(at, b',');
                }
                3 => line[inner_at] = b"x:\n-"[rng.below(4) as usize],
                4 => {
                    // An id outside the vocabulary.
                    let at = line.iter().position(|&b| b == b',').unwrap();
                    line.splice(1..at, b"9999".iter().copied());
                }
                _ => {}
            }
            let inner = &line[1..line.len() - 1];
            let mut cuts: Vec<usize> = (0..inner.len())
                .filter(|&k| inner[k] == b',' && rng.below(50) == 0)
                .map(|k| k + 1)
                .collect();
            cuts.push(inner.len());
            let mut one = DecodeBuf::default();
            let whole = table.decode_record(&line, &mut one);
            let mut cut = DecodeBuf::default();
            let mut start = 0;
            let mut pieces = true;
            for (k, &end) in cuts.iter().enumerate() {
                let last = k + 1 == cuts.len();
                pieces &= table.decode_piece(&inner[start..end], last, &mut cut);
                start = end;
            }
            assert_eq!(whole, pieces, "case {case}");
            assert_eq!(whole, case % 5 == 0, "case {case}");
            if whole {
                assert!(cuts.len() > 1, "case {case}: not cut");
                assert_eq!(one.as_slice(), cut.as_slice(), "case {case}");
                assert_eq!(Some(one.as_slice().to_vec()), slow_decode(&model, &line));
            }
        }
    }
}

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
    // nothing from the bad id on.
    let record_start = ids.iter().position(|&b| b == b'[').unwrap() + 1;
    let good_ids: Vec<u32> = std::str::from_utf8(&ids[record_start..comma])
        .unwrap()
        .split(',')
        .map(|id| id.parse().unwrap())
        .collect();
    let model = toksuite::format::load("o200k_base", None).unwrap();
    let mut before_bad = Vec::new();
    decode_ids(&model, &good_ids, &mut before_bad).unwrap();
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

/// A special token with an id far past the others stays out of the dense table (which
/// would need gigabytes) and still decodes, through the general reader.
#[test]
fn far_special_ids_decode_without_a_huge_table() {
    let specials = vec![SpecialToken {
        text: "<|far|>".into(),
        id: 4_000_000_000,
    }];
    let model = Model::Bpe(model_from_merges(&[(97, 98)], None, specials));
    let table = DecodeTable::new(&model);
    let line = b"[256,4000000000,99]";
    let mut buf = DecodeBuf::default();
    assert!(!table.decode_record(line, &mut buf));
    assert_eq!(slow_decode(&model, line).unwrap(), b"ab<|far|>c");
    assert!(table.decode_record(b"[256,99]", &mut buf));
    assert_eq!(buf.as_slice(), b"abc");
}
