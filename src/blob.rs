//! Tables that `build.rs` writes into `OUT_DIR`, included in the binaries aligned to 16
//! bytes so that their arrays of words are read in place, not copied: a copy costs every
//! run a page fault per 4 KB of table, paid before the first byte of input is read.

use std::borrow::Cow;

use zerocopy::{FromBytes, Immutable};

/// Bytes with the alignment of a u128 (16 bytes on x86-64 and AArch64: a u64's words and
/// the decoder's 16-byte slots are read in place).
#[repr(C)]
pub(crate) struct Aligned<B: ?Sized> {
    pub(crate) _align: [u128; 0],
    pub(crate) bytes: B,
}

/// `&'static [u8]` of the file `build.rs` wrote to `OUT_DIR`, aligned as [`Aligned`].
macro_rules! include_blob {
    ($file:literal) => {
        &$crate::blob::Aligned {
            _align: [],
            bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/", $file)),
        }
        .bytes
    };
}
pub(crate) use include_blob;

/// `bytes` as little-endian words of `N` bytes: borrowed where the target is
/// little-endian and `bytes` aligned for `T` (always, for a blob's tables at offsets
/// that are multiples of `N`), decoded into a copy otherwise. `None` if `bytes` is not a
/// whole number of words.
pub(crate) fn le_words<T, const N: usize>(
    bytes: &'static [u8],
    from_le: fn([u8; N]) -> T,
) -> Option<Cow<'static, [T]>>
where
    T: FromBytes + Immutable + Clone,
{
    if !bytes.len().is_multiple_of(N) {
        return None;
    }
    match <[T]>::ref_from_bytes(bytes) {
        Ok(words) if cfg!(target_endian = "little") => Some(Cow::Borrowed(words)),
        _ => Some(Cow::Owned(
            bytes
                .chunks_exact(N)
                .map(|chunk| {
                    let mut word = [0u8; N];
                    word.copy_from_slice(chunk);
                    from_le(word)
                })
                .collect(),
        )),
    }
}
