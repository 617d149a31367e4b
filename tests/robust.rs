//! Hostile and careless input (issue 25): every case ends cleanly, with exit 1 and a
//! message naming what was wrong, in bounded memory, never by a signal. Each test
//! reproduces one problem; where the problem was memory, the test measures the tool's
//! peak resident memory (`VmHWM` in `/proc/PID/status`, the kernel's high-water mark of
//! the process since its `exec`, read until the process ends; `wait4`'s `ru_maxrss`
//! would count the test process too, whose memory the child had before its `exec`).

use std::fs;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use predicates::prelude::*;
use sha2::{Digest, Sha256};

use crate::common::{scratch, tool, Rng};

/// The binaries the tests run (cargo builds them for the integration tests).
fn bin(name: &str) -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin(name)
}

/// A model file trained on `text` (a few merges), written as `m.json` in `dir`.
fn small_model(dir: &Path, text: &str, vocab: &str) -> Vec<u8> {
    let model = tool("bpe-train", dir)
        .args(["--vocab-size", vocab])
        .write_stdin(text)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    fs::write(dir.join("m.json"), &model).unwrap();
    model
}

/// What [`measured`] saw of a run.
#[derive(Debug)]
pub(crate) struct Measured {
    /// The exit status, or 128 + the signal that ended the process.
    pub(crate) status: i32,
    pub(crate) stderr: String,
    /// SHA-256 and length of standard output (large outputs are not kept).
    stdout_sha256: String,
    stdout_len: u64,
    /// Peak resident memory, KB.
    pub(crate) peak_kb: u64,
}

/// Runs `cmd` with `feed` writing its standard input (then closed), its standard output
/// hashed as it comes, and returns what it did with its peak resident memory: the last
/// `VmHWM` read from `/proc/PID/status` before the process ended, read every
/// millisecond (the mark only grows, so the last reading is the peak of all but the
/// process's last millisecond).
#[cfg(target_os = "linux")]
pub(crate) fn measured(mut cmd: StdCommand, feed: impl FnOnce(&mut dyn Write) + Send) -> Measured {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let (peak_kb, out, err) = std::thread::scope(|s| {
        s.spawn(move || {
            feed(&mut stdin);
            drop(stdin);
        });
        let out = s.spawn(move || {
            let mut hasher = Sha256::new();
            let mut block = vec![0u8; 1 << 16];
            let mut len = 0u64;
            loop {
                match stdout.read(&mut block) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        hasher.update(&block[..n]);
                        len += n as u64;
                    }
                }
            }
            (format!("{:x}", hasher.finalize()), len)
        });
        let err = s.spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        // Until the process is a zombie (its memory gone, `VmHWM` no longer listed);
        // it is not reaped before this loop ends, so its PID names it throughout.
        let mut peak = 0;
        loop {
            let status = fs::read_to_string(&status_file).unwrap_or_default();
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            match hwm {
                Some(kb) => peak = peak.max(kb),
                None => break,
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (peak, out.join().unwrap(), err.join().unwrap())
    });
    let status = child.wait().expect("wait");
    let status = match status.code() {
        Some(code) => code,
        None => {
            use std::os::unix::process::ExitStatusExt;
            128 + status.signal().unwrap_or(0)
        }
    };
    Measured {
        status,
        stderr: err,
        stdout_sha256: out.0,
        stdout_len: out.1,
        peak_kb,
    }
}

fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// `-m` reads regular files only: a device, a directory, a FIFO (without
/// `--model-pipe`) and a file over the 1 GiB limit are each exit 1 with what they are,
/// at once (before, `-m /dev/zero` read until memory ran out, and a FIFO waited forever).
#[test]
#[cfg(unix)]
fn model_paths_are_regular_files_within_the_limit() {
    let dir = scratch("model-paths");
    fs::create_dir(dir.join("folder")).unwrap();
    let big = fs::File::create(dir.join("big.json")).unwrap();
    big.set_len((1 << 30) + 1).unwrap();
    drop(big);
    assert!(StdCommand::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .unwrap()
        .success());
    let cases = [
        ("/dev/zero", "/dev/zero: is a character device, not a regular file"),
        ("folder", "folder: is a directory, not a regular file"),
        (
            "big.json",
            "big.json: is 1073741825 bytes, more than a model file may hold (1073741824 bytes, 1 GiB)",
        ),
        (
            "fifo",
            "fifo: is a pipe (FIFO), not a regular file; a model file is read from a regular \
             file, or from a pipe with --model-pipe",
        ),
    ];
    for name in ["bpe-encode", "bpe-decode"] {
        for (model, message) in cases {
            tool(name, &dir)
                .args(["-m", model])
                .write_stdin("[1]\n")
                .timeout(Duration::from_secs(30))
                .assert()
                .code(1)
                .stderr(predicate::str::starts_with(format!(
                    "{name}: error: {message}"
                )));
        }
    }
    // attn's --weights: the same rules, without a pipe flag.
    for (weights, message) in [
        (
            "/dev/zero",
            "/dev/zero: is a character device, not a regular file",
        ),
        ("folder", "folder: is a directory, not a regular file"),
        ("fifo", "fifo: is a pipe (FIFO), not a regular file"),
    ] {
        tool("attn", &dir)
            .args(["--weights", weights])
            .write_stdin("[1]\n")
            .timeout(Duration::from_secs(30))
            .assert()
            .code(1)
            .stderr(predicate::str::starts_with(format!(
                "attn: error: {message}"
            )));
    }
}

/// With `--model-pipe`, `-m` reads a model from a pipe (`-m <(zcat m.json.gz)`).
#[test]
#[cfg(unix)]
fn model_pipe_reads_a_model_from_a_pipe() {
    let dir = scratch("model-pipe");
    let model = small_model(&dir, "hello hello world", "260");
    assert!(StdCommand::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .unwrap()
        .success());
    let fifo = dir.join("fifo");
    let writer = std::thread::spawn(move || fs::write(fifo, model).unwrap());
    tool("bpe-encode", &dir)
        .args(["--model-pipe", "-m", "fifo", "--no-header"])
        .write_stdin("hello")
        .timeout(Duration::from_secs(30))
        .assert()
        .success()
        .stdout(predicate::str::is_match(r"^\[\d+(,\d+)*\]\n$").unwrap());
    writer.join().unwrap();
}

/// A path in an id stream's header is data: a device, a FIFO, a directory or an
/// over-large file is refused before it is opened for reading whole, at once and in
/// little memory (before: `{"model":"/dev/zero"}` read 10 GB in 20 s, a FIFO blocked).
#[test]
#[cfg(target_os = "linux")]
fn header_paths_never_block_or_read_without_bound() {
    let dir = scratch("header-paths");
    fs::create_dir(dir.join("folder")).unwrap();
    let big = fs::File::create(dir.join("big.json")).unwrap();
    big.set_len((1 << 30) + 1).unwrap();
    drop(big);
    assert!(StdCommand::new("mkfifo")
        .arg(dir.join("fifo"))
        .status()
        .unwrap()
        .success());
    let hash = "0".repeat(64);
    for (path, what) in [
        ("/dev/zero", "is a character device"),
        ("fifo", "is a pipe (FIFO)"),
        ("folder", "is a directory"),
        (
            "big.json",
            "is 1073741825 bytes, more than a model file named by a stream header may hold",
        ),
    ] {
        let mut cmd = StdCommand::new(bin("bpe-decode"));
        cmd.current_dir(&dir);
        let stream = format!("{{\"model\":\"{path}\",\"sha256\":\"{hash}\"}}\n[1]\n");
        let run = measured(cmd, |w| {
            let _ = w.write_all(stream.as_bytes());
        });
        assert_eq!(run.status, 1, "{path}: {run:?}");
        assert!(
            run.stderr.starts_with(&format!(
                "bpe-decode: error: <stdin>:1: the stream names model \"{path}\" (sha256 000000000000), which cannot be loaded ({path}: {what}"
            )),
            "{path}: {}",
            run.stderr
        );
        assert!(run.peak_kb < 40_000, "{path}: peak {} KB", run.peak_kb);
    }
}

