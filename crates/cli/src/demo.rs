//! `radiohost demo`: the data path end to end on the virtual testbed
//! (`radiohost_demo::run`); this module only parses, prints and plots.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use plotters::prelude::*;
use radiohost_demo::{default_link, DemoConfig, DemoReport, StageReport};
use radiohost_testbed::units::parse_positive_duration;

#[derive(Args)]
pub struct DemoArgs {
    /// Emulated WARP v3 nodes carrying the antennas.
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// RF paths (antennas) per node, 1 to 4.
    #[arg(long, default_value_t = 4)]
    paths_per_node: usize,
    /// Single-antenna users.
    #[arg(long, default_value_t = 4)]
    users: usize,
    /// Uplink frames.
    #[arg(long, default_value_t = 64)]
    frames: u64,
    /// Receivers of the users' payloads (links fast/clean to slow/lossy).
    #[arg(long, default_value_t = 3)]
    receivers: usize,
    /// Receivers' links instead of the defaults, one testbed link spec each,
    /// separated by ';' (e.g. "1Mbit,1%,delay=5ms;250kbit,20%,delay=40ms").
    #[arg(long)]
    links: Option<String>,
    /// Per-antenna SNR of each user, in dB.
    #[arg(long, default_value_t = 25.0)]
    snr_db: f64,
    /// Station frame deadline, from capture to decode (units: ns, us, ms, s, min).
    #[arg(long, default_value = "100ms", value_parser = parse_positive_duration)]
    deadline: std::time::Duration,
    /// Deadline misses tolerated, in per cent of frames.
    #[arg(long, default_value_t = 0.0)]
    max_miss_pct: f64,
    /// Station CPU executors (worker threads).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON (per stage: input and output digests, counters, timings).
    #[arg(long)]
    json: bool,
    /// Draw the run's timeline into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
}

impl DemoArgs {
    fn config(&self) -> Result<DemoConfig> {
        let links: Vec<String> = match &self.links {
            Some(s) => s.split(';').map(|l| l.trim().to_string()).collect(),
            None => (0..self.receivers).map(default_link).collect(),
        };
        Ok(DemoConfig {
            nodes: self.nodes,
            paths_per_node: self.paths_per_node,
            users: self.users,
            frames: self.frames,
            snr_db: self.snr_db,
            links,
            deadline_ms: self.deadline.as_secs_f64() * 1e3,
            max_deadline_miss_pct: self.max_miss_pct,
            workers: self.workers,
            seed: self.seed,
        })
    }
}

pub fn run(a: DemoArgs) -> Result<()> {
    let cfg = a.config()?;
    if !a.json {
        println!(
            "radiohost demo: {} users -> air -> {} antennas on {} WARP nodes -> host -> station -> PMT -> {} receivers, {} frames\n",
            cfg.users,
            cfg.antennas(),
            cfg.nodes,
            cfg.links.len(),
            cfg.frames
        );
    }
    let json = a.json;
    let report = radiohost_demo::run(&cfg, &mut |s| {
        if !json {
            print_stage(s)
        }
    })?;
    if let Some(path) = &a.svg {
        timeline_svg(path, &report)?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
        if let Some(path) = &a.svg {
            println!("timeline written to {}", path.display());
        }
    }
    if !report.passed {
        let failed: Vec<String> = report
            .stages
            .iter()
            .filter(|s| !s.passed)
            .map(|s| format!("{}: {}", s.name, s.failures.join("; ")))
            .chain(
                report
                    .chain_breaks()
                    .iter()
                    .map(|(a, b)| format!("digest chain broken between {a} and {b}")),
            )
            .collect();
        bail!("the demo failed its checks:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

fn print_stage(s: &StageReport) {
    println!(
        "== {} [{}] {:.1} ms",
        s.name,
        if s.passed { "ok" } else { "FAILED" },
        s.wall_ms
    );
    println!(
        "   in : {} ({})",
        s.input,
        &s.input_digest[..16.min(s.input_digest.len())]
    );
    println!(
        "   out: {} ({})",
        s.output,
        &s.output_digest[..16.min(s.output_digest.len())]
    );
    let counters: Vec<String> = s
        .counters
        .iter()
        .map(|c| {
            format!(
                "{}={}{}",
                c.name,
                fmt_value(c.value),
                if c.unit.is_empty() {
                    String::new()
                } else {
                    format!(" {}", c.unit)
                }
            )
        })
        .collect();
    println!("   {}", counters.join(", "));
    for n in &s.notes {
        println!("   note: {n}");
    }
    for f in &s.failures {
        println!("   FAILED: {f}");
    }
}

fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

fn print_summary(r: &DemoReport) {
    println!(
        "\n{:>4} {:>8} {:>26} {:>9} {:>9} {:>9}",
        "user", "receiver", "link", "bytes", "virt_s", "SHA-256"
    );
    for d in &r.deliveries {
        println!(
            "{:>4} {:>8} {:>26} {:>9} {:>9} {:>9}",
            d.user,
            d.receiver,
            d.link,
            d.bytes,
            d.seconds.map_or("-".into(), |s| format!("{s:.2}")),
            if d.verified { "verified" } else { "MISMATCH" }
        );
    }
    let breaks = r.chain_breaks();
    println!(
        "\ndigest chain: {}",
        if breaks.is_empty() {
            "every stage consumed the previous stage's output".to_string()
        } else {
            format!("{} break(s)", breaks.len())
        }
    );
    println!(
        "demo {} in {:.1} s",
        if r.passed { "passed" } else { "FAILED" },
        r.wall_s
    );
}

/// One row per stage, a bar per span of work (per frame where the stage works
/// frame by frame).
fn timeline_svg(path: &Path, r: &DemoReport) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
    let names: Vec<&str> = r.stages.iter().map(|s| s.name).collect();
    let end = r.timeline.iter().map(|s| s.end_ms).fold(1.0, f64::max);
    let root = SVGBackend::new(path, (1000, 120 + 60 * names.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "radiohost demo: timeline of the data path",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..end * 1.02, 0.0..names.len() as f64)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_desc("milliseconds since start")
        .draw()
        .map_err(|e| err(&e))?;
    // Stage names inside the plot, at the left of their rows (row 0 on top).
    chart
        .draw_series(names.iter().enumerate().map(|(row, name)| {
            let y = (names.len() - 1 - row) as f64 + 0.5;
            Text::new(name.to_string(), (end * 0.003, y), ("sans-serif", 14))
        }))
        .map_err(|e| err(&e))?;
    for span in &r.timeline {
        let row = names
            .iter()
            .position(|n| *n == span.stage)
            .context("timeline names an unknown stage")?;
        let y = (names.len() - 1 - row) as f64;
        let (lo, hi) = if span.frame.is_some() {
            (y + 0.2, y + 0.8)
        } else {
            (y + 0.05, y + 0.95)
        };
        let color = Palette99::pick(row).mix(if span.frame.is_some() { 0.9 } else { 0.25 });
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [
                    (span.start_ms, lo),
                    (span.end_ms.max(span.start_ms + end * 1e-3), hi),
                ],
                color.filled(),
            )))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
