//! Models that travel: the exports of six trained models checked against the ids the real
//! HF tokenizers, tiktoken and minbpe gave for them (tests/fixtures/interop/, made by
//! scripts/fixtures/interop-goldens.py), the built-ins exported to tokenizer.json against
//! HF's ids, round trips, and the refusals of broken merges and truncated files. The
//! command-line side is in tests/interop.rs.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cmd::model::{self as model_cmd, ModelCommand, ModelConfig};
use crate::encode::{AllowedSpecial, Encoder};
use crate::format::{self, ModelFormat, RankFileOptions};
use crate::model::{BpeModel, Model};

use super::{scratch, write};

const GOLDENS: &str = include_str!("../../tests/fixtures/interop/goldens.jsonl");
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

fn bpe(model: Model) -> BpeModel {
    match model {
        Model::Bpe(m) => m,
        Model::Word(_) => panic!("a BPE model"),
    }
}

/// The rank-file options that give a model file's pattern and special tokens back.
fn rank_options(of: &BpeModel) -> RankFileOptions {
    RankFileOptions {
        split: of.split.clone(),
        specials: of.specials.clone(),
    }
}

fn open(path: &Path, options: &RankFileOptions) -> BpeModel {
    let spec = path.to_str().unwrap();
    bpe(format::open(spec, options)
        .unwrap_or_else(|e| panic!("{spec}: {e}"))
        .model)
}

fn encode(model: &BpeModel, allowed: &AllowedSpecial, text: &[u8]) -> Vec<u32> {
    let mut ids = Vec::new();
    Encoder::new(model, allowed).unwrap().encode(text, &mut ids);
    ids
}

