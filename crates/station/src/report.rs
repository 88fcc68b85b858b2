//! Run reports: per-frame latency (mean, P99, P99.99 as `radiohost_rt::stats`
//! defines them), throughput (frames/s and decoded Mbit/s), misses and the
//! per-opcode (stage) breakdown, with serde for `--json`.

use radiohost_rt::stats::LatencyHistogram;

use crate::isa::{FrameId, Nanos, Opcode};
use crate::pool::PoolStats;

/// How one frame ended, as counted in the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFate {
    /// Every instruction committed; `FrameRecord::decoded_ok` says if the bits were right.
    Completed,
    /// Past its deadline: NACKed and discarded.
    Missed,
    /// Refused at admission (frame window or buffer pool full).
    Rejected,
    /// A kernel failed, the frame was lost in the fronthaul, or it was left
    /// unfinished when the run ended.
    Failed,
}

/// One frame's record.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FrameRecord {
    pub frame: FrameId,
    pub ru: u16,
    pub fate: FrameFate,
    /// Decision time minus arrival (first fronthaul packet).
    pub latency_ns: Nanos,
    /// When the decision was taken, after the run's first fronthaul packet.
    pub decided_ns: Nanos,
    /// Uplink bits equal to the truth (and, when checked, downlink verified by the
    /// emulated users); `None` if not completed or no truth was known.
    pub decoded_ok: Option<bool>,
    /// Uplink payload bits of the frame (for decoded Mbit/s).
    pub uplink_bits: u64,
    /// Why it failed, when it did.
    pub reason: Option<String>,
}

impl FrameRecord {
    /// Missed, and NACKed before its deadline (`deadline_ns` after its first packet).
    pub fn dropped_early(&self, deadline_ns: Nanos) -> bool {
        self.fate == FrameFate::Missed && self.latency_ns < deadline_ns
    }
}

/// Latency of one opcode's executions.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StageStat {
    pub opcode: &'static str,
    pub count: u64,
    pub mean_us: f64,
    pub p99_us: f64,
    /// Execution time of the stage summed over the run, per frame (its share).
    pub per_frame_us: f64,
}

/// Everything a run reports.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunReport {
    pub policy: String,
    pub config: String,
    pub devices: usize,
    pub workers: usize,
    pub rus: usize,
    pub frames: u64,
    pub completed: u64,
    pub decoded_ok: u64,
    pub decode_errors: u64,
    pub missed: u64,
    /// Missed frames the scheduler NACKed before their deadline, having found they
    /// could no longer meet it (their own work left, or that and the work of the
    /// frames due before them, would not fit: shedding under overload); the rest
    /// of `missed` ran until the deadline passed.
    pub missed_early: u64,
    pub rejected: u64,
    pub failed: u64,
    pub offered_fps: f64,
    pub achieved_fps: f64,
    pub decoded_mbps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
    pub wall_s: f64,
    /// Each frame's deadline after its first packet.
    pub deadline_ns: Nanos,
    pub stages: Vec<StageStat>,
    /// Latency CDF points `(ms, fraction)` of completed frames, for plots.
    pub cdf: Vec<(f64, f64)>,
    pub pool: PoolStats,
    /// Fronthaul packets that did not parse or belonged to no frame.
    pub bad_packets: u64,
    pub rescheduled: u64,
    pub device_removals: u64,
    /// Instructions completed per device id (including removed devices).
    pub device_instrs: Vec<u64>,
    /// Every device that took part, with where its costs came from.
    pub device_costs: Vec<DeviceCostLabel>,
    /// Share of the run spent scheduling (handling reports and running the policy),
    /// summed over the threads that do it (workers, ingest, the scheduler thread).
    pub scheduler_busy: f64,
    /// Scheduler time per dispatched instruction (policy cost), microseconds.
    pub scheduler_us_per_dispatch: f64,
    /// Messages (frame events, completions) whose sender found the scheduler's
    /// bounded inbox full and waited: backpressure, nothing dropped.
    pub inbox_full_waits: u64,
    /// Completed frames the scheduler waited to queue for the truth checker.
    pub checker_full_waits: u64,
    /// Symbols the radio units sent more than a frame's air time late: the
    /// emulated fronthaul, which shares the cores, was starved of CPU.
    pub late_symbols: u64,
    pub notes: Vec<String>,
    /// Every frame's record, by frame id (for `--frame-log`; not in the JSON).
    #[serde(skip)]
    pub records: Vec<FrameRecord>,
}

