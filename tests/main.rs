//! Integration tests (stub).
