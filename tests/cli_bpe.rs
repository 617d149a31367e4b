//! bpe-train / bpe-encode / bpe-decode as a user runs them: the seed's examples, round
//! trips, id-stream headers, every error path with its exit status and message.

use std::fs;
use std::io::{Read, Write};
use std::process::{Command as StdCommand, Stdio};

use predicates::prelude::*;

use crate::common::{scratch, tool, Rng};

fn train(dir: &std::path::Path, text: &[u8], args: &[&str]) -> Vec<u8> {
    let out = tool("bpe-train", dir)
        .args(args)
        .write_stdin(text.to_vec())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    out
}

fn pairs_of(model: &[u8]) -> Vec<(u64, u64)> {
    String::from_utf8_lossy(model)
        .lines()
        .skip(1)
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let p = v["pair"].as_array().unwrap();
            (p[0].as_u64().unwrap(), p[1].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn seed_example_merges_and_verbose_log() {
    let dir = scratch("seed");
    let out = tool("bpe-train", &dir)
        .args(["--vocab-size", "259", "--verbose"])
        .write_stdin("happily happiness unhappy")
        .assert()
        .success()
        .stderr(
            "merge 1/3: (104, 97) -> 256 (b'ha') had 3 occurrences\n\
             merge 2/3: (256, 112) -> 257 (b'hap') had 3 occurrences\n\
             merge 3/3: (257, 112) -> 258 (b'happ') had 3 occurrences\n",
        )
        .get_output()
        .stdout
        .clone();
    assert_eq!(pairs_of(&out), vec![(104, 97), (256, 112), (257, 112)]);
}

#[test]
fn minbpe_wikipedia_example_trains_and_encodes() {
    let dir = scratch("minbpe");
    let model = train(&dir, b"aaabdaaabac", &["--vocab-size", "259"]);
    assert_eq!(pairs_of(&model), vec![(97, 97), (256, 97), (257, 98)]);
    fs::write(dir.join("m.json"), &model).unwrap();
    tool("bpe-encode", &dir)
        .args(["-m", "m.json", "--no-header"])
        .write_stdin("aaabdaaabac")
        .assert()
        .success()
        .stdout("[258,100,258,97,99]\n");
}

#[test]
fn model_file_format_is_as_documented() {
    let dir = scratch("format");
    let model = train(
        &dir,
        "né né\u{7f}".as_bytes(),
        &["--vocab-size", "258", "--special", "<|end|>"],
    );
    let text = String::from_utf8(model).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"kind":"bpe","version":1,"split":"none","pattern":null,"special_tokens":[{"text":"<|end|>","id":258}]}"#
    );
    // 'n' + first byte of 'é' (0xc3) is not UTF-8 on its own: shown as hex.
    assert_eq!(
        lines[1],
        r#"{"id":256,"pair":[110,195],"hex":"6ec3","count":2}"#
    );
    assert_eq!(
        lines[2],
        r#"{"id":257,"pair":[256,169],"text":"né","count":2}"#
    );
}

#[test]
fn round_trips_lines_and_whole_inputs_byte_for_byte() {
    let dir = scratch("roundtrip");
    let mut rng = Rng::new(7);
    let corpus: Vec<u8> = (0..4000).map(|_| rng.below(256) as u8).collect();
    let model = train(&dir, &corpus, &["--vocab-size", "400"]);
    fs::write(dir.join("m.json"), &model).unwrap();
    for case in 0..20 {
        let len = rng.below(3000) as usize;
        let alphabet: &[u8] = if case % 2 == 0 {
            b"ab\n\r\xff\xc3"
        } else {
            &[]
        };
        let data: Vec<u8> = if alphabet.is_empty() {
            (0..len).map(|_| rng.below(256) as u8).collect()
        } else {
            rng.bytes_from(alphabet, len)
        };
        // --whole: exact bytes back, whatever they are.
        let ids = tool("bpe-encode", &dir)
            .args(["-m", "m.json", "--whole"])
            .write_stdin(data.clone())
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        tool("bpe-decode", &dir)
            .arg("--whole")
            .write_stdin(ids)
            .assert()
            .success()
            .stdout(predicate::eq(data.clone()));
        // Line mode: every line back, a missing final newline added.
        let ids = tool("bpe-encode", &dir)
            .args(["-m", "m.json"])
            .write_stdin(data.clone())
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let mut expected = data.clone();
        if !expected.is_empty() && expected.last() != Some(&b'\n') {
            expected.push(b'\n');
        }
        tool("bpe-decode", &dir)
            .args(["-m", "m.json"])
            .write_stdin(ids)
            .assert()
            .success()
            .stdout(predicate::eq(expected));
    }
}