/// A header naming a regular file is checked against its sha256 in small blocks
/// before the file is read whole: a large file that is not the model costs no memory.
#[test]
#[cfg(target_os = "linux")]
fn a_header_naming_another_file_is_not_read_whole() {
    let dir = scratch("header-other");
    fs::write(dir.join("corpus.txt"), vec![b'a'; 200 << 20]).unwrap();
    let mut cmd = StdCommand::new(bin("bpe-decode"));
    cmd.current_dir(&dir);
    let stream = format!(
        "{{\"model\":\"corpus.txt\",\"sha256\":\"{}\"}}\n[1]\n",
        "1".repeat(64)
    );
    let run = measured(cmd, |w| {
        let _ = w.write_all(stream.as_bytes());
    });
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(
        run.stderr,
        "bpe-decode: error: <stdin>:1: the stream names model \"corpus.txt\" (sha256 \
         111111111111), but that file now has other content; give the right model with -m\n"
    );
    assert!(run.peak_kb < 40_000, "peak {} KB", run.peak_kb);
}

/// Each header error names its real cause (before, a header with no sha256 said "that
/// file now has other content"), and any sha256 text is quoted without a panic (a
/// multi-byte character at the cut of its first 12 bytes made `bpe-decode -m` panic).
#[test]
fn header_errors_name_their_cause() {
    let dir = scratch("header-causes");
    small_model(&dir, "hello hello world", "260");
    tool("bpe-decode", &dir)
        .write_stdin("{\"model\":\"m.json\"}\n[104]\n")
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "bpe-decode: error: <stdin>:1: the stream names model \"m.json\" but no \"sha256\" \
             of its file, so the file cannot be checked",
        ));
    tool("bpe-decode", &dir)
        .args(["-m", "m.json"])
        .write_stdin("{\"model\":\"m.json\"}\n[104]\n")
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "bpe-decode: error: <stdin>:1: the stream names model \"m.json\" but no \"sha256\" \
             of its file, so it cannot be checked against the model -m gives",
        ));
    tool("bpe-decode", &dir)
        .write_stdin(format!(
            "{{\"model\":\"o200k_base\",\"sha256\":\"{}\"}}\n[104]\n",
            "2".repeat(64)
        ))
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with(
            "bpe-decode: error: <stdin>:1: the stream names built-in model \"o200k_base\" with a \"sha256\"",
        ));
    tool("bpe-decode", &dir)
        .args(["-m", "m.json"])
        .write_stdin("{\"model\":\"m.json\",\"sha256\":\"aéééééééé\"}\n[104]\n")
        .assert()
        .code(1)
        .stderr(
            "bpe-decode: error: <stdin>:1: the stream was encoded with model \"m.json\" (sha256 \
             aéééééééé) but -m gives another model\n",
        );
}

/// Messages quote the number they saw (before: `[-1]` said "negative id 1", `[1e3]`
/// "id 1e is not an integer", `[71.0]` "id 71. ...").
#[test]
fn id_errors_quote_what_they_saw() {
    let dir = scratch("quote");
    for (record, message) in [
        ("[-1]", "negative id -1"),
        ("[1e3]", "id 1e3 is not an integer"),
        ("[71.0]", "id 71.0 is not an integer"),
        ("[5,2.5E+7]", "id 2.5E+7 is not an integer"),
        ("[007]", "invalid number 007 (leading zero)"),
        (
            "[99999999999]",
            "id 99999999999 is out of range (ids are below 2^32)",
        ),
        (
            "[1,\"x\"]",
            "expected a non-negative integer id, found \"\\\"x\\\"\"",
        ),
        ("[1;2]", "expected ',' or ']' after an id, found \";2\""),
    ] {
        tool("bpe-decode", &dir)
            .write_stdin(format!("{record}\n"))
            .assert()
            .code(1)
            .stderr(format!("bpe-decode: error: <stdin>:1: {message}\n"));
    }
}

