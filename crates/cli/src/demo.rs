//! `radiohost demo`: the data path end to end on the virtual testbed
//! (`radiohost_demo::run`); this module only parses, prints and plots.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use plotters::prelude::*;
use radiohost_demo::{default_link, DemoConfig, DemoReport, StageReport};
use radiohost_testbed::units::parse_duration;

#[derive(Args)]
pub struct DemoArgs {
    /// Emulated WARP v3 nodes carrying the antennas, 1 to 64.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=64))]
    nodes: u8,
    /// RF paths (antennas) per node, 1 to 4.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=4))]
    paths_per_node: u8,
    /// Single-antenna users, 1 to the number of antennas (nodes x paths).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    users: u16,
    /// Uplink frames, 1 to 100000.
    #[arg(long, default_value_t = 64, value_parser = crate::ui::count_in::<u64>(1, 100_000))]
    frames: u64,
    /// Receivers of the users' payloads (links fast/clean to slow/lossy), 1 to 64.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=64))]
    receivers: u8,
    /// Receivers' links instead of the defaults, one testbed link spec each,
    /// separated by ';' (e.g. "1Mbit,1%,delay=5ms;250kbit,20%,delay=40ms").
    #[arg(long)]
    links: Option<String>,
    /// Per-antenna SNR of each user, in dB (-20 to 100).
    #[arg(long, default_value_t = 25.0, value_parser = crate::ui::f64_in(-20.0, 100.0))]
    snr_db: f64,
    /// Station frame deadline, from capture to decode (units: ns, us, ms, s, min;
    /// 1us to 1h).
    #[arg(long, default_value = "100ms", value_parser = crate::ui::within(
        parse_duration,
        std::time::Duration::from_micros(1),
        std::time::Duration::from_secs(3600),
        "1us..=1h"))]
    deadline: std::time::Duration,
    /// Deadline misses tolerated, in per cent of frames (0 to 100); more fails the demo.
    #[arg(long, default_value_t = 0.0, value_parser = crate::ui::f64_in(0.0, 100.0))]
    max_miss_pct: f64,
    /// Station CPU executors (worker threads), 1 to 256.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
    /// Random seed of the payloads, channel, noise and link losses.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON (per stage: input and output digests, counters, timings).
    #[arg(long)]
    json: bool,
    /// Draw the run's timeline as SVG (FILE, or DIR for DIR/demo_timeline.svg).
    #[arg(long)]
    svg: Option<PathBuf>,
}

impl DemoArgs {
    fn config(&self) -> Result<DemoConfig> {
        let links: Vec<String> = match &self.links {
            Some(s) => s.split(';').map(|l| l.trim().to_string()).collect(),
            None => (0..usize::from(self.receivers)).map(default_link).collect(),
        };
        Ok(DemoConfig {
            nodes: usize::from(self.nodes),
            paths_per_node: usize::from(self.paths_per_node),
            users: usize::from(self.users),
            frames: self.frames,
            snr_db: self.snr_db,
            links,
            deadline_ms: self.deadline.as_secs_f64() * 1e3,
            max_deadline_miss_pct: self.max_miss_pct,
            workers: usize::from(self.workers),
            seed: self.seed,
        })
    }
}

pub fn run(a: DemoArgs) -> Result<()> {
    let cfg = a.config()?;
    if usize::from(a.users) > cfg.antennas() {
        return Err(crate::ui::usage(format!(
            "--users {}: zero-forcing needs at most as many users as antennas ({} nodes x {} paths = {})",
            a.users,
            a.nodes,
            a.paths_per_node,
            cfg.antennas()
        )));
    }
    let svg = a
        .svg
        .as_deref()
        .map(crate::ui::SvgOut::new)
        .transpose()?
        .map(|s| s.path("demo_timeline", false));
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
    if let Some(path) = &svg {
        timeline_svg(path, &report)?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
        if let Some(path) = &svg {
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
