//! ndjson (stub, being written).
