//! Discrete-event scheduling simulator: the same [`crate::engine::Policy`] objects the
//! real executors use, driven against a model of devices (capacity in cores or SMs),
//! calibrated kernel latencies, copy costs between devices, radio units producing
//! frames whose symbols arrive through the frame time, and devices that come and go.
//! It reaches scales this machine cannot run (32 GPUs, 8 RUs, 256x128).

pub mod model;
mod run;

use std::str::FromStr;

use crate::costs::CostSource;
use crate::isa::{DeviceId, DeviceKind, Nanos, MAX_DEVICE_ID};
use crate::policy::{PolicyError, PolicyParams};
use crate::shape::FrameShape;
use radiohost_testbed::units::{parse_time, UnitError};

pub use model::{CostModel, RefShape};
pub use run::simulate;

/// Errors configuring or running a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulation setting: {0}")]
    Config(String),
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("churn event `{event}`: {source}")]
    ChurnTime {
        event: String,
        #[source]
        source: UnitError,
    },
    #[error("policy `{policy}` broke the engine contract: {what}")]
    Contract { policy: String, what: String },
}

/// A device leaving or joining at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChurnEvent {
    pub at_ns: Nanos,
    pub device: DeviceId,
    pub add: bool,
}

impl FromStr for ChurnEvent {
    type Err = SimError;

    /// `remove:DEV@TIME` or `add:DEV@TIME`, TIME a duration with its unit
    /// (`150ms`, `2.5ms`, `800us`, `1s`; see [`radiohost_testbed::units`]).
    fn from_str(s: &str) -> Result<Self, SimError> {
        let bad = || {
            SimError::Config(format!(
                "churn event `{s}`: expected remove:DEVICE@TIME or add:DEVICE@TIME, e.g. remove:1@200ms"
            ))
        };
        let (action, rest) = s.split_once(':').ok_or_else(bad)?;
        let (dev, time) = rest.split_once('@').ok_or_else(bad)?;
        let add = match action.trim() {
            "remove" => false,
            "add" => true,
            _ => return Err(bad()),
        };
        let device = dev.trim().parse().map_err(|_| bad())?;
        let at = parse_time(time).map_err(|source| SimError::ChurnTime {
            event: s.to_string(),
            source,
        })?;
        Ok(Self {
            at_ns: at.ns(),
            device,
            add,
        })
    }
}

/// One simulation run's setting.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub devices: u32,
    pub kind: DeviceKind,
    /// Capacity per device (cores or SMs).
    pub units: u32,
    pub rus: u32,
    pub antennas: usize,
    pub users: usize,
    pub data_num: usize,
    pub fft_size: usize,
    pub parts: usize,
    /// Frame schedule: P pilot, U uplink, D downlink (first D is the reference), G guard.
    pub schedule: String,
    pub frames_per_ru: u64,
    pub frame_period_ns: Nanos,
    /// Deadline after a frame's first symbol arrives.
    pub deadline_ns: Nanos,
    pub churn: Vec<ChurnEvent>,
    /// Kernel time varies uniformly within +-jitter; 1 in 1000 kernels takes 3x
    /// (interference), which is what tail scheduling must absorb.
    pub jitter: f64,
    pub seed: u64,
    pub params: PolicyParams,
    pub model: CostModel,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            devices: 4,
            kind: DeviceKind::Gpu,
            units: 132,
            rus: 1,
            antennas: 64,
            users: 16,
            data_num: 1200,
            fft_size: 2048,
            parts: 16,
            schedule: "PUUUUUUUUUUUUU".into(),
            frames_per_ru: 500,
            frame_period_ns: 1_000_000,
            deadline_ns: 3_000_000,
            churn: Vec::new(),
            jitter: 0.1,
            seed: 1,
            params: PolicyParams::default(),
            model: CostModel::default(),
        }
    }
}

