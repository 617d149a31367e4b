//! The one integration-test binary: each module tests one tool or library area.

mod attn_cli;
mod attn_kernel;
mod attn_rng;
mod cli_bpe;
mod common;
mod pretokenize_props;
mod train_props;
mod word_props;
