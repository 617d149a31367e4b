//! bpe-encode: stub.
#![deny(unsafe_code)]
fn main() {}
