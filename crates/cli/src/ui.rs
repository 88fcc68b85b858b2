//! Terminal conventions shared by every command (docs/CLI.md): progress bars on
//! stderr, Ctrl-C as a request to stop and keep what was measured, exit codes,
//! and output paths checked before the work starts.
//!
//! Exit codes: 0 success; 1 the run failed (verification, deadline misses over
//! the stated threshold, a critical audit finding, an I/O error); 2 a usage error
//! (clap's own, or [`usage`]); 130 interrupted by Ctrl-C after printing and
//! saving the partial results ([`Interrupted`]); 141 stdout closed (a broken
//! pipe, e.g. `| head`), quietly.

use std::ffi::OsString;
use std::fmt;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;
pub const EXIT_BROKEN_PIPE: i32 = 141;

// ---------------------------------------------------------------- progress

/// A progress bar on stderr with a rate and an estimate of the time left. It
/// draws nothing when `show` is false (`--json`) or stderr is not a terminal, and
/// clears itself when dropped, so results printed afterwards stand alone. Every
/// command's progress goes through this type (docs/CLI.md); libraries report
/// through callbacks that the command turns into calls here.
pub struct Progress {
    bar: ProgressBar,
    begun: AtomicU64,
}

const STEPS_TEMPLATE: &str =
    "{msg:>28} [{bar:30}] {pos}/{len} {elapsed_precise} elapsed, ~{eta} left";
const BYTES_TEMPLATE: &str =
    "{msg:>28} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}, ~{eta} left";

impl Progress {
    /// A bar counting `total` steps of work under `label`.
    pub fn new(label: impl Into<String>, total: u64, show: bool) -> Progress {
        Progress::styled(label, total, show, STEPS_TEMPLATE)
    }

    /// A bar counting `total` bytes under `label` (a transfer).
    pub fn bytes(label: impl Into<String>, total: u64, show: bool) -> Progress {
        Progress::styled(label, total, show, BYTES_TEMPLATE)
    }

    fn styled(label: impl Into<String>, total: u64, show: bool, template: &str) -> Progress {
        let bar = if show && std::io::stderr().is_terminal() {
            ProgressBar::new(total)
        } else {
            ProgressBar::hidden()
        };
        Progress::wrap(bar, label, template)
    }

    fn wrap(bar: ProgressBar, label: impl Into<String>, template: &str) -> Progress {
        bar.set_style(
            ProgressStyle::with_template(template)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(label.into());
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bar,
            begun: AtomicU64::new(0),
        }
    }

    /// Moves the bar by `n` steps.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Sets the bar to `pos` steps done.
    pub fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Sets the total (e.g. once a transfer's size is known).
    pub fn set_total(&self, total: u64) {
        self.bar.set_length(total);
    }

    /// Changes the label (e.g. to the step under way).
    pub fn label(&self, label: impl Into<String>) {
        self.bar.set_message(label.into());
    }

    /// A step described by `label` starts: the steps begun before it count as
    /// done. For libraries that announce each step before running it.
    pub fn begin(&self, label: impl Into<String>) {
        let done = self.begun.fetch_add(1, Ordering::Relaxed);
        self.bar.set_position(done);
        self.bar.set_message(label.into());
    }

    /// Stops the bar where it is and leaves it on screen with `message`.
    pub fn finish_with(&self, message: impl Into<String>) {
        self.bar.abandon_with_message(message.into());
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

/// Several bars drawn together (e.g. one per receiver of a transfer), each a
/// [`Progress`]; hidden under the same conditions.
pub struct ProgressGroup {
    multi: indicatif::MultiProgress,
    show: bool,
}

impl ProgressGroup {
    pub fn new(show: bool) -> ProgressGroup {
        let show = show && std::io::stderr().is_terminal();
        let multi = if show {
            indicatif::MultiProgress::new()
        } else {
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
        };
        ProgressGroup { multi, show }
    }

    /// A bar counting `total` bytes under `label`, drawn with the others.
    pub fn add_bytes(&self, label: impl Into<String>, total: u64) -> Progress {
        let bar = if self.show {
            self.multi.add(ProgressBar::new(total))
        } else {
            ProgressBar::hidden()
        };
        Progress::wrap(bar, label, BYTES_TEMPLATE)
    }
}

/// Runs `f` on its own thread while a [`Progress`] under `label` shows
/// `position()` out of `total` (no bar when `!show`, e.g. under `--json`).
pub fn with_progress<T: Send>(
    label: &str,
    total: u64,
    show: bool,
    position: impl Fn() -> u64,
    f: impl FnOnce() -> T + Send,
) -> T {
    let bar = Progress::new(label, total, show);
    let out = std::thread::scope(|s| {
        let h = s.spawn(f);
        while !h.is_finished() {
            bar.set(position());
            std::thread::sleep(Duration::from_millis(100));
        }
        h.join()
    });
    drop(bar);
    out.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

// ---------------------------------------------------------------- Ctrl-C

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag Ctrl-C sets; long loops poll it, stop cleanly, and report what they
/// measured so far marked partial. The handler is installed on first use, so
/// commands that never ask keep the default (Ctrl-C ends them at once). A
/// second Ctrl-C ends the process at once with exit code 130.
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let installed = ctrlc::set_handler(move || {
            if s.swap(true, Ordering::SeqCst) {
                eprintln!("\ninterrupted again: exiting now");
                std::process::exit(EXIT_INTERRUPTED);
            }
            eprintln!(
                "\nstopping: finishing the current step and keeping what was measured \
                 (Ctrl-C again to quit at once)"
            );
        });
        if let Err(e) = installed {
            tracing::warn!(
                "Ctrl-C handler not installed ({e}); interrupting will not stop cleanly"
            );
        }
        stop
    })
    .clone()
}

/// True once Ctrl-C was pressed (installs the handler on first use).
pub fn interrupted() -> bool {
    stop_flag().load(Ordering::Relaxed)
}

// ---------------------------------------------------------------- exit codes

/// The run was stopped by Ctrl-C after printing (and saving) the partial
/// results; `main` exits with 130 and prints this one-line reason.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted: {} (results above are partial)", self.0)
    }
}