#[test]
fn stream_header_names_the_model_and_decode_follows_it() {
    let dir = scratch("header");
    let model = train(&dir, b"some text, some more text", &["--vocab-size", "270"]);
    fs::write(dir.join("merges.json"), &model).unwrap();
    let hash = crate::common::sha256_hex(&model);
    let ids = tool("bpe-encode", &dir)
        .args(["-m", "merges.json"])
        .write_stdin("some text\n")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let first = String::from_utf8_lossy(&ids)
        .lines()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        first,
        format!(r#"{{"model":"merges.json","sha256":"{hash}"}}"#)
    );
    // The user's own example: decode without -m.
    tool("bpe-decode", &dir)
        .write_stdin(ids.clone())
        .assert()
        .success()
        .stdout("some text\n");
    // Another model given with -m is an error, never garbage.
    let other = train(&dir, b"completely different", &["--vocab-size", "260"]);
    fs::write(dir.join("other.json"), &other).unwrap();
    tool("bpe-decode", &dir)
        .args(["-m", "other.json"])
        .write_stdin(ids.clone())
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "bpe-decode: error: <stdin>:1: the stream was encoded with model \"merges.json\"",
        ));
    // The named file changed since: an error too.
    fs::write(dir.join("merges.json"), &other).unwrap();
    tool("bpe-decode", &dir)
        .write_stdin(ids)
        .assert()
        .code(1)
        .stderr(predicate::str::contains("other content"));
}

