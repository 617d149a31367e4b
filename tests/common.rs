//! Shared test helpers: running the built tools, scratch folders, a seeded generator.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use assert_cmd::Command;

/// A command for one of the suite's binaries, run in `dir`.
pub fn tool(name: &str, dir: &std::path::Path) -> Command {
    let mut cmd = Command::cargo_bin(name).expect("binary built");
    cmd.current_dir(dir);
    cmd
}

/// A fresh empty scratch folder under cargo's target tmp dir.
pub fn scratch(label: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The SHA-256 of `bytes` in lowercase hex, as model headers and `bpe-model info` give it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// The seeded generator of the property tests (SplitMix64), the one the unit tests use.
#[allow(dead_code)]
#[path = "../src/test_rng.rs"]
mod test_rng;
pub(crate) use test_rng::Rng;

/// The scale-out corpus, the one the library's tests use.
#[path = "../src/tests/corpus.rs"]
pub(crate) mod corpus;

/// The environment variable that turns [`peak_rss_probe`] on: the program, its working
/// folder and its arguments, separated by `\x1f`.
#[cfg(target_os = "linux")]
const PROBE: &str = "TOKSUITE_PEAK_RSS_PROBE";

/// Runs `cmd` with `stdin` as its standard input and returns its output and its peak
/// resident memory in bytes, as the kernel accounts it for the child when it is reaped
/// (`wait4`'s `ru_maxrss`: what GNU `time -f %M` reports).
///
/// Linux counts in a process's peak the peak of the memory it replaced at `exec`, and a
/// child spawned from this test binary replaces (vfork) or copies (fork) the binary's
/// memory, which other tests running beside fill with hundreds of MB. So the tool is
/// started from a fresh, small copy of this binary that runs only [`peak_rss_probe`].
#[cfg(target_os = "linux")]
pub fn run_with_peak_rss(cmd: std::process::Command, stdin: &[u8]) -> (std::process::Output, u64) {
    use std::io::Write;
    use std::process::Stdio;

    let dir = scratch("peak-rss");
    let mut spec = vec![cmd.get_program().to_os_string()];
    spec.push(
        cmd.get_current_dir()
            .map_or_else(|| ".".into(), |d| d.as_os_str().to_os_string()),
    );
    spec.extend(cmd.get_args().map(|a| a.to_os_string()));
    let spec = spec.join(std::ffi::OsStr::new("\x1f"));
    let mut probe = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "common::peak_rss_probe",
            "--test-threads=1",
            "-q",
        ])
        .env(PROBE, spec)
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the probe");
    let mut input = probe.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&data);
    });
    assert!(probe.wait().expect("probe").success(), "the probe failed");
    writer.join().expect("writer");
    let read = |name: &str| std::fs::read(dir.join(name)).expect("probe output");
    let status: i32 = String::from_utf8(read("status")).unwrap().parse().unwrap();
    let peak: u64 = String::from_utf8(read("peak")).unwrap().parse().unwrap();
    let output = std::process::Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: read("stdout"),
        stderr: read("stderr"),
    };
    (output, peak)
}

/// Not a test of its own: when [`run_with_peak_rss`] starts this binary to run only
/// this, it runs the tool named in [`PROBE`] with this process's input, its output in
/// files of the current folder, and writes there the tool's wait status and peak.
#[cfg(target_os = "linux")]
#[test]
fn peak_rss_probe() {
    use std::os::unix::ffi::OsStrExt;
    use std::process::Stdio;

    let Some(spec) = std::env::var_os(PROBE) else {
        return;
    };
    let mut parts = spec
        .as_bytes()
        .split(|&b| b == 0x1f)
        .map(std::ffi::OsStr::from_bytes);
    let program = parts.next().unwrap();
    let cwd = parts.next().unwrap();
    let file = |name: &str| std::fs::File::create(name).expect("probe file");
    // Reaped below by `wait4`, which std's `wait` would not let us read the usage of.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(program)
        .current_dir(cwd)
        .args(parts)
        .stdin(Stdio::inherit())
        .stdout(file("stdout"))
        .stderr(file("stderr"))
        .spawn()
        .expect("spawn the tool");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `pid` is our own child, not yet reaped (`child.wait()` is never called),
    // and both pointers are valid for writes of their types for the call.
    #[allow(unsafe_code)]
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, usage.as_mut_ptr()) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    // SAFETY: `wait4` returned the child, so it filled in `usage` (it was zeroed anyway,
    // and every field of `rusage` is an integer).
    #[allow(unsafe_code)]
    let usage = unsafe { usage.assume_init() };
    // Linux counts ru_maxrss in KiB.
    std::fs::write("peak", (usage.ru_maxrss as u64 * 1024).to_string()).unwrap();
    std::fs::write("status", status.to_string()).unwrap();
}
