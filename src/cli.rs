//! cli (stub, being written).
