//! toksuite: the library behind `bpe-train`, `bpe-encode`, `bpe-decode` and `attn`.
//! All logic lives here; the binaries in `bin/` only parse flags and report.

#![deny(unsafe_code)]
// The docs are written for those who work on the crate: public items' docs name the
// crate-internal items they rest on (`cargo doc --document-private-items` links them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod attn;
mod blob;
pub mod cli;
pub mod cmd;
pub mod decode;
pub mod encode;
pub mod error;
pub mod format;
mod hugemem;
pub(crate) mod identity;
pub mod input;
pub mod model;
pub(crate) mod parallel;
pub mod pretokenize;
#[cfg(test)]
mod test_rng;
#[cfg(test)]
mod tests;
pub mod train;
pub mod word;

pub use error::{Error, ErrorKind, Result};