/// The parse reads canonical merge lines on a fast path and anything else through the
/// JSON parser: CRLF line ends, a last line without its newline, and merges written
/// with spaces and fields in another order are the same model.
#[test]
fn model_files_in_other_valid_forms_are_the_same_model() {
    let dir = scratch("forms");
    let text = b"the cat sat on the mat with the hat, \"quoted\" \\ and caf\xc3\xa9s\n";
    let model = String::from_utf8(train(&dir, text, &["--vocab-size", "300"])).unwrap();
    let reordered: String = model
        .lines()
        .enumerate()
        .map(|(k, line)| {
            if k == 0 {
                return format!("{line}\n");
            }
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            format!("{{ \"pair\" : {} , \"id\" : {} }}\n", v["pair"], v["id"])
        })
        .collect();
    let encode = |model_text: &str| {
        fs::write(dir.join("m.json"), model_text).unwrap();
        tool("bpe-encode", &dir)
            .args(["-m", "m.json", "--no-header"])
            .write_stdin(&text[..])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    let ids = encode(&model);
    assert!(ids.len() < 2 * text.len(), "the model merges something");
    assert_eq!(encode(&model.replace('\n', "\r\n")), ids);
    assert_eq!(encode(model.trim_end()), ids);
    assert_eq!(encode(&reordered), ids);
}

#[test]
fn any_prefix_of_a_model_file_is_a_valid_model() {
    let dir = scratch("prefix");
    let model = train(
        &dir,
        b"the cat sat on the mat with the hat",
        &["--vocab-size", "270"],
    );
    let text = String::from_utf8(model).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for k in 1..=lines.len() {
        let prefix = lines[..k].join("\n") + "\n";
        fs::write(dir.join("p.json"), prefix).unwrap();
        let ids = tool("bpe-encode", &dir)
            .args(["-m", "p.json", "--no-header"])
            .write_stdin("the cat\n")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        tool("bpe-decode", &dir)
            .args(["-m", "p.json"])
            .write_stdin(ids)
            .assert()
            .success()
            .stdout("the cat\n");
    }
}

#[test]
fn malformed_models_name_file_and_line() {
    let dir = scratch("badmodel");
    let header = r#"{"kind":"bpe","version":1,"split":"none","pattern":null}"#;
    // Each merge doubles the longest token: 30 of them hold 4 GiB, past the format's
    // limit (u32 offsets); a loader must refuse the file, not panic or wrap around.
    let doubling: String = std::iter::once(format!("{header}\n{{\"id\":256,\"pair\":[97,97]}}"))
        .chain((257..300).map(|id| format!("{{\"id\":{id},\"pair\":[{},{}]}}", id - 1, id - 1)))
        .collect::<Vec<_>>()
        .join("\n");
    let cases: &[(&str, &str)] = &[
        ("", "m.json: empty model file"),
        (
            &doubling,
            "m.json:32: merge 286 takes the tokens past 4 GiB in all (the model format's limit)",
        ),
        // The problem on the earliest line is named, whichever check finds it.
        (
            &format!("{doubling}\nnot json"),
            "m.json:32: merge 286 takes the tokens past 4 GiB",
        ),
        (
            &format!(
                "{header}\n{{\"id\":256,\"pair\":[1,2]}}\n{{\"id\":257,\"pair\":[1,2]}}\n\
                 {{\"id\":258,\"pair\":[1,2000]}}"
            ),
            "m.json:3: pair [1,2] is merged twice",
        ),
        ("not json\n", "m.json:1: malformed model header"),
        (
            r#"{"kind":"bpe","version":2}"#,
            "m.json:1: unsupported model format version 2",
        ),
        (
            r#"{"kind":"bpe","version":1,"colour":"red"}"#,
            "m.json:1: unknown header field \"colour\"",
        ),
        (
            r#"{"kind":"tree","version":1}"#,
            "m.json:1: unknown model kind",
        ),
        (
            &format!("{header}\n{{\"id\":257,\"pair\":[1,2]}}"),
            "m.json:2: merge id 257 out of order",
        ),
        (
            &format!("{header}\n{{\"id\":256,\"pair\":[1,256]}}"),
            "m.json:2: pair member 256 is not defined before merge 256",
        ),
        (
            &format!("{header}\n{{\"id\":256,\"pair\":[1,2]}}\n{{\"id\":257,\"pair\":[1,2]}}"),
            "m.json:3: pair [1,2] is merged twice",
        ),
        (
            &format!("{header}\n{{\"id\":256,\"pair\":[1,2],\"extra\":1}}"),
            "m.json:2: unknown merge field \"extra\"",
        ),
        (
            &format!("{header}\n[1,2]"),
            "m.json:2: expected a merge object",
        ),
        (
            &format!("{header}\n{{\"id\":256,\"pair\":[1,2],\"text\":\"a\",\"count\":1}}x"),
            "m.json:2: malformed merge line",
        ),
        (
            &format!(
                "{header}\n{{\"id\":256,\"pair\":[1,2],\"text\":\"a\",\"count\":1}}\n\n\
                 {{\"id\":257,\"pair\":[1,3],\"text\":\"b\",\"count\":1}}"
            ),
            "m.json:3: malformed merge line",
        ),
        (
            r#"{"kind":"bpe","version":1,"split":"custom","pattern":"(unclosed"}"#,
            "m.json:1: invalid split pattern",
        ),
    ];
    for (content, message) in cases {
        fs::write(dir.join("m.json"), content).unwrap();
        tool("bpe-encode", &dir)
            .args(["-m", "m.json"])
            .write_stdin("x")
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::starts_with(format!(
                "bpe-encode: error: {message}"
            )));
    }
}

#[test]
fn decode_errors_come_after_the_good_records() {
    let dir = scratch("decodeerr");
    fs::write(dir.join("ids.jsonl"), "[104,105]\n[1,2]\n[70000]\n[104]\n").unwrap();
    let model = train(&dir, b"hi", &["--vocab-size", "256"]);
    fs::write(dir.join("m.json"), model).unwrap();
    tool("bpe-decode", &dir)
        .args(["-m", "m.json", "ids.jsonl"])
        .assert()
        .code(1)
        .stdout("hi\n\u{1}\u{2}\n")
        .stderr("bpe-decode: error: ids.jsonl:3: id 70000 is not in the vocabulary (size 256)\n");
    for (record, message) in [
        ("[1,-2]", "negative id"),
        ("[1.5]", "not an integer"),
        ("hello", "expected a JSON array of ids"),
        ("", "empty line"),
        ("[99999999999]", "out of range"),
    ] {
        tool("bpe-decode", &dir)
            .args(["-m", "m.json"])
            .write_stdin(format!("[104]\n{record}\n"))
            .assert()
            .code(1)
            .stdout("h\n")
            .stderr(
                predicate::str::starts_with("bpe-decode: error: <stdin>:2: ")
                    .and(predicate::str::contains(message)),
            );
    }
}

