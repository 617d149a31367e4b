//! The library's property tests and goldens: each fast algorithm against its naive twin
//! on seeded random inputs, the built-in vocabularies against tiktoken's ids, the
//! attention kernel and generator against their references, the exports against the
//! real libraries' ids. They live inside the crate because they reach its internals,
//! which stay `pub(crate)`; the tools are tested from the outside in `tests/`.

mod attn_kernel;
mod attn_rng;
pub(crate) mod corpus;
mod decode_props;
mod encode_props;
mod interop;
mod parallel_props;
mod parts;
mod pretokenize_props;
mod scale_out;
mod tiktoken_goldens;
mod train_props;
mod units_props;
mod word_props;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) use crate::test_rng::Rng;

/// A fresh empty scratch folder under the system's temporary folder, removed when the
/// test process has not removed it (they are small; the name holds the process id).
pub(crate) fn scratch(label: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("toksuite-{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Writes `bytes` to `dir/name` and returns the path.
pub(crate) fn write(dir: &std::path::Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The encoding driver's configuration for `model` in line mode, on one thread, without
/// a header, writing to `output`; tests change what they vary.
pub(crate) fn encode_config(
    model: crate::model::Model,
    output: &std::path::Path,
) -> crate::cmd::encode::EncodeConfig {
    crate::cmd::encode::EncodeConfig {
        model,
        whole: false,
        count: false,
        header: false,
        allowed_special: crate::encode::AllowedSpecial::None,
        threads: 1,
        no_mmap: false,
        line_buffered: false,
        field: None,
        skip_invalid: false,
        format: crate::format::tokens::Format::Ndjson,
        eot: None,
        bos: None,
        shard_tokens: None,
        output: Some(output.to_path_buf()),
    }
}
