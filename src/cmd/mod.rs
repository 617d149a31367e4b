//! What each tool does, from a plain config to bytes on a writer: the one library call
//! each binary in `bin/` makes after parsing its flags. Nothing here prints; progress
//! and notes reach the binary through callbacks.

pub mod decode;
pub mod encode;
pub mod model;
pub mod tokens;
pub mod train;
