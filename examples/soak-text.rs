//! Writes N bytes of seeded pseudo-random text to standard output, fast, for the
//! streaming soak (`scripts/soak.sh`): words of several scripts, spaces, newlines, runs
//! of digits and now and then a byte that is not UTF-8, so that a round trip through
//! `bpe-encode --whole | bpe-decode --whole` is checked byte for byte on any size
//! without storing the text (run it twice with the same seed).
//!
//! Usage: `soak-text BYTES [SEED]` (BYTES may end in K, M or G).
#![deny(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "a",
    "to",
    "in",
    "is",
    "you",
    "that",
    "it",
    "tokenizer",
    "merge",
    "Life",
    "short",
    "eat",
    "dessert",
    "first",
    "café",
    "naïve",
    "über",
    "日本語",
    "テキスト",
    "привет",
    "مرحبا",
    "नमस्ते",
    "🙂",
    "don't",
    "2024,",
    "<|endoftext|>",
    "\t",
    "  ",
];

fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1 << 10),
        (i, 'M' | 'm') => (&text[..i], 1 << 20),
        (i, 'G' | 'g') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(unit)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(total) = args.first().and_then(|a| parse_size(a)) else {
        eprintln!("usage: soak-text BYTES [SEED]");
        return ExitCode::from(2);
    };
    let mut state = args
        .get(1)
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut block = Vec::with_capacity(1 << 17);
    let mut left = total;
    while left > 0 {
        block.clear();
        while block.len() < 1 << 16 {
            let r = next();
            match r % 64 {
                0 => block.push(b'\n'),
                1 => block.push(0x80 | (r >> 8) as u8 & 0x3f),
                2 => block.extend_from_slice(format!("{}", r >> 40).as_bytes()),
                _ => block.extend_from_slice(WORDS[(r >> 8) as usize % WORDS.len()].as_bytes()),
            }
            if r >> 60 != 0 {
                block.push(b' ');
            }
        }
        let n = block.len().min(left as usize);
        if out.write_all(&block[..n]).is_err() {
            // A closed pipe ends the run quietly.
            return ExitCode::SUCCESS;
        }
        left -= n as u64;
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
