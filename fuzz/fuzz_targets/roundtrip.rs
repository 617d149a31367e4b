//! Encode then decode any bytes with built-in vocabularies, with and without allowed
//! special tokens: the bytes come back exactly, the ids equal a second encoding (no
//! state leaks between calls), and BPE started from units gives the ids BPE from bytes
//! gives.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toksuite::encode::{AllowedSpecial, Encoder};
use toksuite::model::Model;

fn models() -> &'static [Model] {
    static MODELS: OnceLock<Vec<Model>> = OnceLock::new();
    MODELS.get_or_init(|| {
        ["r50k_base", "cl100k_base", "o200k_base"]
            .iter()
            .map(|name| toksuite::format::load(name, None).expect("built-in"))
            .collect()
    })
}

/// Encoders per model, without and with every special token allowed, built once: one
/// starting BPE from units, one from bytes.
fn encoders() -> &'static [(&'static Model, Encoder<'static>, Encoder<'static>)] {
    static ENCODERS: OnceLock<Vec<(&Model, Encoder, Encoder)>> = OnceLock::new();
    ENCODERS.get_or_init(|| {
        let mut all = Vec::new();
        for model in models() {
            let Model::Bpe(bpe) = model else { continue };
            for allowed in [AllowedSpecial::None, AllowedSpecial::All] {
                let encoder = || Encoder::new(bpe, &allowed).expect("encoder");
                all.push((
                    model,
                    encoder().with_units_after(0),
                    encoder().with_units_after(usize::MAX),
                ));
            }
        }
        all
    })
}

fuzz_target!(|data: &[u8]| {
    for (model, encoder, from_bytes) in encoders() {
        let mut ids = Vec::new();
        encoder.encode(data, &mut ids);
        let mut bytes_ids = Vec::new();
        from_bytes.encode(data, &mut bytes_ids);
        assert_eq!(ids, bytes_ids);
        let mut again = Vec::new();
        encoder.encode(data, &mut again);
        assert_eq!(ids, again);
        let mut back = Vec::new();
        toksuite::decode::decode_ids(model, &ids, &mut back).expect("ids decode");
        assert_eq!(back, data);
    }
});
