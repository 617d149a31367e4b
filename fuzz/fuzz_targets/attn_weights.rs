//! Any bytes as `attn --weights FILE`: weights or an error, never a panic; weights that
//! parse write back to JSON that parses to the same weights.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toksuite::attn::Weights;

fuzz_target!(|data: &[u8]| {
    let Ok(weights) = Weights::from_json(data) else {
        return;
    };
    let mut text = Vec::new();
    weights.write_json(&mut text).expect("writes to memory");
    let again = Weights::from_json(&text).expect("written weights parse");
    let mut text2 = Vec::new();
    again.write_json(&mut text2).expect("writes to memory");
    assert_eq!(text, text2);
});
