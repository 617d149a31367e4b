//! Running out of memory ends a tool with `TOOL: error: out of memory ...` and exit
//! status 1, not the runtime's abort (SIGABRT, "memory allocation of N bytes failed").
//!
//! Rust's hook for a failed allocation is not stable, so the binaries install
//! [`ExitOnOom`] as their global allocator: the system allocator, plus, when it returns
//! no memory, a message written without allocating, the removal of a pending `-o`
//! temporary file, and `_exit(1)`. (`_exit`, not `exit`: another thread may hold the
//! standard-output lock that `exit`'s clean-up would wait for.) On Linux an allocation
//! fails when it is larger than memory and swap allow or a `ulimit -v` is reached; a
//! process that touches more memory than the system has may instead be ended by the
//! kernel's out-of-memory killer (SIGKILL), which no program can turn into a message.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The system allocator, ending the process with a message when memory runs out.
/// Install it in a binary with
/// `#[global_allocator] static ALLOC: toksuite::cli::ExitOnOom = toksuite::cli::ExitOnOom;`.
pub struct ExitOnOom;

// SAFETY: every call is passed to `System` unchanged; only a null result (no memory) is
// turned into the end of the process, which never returns a pointer at all.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for ExitOnOom {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            out_of_memory(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            out_of_memory(new_size);
        }
        p
    }
}

/// Writes `TOOL: error: out of memory (could not allocate N bytes)` and ends the process
/// with status 1. Allocates nothing for the message; the clean-up of a pending `-o`
/// file (which does allocate a little) runs once, so a failure inside it cannot recurse.
#[cold]
#[inline(never)]
fn out_of_memory(size: usize) -> ! {
    static ONCE: AtomicBool = AtomicBool::new(false);
    let first = !ONCE.swap(true, Ordering::SeqCst);
    let mut line = [0u8; 160];
    let used = {
        let mut cursor = std::io::Cursor::new(&mut line[..]);
        let tool = super::TOOL.get().copied().unwrap_or("toksuite");
        let _ = writeln!(
            cursor,
            "{tool}: error: out of memory (could not allocate {size} bytes)"
        );
        cursor.position() as usize
    };
    let _ = std::io::stderr().write_all(&line[..used]);
    if first {
        super::output::remove_pending_now();
    }
    #[cfg(unix)]
    {
        // SAFETY: `_exit` ends the process at once; nothing runs after it.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(1)
        }
    }
    #[cfg(not(unix))]
    std::process::exit(1)
}
