//! bpe-train: stub.
#![deny(unsafe_code)]
fn main() {}
