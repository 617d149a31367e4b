//! bpe-decode: stub.
#![deny(unsafe_code)]
fn main() {}
