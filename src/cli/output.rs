//! The one output of a tool: standard output through one `BufWriter`, or `-o FILE`
//! written atomically (a temporary file in the same folder, renamed into place; removed
//! on failure and on SIGINT, SIGTERM or SIGHUP).

use std::fs;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where a tool's data goes: standard output through one `BufWriter`, or a temporary
/// file beside `-o FILE` that `finish` renames into place. Dropping an unfinished
/// `Output` removes the temporary file, so a failed run never leaves a partial FILE.
pub struct Output {
    writer: io::BufWriter<Box<dyn Write>>,
    target: Option<(PathBuf, PathBuf)>,
    /// `<stdout>`, or the name given to `-o`: where write failures happen.
    name: String,
}

impl Output {
    /// Opens standard output, or a temporary file for `path`.
    ///
    /// Only a regular file (or a name not yet taken) is written atomically. Anything else
    /// that already exists — `/dev/null`, a FIFO, a terminal — is opened and written in
    /// place: renaming over it would replace a device or pipe with a plain file. A
    /// symbolic link is followed, so the file it points to is replaced, not the link.
    pub fn create(path: Option<&Path>) -> Result<Output> {
        let capacity = 1 << 16;
        let Some(path) = path else {
            let stdout = io::stdout().lock();
            // On a terminal each line shows as soon as it is complete, as stdio's line
            // buffering does: typing a line into `bpe-encode` answers it at once.
            // Elsewhere (pipes, files) output goes in large blocks.
            let terminal = stdout.is_terminal();
            let out = Output {
                writer: io::BufWriter::with_capacity(capacity, Box::new(stdout)),
                target: None,
                name: "<stdout>".to_string(),
            };
            return Ok(out.line_buffered(terminal));
        };
        let display = path.display().to_string();
        let existing = fs::metadata(path).ok();
        if let Some(meta) = &existing {
            if !meta.is_file() {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| Error::io("cannot open output", e).in_file(&display))?;
                return Ok(Output {
                    writer: io::BufWriter::with_capacity(capacity, Box::new(file)),
                    target: None,
                    name: display,
                });
            }
        }
        let final_path = match existing {
            Some(_) => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            None => path.to_path_buf(),
        };
        let dir = match final_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = final_path
            .file_name()
            .ok_or_else(|| Error::usage("-o needs a file name").in_file(&display))?;
        let (temp, file) = create_temp(&dir, name)
            .map_err(|e| Error::io("cannot create output", e).in_file(&display))?;
        remove_on_signal(&temp);
        if let Some(meta) = &existing {
            // The file it replaces keeps its mode (a script stays executable); the owner
            // cannot be kept without privileges. Best effort: the data matters more.
            let _ = file.set_permissions(meta.permissions());
        }
        Ok(Output {
            writer: io::BufWriter::with_capacity(capacity, Box::new(file)),
            target: Some((temp, final_path)),
            name: display,
        })
    }

    /// With `on` (`--line-buffered`), each complete line is written at once, as on a
    /// terminal. Call before writing anything.
    pub fn line_buffered(mut self, on: bool) -> Output {
        if on && self.writer.capacity() > 0 {
            let blocks = std::mem::replace(
                &mut self.writer,
                io::BufWriter::with_capacity(0, Box::new(io::sink())),
            );
            // Nothing is written yet: the buffer given up here is empty.
            let (inner, _) = blocks.into_parts();
            self.writer = io::BufWriter::with_capacity(0, Box::new(io::LineWriter::new(inner)));
        }
        self
    }

    /// Flushes everything and, for `-o`, moves the finished file into place.
    pub fn finish(mut self) -> Result<()> {
        self.writer
            .flush()
            .map_err(|e| Error::write(e).in_file(&self.name))?;
        if let Some((temp, path)) = self.target.take() {
            let renamed = fs::rename(&temp, &path);
            keep_on_signal(&temp);
            if let Err(e) = renamed {
                let _ = fs::remove_file(&temp);
                return Err(Error::io("cannot rename output into place", e).in_file(&self.name));
            }
        }
        Ok(())
    }

    /// Ends a run: on success, `finish`; on failure, flushes what was written before the
    /// bad record (standard output keeps it; a `-o` temporary file is removed) and passes
    /// the error on, a write failure named after this output.
    pub fn finish_with<T>(mut self, result: Result<T>) -> Result<T> {
        match result {
            Ok(value) => self.finish().map(|()| value),
            Err(err) => {
                let _ = self.writer.flush();
                Err(err.at_output(&self.name))
            }
        }
    }
}

