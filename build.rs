//! Build script: converts the shipped tiktoken rank files (`assets/*.tiktoken`) into a
//! compact binary form in `OUT_DIR`, so that loading a built-in model at start-up copies
//! tables instead of decoding base64 and searching every split of every token
//! (measured for o200k_base: ~200 ms of parsing down to the cost of filling one map;
//! with the pairs as a ready hash table, read in place, no map is filled at all).
//!
//! Blob layout, integers little-endian: `n` (ids, gaps included), the base id of each
//! byte (256), token offsets (`n + 1`), the number of pairs and `bits` (u32 each), a zero
//! u32 where needed to align what follows to 8 bytes, then a
//! hash table of `2^bits` u64 slots holding every split of a token `id` into two tokens
//! `a`, `b` as `a << 42 | b << 21 | id` (empty: all ones; linear probing from the
//! multiplicative hash of `a << 21 | b`), then the token bytes in id order.
//! `src/tiktoken.rs` reads it; a test checks it equals a runtime parse.
//!
//! It also writes `classes.bin`, the Unicode class tables of the built-in splitters
//! (layout in `src/pretokenize/classes.rs`): building them at start-up took ~0.6 ms of
//! every run's first record (1.1 MB of flags filled from regex-syntax's ranges).

use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::PathBuf;

use regex_syntax::hir::{Class, HirKind};

const BUILTINS: [&str; 4] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];
/// Bits per id in a pair-table slot, and the table's hash multiplier: the same as
/// `PAIR_ID_BITS` and `PAIR_HASH` in `src/model.rs`.
const PAIR_ID_BITS: u32 = 21;
const PAIR_HASH: u64 = 0x9E37_79B9_7F4A_7C15;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for name in BUILTINS {
        let path = format!("assets/{name}.tiktoken");
        println!("cargo:rerun-if-changed={path}");
        let text = fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let blob = convert(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        fs::write(out_dir.join(format!("{name}.bin")), blob).expect("writing OUT_DIR");
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

fn convert(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut tokens: Vec<(u32, Vec<u8>)> = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let mut fields = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty());
        let Some(token) = fields.next() else { continue };
        let rank = fields
            .next()
            .and_then(|r| std::str::from_utf8(r).ok()?.parse::<u32>().ok())
            .ok_or(format!("line {}: bad rank", i + 1))?;
        let bytes = base64(token).ok_or(format!("line {}: bad base64", i + 1))?;
        tokens.push((rank, bytes));
    }
    let n = tokens.iter().map(|t| t.0 + 1).max().ok_or("no tokens")? as usize;
    let mut by_id: Vec<Option<&[u8]>> = vec![None; n];
    let mut by_bytes: HashMap<&[u8], u32> = HashMap::with_capacity(tokens.len());
    for (rank, bytes) in &tokens {
        if by_id[*rank as usize].is_some() || by_bytes.insert(bytes, *rank).is_some() {
            return Err(format!("rank {rank} or its token is listed twice"));
        }
        by_id[*rank as usize] = Some(bytes);
    }
    let mut base = [u32::MAX; 256];
    for (rank, bytes) in &tokens {
        if bytes.len() == 1 {
            base[bytes[0] as usize] = *rank;
        }
    }
    if base.contains(&u32::MAX) {
        return Err("a byte has no token".into());
    }
    let mut blob = Vec::new();
    let push = |blob: &mut Vec<u8>, v: u32| blob.extend_from_slice(&v.to_le_bytes());
    push(&mut blob, n as u32);
    for id in base {
        push(&mut blob, id);
    }
    let mut offset = 0u32;
    push(&mut blob, 0);
    for t in &by_id {
        offset += t.map_or(0, |b| b.len() as u32);
        push(&mut blob, offset);
    }
    let mut pairs = Vec::new();
    for (rank, bytes) in &tokens {
        for k in 1..bytes.len() {
            if let Some(&a) = by_bytes.get(&bytes[..k]) {
                if let Some(&b) = by_bytes.get(&bytes[k..]) {
                    pairs.push([a, b, *rank]);
                }
            }
        }
    }
    // The pairs as a ready hash table (the layout `src/model.rs`'s `PairTable` reads):
    // the binary carries it, so a run looks pairs up without first filling a map.
    if n >= 1 << PAIR_ID_BITS {
        return Err("ids do not fit the pair table".into());
    }
    let bits = (2 * pairs.len().max(1))
        .next_power_of_two()
        .trailing_zeros()
        .max(4);
    let mut slots = vec![u64::MAX; 1 << bits];
    let mask = slots.len() - 1;
    for [a, b, id] in &pairs {
        let key = u64::from(*a) << PAIR_ID_BITS | u64::from(*b);
        let mut at = (key.wrapping_mul(PAIR_HASH) >> (64 - bits)) as usize;
        while slots[at] != u64::MAX {
            at = (at + 1) & mask;
        }
        slots[at] = key << PAIR_ID_BITS | u64::from(*id);
    }
    push(&mut blob, pairs.len() as u32);
    push(&mut blob, bits);
    // The slots start at a multiple of 8, so that a run reads them in place as words.
    if blob.len() % 8 != 0 {
        push(&mut blob, 0);
    }
    for slot in slots {
        blob.extend_from_slice(&slot.to_le_bytes());
    }
    for bytes in by_id.iter().flatten() {
        blob.extend_from_slice(bytes);
    }
    Ok(blob)
}

fn base64(text: &[u8]) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for quad in text.chunks_exact(4) {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        let mut acc = 0u32;
        for &c in &quad[..4 - pad] {
            acc = acc << 6 | value(c)?;
        }
        acc <<= 6 * pad as u32;
        out.extend_from_slice(&[(acc >> 16) as u8, (acc >> 8) as u8, acc as u8][..3 - pad]);
    }
    Some(out)
}