/// Usage errors exit 2 with the suite's message format on the first line, whether the
/// flag parser (an unknown flag, a value that is not a number) or the tool found them.
#[test]
fn usage_errors_exit_2() {
    let dir = scratch("usage");
    for (tool_name, args, message) in [
        (
            "bpe-train",
            vec!["--frobnicate"],
            "unexpected argument '--frobnicate'",
        ),
        ("bpe-train", vec!["--vocab-size", "12"], "below 256"),
        (
            "bpe-train",
            vec!["--vocab-size", "many"],
            "invalid value 'many' for '--vocab-size <N>'",
        ),
        (
            "bpe-train",
            vec!["--model-type", "char"],
            "invalid value 'char'",
        ),
        ("bpe-encode", vec!["--threads", "x"], "invalid value 'x'"),
        (
            "attn",
            vec!["--seed"],
            "a value is required for '--seed <N>'",
        ),
        ("attn", vec!["--bogus"], "unexpected argument '--bogus'"),
        (
            "bpe-train",
            vec!["--split", "(unclosed"],
            "invalid split pattern",
        ),
        (
            "bpe-train",
            vec!["--split", "cl100"],
            "unknown split \"cl100\": the presets are none, gpt2",
        ),
        (
            "bpe-encode",
            vec!["-", "-"],
            "standard input ('-') can be named only once",
        ),
        (
            "bpe-decode",
            vec!["--whole", "--nope"],
            "unexpected argument",
        ),
    ] {
        tool(tool_name, &dir)
            .args(&args)
            .write_stdin("abc")
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::starts_with(format!("{tool_name}: error: "))
                    .and(predicate::str::contains(message)),
            );
    }
    // Help and version are not errors: standard output, status 0, nothing on stderr.
    for name in ["bpe-train", "bpe-encode", "bpe-decode", "attn"] {
        for flag in ["--help", "--version"] {
            tool(name, &dir)
                .arg(flag)
                .assert()
                .code(0)
                .stdout(predicate::str::contains(name))
                .stderr("");
        }
    }
}

#[test]
fn special_tokens_must_be_non_empty_and_distinct() {
    let dir = scratch("specials");
    for (args, message) in [
        (
            vec!["--special", ""],
            "bpe-train: error: --special needs a non-empty token\n",
        ),
        (
            vec!["--special", "<|a|>", "--special", "b", "--special", "<|a|>"],
            "bpe-train: error: --special \"<|a|>\" is given twice\n",
        ),
    ] {
        // An empty token once made the text cutter spin forever: a hang must fail.
        tool("bpe-train", &dir)
            .args(&args)
            .write_stdin("some text <|a|> b")
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(2)
            .stdout("")
            .stderr(message);
    }
    // Distinct tokens, one the prefix of another, still train.
    tool("bpe-train", &dir)
        .args([
            "--vocab-size",
            "257",
            "--special",
            "<|a",
            "--special",
            "<|a|>",
        ])
        .write_stdin("xy<|a|>xy<|axy")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            r#""special_tokens":[{"text":"<|a","id":257},{"text":"<|a|>","id":258}]"#,
        ));
}

#[test]
fn a_full_disk_is_an_error_naming_the_output() {
    let dir = scratch("full");
    let model = train(&dir, b"abcabc", &["--vocab-size", "258"]);
    fs::write(dir.join("m.json"), model).unwrap();
    fs::write(dir.join("ids.jsonl"), "[97,98]\n").unwrap();
    fs::write(dir.join("text.txt"), "abc\n").unwrap();
    for (name, args) in [
        ("bpe-train", vec!["--vocab-size", "258", "text.txt"]),
        ("bpe-train", vec!["--model-type", "word", "text.txt"]),
        ("bpe-encode", vec!["-m", "m.json", "text.txt"]),
        ("bpe-decode", vec!["-m", "m.json", "ids.jsonl"]),
        ("attn", vec!["ids.jsonl"]),
    ] {
        // Standard output on a full device, then `-o` naming one.
        for to_file in [false, true] {
            let mut cmd = StdCommand::new(assert_cmd::cargo::cargo_bin(name));
            cmd.current_dir(&dir).args(&args).stdin(Stdio::null());
            if to_file {
                cmd.args(["-o", "/dev/full"]);
            } else {
                cmd.stdout(fs::File::create("/dev/full").unwrap());
            }
            let output = cmd.output().unwrap();
            let place = if to_file { "/dev/full" } else { "<stdout>" };
            assert_eq!(output.status.code(), Some(1), "{name} {args:?} {place}");
            assert_eq!(
                String::from_utf8_lossy(&output.stderr),
                format!("{name}: error: {place}: write failed: no space left on device\n"),
                "{name} {args:?}"
            );
        }
    }
}

