//! BPE started from units (`crate::model::units`: two-byte tokens and three-byte
//! characters, whole where their neighbours' bytes allow) against BPE from bytes: the
//! seed's `encode` and tiktoken's `byte_pair_merge` run naively, on random merge lists
//! and random rank tables (ranks in any order) over letters of several scripts, and the
//! built-in vocabularies on the fixtures' corpus and random multilingual text.

use ahash::AHashMap;

use super::corpus::corpus;
use super::encode_props::{
    model_from_merges, naive_encode, naive_record, naive_tiktoken, rank_file_of_merges,
};
use super::Rng;
use crate::encode::{AllowedSpecial, Encoder};
use crate::format::tiktoken;
use crate::model::{ModelSource, BUILTINS};
use crate::pretokenize::{self, SplitSpec};

/// Letters of several scripts: two-, three- and four-byte UTF-8 beside ASCII, with
/// spaces so that split models cut them into words.
const SCRIPTS: &[&str] = &[
    "аб вг",
    "日本 語本",
    "αβγ δ",
    "ab é üa",
    "한국 어",
    "ا بت",
    "😀a b",
    "ーカ ナ",
    "ж日 aé",
];

fn split_spec(name: &str) -> SplitSpec {
    SplitSpec {
        name: name.into(),
        pattern: pretokenize::preset_pattern(name).expect("preset").into(),
    }
}

/// Random text of `letters`: mostly whole characters, with runs of one, a cut
/// character's bytes now and then and the odd arbitrary byte (invalid UTF-8).
fn random_chars(rng: &mut Rng, letters: &[char], max_len: usize) -> Vec<u8> {
    let len = rng.below(max_len + 1);
    let mut out = Vec::with_capacity(len + 4);
    let mut buf = [0u8; 4];
    while out.len() < len {
        let c = letters[rng.below(letters.len())];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        match rng.below(12) {
            0 => {
                for _ in 0..rng.below(8) {
                    out.extend_from_slice(bytes);
                }
            }
            1 => out.extend_from_slice(&bytes[..1 + rng.below(bytes.len())]),
            2 => out.push(rng.below(256) as u8),
            _ => out.extend_from_slice(bytes),
        }
    }
    out.truncate(len);
    out
}

/// Random merges over the bytes of `letters` that also assemble its characters
/// (two bytes at once, three left or right first, four as two halves), interleaved at
/// random with merges of any two ids: a merge list in the order a model file has it.
fn merges_with_chars(rng: &mut Rng, letters: &str, count: usize) -> Vec<(u32, u32)> {
    let mut bytes_of: Vec<Vec<u8>> = (0..256u32).map(|b| vec![b as u8]).collect();
    let mut id_of: AHashMap<Vec<u8>, u32> = AHashMap::new();
    let mut ids: Vec<u32> = Vec::new();
    for b in letters.bytes() {
        if id_of.insert(vec![b], u32::from(b)).is_none() {
            ids.push(u32::from(b));
        }
    }
    // Each character's merges as (left bytes, right bytes), in the order they must come.
    let mut plans: Vec<Vec<(Vec<u8>, Vec<u8>)>> = Vec::new();
    for c in letters.chars().filter(|c| c.len_utf8() > 1) {
        let mut buf = [0u8; 4];
        let b = c.encode_utf8(&mut buf).as_bytes().to_vec();
        let one = |i: usize| b[i..i + 1].to_vec();
        plans.push(match b.len() {
            2 => vec![(one(0), one(1))],
            3 if rng.below(2) == 0 => vec![(one(0), one(1)), (b[..2].to_vec(), one(2))],
            3 => vec![(one(1), one(2)), (one(0), b[1..].to_vec())],
            _ => vec![
                (one(0), one(1)),
                (one(2), one(3)),
                (b[..2].to_vec(), b[2..].to_vec()),
            ],
        });
    }
    let mut merges: Vec<(u32, u32)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut tries = 0;
    while merges.len() < count && tries < count * 20 {
        tries += 1;
        let planned = plans.iter().position(|p| {
            p.first()
                .is_some_and(|(l, r)| id_of.contains_key(l) && id_of.contains_key(r))
        });
        let pair = match planned {
            Some(i) if rng.below(2) == 0 => {
                let (l, r) = plans[i].remove(0);
                (id_of[&l], id_of[&r])
            }
            _ => {
                let pick = |rng: &mut Rng| {
                    if rng.below(3) == 0 {
                        ids[ids.len() - 1 - rng.below(ids.len().min(4))]
                    } else {
                        ids[rng.below(ids.len())]
                    }
                };
                (pick(rng), pick(rng))
            }
        };
        if seen.insert(pair) {
            let id = 256 + merges.len() as u32;
            let mut joined = bytes_of[pair.0 as usize].clone();
            joined.extend_from_slice(&bytes_of[pair.1 as usize]);
            id_of.entry(joined.clone()).or_insert(id);
            bytes_of.push(joined);
            merges.push(pair);
            ids.push(id);
        }
    }
    merges
}

