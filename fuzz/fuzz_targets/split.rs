//! The fast splitters of the preset patterns against the same patterns run by the regex
//! engine, on any bytes (invalid UTF-8 included): the same chunks, which cover the input.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toksuite::pretokenize::{parse_split, Splitter};

const PRESETS: [&str; 6] = ["gpt2", "gpt4", "cl100k", "o200k", "r50k", "p50k"];

/// Each preset's fast splitter and regex splitter, built once.
fn splitters() -> &'static [(&'static str, Splitter, Splitter)] {
    static SPLITTERS: OnceLock<Vec<(&str, Splitter, Splitter)>> = OnceLock::new();
    SPLITTERS.get_or_init(|| {
        PRESETS
            .iter()
            .map(|&name| {
                let spec = parse_split(name).expect("a preset").expect("not none");
                let fast = Splitter::new(&spec).expect("preset splitter");
                let regex = Splitter::new_regex(&spec).expect("preset regex");
                (name, fast, regex)
            })
            .collect()
    })
}

fn chunks<'t>(splitter: &Splitter, text: &'t [u8]) -> Vec<&'t [u8]> {
    let mut out = Vec::new();
    splitter.split(text, &mut |chunk| out.push(chunk));
    out
}

fuzz_target!(|data: &[u8]| {
    for (name, fast, regex) in splitters() {
        let got = chunks(fast, data);
        assert_eq!(got, chunks(regex, data), "--split {name}");
        assert_eq!(got.concat(), data, "--split {name}: chunks cover the input");
    }
});