#[test]
fn io_errors_exit_1_with_the_file_name() {
    let dir = scratch("ioerr");
    tool("bpe-train", &dir)
        .arg("missing.txt")
        .assert()
        .code(1)
        .stderr("bpe-train: error: missing.txt: cannot open: no such file or directory\n");
    tool("bpe-encode", &dir)
        .args(["-m", "nothere.json"])
        .write_stdin("x")
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "bpe-encode: error: nothere.json: cannot open",
        ));
    // A bare name that is neither a file nor a built-in: the built-ins are listed.
    for name in ["bpe-encode", "bpe-decode"] {
        tool(name, &dir)
            .args(["-m", "o200k"])
            .write_stdin("[1]")
            .assert()
            .code(1)
            .stderr(format!(
                "{name}: error: o200k: no such file, and not a built-in model \
                 (o200k_base, cl100k_base, p50k_base, r50k_base)\n"
            ));
    }
}

/// A model file or an id stream saved with a UTF-8 byte-order mark (as some editors do)
/// is refused with a message that names the mark, not only "expected value".
#[test]
fn a_byte_order_mark_is_named_in_the_error() {
    let dir = scratch("bom");
    let model = train(&dir, b"hello hello world", &["--vocab-size", "260"]);
    let mut marked = b"\xEF\xBB\xBF".to_vec();
    marked.extend_from_slice(&model);
    fs::write(dir.join("m.json"), &marked).unwrap();
    tool("bpe-encode", &dir)
        .args(["-m", "m.json"])
        .write_stdin("hello\n")
        .assert()
        .code(1)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "bpe-encode: error: m.json:1: the line starts with a UTF-8 byte-order mark",
        ));
    for name in ["bpe-decode", "attn"] {
        tool(name, &dir)
            .write_stdin(b"[1,2]\n\xEF\xBB\xBF[3]\n".to_vec())
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with(format!(
                "{name}: error: <stdin>:2: the line starts with a UTF-8 byte-order mark"
            )));
    }
}

/// A FILE that cannot be opened or read before the first record leaves standard output
/// empty, header line included (a Makefile's `bpe-encode missing.txt > ids.jsonl` gets
/// no half-stream); once records are out, the header precedes them as always, and an
/// input with no records still gets its header.
#[test]
fn encode_writes_nothing_when_the_first_file_fails() {
    let dir = scratch("encnothing");
    fs::write(dir.join("a.txt"), "hello\n").unwrap();
    fs::create_dir_all(dir.join("folder")).unwrap();
    fs::write(dir.join("empty.txt"), "").unwrap();
    for args in [
        &["missing.txt"][..],
        &["--whole", "missing.txt"],
        &["folder"],
        &["empty.txt", "missing.txt"],
    ] {
        tool("bpe-encode", &dir)
            .args(args)
            .assert()
            .code(1)
            .stdout("")
            .stderr(predicate::str::starts_with("bpe-encode: error: "));
    }
    tool("bpe-encode", &dir)
        .args(["a.txt", "missing.txt"])
        .assert()
        .code(1)
        .stdout("{\"model\":\"o200k_base\"}\n[24912]\n")
        .stderr("bpe-encode: error: missing.txt: cannot open: no such file or directory\n");
    for args in [&["empty.txt"][..], &["--whole", "empty.txt"]] {
        let records = if args.len() == 2 { "[]\n" } else { "" };
        tool("bpe-encode", &dir)
            .args(args)
            .assert()
            .success()
            .stdout(format!("{{\"model\":\"o200k_base\"}}\n{records}"));
    }
}
#[test]
fn output_file_is_atomic() {
    let dir = scratch("atomic");
    tool("bpe-train", &dir)
        .args(["--vocab-size", "260", "-o", "model.json"])
        .write_stdin("abababab")
        .assert()
        .success()
        .stdout("");
    let model = fs::read(dir.join("model.json")).unwrap();
    assert_eq!(pairs_of(&model)[0], (97, 98));
    // A failing run leaves neither the target nor a temporary file behind.
    tool("bpe-decode", &dir)
        .args(["-m", "model.json", "-o", "out.txt"])
        .write_stdin("[97]\n[99999]\n")
        .assert()
        .code(1);
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("model.json")]);
}