fn ids_of(row: &serde_json::Value) -> Vec<u32> {
    row["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

fn text_of(row: &serde_json::Value) -> Vec<u8> {
    match (row["text"].as_str(), row["hex"].as_str()) {
        (Some(text), _) => text.as_bytes().to_vec(),
        (None, Some(hex)) => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect(),
        _ => panic!("row without text"),
    }
}

fn rows() -> impl Iterator<Item = serde_json::Value> {
    GOLDENS
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
}

/// Every golden row: the ids that HF tokenizers, tiktoken and minbpe gave for each
/// export of a trained model are the ids `bpe-encode` gives with the model file and with
/// each export read back (so every library agreed with the suite, or the row's ids would
/// differ between libraries and the test would fail for one of them).
#[test]
fn exports_give_the_real_libraries_ids() {
    let mut checked = 0;
    for name in MODELS {
        let original = open(
            &fixture(&format!("{name}.json")),
            &RankFileOptions::default(),
        );
        let options = rank_options(&original);
        let by_library = [
            (
                "hf",
                open(
                    &fixture(&format!("{name}.tokenizer.json")),
                    &RankFileOptions::default(),
                ),
            ),
            (
                "tiktoken",
                open(&fixture(&format!("{name}.tiktoken")), &options),
            ),
            (
                "minbpe",
                open(
                    &fixture(&format!("{name}.model")),
                    &RankFileOptions::default(),
                ),
            ),
        ];
        for row in rows().filter(|r| r["model"] == name) {
            let text = text_of(&row);
            let want = ids_of(&row);
            let allowed = match row["allowed"].as_str() {
                Some("all") => AllowedSpecial::All,
                _ => AllowedSpecial::None,
            };
            assert_eq!(encode(&original, &allowed, &text), want, "{name}: {row}");
            for library in row["libraries"].as_array().unwrap() {
                let (_, model) = by_library
                    .iter()
                    .find(|(l, _)| library == l)
                    .expect("a known library");
                assert_eq!(
                    encode(model, &allowed, &text),
                    want,
                    "{name} via {library}: {row}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 1500, "only {checked} golden ids checked");
}

fn convert(model: &str, to: ModelFormat, options: &RankFileOptions) -> crate::Result<Vec<u8>> {
    let config = ModelConfig {
        model: model.to_string(),
        rank_file: options.clone(),
        command: ModelCommand::Convert { to },
    };
    let mut out = Vec::new();
    model_cmd::run(&config, &mut out, &mut |_| {})?;
    Ok(out)
}

/// model -> each format -> model: the same merges, byte order, pattern and special tokens
/// (so the same ids), and the model file written back is byte for byte the one written
/// from the original; for trained models and for built-ins read back from their exports.
#[test]
fn round_trips_are_exact() {
    let dir = scratch("interop-round");
    let mut specs: Vec<String> = MODELS
        .iter()
        .map(|n| fixture(&format!("{n}.json")).to_str().unwrap().to_string())
        .collect();
    specs.push("r50k_base".into());
    for spec in &specs {
        let original = bpe(format::open(spec, &RankFileOptions::default())
            .unwrap()
            .model);
        let ndjson = convert(spec, ModelFormat::Ndjson, &RankFileOptions::default()).unwrap();
        for (to, ext) in [
            (ModelFormat::Hf, "tokenizer.json"),
            (ModelFormat::Tiktoken, "tiktoken"),
            (ModelFormat::Minbpe, "model"),
            (ModelFormat::Ndjson, "json"),
        ] {
            let exported = match convert(spec, to, &RankFileOptions::default()) {
                Ok(bytes) => bytes,
                // r50k_base permutes its bytes, which minbpe cannot hold.
                Err(e) if to == ModelFormat::Minbpe && spec == "r50k_base" => {
                    assert!(e.to_string().contains("permuted order"), "{e}");
                    continue;
                }
                Err(e) => panic!("{spec} to {to:?}: {e}"),
            };
            let path = dir.join(format!("m.{ext}"));
            fs::write(&path, &exported).unwrap();
            let options = match to {
                ModelFormat::Tiktoken => rank_options(&original),
                _ => RankFileOptions::default(),
            };
            let back = bpe(format::open(path.to_str().unwrap(), &options)
                .unwrap()
                .model);
            assert_eq!(back.split, original.split, "{spec} via {to:?}");
            assert_eq!(back.specials, original.specials, "{spec} via {to:?}");
            assert_eq!(
                back.base_id_of_byte, original.base_id_of_byte,
                "{spec} via {to:?}"
            );
            assert_eq!(
                back.token_offsets, original.token_offsets,
                "{spec} via {to:?}"
            );
            assert_eq!(
                back.token_bytes(),
                original.token_bytes(),
                "{spec} via {to:?}"
            );
            let again = convert(path.to_str().unwrap(), ModelFormat::Ndjson, &options).unwrap();
            assert!(again == ndjson, "{spec} via {to:?}: the model file differs");
        }
    }
}

/// `bpe-model convert --to hf` of the built-ins gives the tokenizer.json whose HF ids the
/// goldens hold (same sha256), and read back it encodes like HF and like the built-in
/// (which is tiktoken exactly): GPT-2 style (r50k_base, ByteLevel's byte order) and
/// GPT-4o style (o200k_base). The rank file written from a built-in is tiktoken's own.
#[test]
fn builtins_export_to_hf_and_tiktoken() {
    let dir = scratch("interop-builtins");
    let mut checked = 0;
    for export in rows().filter(|r| r["export"].is_string()) {
        let name = export["export"].as_str().unwrap();
        let bytes = convert(name, ModelFormat::Hf, &RankFileOptions::default()).unwrap();
        assert_eq!(
            crate::identity::sha256_hex(&bytes),
            export["sha256"].as_str().unwrap(),
            "{name}: the export is not the file the goldens were made with"
        );
        let path = dir.join(format!("{name}.tokenizer.json"));
        fs::write(&path, &bytes).unwrap();
        let loaded = format::open(path.to_str().unwrap(), &RankFileOptions::default()).unwrap();
        assert_eq!(loaded.format, ModelFormat::Hf);
        let imported = bpe(loaded.model);
        let builtin = crate::model::builtin(name).unwrap();
        assert_eq!(
            imported.split.as_ref().unwrap().pattern,
            builtin.split.as_ref().unwrap().pattern
        );
        for row in rows().filter(|r| r["model"] == name) {
            let text = text_of(&row);
            let want = ids_of(&row);
            assert_eq!(
                encode(&imported, &AllowedSpecial::None, &text),
                want,
                "{name}: {row}"
            );
            assert_eq!(
                encode(&builtin, &AllowedSpecial::None, &text),
                want,
                "{name}: {row}"
            );
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} built-in goldens");
    let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    for name in ["o200k_base", "r50k_base"] {
        let ranks = convert(name, ModelFormat::Tiktoken, &RankFileOptions::default()).unwrap();
        let original = fs::read(assets.join(format!("{name}.tiktoken"))).unwrap();
        assert!(ranks == original, "{name}: the rank file is not tiktoken's");
    }
}

/// A merge whose result the vocab gives another id (merges out of id order), a vocab
/// string that is not byte-level, two strings for one id, and `ignore_merges` where a
/// token does not merge to itself are refused.
#[test]
fn merges_out_of_order_and_non_byte_strings_are_refused() {
    let dir = scratch("interop-order");
    // (98,99), (97,98), (257,99): "abc" is token 258, but its merges give [97, 256].
    let hand = "{\"kind\":\"bpe\",\"version\":1,\"split\":\"none\",\"pattern\":null}\n\
                {\"id\":256,\"pair\":[98,99]}\n{\"id\":257,\"pair\":[97,98]}\n{\"id\":258,\"pair\":[257,99]}\n";
    write(&dir, "hand.json", hand);
    let spec = dir.join("hand.json");
    let json = convert(
        spec.to_str().unwrap(),
        ModelFormat::Hf,
        &RankFileOptions::default(),
    )
    .unwrap();
    let json = String::from_utf8(json).unwrap();
    let path = write(
        &dir,
        "hand.tokenizer.json",
        json.replacen("\"ignore_merges\": false", "\"ignore_merges\": true", 1),
    );
    let err = format::open(path.to_str().unwrap(), &RankFileOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("ignore_merges is not supported: token 258 (\"abc\") does not merge to itself (the merges give [97, 256])"),
        "{err}"
    );
    let path = write(
        &dir,
        "hand2.tokenizer.json",
        json.replacen("\"ab\": 257", "\"ab\": 1", 1),
    );
    let err = format::open(path.to_str().unwrap(), &RankFileOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("model.vocab gives id 1 to both"),
        "{err}"
    );
    let base = fs::read_to_string(fixture("none.tokenizer.json")).unwrap();
    let start = base.find("\"merges\": [\n      ").unwrap() + "\"merges\": [\n      ".len();
    let first_end = start + base[start..].find(",\n").unwrap();
    let second_end = first_end + 8 + base[first_end + 8..].find(",\n").unwrap();
    let (first, second) = (&base[start..first_end], &base[first_end + 8..second_end]);
    let swapped = format!(
        "{}{second},\n      {first}{}",
        &base[..start],
        &base[second_end..]
    );
    let path = write(&dir, "swapped.json", &swapped);
    let err = format::open(path.to_str().unwrap(), &RankFileOptions::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("the suite numbers merge r as id 256 + r"),
        "{err}"
    );
    let bad = base.replacen("\"Ā\": 0", "\"Ā \": 0", 1);
    let path = write(&dir, "space.json", &bad);
    let err = format::open(path.to_str().unwrap(), &RankFileOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("vocab token \"Ā \" at id 0"),
        "{err}"
    );
}

/// Every prefix of a tokenizer.json and of a minbpe file (a file cut short) is exit 1
/// with the file and a line, never a panic; the JSON ones say the text ends early.
#[test]
fn truncated_files_fail_with_a_location() {
    let dir = scratch("interop-cut");
    let json = fs::read(fixture("gpt2-specials.tokenizer.json")).unwrap();
    let mut cuts: Vec<usize> = (0..json.len()).step_by(97).collect();
    cuts.extend([1, 2, 10, json.len() - 2, json.len() - 3]);
    for cut in cuts {
        let path = dir.join("cut.json");
        fs::write(&path, &json[..cut]).unwrap();
        let err = format::open(path.to_str().unwrap(), &RankFileOptions::default());
        let Err(err) = err else {
            panic!("cut at {cut} loads")
        };
        let text = err.to_string();
        assert!(
            text.starts_with(path.to_str().unwrap()),
            "cut at {cut}: {text}"
        );
        // Once the first key is whole, the file is known as a tokenizer.json.
        if cut >= 30 {
            assert!(
                text.contains("the JSON text ends inside") && text.contains(".json:"),
                "cut at {cut}: {text}"
            );
        }
    }
    let model = fs::read_to_string(fixture("gpt2-specials.model")).unwrap();
    for cut in 0..model.len().min(400) {
        let path = dir.join("cut.model");
        fs::write(&path, &model[..cut]).unwrap();
        // Short prefixes are valid smaller models (cut after a whole merge line) or
        // errors; none panics.
        if let Err(err) = format::open(path.to_str().unwrap(), &RankFileOptions::default()) {
            assert!(err.to_string().starts_with(path.to_str().unwrap()), "{err}");
        }
    }
}
