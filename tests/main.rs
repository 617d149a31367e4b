//! The one integration-test binary: each module tests one tool or library area.

mod attn_cli;
mod cli_bpe;
mod common;
mod decode_streams;
mod docs;
mod encode_threads;
mod interop;
mod layout;
mod memory_bounds;
mod robust;
mod scale_out;
mod tokens;
