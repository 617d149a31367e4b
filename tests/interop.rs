//! Models that travel, from the outside (`bpe-model`, and `-m` of any format): the
//! committed exports are what `bpe-model` writes, formats are known by content, `info`
//! describes a model, and every refusal names its file, line and reason. The exports'
//! ids against the real libraries' and the round trips are checked inside the crate
//! (src/tests/interop.rs).

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{scratch, sha256_hex, tool};

const MODELS: [&str; 6] = [
    "none",
    "none-specials",
    "gpt4",
    "gpt4-specials",
    "gpt2",
    "gpt2-specials",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/interop")
        .join(name)
}

/// The committed exports are what `bpe-model` writes today: the goldens are about the
/// files this build writes.
#[test]
fn exports_are_the_committed_files() {
    let dir = scratch("interop-exports");
    for name in MODELS {
        for (to, ext) in [
            ("hf", "tokenizer.json"),
            ("tiktoken", "tiktoken"),
            ("minbpe", "model"),
        ] {
            let out = dir.join(format!("{name}.{ext}"));
            tool("bpe-model", &dir)
                .args(["convert", "-q", "--to", to, "-m"])
                .arg(fixture(&format!("{name}.json")))
                .arg("-o")
                .arg(&out)
                .assert()
                .success();
            let want = fs::read(fixture(&format!("{name}.{ext}"))).unwrap();
            assert!(
                fs::read(&out).unwrap() == want,
                "{name}.{ext} differs from the fixture"
            );
        }
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}

/// Each format is known by its content, whatever the file is called, by `bpe-encode` and
/// `bpe-decode` as by `bpe-model`; `--split` is for rank files only.
#[test]
fn formats_are_detected_by_content() {
    let dir = scratch("interop-detect");
    let renamed = [
        ("gpt4.tokenizer.json", "a.txt", "hf"),
        ("gpt4.model", "b.json", "minbpe"),
        ("gpt4.tiktoken", "c.model", "tiktoken"),
        ("gpt4.json", "d.tiktoken", "ndjson"),
    ];
    let want = tool("bpe-encode", &dir)
        .args(["--no-header", "-m"])
        .arg(fixture("gpt4.json"))
        .write_stdin("Hello wörld, 123!\n")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    for (from, to, format) in renamed {
        fs::copy(fixture(from), dir.join(to)).unwrap();
        let split: &[&str] = if format == "tiktoken" {
            &["--split", "gpt4"]
        } else {
            &[]
        };
        let info = tool("bpe-model", &dir)
            .args(["info", "-m", to])
            .args(split)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let info: serde_json::Value = serde_json::from_slice(&info).unwrap();
        assert_eq!(info["format"], format, "{to}");
        let mut cmd = tool("bpe-encode", &dir);
        cmd.args(["--no-header", "-m", to]);
        cmd.args(split);
        let got = cmd
            .write_stdin("Hello wörld, 123!\n")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert_eq!(got, want, "{to}");
        // The header names the file; bpe-decode loads it by content too.
        let ids = tool("bpe-encode", &dir)
            .args(["-m", to])
            .args(split)
            .write_stdin("Hello wörld\n")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        tool("bpe-decode", &dir)
            .write_stdin(ids)
            .assert()
            .success()
            .stdout("Hello wörld\n");
    }
    let err = tool("bpe-encode", &dir)
        .args(["-m", "a.txt", "--split", "gpt4"])
        .write_stdin("x")
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(err).unwrap();
    assert!(
        err.contains("--split applies only to tiktoken rank files, and a.txt is this file"),
        "{err}"
    );
}

/// A tokenizer.json with each feature the suite cannot reproduce exactly, and each file
/// that lies, is refused with exit 1, the file, the line and the feature (never a panic).
#[test]
fn refusals_name_file_line_and_feature() {
    let dir = scratch("interop-refuse");
    let base = fs::read_to_string(fixture("gpt4-specials.tokenizer.json")).unwrap();
    let line_of = |text: &str, needle: &str| {
        1 + text[..text.find(needle).unwrap_or_else(|| panic!("{needle}"))]
            .matches('\n')
            .count()
    };
    // (what to replace, with what, the line to name (of `with`'s first 20 bytes), message)
    let cases: &[(&str, &str, &str)] = &[
        ("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}", "normalizer NFC is not supported: the suite tokenizes the raw bytes"),
        ("\"truncation\": null", "\"truncation\": {\"max_length\": 5}", "truncation is not supported: bpe-encode never cuts or pads a sequence"),
        ("\"padding\": null", "\"padding\": {\"strategy\": \"BatchLongest\"}", "padding is not supported"),
        ("\"version\": \"1.0\"", "\"version\": \"2.0\"", "unsupported tokenizer.json version"),
        ("\"dropout\": null", "\"dropout\": 0.1", "BPE dropout is not supported: it leaves out merges at random"),
        ("\"byte_fallback\": false", "\"byte_fallback\": true", "byte_fallback is not supported"),
        ("\"continuing_subword_prefix\": null", "\"continuing_subword_prefix\": \"##\"", "a continuing_subword_prefix is not supported"),
        ("\"end_of_word_suffix\": null", "\"end_of_word_suffix\": \"</w>\"", "a end_of_word_suffix is not supported"),
        ("\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "model type WordPiece is not supported"),
        ("\"behavior\": \"Isolated\"", "\"behavior\": \"MergedWithNext\"", "Split behavior MergedWithNext with invert false is not supported"),
        ("\"Regex\": ", "\"String\": ", "a Split pattern that is not {\"Regex\": ...} is not supported"),
        ("\"add_prefix_space\": false,\n        \"trim_offsets\"", "\"add_prefix_space\": true,\n        \"trim_offsets\"", "ByteLevel add_prefix_space is not supported: it puts a space before the text"),
        ("\"use_regex\": false\n      }", "\"use_regex\": true\n      }", "ByteLevel with use_regex true after a Split is not supported"),
        ("\"decoder\": {\n    \"type\": \"ByteLevel\"", "\"decoder\": {\n    \"type\": \"Metaspace\"", "decoder Metaspace is not supported"),
        ("\"special\": true", "\"special\": false", "added token \"<|endoftext|>\" (not special) is not supported"),
        ("\"lstrip\": false", "\"lstrip\": true", "lstrip on added token \"<|endoftext|>\" is not supported"),
        ("\"single_word\": false", "\"single_word\": true", "single_word on added token"),
        ("\"ignore_merges\": false", "\"ignore_merges\": false, \"ignore_merges\": false", "field \"ignore_merges\" appears twice in the model"),
        ("\"fuse_unk\": false", "\"fuse_unk\": false, \"shiny\": 1", "unknown field \"shiny\" in the model"),
        ("\"id\": 600", "\"id\": 300", "special token \"<|endoftext|>\" has id 300, which a byte or merge already has"),
        // A merge whose member is in no vocab entry: an undefined token.
        ("\n      \"~ ~\"", "\n      \"~ zz\"", "merge 256 (\"~\" + \"zz\"): \"zz\" is not in model.vocab"),
        // Two vocab keys for the same bytes: a vocab lists a string twice.
        ("\"Ā\": 0,", "\"Ā\": 0,\n      \"Ā\": 1,", "model.vocab lists \"Ā\" twice"),
        ("\"Ā\": 0,", "\"Ā\": 70000,", "vocab token \"Ā\" (id 70000) is not supported"),
        ("\"Ā\": 0,", "\"<unk>\": 0,", "vocab token \"<unk>\" at id 0 is not supported: the 256 single bytes must have ids 0..255"),
    ];
    assert!(
        base.contains("\"merges\": [\n      \"~ ~\""),
        "the fixture's first merge is \"~ ~\""
    );
    for (i, (from, to, message)) in cases.iter().enumerate() {
        assert!(base.contains(from), "case {i}: {from:?} not in the fixture");
        let text = base.replacen(from, to, 1);
        let name = format!("t{i}.json");
        write(&dir, &name, &text);
        let line = line_of(&text, to);
        let stderr = tool("bpe-encode", &dir)
            .args(["-m", &name])
            .write_stdin("x")
            .assert()
            .code(1)
            .get_output()
            .stderr
            .clone();
        let stderr = String::from_utf8(stderr).unwrap();
        assert!(
            stderr.starts_with(&format!("bpe-encode: error: {name}:")) && stderr.contains(message),
            "case {i} ({message}): {stderr}"
        );
        let named = stderr
            .split(':')
            .nth(3)
            .unwrap()
            .trim()
            .parse::<usize>()
            .unwrap();
        assert!(
            named.abs_diff(line) <= 12,
            "case {i}: names line {named}, the change is on line {line}: {stderr}"
        );
    }
}

/// What each export format cannot hold is refused, naming the reason, and nothing is
/// written: minbpe without a permuted byte order, whitespace in special tokens or a
/// pattern with a line break; a rank file without merges that rank BPE gives back; HF
/// and rank files without two ids for the same bytes.
#[test]
fn export_refusals_name_the_reason() {
    let dir = scratch("interop-export-refuse");
    let header = "{\"kind\":\"bpe\",\"version\":1,\"split\":\"none\",\"pattern\":null";
    let hand = format!(
        "{header}}}\n{{\"id\":256,\"pair\":[98,99]}}\n{{\"id\":257,\"pair\":[97,98]}}\n{{\"id\":258,\"pair\":[257,99]}}\n"
    );
    let dupe = format!(
        "{header}}}\n{{\"id\":256,\"pair\":[97,98]}}\n{{\"id\":257,\"pair\":[256,99]}}\n{{\"id\":258,\"pair\":[98,99]}}\n{{\"id\":259,\"pair\":[97,258]}}\n"
    );
    let spaced =
        format!("{header},\"special_tokens\":[{{\"text\":\"<end of text>\",\"id\":256}}]}}\n");
    let newline = "{\"kind\":\"bpe\",\"version\":1,\"split\":\"custom\",\"pattern\":\"a\\n|b\"}\n";
    let cases: Vec<(String, &str, &str)> = vec![
        (hand, "tiktoken", "merge 258 ([257,99] -> \"abc\") is not what tiktoken's rank BPE makes of those bytes ([97, 256])"),
        (dupe.clone(), "tiktoken", "ids 257 and 259 stand for the same bytes \"abc\", which a rank file cannot hold"),
        (dupe, "hf", "ids 257 and 259 stand for the same bytes \"abc\", which a tokenizer.json vocab cannot hold"),
        (spaced, "minbpe", "minbpe cannot hold special token \"<end of text>\""),
        (newline.to_string(), "minbpe", "minbpe cannot hold this model's pattern"),
        (String::new(), "minbpe", ""),
    ];
    for (i, (model, to, message)) in cases.iter().enumerate() {
        let (spec, code) = if model.is_empty() {
            ("cl100k_base".to_string(), 1)
        } else {
            write(&dir, &format!("m{i}.json"), model);
            (format!("m{i}.json"), 1)
        };
        let out = dir.join(format!("out{i}"));
        let stderr = tool("bpe-model", &dir)
            .args(["convert", "--to", to, "-m", &spec, "-o"])
            .arg(&out)
            .assert()
            .code(code)
            .get_output()
            .stderr
            .clone();
        let stderr = String::from_utf8(stderr).unwrap();
        let message = if model.is_empty() {
            "minbpe cannot hold this model: its base ids are the bytes in a permuted order"
        } else {
            message
        };
        assert!(
            stderr.starts_with(&format!("bpe-model: error: {spec}: ")) && stderr.contains(message),
            "case {i}: {stderr}"
        );
        assert!(!out.exists(), "case {i}: a refused export leaves no file");
    }
    // `--split`/`--special` are for rank files: a usage error elsewhere.
    tool("bpe-model", &dir)
        .args(["info", "-m", "o200k_base", "--split", "gpt2"])
        .assert()
        .code(2);
    tool("bpe-model", &dir)
        .args(["info", "-m", "o200k_base", "--special", "nope"])
        .assert()
        .code(2);
}

/// minbpe files that lie (a merge of an undefined id, a pair merged twice, a special
/// token among the merges' ids) are refused at their line by bpe-encode too.
#[test]
fn minbpe_lies_are_refused_at_their_line() {
    let dir = scratch("interop-minbpe");
    let cases = [
        (
            "minbpe v1\n\n0\n97 98\n256 999\n",
            "m.model:5: merge 257 uses id 999, which is not defined before it",
        ),
        (
            "minbpe v1\n\n0\n97 98\n97 98\n",
            "m.model:5: pair [97,98] is merged twice",
        ),
        ("minbpe v1\nnot a (regex\n0\n", "m.model:2: the pattern"),
    ];
    for (text, want) in cases {
        write(&dir, "m.model", text);
        let stderr = tool("bpe-encode", &dir)
            .args(["-m", "m.model"])
            .write_stdin("x")
            .assert()
            .code(1)
            .get_output()
            .stderr
            .clone();
        let stderr = String::from_utf8(stderr).unwrap();
        assert!(
            stderr.starts_with(&format!("bpe-encode: error: {want}")),
            "{stderr}"
        );
    }
}

/// `info` describes a model as one JSON object; a pattern equal to a preset's text is
/// reported as that preset, whatever the file calls it; a post-processor that adds
/// tokens and a custom findall pattern are noted.
#[test]
fn info_describes_the_model() {
    let dir = scratch("interop-info");
    let info = |args: &[&str]| -> serde_json::Value {
        let out = tool("bpe-model", &dir)
            .arg("info")
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    };
    let builtin = info(&["-m", "r50k_base"]);
    assert_eq!(builtin["format"], "builtin");
    assert_eq!(builtin["vocab_size"], 50257);
    assert_eq!(builtin["merges"], 50000);
    assert_eq!(builtin["rank_table"], true);
    assert_eq!(builtin["split"], "r50k");
    assert_eq!(builtin["base_bytes"], "gpt2");
    assert_eq!(builtin["sha256"], serde_json::Value::Null);

    let hf = fs::read_to_string(fixture("gpt4-specials.tokenizer.json")).unwrap();
    let hf = hf.replacen(
        "\"post_processor\": null",
        "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|fim|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {}}",
        1,
    );
    write(&dir, "t.json", &hf);
    let got = info(&["-m", "t.json"]);
    assert_eq!(got["format"], "hf");
    assert_eq!(got["split"], "gpt4");
    assert_eq!(got["merges"], 344);
    assert_eq!(got["special_tokens"][1]["text"], "<|fim|>");
    assert_eq!(got["base_bytes"], "identity");
    assert_eq!(got["sha256"], sha256_hex(hf.as_bytes()));
    assert!(got["notes"][0]
        .as_str()
        .unwrap()
        .contains("TemplateProcessing post-processor adds tokens (<|fim|>)"));

    // A model file that calls the GPT-4 pattern "custom" is reported as gpt4.
    let model = fs::read_to_string(fixture("gpt4.json")).unwrap().replacen(
        "\"split\":\"gpt4\"",
        "\"split\":\"custom\"",
        1,
    );
    write(&dir, "c.json", &model);
    assert_eq!(info(&["-m", "c.json"])["split"], "gpt4");
    // From standard input.
    let out = tool("bpe-model", &dir)
        .args(["info", "-m", "-"])
        .write_stdin(fs::read(fixture("gpt2.model")).unwrap())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (got["format"].as_str(), got["split"].as_str()),
        (Some("minbpe"), Some("gpt2"))
    );
}

/// A rank file's pattern and special tokens: `--split` and `--special` give them back;
/// `convert --to tiktoken` says where they go.
#[test]
fn rank_files_take_their_pattern_and_specials_from_flags() {
    let dir = scratch("interop-ranks");
    let out = tool("bpe-model", &dir)
        .args(["convert", "--to", "tiktoken", "-m"])
        .arg(fixture("gpt4-specials.json"))
        .assert()
        .success()
        .get_output()
        .clone();
    let note = String::from_utf8(out.stderr).unwrap();
    assert!(
        note.starts_with(
            "bpe-model: note: a rank file holds neither the split pattern nor the special tokens"
        ) && note.contains("\"<|endoftext|>\": 600")
            && note.contains("--split gpt4 --special '<|endoftext|>=600' --special '<|fim|>=601'"),
        "{note}"
    );
    fs::write(dir.join("r.tiktoken"), &out.stdout).unwrap();
    let back = tool("bpe-model", &dir)
        .args([
            "convert",
            "--to",
            "ndjson",
            "-m",
            "r.tiktoken",
            "--split",
            "gpt4",
        ])
        .args(["--special", "<|endoftext|>=600", "--special", "<|fim|>=601"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let want = tool("bpe-model", &dir)
        .args(["convert", "--to", "ndjson", "-m"])
        .arg(fixture("gpt4-specials.json"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert!(back == want, "the model file written back differs");
    let info = tool("bpe-model", &dir)
        .args(["info", "-m", "r.tiktoken", "--special", "<|endoftext|>=600"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let info: serde_json::Value = serde_json::from_slice(&info).unwrap();
    assert_eq!(info["vocab_size"], 601);
}
