//! Reading inputs: FILE arguments or standard input, memory-mapped when that is safe
//! and useful (named regular files of non-zero length), read normally otherwise; by
//! line (records with file name and line number), by block, or whole; and the files a
//! tool reads whole before its work (models, weights), which are bounded: only a
//! regular file (or, opted in, a pipe) of at most a set size, opened without blocking.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One input: a named file or standard input.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name used in messages (`<stdin>` for standard input).
    pub(crate) name: String,
    path: Option<PathBuf>,
}

impl Source {
    /// Standard input.
    fn stdin() -> Source {
        Source {
            name: "<stdin>".to_string(),
            path: None,
        }
    }

    /// A named file.
    pub fn file(path: &Path) -> Source {
        Source {
            name: path.display().to_string(),
            path: Some(path.to_path_buf()),
        }
    }

    /// True for standard input.
    pub(crate) fn is_stdin(&self) -> bool {
        self.path.is_none()
    }

    /// The file's path (`None` for standard input).
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// The most bytes a model file or tiktoken rank file may hold: 1 GiB. The largest real
/// vocabularies are far below it (o200k_base's rank file is 3.6 MB, a 540k-word model
/// 26 MB); it bounds what a path, typed or named by an id stream's header, can make a
/// tool read into memory.
pub(crate) const MODEL_FILE_LIMIT: u64 = 1 << 30;

/// What may be read by [`read_whole_file`]: what the file is (for messages), the most
/// bytes it may hold, and whether a pipe is accepted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WholeFile {
    /// What the file is, for messages: "model file", "weights file".
    pub(crate) what: &'static str,
    /// The most bytes it may hold.
    pub(crate) limit: u64,
    /// Whether a pipe (`<(zcat m.json.gz)`, a FIFO) is read. Only when the user asked
    /// for it: opening a FIFO waits for a writer, and a pipe's size is not known before
    /// reading, only bounded while reading.
    pub(crate) pipes: bool,
    /// The flag that sets `pipes`, named when a pipe is refused (`None`: there is none,
    /// as for a model an id stream's header names).
    pub(crate) pipe_flag: Option<&'static str>,
}

/// Reads a file that a tool needs whole before its work (a model, weights): only a
/// regular file of at most `rules.limit` bytes, or, when `rules.pipe_flag` is given, a
/// pipe whose reading stops with an error past the limit. Anything else (a directory,
/// a device such as `/dev/zero`, a socket, a FIFO without the opt-in) is refused before
/// reading, and a FIFO is never opened without it, so nothing here can block or read
/// without bound. Errors are exit 1, named `name`.
pub(crate) fn read_whole_file(path: &Path, name: &str, rules: &WholeFile) -> Result<Vec<u8>> {
    let mut file = open_whole_file(path, name, rules)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    // The size a regular file says it has is a hint only (`/proc` files say 0; a file
    // may grow while read): the read itself stops one byte past the limit.
    let mut bytes = Vec::with_capacity(size.min(rules.limit) as usize);
    (&mut file)
        .take(rules.limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read failed", e).in_file(name))?;
    if bytes.len() as u64 > rules.limit {
        return Err(over_limit(name, rules, None));
    }
    Ok(bytes)
}

/// The SHA-256 of a file [`read_whole_file`] would accept, read in small blocks: memory
/// stays at a block whatever the file holds. Used to check a file an id stream's header
/// names before reading it into memory.
pub(crate) fn whole_file_sha256(path: &Path, name: &str, rules: &WholeFile) -> Result<String> {
    use sha2::{Digest, Sha256};
    let file = open_whole_file(path, name, rules)?;
    let mut hasher = Sha256::new();
    let mut block = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut reader = file.take(rules.limit + 1);
    loop {
        let n = match reader.read(&mut block) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("read failed", e).in_file(name)),
        };
        total += n as u64;
        if total > rules.limit {
            return Err(over_limit(name, rules, None));
        }
        hasher.update(&block[..n]);
    }
    Ok(crate::identity::hex(&hasher.finalize()))
}

