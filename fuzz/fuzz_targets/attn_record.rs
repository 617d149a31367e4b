//! Any bytes as one `attn` input line, with ids or with `--vectors`: a header, a record
//! or an error, never a panic; a record that parses also computes.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toksuite::attn::{Attn, DrawSpec, NormalFill, Options, Weights};

fn attn(vectors: bool) -> &'static Attn {
    static IDS: OnceLock<Attn> = OnceLock::new();
    static VECTORS: OnceLock<Attn> = OnceLock::new();
    let cell = if vectors { &VECTORS } else { &IDS };
    cell.get_or_init(|| {
        let weights = Weights::draw(&DrawSpec {
            vocab_size: 1000,
            dim: 4,
            d_kq: 2,
            d_v: 3,
            heads: 2,
            seed: 123,
            fill: NormalFill::default(),
        });
        let options = Options {
            vectors,
            threads: 1,
            ..Options::default()
        };
        Attn::new(weights, options).expect("small weights")
    })
}

fuzz_target!(|data: &[u8]| {
    for vectors in [false, true] {
        let attn = attn(vectors);
        if let Ok(Some(record)) = attn.parse_record(data) {
            let _ = attn.compute(&record, None);
        }
    }
});
