//! Integration tests (stub).
mod pretokenize_props;