/// Opens `path` for [`read_whole_file`]: its kind is checked before opening (a FIFO is
/// never opened without the opt-in) and again on the opened file (the path may have
/// been replaced in between; the open does not wait, whatever it finds).
fn open_whole_file(path: &Path, name: &str, rules: &WholeFile) -> Result<File> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io("cannot open", e).in_file(name))?;
    check_whole_file_kind(&meta, name, rules)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let pipe = is_fifo(&meta);
    #[cfg(unix)]
    if !pipe {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| Error::io("cannot open", e).in_file(name))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("cannot open", e).in_file(name))?;
    check_whole_file_kind(&meta, name, rules)?;
    if meta.is_file() && meta.len() > rules.limit {
        return Err(over_limit(name, rules, Some(meta.len())));
    }
    Ok(file)
}

fn is_fifo(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        meta.file_type().is_fifo()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        false
    }
}

/// Refuses what [`read_whole_file`] does not read, naming what it is.
fn check_whole_file_kind(meta: &std::fs::Metadata, name: &str, rules: &WholeFile) -> Result<()> {
    if meta.is_file() || (is_fifo(meta) && rules.pipes) {
        return Ok(());
    }
    let kind = file_kind(meta);
    let what = rules.what;
    let mut message =
        format!("is {kind}, not a regular file; a {what} is read from a regular file");
    match rules.pipe_flag {
        Some(flag) if is_fifo(meta) => message.push_str(&format!(", or from a pipe with {flag}")),
        _ => {}
    }
    Err(Error::data(message).in_file(name))
}

/// "a directory", "a character device", ...: what a path that is no regular file is.
fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a pipe (FIFO)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

fn over_limit(name: &str, rules: &WholeFile, size: Option<u64>) -> Error {
    let limit = rules.limit;
    let what = rules.what;
    let message = match size {
        Some(size) => format!(
            "is {size} bytes, more than a {what} may hold ({limit} bytes, {})",
            human_bytes(limit)
        ),
        None => format!(
            "holds more than a {what} may hold ({limit} bytes, {})",
            human_bytes(limit)
        ),
    };
    Error::data(message).in_file(name)
}

/// `1 GiB`, `256 MiB`, or bytes.
fn human_bytes(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// Turns FILE arguments into sources: none means standard input, `-` is standard input
/// and may appear at most once.
pub fn sources(files: &[PathBuf]) -> Result<Vec<Source>> {
    if files.is_empty() {
        return Ok(vec![Source::stdin()]);
    }
    let stdin_count = files.iter().filter(|f| f.as_os_str() == "-").count();
    if stdin_count > 1 {
        return Err(Error::usage("standard input ('-') can be named only once"));
    }
    Ok(files
        .iter()
        .map(|f| {
            if f.as_os_str() == "-" {
                Source::stdin()
            } else {
                Source::file(f)
            }
        })
        .collect())
}

/// The bytes of an input: a memory map or an owned buffer.
pub(crate) enum Data {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Data::Mapped(map) => map,
            Data::Owned(bytes) => bytes,
        }
    }
}

fn open_file(source: &Source, path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::io("cannot open", e).in_file(&source.name))
}

/// Maps `file` when it is a regular file of non-zero length; `None` means "read it".
fn try_map(source: &Source, file: &File) -> Option<memmap2::Mmap> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    before_map(&source.name);
    // SAFETY: the map is read-only and private to this process. If another process
    // truncates the file while we read it, the kernel raises SIGBUS on the pages that
    // are gone; the binaries turn that into an error message (see [`on_map`]), and
    // `--no-mmap` avoids it. Nothing here writes through the map or assumes its bytes
    // are stable beyond reading them as plain data.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    Some(map)
}

