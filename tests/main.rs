//! Integration tests: one binary, one module per area.

mod encode_props;
mod tiktoken_goldens;