/// `bpe-decode` reads a long line from a pipe in parts (before, a 500 MB id line from a
/// pipe took 0.5-1 GB, and `bpe-encode --whole | bpe-decode --whole` of 2 GB aborted).
#[test]
#[cfg(target_os = "linux")]
fn decode_reads_a_long_piped_line_in_bounded_memory() {
    let dir = scratch("decode-long");
    small_model(&dir, "ab ab ab cd", "258");
    // ~100 MB of ids: bytes 0..=255 and the two merges, one --whole record.
    let mut ids = Vec::with_capacity(110 << 20);
    let mut expected = Vec::new();
    let mut rng = Rng(25);
    ids.push(b'[');
    let mut first = true;
    while ids.len() < 100 << 20 {
        let id = rng.below(256);
        if !first {
            ids.push(b',');
        }
        first = false;
        ids.extend_from_slice(id.to_string().as_bytes());
        expected.push(id as u8);
    }
    ids.extend_from_slice(b"]\n");
    let mut cmd = StdCommand::new(bin("bpe-decode"));
    cmd.current_dir(&dir).args(["-m", "m.json", "--whole"]);
    let run = measured(cmd, |w| {
        let _ = w.write_all(&ids);
    });
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout_len, expected.len() as u64);
    assert_eq!(run.stdout_sha256, sha256(&expected));
    assert!(run.peak_kb < 40_000, "peak {} KB", run.peak_kb);
}

/// `bpe-encode --whole` reads a pipe in parts, and a long line too (before, the whole
/// input was read into memory first, and its ids held: over 200 MB here). What stays is
/// the encoder's working memory for the pieces on its threads, whatever the input size.
#[test]
#[cfg(target_os = "linux")]
fn encode_reads_a_long_piped_record_in_bounded_memory() {
    let dir = scratch("encode-long");
    small_model(&dir, "ab ab ab cd", "258");
    let mut rng = Rng(7);
    let words: [&[u8]; 6] = [b"ab", b"cd", b" ", b"abcd", b"x", b"\xff"];
    let mut text = Vec::with_capacity(129 << 20);
    while text.len() < 128 << 20 {
        text.extend_from_slice(words[rng.below(words.len())]);
    }
    fs::write(dir.join("text"), &text).unwrap();
    // From the file (mapped), as one record: the reference ids. The text has no line
    // break, so as lines it is the same one record.
    let reference = tool("bpe-encode", &dir)
        .args(["-m", "m.json", "--whole", "text"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    for args in [&["--whole"][..], &[][..]] {
        let mut cmd = StdCommand::new(bin("bpe-encode"));
        cmd.current_dir(&dir).args(["-m", "m.json"]).args(args);
        let run = measured(cmd, |w| {
            let _ = w.write_all(&text);
        });
        assert_eq!(run.status, 0, "{args:?} {run:?}");
        assert_eq!(run.stdout_sha256, sha256(&reference), "{args:?}");
        assert!(run.peak_kb < 80_000, "{args:?}: peak {} KB", run.peak_kb);
    }
}

/// Running out of memory is `TOOL: error: out of memory ...` and exit 1, not an abort
/// (SIGABRT with "memory allocation of N bytes failed"). Reproduced with an address-space
/// limit that `bpe-train`'s reading of its whole input passes.
#[test]
#[cfg(target_os = "linux")]
fn out_of_memory_is_a_message_and_exit_1() {
    let dir = scratch("oom");
    fs::write(dir.join("text"), vec![b'a'; 300 << 20]).unwrap();
    let script = format!(
        "ulimit -v 250000; exec {} --no-mmap -q text",
        bin("bpe-train").display()
    );
    let out = StdCommand::new("sh")
        .current_dir(&dir)
        .args(["-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("bpe-train: error: out of memory (could not allocate "),
        "{stderr}"
    );
}

/// A closed standard output is an error (exit 1), not a silent success: the runtime puts
/// `/dev/null` in its place, so the output was lost with exit 0. `--help` and
/// `--version` that cannot be written (closed, or a full disk) are exit 1 too.
#[test]
#[cfg(target_os = "linux")]
fn closed_or_full_stdout_is_exit_1_in_every_tool() {
    let dir = scratch("closed-stdout");
    fs::write(dir.join("in.txt"), "[1]\n").unwrap();
    for name in ["bpe-train", "bpe-encode", "bpe-decode", "attn"] {
        let path = bin(name);
        for (redirect, message) in [
            (">&-", "<stdout>: standard output is closed"),
            (
                "> /dev/full",
                "<stdout>: write failed: no space left on device",
            ),
        ] {
            for flag in ["--help", "--version"] {
                let out = StdCommand::new("sh")
                    .current_dir(&dir)
                    .args(["-c", &format!("exec {} {flag} {redirect}", path.display())])
                    .output()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "{name} {flag} {redirect}: {stderr}"
                );
                assert!(
                    stderr.starts_with(&format!("{name}: error: {message}")),
                    "{name} {flag} {redirect}: {stderr}"
                );
            }
        }
        let out = StdCommand::new("sh")
            .current_dir(&dir)
            .args(["-c", &format!("exec {} in.txt >&-", path.display())])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "{name}: error: <stdout>: standard output is closed"
            )),
            "{name}: {stderr}"
        );
        // `> /dev/null` is a choice, not a closed output.
        let out = StdCommand::new("sh")
            .current_dir(&dir)
            .args(["-c", &format!("exec {} in.txt > /dev/null", path.display())])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{name}: {:?}", out);
    }
}

