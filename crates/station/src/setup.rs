//! What `radiohost station run` needs before and around the engine: the built-in
//! frame configurations, policy lists, CPU device layouts, and a run of several
//! policies on one setup.

use std::path::Path;
use std::sync::Arc;

use radiohost_phy::{ConfigError, FrameConfig};
use thiserror::Error;

use crate::calibration::Calibration;
use crate::isa::DeviceKind;
use crate::policy::{make_policy, PolicyError, PolicyParams, POLICY_NAMES};
use crate::report::RunReport;
use crate::ru::TransportKind;
use crate::runtime::{run_station, CpuSpec, DeviceAction, DeviceChange, DeviceSpec, StationSetup};
use crate::shape::FrameShape;
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
    #[error("--device-events would remove every device: at least one must remain")]
    RemoveLastDevice,
    #[error("loads must be positive fractions of the floor capacity below 100, e.g. 0.5,1.0")]
    Loads,
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Kernel(#[from] crate::kernels::KernelError),
    #[error(transparent)]
    Shape(#[from] crate::shape::ShapeError),
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
    #[error(transparent)]
    Calibration(#[from] crate::calibration::CalibrationError),
    #[error("--devices `{given}`: {why}; give a comma list of cpu:WORKERS and gpu:ORDINAL, e.g. cpu:1,cpu:1 or cpu:2,gpu:0")]
    Devices { given: String, why: String },
    #[error("--device-events: {0}")]
    DeviceEvents(String),
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

/// The simulator's kernel costs: a calibration file as `station calibrate` writes
/// it, or the built-in model (labelled modelled in every report).
pub fn read_cost_model(path: Option<&Path>) -> Result<CostModel, SetupError> {
    let Some(p) = path else {
        return Ok(CostModel::default());
    };
    Ok(CostModel::from_calibration(&Calibration::load(p)?))
}

/// One entry of a `--devices` list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceArg {
    /// A CPU device of this many worker threads.
    Cpu(usize),
    /// The CUDA GPU of this ordinal.
    Gpu(usize),
}

/// Most worker threads one CPU device may have.
pub const MAX_CPU_WORKERS: usize = 1024;

/// `s`, or its start when it is long, so that an error's reason after it stays on
/// the error line.
fn shown(s: &str) -> String {
    const SHOWN: usize = 60;
    match s.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}... ({} characters)", &s[..cut], s.len()),
        None => s.to_string(),
    }
}

/// Parse `cpu:N,gpu:K,...` (at least one device, at most 1024).
pub fn parse_devices(s: &str) -> Result<Vec<DeviceArg>, SetupError> {
    let given = shown(s);
    let bad = |why: String| SetupError::Devices {
        given: given.clone(),
        why,
    };
    let mut out = Vec::new();
    for full in s.split(',').map(str::trim) {
        let item = shown(full);
        let (kind, n) = full
            .split_once(':')
            .ok_or_else(|| bad(format!("`{item}` has no kind")))?;
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| bad(format!("`{item}`: `{}` is not a whole number", shown(n))))?;
        out.push(match kind.trim() {
            "cpu" if (1..=MAX_CPU_WORKERS).contains(&n) => DeviceArg::Cpu(n),
            "cpu" => {
                return Err(bad(format!(
                    "`{item}`: a CPU device has 1 to {MAX_CPU_WORKERS} workers"
                )))
            }
            "gpu" => DeviceArg::Gpu(n),
            other => return Err(bad(format!("unknown device kind `{}`", shown(other)))),
        });
    }
    if out.is_empty() {
        return Err(bad("no device".into()));
    }
    if out.len() > crate::isa::MAX_DEVICE_ID as usize + 1 {
        return Err(bad(format!(
            "{} devices: a pool holds at most {}",
            out.len(),
            crate::isa::MAX_DEVICE_ID + 1
        )));
    }
    Ok(out)
}