#[test]
fn files_mmap_and_stdin_give_the_same_model() {
    let dir = scratch("mmap");
    let text = b"to be or not to be, that is the question\n".repeat(20);
    fs::write(dir.join("a.txt"), &text).unwrap();
    fs::write(dir.join("empty.txt"), b"").unwrap();
    let from_stdin = train(&dir, &text, &["--vocab-size", "300"]);
    for args in [
        vec!["--vocab-size", "300", "a.txt"],
        vec!["--vocab-size", "300", "--no-mmap", "a.txt"],
        vec!["--vocab-size", "300", "empty.txt", "a.txt", "empty.txt"],
        vec!["--vocab-size", "300", "-"],
    ] {
        let out = tool("bpe-train", &dir)
            .args(&args)
            .write_stdin(text.clone())
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert_eq!(out, from_stdin, "{args:?}");
    }
}

#[test]
fn empty_input_gives_a_valid_model_with_no_merges() {
    let dir = scratch("empty");
    let model = train(&dir, b"", &["--vocab-size", "300"]);
    assert_eq!(pairs_of(&model), vec![]);
    tool("bpe-train", &dir)
        .args(["--vocab-size", "300"])
        .write_stdin("ab")
        .assert()
        .success()
        .stderr("bpe-train: stopped after 1 of 44 merges: no pair left to merge\n");
}

#[test]
fn count_writes_token_counts() {
    let dir = scratch("count");
    let model = train(&dir, b"aaabdaaabac", &["--vocab-size", "259"]);
    fs::write(dir.join("m.json"), model).unwrap();
    tool("bpe-encode", &dir)
        .args(["-m", "m.json", "--count"])
        .write_stdin("aaabdaaabac\nab\n\n")
        .assert()
        .success()
        .stdout("5\n2\n0\n");
    tool("bpe-encode", &dir)
        .args(["-m", "m.json", "--count", "--whole"])
        .write_stdin("aaabdaaabac\nab\n")
        .assert()
        .success()
        .stdout("9\n");
}

