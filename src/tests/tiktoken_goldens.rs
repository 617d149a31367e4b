//! The built-in GPT vocabularies against ids produced by the real tiktoken
//! (tests/fixtures/encode/tiktoken-goldens.jsonl, made by
//! scripts/fixtures/tiktoken-goldens.py), and rank-file loading errors.

use std::borrow::Cow;

use crate::encode::{AllowedSpecial, Encoder};
use crate::format::tiktoken;
use crate::model::{BpeModel, ModelSource};

const GOLDENS: &str = include_str!("../../tests/fixtures/encode/tiktoken-goldens.jsonl");

fn decode(model: &BpeModel, ids: &[u32]) -> Vec<u8> {
    ids.iter()
        .flat_map(|&id| model.token(id).expect("known id").to_vec())
        .collect()
}

#[test]
fn builtins_match_tiktoken_goldens() {
    let mut checked = 0;
    for &name in crate::model::BUILTINS {
        let model = crate::model::builtin(name).expect("builtin loads");
        let none = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        let all = Encoder::new(&model, &AllowedSpecial::All).unwrap();
        let mut whole_text = Vec::new();
        let mut whole_ids = Vec::new();
        for line in GOLDENS.lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            if row["encoding"] != name {
                continue;
            }
            let text = row["text"].as_str().unwrap();
            let expected: Vec<u32> = row["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let mut got = Vec::new();
            match &row["allowed"] {
                serde_json::Value::Null => {
                    none.encode(text.as_bytes(), &mut got);
                    whole_text.extend_from_slice(text.as_bytes());
                    whole_ids.push(got.clone());
                }
                serde_json::Value::String(s) if s == "all" => all.encode(text.as_bytes(), &mut got),
                serde_json::Value::Array(names) => {
                    let names = names.iter().map(|n| n.as_str().unwrap().to_string());
                    let some = Encoder::new(&model, &AllowedSpecial::Some(names.collect()));
                    some.unwrap().encode(text.as_bytes(), &mut got);
                }
                other => panic!("bad allowed field {other}"),
            }
            assert_eq!(got, expected, "{name}: {text:?}");
            assert_eq!(decode(&model, &got), text.as_bytes());
            checked += 1;
        }
        // The concatenated texts, as one --whole record, in parallel and not.
        let big: Vec<u8> = whole_text.repeat(1 + (3 << 20) / whole_text.len().max(1));
        let mut one = Vec::new();
        none.encode(&big, &mut one);
        let mut par = Vec::new();
        none.encode_whole_parallel(&big, 2, &mut par);
        assert_eq!(par, one, "{name}");
        assert_eq!(decode(&model, &one), big);
    }
    assert!(checked > 1000, "only {checked} goldens checked");
}

#[test]
fn builtins_equal_a_parse_of_their_rank_files() {
    let files: [(&str, &[u8]); 4] = [
        (
            "o200k_base",
            include_bytes!("../../assets/o200k_base.tiktoken"),
        ),
        (
            "cl100k_base",
            include_bytes!("../../assets/cl100k_base.tiktoken"),
        ),
        (
            "p50k_base",
            include_bytes!("../../assets/p50k_base.tiktoken"),
        ),
        (
            "r50k_base",
            include_bytes!("../../assets/r50k_base.tiktoken"),
        ),
    ];
    for (name, file) in files {
        let built = crate::model::builtin(name).unwrap();
        let parsed = tiktoken::load_rank_file(
            file,
            ModelSource::Builtin(name),
            built.split.clone(),
            built.specials.clone(),
        )
        .unwrap();
        assert_eq!(built.base_id_of_byte, parsed.base_id_of_byte, "{name}");
        assert_eq!(built.token_offsets, parsed.token_offsets, "{name}");
        assert_eq!(built.token_bytes(), parsed.token_bytes(), "{name}");
        assert_eq!(built.merge_ids, parsed.merge_ids, "{name}");
        assert!(built.merges.is_empty() && parsed.merges.is_empty());
        // The built-in's tables are read in place from the binary, not copied (a copy
        // costs every run a page fault per 4 KB of them).
        assert!(
            matches!(built.stored_token_bytes(), Some(Cow::Borrowed(_))),
            "{name}: token bytes copied"
        );
        if cfg!(target_endian = "little") {
            assert!(
                matches!(built.token_offsets, Cow::Borrowed(_)),
                "{name}: token offsets copied"
            );
        }
    }
}