/// CPU device specs for the `cpu:N` entries of `args` (in order), their workers
/// pinned round robin over all online cores unless `pin` is false. Pinned workers
/// spin when idle ([`crate::runtime::CpuSpec::spin`]) if they leave at least one core
/// to the radio units, the ingest and the truth checker: a spinning worker on a core
/// those threads need would take their time.
pub fn cpu_specs(args: &[DeviceArg], pin: bool) -> Vec<DeviceSpec> {
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    let all_workers: usize = args
        .iter()
        .map(|a| match *a {
            DeviceArg::Cpu(workers) => workers,
            DeviceArg::Gpu(_) => 0,
        })
        .sum();
    let spin = pin && all_workers < online;
    let mut next = 0usize;
    args.iter()
        .filter_map(|a| match *a {
            DeviceArg::Cpu(workers) => {
                let cores = if pin {
                    (0..workers).map(|w| (next + w) % online).collect()
                } else {
                    Vec::new()
                };
                next += workers;
                Some(DeviceSpec::Cpu(CpuSpec {
                    workers,
                    cores,
                    spin,
                }))
            }
            DeviceArg::Gpu(_) => None,
        })
        .collect()
}

/// Device changes from `remove:DEV@TIME,add:DEV@TIME,...` (the simulator's churn
/// syntax): a removal takes device DEV out when the frame due at TIME arrives; an
/// add brings a removed DEV back (restarted from its spec under a new id).
pub fn parse_device_events(
    s: Option<&str>,
    frame_period_ns: u64,
    rus: usize,
    devices: usize,
) -> Result<Vec<DeviceChange>, SetupError> {
    let mut out = Vec::new();
    for e in parse_churn(s)? {
        if e.device as usize >= devices {
            return Err(SetupError::DeviceEvents(format!(
                "device {} does not exist: devices are numbered 0 to {} in --devices order",
                e.device,
                devices.saturating_sub(1)
            )));
        }
        let at_frame = e.at_ns / frame_period_ns.max(1) * rus.max(1) as u64;
        out.push(DeviceChange {
            at_frame,
            action: if e.add {
                DeviceAction::Rejoin(e.device)
            } else {
                DeviceAction::Remove(e.device)
            },
        });
    }
    Ok(out)
}

