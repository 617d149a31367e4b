//! Memory bounds of bpe-encode and bpe-decode, measured from outside as the kernel
//! accounts a child's peak resident memory: one chunk without a split point costs a few
//! bytes of memory per byte however long it is, and a model file whose tokens would hold
//! gigabytes (each merge doubling the last token) loads and runs in megabytes.

#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{run_with_peak_rss, scratch, Rng};

const MIB: u64 = 1 << 20;

fn tool(name: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin(name));
    cmd.current_dir(dir);
    cmd
}

/// A model file of 30 merges, each doubling the last token (`256 = (97, 97)`, `257 =
/// (256, 256)`, ...): token `256 + k` is `2^(k + 1)` bytes of `a`, 4 GiB in all, just
/// within the format's limit.
fn doubling_chain(dir: &Path) -> PathBuf {
    let mut file = String::from("{\"kind\":\"bpe\",\"version\":1,\"split\":\"none\"}\n");
    for k in 0..30u32 {
        let part = if k == 0 { 97 } else { 255 + k };
        file.push_str(&format!(
            "{{\"id\":{},\"pair\":[{part},{part}]}}\n",
            256 + k
        ));
    }
    let path = dir.join("chain.json");
    std::fs::write(&path, file).unwrap();
    path
}

#[test]
fn a_model_whose_tokens_hold_gigabytes_runs_in_megabytes() {
    let dir = scratch("chain");
    let model = doubling_chain(&dir);
    let model = model.to_str().unwrap();

    let mut encode = tool("bpe-encode", &dir);
    encode.args(["-m", model, "--no-header"]);
    let (out, peak) = run_with_peak_rss(encode, b"aaaa\naaaaaaaa\naaa\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"[257]\n[258]\n[256,97]\n");
    assert!(peak < 48 * MIB, "bpe-encode peaked at {} MiB", peak / MIB);

    let mut whole = tool("bpe-encode", &dir);
    whole.args(["-m", model, "--no-header", "--whole"]);
    let (out, peak) = run_with_peak_rss(whole, &[b'a'; 4100]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 4100 = 4096 + 4: tokens 267 and 257.
    assert_eq!(out.stdout, b"[267,257]\n");
    assert!(
        peak < 48 * MIB,
        "bpe-encode --whole peaked at {} MiB",
        peak / MIB
    );

    let mut decode = tool("bpe-decode", &dir);
    decode.args(["-m", model]);
    let (out, peak) = run_with_peak_rss(decode, b"[257]\n[258]\n[256,97]\n[266]\n[ 257 ]\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = b"aaaa\naaaaaaaa\naaa\n".to_vec();
    expected.extend_from_slice(&[b'a'; 2048]);
    expected.extend_from_slice(b"\naaaa\n");
    assert_eq!(out.stdout, expected);
    assert!(peak < 48 * MIB, "bpe-decode peaked at {} MiB", peak / MIB);
}

/// 8 MB without a split point (one letter over and over; random lowercase letters) is
/// one chunk for every built-in pattern and one sequence for a `--split none` model: the
/// whole run, input, ids and output included, stays under 16 bytes per input byte.
#[test]
fn one_long_chunk_needs_a_few_bytes_per_byte() {
    let dir = scratch("long-chunk");
    let mut rng = Rng::new(25);
    let sample = rng.bytes_from(b"abcdefghijklmnopqrstuvwxyz", 100_000);
    let trained = tool("bpe-train", &dir)
        .args(["-q", "--vocab-size", "2000", "-o", "none.json"])
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(&sample)?;
            child.wait()
        })
        .unwrap();
    assert!(trained.success());
    let n = 8 << 20;
    let run = vec![b'a'; n];
    let letters = rng.bytes_from(b"abcdefghijklmnopqrstuvwxyz", n);
    for model in ["o200k_base", "cl100k_base", "none.json"] {
        for (what, text) in [("a run of one letter", &run), ("random letters", &letters)] {
            let mut encode = tool("bpe-encode", &dir);
            encode.args(["-q", "-j", "1", "-m", model]);
            let (out, peak) = run_with_peak_rss(encode, text);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                peak < 16 * n as u64,
                "{model}, {what}: {} MiB for {} MiB of input",
                peak / MIB,
                n as u64 / MIB
            );
        }
    }
}

/// A run of one letter is the trainer's worst case for memory (one chunk, a pass over every
/// position per doubling); its peak stays within 16 bytes per input byte, the mapped input
/// included, plus the process's fixed cost (the binary, its tables: under 32 MB), whole
/// text and one regex chunk alike (15.8 bytes per byte measured for 20 MB, fixed cost
/// included).
#[cfg(target_os = "linux")]
#[test]
fn a_run_of_one_letter_trains_in_16_bytes_per_byte() {
    let n: u64 = 20 << 20;
    let dir = crate::common::scratch("train-rss");
    let path = dir.join("a.txt");
    std::fs::write(&path, vec![b'a'; n as usize]).unwrap();
    for split in ["none", "gpt4"] {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("bpe-train"));
        cmd.args(["--vocab-size", "300", "--split", split])
            .arg(&path);
        let run = crate::robust::measured(cmd, |_| {});
        assert_eq!(run.status, 0, "--split {split}: {}", run.stderr);
        let peak = run.peak_kb * 1024;
        // The input alone is resident once read: a peak below it was not observed.
        assert!(
            peak >= n,
            "--split {split}: peak {peak} below the input's {n} bytes"
        );
        let bound = 16 * n + (32 << 20);
        assert!(
            peak <= bound,
            "--split {split}: peak RSS {peak} bytes over {bound} ({:.1} bytes per input byte)",
            peak as f64 / n as f64
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