/// Every frame's record of `reports` as CSV (`policy,frame,ru,fate,decided_ms,latency_ms,reason`,
/// one header): which frames were lost, when, and how.
///
/// # Errors
/// Writing to `w` failed.
pub fn write_frame_log(reports: &[RunReport], w: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(w, "policy,frame,ru,fate,decided_ms,latency_ms,reason")?;
    reports.iter().try_for_each(|r| r.write_frame_rows(w))?;
    w.flush()
}

/// How `missed` frames were lost, `early` of them dropped before their deadline
/// because they could no longer meet it (`None` when none was missed).
pub fn miss_split(missed: u64, early: u64) -> Option<String> {
    (missed > 0).then(|| {
        format!(
            "{missed} missed: {early} dropped by the scheduler before their deadline, {} ran past it",
            missed - early.min(missed)
        )
    })
}

impl RunReport {
    /// This run's rows of [`write_frame_log`].
    fn write_frame_rows(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        for r in &self.records {
            let fate = match r.fate {
                FrameFate::Completed if r.decoded_ok == Some(false) => "wrong_bits",
                FrameFate::Completed => "completed",
                FrameFate::Missed if r.dropped_early(self.deadline_ns) => "missed_early",
                FrameFate::Missed => "missed",
                FrameFate::Rejected => "rejected",
                FrameFate::Failed => "failed",
            };
            // Quoted, with quotes doubled (RFC 4180): reasons contain commas.
            let reason = r.reason.as_deref().unwrap_or("").replace('"', "\"\"");
            writeln!(
                w,
                "{},{},{},{fate},{:.3},{:.3},\"{reason}\"",
                self.policy,
                r.frame,
                r.ru,
                r.decided_ns as f64 / 1e6,
                r.latency_ns as f64 / 1e6,
            )?;
        }
        Ok(())
    }

    /// Frames that did not complete in their deadline (missed, rejected, failed) over
    /// all frames.
    pub fn miss_fraction(&self) -> f64 {
        (self.frames - self.completed.min(self.frames)) as f64 / self.frames.max(1) as f64
    }

    /// How busy the CPU workers were, as a share of their time over the run: kernels
    /// (the stages' total) plus scheduling (which the workers and the ingest share,
    /// all counted as the workers'). `None` when a device is not a CPU device (a
    /// GPU's kernel time is not a worker's).
    pub fn worker_load(&self) -> Option<f64> {
        let cpu_only = self.device_costs.iter().all(|d| d.name.starts_with("cpu:"));
        if self.workers == 0 || !cpu_only {
            return None;
        }
        let kernel_ns: f64 = self
            .stages
            .iter()
            .map(|s| s.count as f64 * s.mean_us * 1e3)
            .sum();
        let capacity_ns = self.workers as f64 * self.wall_s.max(1e-9) * 1e9;
        Some(kernel_ns / capacity_ns + self.scheduler_busy / self.workers as f64)
    }

    /// `Err` when more than `max_miss` (a fraction of the frames) did not
    /// complete in their deadline: the run did not keep up.
    pub fn check_misses(&self, max_miss: f64) -> Result<(), TooManyMisses> {
        let fraction = self.miss_fraction();
        if fraction <= max_miss {
            return Ok(());
        }
        Err(TooManyMisses {
            policy: self.policy.clone(),
            config: self.config.clone(),
            undone: self.frames - self.completed.min(self.frames),
            frames: self.frames,
            fraction,
            allowed: max_miss,
            worker_load: self.worker_load(),
            late_symbols: self.late_symbols,
            missed: self.missed,
            missed_early: self.missed_early,
        })
    }
}

/// Worker load from which a run's misses are put down to too little CPU (the rest
/// of the cores' time goes to the fronthaul threads and the OS).
const SATURATED: f64 = 0.8;