/// Policy parameters (any subset of the fields) from JSON written in the argument
/// itself (it starts with `{`) or from a JSON file, or the defaults.
pub fn read_policy_params(arg: Option<&Path>) -> Result<PolicyParams, SetupError> {
    let Some(p) = arg else {
        return Ok(PolicyParams::default());
    };
    let inline = p.to_str().filter(|s| s.trim_start().starts_with('{'));
    let text = match inline {
        Some(json) => json.to_string(),
        None => read(p)?,
    };
    serde_json::from_str(&text).map_err(|source| SetupError::PolicyParams {
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

/// One `station run`: a configuration on a pool of devices, fed by radio units.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub config: FrameConfig,
    pub config_name: String,
    pub devices: Vec<DeviceSpec>,
    pub rus: usize,
    /// Frames each radio unit sends.
    pub frames: u64,
    pub transport: TransportKind,
    pub frame_period_ns: u64,
    /// Deadline after a frame's first packet.
    pub deadline_ns: u64,
    /// Subcarrier parts ZF, EqDemod and Precode are split into; `None`: see
    /// [`Self::parts`].
    pub parts: Option<usize>,
    /// Devices leaving and rejoining during the run.
    pub device_changes: Vec<DeviceChange>,
    /// Distinct generated frames the radio units replay.
    pub bank_frames: usize,
    /// Also verify every completed frame's downlink with emulated users.
    pub verify_downlink: bool,
    /// Measured costs the scheduler charges the devices it covers.
    pub calibration: Option<Arc<Calibration>>,
}

impl RunConfig {
    /// The part count: the one asked for, else the calibration's (its figures are
    /// per part), else [`FrameShape::default_parts_for`] its devices.
    pub fn parts(&self) -> usize {
        match (self.parts, &self.calibration) {
            (Some(p), _) => p,
            (None, Some(c)) => c.shape.parts,
            (None, None) => FrameShape::default_parts_for(&self.config, &self.devices),
        }
    }

    /// The engine setup of this run (generates the frame bank).
    pub fn setup(&self) -> Result<StationSetup, SetupError> {
        if self.rus == 0 {
            return Err(SetupError::Zero("rus"));
        }
        if self.frames == 0 {
            return Err(SetupError::Zero("frames"));
        }
        if self.devices.is_empty() {
            return Err(SetupError::Zero("devices"));
        }
        let parts = self.parts();
        if let Some(c) = &self.calibration {
            let shape = FrameShape::new(&self.config, parts)?;
            c.check_run_shape(&shape, self.config.fft_size, &self.config_name)?;
        }
        let removed: std::collections::BTreeSet<_> = self
            .device_changes
            .iter()
            .filter_map(|c| match c.action {
                DeviceAction::Remove(d) => Some(d),
                _ => None,
            })
            .collect();
        if !removed.is_empty() && removed.len() >= self.devices.len() {
            return Err(SetupError::RemoveLastDevice);
        }
        let mut s = StationSetup::new(
            &self.config,
            &self.config_name,
            parts,
            self.bank_frames,
            self.devices.clone(),
        )
        .map_err(|e| engine(format!("setting up {}", self.config_name), e))?;
        s.rus = self.rus;
        s.frames = self.frames;
        s.transport = self.transport;
        s.frame_period_ns = self.frame_period_ns;
        s.deadline_ns = self.deadline_ns;
        s.verify_downlink = self.verify_downlink;
        s.changes = self.device_changes.clone();
        s.calibration = self.calibration.clone();
        Ok(s)
    }
}

/// Run each policy in turn on the same setup (the same frames), with the setup's
/// policy parameters.
pub fn run_policies(s: &StationSetup, policies: &[String]) -> Result<Vec<RunReport>, SetupError> {
    policies
        .iter()
        .map(|p| {
            let policy = make_policy(p, &s.ctx.shape, &s.policy_params)?;
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
        assert_eq!(
            parse_devices("cpu:2, gpu:0,cpu:1").unwrap(),
            vec![DeviceArg::Cpu(2), DeviceArg::Gpu(0), DeviceArg::Cpu(1)]
        );
        for bad in ["2", "cpu:0", "cpu:x", "tpu:1", "cpu:99999", ""] {
            let e = parse_devices(bad).unwrap_err().to_string();
            assert!(e.contains("cpu:WORKERS"), "{bad}: {e}");
        }
        // Device ids index the scheduler's tables: 1024 devices at most.
        assert_eq!(
            parse_devices(&vec!["gpu:0"; 1024].join(",")).unwrap().len(),
            1024
        );
        let e = parse_devices(&vec!["gpu:0"; 1025].join(","))
            .unwrap_err()
            .to_string();
        assert!(e.contains("1025 devices: a pool holds at most 1024"), "{e}");
        // A long item or list is shown by its start: the reason stays readable.
        let long = format!("cpu:{}", "9".repeat(5000));
        let e = parse_devices(&long).unwrap_err().to_string();
        assert!(e.len() < 400 && e.contains("(5004 characters)"), "{e}");
        assert!(e.contains("is not a whole number"), "{e}");
        let specs = cpu_specs(&parse_devices("cpu:2,gpu:1,cpu:1").unwrap(), false);
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name(), "cpu:2");
        let spins = |devices: &str, pin: bool| -> Vec<bool> {
            let specs = cpu_specs(&parse_devices(devices).unwrap(), pin);
            specs
                .iter()
                .map(|s| matches!(s, DeviceSpec::Cpu(c) if c.spin))
                .collect()
        };
        // Workers spin only when pinned with a core to spare for the other threads.
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(spins("cpu:1", true), vec![online > 1]);
        assert_eq!(spins("cpu:1", false), vec![false]);
        assert_eq!(spins(&format!("cpu:1,cpu:{online}"), true), vec![false; 2]);
        let ev = parse_device_events(Some("remove:1@200ms,add:1@500ms"), 1_000_000, 1, 2).unwrap();
        assert_eq!(ev[0].at_frame, 200);
        assert!(matches!(ev[1].action, DeviceAction::Rejoin(1)));
        assert!(parse_device_events(Some("remove:2@1ms"), 1_000_000, 1, 2).is_err());
        assert!(parse_device_events(Some("remove:1"), 1_000_000, 1, 2).is_err());
    }

    #[test]
    fn policy_params_come_inline_or_from_a_file() {
        let inline = read_policy_params(Some(Path::new(r#" {"shed_work_factor": 1.5}"#)));
        assert_eq!(inline.unwrap().shed_work_factor, 1.5);
        let file = std::env::temp_dir().join(format!("policy-{}.json", std::process::id()));
        std::fs::write(&file, r#"{"lookahead": false}"#).unwrap();
        let read = read_policy_params(Some(&file));
        std::fs::remove_file(&file).unwrap();
        assert!(!read.unwrap().lookahead);
        let e = read_policy_params(Some(Path::new("{\"lookahead\": 3}"))).unwrap_err();
        assert!(e.to_string().starts_with("policy parameters {"), "{e}");
        let e = read_policy_params(Some(Path::new("{\"lookahed\": false}"))).unwrap_err();
        assert!(e.to_string().contains("unknown field `lookahed`"), "{e}");
        assert!(read_policy_params(Some(Path::new("/no/such/params.json"))).is_err());
    }

    #[test]
    fn parts_come_from_the_flag_the_calibration_or_the_workers() {
        let (config, config_name) = load_config(Path::new("16x4")).unwrap();
        let calibrated_at = |parts: usize| {
            let json = format!(
                r#"{{"format": "{}", "config": "16x4", "frames": 1, "loadavg": "", "devices": [],
                "shape": {{"antennas": 16, "users": 4, "data_num": 600, "fft_size": 1024, "parts": {parts}}}}}"#,
                crate::calibration::FORMAT
            );
            Some(Arc::new(Calibration::from_json(&json, "cal.json").unwrap()))
        };
        let rc = RunConfig {
            config,
            config_name,
            devices: DeviceSpec::split(1, 1, &[]),
            rus: 1,
            frames: 1,
            transport: TransportKind::Ring,
            frame_period_ns: 1_000_000,
            deadline_ns: 4_000_000,
            parts: None,
            device_changes: Vec::new(),
            bank_frames: 1,
            verify_downlink: false,
            calibration: None,
        };
        assert_eq!(
            rc.parts(),
            FrameShape::default_parts_for(&rc.config, &rc.devices)
        );
        let calibrated = RunConfig {
            calibration: calibrated_at(3),
            ..rc.clone()
        };
        assert_eq!(calibrated.parts(), 3);
        let asked = RunConfig {
            parts: Some(1),
            ..calibrated
        };
        assert_eq!(asked.parts(), 1);
        // A calibration of another part count would charge the wrong costs.
        let Err(e) = asked.setup() else {
            panic!("a calibration at 3 parts was accepted for a run at 1")
        };
        let e = e.to_string();
        assert!(
            e.contains("3 parts") && e.contains("--config 16x4 --parts 1"),
            "{e}"
        );
        // A file from before user groups measured one decode per user: refused too.
        let Err(e) = RunConfig {
            calibration: calibrated_at(1),
            ..asked
        }
        .setup() else {
            panic!("a calibration of one decode per user was accepted for grouped users")
        };
        assert!(e.to_string().contains("4 user groups"), "{e}");
    }

    #[test]
    fn small_run_decodes_every_frame() {
        let (config, config_name) = load_config(Path::new("8x2")).unwrap();
        let rc = RunConfig {
            config,
            config_name,
            devices: DeviceSpec::split(1, 1, &[]),
            rus: 1,
            frames: 4,
            transport: TransportKind::Ring,
            frame_period_ns: 2_000_000,
            deadline_ns: 1_000_000_000,
            parts: Some(2),
            device_changes: parse_device_events(Some("remove:0@1ms"), 2_000_000, 1, 1).unwrap(),
            bank_frames: 2,
            verify_downlink: false,
            calibration: None,
        };
        assert!(matches!(rc.setup(), Err(SetupError::RemoveLastDevice)));
        let s = RunConfig {
            device_changes: Vec::new(),
            ..rc
        }
        .setup()
        .unwrap();
        let r = run_policies(&s, &["lroc".to_string()]).unwrap();
        assert_eq!(r[0].decode_errors, 0);
        assert_eq!(r[0].completed, 4);
    }
}
