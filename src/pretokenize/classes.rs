//! Unicode character classes of the preset split patterns (`\p{L}`, `\p{N}`, `\s` and
//! o200k's two letter sets), taken from regex-syntax (by `build.rs`) so they are exactly
//! the classes the regex engine uses, packed into a two-level lookup table.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::blob::{include_blob, le_words};

/// `\p{L}`.
pub(crate) const L: u8 = 1;
/// `\p{N}`.
pub(crate) const N: u8 = 2;
/// `\s`: Unicode `White_Space` in regex-syntax, and the same 25 code points in Python's
/// `regex` module (checked code point by code point).
pub(crate) const S: u8 = 4;
/// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const UP: u8 = 8;
/// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub(crate) const LO: u8 = 16;
/// `\p{M}`.
pub(crate) const M: u8 = 32;

/// The class bits of every code point: ASCII directly, the rest through a table of
/// 256-entry blocks (identical blocks shared: a few dozen KiB instead of 1.1 MiB).
/// `build.rs` computes them from regex-syntax's Unicode tables (`classes.bin`: the 128
/// ASCII flags, a little-endian u16 per block of 256 code points naming its distinct
/// block, then the distinct blocks); a run reads them in place.
pub(crate) struct Classes {
    pub(crate) ascii: [u8; 128],
    index: Cow<'static, [u16]>,
    blocks: &'static [u8],
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

/// Blocks of 256 code points up to U+10FFFF.
const BLOCKS: usize = 0x1100;

static TABLES: &[u8] = include_blob!("classes.bin");

/// The tables in `classes.bin`; empty (every class bit 0) if it were malformed, which
/// `src/tests/pretokenize_props.rs` would show (it checks every code point).
fn read(blob: &'static [u8]) -> Option<Classes> {
    let ascii = blob.get(..128)?.try_into().ok()?;
    let index = le_words(blob.get(128..128 + 2 * BLOCKS)?, u16::from_le_bytes)?;
    let blocks = blob.get(128 + 2 * BLOCKS..)?;
    Some(Classes {
        ascii,
        index,
        blocks,
    })
}

/// The shared tables.
pub(crate) fn classes() -> &'static Classes {
    static TABLE: OnceLock<Classes> = OnceLock::new();
    TABLE.get_or_init(|| {
        read(TABLES).unwrap_or(Classes {
            ascii: [0; 128],
            index: Cow::Borrowed(&[]),
            blocks: &[],
        })
    })
}

#[cfg(test)]
/// The class bits of `c` (`L`, `N`, `S`, `UP`, `LO`, `M`), for tests and tools that check
/// these tables against another engine.
pub(crate) fn char_classes(c: char) -> u8 {
    classes().of(c as u32)
}