/// A run that left more of its frames undone in their deadline than allowed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "{policy} on {config}: {undone} of {frames} frames ({:.1}%) not decoded within the deadline, above the {:.1}% allowed by --max-miss{}{}",
    100.0 * .fraction,
    100.0 * .allowed,
    self.split(),
    self.cause()
)]
pub struct TooManyMisses {
    pub policy: String,
    pub config: String,
    pub undone: u64,
    pub frames: u64,
    /// Share of the frames undone, 0..=1.
    pub fraction: f64,
    /// Share allowed, 0..=1.
    pub allowed: f64,
    /// [`RunReport::worker_load`] of the run.
    pub worker_load: Option<f64>,
    /// [`RunReport::late_symbols`] of the run.
    pub late_symbols: u64,
    /// [`RunReport::missed`] and [`RunReport::missed_early`] of the run.
    pub missed: u64,
    pub missed_early: u64,
}

impl TooManyMisses {
    /// How the missed frames were lost, starting with " (" (empty when none was).
    pub fn split(&self) -> String {
        miss_split(self.missed, self.missed_early)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default()
    }

    /// What the load says about the misses, starting with "; " (empty when the run
    /// had a GPU device).
    pub fn cause(&self) -> String {
        match self.worker_load {
            Some(load) if load >= SATURATED => format!(
                "; the CPU workers were {:.0}% busy (kernels and scheduling): more work \
                 than they can do at this frame rate, so lengthen --frame-period or add cores",
                100.0 * load
            ),
            // The radio units share the cores: when they fell behind their clock,
            // the cores were short even though the workers were not saturated.
            Some(load) if self.late_symbols > 0 => format!(
                "; the CPU workers were {:.0}% busy and the radio units sent {} symbols \
                 more than a frame late: the cores were short for the workers and the \
                 fronthaul threads together, so lengthen --frame-period or add cores",
                100.0 * load,
                self.late_symbols
            ),
            Some(load) => format!(
                "; the CPU workers were only {:.0}% busy (kernels and scheduling): the cores \
                 were not the limit, the deadline is short for when the symbols arrive and \
                 for the frame's chain of dependent instructions",
                100.0 * load
            ),
            None => String::new(),
        }
    }
}

/// One device of a run and whether the scheduler charged it calibrated or modelled
/// costs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeviceCostLabel {
    pub device: u32,
    /// `--devices` syntax (`cpu:2`, `gpu:0`).
    pub name: String,
    pub units: u32,
    pub costs: crate::costs::CostSource,
}

/// Collects records and stage timings while a run goes.
pub struct ReportBuilder {
    frame_latency: LatencyHistogram,
    stages: Vec<LatencyHistogram>,
    stage_total_ns: [u128; Opcode::ALL.len()],
    pub records: Vec<FrameRecord>,
    /// Waits on the bounded scheduler inbox and checker queue (set by the driver).
    pub inbox_full_waits: u64,
    pub checker_full_waits: u64,
}

impl Default for ReportBuilder {
    fn default() -> Self {
        Self {
            frame_latency: LatencyHistogram::new(),
            stages: Opcode::ALL
                .iter()
                .map(|_| LatencyHistogram::new())
                .collect(),
            stage_total_ns: [0; Opcode::ALL.len()],
            records: Vec::new(),
            inbox_full_waits: 0,
            checker_full_waits: 0,
        }
    }
}

/// Run-wide facts the builder cannot see.
#[derive(Clone, Debug, Default)]
pub struct RunMeta {
    pub policy: String,
    pub config: String,
    pub devices: usize,
    pub workers: usize,
    pub rus: usize,
    pub offered_fps: f64,
    pub wall_s: f64,
    /// Each frame's deadline after its first packet.
    pub deadline_ns: Nanos,
    pub pool: PoolStats,
    pub bad_packets: u64,
    pub rescheduled: u64,
    pub device_removals: u64,
    pub device_instrs: Vec<u64>,
    pub device_costs: Vec<DeviceCostLabel>,
    pub scheduler_busy_ns: u64,
    pub dispatches: u64,
    /// Symbols the radio units sent more than a frame's air time late.
    pub late_symbols: u64,
    pub notes: Vec<String>,
}

impl ReportBuilder {
    /// One execution of `opcode` took `ns`.
    pub fn stage(&mut self, opcode: Opcode, ns: Nanos) {
        self.stages[opcode.index()].record(ns);
        self.stage_total_ns[opcode.index()] += u128::from(ns);
    }

