//! Integration tests (stub).
mod train_props;
