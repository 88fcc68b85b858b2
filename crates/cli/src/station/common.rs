//! Helpers shared by `station run` and `station bench`: durations, policy lists,
//! configurations, devices, tables and plots.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use radiohost_phy::FrameConfig;
use radiohost_station::policy::POLICY_NAMES;
use radiohost_station::report::RunReport;
use radiohost_station::runtime::DeviceSpec;
use radiohost_testbed::units::parse_duration;

/// Parse `1ms`, `250us`, `2.5ms`, `1s` or `800ns` into nanoseconds (the testbed's unit
/// parser, but a unit is required and the range is 1 ns .. 1000 s).
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if !s.ends_with(char::is_alphabetic) {
        return Err(format!("`{s}` has no unit: write e.g. 1ms, 250us, 1s"));
    }
    let ns = parse_duration(s).map_err(|e| e.to_string())?.as_nanos();
    if !(1..1_000_000_000_000).contains(&ns) {
        return Err(format!("`{s}` is out of range (1 ns .. 1000 s)"));
    }
    Ok(ns as u64)
}

/// `all` or a comma list of policy names.
pub fn parse_policies(s: &str) -> Result<Vec<String>, String> {
    if s == "all" {
        return Ok(POLICY_NAMES.iter().map(|p| p.to_string()).collect());
    }
    let v: Vec<String> = s.split(',').map(|p| p.trim().to_string()).collect();
    for p in &v {
        if !POLICY_NAMES.contains(&p.as_str()) {
            return Err(format!(
                "unknown policy `{p}`: use lroc, frame, symbol, task, a comma list or all"
            ));
        }
    }
    Ok(v)
}

/// Load a configuration file, or a built-in one by name (`8x2`, `16x4`, `32x8`,
/// `64x16`) from the repository's config folders.
pub fn load_config(spec: &Path) -> Result<(FrameConfig, String)> {
    let name = spec
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("config")
        .to_string();
    if spec.exists() {
        let cfg = FrameConfig::load(spec).with_context(|| format!("loading {}", spec.display()))?;
        return Ok((cfg, name));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for dir in ["phy/configs", "station/configs"] {
        let p: PathBuf = root.join(dir).join(format!("{}.json", spec.display()));
        if p.exists() {
            let cfg = FrameConfig::load(&p).with_context(|| format!("loading {}", p.display()))?;
            return Ok((cfg, name));
        }
    }
    bail!(
        "configuration `{}` not found: give a path to a JSON frame configuration or one of 8x2, 16x4, 32x8, 64x16",
        spec.display()
    )
}

/// Cores to pin to: all online ones, unless pinning is off.
pub fn cores(pin: bool) -> Vec<usize> {
    if !pin {
        return Vec::new();
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// `devices` devices of `workers` each over the cores.
pub fn devices(devices: usize, workers: usize, pin: bool) -> Result<Vec<DeviceSpec>> {
    if devices == 0 || workers == 0 {
        bail!("--devices and --workers must be at least 1");
    }
    Ok(DeviceSpec::split(devices, workers, &cores(pin)))
}

/// The human table of runs.
pub fn print_table(reports: &[RunReport]) {
    println!(
        "{:<8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "policy",
        "frames",
        "done",
        "ok",
        "missed",
        "rej",
        "mean ms",
        "p99 ms",
        "p99.99 ms",
        "frames/s",
        "Mbit/s",
        "offered"
    );
    for r in reports {
        println!(
            "{:<8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.1} {:>9.2} {:>8.1}",
            r.policy,
            r.frames,
            r.completed,
            r.decoded_ok,
            r.missed,
            r.rejected + r.failed,
            r.mean_ms,
            r.p99_ms,
            r.p9999_ms,
            r.achieved_fps,
            r.decoded_mbps,
            r.offered_fps
        );
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

const COLORS: [RGBColor; 4] = [
    RGBColor(200, 30, 30),
    RGBColor(30, 90, 200),
    RGBColor(20, 150, 60),
    RGBColor(150, 90, 10),
];

/// Latency CDF per policy (x: latency ms, log; y: fraction of completed frames).
pub fn cdf_svg(path: &Path, title: &str, reports: &[RunReport]) -> Result<()> {
    let max = reports
        .iter()
        .flat_map(|r| r.cdf.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(0.01);
    let min = reports
        .iter()
        .flat_map(|r| r.cdf.iter().map(|p| p.0))
        .fold(f64::INFINITY, f64::min)
        .clamp(0.001, max / 2.0);
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((min..max * 1.1).log_scale(), 0.0..1.0)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .x_desc("frame latency (ms)")
        .y_desc("fraction of frames")
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (i, r) in reports.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(r.cdf.iter().copied(), c.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(r.policy.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
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
        let c = COLORS[i % COLORS.len()];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_reject_nonsense() {
        assert_eq!(parse_duration_ns("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration_ns("2.5ms"), Ok(2_500_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert!(parse_duration_ns("1").is_err());
        assert!(parse_duration_ns("1h").is_err());
        assert!(parse_duration_ns("0ms").is_err());
        assert!(parse_duration_ns("x").is_err());
    }

    #[test]
    fn policy_lists() {
        assert_eq!(parse_policies("all").unwrap().len(), 4);
        assert_eq!(parse_policies("lroc,frame").unwrap(), vec!["lroc", "frame"]);
        assert!(parse_policies("fifo").is_err());
    }
}