impl std::error::Error for Interrupted {}

/// `Err(Interrupted)` with `what` (e.g. "3 of 8 sweeps done") if Ctrl-C was pressed.
pub fn partial_if_interrupted(what: impl FnOnce() -> String) -> Result<()> {
    if interrupted() {
        return Err(Interrupted(what()).into());
    }
    Ok(())
}

/// An argument combination found wrong after parsing (clap checks single
/// values); `main` prints the message and exits with 2, like clap.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error (exit code 2) with `message`.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Usage(message.into()).into()
}

/// Whether `e` (or anything it wraps) is stdout or a pipe closing under us.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit code for an error returned by a command, and the one line to print
/// (none for a broken pipe: the reader went away, nobody is listening).
pub fn exit_for(e: &anyhow::Error) -> (i32, Option<String>) {
    if is_broken_pipe(e) {
        return (EXIT_BROKEN_PIPE, None);
    }
    let line = Some(one_line(&chain_text(e)));
    if e.downcast_ref::<Usage>().is_some() {
        (EXIT_USAGE, line)
    } else if e.downcast_ref::<Interrupted>().is_some() {
        (EXIT_INTERRUPTED, line)
    } else {
        (EXIT_FAILURE, line)
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the
/// message already holds (an error that prints its source, as many
/// `#[error("...: {0}")]` variants do, would otherwise say it twice).
fn chain_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// At most 460 characters: a runaway message (a list of thousands of items)
/// keeps its start and says how much was cut. (A station run's miss report, with
/// how its misses split and what the load says, takes up to about 440.)
fn one_line(message: &str) -> String {
    const MAX: usize = 460;
    if message.chars().count() <= MAX {
        return message.to_string();
    }
    let head: String = message.chars().take(MAX).collect();
    let cut = message.chars().count() - MAX;
    format!("{head}... ({cut} more characters)")
}

/// Makes `println!` on a closed stdout (or `eprintln!` on a closed stderr)
/// end the process quietly with 141 instead of panicking with "failed printing
/// to stdout" (exit 101). Other panics keep the default message.
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = panic_text(info.payload());
        if !is_broken_pipe_panic(payload) {
            default(info)
        } else if std::thread::current().name() != Some("main") {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        // On the main thread the panic unwinds quietly (running clean-up such
        // as namespace removal) up to `main`, which exits with 141.
    }));
}

/// Whether a panic payload is std's "failed printing to stdout: Broken pipe"
/// (or to stderr, e.g. `2>&1 | head`).
pub fn is_broken_pipe_panic(payload: &str) -> bool {
    payload.contains("failed printing to std") && payload.contains("Broken pipe")
}

/// The text of a panic payload caught by `catch_unwind`.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("")
}

// ---------------------------------------------------------------- value ranges