/// `-j` is capped at 4 threads per core (and at least 8): `-j 100000` started 100,000
/// threads (8 s instead of 0.12 s).
#[test]
fn threads_are_capped() {
    use toksuite::cli::ThreadsArg;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cap = (4 * cores).max(8);
    assert_eq!(ThreadsArg { threads: 100_000 }.count(), cap);
    assert_eq!(ThreadsArg { threads: 3 }.count(), 3);
    assert_eq!(ThreadsArg { threads: 0 }.count(), cores);
    let dir = scratch("threads");
    tool("bpe-encode", &dir)
        .args(["-j", "100000", "--no-header"])
        .write_stdin("hello world\n")
        .assert()
        .success()
        .stdout("[24912,2375]\n");
}

/// A mapped input that another program truncates while a tool reads it ends with exit 1
/// and a message naming the file, never a signal death (SIGBUS, exit 135), and leaves no
/// `-o` temporary file. The truncation races with the reading, so each attempt truncates
/// later; an attempt that truncates before the map, or after the reading, ends cleanly
/// too, and at least one attempt must hit the reading.
#[cfg(target_os = "linux")]
#[test]
fn a_mapped_input_that_shrinks_is_an_error_not_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("robust-sigbus");
    let mut rng = Rng(0x5eed_b005);
    let line: Vec<u8> = (0..4000).map(|_| b"abcdefgh ij"[rng.below(11)]).collect();
    let mut hit = false;
    for attempt in 0..8u64 {
        let path = dir.join("big.txt");
        let mut text = Vec::with_capacity(48 << 20);
        while text.len() < 48 << 20 {
            text.extend_from_slice(&line);
            text.push(b'\n');
        }
        fs::write(&path, &text).unwrap();
        drop(text);
        let child = StdCommand::new(bin("bpe-encode"))
            .current_dir(&dir)
            .args(["-j", "1", "--count", "-o", "out.txt", "big.txt"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + 40 * attempt));
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.signal(), None, "attempt {attempt}: {stderr}");
        let temps = fs::read_dir(&dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".tmp")
            })
            .count();
        assert_eq!(temps, 0, "attempt {attempt}: a temporary file is left");
        if output.status.code() == Some(1) {
            assert_eq!(
                stderr,
                "bpe-encode: error: big.txt: the file shrank while it was read (another \
                 program truncated or replaced it); --no-mmap reads files that may change\n"
            );
            assert!(!dir.join("out.txt").exists());
            hit = true;
            break;
        }
        assert_eq!(output.status.code(), Some(0), "attempt {attempt}: {stderr}");
        let _ = fs::remove_file(dir.join("out.txt"));
    }
    assert!(hit, "no attempt truncated the file while it was read");
}
