//! Helper processes of a measurement: the background load and the UDP echo
//! run as children of the measuring process, so its process-wide settings
//! (mlockall, RT limits) do not change them. The caller supplies the
//! [`Command`] that starts the child (the binary knows its own subcommands);
//! this module owns both ends of the conversation with it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::config::ThreadConfig;
use crate::load::{Load, LoadConfig, LoadStats};
use crate::probe::{udp, ProbeError};
use crate::spawn::RtThreadBuilder;

/// Why a helper process did not do its part.
#[derive(Debug, Error)]
pub enum ProcessError {
    /// The child could not be started or waited for.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child printed something other than what the protocol says.
    #[error("the {child} process printed `{line}` instead of {expected}; run it alone to see why")]
    Protocol {
        /// `load` or `echo`.
        child: &'static str,
        /// What it printed.
        line: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The echo itself failed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ProcessError {
    move |source| ProcessError::Io { what, source }
}

/// Runs `f` while the background load runs in the child `load` starts (a
/// process that calls [`serve_load`]); None runs `f` alone. The load gets
/// half a second to ramp up first; returns what it did.
pub fn under_load<T>(
    load: Option<Command>,
    f: impl FnOnce() -> T,
) -> Result<(T, Option<LoadStats>), ProcessError> {
    let Some(mut cmd) = load else {
        return Ok((f(), None));
    };
    // Its own process group: Ctrl-C at the terminal reaches only the parent,
    // which stops cleanly and ends the child by closing its stdin.
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(io("starting the background load process"))?;
    std::thread::sleep(Duration::from_millis(500));
    let out = f();
    drop(child.stdin.take()); // end-of-file: the load stops and reports
    let output = child
        .wait_with_output()
        .map_err(io("waiting for the load process"))?;
    let stats = serde_json::from_slice(&output.stdout).map_err(|_| ProcessError::Protocol {
        child: "load",
        line: String::from_utf8_lossy(&output.stdout).trim().to_string(),
        expected: "its statistics",
    })?;
    Ok((out, Some(stats)))
}

/// The load child's side: runs the kernel-build-like load until stdin
/// closes (unless `ignore_stdin`) or `duration` ends, then prints its
/// statistics as one JSON line.
pub fn serve_load(duration: Duration, ignore_stdin: bool) -> Result<LoadStats, ProcessError> {
    let load = Load::start(&LoadConfig::kernel_build_like(duration))
        .map_err(io("starting the background load"))?;
    if ignore_stdin {
        std::thread::sleep(duration);
    } else {
        // Returns at end-of-file (parent done) or error; bounded by the duration.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(duration);
    }
    let stats = load.stop();
    let line = serde_json::to_string(&stats).unwrap_or_default();
    println!("{line}");
    Ok(stats)
}

/// A UDP echo in a child process (one that calls [`serve_echo`]); killed on drop.
pub struct EchoProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl EchoProcess {
    /// Starts the child and reads the address it prints first.
    pub fn start(mut cmd: Command) -> Result<EchoProcess, ProcessError> {
        // Own process group, as the load's: the parent decides when it ends.
        let mut child = cmd
            .process_group(0)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .map_err(io("starting the echo process"))?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout)
                .read_line(&mut line)
                .map_err(io("reading the echo process's address"))?;
        }
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|a| a.parse().ok());
        let mut echo = EchoProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        match addr {
            Some(a) => echo.addr = a,
            None => {
                return Err(ProcessError::Protocol {
                    child: "echo",
                    line: line.trim().to_string(),
                    expected: "`listening ADDR`",
                })
            }
        }
        Ok(echo)
    }
}

impl Drop for EchoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The echo child's side: echoes on `bind` from a thread set up with
/// `config`, prints `listening ADDR` once ready, and stops after
/// `max_duration`. Returns the datagrams echoed.
pub fn serve_echo(
    bind: SocketAddr,
    config: ThreadConfig,
    max_duration: Duration,
) -> Result<u64, ProcessError> {
    let sock = udp::bind_echo(bind)?;
    let addr = sock.local_addr().map_err(io("reading the echo address"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let t = RtThreadBuilder::new("rt-echo")
        .config(config)
        .spawn(move |_| udp::echo_loop(&sock, &flag))
        .map_err(ProbeError::from)?;
    for p in t.report().problems() {
        tracing::warn!(step = %p.step, "echo thread setup: {:?}", p.outcome);
    }
    println!("listening {addr}");
    std::io::stdout()
        .flush()
        .map_err(io("printing the echo address"))?;
    let deadline = Instant::now() + max_duration;
    while Instant::now() < deadline && !t.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let echoed = t.join().map_err(|e| ProbeError::Thread(e.to_string()))??;
    tracing::info!(echoed, "echo finished");
    Ok(echoed)
}
