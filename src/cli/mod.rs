//! What every tool shares at its edge: the common flags, the one buffered (or atomic
//! `-o`) output ([`output`]), the progress bar, lines on standard error, and the
//! top-level error handler that maps errors to `TOOL: error: WHERE: WHAT` and exit
//! statuses 0/1/2.

mod oom;
mod output;
mod stdio;

pub use oom::ExitOnOom;
pub use output::Output;
pub(crate) use output::{AtomicFile, SpillFile};
pub(crate) use stdio::stdout_was_closed;

use std::fmt;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crate::error::Result;

/// The tool's name, for messages written where no error can be returned (out of memory,
/// a shrinking mapped input); set by [`parse_args`].
static TOOL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// `--line-buffered`, for the tools that answer line by line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LineBufferedArg {
    /// Work on each input line as soon as it arrives and write its answer at once, for
    /// live pipes such as `tail -f FILE | ...`; a terminal always gets this. Slower on
    /// large inputs
    #[arg(long = "line-buffered")]
    pub line_buffered: bool,
}

/// `-o FILE` alone, for the tools that read no FILE arguments (`bpe-model`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArg {
    /// Write output to FILE atomically (a temporary file in the same folder, then rename)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--model-pipe`, for the tools that take `-m MODEL`.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ModelPipeArg {
    /// Let -m name a pipe, such as <(zcat merges.json.gz), read up to the 1 GiB limit of
    /// a model file (without it, -m reads regular files only)
    #[arg(long = "model-pipe")]
    pub(crate) model_pipe: bool,
}

/// Flags every tool takes, with the same meaning everywhere.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CommonArgs {
    /// Input files; none, or `-`, reads standard input
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Write output to FILE atomically (a temporary file in the same folder, then rename)
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// No progress bar
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Read files normally instead of memory-mapping them
    #[arg(long = "no-mmap")]
    pub no_mmap: bool,
}

/// Writes one line to standard error in one write. Standard error is unbuffered, so a
/// formatted `writeln!` is a write per piece, and the lines of tools running side by side
/// in a pipeline could interleave mid-line.
pub fn stderr_line(line: fmt::Arguments<'_>) {
    let mut text = line.to_string();
    text.push('\n');
    let _ = io::stderr().write_all(text.as_bytes());
}

/// The command line parsed as `A`, or the exit status to end with: 0 after `--help` or
/// `--version` (printed to standard output; 1 if that cannot be written, as when it is
/// closed or full, and 0 for a closed pipe such as `--help | head -n 1`), 2 after a
/// usage error. A usage error is reported in the suite's format, `TOOL: error: WHAT` on
/// its first line, so a script that looks for `TOOL: error:` finds clap's errors as it
/// finds ours; clap's hints (the usage line, a tip) follow on the lines below it. Also
/// names the tool for the out-of-memory message ([`ExitOnOom`]).
///
/// `TOOL --generate KIND` (the first argument) prints a shell completion script instead:
/// see [`generate`].
pub fn parse_args<A: clap::Parser>(tool: &'static str) -> std::result::Result<A, ExitCode> {
    let _ = TOOL.set(tool);
    crate::input::on_map(output::watch_mapped);
    if let Some(status) = generate::<A>(tool) {
        return Err(status);
    }
    A::try_parse().map_err(|err| {
        use clap::error::ErrorKind;
        if matches!(
            err.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        ) {
            return print_to_stdout(tool, &err);
        }
        let text = usage_error_text(tool, &err.render().to_string());
        let _ = io::stderr().write_all(text.as_bytes());
        ExitCode::from(2)
    })
}

/// The kinds `--generate` takes.
const GENERATE_KINDS: [&str; 3] = ["complete-bash", "complete-zsh", "complete-fish"];

