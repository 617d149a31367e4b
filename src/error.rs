//! The suite's one error type: what went wrong, where (file and line), and which exit
//! status it maps to (1 for bad data or I/O, 2 for bad usage).

use std::fmt;
use std::io;

/// Which exit status an error maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input or data: a malformed model, an unknown id, a ragged record (exit 1).
    Data,
    /// An operating-system I/O failure (exit 1; a broken pipe exits 0 quietly).
    Io,
    /// Bad usage: a flag value the tool cannot accept (exit 2).
    Usage,
}

/// An error with an optional location (`file` or `file:line`) and a lowercase message.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    location: Option<String>,
    message: String,
    io: Option<io::Error>,
    /// A failure writing the tool's output, whose name only the opener knows.
    output: bool,
}

/// The suite's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Bad input data (exit 1).
    pub(crate) fn data(message: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Data,
            location: None,
            message: message.into(),
            io: None,
            output: false,
        }
    }

    /// Bad usage (exit 2).
    pub fn usage(message: impl Into<String>) -> Error {
        Error {
            kind: ErrorKind::Usage,
            location: None,
            message: message.into(),
            io: None,
            output: false,
        }
    }

    /// An I/O failure, with a short description of what was being done.
    pub fn io(context: impl Into<String>, err: io::Error) -> Error {
        Error {
            kind: ErrorKind::Io,
            location: None,
            message: context.into(),
            io: Some(err),
            output: false,
        }
    }

    /// A failure writing the output. The library writes to any `Write` and does not know
    /// its name; the binary that opened it names it with [`Error::at_output`].
    pub(crate) fn write(err: io::Error) -> Error {
        Error {
            output: true,
            ..Error::io("write failed", err)
        }
    }

    /// Names the output as the location of a [`Error::write`] failure.
    pub(crate) fn at_output(self, name: &str) -> Error {
        if self.output {
            self.in_file(name)
        } else {
            self
        }
    }

    /// Sets the location to `file` unless a more precise one is already known.
    pub fn in_file(mut self, file: &str) -> Error {
        if self.location.is_none() {
            self.location = Some(file.to_string());
        }
        self
    }

    /// Sets the location to `file:line` unless one is already known.
    pub(crate) fn at_line(mut self, file: &str, line: u64) -> Error {
        if self.location.is_none() {
            self.location = Some(format!("{file}:{line}"));
        }
        self
    }

    /// The error's kind.
    pub(crate) fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The location, if known.
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// The message without location.
    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// True when the error is a closed pipe on output, which tools treat as success.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        matches!(&self.io, Some(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }

    /// The process exit status for this error.
    pub(crate) fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Usage => 2,
            ErrorKind::Data | ErrorKind::Io => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(location) = &self.location {
            write!(f, "{location}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(err) = &self.io {
            // Rust's io::Error text is capitalised ("No such file or directory"); the
            // suite's messages are lowercase, with the cause shown once.
            let text = err.to_string();
            let mut chars = text.chars();
            let lowered: String = match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => String::new(),
            };
            let lowered = match lowered.find(" (os error") {
                Some(i) => lowered[..i].to_string(),
                None => lowered,
            };
            if self.message.is_empty() {
                f.write_str(&lowered)?;
            } else {
                write!(f, ": {lowered}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.io.as_ref().map(|e| e as _)
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Error {
        Error::io("", err)
    }
}
