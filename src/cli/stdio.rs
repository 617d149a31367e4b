//! Whether standard output was open when the process started.
//!
//! A tool run as `bpe-encode f >&-` starts with file descriptor 1 closed, and the Rust
//! runtime, before `main`, opens `/dev/null` in its place (so that a file opened later
//! cannot become standard output by accident). Every write then succeeds and the output
//! is lost: the run would exit 0 having written nothing. Once `main` runs, that
//! `/dev/null` cannot be told from one the user chose (`> /dev/null`, Python's
//! `subprocess.DEVNULL`, both of which are fine), so the descriptor is looked at
//! earlier: a function in the executable's initialisation list (`.init_array`, run by
//! the loader before the runtime's own start-up) records whether descriptor 1 is open.
//! Where the platform has no such list wired here, the answer is "open".

use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const OPEN: u8 = 1;
const CLOSED: u8 = 2;

/// What [`record_stdout`] saw.
static STDOUT_AT_START: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Runs [`record_stdout`] before `main` (and before the runtime replaces a closed
/// descriptor). ELF platforms (Linux, the BSDs) run the functions of `.init_array`;
/// Apple's loader those of `__mod_init_func`.
#[cfg(all(unix, not(target_vendor = "apple")))]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static RECORD_STDOUT: extern "C" fn() = record_stdout;

#[cfg(target_vendor = "apple")]
#[allow(unsafe_code)]
#[used]
#[link_section = "__DATA,__mod_init_func"]
static RECORD_STDOUT: extern "C" fn() = record_stdout;

#[cfg(unix)]
extern "C" fn record_stdout() {
    // SAFETY: `fcntl(F_GETFD)` only reads the descriptor's flags (it fails with EBADF
    // when descriptor 1 is not open); no memory of ours is involved.
    #[allow(unsafe_code)]
    let flags = unsafe { libc::fcntl(1, libc::F_GETFD) };
    let state = if flags == -1 { CLOSED } else { OPEN };
    STDOUT_AT_START.store(state, Ordering::Relaxed);
}

/// True when standard output was closed when the process started (so that what the
/// tool writes there would be lost). Never inlined: it keeps this module's object,
/// and with it the initialisation entry above, in the linked executable.
#[inline(never)]
pub(crate) fn stdout_was_closed() -> bool {
    STDOUT_AT_START.load(Ordering::Relaxed) == CLOSED
}
