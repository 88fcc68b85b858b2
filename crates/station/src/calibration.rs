//! Calibration: every opcode of a frame run on each executor through the
//! [`Executor`](crate::runtime::Executor) trait, one instruction at a time, its
//! latency distribution recorded ([`radiohost_rt::stats`]) with the resource units the
//! executor charges for it; saved and loaded as JSON (`radiohost station calibrate`).
//!
//! The runtime charges a calibrated device these costs instead of the model's, and
//! the simulator builds its [`CostModel`] from such a file; both label the source.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use radiohost_rt::stats::LatencyHistogram;
use serde::{Deserialize, Serialize};

use crate::costs::{CostSource, DeviceProfile, OpcodeCost};
use crate::isa::{DeviceKind, Opcode};
use crate::kernels::KernelContext;
use crate::pool::Exhaustion;
use crate::ru::FrameBank;
use crate::runtime::{
    driver_channel, frame_pool, CompletionSink, DeviceSpec, DriverMsg, ExecutorEnv, Job,
    StationError,
};
use crate::sim::{CostModel, RefShape};

/// The file format's name and version.
/// Version 2: `encode` includes the QAM mapping (version 1's `modul`).
pub const FORMAT: &str = "radiohost-station-calibration/2";

/// How long one instruction may take before calibration gives up on the device.
const INSTR_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a calibration could not be made, read or written.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("could not start {device}: {source}")]
    Start {
        device: String,
        #[source]
        source: StationError,
    },
    #[error("{device}: no frame slot: {source}")]
    Pool {
        device: String,
        #[source]
        source: crate::pool::PoolError,
    },
    #[error("{device} refused {instr}: {reason}")]
    Refused {
        device: String,
        instr: String,
        reason: crate::runtime::SubmitError,
    },
    #[error("{device} failed {instr}: {source}")]
    Instr {
        device: String,
        instr: String,
        #[source]
        source: crate::engine::InstrError,
    },
    #[error("{device} did not finish {instr} within {secs} s")]
    Timeout {
        device: String,
        instr: String,
        secs: u64,
    },
    #[error("{device} failed during calibration: {fault}")]
    DeviceFailed { device: String, fault: String },
    #[error("reading or writing {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a calibration file: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: format `{found}`, expected `{FORMAT}` (write it with `radiohost station calibrate`)")]
    Format { path: String, found: String },
    #[error("{path}: {what}")]
    Invalid { path: String, what: String },
    #[error(
        "the calibration was measured on {calibrated}, this run is {run}: measure one for it \
         (`radiohost station calibrate --config {config} --parts {} --out FILE`)",
        run.parts
    )]
    Shape {
        calibrated: RefShape,
        run: RefShape,
        config: String,
    },
}

/// One opcode on one device: units charged and latency distribution (ns).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpcodeStats {
    pub need: u32,
    pub samples: u64,
    pub min_ns: u64,
    pub median_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Rounded to whole ns (the file round-trips exactly).
    pub mean_ns: u64,
}

/// Every opcode measured on one device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceCalibration {
    /// `--devices` syntax (`cpu:1`, `gpu:0`).
    pub name: String,
    pub kind: DeviceKind,
    pub units: u32,
    pub memory_bytes: u64,
    /// By opcode name.
    pub opcodes: BTreeMap<String, OpcodeStats>,
}

impl DeviceCalibration {
    /// The profile the scheduler charges: median latency and the measured need.
    /// Opcodes the calibration has no sample of keep `fallback`'s cost.
    pub fn profile(&self, units: u32, fallback: &DeviceProfile) -> DeviceProfile {
        let mut p = DeviceProfile {
            kind: self.kind,
            units,
            memory_bytes: self.memory_bytes,
            costs: fallback.costs,
            source: CostSource::Calibrated,
        };
        for op in Opcode::ALL {
            if let Some(s) = self.opcodes.get(op.name()) {
                p = p.with_cost(
                    op,
                    OpcodeCost {
                        need: s.need,
                        latency_ns: s.median_ns,
                    },
                );
            }
        }
        p
    }

    /// Median latency of `op`, if measured.
    pub fn median_ns(&self, op: Opcode) -> Option<u64> {
        self.opcodes.get(op.name()).map(|s| s.median_ns)
    }
}

