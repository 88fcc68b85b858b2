//! Offered load swept up to saturation, every policy in the same run on the same
//! CPU devices, with LROC/baseline ratios and the floor: what `radiohost station
//! bench` runs.
//!
//! The floor is the pool's ideal capacity: per device, its units x 1 s / (serial
//! execution time of one frame on it), the serial time measured in this run by
//! calibrating every device through its executor (each opcode of a frame run one at
//! a time in DAG order, median per opcode; [`crate::calibration`]). The runs then
//! charge the devices these calibrated costs, and the calibration is what
//! `--calibration-out` saves for the simulator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use radiohost_phy::FrameConfig;
use serde::Serialize;

use crate::calibration::{Calibration, DeviceCalibration};
use crate::kernels::KernelContext;
use crate::policy::{make_policy, PolicyParams};
use crate::ru::TransportKind;
use crate::runtime::{run_station, DeviceSpec, StationSetup};
use crate::setup::SetupError;
use crate::shape::FrameShape;

/// A load sweep.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Frame configurations with their names.
    pub configs: Vec<(FrameConfig, String)>,
    pub policies: Vec<String>,
    pub devices: Vec<DeviceSpec>,
    /// Offered loads as fractions of the measured floor capacity.
    pub loads: Vec<f64>,
    /// Frames per run (one run per configuration, load and policy).
    pub frames: u64,
    /// Frame deadline; `None`: max(4 ms, 4 x the serial frame time).
    pub deadline_ns: Option<u64>,
    /// Subcarrier parts; `None`: [`FrameShape::default_parts_for`] per configuration.
    pub parts: Option<usize>,
    pub transport: TransportKind,
}

/// One run's row.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub config: String,
    pub policy: String,
    /// Offered load as a fraction of the floor.
    pub load: f64,
    pub offered_fps: f64,
    pub achieved_fps: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    /// Missed, rejected and failed frames.
    pub missed: u64,
    pub decoded_ok: u64,
    pub frames: u64,
    /// `calibrated` when every device was charged measured costs, else `modelled`.
    pub costs: &'static str,
}

/// LROC against one baseline at one offered load.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    pub config: String,
    pub offered_fps: f64,
    pub baseline: String,
    /// LROC P99.99 / baseline P99.99 (below 1: LROC's tail is shorter); `None` when
    /// either completed no frame.
    pub p9999_ratio: Option<f64>,
    /// LROC achieved / baseline achieved frames/s; `None` when the baseline achieved 0.
    pub throughput_ratio: Option<f64>,
}

/// The best a policy achieved over the sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    pub config: String,
    pub policy: String,
    /// Highest achieved frames/s with no wrong decode, over the sweep.
    pub max_fps: f64,
    pub floor_fps: f64,
    pub of_floor: f64,
}

/// The calibration of one configuration and the floor it gives.
#[derive(Clone, Debug, Serialize)]
pub struct BenchFloor {
    pub config: String,
    /// One frame's instructions one after the other on the first device.
    pub serial_frame_us: f64,
    pub floor_fps: f64,
    pub calibration: Calibration,
}

/// Serial time of one frame of `ctx` on `dev`: the sum of its opcodes' medians.
pub fn serial_frame_ns(ctx: &KernelContext, dev: &DeviceCalibration) -> f64 {
    ctx.frame_program(0)
        .iter()
        .map(|i| dev.median_ns(i.opcode).unwrap_or(0) as f64)
        .sum()
}

/// Everything a sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    pub ratios: Vec<Ratio>,
    pub saturation: Vec<Saturation>,
    pub calibration: Vec<BenchFloor>,
    /// /proc/loadavg at the start (empty where there is none).
    pub loadavg: String,
    pub workers: usize,
}

