//! bpe-decode's fast path (one pass over compact records, threads over parts of the
//! input and inside long records) against the general JSON reader it falls back to:
//! the same bytes for every record either reads, the same errors on the same lines.

use crate::decode::{decode_ids, DecodeBuf, DecodeTable};
use crate::format::ids as ndjson;
use crate::model::{Model, ModelSource, SpecialToken};

use super::encode_props::{model_from_merges, random_merges};
use super::Rng;

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
    crate::format::model_file::parse(text.as_bytes(), source, "w").unwrap()
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

fn rng_small(case: u64) -> Rng {
    Rng::new(case + 1)
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

/// Records of a large vocabulary (o200k_base: ids of one to six digits) read by the
/// block scan of ids ([`DecodeTable::decode_record`]) against the general reader, with
/// one byte changed at a random place (often near a 64-byte block's edge) to any value,
/// or an id made too long, zero-led or out of the vocabulary: the same bytes when the
/// fast path takes the record, and a refusal exactly when the record is not compact
/// and valid.
#[test]
fn id_blocks_equal_the_general_reader_on_a_large_vocabulary() {
    let model = Model::Bpe(crate::model::builtin("o200k_base").unwrap());
    let table = DecodeTable::new(&model);
    let vocab = model.vocab_size() as u64;
    let mut rng = Rng::new(17);
    let (mut taken, mut refused) = (0, 0);
    for case in 0..3000 {
        let n = 1 + rng.below(if case % 3 == 0 { 400 } else { 40 }) as usize;
        let ids: Vec<u32> = (0..n)
            .map(|_| match rng.below(4) {
                0 => rng.below(10) as u32,
                1 => rng.below(1000) as u32,
                _ => rng.below(vocab) as u32,
            })
            .collect();
        let mut line = Vec::new();
        ndjson::push_ids(&mut line, &ids);
        let inner = line.len() - 2;
        // Near a block's edge (the scan's blocks start at the byte after `[`), or anywhere.
        let at = if rng.below(2) == 0 {
            let edge = 64 * rng.below((inner / 64) as u64 + 1) as usize;
            1 + (edge + rng.below(5) as usize)
                .saturating_sub(2)
                .min(inner - 1)
        } else {
            1 + rng.below(inner as u64) as usize
        };
        match case % 6 {
            1 => line[at] = rng.below(256) as u8,
            2 => line.insert(at, b"0123456789"[rng.below(10) as usize]),
            3 => line.insert(at, b'0'),
            4 => line
                .splice(at..at, b"99999999".iter().copied())
                .for_each(drop),
            5 => line.splice(at..at, b"0,".iter().copied()).for_each(drop),
            _ => {}
        }
        let mut buf = DecodeBuf::default();
        buf.extend_from_slice(b"x");
        let fast = table.decode_record(&line, &mut buf);
        let slow = slow_decode(&model, &line);
        let text = String::from_utf8_lossy(&line);
        let mut ids = Vec::new();
        let compact = ndjson::parse_ids_into(&line, &mut ids).is_ok() && {
            let mut canonical = Vec::new();
            ndjson::push_ids(&mut canonical, &ids);
            canonical == line
        };
        assert_eq!(fast, compact && slow.is_some(), "{text}");
        if fast {
            taken += 1;
            let mut want = b"x".to_vec();
            want.extend(slow.unwrap());
            assert_eq!(buf.as_slice(), want, "{text}");
        } else {
            refused += 1;
            assert_eq!(buf.as_slice(), b"x", "{text}: refused but wrote");
        }
    }
    assert!(
        taken > 1000 && refused > 1000,
        "taken {taken}, refused {refused}"
    );
}

/// The built-in vocabularies' tables, their slots read in place from the binary
/// (build.rs's), against tables built at run time from the same models and against the
/// general reader: every id alone (short and long tokens, gaps, special tokens, ids
/// past the vocabulary), and records mixing them, one per line.
#[test]
fn builtin_tables_read_in_place_equal_built_ones() {
    let mut rng = Rng::new(29);
    for name in crate::model::BUILTINS {
        let bpe = crate::model::builtin(name).unwrap();
        let model = Model::Bpe(bpe.clone());
        let in_place = DecodeTable::new(&model);
        let built = DecodeTable::built(&model);
        assert!(in_place.reads_in_place(), "{name}");
        assert!(!built.reads_in_place(), "{name}");
        let vocab = model.vocab_size() as u32;
        let (mut long, mut gaps) = (0, 0);
        for id in (0..vocab + 300).chain([1 << 20, 99_999_999]) {
            let line = format!("[{id}]").into_bytes();
            let (mut a, mut b) = (DecodeBuf::default(), DecodeBuf::default());
            let (fast_a, fast_b) = (
                in_place.decode_record(&line, &mut a),
                built.decode_record(&line, &mut b),
            );
            let slow = slow_decode(&model, &line);
            assert_eq!(fast_a, fast_b, "{name} {id}");
            assert_eq!(a.as_slice(), b.as_slice(), "{name} {id}");
            if fast_a {
                assert_eq!(Some(a.as_slice().to_vec()), slow, "{name} {id}");
                long += usize::from(a.as_slice().len() >= 16);
            } else {
                gaps += 1;
                assert!(slow.is_none() || id >= vocab, "{name} {id}: refused");
            }
        }
        assert!(
            long > 10 && gaps > 250,
            "{name}: {long} long tokens, {gaps} refused"
        );
        // Records of random ids, many of them long or special tokens, one per line.
        let specials: Vec<u32> = (vocab - 30..vocab).collect();
        let mut text = Vec::new();
        for _ in 0..2000 {
            let ids: Vec<u32> = (0..rng.below(70))
                .map(|_| match rng.below(5) {
                    0 => specials[rng.below(30) as usize],
                    _ => rng.below(u64::from(vocab) - 30) as u32,
                })
                .filter(|&id| bpe.token(id).is_some())
                .collect();
            ndjson::push_ids(&mut text, &ids);
            text.push(b'\n');
        }
        let (mut a, mut b) = (DecodeBuf::default(), DecodeBuf::default());
        assert_eq!(
            in_place.decode_lines(&text, true, &mut a),
            Some(2000),
            "{name}"
        );
        assert_eq!(
            built.decode_lines(&text, true, &mut b),
            Some(2000),
            "{name}"
        );
        assert_eq!(a.as_slice(), b.as_slice(), "{name}");
        let mut want = Vec::new();
        for line in text.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            want.extend(slow_decode(&model, line).unwrap());
            want.push(b'\n');
        }
        assert_eq!(a.as_slice(), want, "{name}");
    }
}
