//! Build script: converts the shipped tiktoken rank files (`assets/*.tiktoken`) into
//! ready tables in `OUT_DIR` (the layout of `src/model/tables.rs`, which this script
//! includes, so that writer and reader share one definition), so that a run reads a
//! built-in vocabulary in place instead of parsing ~200 ms of base64 and pairs; and the
//! decoder's slot table (`NAME.slots`) and the encoder's pair Bloom filter (`NAME.bloom`)
//! of each, which a run would otherwise build.
//!
//! It also writes `classes.bin`, the Unicode class tables of the built-in splitters
//! (layout in `src/pretokenize/classes.rs`): building them at start-up took ~0.6 ms of
//! every run's first record (1.1 MB of flags filled from regex-syntax's ranges).

use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::PathBuf;

use regex_syntax::hir::{Class, HirKind};

// The table layout, base64 and rank-file parsing, shared with the runtime.
#[path = "src/model/tables.rs"]
#[allow(dead_code)]
mod tables;
// The encoder's units (which pieces BPE may start from whole), shared with the runtime.
#[path = "src/model/units.rs"]
#[allow(dead_code)]
mod units;

const BUILTINS: [&str; 4] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/model/tables.rs");
    println!("cargo:rerun-if-changed=src/model/units.rs");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in BUILTINS {
        let path = format!("assets/{name}.tiktoken");
        println!("cargo:rerun-if-changed={path}");
        let text = fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let parsed = tables::parse_rank_file::<std::collections::hash_map::RandomState>(&text)
            .unwrap_or_else(|(line, message)| panic!("{path}: line {line}: {message}"));
        let blob = tables::write_blob(&parsed)
            .unwrap_or_else(|| panic!("{path}: ids do not fit the pair table"));
        fs::write(out_dir.join(format!("{name}.bin")), blob).expect("writing OUT_DIR");
        let slots = tables::write_decode_slots(&parsed);
        fs::write(out_dir.join(format!("{name}.slots")), slots).expect("writing OUT_DIR");
        let (_, pairs) = tables::pair_slots(&parsed.pairs).expect("checked by write_blob");
        let bloom: Vec<u8> = tables::pair_bloom(&pairs, parsed.pairs.len())
            .iter()
            .flat_map(|word| word.to_le_bytes())
            .collect();
        fs::write(out_dir.join(format!("{name}.bloom")), bloom).expect("writing OUT_DIR");
        let pair_ids: HashMap<(u32, u32), u32> = parsed
            .pairs
            .iter()
            .map(|&(a, b, id)| ((a, b), id))
            .collect();
        let offsets = &parsed.token_offsets;
        let token = |id: u32| {
            let i = id as usize;
            let (start, end) = (*offsets.get(i)? as usize, *offsets.get(i + 1)? as usize);
            (start < end).then(|| [parsed.token_bytes[start], parsed.token_bytes[end - 1]])
        };
        let short = offsets.windows(2).enumerate().filter_map(|(id, span)| {
            let bytes = &parsed.token_bytes[span[0] as usize..span[1] as usize];
            (2..=3)
                .contains(&bytes.len())
                .then(|| (id as u32, bytes.to_vec()))
        });
        let found = units::build(
            &parsed.base_id_of_byte,
            |a, b| pair_ids.get(&(a, b)).copied().unwrap_or(u32::MAX),
            short,
            parsed.pairs.iter().copied(),
            token,
            offsets.len().saturating_sub(1),
        );
        fs::write(out_dir.join(format!("{name}.units")), found.to_bytes())
            .expect("writing OUT_DIR");
    }
    fs::write(out_dir.join("classes.bin"), classes()).expect("writing OUT_DIR");
}

/// The class bits of every code point (the bits and classes of `src/pretokenize/
/// classes.rs`), as `classes.bin`: the 128 ASCII flags, then one little-endian u16 per
/// 256-code-point block naming its distinct block, then the distinct blocks.
fn classes() -> Vec<u8> {
    let mut flat = vec![0u8; 0x110000];
    for (bit, class) in [
        (1u8, r"\p{L}"),
        (2, r"\p{N}"),
        (4, r"\s"),
        (8, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
        (16, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
        (32, r"\p{M}"),
    ] {
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(class)
            .unwrap_or_else(|e| panic!("{class}: {e}"));
        let HirKind::Class(Class::Unicode(ranges)) = hir.kind() else {
            panic!("{class} is not a Unicode class");
        };
        for r in ranges.ranges() {
            for b in &mut flat[r.start() as usize..=r.end() as usize] {
                *b |= bit;
            }
        }
    }
    let mut blob = flat[..128].to_vec();
    let mut seen: HashMap<&[u8], u16> = HashMap::new();
    let mut blocks = Vec::new();
    for block in flat.chunks(256) {
        let next = seen.len() as u16;
        let id = *seen.entry(block).or_insert_with(|| {
            blocks.extend_from_slice(block);
            next
        });
        blob.extend_from_slice(&id.to_le_bytes());
    }
    blob.extend_from_slice(&blocks);
    blob
}