impl BenchReport {
    /// `Err` naming every run at an offered load of at most the floor
    /// (load <= 1) that left more than `max_miss` (a fraction) of its frames
    /// undecoded in deadline: below the floor a station should keep up.
    pub fn check_misses(&self, max_miss: f64) -> Result<(), BenchMisses> {
        let runs: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.load <= 1.0 && r.frames > 0)
            .filter(|r| r.missed as f64 / r.frames as f64 > max_miss)
            .map(|r| {
                format!(
                    "{} {} at {:.0} frames/s: {} of {}",
                    r.config, r.policy, r.offered_fps, r.missed, r.frames
                )
            })
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        Err(BenchMisses {
            runs,
            allowed: max_miss,
        })
    }
}

/// Runs of a sweep that missed more deadlines than allowed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "{} run(s) left more than {:.1}% of frames undecoded in deadline ({})",
    runs.len(),
    100.0 * allowed,
    runs.join("; ")
)]
pub struct BenchMisses {
    /// One line per run over the limit.
    pub runs: Vec<String>,
    /// Share allowed, 0..=1.
    pub allowed: f64,
}

/// Run the sweep; `progress` hears a description before each run. Once `stop`
/// is set (Ctrl-C) no further run starts and what was measured returns.
pub fn run_bench(
    b: &BenchConfig,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, SetupError> {
    let stopped = || stop.load(Ordering::Relaxed);
    if b.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) || b.loads.is_empty() {
        return Err(SetupError::Loads);
    }
    let workers: usize = b.devices.iter().map(DeviceSpec::cpu_workers).sum();
    let mut rep = BenchReport {
        rows: Vec::new(),
        ratios: Vec::new(),
        saturation: Vec::new(),
        calibration: Vec::new(),
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_string(),
        workers,
    };
    for (cfg, name) in &b.configs {
        if stopped() {
            break;
        }
        let parts = FrameShape::parts_or_default(cfg, b.parts, &b.devices);
        let mut s = StationSetup::new(cfg, name, parts, 8, b.devices.clone()).map_err(|e| {
            SetupError::Engine {
                context: format!("setting up {name}"),
                source: e,
            }
        })?;
        // Every distinct device once (cpu:1 twice is one measurement).
        let mut distinct: Vec<DeviceSpec> = Vec::new();
        for d in &b.devices {
            if !distinct.iter().any(|x| x.name() == d.name()) {
                distinct.push(d.clone());
            }
        }
        progress(&format!("{name}: calibrating {} device(s)", distinct.len()));
        let cal = Calibration::measure(&distinct, &s.ctx, &s.bank, name, 8)?;
        let floor_fps: f64 = b
            .devices
            .iter()
            .filter_map(|d| {
                let c = cal.device(&d.name())?;
                let serial = serial_frame_ns(&s.ctx, c);
                // A CPU device runs one instruction per worker; a GPU overlaps
                // instructions, but its floor is counted as one frame at a time.
                let width = d.cpu_workers().max(1) as f64;
                (serial > 0.0).then(|| width * 1e9 / serial)
            })
            .sum();
        let serial_ns = cal
            .devices
            .first()
            .map_or(0.0, |d| serial_frame_ns(&s.ctx, d));
        s.calibration = Some(Arc::new(cal.clone()));
        rep.calibration.push(BenchFloor {
            config: name.clone(),
            serial_frame_us: serial_ns / 1e3,
            floor_fps,
            calibration: cal,
        });
        s.transport = b.transport;
        s.frames = b.frames;
        s.deadline_ns = b
            .deadline_ns
            .unwrap_or((4.0 * serial_ns) as u64)
            .max(4_000_000);
        for &load in &b.loads {
            let offered = floor_fps * load;
            s.frame_period_ns = (1e9 / offered) as u64;
            let mut at_load = Vec::new();
            for p in &b.policies {
                if stopped() {
                    break;
                }
                progress(&format!("{name} {p} {offered:.0} frames/s"));
                let policy = make_policy(p, &s.ctx.shape, &PolicyParams::default())?;
                let r = run_station(&s, policy).map_err(|e| SetupError::Engine {
                    context: format!("{name} {p} at {offered:.0} frames/s"),
                    source: e,
                })?;
                if r.decode_errors > 0 {
                    return Err(SetupError::WrongBits {
                        config: name.clone(),
                        policy: p.clone(),
                        frames: r.decode_errors,
                    });
                }
                at_load.push(BenchRow {
                    config: name.clone(),
                    policy: p.clone(),
                    load,
                    offered_fps: 1e9 / s.frame_period_ns as f64,
                    achieved_fps: r.achieved_fps,
                    mean_ms: r.mean_ms,
                    p99_ms: r.p99_ms,
                    p9999_ms: r.p9999_ms,
                    missed: r.missed + r.rejected + r.failed,
                    decoded_ok: r.decoded_ok,
                    frames: r.frames,
                    costs: if r
                        .device_costs
                        .iter()
                        .all(|d| d.costs == crate::costs::CostSource::Calibrated)
                    {
                        "calibrated"
                    } else {
                        "modelled"
                    },
                });
            }
            if let Some(l) = at_load.iter().find(|r| r.policy == "lroc") {
                for base in at_load.iter().filter(|r| r.policy != "lroc") {
                    rep.ratios.push(Ratio {
                        config: name.clone(),
                        offered_fps: l.offered_fps,
                        baseline: base.policy.clone(),
                        p9999_ratio: (l.p9999_ms > 0.0 && base.p9999_ms > 0.0)
                            .then(|| l.p9999_ms / base.p9999_ms),
                        throughput_ratio: (base.achieved_fps > 0.0)
                            .then(|| l.achieved_fps / base.achieved_fps),
                    });
                }
            }
            rep.rows.extend(at_load);
            if stopped() {
                break;
            }
        }
        for p in &b.policies {
            let max_fps = rep
                .rows
                .iter()
                .filter(|r| &r.config == name && &r.policy == p)
                .map(|r| r.achieved_fps)
                .fold(0.0, f64::max);
            rep.saturation.push(Saturation {
                config: name.clone(),
                policy: p.clone(),
                max_fps,
                floor_fps,
                of_floor: max_fps / floor_fps,
            });
        }
    }
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::load_config;

    #[test]
    fn tiny_sweep_has_rows_ratios_and_a_floor() {
        let b = BenchConfig {
            configs: vec![load_config(std::path::Path::new("8x2")).unwrap()],
            policies: vec!["lroc".into(), "frame".into()],
            devices: DeviceSpec::split(1, 1, &[]),
            loads: vec![0.2],
            frames: 4,
            deadline_ns: Some(1_000_000_000),
            parts: Some(2),
            transport: TransportKind::Ring,
        };
        let mut runs = 0;
        let rep = run_bench(&b, &AtomicBool::new(false), |_| runs += 1).unwrap();
        assert_eq!(
            (runs, rep.rows.len(), rep.ratios.len(), rep.saturation.len()),
            (3, 2, 1, 2),
            "one calibration and two runs"
        );
        assert!(rep.check_misses(1.0).is_ok());
        let mut missed = rep.clone();
        missed.rows[0].missed = missed.rows[0].frames;
        let e = missed.check_misses(0.5).unwrap_err();
        assert_eq!(e.runs.len(), 1, "{e}");
        assert!(e.to_string().contains("more than 50.0%"), "{e}");
        let c = &rep.calibration[0];
        assert!(c.serial_frame_us > 0.0 && c.floor_fps > 0.0);
        assert_eq!(c.calibration.devices.len(), 1);
        // The runs were charged the measured costs, and say so.
        assert!(
            rep.rows.iter().all(|r| r.costs == "calibrated"),
            "{:?}",
            rep.rows
        );
        assert!(run_bench(
            &BenchConfig {
                loads: vec![-1.0],
                ..b.clone()
            },
            &AtomicBool::new(false),
            |_| ()
        )
        .is_err());
        // A stop during the calibration: the calibration is kept, no run starts.
        let stop = AtomicBool::new(false);
        let rep = run_bench(&b, &stop, |_| stop.store(true, Ordering::Relaxed)).unwrap();
        assert_eq!((rep.calibration.len(), rep.rows.len()), (1, 0));
    }
}