/// A calibration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: String,
    /// Frame configuration it was measured on.
    pub config: String,
    pub shape: RefShape,
    /// Frames run per device (after one warm-up frame).
    pub frames: u64,
    /// /proc/loadavg when it started (a busy machine inflates the figures).
    pub loadavg: String,
    pub devices: Vec<DeviceCalibration>,
}

impl Calibration {
    /// Measure every device of `specs` on `ctx`'s configuration (`config` names it).
    ///
    /// # Errors
    /// A device that cannot start, refuses, fails or stalls an instruction.
    pub fn measure(
        specs: &[DeviceSpec],
        ctx: &Arc<KernelContext>,
        bank: &FrameBank,
        config: &str,
        frames: u64,
    ) -> Result<Self, CalibrationError> {
        let devices = specs
            .iter()
            .map(|s| calibrate_device(s, ctx, bank, frames))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            format: FORMAT.to_string(),
            config: config.to_string(),
            shape: RefShape::of(&ctx.shape, ctx.cfg.fft_size),
            frames,
            loadavg: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .trim()
                .to_string(),
            devices,
        })
    }

    /// Refuse a run of another shape: the runtime charges the measured figures as
    /// they are (only the simulator scales them to other sizes).
    ///
    /// # Errors
    /// [`CalibrationError::Shape`] when any dimension, the part count or the user group count differs.
    pub fn check_run_shape(
        &self,
        shape: &crate::shape::FrameShape,
        fft_size: usize,
        config: &str,
    ) -> Result<(), CalibrationError> {
        let run = RefShape::of(shape, fft_size);
        match run == self.shape {
            true => Ok(()),
            false => Err(CalibrationError::Shape {
                calibrated: self.shape,
                run,
                config: config.to_string(),
            }),
        }
    }

    /// The measured device called `name`; a CPU device of any width matches the
    /// measured CPU device (its figures are per worker).
    pub fn device(&self, name: &str) -> Option<&DeviceCalibration> {
        self.devices.iter().find(|d| d.name == name).or_else(|| {
            name.starts_with("cpu:")
                .then(|| self.devices.iter().find(|d| d.kind == DeviceKind::Cpu))
                .flatten()
        })
    }

    /// The first measured device of `kind`.
    pub fn of_kind(&self, kind: DeviceKind) -> Option<&DeviceCalibration> {
        self.devices.iter().find(|d| d.kind == kind)
    }

    /// Calibrated costs for the device called `name` (`cpu:N` takes `N` units), or
    /// `None` when this calibration did not measure it.
    pub fn profile_for(&self, name: &str) -> Option<DeviceProfile> {
        let d = self.device(name)?;
        let units = match name.strip_prefix("cpu:") {
            Some(n) => n.parse().unwrap_or(d.units),
            None => d.units,
        };
        let model = CostModel::default();
        let shape = self.frame_shape();
        let fallback = DeviceProfile::modelled(d.kind, units, &model, &shape, self.shape.fft_size);
        Some(d.profile(units, &fallback))
    }

    /// The frame shape of the reference (for modelled fallbacks).
    fn frame_shape(&self) -> crate::shape::FrameShape {
        crate::shape::FrameShape {
            antennas: self.shape.antennas,
            users: self.shape.users,
            data_num: self.shape.data_num,
            pilot_symbols: vec![0],
            uplink_symbols: vec![1],
            downlink_reference: None,
            downlink_symbols: vec![],
            parts: self.shape.parts,
            zf_batch_span: 1,
            user_groups: self.shape.user_groups,
        }
    }

    /// Parse a calibration file's text (`path` names it in errors).
    ///
    /// # Errors
    /// Not JSON of this format, or a device without opcodes.
    pub fn from_json(text: &str, path: &str) -> Result<Self, CalibrationError> {
        let mut c: Calibration =
            serde_json::from_str(text).map_err(|source| CalibrationError::Json {
                path: path.to_string(),
                source,
            })?;
        if c.format != FORMAT {
            return Err(CalibrationError::Format {
                path: path.to_string(),
                found: c.format,
            });
        }
        let invalid = |what: String| CalibrationError::Invalid {
            path: path.to_string(),
            what,
        };
        c.shape = c.shape.normalised();
        if c.shape.user_groups > c.shape.users {
            return Err(invalid(format!(
                "shape has {} user groups for {} users",
                c.shape.user_groups, c.shape.users
            )));
        }
        for (field, v) in [
            ("antennas", c.shape.antennas),
            ("users", c.shape.users),
            ("data_num", c.shape.data_num),
            ("fft_size", c.shape.fft_size),
            ("parts", c.shape.parts),
        ] {
            if v == 0 {
                return Err(invalid(format!("shape field {field} must be at least 1")));
            }
        }
        for d in &c.devices {
            for (name, s) in &d.opcodes {
                if !Opcode::ALL.iter().any(|o| o.name() == name) {
                    let known: Vec<&str> = Opcode::ALL.iter().map(|o| o.name()).collect();
                    return Err(invalid(format!(
                        "device {} names unknown opcode `{name}`: use one of {}",
                        d.name,
                        known.join(", ")
                    )));
                }
                if s.need == 0 || s.samples == 0 {
                    return Err(invalid(format!(
                        "device {} opcode {name}: need and samples must be at least 1",
                        d.name
                    )));
                }
            }
        }
        Ok(c)
    }

    /// Read a calibration file.
    ///
    /// # Errors
    /// Unreadable, or see [`Calibration::from_json`].
    pub fn load(path: &Path) -> Result<Self, CalibrationError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CalibrationError::Io {
            path: p.clone(),
            source,
        })?;
        Self::from_json(&text, &p)
    }

    /// Write it as pretty JSON.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), CalibrationError> {
        let text = serde_json::to_string_pretty(self).map_err(|source| CalibrationError::Json {
            path: path.display().to_string(),
            source,
        })?;
        std::fs::write(path, text).map_err(|source| CalibrationError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}