#[test]
fn builtin_shapes() {
    let o200k = crate::model::builtin("o200k_base").unwrap();
    assert_eq!(o200k.vocab_size(), 200_019);
    assert_eq!(o200k.source, ModelSource::Builtin("o200k_base"));
    assert_eq!(o200k.split.as_ref().unwrap().name, "o200k");
    let p50k = crate::model::builtin("p50k_base").unwrap();
    // The rank gap at 50256 holds <|endoftext|>.
    assert_eq!(p50k.token(50256), Some(&b"<|endoftext|>"[..]));
    assert_eq!(p50k.vocab_size(), 50281);
    let r50k = crate::model::builtin("r50k_base").unwrap();
    assert_eq!(r50k.vocab_size(), 50257);
    // Byte tokens are permuted: "!" is rank 0.
    assert_eq!(r50k.base_id_of_byte[b'!' as usize], 0);
    assert!(crate::model::builtin("gpt5_base").is_none());
}

#[test]
fn every_token_encodes_to_itself() {
    // tiktoken's whole-piece rule: a piece that is a token is that token.
    for &name in crate::model::BUILTINS {
        let model = crate::model::builtin(name).unwrap();
        let mut no_split = model.clone();
        no_split.split = None;
        let enc = Encoder::new(&no_split, &AllowedSpecial::None).unwrap();
        for id in 0..model.token_offsets.len() as u32 - 1 {
            let (start, end) = (
                model.token_offsets[id as usize] as usize,
                model.token_offsets[id as usize + 1] as usize,
            );
            if start == end {
                continue; // a rank gap (p50k_base's special token sits there)
            }
            let bytes = &model.token_bytes()[start..end];
            let mut got = Vec::new();
            enc.encode(bytes, &mut got);
            assert_eq!(got, [id], "{name} {id}");
        }
    }
}

fn load(text: &str) -> crate::Result<BpeModel> {
    let source = ModelSource::File {
        name: "v.tiktoken".into(),
        sha256: String::new(),
    };
    tiktoken::load_rank_file(text.as_bytes(), source, None, vec![])
}

fn all_bytes_file() -> String {
    let mut s = String::new();
    for b in 0..=255u8 {
        s.push_str(&format!("{} {b}\n", b64(&[b])));
    }
    s
}

fn b64(bytes: &[u8]) -> String {
    super::encode_props::base64(bytes)
}

#[test]
fn rank_file_errors_name_the_line() {
    let good = all_bytes_file();
    let m = load(&format!("{good}\n{} 256\n", b64(b"ab"))).unwrap();
    assert_eq!(m.merge_ids.get(&(97, 98)), Some(&256));
    let cases = [
        (format!("{good}!!!! 256\n"), "v.tiktoken:257", "base64"),
        (
            format!("{good}{} 5\n", b64(b"xy")),
            "v.tiktoken:257",
            "rank 5",
        ),
        (
            format!("{good}{} 300\n", b64(b"a")),
            "v.tiktoken:257",
            "twice",
        ),
        (
            format!("{good}{} x\n", b64(b"zz")),
            "v.tiktoken:257",
            "rank",
        ),
        (
            format!("{good}{}\n", b64(b"zz")),
            "v.tiktoken:257",
            "two fields",
        ),
    ];
    for (text, location, words) in cases {
        let err = load(&text).expect_err("error");
        assert_eq!(err.exit_code(), 1);
        assert_eq!(err.location(), Some(location), "{}", err.message());
        assert!(err.message().contains(words), "{}", err.message());
    }
    let missing: String = good.lines().skip(1).map(|l| format!("{l}\n")).collect();
    let err = load(&missing).expect_err("error");
    assert!(err.message().contains("0x00"), "{}", err.message());
    assert!(load("").is_err());
}
