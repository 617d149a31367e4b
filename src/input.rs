//! Reading inputs: FILE arguments or standard input, memory-mapped when that is safe
//! and useful (named regular files of non-zero length), read normally otherwise; by
//! line (records with file name and line number), by block, or whole.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::ops::Deref;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One input: a named file or standard input.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name used in messages (`<stdin>` for standard input).
    pub name: String,
    path: Option<PathBuf>,
}

impl Source {
    /// Standard input.
    pub fn stdin() -> Source {
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
    pub fn is_stdin(&self) -> bool {
        self.path.is_none()
    }

    /// The file's path (`None` for standard input).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
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
pub enum Data {
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
fn try_map(file: &File) -> Option<memmap2::Mmap> {
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    // SAFETY: the map is read-only and private to this process. If another process
    // truncates the file while we read it, the kernel may raise SIGBUS; that risk is
    // the documented price of mapping (see CAVEATS in the man pages) and `--no-mmap`
    // avoids it. Nothing here writes through the map or assumes its bytes are stable
    // beyond reading them as plain data.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    Some(map)
}

/// Reads one source entirely (mapping it when allowed).
pub fn read_source(source: &Source, no_mmap: bool) -> Result<Data> {
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
                if let Some(map) = try_map(&file) {
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
pub fn read_all(sources: &[Source], no_mmap: bool) -> Result<Data> {
    if let [only] = sources {
        return read_source(only, no_mmap);
    }
    let mut all = Vec::new();
    for source in sources {
        all.extend_from_slice(&read_source(source, no_mmap)?);
    }
    Ok(Data::Owned(all))
}

/// Opens a source as a buffered stream (never mapped).
pub fn open_stream(source: &Source) -> Result<Box<dyn BufRead>> {
    match &source.path {
        None => Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin()))),
        Some(path) => Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            open_file(source, path)?,
        ))),
    }
}

/// A callback for `for_each_line`: source name, 1-based line number, line bytes.
pub type LineHandler<'a> = dyn FnMut(&str, u64, &[u8]) -> Result<()> + 'a;

/// Calls `each` with every line of every source, in order, with the source name and the
/// 1-based line number. The `\n` is not part of the line (a `\r` is); a final line
/// without `\n` is still a line, and input ending in `\n` has no empty last line.
/// Memory stays bounded by the longest line.
pub fn for_each_line(sources: &[Source], no_mmap: bool, each: &mut LineHandler) -> Result<()> {
    for source in sources {
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(&file) {
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
pub fn for_each_block(
    sources: &[Source],
    no_mmap: bool,
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    for source in sources {
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(&file) {
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

/// A callback for `for_each_line_run`: source name, 1-based number of the run's first
/// line, the run's bytes.
pub type RunHandler<'a> = dyn FnMut(&str, u64, &[u8]) -> Result<()> + 'a;

/// Calls `each` with runs of whole lines of every source, in order, for work spread
/// over threads: the source name, the 1-based number of the run's first line, and the
/// bytes (each line with its `\n`; a source's last line may lack one). A mapped file
/// is one run; from a stream, a run is about `target` bytes or one longer line, so
/// memory stays bounded by `target` plus the longest line; with `eager`, or from a
/// terminal, a run is whatever whole lines a read brings. The lines are those of
/// [`for_each_line`].
pub fn for_each_line_run(
    sources: &[Source],
    no_mmap: bool,
    target: usize,
    eager: bool,
    each: &mut RunHandler,
) -> Result<()> {
    let target = target.max(1);
    for source in sources {
        let mut line_no = 1;
        if let (false, Some(path)) = (no_mmap, &source.path) {
            let file = open_file(source, path)?;
            if let Some(map) = try_map(&file) {
                // All of it in one run: the map costs no memory of ours, and the caller
                // then has no run boundaries to drain its threads at.
                if !map.is_empty() {
                    each(&source.name, line_no, &map)?;
                }
                continue;
            }
        }
        let mut stream = open_stream(source)?;
        // Someone typing, or `eager` (`--line-buffered`, for live pipes): the lines are
        // handed over as soon as a read brings them, not when `target` bytes have come
        // (a terminal delivers a line per read).
        let interactive = eager || (source.is_stdin() && io::stdin().is_terminal());
        let mut buf: Vec<u8> = Vec::with_capacity(target + (1 << 16));
        let mut eof = false;
        while !eof {
            // Fill to `target`, or further until a line ends, or to the end of input.
            let mut searched = 0;
            let cut = loop {
                if buf.len() >= target || (interactive && !buf.is_empty()) {
                    if let Some(k) = memchr::memrchr(b'\n', &buf[searched..]) {
                        break searched + k + 1;
                    }
                    searched = buf.len();
                }
                // Read 64 KB at a time: resizing to `target` before each read would
                // zero the rest of the run again after every short (pipe) read.
                let have = buf.len();
                buf.resize(have + (1 << 16), 0);
                let n = loop {
                    match stream.read(&mut buf[have..]) {
                        Ok(n) => break n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(Error::io("read failed", e).in_file(&source.name)),
                    }
                };
                buf.truncate(have + n);
                if n == 0 {
                    eof = true;
                    break buf.len();
                }
            };
            if cut > 0 {
                each(&source.name, line_no, &buf[..cut])?;
                line_no += memchr::memchr_iter(b'\n', &buf[..cut]).count() as u64;
                buf.drain(..cut);
            }
        }
    }
    Ok(())
}

/// The lines of a byte slice, as `for_each_line` defines them.
pub struct Lines<'a> {
    rest: &'a [u8],
}

impl<'a> Lines<'a> {
    /// Lines of `text`.
    pub fn new(text: &'a [u8]) -> Lines<'a> {
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
