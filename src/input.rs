//! input (stub, being written).
