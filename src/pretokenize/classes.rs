//! Unicode character classes of the preset split patterns (`\p{L}`, `\p{N}`, `\s` and
//! o200k's two letter sets), taken from regex-syntax so they are exactly the classes the
//! regex engine uses, packed into a two-level lookup table.

use ahash::AHashMap;
use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

/// `\p{L}`.
pub const L: u8 = 1;
/// `\p{N}`.
pub const N: u8 = 2;
/// `\s`: Unicode `White_Space` in regex-syntax, and the same 25 code points in Python's
/// `regex` module (checked code point by code point).
pub const S: u8 = 4;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub const UP: u8 = 8;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub const LO: u8 = 16;
/// `\p{M}`.
pub const M: u8 = 32;

/// The class bits of every code point: ASCII directly, the rest through a table of
/// 256-entry blocks (identical blocks shared: a few dozen KiB instead of 1.1 MiB).
pub(crate) struct Classes {
    pub(crate) ascii: [u8; 128],
    index: Vec<u16>,
    blocks: Vec<u8>,
}

impl Classes {
    /// The class bits of code point `cp` (0 for anything beyond U+10FFFF).
    #[inline(always)]
    pub(crate) fn of(&self, cp: u32) -> u8 {
        if cp < 128 {
            self.ascii[cp as usize]
        } else {
            let block = self.index.get((cp >> 8) as usize).copied().unwrap_or(0) as usize;
            self.blocks
                .get((block << 8) | (cp & 0xFF) as usize)
                .copied()
                .unwrap_or(0)
        }
    }
}

/// The code point ranges of a regex class, as regex-syntax parses it.
fn ranges(class: &str) -> Vec<(u32, u32)> {
    let Ok(hir) = regex_syntax::ParserBuilder::new().build().parse(class) else {
        return Vec::new();
    };
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        _ => Vec::new(),
    }
}

fn build() -> Classes {
    let mut flat = vec![0u8; 0x110000];
    for (bit, class) in [
        (L, r"\p{L}"),
        (N, r"\p{N}"),
        (S, r"\s"),
        (UP, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
        (LO, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
        (M, r"\p{M}"),
    ] {
        for (lo, hi) in ranges(class) {
            for b in &mut flat[lo as usize..=hi as usize] {
                *b |= bit;
            }
        }
    }
    let mut ascii = [0u8; 128];
    ascii.copy_from_slice(&flat[..128]);
    let mut seen: AHashMap<&[u8], u16> = AHashMap::new();
    let mut index = Vec::with_capacity(0x1100);
    let mut blocks = Vec::new();
    for block in flat.chunks(256) {
        let next = seen.len() as u16;
        let id = *seen.entry(block).or_insert_with(|| {
            blocks.extend_from_slice(block);
            next
        });
        index.push(id);
    }
    Classes {
        ascii,
        index,
        blocks,
    }
}

/// The shared tables, built on first use (about a millisecond).
pub(crate) fn classes() -> &'static Classes {
    static TABLE: OnceLock<Classes> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// The class bits of `c` (`L`, `N`, `S`, `UP`, `LO`, `M`), for tests and tools that check
/// these tables against another engine.
pub fn char_classes(c: char) -> u8 {
    classes().of(c as u32)
}
