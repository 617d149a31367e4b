//! Reading in parts is reading whole (issue 25: input from a pipe arrives in any sizes):
//! the decoding driver fed random id streams a few bytes at a time, and the encoder
//! offered a record in random parts, give what they give for the whole input.

use crate::cmd::train::{train, ModelType, TrainConfig};
use crate::input::Source;

use super::Rng;

/// The model file the driver trains on `text` with `config` (standard input is the
/// process's, so the text goes through a file).
fn trained(label: &str, text: &[u8], config: TrainConfig) -> Vec<u8> {
    let dir = super::scratch(label);
    let path = dir.join("text.txt");
    std::fs::write(&path, text).unwrap();
    let mut model = Vec::new();
    train(&config, &[Source::file(&path)], &mut model, &mut |_| {}).unwrap();
    model
}

/// Random id streams (valid records, whitespace, headers, bad ids, garbage, text after
/// the array, a last line cut anywhere) decoded from a reader in runs of a few bytes, so that most lines come in parts, give the
/// bytes and the error of reading them whole: the same error, and the whole reading's
/// output a prefix of the one in parts (which writes the good pieces of a bad record).
#[test]
fn decoding_in_parts_is_decoding_whole() {
    use crate::cmd::decode::{decode_reader, DecodeConfig};
    use crate::format::model_file;
    use crate::identity::{sha256_hex, ModelSource};
    let bpe = trained(
        "decode-parts",
        b"hello hello world, hello there",
        TrainConfig {
            vocab_size: Some(270),
            ..TrainConfig::new()
        },
    );
    let words = trained(
        "decode-parts",
        b"a b c a b a",
        TrainConfig {
            model_type: ModelType::Word,
            ..TrainConfig::new()
        },
    );
    let mut rng = Rng(0x2525);
    for (bytes, vocab) in [(&bpe, 275), (&words, 5)] {
        let hash = sha256_hex(bytes);
        let load = || {
            let source = ModelSource::File {
                name: "m.json".to_string(),
                sha256: hash.clone(),
            };
            model_file::parse(bytes, source, "m.json").unwrap()
        };
        let header = format!("{{\"model\":\"m.json\",\"sha256\":\"{hash}\"}}");
        for case in 0..400 {
            let mut stream = Vec::new();
            for _ in 0..1 + rng.below(6) {
                match rng.below(12) {
                    0 => stream.extend_from_slice(header.as_bytes()),
                    1 => stream.extend_from_slice(b"[1,x]"),
                    2 => stream.extend_from_slice(b"  "),
                    _ => {
                        stream.push(b'[');
                        for k in 0..rng.below(40) {
                            if k > 0 {
                                stream.extend_from_slice(if rng.below(9) == 0 {
                                    b" , "
                                } else {
                                    b","
                                });
                            }
                            let id = rng.below(vocab + 1);
                            stream.extend_from_slice(id.to_string().as_bytes());
                        }
                        stream.push(b']');
                        // Text after the array: with a bad id before it, the bad id is
                        // the line's error whether the line is read whole or in parts.
                        if rng.below(8) == 0 {
                            stream.push(b'x');
                        }
                    }
                }
                stream.extend_from_slice(if rng.below(5) == 0 { b"\r\n" } else { b"\n" });
            }
            // The last line without its `\n`, or cut anywhere (an unterminated record,
            // a number cut short at the end of the input).
            match rng.below(6) {
                0 | 1 => drop(stream.pop()),
                2 => stream.truncate(rng.below(stream.len() + 1)),
                _ => {}
            }
            // Cases that random streams seldom make: a record cut within its first id
            // at the end of the input, a bad id before text after the array.
            let fixed: [&[u8]; 3] = [b"[15496", b"[1,2\n[27", b"[99999,1]x\n"];
            if let Some(&text) = fixed.get(case) {
                stream = text.to_vec();
            }
            for whole in [false, true] {
                let decode = |run: usize, threads: usize| {
                    let config = DecodeConfig {
                        model: Some(load()),
                        whole,
                        no_mmap: true,
                        threads,
                        line_buffered: false,
                        format: None,
                        eot: None,
                        bos: None,
                    };
                    let mut out = Vec::new();
                    let result = decode_reader(config, "s", Box::new(&stream[..]), run, &mut out);
                    (out, result.map_err(|e| e.to_string()))
                };
                let (reference, expected) = decode(1 << 20, 1);
                for run in [1, 2, 3, 7, 16] {
                    let (out, result) = decode(run, 1 + case % 2);
                    let text = String::from_utf8_lossy(&stream);
                    assert_eq!(result, expected, "run {run} of {text:?}");
                    if expected.is_ok() {
                        assert_eq!(out, reference, "run {run} of {text:?}");
                    } else {
                        assert!(out.starts_with(&reference), "run {run} of {text:?}");
                    }
                }
            }
        }
    }
}