/// A new, empty file `.NAME.tmpPID` (or `.NAME.tmpPID.K`) in `dir`, created exclusively:
/// a file already there under that name (left by a killed run, or a symbolic link planted
/// to make the tool truncate what it points to) is never opened, so never truncated.
fn create_temp(dir: &Path, name: &std::ffi::OsStr) -> io::Result<(PathBuf, fs::File)> {
    let pid = std::process::id();
    let mut attempt = 0u32;
    loop {
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".tmp{pid}"));
        if attempt > 0 {
            temp_name.push(format!(".{attempt}"));
        }
        let temp = dir.join(temp_name);
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some((temp, _)) = self.target.take() {
            let _ = fs::remove_file(&temp);
            keep_on_signal(&temp);
        }
    }
}

/// Temporary output files not yet renamed into place: what a terminating signal must
/// remove before the process ends.
static PENDING: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Removes `temp` if SIGINT, SIGTERM or SIGHUP ends the run (Ctrl-C on a long
/// `bpe-train -o`), so that an interrupted run leaves neither half a FILE nor its
/// temporary file. A thread waits for those signals, started with the first temporary
/// file (runs writing to standard output never pay for it); when one comes it removes
/// the pending files and ends the process as the signal would have, so the shell still
/// sees the signal. A signal the run was started with ignored (`nohup`, a background
/// job of a script) stays ignored. If the signals cannot be watched, a killed run leaves
/// the temporary file, as it always does on SIGKILL.
fn remove_on_signal(temp: &Path) {
    lock_pending().push(temp.to_path_buf());
    #[cfg(unix)]
    watch_signals();
}

/// Starts the thread of [`remove_on_signal`], once.
#[cfg(unix)]
fn watch_signals() {
    use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
    static WATCH: std::sync::Once = std::sync::Once::new();
    WATCH.call_once(|| {
        let Some(ignored) = ignored_signals() else {
            return;
        };
        let watched = [SIGINT, SIGTERM, SIGHUP]
            .into_iter()
            .filter(|&signal| ignored & (1 << (signal - 1)) == 0);
        let Ok(mut signals) = signal_hook::iterator::Signals::new(watched) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    for temp in lock_pending().drain(..) {
                        let _ = fs::remove_file(temp);
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                }
            });
    });
}

/// The signals this process ignores, as the kernel's mask (bit `signal - 1`), read from
/// `/proc/self/status`: a handler must not undo an ignore the run was started with, and
/// asking the system directly (`sigaction`) would need `unsafe`. `None` if unknown.
#[cfg(all(unix, target_os = "linux"))]
fn ignored_signals() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// Off Linux there is no `/proc/self/status` to ask: `None`, so no handler is installed
/// and an interrupted run may leave its temporary file behind (never a half-written
/// FILE), rather than risk undoing a `nohup`.
#[cfg(all(unix, not(target_os = "linux")))]
fn ignored_signals() -> Option<u64> {
    None
}

/// `temp` was renamed into place or removed: a signal no longer needs to remove it.
fn keep_on_signal(temp: &Path) {
    lock_pending().retain(|t| t != temp);
}

/// The pending list, even if a thread panicked holding it (a list of paths cannot be
/// left half-updated).
fn lock_pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