/// What the program does before the first file is mapped, with the name of each file
/// mapped: set once by the binaries (`cli`), which end a run whose mapped input shrinks
/// under it (SIGBUS) with a message naming the file instead of a signal death. The
/// library itself never handles signals.
static ON_MAP: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Sets the hook called with a file's name before it is mapped (once per program).
pub(crate) fn on_map(hook: fn(&str)) {
    let _ = ON_MAP.set(hook);
}

fn before_map(name: &str) {
    if let Some(hook) = ON_MAP.get() {
        hook(name);
    }
}

/// Reads one source entirely (mapping it when allowed).
pub(crate) fn read_source(source: &Source, no_mmap: bool) -> Result<Data> {
    match &source.path {
        None => {
            let mut bytes = Vec::new();
            io::stdin()
                .lock()
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io("read failed", e).in_file(&source.name))?;
            Ok(Data::Owned(bytes))
        }
        Some(path) => {
            let mut file = open_file(source, path)?;
            if !no_mmap {
                if let Some(map) = try_map(source, &file) {
                    return Ok(Data::Mapped(map));
                }
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| Error::io("read failed", e).in_file(&source.name))?;
            Ok(Data::Owned(bytes))
        }
    }
}

/// Reads all sources as one text (their concatenation, as `cat` would give it).
pub(crate) fn read_all(sources: &[Source], no_mmap: bool) -> Result<Data> {
    if let [only] = sources {
        return read_source(only, no_mmap);
    }
    let mut all = Vec::new();
    for source in sources {
        all.extend_from_slice(&read_source(source, no_mmap)?);
    }
    Ok(Data::Owned(all))
}

/// A map of `source` when it is a named regular file of non-zero length that maps;
/// `None` means "read it" (standard input, pipes, empty files, a failed map).
pub(crate) fn map_source(source: &Source) -> Result<Option<Data>> {
    let Some(path) = &source.path else {
        return Ok(None);
    };
    let file = open_file(source, path)?;
    Ok(try_map(source, &file).map(Data::Mapped))
}

/// Reads up to 64 KB more of `stream` onto the end of `buf` and returns how many bytes
/// came (0 at the end of input); errors are named `name`.
pub(crate) fn read_more(stream: &mut dyn Read, buf: &mut Vec<u8>, name: &str) -> Result<usize> {
    let have = buf.len();
    buf.resize(have + READ_BLOCK, 0);
    let n = loop {
        match stream.read(&mut buf[have..]) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.truncate(have);
                return Err(Error::io("read failed", e).in_file(name));
            }
        }
    };
    buf.truncate(have + n);
    Ok(n)
}

/// Opens a source as a buffered stream (never mapped).
pub(crate) fn open_stream(source: &Source) -> Result<Box<dyn BufRead>> {
    match &source.path {
        None => Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin()))),
        Some(path) => Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            open_file(source, path)?,
        ))),
    }
}

/// A callback for `for_each_line`: source name, 1-based line number, line bytes.
type LineHandler<'a> = dyn FnMut(&str, u64, &[u8]) -> Result<()> + 'a;

/// Calls `each` with every line of every source, in order, with the source name and the
/// 1-based line number. The `\n` is not part of the line (a `\r` is); a final line
/// without `\n` is still a line, and input ending in `\n` has no empty last line.
/// Memory stays bounded by the longest line.
pub(crate) fn for_each_line(
    sources: &[Source],
    no_mmap: bool,
    each: &mut LineHandler,
) -> Result<()> {
    for source in sources {
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(source, &file) {
                let mut line_no = 0;
                for line in Lines::new(&map) {
                    line_no += 1;
                    each(&source.name, line_no, line)?;
                }
                continue;
            }
        }
        let mut stream = open_stream(source)?;
        let mut line = Vec::new();
        let mut line_no = 0;
        loop {
            line.clear();
            let n = stream
                .read_until(b'\n', &mut line)
                .map_err(|e| Error::io("read failed", e).in_file(&source.name))?;
            if n == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            line_no += 1;
            each(&source.name, line_no, &line)?;
        }
    }
    Ok(())
}

