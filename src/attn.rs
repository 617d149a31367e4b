//! attn (stub, being written).