/// A clap value parser for a finite number within `lo..=hi` (range in the message).
pub fn f64_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
    move |s: &str| {
        let v: f64 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a number (expected {lo}..={hi})"))?;
        if !v.is_finite() || v < lo || v > hi {
            return Err(format!("{v} is not in {lo}..={hi}"));
        }
        Ok(v)
    }
}

/// A clap value parser for a whole number within `lo..=hi`, the range in the
/// message for any number, negatives included (clap's own unsigned parsers
/// say only "invalid digit found in string" for `-1`).
pub fn count_in<T>(lo: u64, hi: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64>,
{
    move |s: &str| {
        let v: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a whole number (expected {lo}..={hi})"))?;
        if v < i128::from(lo) || v > i128::from(hi) {
            return Err(format!("{v} is not in {lo}..={hi}"));
        }
        T::try_from(v as u64).map_err(|_| format!("{v} is not in {lo}..={hi}"))
    }
}

/// Wraps a units parser with a range check: the quantity must lie within
/// `lo..=hi` (both as the parser returns them); `shown` writes the range for
/// the message, e.g. "1us..=1s".
pub fn within<T, E>(
    parse: fn(&str) -> Result<T, E>,
    lo: T,
    hi: T,
    shown: &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: PartialOrd + Copy + Send + Sync + 'static,
    E: fmt::Display,
{
    move |s: &str| {
        let v = parse(s).map_err(|e| format!("{e} (range {shown})"))?;
        if v < lo || v > hi {
            return Err(format!("{s:?} is not in {shown}"));
        }
        Ok(v)
    }
}

/// The command line with every negative value glued to its option: `--opt -3`
/// becomes `--opt=-3`. Clap reads a lone `-3` or `-1s` as a flag and says only
/// "unexpected argument"; glued, the value reaches the option's parser, whose
/// message gives the option's range. Nothing after a bare `--` is touched.
pub fn attach_negative_values(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut rest = false;
    for arg in args {
        let text = arg.to_str().unwrap_or("");
        let negative = {
            let b = text.as_bytes();
            b.len() > 1
                && b[0] == b'-'
                && (b[1].is_ascii_digit()
                    || (b[1] == b'.' && b.get(2).is_some_and(u8::is_ascii_digit)))
        };
        let after_long_option = out
            .last()
            .and_then(|p| p.to_str())
            .is_some_and(|p| p.len() > 2 && p.starts_with("--") && !p.contains('='));
        if !rest && negative && after_long_option {
            if let Some(option) = out.last_mut() {
                option.push("=");
                option.push(&arg);
                continue;
            }
        }
        rest |= text == "--";
        out.push(arg);
    }
    out
}

/// A ratio in (0, 1], written as a fraction (`1/3`) or a decimal (`0.5`).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let number = |t: &str| {
        t.trim()
            .parse::<f64>()
            .map_err(|_| format!("{s:?} is not a fraction: write e.g. 1/3 or 0.5"))
    };
    let v = match s.split_once('/') {
        Some((n, d)) => number(n)? / number(d)?,
        None => number(s)?,
    };
    if !(v.is_finite() && v > 0.0 && v <= 1.0) {
        return Err(format!("{s:?} is not in (0, 1]: write e.g. 1/3 or 0.5"));
    }
    Ok(v)
}

// ---------------------------------------------------------------- output paths