/// Calls `each` with successive blocks of every source, in order (for streaming work
/// over inputs of any size). Mapped files come as one block.
pub(crate) fn for_each_block(
    sources: &[Source],
    no_mmap: bool,
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    for source in sources {
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(source, &file) {
                each(&map)?;
                continue;
            }
        }
        let mut stream = open_stream(source)?;
        let mut block = vec![0u8; 1 << 22];
        loop {
            let n = match stream.read(&mut block) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read failed", e).in_file(&source.name)),
            };
            each(&block[..n])?;
        }
    }
    Ok(())
}

/// What [`for_each_run`] hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run<'a> {
    /// Whole lines: the 1-based number of the first, and the bytes (each line with its
    /// `\n`; a source's last line may lack one).
    Lines(u64, &'a [u8]),
    /// A piece of a line too long to hold (from a stream, a line longer than the run
    /// size): the line's number, the bytes (never its `\n`), whether the piece starts
    /// the line and whether it ends it.
    Part {
        line: u64,
        bytes: &'a [u8],
        first: bool,
        last: bool,
    },
}

/// A callback for [`for_each_run`]: the source name and a run. For a
/// [`Run::Part`] it returns how many of the bytes it used: all of a last part; of the
/// others any number, the rest coming again at the start of the next part (0: the
/// handler needs more of the line at once, and the next part is longer).
type RunHandler<'a> = dyn FnMut(&str, Run) -> Result<usize> + 'a;

/// Calls `each` with the lines of every source, in order, for work spread over threads:
/// runs of whole lines ([`Run::Lines`]), and the pieces of lines too long to hold
/// ([`Run::Part`]). A mapped file is one run. From a stream, a run is about `target`
/// bytes of whole lines, and a line that reaches `target` bytes without ending comes
/// in parts of about `target` bytes (more only if the handler asks for more), so
/// memory stays bounded by `target` whatever the input. With `eager`, or from a
/// terminal, a run is whatever whole lines a read brings. The lines are those of
/// [`for_each_line`].
pub(crate) fn for_each_run(
    sources: &[Source],
    no_mmap: bool,
    target: usize,
    eager: bool,
    each: &mut RunHandler,
) -> Result<()> {
    let target = target.max(1);
    for source in sources {
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(source, &file) {
                // All of it in one run: the map costs no memory of ours, and the caller
                // then has no run boundaries to drain its threads at.
                if !map.is_empty() {
                    each(&source.name, Run::Lines(1, &map))?;
                }
                continue;
            }
        }
        let stream = open_stream(source)?;
        // Someone typing, or `eager` (`--line-buffered`, for live pipes): the lines are
        // handed over as soon as a read brings them, not when `target` bytes have come
        // (a terminal delivers a line per read).
        let interactive = eager || (source.is_stdin() && io::stdin().is_terminal());
        for_each_run_of(&source.name, stream, target, interactive, each)?;
    }
    Ok(())
}

/// [`for_each_run`] of one stream, named `name` in messages; with `eager`, the whole
/// lines of each read are handed over at once.
pub(crate) fn for_each_run_of(
    name: &str,
    stream: Box<dyn BufRead + '_>,
    target: usize,
    eager: bool,
    each: &mut RunHandler,
) -> Result<()> {
    let target = target.max(1);
    RunReader {
        name,
        stream,
        buf: Vec::with_capacity(target + READ_BLOCK),
        eof: false,
    }
    .run(target, eager, each)
}

/// Bytes asked of the stream per read: resizing to the run size before each read would
/// zero the rest of the run again after every short (pipe) read.
const READ_BLOCK: usize = 1 << 16;

/// The state of [`for_each_run`] along one stream.
struct RunReader<'s> {
    name: &'s str,
    stream: Box<dyn BufRead + 's>,
    /// Bytes read and not yet handed over; they start at a line's start, or inside the
    /// long line being handed over in parts.
    buf: Vec<u8>,
    eof: bool,
}

