//! Latency probes: how late does a configured thread wake (timer), how long
//! does a loopback UDP round trip take (udp). Each probe runs on a thread set
//! up with a [`ThreadConfig`] and records into a [`LatencyHistogram`].

pub mod timer;
pub mod udp;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::config::{ApplyReport, Policy, ThreadConfig};
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

/// A probe thread's setup as the study defines it: RT policies also lock
/// memory (when `lock_memory`) and prefault the stack; `Other` is plain normal
/// scheduling, whatever else was asked.
pub fn study_config(
    policy: Policy,
    priority: i32,
    cpus: Option<Vec<usize>>,
    lock_memory: bool,
    prefault_bytes: usize,
) -> ThreadConfig {
    let rt = policy.is_realtime();
    ThreadConfig {
        policy,
        priority: if rt { priority } else { 0 },
        cpus,
        lock_memory: rt && lock_memory,
        prefault_stack_bytes: if rt { prefault_bytes } else { 0 },
    }
}

/// The runs of a probe as (thread setup, loaded): `config` once, or with
/// `compare` the study's four, normal scheduling on the same CPUs first
/// (memory locking is process-wide and cannot be undone, so RT runs go last).
pub fn study_plan(config: &ThreadConfig, compare: bool, loaded: bool) -> Vec<(ThreadConfig, bool)> {
    if !compare {
        return vec![(config.clone(), loaded)];
    }
    let normal = ThreadConfig {
        cpus: config.cpus.clone(),
        ..ThreadConfig::default()
    };
    vec![
        (normal.clone(), false),
        (normal, true),
        (config.clone(), false),
        (config.clone(), true),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rt_policies_lock_and_prefault_normal_does_not() {
        let c = study_config(Policy::Fifo, 70, Some(vec![1]), true, 128 * 1024);
        assert_eq!(
            (c.policy, c.priority, c.lock_memory),
            (Policy::Fifo, 70, true)
        );
        assert_eq!(
            (c.prefault_stack_bytes, c.cpus.clone()),
            (128 * 1024, Some(vec![1]))
        );
        let plan = study_plan(&c, true, false);
        let n = &plan[0].0;
        assert_eq!(
            (n.policy, n.priority, n.lock_memory),
            (Policy::Other, 0, false)
        );
        assert_eq!(n.cpus, Some(vec![1]));
        let loads: Vec<bool> = plan.iter().map(|p| p.1).collect();
        assert_eq!(loads, [false, true, false, true]);
        assert_eq!(plan[3].0, c);
        assert_eq!(study_plan(&c, false, true), vec![(c, true)]);
        let other = study_config(Policy::Other, 70, None, true, 128 * 1024);
        assert_eq!((other.priority, other.lock_memory), (0, false));
        assert_eq!(other.prefault_stack_bytes, 0);
    }
}
