//! train (stub, being written).
