//! Offered load swept up to saturation, every policy in the same run on the same
//! CPU devices, with LROC/baseline ratios and the floor: what `radiohost station
//! bench` runs.
//!
//! The floor is the machine's ideal capacity: workers x 1 s / (serial execution time
//! of one frame), the serial time measured in this run by executing frames'
//! instructions in DAG order on one thread (median per opcode, which is also the
//! per-opcode calibration the simulator reads).

use std::collections::BTreeMap;
use std::time::Instant;

use radiohost_phy::FrameConfig;
use serde::Serialize;

use crate::kernels::{execute, FrameSlot, Scratch};
use crate::policy::{make_policy, PolicyParams};
use crate::ru::TransportKind;
use crate::runtime::{run_station, DeviceSpec, StationSetup};
use crate::setup::SetupError;

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
    pub parts: usize,
    pub transport: TransportKind,
}

/// One run's row.
#[derive(Clone, Debug, Serialize)]
pub struct BenchRow {
    pub config: String,
    pub policy: String,
    pub offered_fps: f64,
    pub achieved_fps: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    /// Missed, rejected and failed frames.
    pub missed: u64,
    pub decoded_ok: u64,
    pub frames: u64,
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

/// The serial per-opcode execution times of one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    pub config: String,
    pub serial_frame_us: f64,
    pub floor_fps: f64,
    pub cpu: BTreeMap<&'static str, u64>,
    pub shape: serde_json::Value,
}

impl Calibration {
    /// The file the scheduling simulator reads (`{"cpu": {opcode: ns}, "shape": ..}`).
    pub fn simulator_json(&self) -> serde_json::Value {
        serde_json::json!({ "cpu": self.cpu, "shape": self.shape, "config": self.config })
    }
}

/// Everything a sweep measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    pub ratios: Vec<Ratio>,
    pub saturation: Vec<Saturation>,
    pub calibration: Vec<Calibration>,
    /// /proc/loadavg at the start (empty where there is none).
    pub loadavg: String,
    pub workers: usize,
}

/// Execute `frames` frames single-threaded in DAG order. Per opcode the median
/// time of its executions (robust to preemption on a shared machine), and the serial
/// time of one frame as the sum of those medians over the frame's instructions.
pub fn calibrate(
    s: &StationSetup,
    frames: u64,
) -> Result<(BTreeMap<&'static str, u64>, f64), SetupError> {
    let ctx = &s.ctx;
    let slot = FrameSlot::new(ctx);
    let mut scratch = Scratch::new(ctx)?;
    let mut samples: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    // One warm-up frame, then the measured ones.
    for f in 0..=frames {
        let truth = s.bank.truth(0, f);
        for (rx, sym) in ctx.shape.received_symbols().into_iter().enumerate() {
            slot.stage_symbol_from_frame(ctx, rx, sym, &truth.frame.samples);
        }
        crate::kernels::slot::write(&slot.downlink_payload)
            .clone_from_slice(&truth.frame.downlink_payload);
        for i in ctx.frame_program(f) {
            let t = Instant::now();
            execute(ctx, &slot, i, &mut scratch)?;
            let ns = t.elapsed().as_nanos() as u64;
            if f > 0 {
                samples.entry(i.opcode.name()).or_default().push(ns);
            }
        }
    }
    let per_op: BTreeMap<&'static str, u64> = samples
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            (k, v[v.len() / 2])
        })
        .collect();
    let serial: u64 = ctx
        .frame_program(0)
        .iter()
        .map(|i| per_op.get(i.opcode.name()).copied().unwrap_or(0))
        .sum();
    Ok((per_op, serial as f64))
}

/// Run the sweep; `progress` hears a description before each run.
pub fn run_bench(
    b: &BenchConfig,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, SetupError> {
    if b.loads.iter().any(|l| !(*l > 0.0 && *l < 100.0)) || b.loads.is_empty() {
        return Err(SetupError::Loads);
    }
    let workers: usize = b.devices.iter().map(|d| d.workers).sum();
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
        let mut s = StationSetup::new(cfg, name, b.parts, 8, b.devices.clone()).map_err(|e| {
            SetupError::Engine {
                context: format!("setting up {name}"),
                source: e,
            }
        })?;
        let (per_op, serial_ns) = calibrate(&s, 8)?;
        let floor_fps = workers as f64 * 1e9 / serial_ns;
        rep.calibration.push(Calibration {
            config: name.clone(),
            serial_frame_us: serial_ns / 1e3,
            floor_fps,
            cpu: per_op,
            shape: serde_json::json!({
                "antennas": cfg.antennas, "users": cfg.users, "fft_size": cfg.fft_size,
                "data_num": cfg.data_num, "parts": b.parts, "schedule": cfg.file.frame_schedule,
            }),
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
                    offered_fps: 1e9 / s.frame_period_ns as f64,
                    achieved_fps: r.achieved_fps,
                    mean_ms: r.mean_ms,
                    p99_ms: r.p99_ms,
                    p9999_ms: r.p9999_ms,
                    missed: r.missed + r.rejected + r.failed,
                    decoded_ok: r.decoded_ok,
                    frames: r.frames,
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
    use crate::setup::{cpu_devices, load_config};

    #[test]
    fn tiny_sweep_has_rows_ratios_and_a_floor() {
        let b = BenchConfig {
            configs: vec![load_config(std::path::Path::new("8x2")).unwrap()],
            policies: vec!["lroc".into(), "frame".into()],
            devices: cpu_devices(1, 1, false).unwrap(),
            loads: vec![0.2],
            frames: 4,
            deadline_ns: Some(1_000_000_000),
            parts: 2,
            transport: TransportKind::Ring,
        };
        let mut runs = 0;
        let rep = run_bench(&b, |_| runs += 1).unwrap();
        assert_eq!(
            (runs, rep.rows.len(), rep.ratios.len(), rep.saturation.len()),
            (2, 2, 1, 2)
        );
        let c = &rep.calibration[0];
        assert!(c.serial_frame_us > 0.0 && c.floor_fps > 0.0 && !c.cpu.is_empty());
        assert!(c.simulator_json()["cpu"].is_object());
        assert!(run_bench(
            &BenchConfig {
                loads: vec![-1.0],
                ..b
            },
            |_| ()
        )
        .is_err());
    }
}
