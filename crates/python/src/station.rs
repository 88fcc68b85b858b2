//! The station from Python: ``station_run`` (the real-time runtime on CPU devices,
//! fed by emulated radio units) and ``station_simulate`` (the scheduling policies
//! against the discrete-event model), each taking a dict of the CLI's options and
//! returning the CLI's ``--json`` reports as dicts. The library calls are the ones
//! `radiohost station run|simulate` make (``setup::RunConfig::setup``,
//! ``setup::run_policies``, ``sweep::sweep``); the GIL is released while they run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use radiohost_phy::FrameConfig;
use radiohost_station::calibration::Calibration;
use radiohost_station::isa::DeviceKind;
use radiohost_station::policy::PolicyParams;
use radiohost_station::ru::TransportKind;
use radiohost_station::setup::{
    cpu_specs, load_config, parse_churn, parse_device_events, parse_device_kind, parse_devices,
    parse_policies, read_cost_model, run_policies, DeviceArg, RunConfig,
};
use radiohost_station::sim::SimConfig;
use radiohost_station::sweep::{sweep, SweepConfig};
use serde::Deserialize;

use crate::convert::{from_py, to_py};
use crate::errors::{self, value};
use crate::interrupt::Interrupt;
use crate::pmt::{duration, in_range};

/// `station_run`'s options: `radiohost station run`'s flags, same names (with `_`)
/// and defaults; `pin: false` is `--no-pin`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RunOptions {
    config: serde_json::Value,
    policy: String,
    devices: String,
    pin: bool,
    rus: u16,
    frames: u64,
    transport: String,
    frame_period: String,
    deadline: String,
    parts: Option<u16>,
    device_events: Option<String>,
    calibration: Option<PathBuf>,
    bank_frames: u16,
    verify_downlink: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            config: serde_json::Value::Null,
            policy: "lroc".into(),
            devices: "cpu:1,cpu:1".into(),
            pin: true,
            rus: 1,
            frames: 500,
            transport: "ring".into(),
            frame_period: "1ms".into(),
            deadline: "4ms".into(),
            parts: None,
            device_events: None,
            calibration: None,
            bank_frames: 8,
            verify_downlink: false,
        }
    }
}

/// The frame configuration: a built-in name or a path (as `--config`), or the
/// configuration itself as a dict (the JSON file's fields).
fn frame_config(v: &serde_json::Value) -> PyResult<(FrameConfig, String)> {
    match v {
        serde_json::Value::String(s) => load_config(Path::new(s)).map_err(errors::station),
        serde_json::Value::Object(_) => FrameConfig::from_json(&v.to_string())
            .map(|c| (c, "config".to_string()))
            .map_err(|e| errors::StationError::new_err(format!("config: {}", errors::message(&e)))),
        _ => Err(value(
            "config: give a built-in name (8x2, 16x4, 32x8, 64x16), a path to a JSON frame configuration, or the configuration as a dict",
        )),
    }
}

fn run_config(o: &RunOptions) -> PyResult<(RunConfig, Vec<String>)> {
    let (config, config_name) = frame_config(&o.config)?;
    let args = parse_devices(&o.devices).map_err(errors::station)?;
    if args.iter().any(|a| matches!(a, DeviceArg::Gpu(_))) {
        return Err(value(format!(
            "devices {:?}: GPU devices are run by `radiohost station run --devices gpu:K`; from Python give CPU devices (cpu:N,...)",
            o.devices
        )));
    }
    let devices = cpu_specs(&args, o.pin);
    let rus = usize::from(in_range("rus", o.rus, 1, 64)?);
    let frame_period_ns = duration("frame_period", &o.frame_period, true)?.as_nanos() as u64;
    let device_changes = parse_device_events(
        o.device_events.as_deref(),
        frame_period_ns,
        rus,
        devices.len(),
    )
    .map_err(errors::station)?;
    let calibration = match &o.calibration {
        Some(p) => Some(Arc::new(Calibration::load(p).map_err(errors::station)?)),
        None => None,
    };
    let transport: TransportKind = o.transport.parse().map_err(errors::station)?;
    let run = RunConfig {
        config,
        config_name,
        devices,
        rus,
        frames: in_range("frames", o.frames, 1, 10_000_000)?,
        transport,
        frame_period_ns,
        deadline_ns: duration("deadline", &o.deadline, true)?.as_nanos() as u64,
        parts: o
            .parts
            .map(|p| in_range("parts", p, 1, 1200).map(usize::from))
            .transpose()?,
        device_changes,
        bank_frames: usize::from(in_range("bank_frames", o.bank_frames, 1, 256)?),
        verify_downlink: o.verify_downlink,
        calibration,
    };
    Ok((run, parse_policies(&o.policy).map_err(errors::station)?))
}

