//! word (stub, being written).
