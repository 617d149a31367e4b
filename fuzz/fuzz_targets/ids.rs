//! Any bytes as an id stream into `bpe-decode`, read from a pipe in runs of a size taken
//! from the first byte (so that long lines come in parts), with and without `--whole`,
//! with a small model file's table (built at start) or o200k_base's (read in place from
//! the binary): must end in output or an error, never a panic, and the same either way as
//! when read in one run.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toksuite::cmd::decode::{decode_reader, DecodeConfig};
use toksuite::model::Model;

/// A 300-token byte-level model with special tokens (a test fixture): small, so that a
/// run clones it and builds its tables in microseconds, and the fuzzer's ids reach both
/// sides of its vocabulary's end.
fn model() -> Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let bytes = include_bytes!("../../tests/fixtures/interop/gpt2-specials.json");
            toksuite::format::parse(bytes, "gpt2-specials.json", &Default::default())
                .expect("the fixture loads")
                .model
        })
        .clone()
}

/// The default built-in vocabulary, whose decode table is compiled into the binary.
fn builtin() -> Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL
        .get_or_init(|| toksuite::format::load("o200k_base", None).expect("built in"))
        .clone()
}

fn decode(stream: &[u8], whole: bool, big: bool, run: usize) -> (Vec<u8>, Result<(), String>) {
    let config = DecodeConfig {
        model: Some(if big { builtin() } else { model() }),
        whole,
        no_mmap: true,
        threads: 1,
        line_buffered: false,
        format: None,
        eot: None,
        bos: None,
    };
    let mut out = Vec::new();
    let result = decode_reader(config, "fuzz", Box::new(stream), run, &mut out);
    (out, result.map_err(|e| e.to_string()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let run = 1 + usize::from(first % 64);
    let whole = first & 0x80 != 0;
    let big = first & 0x40 != 0;
    let (out, result) = decode(stream, whole, big, run);
    let (reference, expected) = decode(stream, whole, big, 1 << 20);
    assert_eq!(result, expected, "the same outcome in runs of {run}");
    if expected.is_ok() {
        assert_eq!(out, reference, "the same bytes in runs of {run}");
    }
});