/// station_run(options) -> list[dict]
///
/// Run the station on CPU devices, fed by emulated radio units, once per policy on
/// the same frames: `radiohost station run` with ``options`` as its flags. Keys
/// (defaults as the CLI's): ``config`` (required: ``"8x2"``, ``"16x4"``,
/// ``"32x8"``, ``"64x16"``, a JSON path, or the configuration as a dict),
/// ``policy`` (``"lroc"``; a comma list or ``"all"``), ``devices``
/// (``"cpu:1,cpu:1"``), ``pin`` (True), ``rus`` (1), ``frames`` (500 per RU),
/// ``transport`` (``"ring"`` or ``"udp"``), ``frame_period`` (``"1ms"``),
/// ``deadline`` (``"4ms"``), ``parts`` (None: the CLI's choice), ``device_events`` (e.g.
/// ``"remove:1@200ms"``), ``calibration`` (a path), ``bank_frames`` (8),
/// ``verify_downlink`` (False). Durations carry their unit.
///
/// Returns one report per policy (`station run --json`): frames, completed,
/// decoded_ok, decode_errors, missed, rejected, failed, latency percentiles,
/// stages, devices..., plus ``miss_fraction``. Missed deadlines are reported, not
/// raised: check ``decode_errors`` and ``miss_fraction``.
#[pyfunction]
pub fn station_run<'py>(
    py: Python<'py>,
    options: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyList>> {
    let o: RunOptions = from_py(options.as_any(), "station_run options")?;
    let (run, policies) = run_config(&o)?;
    let reports = py
        .detach(|| {
            let setup = run.setup()?;
            run_policies(&setup, &policies)
        })
        .map_err(errors::station)?;
    let out = PyList::empty(py);
    for r in &reports {
        let d = to_py(py, r)?;
        d.set_item("miss_fraction", r.miss_fraction())?;
        out.append(d)?;
    }
    Ok(out)
}

/// A number or a list of numbers (a sweep), as the CLI's comma lists.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(u32),
    Many(Vec<u32>),
}

impl OneOrMany {
    fn values(&self, what: &str, lo: u32, hi: u32) -> PyResult<Vec<u32>> {
        let v = match self {
            OneOrMany::One(x) => vec![*x],
            OneOrMany::Many(v) => v.clone(),
        };
        if v.is_empty() {
            return Err(value(format!("{what}: give at least one value")));
        }
        v.into_iter().map(|x| in_range(what, x, lo, hi)).collect()
    }
}

/// `station_simulate`'s options: `radiohost station simulate`'s flags, same names
/// and defaults; ``policy_params`` is the parameters themselves (a dict), not a path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct SimulateOptions {
    policies: String,
    devices: OneOrMany,
    device_kind: String,
    units: u32,
    rus: OneOrMany,
    antennas: u16,
    users: u16,
    data_num: u32,
    fft_size: u32,
    parts: u16,
    schedule: String,
    frames: u64,
    frame_period: String,
    deadline: String,
    churn: Option<String>,
    calibration: Option<PathBuf>,
    policy_params: Option<PolicyParams>,
    jitter: f64,
    seed: u64,
}

