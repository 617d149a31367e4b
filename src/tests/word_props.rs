//! Tests of the word-based tokenizer (src/word/): the seed's example, Python's
//! whitespace, vocabulary selection, the model file, and the fast (parallel, streaming)
//! trainer and encoder against a deliberately naive reference on seeded random inputs.

use std::collections::HashMap;

use crate::model::ModelSource;
use crate::word::WordModel;
use crate::word::{self, WordCounter, WordEncoder};
use crate::ErrorKind;
use serde_json::{Map, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/word");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).expect("fixture")
}

/// Python's whitespace code points, from the fixture Python produced.
fn python_whitespace() -> Vec<char> {
    String::from_utf8(fixture("python-whitespace.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let hex = l.split(' ').next().unwrap();
            char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap()
        })
        .collect()
}

fn words_of(text: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    word::split_words(text, &mut |w| out.push(w.to_vec()));
    out
}

fn source() -> ModelSource {
    ModelSource::File {
        name: "test.json".into(),
        sha256: String::new(),
    }
}

/// Writes a model and reads it back through `parse_model`.
fn round_trip(model: &WordModel) -> WordModel {
    let mut file = Vec::new();
    crate::format::word_file::write_model(&mut file, model).unwrap();
    parse_file(&file).unwrap()
}

fn parse_file(file: &[u8]) -> crate::Result<WordModel> {
    let mut lines = file.split(|&b| b == b'\n').zip(1u64..).map(|(l, n)| (n, l));
    let (_, first) = lines.next().unwrap();
    let header: Map<String, Value> = serde_json::from_slice(first).unwrap();
    crate::format::word_file::parse_model(&header, &mut lines, 0, source(), "test.json")
}

fn model_words(model: &WordModel) -> Vec<Vec<u8>> {
    (0..model.words().len() as u32)
        .map(|id| word::word_bytes(model, id).unwrap().into_owned())
        .collect()
}

// ---------------------------------------------------------------------------------------
// The seed.

#[test]
fn seed_vocabulary_ids_and_unknown_words() {
    let model = word::train(b"Life is short eat dessert first", None, 1).unwrap();
    assert_eq!(
        model.words().keys(),
        ["Life", "dessert", "eat", "first", "is", "short"]
    );
    assert_eq!(model.unk_id, 6);
    assert_eq!(model.unk_text, "[UNK]");
    for (id, w) in model.words().iter().enumerate() {
        assert_eq!(model.ids.get(w), Some(id as u32));
    }
    let mut ids = Vec::new();
    assert_eq!(
        word::encode(&model, b"Life is short eat dessert first", &mut ids),
        0
    );
    assert_eq!(ids, [0, 4, 5, 2, 1, 3]);
    ids.clear();
    assert_eq!(word::encode(&model, b"Life is sweet", &mut ids), 1);
    assert_eq!(ids, [0, 4, 6]);
    let encoder = WordEncoder::new(&model);
    ids.clear();
    assert_eq!(
        encoder.encode(b"Life is short eat dessert first", &mut ids),
        0
    );
    assert_eq!(ids, [0, 4, 5, 2, 1, 3]);
    ids.clear();
    assert_eq!(encoder.encode(b"Life is sweet", &mut ids), 1);
    assert_eq!(ids, [0, 4, 6]);
    let mut text = Vec::new();
    word::decode(&model, &[0, 4, 5, 6], &mut text).unwrap();
    assert_eq!(text, b"Life is short [UNK]");
}

#[test]
fn seed_model_file_is_the_golden_one() {
    // The seed's sentence after `tr -d ,`, with the newline `echo` adds.
    let model = word::train(b"Life is short eat dessert first\n", None, 2).unwrap();
    let mut file = Vec::new();
    crate::format::word_file::write_model(&mut file, &model).unwrap();
    assert_eq!(
        String::from_utf8(file).unwrap(),
        String::from_utf8(fixture("seed-words.json")).unwrap()
    );
}

#[test]
fn decode_rejects_an_id_outside_the_vocabulary_and_leaves_output_alone() {
    let model = word::train(b"Life is short", None, 1).unwrap();
    let mut out = b"kept".to_vec();
    assert_eq!(word::decode(&model, &[0, 1, 4, 2], &mut out), Err(4));
    assert_eq!(out, b"kept");
    assert_eq!(word::decode(&model, &[u32::MAX], &mut out), Err(u32::MAX));
    out.clear();
    word::decode(&model, &[], &mut out).unwrap();
    assert!(out.is_empty());
}

// ---------------------------------------------------------------------------------------
// Whitespace.

#[test]
fn whitespace_is_pythons_over_every_code_point() {
    let expected = python_whitespace();
    assert_eq!(expected.len(), 29);
    for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
        let is_ws = expected.contains(&c);
        assert_eq!(word::is_python_whitespace(c), is_ws, "U+{:04X}", c as u32);
        // The byte-level splitter agrees with the character predicate.
        let text = format!("a{c}b");
        let n = words_of(text.as_bytes()).len();
        assert_eq!(
            n,
            if is_ws { 2 } else { 1 },
            "U+{:04X} between words",
            c as u32
        );
        let alone = c.to_string();
        let n = words_of(alone.as_bytes()).len();
        assert_eq!(n, if is_ws { 0 } else { 1 }, "U+{:04X} alone", c as u32);
    }
}

