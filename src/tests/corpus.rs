//! The scale-out tests' corpus, shared by the library's tests (`src/tests/`) and the
//! integration tests (`tests/common.rs` includes this file), as `test_rng.rs` is.

use std::path::Path;

use super::Rng;

/// The end-of-text token the corpus puts between documents.
pub(crate) const EOT: &str = "<|endoftext|>";

/// A deterministic corpus of about `target` bytes built from the test fixtures: their
/// lines in seeded orders, with blank-line runs, whitespace-only lines, trailing
/// spaces and `\r`, digit runs, bytes that are not UTF-8 and end-of-text tokens between
/// documents, so that the whole-stream split and the per-record split differ.
pub(crate) fn corpus(target: usize, seed: u64) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut lines: Vec<Vec<u8>> = Vec::new();
    for f in [
        "taylorswift.txt",
        "pretokenize/multilingual.txt",
        "word/mixed.txt",
    ] {
        let text = std::fs::read(root.join(f)).expect("fixture");
        lines.extend(text.split(|&b| b == b'\n').map(<[u8]>::to_vec));
    }
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(target + 4096);
    while out.len() < target {
        let line = &lines[rng.below(lines.len())];
        match rng.below(40) {
            0 => out.extend_from_slice(b"\n\n\n"),
            1 => out.extend_from_slice(b"   \n"),
            2 => out.extend_from_slice(EOT.as_bytes()),
            3 => out.extend_from_slice(format!("{} ", rng.next_u64() % 1_000_000).as_bytes()),
            4 => out.extend_from_slice(b"):\n\n"),
            5 => out.push(0xff),
            _ => {}
        }
        out.extend_from_slice(line);
        match rng.below(20) {
            0 => out.extend_from_slice(b"  "),
            1 => out.push(b'\r'),
            2 => out.extend_from_slice(b".\t"),
            _ => {}
        }
        out.push(b'\n');
    }
    out
}