impl SimConfig {
    /// The frame shape the schedule and sizes describe.
    ///
    /// # Errors
    /// Sizes out of range or a schedule the station cannot run.
    pub fn shape(&self) -> Result<FrameShape, SimError> {
        let err = |m: String| Err(SimError::Config(m));
        if self.antennas == 0 || self.users == 0 || self.users > self.antennas {
            return err(format!(
                "need 1 <= users <= antennas, got {} users and {} antennas",
                self.users, self.antennas
            ));
        }
        if self.data_num == 0 || self.data_num > self.fft_size {
            return err(format!(
                "data subcarriers ({}) must be between 1 and the fft size ({})",
                self.data_num, self.fft_size
            ));
        }
        if self.parts == 0 || self.parts > self.data_num {
            return err(format!(
                "parts must be between 1 and the data subcarriers ({}), got {}",
                self.data_num, self.parts
            ));
        }
        let (mut pilot, mut up, mut down) = (Vec::new(), Vec::new(), Vec::new());
        for (i, c) in self.schedule.chars().enumerate() {
            match c {
                'P' => pilot.push(i),
                'U' => up.push(i),
                'D' => down.push(i),
                'G' => {}
                other => {
                    return err(format!(
                        "schedule symbol `{other}` at {i}: use P, U, D or G"
                    ))
                }
            }
        }
        if pilot.is_empty() {
            return err("the schedule needs a pilot symbol (P)".into());
        }
        if up.is_empty() && down.len() < 2 {
            return err(
                "the schedule needs uplink (U) or at least two downlink (D) symbols".into(),
            );
        }
        Ok(FrameShape {
            antennas: self.antennas,
            users: self.users,
            data_num: self.data_num,
            pilot_symbols: pilot,
            uplink_symbols: up,
            downlink_reference: down.first().copied(),
            downlink_symbols: down.iter().skip(1).copied().collect(),
            parts: self.parts,
            // One Decode and Encode per user: the modelled machines have the cores
            // for it (the model scales a calibration's grouped costs to match).
            zf_batch_span: 1,
            user_groups: self.users,
        })
    }

    fn validate(&self) -> Result<(), SimError> {
        let err = |m: &str| Err(SimError::Config(m.to_string()));
        if self.devices == 0 || self.devices > 1024 {
            return err("devices must be between 1 and 1024");
        }
        if self.units == 0 {
            return err("units per device must be at least 1");
        }
        if let Some(c) = self.churn.iter().find(|c| c.device > MAX_DEVICE_ID) {
            return Err(SimError::Config(format!(
                "churn event for device {}: device ids go from 0 to {MAX_DEVICE_ID}",
                c.device
            )));
        }
        if self.rus == 0 || self.rus > 64 {
            return err("radio units must be between 1 and 64");
        }
        if self.frame_period_ns == 0 || self.deadline_ns == 0 {
            return err("frame period and deadline must be positive");
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return err("jitter must be in [0, 1)");
        }
        self.params.validate()?;
        Ok(())
    }
}

/// Per-opcode breakdown of a run.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OpcodeBreakdown {
    pub opcode: &'static str,
    pub count: u64,
    /// Mean kernel time (copy excluded).
    pub mean_exec_us: f64,
    /// Mean time from inputs ready to start.
    pub mean_wait_us: f64,
    /// Mean input-copy time.
    pub mean_copy_us: f64,
}

/// What a simulated run measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SimResult {
    pub policy: String,
    pub kind: &'static str,
    pub devices: u32,
    pub units: u32,
    pub rus: u32,
    pub antennas: usize,
    pub users: usize,
    /// Whether the kernel costs were measured (a calibration file) or modelled.
    pub costs: CostSource,
    pub frames: u64,
    pub completed: u64,
    pub missed: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Latency of completed and missed frames (a missed frame counts at its discard
    /// time, so misses show in the tail instead of vanishing from it).
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    pub max_ms: f64,
    pub offered_fps: f64,
    /// Completed frames per second of simulated time.
    pub achieved_fps: f64,
    /// Busy unit-time over capacity x time.
    pub utilization: f64,
    pub rescheduled: u64,
    pub low_priority: u64,
    pub coalesced: u64,
    pub cross_device_copies: u64,
    /// Normal-priority dispatches a full device queued until its units freed (LROC's
    /// lookahead), instead of starting them at once.
    pub device_queued: u64,
    pub per_opcode: Vec<OpcodeBreakdown>,
    /// Instructions each device incarnation completed (a device that leaves and
    /// joins again is a new incarnation), in (device, incarnation) order.
    pub device_runs: Vec<DeviceRuns>,
}

/// What one incarnation of a simulated device ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceRuns {
    pub device: DeviceId,
    /// 0 for the device as first added; +1 each time it leaves (and joins again).
    pub incarnation: u32,
    /// Instructions it completed (runs lost when it left are not counted).
    pub completed: u64,
}

#[cfg(test)]
mod tests;
