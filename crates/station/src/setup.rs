//! What `radiohost station run` needs before and around the engine: the built-in
//! frame configurations, policy lists, CPU device layouts, and a run of several
//! policies on one setup.

use std::path::Path;

use radiohost_phy::{ConfigError, FrameConfig};
use thiserror::Error;

use crate::isa::DeviceKind;
use crate::policy::{make_policy, PolicyError, PolicyParams, POLICY_NAMES};
use crate::report::RunReport;
use crate::ru::TransportKind;
use crate::runtime::{run_station, DeviceAction, DeviceChange, DeviceSpec, StationSetup};
use crate::sim::{ChurnEvent, CostModel};

/// The frame configurations known by name (the repository's phy and station configs).
pub const BUILTIN_CONFIGS: [(&str, &str); 4] = [
    ("8x2", include_str!("../../phy/configs/8x2.json")),
    ("16x4", include_str!("../../phy/configs/16x4.json")),
    ("32x8", include_str!("../configs/32x8.json")),
    ("64x16", include_str!("../../phy/configs/64x16.json")),
];

/// Why a station run could not be set up or run.
#[derive(Debug, Error)]
pub enum SetupError {
    #[error("configuration `{0}` not found: give a path to a JSON frame configuration or one of 8x2, 16x4, 32x8, 64x16")]
    UnknownConfig(String),
    #[error("configuration {name}: {source}")]
    Config { name: String, source: ConfigError },
    #[error("unknown policy `{0}`: use lroc, frame, symbol, task, a comma list or all")]
    UnknownPolicy(String),
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("removing a device needs at least 2 devices (one must remain)")]
    RemoveLastDevice,
    #[error("loads must be positive fractions of the floor capacity below 100, e.g. 0.5,1.0")]
    Loads,
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Kernel(#[from] crate::kernels::KernelError),
    /// The engine failed while setting up or running.
    #[error("{context}: {source}")]
    Engine {
        context: String,
        source: crate::runtime::StationError,
    },
    #[error("--device-kind `{0}`: use gpu or cpu")]
    DeviceKind(String),
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("calibration {path}: {source}")]
    Calibration {
        path: String,
        source: crate::sim::ModelError,
    },
    #[error("policy parameters {path}: {source}")]
    PolicyParams {
        path: String,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Churn(#[from] crate::sim::SimError),
    #[error("{config} {policy}: {frames} frames decoded to wrong bits")]
    WrongBits {
        config: String,
        policy: String,
        frames: u64,
    },
}

fn engine(context: impl Into<String>, source: crate::runtime::StationError) -> SetupError {
    SetupError::Engine {
        context: context.into(),
        source,
    }
}

/// The simulated devices' kind: `gpu` (units are SMs) or `cpu` (cores).
pub fn parse_device_kind(s: &str) -> Result<DeviceKind, SetupError> {
    match s {
        "gpu" => Ok(DeviceKind::Gpu),
        "cpu" => Ok(DeviceKind::Cpu),
        other => Err(SetupError::DeviceKind(other.to_string())),
    }
}

fn read(path: &Path) -> Result<String, SetupError> {
    std::fs::read_to_string(path).map_err(|source| SetupError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The simulator's kernel costs: a calibration file as `station bench
/// --calibration-out` writes it, or the built-in model.
pub fn read_cost_model(path: Option<&Path>) -> Result<CostModel, SetupError> {
    let Some(p) = path else {
        return Ok(CostModel::default());
    };
    CostModel::from_calibration_json(&read(p)?).map_err(|source| SetupError::Calibration {
        path: p.display().to_string(),
        source,
    })
}

/// Policy parameters from a JSON file (any subset of the fields), or the defaults.
pub fn read_policy_params(path: Option<&Path>) -> Result<PolicyParams, SetupError> {
    let Some(p) = path else {
        return Ok(PolicyParams::default());
    };
    serde_json::from_str(&read(p)?).map_err(|source| SetupError::PolicyParams {
        path: p.display().to_string(),
        source,
    })
}

/// Devices leaving and joining: `remove:DEV@TIME,add:DEV@TIME,...`.
pub fn parse_churn(s: Option<&str>) -> Result<Vec<ChurnEvent>, SetupError> {
    let events = s.into_iter().flat_map(|s| s.split(','));
    Ok(events.map(|e| e.trim().parse()).collect::<Result<_, _>>()?)
}

/// Load a configuration file, or a built-in one by name; with its name (file stem).
pub fn load_config(spec: &Path) -> Result<(FrameConfig, String), SetupError> {
    let name = spec
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("config")
        .to_string();
    let err = |source| SetupError::Config {
        name: spec.display().to_string(),
        source,
    };
    if spec.exists() {
        return Ok((FrameConfig::load(spec).map_err(err)?, name));
    }
    let text = BUILTIN_CONFIGS
        .iter()
        .find(|(n, _)| Path::new(n) == spec)
        .map(|(_, t)| *t)
        .ok_or_else(|| SetupError::UnknownConfig(spec.display().to_string()))?;
    Ok((FrameConfig::from_json(text).map_err(err)?, name))
}

/// `all` or a comma list of policy names.
pub fn parse_policies(s: &str) -> Result<Vec<String>, SetupError> {
    if s.trim() == "all" {
        return Ok(POLICY_NAMES.iter().map(|p| p.to_string()).collect());
    }
    let v: Vec<String> = s.split(',').map(|p| p.trim().to_string()).collect();
    match v.iter().find(|p| !POLICY_NAMES.contains(&p.as_str())) {
        Some(p) => Err(SetupError::UnknownPolicy(p.clone())),
        None => Ok(v),
    }
}

/// `devices` CPU devices of `workers` each, pinned over all online cores unless
/// `pin` is false.
pub fn cpu_devices(
    devices: usize,
    workers: usize,
    pin: bool,
) -> Result<Vec<DeviceSpec>, SetupError> {
    if devices == 0 {
        return Err(SetupError::Zero("devices"));
    }
    if workers == 0 {
        return Err(SetupError::Zero("workers"));
    }
    let cores: Vec<usize> = if pin {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    } else {
        Vec::new()
    };
    Ok(DeviceSpec::split(devices, workers, &cores))
}

/// One `station run`: a configuration on CPU devices, fed by radio units.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub config: FrameConfig,
    pub config_name: String,
    pub devices: usize,
    pub workers: usize,
    pub pin: bool,
    pub rus: usize,
    /// Frames each radio unit sends.
    pub frames: u64,
    pub transport: TransportKind,
    pub frame_period_ns: u64,
    /// Deadline after a frame's first packet.
    pub deadline_ns: u64,
    /// Subcarrier parts ZF, EqDemod and Precode are split into.
    pub parts: usize,
    /// Remove the last device when this frame (global id) arrives.
    pub remove_device_at: Option<u64>,
    /// Distinct generated frames the radio units replay.
    pub bank_frames: usize,
    /// Also verify every completed frame's downlink with emulated users.
    pub verify_downlink: bool,
}

impl RunConfig {
    /// The engine setup of this run (generates the frame bank).
    pub fn setup(&self) -> Result<StationSetup, SetupError> {
        if self.rus == 0 {
            return Err(SetupError::Zero("rus"));
        }
        if self.frames == 0 {
            return Err(SetupError::Zero("frames"));
        }
        let devs = cpu_devices(self.devices, self.workers, self.pin)?;
        let mut s = StationSetup::new(
            &self.config,
            &self.config_name,
            self.parts,
            self.bank_frames,
            devs,
        )
        .map_err(|e| engine(format!("setting up {}", self.config_name), e))?;
        s.rus = self.rus;
        s.frames = self.frames;
        s.transport = self.transport;
        s.frame_period_ns = self.frame_period_ns;
        s.deadline_ns = self.deadline_ns;
        s.verify_downlink = self.verify_downlink;
        if let Some(f) = self.remove_device_at {
            if self.devices < 2 {
                return Err(SetupError::RemoveLastDevice);
            }
            s.changes.push(DeviceChange {
                at_frame: f,
                action: DeviceAction::Remove((self.devices - 1) as u32),
            });
        }
        Ok(s)
    }
}

/// Run each policy in turn on the same setup (the same frames).
pub fn run_policies(s: &StationSetup, policies: &[String]) -> Result<Vec<RunReport>, SetupError> {
    policies
        .iter()
        .map(|p| {
            let policy = make_policy(p, &s.ctx.shape, &PolicyParams::default())?;
            run_station(s, policy).map_err(|e| engine(format!("policy {p}"), e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_lists_and_builtin_configs() {
        assert_eq!(parse_policies("all").unwrap().len(), 4);
        assert_eq!(parse_policies("lroc,frame").unwrap(), vec!["lroc", "frame"]);
        assert!(matches!(
            parse_policies("fifo"),
            Err(SetupError::UnknownPolicy(_))
        ));
        for (name, _) in BUILTIN_CONFIGS {
            let (cfg, n) = load_config(Path::new(name)).unwrap();
            assert_eq!(n, name);
            assert!(cfg.antennas >= cfg.users);
        }
        assert!(matches!(
            load_config(Path::new("7x7")),
            Err(SetupError::UnknownConfig(_))
        ));
        assert!(cpu_devices(0, 1, false).is_err());
    }

    #[test]
    fn small_run_decodes_every_frame() {
        let (config, config_name) = load_config(Path::new("8x2")).unwrap();
        let rc = RunConfig {
            config,
            config_name,
            devices: 1,
            workers: 1,
            pin: false,
            rus: 1,
            frames: 4,
            transport: TransportKind::Ring,
            frame_period_ns: 2_000_000,
            deadline_ns: 1_000_000_000,
            parts: 2,
            remove_device_at: Some(1),
            bank_frames: 2,
            verify_downlink: false,
        };
        assert!(matches!(rc.setup(), Err(SetupError::RemoveLastDevice)));
        let s = RunConfig {
            remove_device_at: None,
            ..rc
        }
        .setup()
        .unwrap();
        let r = run_policies(&s, &["lroc".to_string()]).unwrap();
        assert_eq!(r[0].decode_errors, 0);
        assert_eq!(r[0].completed, 4);
    }
}
