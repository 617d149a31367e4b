//! The fast splitters of the preset patterns against the same patterns run by the regex
//! engine, on any bytes (invalid UTF-8 included): the same chunks, which cover the input.
//!
//! The first byte picks the pattern (gpt2, gpt4, cl100k, o200k, r50k; p50k is r50k's
//! text) and the rest is the text: one regex run per execution instead of five, since the
//! instrumented regex engine takes nearly all the time (about 170 executions per second
//! checking every pattern, about 1,000 checking one).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toksuite::pretokenize::{parse_split, Splitter};

const PRESETS: [&str; 5] = ["gpt2", "gpt4", "cl100k", "o200k", "r50k"];

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
    let Some((&pick, text)) = data.split_first() else {
        return;
    };
    let splitters = splitters();
    let (name, fast, regex) = &splitters[usize::from(pick) % splitters.len()];
    let got = chunks(fast, text);
    assert_eq!(got, chunks(regex, text), "--split {name}");
    assert_eq!(got.concat(), text, "--split {name}: chunks cover the input");
});
