//! The one integration-test binary: each module tests one tool or library area.

mod attn_cli;
mod attn_kernel;
mod attn_rng;
mod cli_bpe;
mod common;
mod decode_props;
mod docs;
mod encode_props;
mod interop;
mod layout;
mod memory_bounds;
mod parallel_props;
mod pretokenize_props;
mod robust;
mod scale_out;
mod tiktoken_goldens;
mod tokens;
mod train_props;
mod word_props;
