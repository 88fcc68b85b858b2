//! Spawning a thread that configures itself before running its body.
//!
//! The caller gets the [`ApplyReport`] back before the body starts, so it can
//! log or refuse to go on (`require_fully_applied`) — the streamer and the
//! schedulers use this to set up their threads in one call.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

use thiserror::Error;

use crate::config::{ApplyReport, ConfigError, ThreadConfig};

/// Smallest stack given to a configured thread.
const MIN_STACK: usize = 2 * 1024 * 1024;
/// Stack kept free beyond the prefaulted part.
const STACK_HEADROOM: usize = 256 * 1024;

/// Why a configured thread did not start.
#[derive(Debug, Error)]
pub enum SpawnError {
    /// The configuration is impossible.
    #[error("invalid thread configuration: {0}")]
    Config(#[from] ConfigError),
    /// The OS would not create the thread.
    #[error("could not create thread `{name}`: {source}")]
    Os {
        /// Thread name.
        name: String,
        /// OS error.
        source: io::Error,
    },
    /// `require_fully_applied` was set and a step was refused or degraded.
    #[error("thread `{name}` not started: real-time setup incomplete\n{report}")]
    NotApplied {
        /// Thread name.
        name: String,
        /// What the kernel granted.
        report: Box<ApplyReport>,
    },
    /// The new thread died before reporting.
    #[error("thread `{0}` exited before reporting its configuration")]
    Lost(String),
}

/// Why [`RtThread::join`] has no value.
#[derive(Debug, Error)]
pub enum JoinError {
    /// The body panicked.
    #[error("thread `{0}` panicked")]
    Panicked(String),
}

/// A running configured thread.
#[derive(Debug)]
pub struct RtThread<T> {
    name: String,
    handle: JoinHandle<Option<T>>,
    report: ApplyReport,
}

impl<T> RtThread<T> {
    /// What the configuration achieved on this thread.
    pub fn report(&self) -> &ApplyReport {
        &self.report
    }

    /// Thread name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the body has returned.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the body's result.
    pub fn join(self) -> Result<T, JoinError> {
        match self.handle.join() {
            Ok(Some(v)) => Ok(v),
            _ => Err(JoinError::Panicked(self.name)),
        }
    }
}

/// Builder for a configured thread.
#[derive(Clone, Debug)]
pub struct RtThreadBuilder {
    name: String,
    config: ThreadConfig,
    stack_size: Option<usize>,
    require_fully_applied: bool,
}

impl RtThreadBuilder {
    /// A thread called `name` with the default (unchanged) configuration.
    pub fn new(name: impl Into<String>) -> Self {
        RtThreadBuilder {
            name: name.into(),
            config: ThreadConfig::default(),
            stack_size: None,
            require_fully_applied: false,
        }
    }

    /// Configuration to apply in the new thread.
    pub fn config(mut self, config: ThreadConfig) -> Self {
        self.config = config;
        self
    }

    /// Stack size; by default 2 MiB or the prefault size plus 256 KiB.
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = Some(bytes);
        self
    }

    /// Refuse to run the body unless every step was applied.
    pub fn require_fully_applied(mut self, yes: bool) -> Self {
        self.require_fully_applied = yes;
        self
    }

    /// Starts the thread, applies the configuration in it, and returns once
    /// the report is known. The body receives the report too.
    pub fn spawn<F, T>(self, body: F) -> Result<RtThread<T>, SpawnError>
    where
        F: FnOnce(&ApplyReport) -> T + Send + 'static,
        T: Send + 'static,
    {
        self.config.validate()?;
        let stack = self
            .stack_size
            .unwrap_or_else(|| MIN_STACK.max(self.config.prefault_stack_bytes + STACK_HEADROOM));
        let (report_tx, report_rx) = mpsc::sync_channel::<ApplyReport>(1);
        let (go_tx, go_rx) = mpsc::sync_channel::<bool>(1);
        let config = self.config.clone();
        let handle = std::thread::Builder::new()
            .name(self.name.clone())
            .stack_size(stack)
            .spawn(move || {
                // validate() passed above, so apply() cannot return Err here.
                let report = config.apply().ok()?;
                report_tx.send(report.clone()).ok()?;
                if go_rx.recv().ok()? {
                    Some(body(&report))
                } else {
                    None
                }
            })
            .map_err(|source| SpawnError::Os {
                name: self.name.clone(),
                source,
            })?;
        let Ok(report) = report_rx.recv() else {
            let _ = handle.join();
            return Err(SpawnError::Lost(self.name));
        };
        if self.require_fully_applied && !report.fully_applied() {
            let _ = go_tx.send(false);
            let _ = handle.join();
            return Err(SpawnError::NotApplied {
                name: self.name,
                report: Box::new(report),
            });
        }
        let _ = go_tx.send(true);
        Ok(RtThread {
            name: self.name,
            handle,
            report,
        })
    }
}

/// Shorthand: spawn `body` on a thread called `name` configured with `config`
/// (best effort; inspect [`RtThread::report`] for what was granted).
pub fn spawn_configured<F, T>(
    name: impl Into<String>,
    config: ThreadConfig,
    body: F,
) -> Result<RtThread<T>, SpawnError>
where
    F: FnOnce(&ApplyReport) -> T + Send + 'static,
    T: Send + 'static,
{
    RtThreadBuilder::new(name).config(config).spawn(body)
}
