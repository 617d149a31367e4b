//! The one output of a tool: standard output through one `BufWriter`, or `-o FILE`
//! written atomically (a temporary file in the same folder, renamed into place; removed
//! on failure and on SIGINT, SIGTERM or SIGHUP). The same for each file of a tool that
//! writes several or fills in a header at the end ([`AtomicFile`]: token files), and
//! scratch files for what only the end of a run can place ([`SpillFile`]).

use std::fs;
use std::io::{self, IsTerminal, Read, Seek, Write};
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
            if super::stdio::stdout_was_closed() {
                // Writing would go to the `/dev/null` the runtime put in its place.
                return Err(Error::data(
                    "standard output is closed (the output would be lost); give -o FILE or \
                     redirect it",
                )
                .in_file("<stdout>"));
            }
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
        if let Some(file) = open_in_place(path)? {
            return Ok(Output {
                writer: io::BufWriter::with_capacity(capacity, Box::new(file)),
                target: None,
                name: display,
            });
        }
        let (file, temp, final_path) = create_beside(path)?;
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
    pub fn finish_with<T>(self, result: Result<T>) -> Result<T> {
        match result {
            Ok(value) => self.finish().map(|()| value),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// Ends a failed run: what was written before the failure is flushed (standard
    /// output keeps it; a `-o` temporary file is removed) and the error is returned, a
    /// write failure named after this output.
    pub(crate) fn fail(mut self, err: Error) -> Error {
        let _ = self.writer.flush();
        err.at_output(&self.name)
    }
}

/// `path` opened for writing in place when it exists and is not a regular file
/// (`/dev/null`, a FIFO, a terminal: renaming over it would replace a device or pipe with
/// a plain file); `None` when it is to be written atomically.
fn open_in_place(path: &Path) -> Result<Option<fs::File>> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() => fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map(Some)
            .map_err(|e| Error::io("cannot open output", e).in_file(&path.display().to_string())),
        _ => Ok(None),
    }
}

/// The temporary file that stands for `path` until it is renamed into place: created
/// fresh in `path`'s folder (see [`create_temp`]), removed if a signal ends the run, with
/// the mode of the file it will replace. Returns the file, its name and the final name (a
/// symbolic link at `path` is followed, so the file it names is replaced).
fn create_beside(path: &Path) -> Result<(fs::File, PathBuf, PathBuf)> {
    let display = path.display().to_string();
    let existing = fs::metadata(path).ok();
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
    Ok((file, temp, final_path))
}

/// One output file of a tool that writes several, or that must go back and fill in a
/// header once the data is written (token files): written under a temporary name in the
/// same folder and renamed into place by [`AtomicFile::commit`], as `-o` is. Dropped
/// uncommitted, the temporary file is removed; a terminating signal removes it too.
pub(crate) struct AtomicFile {
    writer: io::BufWriter<fs::File>,
    temp: Option<PathBuf>,
    path: PathBuf,
    name: String,
}

impl AtomicFile {
    /// Starts the file that will be `path`.
    pub(crate) fn create(path: &Path) -> Result<AtomicFile> {
        let (file, temp, final_path) = create_beside(path)?;
        Ok(AtomicFile {
            writer: io::BufWriter::with_capacity(1 << 16, file),
            temp: Some(temp),
            path: final_path,
            name: path.display().to_string(),
        })
    }

    /// The name given for the file, for messages.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Overwrites `bytes` at `offset` (a header whose counts are known only at the end)
    /// and goes back to the end of the file.
    pub(crate) fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let name = self.name.clone();
        let fail = |e| Error::write(e).in_file(&name);
        self.writer.flush().map_err(fail)?;
        let file = self.writer.get_mut();
        file.seek(io::SeekFrom::Start(offset)).map_err(fail)?;
        file.write_all(bytes).map_err(fail)?;
        file.seek(io::SeekFrom::End(0)).map_err(fail)?;
        Ok(())
    }

    /// Flushes the file and renames it into place.
    pub(crate) fn commit(mut self) -> Result<()> {
        self.writer
            .flush()
            .map_err(|e| Error::write(e).in_file(&self.name))?;
        if let Some(temp) = self.temp.take() {
            let renamed = fs::rename(&temp, &self.path);
            keep_on_signal(&temp);
            if let Err(e) = renamed {
                let _ = fs::remove_file(&temp);
                return Err(Error::io("cannot rename output into place", e).in_file(&self.name));
            }
        }
        Ok(())
    }
}

impl Write for AtomicFile {
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

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = fs::remove_file(&temp);
            keep_on_signal(&temp);
        }
    }
}

/// Scratch data written once and read back once, in a file rather than in memory (the
/// index of a token file, a header-first file bound for a pipe): memory stays flat
/// however much there is. On Unix the file's name is removed as soon as it is created,
/// so nothing is left behind even by a killed run; elsewhere it is removed when dropped.
pub(crate) struct SpillFile {
    writer: io::BufWriter<fs::File>,
    /// The file's name while it has one.
    temp: Option<PathBuf>,
    written: u64,
}