/// Encodes `text` with `enc` and asserts the ids equal `naive`.
fn assert_encodes(enc: &Encoder, text: &[u8], naive: Vec<u32>, what: &str) {
    let mut fast = Vec::new();
    enc.encode(text, &mut fast);
    assert_eq!(fast, naive, "{what} {:?}", String::from_utf8_lossy(text));
}

#[test]
fn units_equal_naive_on_random_merge_lists() {
    let mut rng = Rng::new(0x0417_5EED);
    let mut units_used = 0;
    for case in 0..400 {
        let letters = SCRIPTS[case % SCRIPTS.len()];
        let chars: Vec<char> = letters.chars().collect();
        let count = 5 + rng.below(60);
        let merges = merges_with_chars(&mut rng, letters, count);
        let split = match case % 3 {
            0 => None,
            1 => Some(split_spec("o200k")),
            _ => Some(split_spec("gpt4")),
        };
        let model = model_from_merges(&merges, split, vec![]);
        let tables = model.units();
        units_used += usize::from(!tables.pairs.is_empty() || !tables.chars.is_empty());
        let enc = Encoder::new(&model, &AllowedSpecial::None)
            .unwrap()
            .with_units_after(0);
        for _ in 0..8 {
            let max = if rng.below(8) == 0 { 300 } else { 40 };
            let text = random_chars(&mut rng, &chars, max);
            let naive = naive_record(&model, &[], &text, &|c| naive_encode(&model, c));
            assert_encodes(&enc, &text, naive, &format!("case {case}"));
        }
    }
    assert!(units_used > 300, "only {units_used} models had units");
}

#[test]
fn units_equal_naive_tiktoken_on_random_rank_tables() {
    let mut rng = Rng::new(0x0417_7AB1);
    for case in 0..300 {
        let letters = SCRIPTS[case % SCRIPTS.len()];
        let chars: Vec<char> = letters.chars().collect();
        let count = 10 + rng.below(70);
        let merges = merges_with_chars(&mut rng, letters, count);
        let (file, ranks) = rank_file_of_merges(&mut rng, &merges);
        let split = (case % 2 == 1).then(|| split_spec("cl100k"));
        let source = ModelSource::File {
            name: "test.tiktoken".into(),
            sha256: String::new(),
        };
        let model = tiktoken::load_rank_file(&file, source, split, vec![]).unwrap();
        let enc = Encoder::new(&model, &AllowedSpecial::None)
            .unwrap()
            .with_units_after(0);
        for _ in 0..8 {
            let max = if rng.below(8) == 0 { 300 } else { 40 };
            let text = random_chars(&mut rng, &chars, max);
            let naive = naive_record(&model, &[], &text, &|c| naive_tiktoken(&ranks, c));
            assert_encodes(&enc, &text, naive, &format!("case {case}"));
        }
    }
}

/// The built-ins on the fixtures' corpus (English, a dozen scripts, invalid bytes) and
/// on random text of many scripts' letters: the same ids from units as from bytes; and
/// their compiled-in units are the ones found from their pairs at run time.
#[test]
fn units_equal_bytes_on_builtins() {
    let text = corpus(400_000, 0x0417);
    let letters: Vec<char> =
        "аб вгдеж日本語東京都のはです αβγδ éüàç 한국어 ابت ーカナ 😀€–…«» aeiou tn"
            .chars()
            .collect();
    let mut rng = Rng::new(0x0417_B17E);
    let mut mixed = Vec::new();
    for _ in 0..2000 {
        mixed.extend(random_chars(&mut rng, &letters, 60));
        mixed.push(b' ');
    }
    for name in BUILTINS {
        let model = crate::model::builtin(name).unwrap();
        let compiled = crate::model::builtin_units(name).expect("compiled in");
        assert_eq!(compiled, model.units(), "{name}");
        assert!(compiled.pairs.len() > 1000, "{name}");
        let mut none = model.clone();
        none.split = None;
        for m in [&model, &none] {
            let units = Encoder::new(m, &AllowedSpecial::None)
                .unwrap()
                .with_units_after(0);
            let bytes = Encoder::new(m, &AllowedSpecial::None)
                .unwrap()
                .with_units_after(usize::MAX);
            for input in [&text, &mixed] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for line in input.split(|&c| c == b'\n') {
                    units.encode(line, &mut a);
                    bytes.encode(line, &mut b);
                }
                assert!(
                    a == b,
                    "{name} split {:?}",
                    m.split.as_ref().map(|s| &s.name)
                );
            }
        }
    }
}