/// Checks before any work that `path` can be written: its directory exists and
/// accepts files (a probe file is created and removed). `flag` names the
/// option in the message.
pub fn check_output_file(flag: &str, path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(usage(format!(
            "{flag} {}: is a directory, expected a file",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    check_writable_dir(flag, path, dir)
}

/// Checks before any work that `dir` is (or can be made) a writable directory;
/// creates it if missing.
pub fn check_output_dir(flag: &str, dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{flag} {}: exists and is not a directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        usage(format!(
            "{flag} {}: cannot create the directory: {e}",
            dir.display()
        ))
    })?;
    check_writable_dir(flag, dir, dir)
}

/// A bad output path is a usage error (exit 2), found before any work.
fn check_writable_dir(flag: &str, path: &Path, dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        return Err(usage(format!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    let probe = dir.join(format!(".radiohost-write-check-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            usage(format!(
                "{flag} {}: cannot write there: {e}",
                path.display()
            ))
        })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Where `--svg FILE|DIR` puts one command's plots. A path that is an existing
/// directory or ends in `/` is a directory: every plot goes there as
/// `<name>.svg`. Otherwise it is a file: a command with one plot writes it
/// there; one with several writes `<stem>-<name>.svg` beside it.
#[derive(Clone, Debug)]
pub struct SvgOut {
    target: PathBuf,
    dir: bool,
}

impl SvgOut {
    /// Resolves and checks `--svg` before the work starts (see [`SvgOut`]).
    pub fn new(target: &Path) -> Result<SvgOut> {
        let dir = target.is_dir() || target.as_os_str().to_string_lossy().ends_with('/');
        if dir {
            check_output_dir("--svg", target)?;
        } else {
            check_output_file("--svg", target)?;
        }
        Ok(SvgOut {
            target: target.to_path_buf(),
            dir,
        })
    }

    /// Whether the plots go into a directory (rather than to or beside a file).
    pub fn is_dir(&self) -> bool {
        self.dir
    }

    /// The file of the plot `name` of a command that writes `several` plots.
    pub fn path(&self, name: &str, several: bool) -> PathBuf {
        if self.dir {
            return self.target.join(format!("{name}.svg"));
        }
        if !several {
            return self.target.clone();
        }
        let stem = self
            .target
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plot".into());
        self.target.with_file_name(format!("{stem}-{name}.svg"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source and also returns it from `source()`.
    #[derive(Debug)]
    struct WrapsIo(std::io::Error);

    impl fmt::Display for WrapsIo {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a.sigmf-meta: {}", self.0)
        }
    }

    impl std::error::Error for WrapsIo {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn svg_target_is_a_file_or_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let file = SvgOut::new(&tmp.path().join("a.svg")).unwrap();
        assert_eq!(file.path("x", false), tmp.path().join("a.svg"));
        assert_eq!(file.path("x", true), tmp.path().join("a-x.svg"));
        let dir = SvgOut::new(tmp.path()).unwrap();
        assert_eq!(dir.path("x", false), tmp.path().join("x.svg"));
        let new_dir = format!("{}/plots/", tmp.path().display());
        let made = SvgOut::new(Path::new(&new_dir)).unwrap();
        assert!(tmp.path().join("plots").is_dir());
        assert_eq!(made.path("y", true), tmp.path().join("plots").join("y.svg"));
    }

    #[test]
    fn bad_output_paths_fail_before_the_work() {
        let e = check_output_file("--svg", Path::new("/nonexistent-dir/x.svg")).unwrap_err();
        assert!(format!("{e:#}").contains("does not exist"), "{e:#}");
        let tmp = tempfile::tempdir().unwrap();
        let e = check_output_file("--out", tmp.path()).unwrap_err();
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
        let file = tmp.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(check_output_dir("--out", &file).is_err());
        assert!(check_output_file("--out", &tmp.path().join("ok.json")).is_ok());
        assert!(
            !tmp.path().join("ok.json").exists(),
            "the check leaves no file"
        );
    }

    #[test]
    fn negative_values_are_glued_to_their_option() {
        let glue = |line: &str| {
            attach_negative_values(line.split(' ').map(OsString::from))
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(glue("x --nodes -3 --json"), "x --nodes=-3 --json");
        assert_eq!(glue("x --delta -5us --p -.5"), "x --delta=-5us --p=-.5");
        assert_eq!(glue("x --a=1 -3"), "x --a=1 -3");
        assert_eq!(glue("x --json -v"), "x --json -v");
        assert_eq!(glue("x -- --a -3"), "x -- --a -3");
        assert_eq!(glue("x --a -. -"), "x --a -. -");
    }

    #[test]
    fn fractions_parse_within_zero_to_one() {
        assert!((parse_fraction("1/3").unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(parse_fraction("0.5"), Ok(0.5));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        for bad in ["0", "2/1", "1/0", "-1/3", "x", "nan", "1/3/4", ""] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn errors_map_to_exit_codes() {
        assert_eq!(exit_for(&usage("bad")).0, EXIT_USAGE);
        assert_eq!(
            exit_for(&Interrupted("x".into()).into()).0,
            EXIT_INTERRUPTED
        );
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the table");
        assert_eq!(exit_for(&pipe), (EXIT_BROKEN_PIPE, None));
        assert_eq!(
            exit_for(&anyhow::anyhow!("verification failed")).0,
            EXIT_FAILURE
        );
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let twice = anyhow::Error::new(WrapsIo(io)).context("reading a");
        assert_eq!(
            exit_for(&twice).1.unwrap(),
            "reading a: a.sigmf-meta: no such file"
        );
        let long = "x".repeat(20_000);
        let (_, line) = exit_for(&anyhow::anyhow!(long));
        assert!(line.unwrap().len() < 500);
    }
}