/// A record encoded in parts of random sizes, each as far as the encoder finds a place
/// where what follows cannot change the ids (as `--whole` and long lines are read from
/// a pipe), gives the ids of encoding it whole: split and `--split none` models, rank
/// tables, allowed special tokens, invalid UTF-8, long runs of one byte.
#[test]
fn encoding_in_parts_is_encoding_whole() {
    use crate::encode::{AllowedSpecial, Encoder};
    use crate::format::model_file;
    use crate::identity::ModelSource;
    use crate::model::Model;
    let text = "hello world, the end <|endoftext|> aaaa  bbb 12345 ünïcödé\n";
    let mut models = Vec::new();
    for (split, specials) in [("none", &[][..]), ("gpt4", &["<|endoftext|>"][..])] {
        let config = TrainConfig {
            vocab_size: Some(300),
            split: crate::pretokenize::parse_split(split).unwrap(),
            specials: specials.iter().map(|s| s.to_string()).collect(),
            ..TrainConfig::new()
        };
        let bytes = trained("encode-parts", text.repeat(20).as_bytes(), config);
        let source = ModelSource::File {
            name: "m.json".to_string(),
            sha256: String::new(),
        };
        match model_file::parse(&bytes, source, "m.json").unwrap() {
            Model::Bpe(model) => models.push(model),
            Model::Word(_) => unreachable!(),
        }
    }
    models.push(crate::model::builtin("r50k_base").unwrap());
    models.push(crate::model::builtin("cl100k_base").unwrap());
    let pieces: [&[u8]; 12] = [
        b"hello",
        b" ",
        b"world",
        b"<|endoftext|>",
        b"<|endof",
        b"aaaaaaaa",
        b"\n",
        b"12",
        b"\xff",
        b"\xc3\xbc",
        b"  ",
        b"'s",
    ];
    let mut rng = Rng(0x7a7a);
    for model in &models {
        for allowed in [AllowedSpecial::None, AllowedSpecial::All] {
            let encoder = Encoder::new(model, &allowed).unwrap();
            for _ in 0..150 {
                let mut record = Vec::new();
                for _ in 0..rng.below(300) {
                    record.extend_from_slice(pieces[rng.below(pieces.len())]);
                }
                let mut whole = Vec::new();
                encoder.encode(&record, &mut whole);
                // The reader's loop: take a few bytes more, offer a part when it has
                // `want` bytes, keep what the encoder did not use.
                let mut ids = Vec::new();
                let (mut buf, mut fed, mut first) = (Vec::new(), 0, true);
                let mut want = 1 + rng.below(64);
                while fed < record.len() {
                    let n = (1 + rng.below(40)).min(record.len() - fed);
                    buf.extend_from_slice(&record[fed..fed + n]);
                    fed += n;
                    if buf.len() < want {
                        continue;
                    }
                    let used = encoder
                        .encode_part(
                            &buf,
                            first,
                            false,
                            1 + rng.below(2),
                            &mut |part: &[u32]| {
                                ids.extend_from_slice(part);
                                Ok::<(), ()>(())
                            },
                        )
                        .unwrap();
                    assert!(used <= buf.len());
                    if used > 0 {
                        first = false;
                        buf.drain(..used);
                        want = 1 + rng.below(64);
                    } else {
                        want = buf.len() * 2;
                    }
                }
                encoder
                    .encode_part(&buf, first, true, 1, &mut |part: &[u32]| {
                        ids.extend_from_slice(part);
                        Ok::<(), ()>(())
                    })
                    .unwrap();
                assert_eq!(ids, whole, "{:?}", String::from_utf8_lossy(&record));
            }
        }
    }
}