fn summarise(h: &LatencyHistogram, need: u32) -> OpcodeStats {
    let s = h.summary();
    OpcodeStats {
        need,
        samples: s.samples,
        min_ns: s.min_ns,
        median_ns: s.median_ns,
        p90_ns: s.p90_ns,
        p99_ns: s.p99_ns,
        max_ns: s.max_ns,
        mean_ns: h.mean_ns().round() as u64,
    }
}

/// Run `frames` frames (after one warm-up frame) on the device `spec` describes,
/// one instruction at a time in DAG order, through its [`crate::runtime::Executor`].
///
/// # Errors
/// The device cannot start, refuses, fails or stalls an instruction.
pub fn calibrate_device(
    spec: &DeviceSpec,
    ctx: &Arc<KernelContext>,
    bank: &FrameBank,
    frames: u64,
) -> Result<DeviceCalibration, CalibrationError> {
    let name = spec.name();
    let (tx, rx) = driver_channel();
    let env = ExecutorEnv {
        ctx: ctx.clone(),
        queue_capacity: 4,
        sink: CompletionSink::new(0, tx),
        calibrated: None,
    };
    let exec = spec
        .start(0, env)
        .map_err(|source| CalibrationError::Start {
            device: name.clone(),
            source,
        })?;
    let profile = exec.profile().clone();
    let pool = frame_pool(ctx, 1, Exhaustion::Grow { max: 2 });
    let mut hist: Vec<LatencyHistogram> = Opcode::ALL
        .iter()
        .map(|_| LatencyHistogram::new())
        .collect();
    let mut run = || -> Result<(), CalibrationError> {
        for f in 0..=frames {
            let slot = pool.acquire().map_err(|source| CalibrationError::Pool {
                device: name.clone(),
                source,
            })?;
            let truth = bank.truth(0, f);
            // As the in-process ring's receiver stages them: read in place.
            for (rx_i, sym) in ctx.shape.received_symbols().into_iter().enumerate() {
                slot.stage_symbol_in_place(rx_i, sym, truth.frame.clone());
            }
            crate::kernels::slot::write(&slot.downlink_payload)
                .clone_from_slice(&truth.frame.downlink_payload);
            for instr in ctx.frame_program(f) {
                let job = Job {
                    instr,
                    slot: slot.clone(),
                };
                exec.submit(job, false, None)
                    .map_err(|r| CalibrationError::Refused {
                        device: name.clone(),
                        instr: instr.to_string(),
                        reason: r.reason,
                    })?;
                let ns = wait_for(&rx, &name, instr)?;
                if f > 0 {
                    hist[instr.opcode.index()].record(ns);
                }
            }
        }
        Ok(())
    };
    let result = run();
    exec.shutdown();
    result?;
    let opcodes = Opcode::ALL
        .iter()
        .filter(|o| !hist[o.index()].is_empty())
        .map(|o| {
            (
                o.name().to_string(),
                summarise(&hist[o.index()], profile.cost(*o).need),
            )
        })
        .collect();
    Ok(DeviceCalibration {
        name,
        kind: profile.kind,
        units: profile.units,
        memory_bytes: profile.memory_bytes,
        opcodes,
    })
}

