//! Latency probes: how late does a configured thread wake (timer), how long
//! does a loopback UDP round trip take (udp). Each probe runs on a thread set
//! up with a [`ThreadConfig`] and records into a [`LatencyHistogram`].

pub mod timer;
pub mod udp;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::config::ApplyReport;
use crate::spawn::SpawnError;
use crate::stats::{LatencyHistogram, Summary};

/// Why a probe could not run.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// The measurement thread did not start.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// A socket or clock call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Parameters that cannot work (zero interval, ...).
    #[error("invalid probe parameters: {0}")]
    Invalid(String),
    /// The measurement thread panicked.
    #[error("probe thread failed: {0}")]
    Thread(String),
}

impl ProbeError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ProbeError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Stop flag and progress counter shared with a running probe.
#[derive(Clone, Debug, Default)]
pub struct ProbeControl {
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicU64>,
}

impl ProbeControl {
    /// Asks the probe to finish early (it returns what it has).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    pub(crate) fn add_sample(&self) {
        self.samples.fetch_add(1, Ordering::Relaxed);
    }
}

/// Outcome of one probe run.
#[derive(Debug)]
pub struct ProbeRun {
    /// Latencies in ns.
    pub histogram: LatencyHistogram,
    /// What the measurement thread's configuration achieved.
    pub report: ApplyReport,
    /// Intervals skipped because the thread woke later than the next deadline
    /// (timer) or replies lost / timed out (udp).
    pub missed: u64,
}

/// One row of the probe's output, as in the study's tables and `--json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyRow {
    /// `timer`, `udp`, ...
    pub mode: String,
    /// Policy actually in effect on the measurement thread.
    pub policy: String,
    /// `idle` or `loaded`.
    pub load: String,
    /// Number of samples.
    pub samples: u64,
    /// Minimum, µs.
    pub min_us: f64,
    /// Median, µs.
    pub median_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    pub p999_us: f64,
    /// Maximum, µs.
    pub max_us: f64,
    /// Width of the shortest interval holding 99.9 % of samples, µs.
    pub jitter_us: f64,
}

impl LatencyRow {
    /// A row from a summary.
    pub fn new(mode: &str, policy: &str, load: &str, s: &Summary) -> LatencyRow {
        LatencyRow {
            mode: mode.to_string(),
            policy: policy.to_string(),
            load: load.to_string(),
            samples: s.samples,
            min_us: Summary::us(s.min_ns),
            median_us: Summary::us(s.median_ns),
            p99_us: Summary::us(s.p99_ns),
            p999_us: Summary::us(s.p999_ns),
            max_us: Summary::us(s.max_ns),
            jitter_us: Summary::us(s.jitter_ns),
        }
    }
}

/// The policy label for rows: what the kernel reported after configuration,
/// with the priority for RT policies (`fifo:80`), so a refused request shows
/// up as `other` instead of pretending.
pub fn effective_policy_label(report: &ApplyReport) -> String {
    match report.after.policy {
        Some(p) if p.is_realtime() => format!("{p}:{}", report.after.priority),
        Some(p) => p.to_string(),
        None => format!("policy#{}", report.after.policy_raw),
    }
}