impl Default for SimulateOptions {
    /// The simulator's own defaults (`SimConfig::default`), in the CLI's spelling;
    /// only the sweep's lists (policies, RUs, frames) are the command's.
    fn default() -> Self {
        let d = SimConfig::default();
        let narrow = |v: usize| u16::try_from(v).unwrap_or(u16::MAX);
        SimulateOptions {
            policies: "lroc,frame,symbol,task".into(),
            devices: OneOrMany::One(d.devices),
            device_kind: match d.kind {
                DeviceKind::Cpu => "cpu",
                DeviceKind::Gpu => "gpu",
            }
            .into(),
            units: d.units,
            rus: OneOrMany::Many(vec![1, 2, 4, 8]),
            antennas: narrow(d.antennas),
            users: narrow(d.users),
            data_num: u32::try_from(d.data_num).unwrap_or(u32::MAX),
            fft_size: u32::try_from(d.fft_size).unwrap_or(u32::MAX),
            parts: narrow(d.parts),
            schedule: d.schedule,
            frames: 2000,
            frame_period: format!("{}ns", d.frame_period_ns),
            deadline: format!("{}ns", d.deadline_ns),
            churn: None,
            calibration: None,
            policy_params: None,
            jitter: d.jitter,
            seed: d.seed,
        }
    }
}

fn sweep_config(o: &SimulateOptions) -> PyResult<SweepConfig> {
    if !(0.0..=0.9).contains(&o.jitter) {
        return Err(value(format!(
            "jitter {}: a fraction from 0 to 0.9",
            o.jitter
        )));
    }
    let base = SimConfig {
        devices: 1,
        kind: parse_device_kind(&o.device_kind).map_err(errors::station)?,
        units: in_range("units", o.units, 1, 100_000)?,
        rus: 1,
        antennas: usize::from(in_range("antennas", o.antennas, 1, 1024)?),
        users: usize::from(in_range("users", o.users, 1, 1024)?),
        data_num: in_range("data_num", o.data_num, 1, 65_536)? as usize,
        fft_size: in_range("fft_size", o.fft_size, 64, 65_536)? as usize,
        parts: usize::from(in_range("parts", o.parts, 1, 4096)?),
        schedule: o.schedule.clone(),
        frames_per_ru: in_range("frames", o.frames, 1, 10_000_000)?,
        frame_period_ns: duration("frame_period", &o.frame_period, true)?.as_nanos() as u64,
        deadline_ns: duration("deadline", &o.deadline, true)?.as_nanos() as u64,
        churn: parse_churn(o.churn.as_deref()).map_err(errors::station)?,
        jitter: o.jitter,
        seed: o.seed,
        params: o.policy_params.clone().unwrap_or_default(),
        model: read_cost_model(o.calibration.as_deref()).map_err(errors::station)?,
    };
    Ok(SweepConfig {
        policies: parse_policies(&o.policies).map_err(errors::station)?,
        devices: o.devices.values("devices", 1, 1024)?,
        rus: o.rus.values("rus", 1, 64)?,
        base,
    })
}

/// station_simulate(options) -> list[dict]
///
/// The scheduling policies against the discrete-event model of a device pool,
/// swept over ``devices`` and ``rus``: `radiohost station simulate` with
/// ``options`` as its flags. Keys (defaults as the CLI's): ``policies``
/// (``"lroc,frame,symbol,task"``), ``devices`` (4, or a list to sweep),
/// ``device_kind`` (``"gpu"`` or ``"cpu"``), ``units`` (132), ``rus`` ([1, 2, 4,
/// 8]), ``antennas`` (64), ``users`` (16), ``data_num`` (1200), ``fft_size``
/// (2048), ``parts`` (16), ``schedule`` (``"PUUUUUUUUUUUUU"``), ``frames`` (2000
/// per RU), ``frame_period`` (``"1ms"``), ``deadline`` (``"3ms"``), ``churn``
/// (e.g. ``"remove:1@200ms,add:1@400ms"``), ``calibration`` (a path),
/// ``policy_params`` (a dict of policy parameters), ``jitter`` (0.1), ``seed`` (1).
///
/// Returns one row per (devices, rus, policy), as `station simulate --json`.
#[pyfunction]
pub fn station_simulate<'py>(
    py: Python<'py>,
    options: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyAny>> {
    let o: SimulateOptions = from_py(options.as_any(), "station_simulate options")?;
    let c = sweep_config(&o)?;
    // Between runs, a pending KeyboardInterrupt stops the sweep and is raised.
    let interrupt = Interrupt::default();
    let rows = py.detach(|| sweep(&c, interrupt.flag(), |_| interrupt.check()));
    interrupt.raise()?;
    to_py(py, &rows.map_err(errors::station)?)
}
