//! The timer probe against cyclictest, back to back on the same CPU, policy,
//! priority and interval: rounds alternate between the tools (so the
//! machine's own drift spreads over both), each tool's rounds are merged, and
//! the report gives both distributions and the ratio of their medians and P99.9.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::config::ApplyReport;
use crate::cyclictest::{CyclictestError, CyclictestRun};
use crate::probe::timer::TimerProbe;
use crate::probe::{effective_policy_label, LatencyRow, ProbeError, ProbeRun};
use crate::stats::LatencyHistogram;

#[derive(Debug, thiserror::Error)]
pub enum VersusError {
    #[error("timer probe: {0}")]
    Probe(#[from] ProbeError),
    #[error("cyclictest: {0}")]
    Cyclictest(#[from] CyclictestError),
    #[error("no rounds ran: give at least one")]
    NoRounds,
}

/// One tool's row.
#[derive(Clone, Debug, Serialize)]
pub struct ToolRow {
    pub tool: &'static str,
    #[serde(flatten)]
    pub row: LatencyRow,
}

/// radiohost over cyclictest under one load (1.0 = no overhead).
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub load: String,
    pub median_ratio: f64,
    pub p999_ratio: f64,
}

/// Both tools under every load run.
#[derive(Clone, Debug, Serialize)]
pub struct VersusReport {
    pub rows: Vec<ToolRow>,
    pub ratios: Vec<Ratio>,
    /// Cost of one clock read: no wake-up is measured finer.
    pub clock_read_ns: u64,
    pub cyclictest_cmdline: String,
}

/// What one load's alternating rounds gave.
pub struct Pair {
    pub ours: LatencyHistogram,
    pub theirs: LatencyHistogram,
    /// Our probe thread's setup as the kernel granted it.
    pub report: ApplyReport,
    /// Samples missing from cyclictest's verbose output.
    pub gaps: u64,
}

/// Runs our probe (through `run_ours`, so the caller can show progress and
/// stop it) and cyclictest `rounds` times each, alternating, and merges each
/// tool's histograms. Once `stop` is set the tool running finishes early with
/// the samples it has and no further run starts.
pub fn alternate(
    probe: &TimerProbe,
    ct: &CyclictestRun,
    rounds: u32,
    stop: &AtomicBool,
    mut run_ours: impl FnMut(&TimerProbe, u32) -> Result<ProbeRun, ProbeError>,
) -> Result<Pair, VersusError> {
    let (mut ours, mut theirs, mut gaps) = (LatencyHistogram::new(), LatencyHistogram::new(), 0);
    let mut report = None;
    let stopped = || stop.load(Ordering::Relaxed);
    for r in 0..rounds {
        if r > 0 && stopped() {
            break;
        }
        let run = run_ours(probe, r)?;
        ours.merge(&run.histogram);
        report.get_or_insert(run.report);
        if stopped() {
            break;
        }
        let parsed = ct.run(stop)?;
        theirs.merge(&parsed.histogram);
        gaps += parsed.gaps;
    }
    let report = report.ok_or(VersusError::NoRounds)?;
    Ok(Pair {
        ours,
        theirs,
        report,
        gaps,
    })
}

impl VersusReport {
    pub fn new(ct: &CyclictestRun, clock_read_ns: u64) -> Self {
        VersusReport {
            rows: Vec::new(),
            ratios: Vec::new(),
            clock_read_ns,
            cyclictest_cmdline: ct.cmdline(),
        }
    }

    /// Adds both tools' rows and their ratio under `load`.
    pub fn add(&mut self, load: &str, ct: &CyclictestRun, pair: &Pair) {
        let (s_ours, s_theirs) = (pair.ours.summary(), pair.theirs.summary());
        let ratio = |a: u64, b: u64| {
            if b == 0 {
                f64::NAN
            } else {
                a as f64 / b as f64
            }
        };
        self.ratios.push(Ratio {
            load: load.into(),
            median_ratio: ratio(s_ours.median_ns, s_theirs.median_ns),
            p999_ratio: ratio(s_ours.p999_ns, s_theirs.p999_ns),
        });
        let ours = effective_policy_label(&pair.report);
        self.rows.push(ToolRow {
            tool: "radiohost",
            row: LatencyRow::new("timer", &ours, load, &s_ours),
        });
        let theirs = if ct.policy.is_realtime() {
            format!("{}:{}", ct.policy, ct.priority)
        } else {
            ct.policy.to_string()
        };
        self.rows.push(ToolRow {
            tool: "cyclictest",
            row: LatencyRow::new("timer", &theirs, load, &s_theirs),
        });
    }

    /// One tool's rows, in load order.
    pub fn rows_of(&self, tool: &str) -> Vec<LatencyRow> {
        self.rows
            .iter()
            .filter(|r| r.tool == tool)
            .map(|r| r.row.clone())
            .collect()
    }
}
