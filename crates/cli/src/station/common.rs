//! Tables and plots shared by `station run` and `station bench`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use plotters::prelude::*;

use crate::plot::{self, Axis, LineChart, Series};
use crate::table::Table;
use radiohost_station::report::RunReport;
use radiohost_station::runtime::DeviceSpec;
use radiohost_station::setup::{cpu_specs, parse_devices, DeviceArg};

/// The device pool of `--devices cpu:N,gpu:K,...`, in the order given (device ids
/// follow it). A GPU runs frames whole; the scheduler places each frame on a GPU or
/// on the CPU devices together (`radiohost_station::runtime::placement`). A `gpu:K`
/// without a usable CUDA driver or GPU K, or named twice, is an error.
pub fn device_pool(list: &str, pin: bool) -> Result<Vec<DeviceSpec>> {
    let args = parse_devices(list)?;
    let mut gpus: Vec<usize> = args
        .iter()
        .filter_map(|a| match a {
            DeviceArg::Gpu(k) => Some(*k),
            DeviceArg::Cpu(_) => None,
        })
        .collect();
    gpus.sort_unstable();
    if let Some(w) = gpus.windows(2).find(|w| w[0] == w[1]) {
        bail!(
            "--devices {list}: gpu:{} is named twice; a GPU is one executor (name each GPU once)",
            w[0]
        );
    }
    let mut cpus = cpu_specs(&args, pin).into_iter();
    let mut pool = Vec::new();
    for a in args {
        match a {
            DeviceArg::Cpu(_) => pool.extend(cpus.next()),
            DeviceArg::Gpu(ordinal) => {
                let f = radiohost_gpu::station::GpuExecutorFactory::probe(ordinal)
                    .map_err(|e| anyhow!("--devices gpu:{ordinal}: {e}"))?;
                pool.push(DeviceSpec::External(Arc::new(f)));
            }
        }
    }
    Ok(pool)
}

/// One line per device: where the scheduler's costs for it came from.
pub fn print_costs(r: &RunReport) {
    let labels: Vec<String> = r
        .device_costs
        .iter()
        .map(|d| format!("{} {} ({} units): {}", d.device, d.name, d.units, d.costs))
        .collect();
    println!("device costs: {}", labels.join("; "));
}

/// The human table of runs.
pub fn print_table(reports: &[RunReport]) {
    let t = Table::new("<8 >6 >6 >6 >6 >6 >9.3 >9.3 >9.3 >9.1 >9.2 >8.1");
    t.header("policy|frames|done|ok|missed|rej|mean ms|p99 ms|p99.99 ms|frames/s|Mbit/s|offered");
    for r in reports {
        let rejected = r.rejected + r.failed;
        t.row(&[
            &r.policy,
            &r.frames,
            &r.completed,
            &r.decoded_ok,
            &r.missed,
            &rejected,
            &r.mean_ms,
            &r.p99_ms,
            &r.p9999_ms,
            &r.achieved_fps,
            &r.decoded_mbps,
            &r.offered_fps,
        ]);
    }
}

/// Per-stage breakdown: mean execution time per instruction and per frame.
pub fn print_breakdown(reports: &[RunReport]) {
    let Some(first) = reports.first() else { return };
    print!("{:<10}", "stage");
    for r in reports {
        print!(
            " {:>14} {:>10}",
            format!("{} us/instr", r.policy),
            "us/frame"
        );
    }
    println!();
    for s in &first.stages {
        print!("{:<10}", s.opcode);
        for r in reports {
            match r.stages.iter().find(|x| x.opcode == s.opcode) {
                Some(x) => print!(" {:>14.1} {:>10.1}", x.mean_us, x.per_frame_us),
                None => print!(" {:>14} {:>10}", "-", "-"),
            }
        }
        println!();
    }
}

/// Latency CDF per policy (x: latency ms, log; y: fraction of completed frames).
pub fn cdf_svg(path: &Path, title: &str, reports: &[RunReport]) -> Result<()> {
    let xs = || reports.iter().flat_map(|r| r.cdf.iter().map(|p| p.0));
    let max = xs().fold(0.0f64, f64::max).max(0.01);
    let min = xs().fold(f64::INFINITY, f64::min).clamp(0.001, max / 2.0);
    let mut chart = LineChart::new(
        title,
        Axis::log("frame latency (ms)", min..max * 1.1),
        Axis::linear("fraction of frames", 0.0..1.0),
    );
    for (i, r) in reports.iter().enumerate() {
        let s = Series::new(r.policy.clone(), r.cdf.clone(), plot::color(i));
        chart.push(s.markers(0));
    }
    chart.write(path, (800, 500))
}

/// Per-stage execution time per frame, one bar per policy in each stage group.
pub fn breakdown_svg(path: &Path, title: &str, reports: &[RunReport]) -> Result<()> {
    let Some(first) = reports.first() else {
        return Ok(());
    };
    let stages: Vec<&str> = first.stages.iter().map(|s| s.opcode).collect();
    let max = reports
        .iter()
        .flat_map(|r| r.stages.iter().map(|s| s.per_frame_us))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let n = reports.len().max(1) as f64;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..stages.len() as f64, 0.0..max * 1.1)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(stages.len().max(1))
        .x_label_formatter(&|x| {
            stages
                .get(x.floor() as usize)
                .map_or(String::new(), |s| s.to_string())
        })
        .x_desc("stage")
        .y_desc("execution time per frame (us)")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, r) in reports.iter().enumerate() {
        let c = plot::color(i);
        let bars = stages.iter().enumerate().filter_map(|(j, st)| {
            let v = r.stages.iter().find(|s| s.opcode == *st)?.per_frame_us;
            let x0 = j as f64 + 0.1 + 0.8 * i as f64 / n;
            Some(Rectangle::new([(x0, 0.0), (x0 + 0.8 / n, v)], c.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(|e| anyhow!("{e}"))?
            .label(r.policy.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
