//! Any bytes given as `-m FILE`: the suite's model files (BPE and word), HF
//! `tokenizer.json`, minbpe `.model` and tiktoken rank files, told apart by content, as
//! the tools read them. Must end in a model or an error, never a panic; a model that
//! loads encodes and decodes a short text back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toksuite::encode::AllowedSpecial;
use toksuite::format::{self, RankFileOptions};
use toksuite::model::Model;

fuzz_target!(|data: &[u8]| {
    let Ok(loaded) = format::parse(data, "fuzz.model", &RankFileOptions::default()) else {
        return;
    };
    if let Model::Bpe(model) = &loaded.model {
        let text = b"hello world, fuzz 123 \xff";
        if let Ok(ids) = toksuite::encode::encode(model, &AllowedSpecial::None, text) {
            let mut back = Vec::new();
            toksuite::decode::decode_ids(&loaded.model, &ids, &mut back)
                .expect("the ids the model gave decode");
            assert_eq!(back, text, "encode then decode gives the text back");
        }
    }
});
