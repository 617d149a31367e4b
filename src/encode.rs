//! encode (stub, being written).
