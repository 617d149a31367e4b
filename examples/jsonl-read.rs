//! Times the JSONL reading of `--field` alone (no encoding): every line's document
//! through `format::jsonl::document` (serde_json driven by a visitor that skips the other
//! members unbuilt), and the same lines through `serde_json::Value` (the whole object
//! built, then the member taken), on one thread. The figure behind the performance note
//! of `src/format/jsonl.rs`.
//!
//! Usage: `cargo run --release --example jsonl-read -- FILE.jsonl [FIELD]`; prints MB/s
//! of JSONL for each reading (best of three passes) and the document bytes found.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use toksuite::format::jsonl;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: jsonl-read FILE.jsonl [FIELD]");
        return ExitCode::from(2);
    };
    let field = args.get(1).map_or("text", String::as_str);
    let data = match std::fs::read(path) {
        Ok(data) => data,
        Err(e) => {
            eprintln!("jsonl-read: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    let lines: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let best = |read: &dyn Fn(&[u8], &mut Vec<u8>) -> bool| {
        let mut seconds = f64::INFINITY;
        let mut bytes = 0;
        for _ in 0..3 {
            let start = Instant::now();
            let mut doc = Vec::new();
            bytes = 0;
            for line in &lines {
                doc.clear();
                if read(line, &mut doc) {
                    bytes += doc.len();
                }
            }
            seconds = seconds.min(start.elapsed().as_secs_f64());
        }
        (data.len() as f64 / seconds / 1e6, bytes)
    };
    let (visitor, found) = best(&|line, doc| jsonl::document(line, field, doc).is_ok());
    let (value, found_too) = best(&|line, doc| {
        let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(line) else {
            return false;
        };
        match map.get(field).and_then(|v| v.as_str()) {
            Some(text) => {
                doc.extend_from_slice(text.as_bytes());
                true
            }
            None => false,
        }
    });
    println!(
        "lines {} document bytes {found} (Value: {found_too})",
        lines.len()
    );
    println!("jsonl::document: {visitor:.0} MB/s of JSONL");
    println!("serde_json::Value: {value:.0} MB/s of JSONL");
    ExitCode::SUCCESS
}
