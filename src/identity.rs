//! A model's identity: the built-in name, or the file name and the SHA-256 of its bytes.
//! An id stream's header carries it so that a reader can load the same model and check
//! it is unchanged (docs/formats.md, "Id streams").

use sha2::{Digest, Sha256};

/// Where a model came from; id-stream headers name it (docs/formats.md, "Id streams").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ModelSource {
    /// A model compiled into the binaries (`o200k_base`, ...).
    Builtin(&'static str),
    /// A model file, by the name the user gave and the SHA-256 of its bytes (lowercase hex).
    File { name: String, sha256: String },
}

/// Lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    let mut hex = String::with_capacity(2 * digest.len());
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}
