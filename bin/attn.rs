//! attn: stub.
#![deny(unsafe_code)]
fn main() {}