impl SpillFile {
    /// A new spill file in `dir`.
    pub(crate) fn create(dir: &Path) -> Result<SpillFile> {
        let (temp, file) = create_temp(dir, std::ffi::OsStr::new("spill")).map_err(|e| {
            Error::io("cannot create a temporary file", e).in_file(&dir.display().to_string())
        })?;
        let mut spill = SpillFile {
            writer: io::BufWriter::with_capacity(1 << 16, file),
            temp: Some(temp),
            written: 0,
        };
        if cfg!(unix) {
            if let Some(temp) = spill.temp.take() {
                let _ = fs::remove_file(temp);
            }
        }
        Ok(spill)
    }

    /// Copies everything written to `out`.
    pub(crate) fn copy_to(&mut self, out: &mut dyn Write) -> io::Result<()> {
        self.writer.flush()?;
        let file = self.writer.get_mut();
        file.seek(io::SeekFrom::Start(0))?;
        let copied = io::copy(&mut (&*file).take(self.written), out)?;
        file.seek(io::SeekFrom::End(0))?;
        if copied != self.written {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a temporary file came back shorter than written",
            ));
        }
        Ok(())
    }
}

impl Write for SpillFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.writer.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = fs::remove_file(temp);
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
            .read(true)
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

/// The name of the file mapped last, for the message of [`watch_mapped`].
static MAPPED: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Called (through [`crate::input::on_map`]) before each input file is mapped: a file
/// that another program truncates while it is read makes the kernel raise SIGBUS on the
/// pages that are gone, which would end the run with a signal death (exit 135). Instead
/// the faulting thread waits, and the signal thread writes
/// `TOOL: error: FILE: the file shrank while it was read ...`, removes a pending `-o`
/// temporary file and ends the run with status 1. Reading through the map cannot be
/// made to fail softly (the access is a plain memory read), and copying every input
/// instead of mapping it costs what `scripts/bench-mmap.sh` shows; `--no-mmap` avoids
/// the case altogether.
pub(super) fn watch_mapped(name: &str) {
    if let Ok(mut mapped) = MAPPED.lock() {
        mapped.clear();
        mapped.push_str(name);
    }
    #[cfg(unix)]
    watch_signals();
}

/// Starts the thread of [`remove_on_signal`] and [`watch_mapped`], once.
#[cfg(unix)]
fn watch_signals() {
    use signal_hook::consts::signal::{SIGBUS, SIGHUP, SIGINT, SIGTERM};
    static WATCH: std::sync::Once = std::sync::Once::new();
    WATCH.call_once(|| {
        // Terminating signals only when the ones the run was started with ignored are
        // known (they must stay ignored); SIGBUS always.
        let mut watched: Vec<i32> = match ignored_signals() {
            Some(ignored) => [SIGINT, SIGTERM, SIGHUP]
                .into_iter()
                .filter(|&signal| ignored & (1 << (signal - 1)) == 0)
                .collect(),
            None => Vec::new(),
        };
        watched.push(SIGBUS);
        let Ok(mut signals) = signal_hook::iterator::Signals::new(watched) else {
            return;
        };
        // After the signal thread is woken (the action registered first runs first), the
        // faulting thread must not return to the read that faulted: it waits until the
        // signal thread ends the process.
        // SAFETY: the action only calls `pause`, which is async-signal-safe, and never
        // returns; it touches no memory.
        #[allow(unsafe_code)]
        let _ = unsafe {
            signal_hook::low_level::register(SIGBUS, || loop {
                libc::pause();
            })
        };
        let _ = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    for temp in lock_pending().drain(..) {
                        let _ = fs::remove_file(temp);
                    }
                    if signal == SIGBUS {
                        shrunk_input();
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                }
            });
    });
}

/// The end of a run whose mapped input shrank: the message, then status 1 (`_exit`: the
/// faulting thread may hold the standard-output lock that `exit` would wait for).
#[cfg(unix)]
fn shrunk_input() -> ! {
    use std::io::Write;
    let tool = super::TOOL.get().copied().unwrap_or("toksuite");
    let name = MAPPED
        .try_lock()
        .map(|name| name.clone())
        .unwrap_or_else(|_| "a mapped input".to_string());
    let _ = writeln!(
        std::io::stderr(),
        "{tool}: error: {name}: the file shrank while it was read (another program \
         truncated or replaced it); --no-mmap reads files that may change"
    );
    // SAFETY: `_exit` ends the process at once; nothing runs after it.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(1)
    }
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

/// Removes the pending temporary files now, for a run that ends without unwinding (out
/// of memory). Skipped if another thread holds the list: waiting could hang the exit.
pub(super) fn remove_pending_now() {
    if let Ok(mut pending) = PENDING.try_lock() {
        for temp in pending.drain(..) {
            let _ = fs::remove_file(temp);
        }
    }
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