/// Wait for `instr`'s completion; its execution time in ns.
fn wait_for(
    rx: &std::sync::mpsc::Receiver<DriverMsg>,
    device: &str,
    instr: crate::isa::Instr,
) -> Result<u64, CalibrationError> {
    loop {
        match rx.recv_timeout(INSTR_TIMEOUT) {
            Ok(DriverMsg::Completed {
                instr: done,
                started,
                finished,
                result,
                ..
            }) if done == instr => {
                return result
                    .map(|()| finished.saturating_sub(started))
                    .map_err(|source| CalibrationError::Instr {
                        device: device.to_string(),
                        instr: instr.to_string(),
                        source,
                    })
            }
            Ok(DriverMsg::DeviceFailed { fault, .. }) => {
                return Err(CalibrationError::DeviceFailed {
                    device: device.to_string(),
                    fault: fault.to_string(),
                })
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                return Err(CalibrationError::Timeout {
                    device: device.to_string(),
                    instr: instr.to_string(),
                    secs: INSTR_TIMEOUT.as_secs(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_device_is_measured_saved_loaded_and_charged() {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let ctx = Arc::new(KernelContext::new(&cfg, 2).unwrap());
        let bank = FrameBank::generate(&cfg, 2).unwrap();
        let c = Calibration::measure(&[DeviceSpec::cpu(1, vec![])], &ctx, &bank, "8x2", 2).unwrap();
        let d = &c.devices[0];
        assert_eq!(
            (d.name.as_str(), d.kind, d.units),
            ("cpu:1", DeviceKind::Cpu, 1)
        );
        for op in ctx.frame_program(0).iter().map(|i| i.opcode) {
            let s = &d.opcodes[op.name()];
            assert!(
                s.samples >= 2 && s.median_ns > 0 && s.need == 1,
                "{op}: {s:?}"
            );
            assert!(s.min_ns <= s.median_ns && s.median_ns <= s.max_ns);
        }
        let dir = std::env::temp_dir().join(format!("rh-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cal.json");
        c.save(&path).unwrap();
        let back = Calibration::load(&path).unwrap();
        assert_eq!(back, c);
        // A wider CPU device is charged the per-worker figures on its own units.
        let p = back.profile_for("cpu:4").unwrap();
        assert_eq!((p.units, p.source), (4, CostSource::Calibrated));
        assert_eq!(
            p.cost(Opcode::Decode).latency_ns,
            d.opcodes["decode"].median_ns
        );
        assert!(back.profile_for("gpu:0").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let ok = r#"{"format": "radiohost-station-calibration/2", "config": "x", "frames": 1, "loadavg": "",
            "shape": {"antennas": 16, "users": 4, "data_num": 300, "fft_size": 512, "parts": 4},
            "devices": [{"name": "cpu:1", "kind": "cpu", "units": 1, "memory_bytes": 0,
              "opcodes": {"zf": {"need": 1, "samples": 3, "min_ns": 1, "median_ns": 11000, "p90_ns": 1, "p99_ns": 1, "max_ns": 1, "mean_ns": 1}}}]}"#;
        let c = Calibration::from_json(ok, "t").unwrap();
        assert_eq!(
            c.of_kind(DeviceKind::Cpu).unwrap().median_ns(Opcode::Zf),
            Some(11_000)
        );
        // Written before user groups: it measured one Decode and Encode per user.
        assert_eq!(c.shape.user_groups, 4);
        for (bad, why) in [
            (ok.replace("/2\"", "/1\""), "format"),
            (ok.replace("\"zf\"", "\"fft\""), "unknown opcode"),
            (ok.replace("\"parts\": 4", "\"parts\": 0"), "parts"),
            (
                ok.replace("\"parts\": 4", "\"parts\": 4, \"user_groups\": 5"),
                "5 user groups for 4 users",
            ),
            (ok.replace("\"need\": 1", "\"need\": 0"), "need"),
            ("[".to_string(), "not a calibration file"),
        ] {
            let e = Calibration::from_json(&bad, "t").unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