impl RunReader<'_> {
    /// Reads up to [`READ_BLOCK`] more bytes onto `buf`; false at the end of input.
    fn fill(&mut self) -> Result<bool> {
        let n = read_more(&mut self.stream, &mut self.buf, self.name)?;
        self.eof = n == 0;
        Ok(n > 0)
    }

    fn run(mut self, target: usize, interactive: bool, each: &mut RunHandler) -> Result<()> {
        let name = self.name;
        let mut line_no = 1;
        // Bytes of `buf` known to hold no `\n`.
        let mut searched = 0;
        loop {
            // Whole lines: fill to `target` (or, interactive, to any line's end), then
            // hand over everything up to the last `\n`.
            let want = if interactive { 1 } else { target };
            while self.buf.len() < want && !self.eof {
                self.fill()?;
            }
            let cut = match memchr::memrchr(b'\n', &self.buf[searched..]) {
                Some(k) => Some(searched + k + 1),
                None if self.eof => Some(self.buf.len()),
                None => None,
            };
            if let Some(cut) = cut {
                if cut > 0 {
                    each(name, Run::Lines(line_no, &self.buf[..cut]))?;
                    line_no += memchr::memchr_iter(b'\n', &self.buf[..cut]).count() as u64;
                    self.buf.drain(..cut);
                }
                searched = 0;
                if self.eof && self.buf.is_empty() {
                    return Ok(());
                }
                if self.buf.len() < target {
                    continue;
                }
            }
            searched = self.buf.len();
            if self.buf.len() < target {
                // Interactive, with no line end yet: read on.
                self.fill()?;
                continue;
            }
            // `buf` holds `target` bytes or more of one line: it goes in parts.
            self.long_line(line_no, target, each)?;
            line_no += 1;
            searched = 0;
        }
    }

    /// Hands over the line at the start of `buf` (of `target` bytes or more so far) in
    /// parts, up to its end; `buf` then starts at the next line.
    fn long_line(&mut self, line_no: u64, target: usize, each: &mut RunHandler) -> Result<()> {
        let name = self.name;
        let mut first = true;
        // The part's size: `target`, grown when the handler uses nothing of a part.
        let mut want = target;
        let mut searched = 0;
        loop {
            if let Some(k) = memchr::memchr(b'\n', &self.buf[searched..]) {
                let end = searched + k;
                each(
                    name,
                    Run::Part {
                        line: line_no,
                        bytes: &self.buf[..end],
                        first,
                        last: true,
                    },
                )?;
                self.buf.drain(..=end);
                return Ok(());
            }
            searched = self.buf.len();
            if self.eof {
                each(
                    name,
                    Run::Part {
                        line: line_no,
                        bytes: &self.buf,
                        first,
                        last: true,
                    },
                )?;
                self.buf.clear();
                return Ok(());
            }
            if self.buf.len() >= want {
                let used = each(
                    name,
                    Run::Part {
                        line: line_no,
                        bytes: &self.buf,
                        first,
                        last: false,
                    },
                )?
                .min(self.buf.len());
                if used > 0 {
                    first = false;
                    self.buf.drain(..used);
                    searched -= used;
                    want = target;
                } else {
                    want = self.buf.len().saturating_mul(2);
                }
            }
            self.fill()?;
        }
    }
}

/// The lines of a byte slice, as `for_each_line` defines them.
pub(crate) struct Lines<'a> {
    rest: &'a [u8],
}

impl<'a> Lines<'a> {
    /// Lines of `text`.
    pub(crate) fn new(text: &'a [u8]) -> Lines<'a> {
        Lines { rest: text }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        match memchr::memchr(b'\n', self.rest) {
            Some(i) => {
                let line = &self.rest[..i];
                self.rest = &self.rest[i + 1..];
                Some(line)
            }
            None => {
                let line = self.rest;
                self.rest = &[];
                Some(line)
            }
        }
    }
}
