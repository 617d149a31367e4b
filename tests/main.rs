//! Integration tests (stub).

mod word_props;