#[test]
fn whitespace_edge_cases() {
    let cases: &[(&[u8], &[&[u8]])] = &[
        (b"", &[]),
        (b"\n\n\n", &[]),
        (b"  \t ", &[]),
        (b"a", &[b"a"]),
        (b"\ta\tb\t", &[b"a", b"b"]),
        (b"a\r\nb\r\n", &[b"a", b"b"]),
        (b"a\n\nb", &[b"a", b"b"]),
        (b"a\x0b\x0cb", &[b"a", b"b"]),
        ("a\u{a0}b".as_bytes(), &[b"a", b"b"]),
        ("a\u{3000}b\u{3000}".as_bytes(), &[b"a", b"b"]),
        ("\u{85}a\u{85}".as_bytes(), &[b"a"]),
        (b"a\x1cb\x1dc\x1ed\x1fe", &[b"a", b"b", b"c", b"d", b"e"]),
        (
            "a\u{2028}b\u{2029}c\u{202f}d\u{205f}e\u{1680}f".as_bytes(),
            &[b"a", b"b", b"c", b"d", b"e", b"f"],
        ),
        // Not whitespace in Python: zero-width space, BOM, Mongolian vowel separator.
        ("a\u{200b}b".as_bytes(), &["a\u{200b}b".as_bytes()]),
        ("\u{feff}a".as_bytes(), &["\u{feff}a".as_bytes()]),
        ("a\u{180e}b".as_bytes(), &["a\u{180e}b".as_bytes()]),
        // Invalid UTF-8 is never whitespace and stays in its word.
        (b"a\xff b", &[b"a\xff", b"b"]),
        (b"\xc2 \xa0", &[b"\xc2", b"\xa0"]),
        (b"a\xe3\x80 b", &[b"a\xe3\x80", b"b"]),
        (b"a\xe3\xe3\x80\x80b", &[b"a\xe3", b"b"]),
        (b"a\xc2\xc2\xa0b", &[b"a\xc2", b"b"]),
        (b"\x80\x80", &[b"\x80\x80"]),
        // An overlong or surrogate encoding of a space is not a space.
        (b"a\xc0\xa0b", &[b"a\xc0\xa0b"]),
        (b"a\xed\xa0\x80b", &[b"a\xed\xa0\x80b"]),
    ];
    for (text, expected) in cases {
        let got = words_of(text);
        let expected: Vec<Vec<u8>> = expected.iter().map(|w| w.to_vec()).collect();
        assert_eq!(
            got,
            expected,
            "splitting {:?}",
            String::from_utf8_lossy(text)
        );
        assert_eq!(naive_split(text), expected, "naive splitting {text:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Vocabulary selection and the model file.

#[test]
fn top_n_keeps_the_most_frequent_words_ties_to_the_first_seen() {
    // c:3, then a tie at 2 between b (seen first), d and a; e once.
    let text = b"c b d c a b d e a c";
    let model = word::train(text, Some(3), 1).unwrap();
    assert_eq!(model.words().keys(), ["b", "c"]);
    assert_eq!(model.counts, [2, 3]);
    assert_eq!(model.unk_id, 2);
    let model = word::train(text, Some(4), 1).unwrap();
    assert_eq!(model.words().keys(), ["b", "c", "d"]);
    let model = word::train(text, Some(1), 1).unwrap();
    assert!(model.words().is_empty());
    assert_eq!(model.unk_id, 0);
    let mut ids = Vec::new();
    assert_eq!(word::encode(&model, b"x y", &mut ids), 2);
    assert_eq!(ids, [0, 0]);
    // More room than words: every word, sorted.
    let model = word::train(text, Some(100), 1).unwrap();
    assert_eq!(model.words().keys(), ["a", "b", "c", "d", "e"]);
    assert_eq!(model.counts, [2, 2, 3, 2, 1]);
    let err = word::train(text, Some(0), 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Usage);
}

#[test]
fn python_goldens_for_a_text_full_of_unicode_spaces() {
    let text = fixture("mixed.txt");
    for (vocab, golden) in [
        (None, "mixed-all.json"),
        (Some(6), "mixed-vocab6.json"),
        (Some(7), "mixed-vocab7.json"),
    ] {
        for threads in [1, 2] {
            let counter = WordCounter::new(threads).with_parallel_threshold(64);
            let mut counter = counter;
            for block in text.chunks(37) {
                counter.feed(block);
            }
            let model = counter.finish(vocab).unwrap();
            let mut file = Vec::new();
            crate::format::word_file::write_model(&mut file, &model).unwrap();
            assert_eq!(
                String::from_utf8(file).unwrap(),
                String::from_utf8(fixture(golden)).unwrap(),
                "{golden} with {threads} threads"
            );
        }
    }
    // Encoding line by line gives Python's ids.
    let model = parse_file(&fixture("mixed-vocab7.json")).unwrap();
    let mut got = String::new();
    for record in text.split(|&b| b == b'\n') {
        let mut ids = Vec::new();
        word::encode(&model, record, &mut ids);
        got.push_str(&serde_json::to_string(&ids).unwrap());
        got.push('\n');
    }
    assert_eq!(got, String::from_utf8(fixture("mixed-vocab7.ids")).unwrap());
}

#[test]
fn model_files_round_trip_including_invalid_utf8_words() {
    let text = b"caf\xc3\xa9 \xff\xfe ab \"q\\ \xff\xfe \xe3\x80 [UNK] \x01\x7f ab";
    let model = word::train(text, None, 1).unwrap();
    let mut file = Vec::new();
    crate::format::word_file::write_model(&mut file, &model).unwrap();
    let file_text = String::from_utf8(file.clone()).unwrap();
    assert!(
        file_text.contains(r#"{"id":5,"hex":"e380","count":1}"#),
        "{file_text}"
    );
    assert!(
        file_text.contains(r#"{"id":6,"hex":"fffe","count":2}"#),
        "{file_text}"
    );
    assert!(file_text.contains(r#""word":"\"q\\""#), "{file_text}");
    let back = round_trip(&model);
    assert_eq!(back.words(), model.words());
    assert_eq!(back.counts, model.counts);
    assert_eq!(back.unk_id, model.unk_id);
    assert_eq!(back.source, source());
    assert_eq!(model_words(&back), words_of_sorted_distinct(text));
    // Encoding and decoding invalid words works through the model.
    let mut ids = Vec::new();
    assert_eq!(word::encode(&back, b"\xff\xfe \xe3\x80 zz", &mut ids), 1);
    assert_eq!(ids, [6, 5, 7]);
    let mut out = Vec::new();
    word::decode(&back, &ids, &mut out).unwrap();
    assert_eq!(out, b"\xff\xfe \xe3\x80 [UNK]");
    // Every prefix of the file (`head -n K`) is a valid smaller model.
    let lines: Vec<&[u8]> = file.split_inclusive(|&b| b == b'\n').collect();
    for k in 1..=lines.len() {
        let prefix = lines[..k].concat();
        let m = parse_file(&prefix).unwrap();
        assert_eq!(m.unk_id as usize, k - 1);
        assert_eq!(m.words().keys()[..], model.words().keys()[..k - 1]);
    }
}

fn words_of_sorted_distinct(text: &[u8]) -> Vec<Vec<u8>> {
    let mut w = words_of(text);
    w.sort();
    w.dedup();
    w
}

#[test]
fn hand_written_models_parse_leniently_where_safe() {
    // Count optional, blank lines skipped, hex in upper case, a custom unknown token,
    // hex that happens to be valid UTF-8 is an ordinary word.
    let file = b"{\"version\":1,\"kind\":\"word\",\"unk\":\"<unk>\"}\n{\"id\":0,\"word\":\"b\"}\n\n{\"id\":1,\"hex\":\"FF\"}\r\n{\"count\":4,\"hex\":\"61\",\"id\":2}\n";
    let model = parse_file(file).unwrap();
    assert_eq!(
        model_words(&model),
        [b"b".to_vec(), b"\xff".to_vec(), b"a".to_vec()]
    );
    assert_eq!(model.counts, [0, 0, 4]);
    assert_eq!(model.unk_text, "<unk>");
    let mut out = Vec::new();
    word::decode(&model, &[2, 3, 1], &mut out).unwrap();
    assert_eq!(out, b"a <unk> \xff");
}

#[test]
fn malformed_models_are_data_errors_with_line_numbers() {
    let header = "{\"kind\":\"word\",\"version\":1,\"unk\":\"[UNK]\"}\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            "{\"id\":0,\"word\":\"a\"}\n{\"id\":1,\"word\":\"b\"}\n{\"id\":2,\"word\":\"a\"}\n",
            "test.json:4",
            "duplicated word \"a\" (also id 0)",
        ),
        (
            "{\"id\":0,\"hex\":\"ff\"}\n{\"id\":1,\"hex\":\"FF\"}\n",
            "test.json:3",
            "duplicated word hex \"ff\" (also id 0)",
        ),
        (
            "{\"id\":1,\"word\":\"a\"}\n",
            "test.json:2",
            "expected id 0, found 1",
        ),
        (
            "{\"id\":0,\"word\":\"a\",\"text\":\"a\"}\n",
            "test.json:2",
            "unknown field \"text\"",
        ),
        (
            "{\"id\":0,\"word\":\"a b\"}\n",
            "test.json:2",
            "contains whitespace",
        ),
        (
            "{\"id\":0,\"word\":\"a\u{3000}\"}\n",
            "test.json:2",
            "contains whitespace",
        ),
        ("{\"id\":0,\"word\":\"\"}\n", "test.json:2", "empty word"),
        ("{\"id\":0}\n", "test.json:2", "no \"word\""),
        ("{\"word\":\"a\"}\n", "test.json:2", "no \"id\""),
        (
            "{\"id\":0,\"word\":\"a\",\"hex\":\"61\"}\n",
            "test.json:2",
            "both",
        ),
        ("{\"id\":0,\"hex\":\"6\"}\n", "test.json:2", "hex digits"),
        ("{\"id\":0,\"hex\":\"zz\"}\n", "test.json:2", "hex digits"),
        (
            "{\"id\":-1,\"word\":\"a\"}\n",
            "test.json:2",
            "non-negative integer",
        ),
        (
            "{\"id\":0,\"word\":\"a\",\"count\":1.5}\n",
            "test.json:2",
            "non-negative integer",
        ),
        ("{\"id\":0,\"word\":5}\n", "test.json:2", "must be a string"),
        ("[0,\"a\"]\n", "test.json:2", "json object"),
        ("{\"id\":0,\"word\":\"a\"\n", "test.json:2", "invalid json"),
    ];
    for (body, location, message) in cases {
        let file = format!("{header}{body}");
        let err = parse_file(file.as_bytes()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Data, "{body}");
        assert_eq!(err.location(), Some(*location), "{body}: {err}");
        assert!(err.message().contains(message), "{body}: {err}");
    }
    for header in [
        "{\"kind\":\"word\",\"version\":2}",
        "{\"kind\":\"word\"}",
        "{\"kind\":\"bpe\",\"version\":1}",
        "{\"kind\":\"word\",\"version\":1,\"vocab\":3}",
        "{\"kind\":\"word\",\"version\":1,\"unk\":\"\"}",
        "{\"kind\":\"word\",\"version\":1,\"unk\":7}",
    ] {
        let file = format!("{header}\n{{\"id\":0,\"word\":\"a\"}}\n");
        let err = parse_file(file.as_bytes()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Data, "{header}");
        assert_eq!(err.location(), Some("test.json:1"), "{header}: {err}");
    }
}

// ---------------------------------------------------------------------------------------
// Fast against naive, on seeded random inputs.

use super::Rng;

/// Pieces random texts are made of: tiny word alphabets (many ties, runs like `aaaa`),
/// every kind of whitespace, and bytes that are not valid UTF-8 (truncated whitespace
/// characters among them, so block and shard boundaries fall inside them).
const PIECES: &[&[u8]] = &[
    b"a",
    b"a",
    b"a",
    b"b",
    b"b",
    b"ab",
    b"c",
    b" ",
    b" ",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b"\x0b",
    b"\x1c",
    b"\x1f",
    "\u{85}".as_bytes(),
    "\u{a0}".as_bytes(),
    "\u{1680}".as_bytes(),
    "\u{2000}".as_bytes(),
    "\u{200a}".as_bytes(),
    "\u{2028}".as_bytes(),
    "\u{202f}".as_bytes(),
    "\u{205f}".as_bytes(),
    "\u{3000}".as_bytes(),
    "\u{200b}".as_bytes(),
    "\u{e9}".as_bytes(),
    "\u{3001}".as_bytes(),
    b"\xff",
    b"\xe3\x80",
    b"\xe3",
    b"\x80",
    b"\xc2",
    b"\xa0",
    b"\xe2\x80",
    b"\xe1\x9a",
    // Words around 23 bytes, the longest that hash tables keep inline.
    b"aaaaaaaaaaaaaaaaaaaaaa",
    b"aaaaaaaaaaaaaaaaaaaaaaa",
    b"aaaaaaaaaaaaaaaaaaaaaaaa",
];

fn random_text(rng: &mut Rng, max_pieces: usize) -> Vec<u8> {
    let n = rng.below(max_pieces + 1);
    let mut text = Vec::new();
    // Some texts use only a few pieces, so words repeat a lot.
    let palette: Vec<&[u8]> = if rng.below(2) == 0 {
        (0..4)
            .map(|_| PIECES[rng.below(PIECES.len())])
            .chain([&b" "[..]])
            .collect()
    } else {
        PIECES.to_vec()
    };
    for _ in 0..n {
        text.extend_from_slice(palette[rng.below(palette.len())]);
    }
    text
}

/// Python's `str.split()` on the decoded text: invalid UTF-8 units (as `utf8_chunks`
/// gives them) are never whitespace. Whitespace comes from the Python fixture.
fn naive_split(text: &[u8]) -> Vec<Vec<u8>> {
    let spaces = python_whitespace();
    let mut words = Vec::new();
    let mut current: Vec<u8> = Vec::new();
    for chunk in text.utf8_chunks() {
        for c in chunk.valid().chars() {
            if spaces.contains(&c) {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            } else {
                let mut buf = [0; 4];
                current.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        current.extend_from_slice(chunk.invalid());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// The seed's recipe, slowly: count in first-appearance order with a linear search,
/// keep the `n - 1` most frequent with a stable sort (ties stay in first-seen order),
/// then sort the kept words.
fn naive_train(text: &[u8], vocab_size: Option<usize>) -> (Vec<Vec<u8>>, Vec<u64>) {
    let mut seen: Vec<(Vec<u8>, u64)> = Vec::new();
    for w in naive_split(text) {
        match seen.iter_mut().find(|(s, _)| *s == w) {
            Some((_, c)) => *c += 1,
            None => seen.push((w, 1)),
        }
    }
    if let Some(n) = vocab_size {
        seen.sort_by_key(|s| std::cmp::Reverse(s.1));
        seen.truncate(n - 1);
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    seen.into_iter().unzip()
}

fn check_model(model: &WordModel, expected: &(Vec<Vec<u8>>, Vec<u64>), what: &str) {
    assert_eq!(model_words(model), expected.0, "{what}");
    assert_eq!(model.counts, expected.1, "{what}");
    assert_eq!(model.unk_id as usize, expected.0.len(), "{what}");
    assert_eq!(model.ids.len(), expected.0.len(), "{what}");
}

#[test]
fn split_matches_naive_on_random_texts() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..3000 {
        let text = random_text(&mut rng, 40);
        assert_eq!(words_of(&text), naive_split(&text), "{text:?}");
    }
}

#[test]
fn trainers_match_naive_on_random_texts() {
    let mut rng = Rng(0x5eed_0002);
    for case in 0..600 {
        let text = random_text(&mut rng, 120);
        let vocab = match rng.below(3) {
            0 => None,
            _ => Some(1 + rng.below(8)),
        };
        let expected = naive_train(&text, vocab);
        let what = format!("case {case}: {vocab:?} {text:?}");
        check_model(&word::train(&text, vocab, 1).unwrap(), &expected, &what);
        // Sharded on 2 or 3 threads, and streamed in random blocks (down to 1 byte, so
        // blocks end inside words and inside multi-byte characters).
        for threads in [2, 3] {
            let mut counter = WordCounter::new(threads).with_parallel_threshold(1 + rng.below(16));
            let mut rest = &text[..];
            while !rest.is_empty() {
                let n = 1 + rng.below(rest.len().min(24));
                counter.feed(&rest[..n]);
                rest = &rest[n..];
                if rng.below(8) == 0 {
                    counter.feed(b"");
                }
            }
            assert_eq!(counter.bytes(), text.len() as u64);
            check_model(&counter.finish(vocab).unwrap(), &expected, &what);
        }
        // The model file carries all of it.
        check_model(
            &round_trip(&word::train(&text, vocab, 2).unwrap()),
            &expected,
            &what,
        );
    }
}

#[test]
fn large_input_on_two_threads_matches_one_thread() {
    // Above the default threshold, so the real sharding path runs.
    let mut rng = Rng(0x5eed_0003);
    let mut text = Vec::new();
    while text.len() < 3 << 20 {
        text.extend_from_slice(PIECES[rng.below(PIECES.len())]);
        if rng.below(5) == 0 {
            text.extend_from_slice(b"xyz"); // more distinct words
            let n = rng.below(40);
            text.extend_from_slice(n.to_string().as_bytes());
        }
    }
    for vocab in [None, Some(5), Some(50)] {
        let one = word::train(&text, vocab, 1).unwrap();
        let two = word::train(&text, vocab, 2).unwrap();
        assert_eq!(one.words(), two.words());
        assert_eq!(one.counts, two.counts);
        let mut streamed = WordCounter::new(2);
        for block in text.chunks((1 << 20) + 7) {
            streamed.feed(block);
        }
        let streamed = streamed.finish(vocab).unwrap();
        assert_eq!(one.words(), streamed.words());
        assert_eq!(one.counts, streamed.counts);
    }
    // And the counts agree with a plain hash-map count.
    let mut plain: HashMap<Vec<u8>, u64> = HashMap::new();
    word::split_words(&text, &mut |w| *plain.entry(w.to_vec()).or_default() += 1);
    let model = word::train(&text, None, 2).unwrap();
    assert_eq!(model.words().len(), plain.len());
    for (id, w) in model_words(&model).iter().enumerate() {
        assert_eq!(model.counts[id], plain[w]);
    }
}

#[test]
fn encode_and_decode_match_naive_on_random_texts() {
    let mut rng = Rng(0x5eed_0004);
    for _ in 0..500 {
        let train_text = random_text(&mut rng, 60);
        let vocab = if rng.below(2) == 0 {
            None
        } else {
            Some(1 + rng.below(6))
        };
        let model = word::train(&train_text, vocab, 1).unwrap();
        let words = model_words(&model);
        let record = random_text(&mut rng, 60);
        let mut ids = Vec::new();
        let unknown = word::encode(&model, &record, &mut ids);
        let mut fast = vec![7];
        let fast_unknown = WordEncoder::new(&model).encode(&record, &mut fast);
        assert_eq!(
            (&fast[1..], fast_unknown),
            (&ids[..], unknown),
            "{record:?}"
        );
        let split = naive_split(&record);
        let expected: Vec<u32> = split
            .iter()
            .map(|w| words.iter().position(|v| v == w).unwrap_or(words.len()) as u32)
            .collect();
        assert_eq!(ids, expected, "{record:?}");
        assert_eq!(
            unknown as usize,
            expected.iter().filter(|&&i| i == model.unk_id).count()
        );
        let mut out = Vec::new();
        word::decode(&model, &ids, &mut out).unwrap();
        let joined: Vec<Vec<u8>> = split
            .iter()
            .zip(&ids)
            .map(|(w, &id)| {
                if id == model.unk_id {
                    b"[UNK]".to_vec()
                } else {
                    w.clone()
                }
            })
            .collect();
        assert_eq!(out, joined.join(&b' '), "{record:?}");
    }
}

#[test]
fn words_differing_only_in_trailing_nuls_or_length_stay_apart() {
    let long23 = "b".repeat(23);
    let long24 = "b".repeat(24);
    let text = format!("a a\0 a\0\0 {long23} {long24} {long23}\0 a");
    let model = word::train(text.as_bytes(), None, 1).unwrap();
    assert_eq!(model.words().len(), 6);
    assert_eq!(model.counts, [2, 1, 1, 1, 1, 1]);
    let encoder = WordEncoder::new(&model);
    let mut ids = Vec::new();
    encoder.encode(text.as_bytes(), &mut ids);
    assert_eq!(ids, [0, 1, 2, 3, 5, 4, 0]);
    let mut out = Vec::new();
    word::decode(&model, &ids, &mut out).unwrap();
    assert_eq!(out, text.as_bytes());
}

#[test]
fn the_plain_line_fast_path_reads_what_the_json_parser_reads() {
    let mut rng = Rng(0x5eed_0005);
    for _ in 0..200 {
        let text = random_text(&mut rng, 80);
        let model = word::train(&text, None, 1).unwrap();
        let mut file = Vec::new();
        crate::format::word_file::write_model(&mut file, &model).unwrap();
        // The same lines re-serialized by serde_json (keys sorted, so not the fast form).
        let mut resorted = Vec::new();
        for line in file.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let value: Value = serde_json::from_slice(line).unwrap();
            resorted.extend_from_slice(serde_json::to_string(&value).unwrap().as_bytes());
            resorted.push(b'\n');
        }
        let fast = parse_file(&file).unwrap();
        let slow = parse_file(&resorted).unwrap();
        assert_eq!(fast.words(), slow.words());
        assert_eq!(fast.counts, slow.counts);
        assert_eq!(fast.words(), model.words());
    }
    let header = "{\"kind\":\"word\",\"version\":1}\n";
    for (line, ok) in [
        ("{\"id\":0,\"word\":\"a\"}", true),
        ("{\"id\":0,\"word\":\"a\",\"count\":3}\r", true),
        ("{\"id\": 0, \"word\": \"a\"}", true),
        ("{\"id\":0,\"word\":\"\\u0061\"}", true),
        ("{\"id\":00,\"word\":\"a\"}", false),
        ("{\"id\":0,\"word\":\"a\",\"count\":01}", false),
        ("{\"id\":0,\"word\":\"a\"}}", false),
        (
            "{\"id\":0,\"word\":\"a\",\"count\":99999999999999999999}",
            false,
        ),
        ("{\"id\":0,\"word\":\"a\tb\"}", false),
    ] {
        let result = parse_file(format!("{header}{line}\n").as_bytes());
        assert_eq!(result.is_ok(), ok, "{line}: {result:?}");
        if let Ok(model) = result {
            assert_eq!(model.words().keys(), ["a"]);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Large vocabularies: a small table of frequent words in front of one large table.

/// A random word for the large-table tests: lengths around the table's inline limits
/// (7, 8, 9, 23, 24, 25 bytes and longer), bytes from a tiny alphabet including NUL and
/// invalid UTF-8, so many words share long prefixes.
fn random_table_word(rng: &mut Rng) -> Vec<u8> {
    const LENGTHS: [usize; 12] = [1, 2, 4, 7, 8, 9, 15, 16, 23, 24, 25, 40];
    let len = if rng.below(2) == 0 {
        LENGTHS[rng.below(LENGTHS.len())]
    } else {
        1 + rng.below(30)
    };
    const ALPHABET: &[u8] = b"ab\0\xff";
    // A third start with one of two long prefixes (a slot holds 24 bytes), so words that
    // differ only past a slot's bytes, at equal lengths, meet in the table.
    const PREFIXES: [&[u8]; 2] = [
        b"abab\0\0ab\0\0abab\0\0ab\0\0aaaa",
        b"abab\0\0ab\0\0abab\0\0ab\0\0aaa\xff",
    ];
    let mut word = match rng.below(3) {
        0 => PREFIXES[rng.below(2)].to_vec(),
        _ => Vec::new(),
    };
    word.extend((0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())]));
    word
}

/// Distinct random words and random counts.
fn random_vocabulary(rng: &mut Rng, n: usize) -> (Vec<Vec<u8>>, Vec<u64>) {
    let mut seen = std::collections::HashSet::new();
    let mut words = Vec::new();
    while words.len() < n {
        let w = random_table_word(rng);
        if seen.insert(w.clone()) {
            words.push(w);
        }
    }
    let counts = (0..n).map(|_| rng.below(4) as u64).collect();
    (words, counts)
}

fn word_list(words: &[Vec<u8>]) -> word::WordList {
    let mut list = word::WordList::default();
    for w in words {
        list.push(w);
    }
    list
}

#[test]
fn large_table_lookups_match_a_plain_map() {
    let mut rng = Rng(0x5eed_0006);
    for round in 0..60 {
        let n = 1 + rng.below(if round < 50 { 300 } else { 5000 });
        let (words, _) = random_vocabulary(&mut rng, n);
        let naive: HashMap<&[u8], u32> = (words.iter().enumerate())
            .map(|(id, w)| (&w[..], id as u32))
            .collect();
        let ids = word::WordIds::build(word_list(&words)).unwrap();
        assert_eq!(ids.len(), n);
        for (id, w) in words.iter().enumerate() {
            assert_eq!(ids.get(w), Some(id as u32), "{w:?}");
        }
        for _ in 0..200 {
            let w = random_table_word(&mut rng);
            assert_eq!(ids.get(&w), naive.get(&w[..]).copied(), "{w:?}");
        }
    }
}

#[test]
fn large_table_reports_the_first_repeated_word() {
    let mut rng = Rng(0x5eed_0007);
    for _ in 0..200 {
        let n = 2 + rng.below(400);
        let (mut words, _) = random_vocabulary(&mut rng, n);
        // Repeat one or two earlier words at random later places.
        for _ in 0..1 + rng.below(2) {
            let from = rng.below(n - 1);
            let to = from + 1 + rng.below(n - 1 - from);
            words[to] = words[from].clone();
        }
        let mut first_seen: HashMap<&[u8], u32> = HashMap::new();
        let expected = (words.iter().enumerate()).find_map(|(id, w)| {
            let earlier = *first_seen.entry(&w[..]).or_insert(id as u32);
            (earlier != id as u32).then_some(word::Repeat {
                id: id as u32,
                earlier,
            })
        });
        let Err((repeat, back)) = word::WordIds::build(word_list(&words)) else {
            panic!("a repeated word was accepted");
        };
        assert_eq!(Some(repeat), expected);
        assert_eq!(back, word_list(&words));
    }
}

#[test]
fn batched_encoding_with_a_large_table_matches_plain_lookups() {
    let mut rng = Rng(0x5eed_0008);
    for _ in 0..40 {
        let n = 1 + rng.below(3000);
        let (words, counts) = random_vocabulary(&mut rng, n);
        let ids = word::WordIds::build(word_list(&words)).unwrap();
        let model = WordModel {
            source: source(),
            counts: counts.clone(),
            unk_id: n as u32,
            ids,
            unk_text: "[UNK]".to_string(),
        };
        let naive: HashMap<&[u8], u32> = (words.iter().enumerate())
            .map(|(id, w)| (&w[..], id as u32))
            .collect();
        // Records of known and unknown words, thousands of them in all (more than one
        // batch of pending lookups), joined by assorted whitespace.
        let records: Vec<Vec<u8>> = (0..1 + rng.below(400))
            .map(|_| {
                let mut record = Vec::new();
                for _ in 0..rng.below(12) {
                    let w = if rng.below(4) == 0 {
                        random_table_word(&mut rng)
                    } else {
                        words[rng.below(n)].clone()
                    };
                    // Words with spaces inside would split differently: keep the
                    // alphabet's words whole (it has no whitespace).
                    record.extend_from_slice(&w);
                    record.extend_from_slice([&b" "[..], b"\t", b"\xe3\x80\x80"][rng.below(3)]);
                }
                record
            })
            .collect();
        let refs: Vec<&[u8]> = records.iter().map(|r| &r[..]).collect();
        let (mut got, mut ends) = (Vec::new(), Vec::new());
        let unknown = WordEncoder::new(&model).encode_records(&refs, &mut got, &mut ends);
        let (mut expected, mut expected_ends, mut expected_unknown) = (Vec::new(), Vec::new(), 0);
        for r in &records {
            for w in naive_split(r) {
                let id = naive.get(&w[..]).copied().unwrap_or_else(|| {
                    expected_unknown += 1;
                    n as u32
                });
                expected.push(id);
            }
            expected_ends.push(expected.len());
        }
        assert_eq!(got, expected);
        assert_eq!(ends, expected_ends);
        assert_eq!(unknown, expected_unknown);
    }
}

#[test]
fn a_large_model_file_reads_and_encodes_exactly() {
    // Enough words for the table to live in a memory map (4 MiB and more); then a last
    // word repeats one of them: the error names its line.
    let n = 70_000;
    let mut file = b"{\"kind\":\"word\",\"version\":1}\n".to_vec();
    let word_of = |k: usize| format!("w{k:06}");
    for k in 0..n {
        file.extend_from_slice(
            format!(
                "{{\"id\":{k},\"word\":\"{}\",\"count\":{}}}\n",
                word_of(k),
                k % 7
            )
            .as_bytes(),
        );
    }
    let model = parse_file(&file).unwrap();
    assert_eq!(model.words().len(), n);
    let text: Vec<u8> = (0..n)
        .rev()
        .step_by(7)
        .flat_map(|k| format!("{} x ", word_of(k)).into_bytes())
        .collect();
    let mut ids = Vec::new();
    let unknown = WordEncoder::new(&model).encode(&text, &mut ids);
    let expected: Vec<u32> = (0..n)
        .rev()
        .step_by(7)
        .flat_map(|k| [k as u32, n as u32])
        .collect();
    assert_eq!(ids, expected);
    assert_eq!(unknown as usize, expected.len() / 2);
    file.extend_from_slice(format!("{{\"id\":{n},\"word\":\"{}\"}}\n", word_of(123)).as_bytes());
    let err = parse_file(&file).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Data);
    let message = err.to_string();
    assert!(
        message.contains("duplicated word \"w000123\" (also id 123)"),
        "{message}"
    );
    assert!(message.contains(&format!(":{}:", n + 2)), "{message}");
}

#[test]
fn model_text_read_in_two_halves_matches_the_sequential_reader() {
    let mut rng = Rng(0x5eed_0009);
    for round in 0..400 {
        let n = 1 + rng.below(60);
        let (words, counts) = random_vocabulary(&mut rng, n);
        let mut sorted: Vec<(Vec<u8>, u64)> = words.into_iter().zip(counts).collect();
        sorted.sort();
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for (id, (w, count)) in sorted.iter().enumerate() {
            let line = match std::str::from_utf8(w) {
                // Some lines in other key orders or spacing, for the JSON reader.
                Ok(text) if rng.below(5) == 0 => {
                    serde_json::json!({"word": text, "id": id, "count": count}).to_string()
                }
                Ok(text) => format!(
                    "{{\"id\":{id},\"word\":{},\"count\":{count}}}",
                    serde_json::to_string(text).unwrap()
                ),
                Err(_) => format!(
                    "{{\"id\":{id},\"hex\":\"{}\"}}",
                    w.iter().map(|b| format!("{b:02x}")).collect::<String>()
                ),
            };
            lines.push(line.into_bytes());
        }
        // Breakage in half the rounds: a repeated word, a skipped or repeated id, a
        // malformed line, blank lines, CRLF line ends.
        if round % 2 == 1 && lines.len() > 1 {
            let at = rng.below(lines.len());
            match rng.below(5) {
                0 => {
                    let from = rng.below(lines.len());
                    let (w, _) = &sorted[from];
                    lines[at] = format!(
                        "{{\"id\":{at},\"hex\":\"{}\"}}",
                        w.iter().map(|b| format!("{b:02x}")).collect::<String>()
                    )
                    .into_bytes();
                }
                1 => {
                    lines.remove(at);
                }
                2 => lines[at] = b"{\"id\":".to_vec(),
                3 => lines.insert(at, b"   ".to_vec()),
                _ => {
                    for line in &mut lines {
                        line.push(b'\r');
                    }
                }
            }
        }
        let mut body = lines.join(&b'\n');
        if rng.below(2) == 0 {
            body.push(b'\n');
        }
        if round % 4 == 2 {
            // Ids that skip one exactly where the reader cuts the text (the first line
            // starting after its middle): each half is in order by itself. Only ids of
            // the same width are changed, so the cut stays where it was.
            let cut = body.len() / 2
                + body[body.len() / 2..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .unwrap_or(0)
                + 1;
            let renumbered: Vec<u8> = String::from_utf8_lossy(&body[cut.min(body.len())..])
                .lines()
                .map(|line| {
                    let Some(at) = line.find("\"id\":").map(|k| k + 5) else {
                        return line.to_string();
                    };
                    let digits = line[at..].bytes().take_while(u8::is_ascii_digit).count();
                    match line[at..at + digits].parse::<u64>() {
                        Ok(id) if (id + 1).to_string().len() == digits => {
                            format!("{}{}{}", &line[..at], id + 1, &line[at + digits..])
                        }
                        _ => line.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                .into_bytes();
            if !body[cut.min(body.len())..].contains(&0xff)
                && renumbered.len() + cut == body.len() - usize::from(body.ends_with(b"\n"))
            {
                body.truncate(cut);
                body.extend_from_slice(&renumbered);
            }
        }
        let header: Map<String, Value> =
            serde_json::from_str(r#"{"kind":"word","version":1}"#).unwrap();
        let mut numbered = body.split(|&b| b == b'\n').zip(2u64..).map(|(l, n)| (n, l));
        let sequential =
            crate::format::word_file::parse_model(&header, &mut numbered, 0, source(), "m.json");
        let halves =
            crate::format::word_file::parse_model_text(&header, &body, 0, source(), "m.json");
        match (sequential, halves) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a.words(), b.words());
                assert_eq!(a.counts, b.counts);
                assert_eq!(a.unk_id, b.unk_id);
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            (a, b) => panic!(
                "round {round}: sequential {:?} vs halves {:?}",
                a.map(|m| m.unk_id),
                b.map(|m| m.unk_id)
            ),
        }
    }
}

/// A `--whole` input several pieces long, with every kind of whitespace and invalid
/// UTF-8 around the cuts: the same ids (and unknown count) on one thread or several,
/// as the library gives for the text in one go.
#[test]
fn whole_input_encodes_alike_on_any_thread_count() {
    use crate::cmd::encode::{encode, EncodeConfig};
    use crate::input::Source;
    let dir = super::scratch("wordwhole");
    let mut rng = Rng(0x5eed_000a);
    let mut text = Vec::new();
    while text.len() < 1_300_000 {
        text.extend_from_slice(&random_text(&mut rng, 200));
        // A long word now and then, so that a cut lands far past its target.
        if rng.below(50) == 0 {
            let len = rng.below(40_000);
            text.extend(std::iter::repeat_n(b'a', len));
        }
    }
    let model = word::train(&text[..text.len() / 3], Some(40), 1).unwrap();
    let input = dir.join("in.txt");
    std::fs::write(&input, &text).unwrap();
    let mut ids = Vec::new();
    let unknown = word::encode(&model, &text, &mut ids);
    let mut expected = Vec::new();
    crate::format::ids::push_ids(&mut expected, &ids);
    expected.push(b'\n');
    for threads in [1, 2, 3] {
        let output = dir.join("ids.jsonl");
        let config = EncodeConfig {
            whole: true,
            threads,
            ..super::encode_config(crate::model::Model::Word(model.clone()), &output)
        };
        let stats = encode(&config, &[Source::file(&input)])
            .unwrap()
            .stats
            .summary();
        assert!(
            std::fs::read(&output).unwrap() == expected,
            "{threads} threads: ids differ"
        );
        assert!(
            stats.contains(&format!("tokens {} ", ids.len()))
                && stats.contains(&format!("unknown {unknown} ")),
            "{threads} threads: {stats}"
        );
    }
}
