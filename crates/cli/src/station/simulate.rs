//! `radiohost station simulate`: the scheduling policies against the discrete-event
//! model of a device pool, swept over radio units and device counts
//! (`radiohost_station::sweep`); a table, JSON rows and an SVG of P99.99 latency
//! against RUs per policy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
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
    /// Devices in the pool; a comma list sweeps it (e.g. 8,16,32).
    #[arg(long, default_value = "4", value_delimiter = ',')]
    pub devices: Vec<u32>,
    /// Kind of every device: `gpu` (units are SMs) or `cpu` (units are cores).
    #[arg(long, default_value = "gpu")]
    pub device_kind: String,
    /// Resource units per device (132 = an H100's SMs).
    #[arg(long, default_value_t = 132)]
    pub units: u32,
    /// Radio units, each sending one frame per period; a comma list sweeps it.
    #[arg(long, default_value = "1,2,4,8", value_delimiter = ',')]
    pub rus: Vec<u32>,
    /// Base-station antennas.
    #[arg(long, default_value_t = 64)]
    pub antennas: usize,
    /// Users (spatial streams).
    #[arg(long, default_value_t = 16)]
    pub users: usize,
    /// Data subcarriers per symbol.
    #[arg(long, default_value_t = 1200)]
    pub data_num: usize,
    /// FFT size.
    #[arg(long, default_value_t = 2048)]
    pub fft_size: usize,
    /// Subcarrier parts ZF, equalisation and precoding are split into.
    #[arg(long, default_value_t = 16)]
    pub parts: usize,
    /// Frame schedule: P pilot, U uplink, D downlink, G guard (14 symbols per frame).
    #[arg(long, default_value = "PUUUUUUUUUUUUU")]
    pub schedule: String,
    /// Frames per radio unit.
    #[arg(long, default_value_t = 2000)]
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
    /// Kernel latency calibration JSON (`{"cpu"|"gpu": {opcode: ns}, "shape": {...}}`,
    /// as written by `radiohost station bench --calibration-out`).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Policy parameters JSON (any subset of PolicyParams fields).
    #[arg(long)]
    pub policy_params: Option<PathBuf>,
    /// Kernel time jitter (+- fraction).
    #[arg(long, default_value_t = 0.1)]
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
        antennas: a.antennas,
        users: a.users,
        data_num: a.data_num,
        fft_size: a.fft_size,
        parts: a.parts,
        schedule: a.schedule.clone(),
        frames_per_ru: a.frames,
        frame_period_ns: a.frame_period.as_nanos() as u64,
        deadline_ns: a.deadline.as_nanos() as u64,
        churn,
        jitter: a.jitter,
        seed: a.seed,
        params,
        model,
        calibrate_policy: true,
    })
}

pub fn run(a: SimulateArgs) -> Result<()> {
    let c = SweepConfig {
        policies: parse_policies(&a.policies)?,
        devices: a.devices.clone(),
        rus: a.rus.clone(),
        base: base_config(&a)?,
    };
    let bar = if a.json || c.runs() < 2 {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(c.runs() as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let rows = sweep(&c, |m| {
        bar.inc(1);
        bar.set_message(m.to_string());
    })?;
    bar.finish_and_clear();
    if let Some(path) = &a.svg {
        plot_p9999_vs_rus(path, &rows, &a)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    print_table(&rows, &a);
    if let Some(path) = &a.svg {
        println!("plot: {}", path.display());
    }
    Ok(())
}

fn print_table(rows: &[SimResult], a: &SimulateArgs) {
    println!(
        "{}x{} {} devices x {} units ({}), {} frames/RU, deadline {:?}",
        a.antennas, a.users, a.device_kind, a.units, a.schedule, a.frames, a.deadline
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
