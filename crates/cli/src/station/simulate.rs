//! `radiohost station simulate`: the scheduling policies against the discrete-event
//! model of a device pool, swept over radio units and device counts
//! (`radiohost_station::sweep`); a table, JSON rows and an SVG of P99.99 latency
//! against RUs per policy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use radiohost_station::setup::{parse_churn, parse_device_kind, parse_policies};
use radiohost_station::setup::{read_cost_model, read_policy_params};
use radiohost_station::sim::{SimConfig, SimResult};
use radiohost_station::sweep::{p9999_over_lroc, sweep, SweepConfig};
use radiohost_testbed::units::parse_positive_duration;

use crate::plot::{self, Axis, LineChart, Series};
use crate::table::Table;

#[derive(clap::Args, Debug)]
pub struct SimulateArgs {
    /// Policies to compare: a comma list of lroc, frame, symbol, task, or `all`.
    #[arg(long, default_value = "lroc,frame,symbol,task")]
    pub policies: String,
    /// Devices in the pool (1 to 1024); a comma list sweeps it (e.g. 8,16,32).
    #[arg(long, default_value = "4", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub devices: Vec<u32>,
    /// Kind of every device: `gpu` (units are SMs) or `cpu` (units are cores).
    #[arg(long, default_value = "gpu")]
    pub device_kind: String,
    /// Resource units per device (1 to 100000; 132 = an H100's SMs).
    #[arg(long, default_value_t = 132, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub units: u32,
    /// Radio units (1 to 64), each sending one frame per period; a comma list sweeps it.
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub rus: Vec<u32>,
    /// Base-station antennas (1 to 1024).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub antennas: u16,
    /// Users, spatial streams (1 to 1024, at most the antennas).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub users: u16,
    /// Data subcarriers per symbol (1 to 65536, at most the FFT size).
    #[arg(long, default_value_t = 1200, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub data_num: u32,
    /// FFT size (64 to 65536).
    #[arg(long, default_value_t = 2048, value_parser = clap::value_parser!(u32).range(64..=65_536))]
    pub fft_size: u32,
    /// Subcarrier parts ZF, equalisation and precoding are split into (1 to 4096,
    /// at most the data subcarriers).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub parts: u16,
    /// Frame schedule: P pilot, U uplink, D downlink, G guard (14 symbols per frame).
    #[arg(long, default_value = "PUUUUUUUUUUUUU")]
    pub schedule: String,
    /// Frames per radio unit (1 to 10000000).
    #[arg(long, default_value_t = 2000, value_parser = crate::ui::count_in::<u64>(1, 10_000_000))]
    pub frames: u64,
    /// Frame period, a duration with its unit (e.g. 1ms, 500us).
    #[arg(long, default_value = "1ms", value_parser = parse_positive_duration)]
    pub frame_period: Duration,
    /// Deadline after a frame's first symbol arrives, with its unit (e.g. 3ms).
    #[arg(long, default_value = "3ms", value_parser = parse_positive_duration)]
    pub deadline: Duration,
    /// Devices leaving or joining: comma list of remove:DEV@TIME / add:DEV@TIME, e.g.
    /// remove:1@200ms,add:1@400ms.
    #[arg(long)]
    pub churn: Option<String>,
    /// Measured kernel costs (`radiohost station calibrate --out`, or `station bench
    /// --calibration-out`); without it the costs are modelled (every report says which).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Policy parameters, as JSON or a JSON file (any subset of PolicyParams fields).
    #[arg(long)]
    pub policy_params: Option<PathBuf>,
    /// Kernel time jitter (+- fraction, 0 to 0.9).
    #[arg(long, default_value_t = 0.1, value_parser = parse_jitter)]
    pub jitter: f64,
    /// Random seed (same seed, same result).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON rows instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also print the per-opcode breakdown of every run.
    #[arg(long)]
    pub breakdown: bool,
    /// Write an SVG of P99.99 frame latency against RUs per policy.
    #[arg(long)]
    pub svg: Option<PathBuf>,
}

fn parse_jitter(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..=0.9).contains(&v) {
        Ok(v)
    } else {
        Err(format!("`{s}`: jitter is a fraction from 0 to 0.9"))
    }
}

fn base_config(a: &SimulateArgs) -> Result<SimConfig> {
    let kind = parse_device_kind(&a.device_kind)?;
    let model = read_cost_model(a.calibration.as_deref())?;
    let params = read_policy_params(a.policy_params.as_deref())?;
    let churn = parse_churn(a.churn.as_deref())?;
    Ok(SimConfig {
        devices: 1,
        kind,
        units: a.units,
        rus: 1,
        antennas: usize::from(a.antennas),
        users: usize::from(a.users),
        data_num: a.data_num as usize,
        fft_size: a.fft_size as usize,
        parts: usize::from(a.parts),
        schedule: a.schedule.clone(),
        frames_per_ru: a.frames,
        frame_period_ns: a.frame_period.as_nanos() as u64,
        deadline_ns: a.deadline.as_nanos() as u64,
        churn,
        jitter: a.jitter,
        seed: a.seed,
        params,
        model,
    })
}