/// `TOOL ... | head -n 1` ends quietly with status 0.
#[test]
fn closed_output_pipe_exits_zero_quietly() {
    let dir = scratch("pipe");
    let model = train(&dir, b"abcabc", &["--vocab-size", "258"]);
    fs::write(dir.join("m.json"), model).unwrap();
    let big = "abcabc line\n".repeat(200_000);
    fs::write(dir.join("big.txt"), &big).unwrap();
    for (name, args) in [
        ("bpe-encode", vec!["-m", "m.json", "big.txt"]),
        ("bpe-encode", vec!["-m", "m.json", "--no-mmap", "big.txt"]),
    ] {
        let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin(name))
            .current_dir(&dir)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{name} {args:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stderr),
            "",
            "{name} {args:?}"
        );
    }
    // And bpe-decode, fed through its standard input.
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("bpe-decode"))
        .current_dir(&dir)
        .args(["-m", "m.json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let record = "[97,98,99,97,98,99,32,108]\n".repeat(1000);
        for _ in 0..200 {
            if stdin.write_all(record.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 8];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

/// Every flag that `--help` lists appears in the tool's man page, and every `--help`
/// ends with example pipelines.
/// `-o` never writes through a file already at its temporary name (a symbolic link
/// planted there once made it truncate what the link named, and then rename the link
/// over the output), and the file it replaces keeps its mode.
#[test]
fn output_temp_file_is_created_fresh_and_the_mode_is_kept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("tempname");
    fs::write(dir.join("victim"), "keep me\n").unwrap();
    fs::write(dir.join("out.json"), "old\n").unwrap();
    fs::set_permissions(dir.join("out.json"), fs::Permissions::from_mode(0o750)).unwrap();
    // `exec` keeps the shell's process id, so the tool's temporary name is known.
    let bin = assert_cmd::cargo::cargo_bin("bpe-train");
    let mut child = StdCommand::new("sh")
        .arg("-c")
        .arg("ln -s victim .out.json.tmp$$ && exec \"$0\" -q -o out.json")
        .arg(&bin)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello hello")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(fs::read_to_string(dir.join("victim")).unwrap(), "keep me\n");
    let out = dir.join("out.json");
    assert!(!fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
    assert!(fs::read_to_string(&out)
        .unwrap()
        .starts_with("{\"kind\":\"bpe\""));
    let mode = fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}

/// A run ended by a signal (Ctrl-C, `kill`, a closed terminal) removes `-o`'s temporary
/// file and still ends as that signal ends a process; a signal the run was started with
/// ignored (`trap '' TERM`, `nohup`) stays ignored, and the run completes.
#[test]
fn a_signal_removes_the_temporary_output_file() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let dir = scratch("signal");
    let bin = assert_cmd::cargo::cargo_bin("bpe-train");
    // A signal this test runs with ignored is ignored by the tool too: not testable here.
    let ignored = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .unwrap_or(u64::MAX);
    let start = |ignore: Option<&str>| {
        let trap = ignore.map_or(String::new(), |sig| format!("trap '' {sig}; "));
        StdCommand::new("sh")
            .arg("-c")
            .arg(format!("{trap}exec \"$0\" -q -o out.json"))
            .arg(&bin)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let wait_for_temp = |pid: u32| {
        let temp = dir.join(format!(".out.json.tmp{pid}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !temp.exists() {
            assert!(Instant::now() < deadline, "no temporary file appeared");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The watcher starts right after the file is made; give it time to.
        std::thread::sleep(Duration::from_millis(300));
        temp
    };
    let kill = |signal: &str, pid: u32| {
        let sent = StdCommand::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    };
    for (signal, number) in [("TERM", 15), ("INT", 2), ("HUP", 1)] {
        if ignored & (1 << (number - 1)) != 0 {
            continue;
        }
        let mut child = start(None);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"text still coming ").unwrap();
        let temp = wait_for_temp(child.id());
        kill(signal, child.id());
        let status = child.wait().unwrap();
        drop(stdin);
        assert_eq!(status.signal(), Some(number), "{signal}: {status:?}");
        assert!(!temp.exists(), "{signal} left {}", temp.display());
        assert!(!dir.join("out.json").exists());
    }
    let mut child = start(Some("TERM"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"text still coming ").unwrap();
    let temp = wait_for_temp(child.id());
    kill("TERM", child.id());
    std::thread::sleep(Duration::from_millis(300));
    stdin.write_all(b"and done").unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "an ignored TERM ended the run: {status:?}"
    );
    assert!(!temp.exists());
    assert!(fs::read_to_string(dir.join("out.json"))
        .unwrap()
        .starts_with("{\"kind\":\"bpe\""));
}

/// Whether `command` (standard input and output piped here) answers `line` with output
/// containing `answer` within `wait`, while its input is still open.
fn answers_before_input_ends(
    mut command: StdCommand,
    line: &str,
    answer: &str,
    wait: std::time::Duration,
) -> bool {
    use std::io::BufRead;
    use std::sync::mpsc;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the command starts");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (lines, seen) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for out_line in std::io::BufReader::new(stdout).lines() {
            let Ok(out_line) = out_line else { break };
            if lines.send(out_line).is_err() {
                break;
            }
        }
    });
    stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut answered = false;
    while let Ok(out_line) = seen.recv_timeout(wait) {
        if out_line.contains(answer) {
            answered = true;
            break;
        }
    }
    // Only now does the input end.
    drop(stdin);
    let _ = child.wait();
    drop(seen);
    let _ = reader.join();
    answered
}

/// A line and (part of) its answer, for each tool that answers line by line.
const LINE_ANSWERS: [(&str, &str, &str); 3] = [
    ("bpe-encode", "hello", "[24912]"),
    ("bpe-decode", "[24912,2375]", "hello world"),
    ("attn", "[1,2]", "[[0.5756,"),
];

/// Typed at a terminal, each line is answered as soon as it is entered (not when the
/// input ends or fills a block): the tools run inside `script`, which gives them a
/// terminal, and the answer to the first line must come while the input is still open.
#[test]
fn a_terminal_gets_each_answer_at_once() {
    use std::time::Duration;
    let dir = scratch("terminal");
    for (name, line, answer) in LINE_ANSWERS {
        let mut command = StdCommand::new("script");
        command
            .args(["-q", "-f", "-e", "-c"])
            .arg(assert_cmd::cargo::cargo_bin(name))
            .arg("/dev/null")
            .current_dir(&dir);
        assert!(
            answers_before_input_ends(command, line, answer, Duration::from_secs(20)),
            "{name} on a terminal did not answer {line:?} before its input ended"
        );
    }
}

/// `--line-buffered` does for a pipe (`tail -f log | bpe-encode --line-buffered`) what
/// a terminal gets by default; without it a pipe is answered in blocks.
#[test]
fn line_buffered_answers_each_line_of_a_pipe_at_once() {
    use std::time::Duration;
    let dir = scratch("line-buffered");
    for (name, line, answer) in LINE_ANSWERS {
        let mut command = StdCommand::new(assert_cmd::cargo::cargo_bin(name));
        command.arg("--line-buffered").current_dir(&dir);
        assert!(
            answers_before_input_ends(command, line, answer, Duration::from_secs(20)),
            "{name} --line-buffered did not answer {line:?} before its input ended"
        );
    }
    // The default on a pipe: the answer waits for the end of the input (or a block).
    let mut command = StdCommand::new(assert_cmd::cargo::cargo_bin("bpe-encode"));
    command.current_dir(&dir);
    let (_, line, answer) = LINE_ANSWERS[0];
    assert!(!answers_before_input_ends(
        command,
        line,
        answer,
        Duration::from_secs(1)
    ));
}

/// `-o` onto something that is not a regular file (here a FIFO, as `/dev/null` or a
/// pipe would be) writes into it and leaves it what it was; `-o` through a symbolic
/// link replaces the file the link points to and keeps the link.
#[test]
fn output_into_a_fifo_or_through_a_link_keeps_it() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    let made = StdCommand::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || fs::read(reader_path).unwrap());
    tool("bpe-train", &dir)
        .args(["--vocab-size", "257", "-o", "pipe"])
        .write_stdin("abab")
        .assert()
        .success();
    // Checked before joining: had the FIFO been replaced, the reader would never return.
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    let received = reader.join().unwrap();
    assert_eq!(pairs_of(&received), vec![(97, 98)]);

    fs::write(dir.join("real.json"), "old").unwrap();
    std::os::unix::fs::symlink("real.json", dir.join("link.json")).unwrap();
    tool("bpe-train", &dir)
        .args(["--vocab-size", "257", "-o", "link.json"])
        .write_stdin("abab")
        .assert()
        .success();
    assert!(fs::symlink_metadata(dir.join("link.json"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        pairs_of(&fs::read(dir.join("real.json")).unwrap()),
        vec![(97, 98)]
    );
}

/// `--stats` reports records, tokens, bytes per token and, for word models, unknown words.
#[test]
fn stats_report_tokens_and_unknown_words() {
    let dir = scratch("stats");
    let words = train(
        &dir,
        b"Life is short eat dessert first",
        &["--model-type", "word"],
    );
    fs::write(dir.join("words.json"), words).unwrap();
    tool("bpe-encode", &dir)
        .args(["-m", "words.json", "--stats", "--no-header"])
        .write_stdin("Life is sweet\n\ncake is short\n")
        .assert()
        .success()
        .stdout("[0,4,6]\n[]\n[6,4,5]\n")
        .stderr(
            "bpe-encode: records 3 tokens 6 bytes 26 bytes/token 4.333 unknown 2 unknown-rate 33.33%\n",
        );
    let bpe = train(&dir, b"aaabdaaabac", &["--vocab-size", "259"]);
    fs::write(dir.join("m.json"), bpe).unwrap();
    tool("bpe-encode", &dir)
        .args(["-m", "m.json", "--stats", "--whole", "--count"])
        .write_stdin("aaabdaaabac")
        .assert()
        .success()
        .stdout("5\n")
        .stderr("bpe-encode: records 1 tokens 5 bytes 11 bytes/token 2.200\n");
}
