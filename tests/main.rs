//! Integration tests (stub).
mod attn_rng;