/// `TOOL --generate complete-bash|complete-zsh|complete-fish`: writes the tool's
/// completion script for that shell, generated from its flag definitions, to standard
/// output. `None` when the command line does not start with `--generate`; otherwise the
/// exit status (2 for an unknown kind, 1 when the script cannot be written).
fn generate<A: clap::CommandFactory>(tool: &str) -> Option<ExitCode> {
    use clap_complete::Shell;
    let mut args = std::env::args_os().skip(1);
    if args.next()? != "--generate" {
        return None;
    }
    let kind = args.next();
    let shell = match kind.as_ref().and_then(|k| k.to_str()) {
        Some("complete-bash") => Shell::Bash,
        Some("complete-zsh") => Shell::Zsh,
        Some("complete-fish") => Shell::Fish,
        _ => {
            stderr_line(format_args!(
                "{tool}: error: --generate takes one of {}",
                GENERATE_KINDS.join(", ")
            ));
            return Some(ExitCode::from(2));
        }
    };
    if stdout_was_closed() {
        stderr_line(format_args!(
            "{tool}: error: <stdout>: standard output is closed (the output would be lost)"
        ));
        return Some(ExitCode::from(1));
    }
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut A::command(), tool, &mut script);
    let mut stdout = io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Ok(()) => Some(ExitCode::SUCCESS),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Some(ExitCode::SUCCESS),
        Err(e) => {
            let e = crate::Error::write(e).in_file("<stdout>");
            stderr_line(format_args!("{tool}: error: {e}"));
            Some(ExitCode::from(1))
        }
    }
}

/// Prints `--help` or `--version` to standard output: 0, or 1 with a message when it
/// cannot be written (closed at start, a full disk); a closed pipe is 0.
fn print_to_stdout(tool: &str, shown: &clap::Error) -> ExitCode {
    let failed = |what: &str| {
        stderr_line(format_args!("{tool}: error: <stdout>: {what}"));
        ExitCode::from(1)
    };
    if stdout_was_closed() {
        return failed("standard output is closed (the output would be lost)");
    }
    let mut stdout = io::stdout().lock();
    let styled = shown.render();
    // Colours only for a terminal, as clap's own printing does (and never with NO_COLOR).
    let colour = stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let text = if colour {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => failed(&crate::Error::io("write failed", e).to_string()),
    }
}

/// clap's rendering of a usage error (`error: WHAT`, then hints) with the tool's name
/// in front: `TOOL: error: WHAT`.
fn usage_error_text(tool: &str, rendered: &str) -> String {
    let what = rendered.strip_prefix("error: ").unwrap_or(rendered);
    let mut text = format!("{tool}: error: {what}");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// Runs a tool's body and turns its result into an exit status: 0 on success or on a
/// closed output pipe, otherwise `TOOL: error: ...` on standard error and 1 or 2.
pub fn run_main(tool: &str, body: impl FnOnce() -> Result<()>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => {
            stderr_line(format_args!("{tool}: error: {err}"));
            ExitCode::from(err.exit_code() as u8)
        }
    }
}

/// A progress bar on standard error, only when it is a terminal and not `--quiet`.
pub fn progress_bar(quiet: bool, total: u64, what: &str) -> Option<indicatif::ProgressBar> {
    if quiet || !io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:40}] {pos}/{len} {per_sec} eta {eta}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_prefix(what.to_string());
    Some(bar)
}

/// `-j/--threads N`, for the tools whose work runs on several cores.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct ThreadsArg {
    /// Worker threads (0: all cores; more than 4 per core, and more than 8, count as that)
    #[arg(short = 'j', long = "threads", value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

/// `-j` counts at most this many threads per core (and at least [`THREADS_FLOOR`]):
/// the work is CPU-bound, so more threads only cost (`-j 100000` started 100,000
/// threads: 8 s instead of 0.12 s).
const THREADS_PER_CORE: usize = 4;
/// The cap of `-j` is never below this, whatever the core count.
const THREADS_FLOOR: usize = 8;

impl ThreadsArg {
    /// The number of worker threads: all cores for 0, else the value given, capped at
    /// [`THREADS_PER_CORE`] per core (and at least [`THREADS_FLOOR`]).
    pub fn count(self) -> usize {
        let cores = || {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        };
        match self.threads {
            0 => cores(),
            // Under the floor no core count is needed (asking reads cgroup files).
            n if n <= THREADS_FLOOR => n,
            n => n.min((THREADS_PER_CORE * cores()).max(THREADS_FLOOR)),
        }
    }
}