pub fn run(a: SimulateArgs) -> Result<()> {
    let c = SweepConfig {
        policies: parse_policies(&a.policies)?,
        devices: a.devices.clone(),
        rus: a.rus.clone(),
        base: base_config(&a)?,
    };
    let bar = crate::ui::Progress::new("station simulate", c.runs() as u64, !a.json);
    let rows = sweep(&c, &crate::ui::stop_flag(), |m| bar.begin(m))?;
    drop(bar);
    let partial = || format!("{} of {} runs done", rows.len(), c.runs());
    if let Some(path) = &a.svg {
        plot_p9999_vs_rus(path, &rows, &a)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return crate::ui::partial_if_interrupted(partial);
    }
    print_table(&rows, &a);
    if let Some(path) = &a.svg {
        println!("plot: {}", path.display());
    }
    crate::ui::partial_if_interrupted(partial)
}

fn print_table(rows: &[SimResult], a: &SimulateArgs) {
    let costs = rows.first().map_or("modelled", |r| r.costs.name());
    println!(
        "{}x{} {} devices x {} units ({}), {} frames/RU, deadline {:?}; kernel costs {costs}{}",
        a.antennas,
        a.users,
        a.device_kind,
        a.units,
        a.schedule,
        a.frames,
        a.deadline,
        match &a.calibration {
            Some(p) => format!(" from {}", p.display()),
            None => " (cost model, not measured: pass --calibration FILE)".to_string(),
        }
    );
    let t = Table::new("<7 >4 >4 >7 >7 >6 >6 >8.3 >8.3 >9.3 >8.0 >5.2 >11");
    t.header("policy|dev|RUs|frames|done|miss|rej|mean ms|p99 ms|p99.99 ms|fps|util|p99.99/lroc");
    for r in rows {
        let ratio = p9999_over_lroc(rows, r).map_or("-".to_string(), |x| format!("{x:.2}"));
        t.row(&[
            &r.policy,
            &r.devices,
            &r.rus,
            &r.frames,
            &r.completed,
            &r.missed,
            &r.rejected,
            &r.mean_ms,
            &r.p99_ms,
            &r.p9999_ms,
            &r.achieved_fps,
            &r.utilization,
            &ratio,
        ]);
        if a.breakdown {
            for o in &r.per_opcode {
                println!(
                    "        {:<10} n={:<9} exec {:>9.1} us  wait {:>9.1} us  copy {:>8.1} us",
                    o.opcode, o.count, o.mean_exec_us, o.mean_wait_us, o.mean_copy_us
                );
            }
        }
    }
    let (mut moved, mut low, mut coal) = (0, 0, 0);
    for r in rows {
        moved += r.rescheduled;
        low += r.low_priority;
        coal += r.coalesced;
    }
    println!("rescheduled after device removal: {moved}; over-committed: {low}; coalesced: {coal}");
    println!(
        "(missed frames count in the latency tail at their discard time; rejected frames do not)"
    );
}

fn plot_p9999_vs_rus(path: &Path, rows: &[SimResult], a: &SimulateArgs) -> Result<()> {
    let x_max = rows.iter().map(|r| r.rus).max().unwrap_or(1) as f64;
    let y_max = rows.iter().map(|r| r.p9999_ms).fold(0.1, f64::max) * 1.1;
    let title = format!(
        "P99.99 frame latency vs RUs ({}x{}, {} x {} units)",
        a.antennas, a.users, a.device_kind, a.units
    );
    let mut chart = LineChart::new(
        title,
        Axis::linear("radio units", 0.0..x_max + 0.5),
        Axis::linear("P99.99 latency (ms)", 0.0..y_max),
    );
    let mut devices: Vec<u32> = rows.iter().map(|r| r.devices).collect();
    devices.sort_unstable();
    devices.dedup();
    let mut policies: Vec<&str> = Vec::new();
    for r in rows {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    for (pi, p) in policies.iter().enumerate() {
        // One colour per policy; fewer devices, thicker line.
        for (di, d) in devices.iter().enumerate() {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.policy == *p && r.devices == *d)
                .map(|r| (f64::from(r.rus), r.p9999_ms))
                .collect();
            let label = if devices.len() > 1 {
                format!("{p} ({d} devices)")
            } else {
                p.to_string()
            };
            let width = 1 + (devices.len() - di) as u32;
            chart.push(Series::new(label, pts, plot::color(pi)).width(width));
        }
    }
    chart.write(path, (900, 560))
}