    pub fn frame(&mut self, r: FrameRecord) {
        if r.fate == FrameFate::Completed {
            self.frame_latency.record(r.latency_ns);
        }
        self.records.push(r);
    }

    pub fn finish(mut self, meta: RunMeta) -> RunReport {
        self.records.sort_by_key(|r| r.frame);
        let count = |f: FrameFate| self.records.iter().filter(|r| r.fate == f).count() as u64;
        let completed = count(FrameFate::Completed);
        let missed_early = self
            .records
            .iter()
            .filter(|r| r.dropped_early(meta.deadline_ns))
            .count() as u64;
        let decoded_ok = self
            .records
            .iter()
            .filter(|r| r.decoded_ok == Some(true))
            .count() as u64;
        let decode_errors = self
            .records
            .iter()
            .filter(|r| r.decoded_ok == Some(false))
            .count() as u64;
        let good_bits: u64 = self
            .records
            .iter()
            .filter(|r| r.fate == FrameFate::Completed && r.decoded_ok != Some(false))
            .map(|r| r.uplink_bits)
            .sum();
        let h = &self.frame_latency;
        let ms = |ns: u64| ns as f64 / 1e6;
        let summary = h.summary();
        let wall = meta.wall_s.max(1e-9);
        let cdf = h.cdf(1.02).into_iter().map(|(v, f)| (ms(v), f)).collect();
        let stages = Opcode::ALL
            .iter()
            .filter(|o| !self.stages[o.index()].is_empty())
            .map(|o| {
                let s = &self.stages[o.index()];
                StageStat {
                    opcode: o.name(),
                    count: s.len(),
                    mean_us: s.mean_ns() / 1e3,
                    p99_us: s.quantile(99, 100) as f64 / 1e3,
                    per_frame_us: self.stage_total_ns[o.index()] as f64
                        / 1e3
                        / self.records.len().max(1) as f64,
                }
            })
            .collect();
        RunReport {
            policy: meta.policy,
            config: meta.config,
            devices: meta.devices,
            workers: meta.workers,
            rus: meta.rus,
            frames: self.records.len() as u64,
            completed,
            decoded_ok,
            decode_errors,
            missed: count(FrameFate::Missed),
            missed_early,
            rejected: count(FrameFate::Rejected),
            failed: count(FrameFate::Failed),
            offered_fps: meta.offered_fps,
            achieved_fps: completed as f64 / wall,
            decoded_mbps: good_bits as f64 / wall / 1e6,
            mean_ms: h.mean_ns() / 1e6,
            p50_ms: ms(summary.median_ns),
            p99_ms: ms(summary.p99_ns),
            p9999_ms: ms(h.quantile(9999, 10_000)),
            max_ms: ms(summary.max_ns),
            wall_s: meta.wall_s,
            deadline_ns: meta.deadline_ns,
            stages,
            cdf,
            pool: meta.pool,
            bad_packets: meta.bad_packets,
            rescheduled: meta.rescheduled,
            device_removals: meta.device_removals,
            device_instrs: meta.device_instrs,
            device_costs: meta.device_costs,
            scheduler_busy: meta.scheduler_busy_ns as f64 / 1e9 / wall,
            scheduler_us_per_dispatch: meta.scheduler_busy_ns as f64
                / 1e3
                / meta.dispatches.max(1) as f64,
            inbox_full_waits: self.inbox_full_waits,
            checker_full_waits: self.checker_full_waits,
            late_symbols: meta.late_symbols,
            notes: meta.notes,
            records: self.records,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(frame: u64, fate: FrameFate, ms: u64, ok: Option<bool>) -> FrameRecord {
        FrameRecord {
            frame,
            ru: 0,
            fate,
            latency_ns: ms * 1_000_000,
            decided_ns: frame * 1_000_000 + ms * 1_000_000,
            decoded_ok: ok,
            uplink_bits: 1000,
            reason: None,
        }
    }

    #[test]
    fn counts_quantiles_and_throughput() {
        let mut b = ReportBuilder::default();
        for f in 0..198 {
            b.frame(rec(f, FrameFate::Completed, 1 + f % 2, Some(true)));
        }
        b.frame(rec(198, FrameFate::Completed, 50, Some(false)));
        b.frame(rec(199, FrameFate::Missed, 0, None));
        b.stage(Opcode::Zf, 2_000);
        b.stage(Opcode::Zf, 4_000);
        let r = b.finish(RunMeta {
            wall_s: 2.0,
            workers: 1,
            ..RunMeta::default()
        });
        assert_eq!(
            (
                r.frames,
                r.completed,
                r.missed,
                r.decoded_ok,
                r.decode_errors
            ),
            (200, 199, 1, 198, 1)
        );
        assert!((r.p9999_ms - 50.0).abs() < 0.1, "{}", r.p9999_ms);
        assert!(r.p99_ms <= 2.01);
        assert!((r.achieved_fps - 99.5).abs() < 1e-9);
        // 198 good frames x 1000 bits over 2 s.
        assert!((r.decoded_mbps - 0.099).abs() < 1e-9);
        assert_eq!(r.stages.len(), 1);
        assert_eq!(r.stages[0].opcode, "zf");
        assert!((r.stages[0].mean_us - 3.0).abs() < 0.01);
        assert!(r.cdf.last().unwrap().1 > 0.999);
        assert!(serde_json::to_string(&r).unwrap().contains("\"p9999_ms\""));
        // 1 of 200 frames missed: 0.5%.
        assert!(r.check_misses(0.005).is_ok());
        let e = r.check_misses(0.001).unwrap_err();
        assert_eq!((e.undone, e.frames), (1, 200));
        assert!(e.to_string().contains("1 of 200 frames (0.5%)"), "{e}");
        // One CPU worker, two zf of 2 and 4 us in a 2 s run: idle.
        assert!(e.worker_load.is_some_and(|l| l < 0.01), "{e:?}");
        assert!(e.cause().contains("only 0% busy"), "{}", e.cause());
        assert!(e.cause().contains("not the limit"), "{}", e.cause());
        let busy = TooManyMisses {
            worker_load: Some(0.93),
            ..e.clone()
        };
        assert!(busy.cause().contains("93% busy"), "{}", busy.cause());
        assert!(busy.cause().contains("--frame-period"), "{}", busy.cause());
        let starved = TooManyMisses {
            worker_load: Some(0.76),
            late_symbols: 825,
            ..e.clone()
        };
        let cause = starved.cause();
        assert!(
            cause.contains("76% busy")
                && cause.contains("825 symbols")
                && !cause.contains("not the limit"),
            "{cause}"
        );
        let gpu = TooManyMisses {
            worker_load: None,
            ..e
        };
        assert_eq!(gpu.cause(), "");
    }

    #[test]
    fn misses_split_into_shed_and_late_and_every_frame_is_logged() {
        let mut b = ReportBuilder::default();
        b.frame(rec(2, FrameFate::Missed, 4, None));
        b.frame(rec(0, FrameFate::Completed, 1, Some(true)));
        b.frame(rec(1, FrameFate::Missed, 0, None));
        b.frame(FrameRecord {
            reason: Some("no slot, \"pool\" full".into()),
            ..rec(3, FrameFate::Rejected, 0, None)
        });
        let r = b.finish(RunMeta {
            policy: "lroc".into(),
            wall_s: 1.0,
            deadline_ns: 4_000_000,
            ..RunMeta::default()
        });
        // Frame 1 was NACKed at once, frame 2 at its deadline.
        assert_eq!((r.missed, r.missed_early), (2, 1));
        let e = r.check_misses(0.0).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("3 of 4 frames")
                && text.contains("2 missed: 1 dropped by the scheduler before their deadline")
                && text.contains("1 ran past it"),
            "{text}"
        );
        let mut csv = Vec::new();
        write_frame_log(std::slice::from_ref(&r), &mut csv).unwrap();
        let csv = String::from_utf8(csv).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines,
            [
                "policy,frame,ru,fate,decided_ms,latency_ms,reason",
                "lroc,0,0,completed,1.000,1.000,\"\"",
                "lroc,1,0,missed_early,1.000,0.000,\"\"",
                "lroc,2,0,missed,6.000,4.000,\"\"",
                "lroc,3,0,rejected,3.000,0.000,\"no slot, \"\"pool\"\" full\"",
            ]
        );
        // The JSON report stays per-run figures, without the per-frame rows.
        assert!(!serde_json::to_string(&r).unwrap().contains("decided_ns"));
    }
}
