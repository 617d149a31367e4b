//! The one integration-test binary: each module tests one tool or library area.

mod cli_bpe;
mod common;
mod pretokenize_props;
mod word_props;
