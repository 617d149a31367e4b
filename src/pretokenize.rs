//! pretokenize (stub, being written).
