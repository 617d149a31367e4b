//! decode (stub, being written).
