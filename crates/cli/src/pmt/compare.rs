//! `radiohost pmt compare`: PMT, slowest-receiver multicast and kernel TCP Reno over
//! the same emulated links (`radiohost_pmt::app::compare`), printed, plotted and
//! optionally saved as JSON.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use radiohost_pmt::app::{compare, parse_links, CompareConfig, CompareStep, MIN_TCP_RUNS};
use radiohost_testbed::units::parse_size;

use crate::table::Table;
use crate::ui::{self, Progress};

/// An object size for a comparison: 1B..=1GB.
fn object_size() -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync {
    ui::within(parse_size, 1, 1_000_000_000, "1B..=1GB")
}

#[derive(Args)]
pub struct CompareArgs {
    /// Object size with its unit (B, KB, MB, KiB, MiB; 1B to 1GB).
    #[arg(long, default_value = "1MB", value_parser = object_size())]
    size: usize,
    /// One link spec per receiver, `;`-separated (testbed syntax: rate, loss%,
    /// delay=, ge=, reorder=, dup=, queue=). Both directions use the spec.
    #[arg(long, default_value = "1Mbit,1%;250kbit,20%")]
    links: String,
    /// Capacity changes: `[LINK:]TIME=RATE,...`, `;` between links; LINK is the
    /// receiver index (default 0). Example: "0:10s=700kbit,20s=500kbit".
    #[arg(long)]
    capacity_schedule: Option<String>,
    /// Runs of PMT and multicast (virtual time), seeds seed..seed+runs; 1 to 10000.
    #[arg(long, default_value_t = 5, value_parser = crate::ui::count_in::<u64>(1, 10_000))]
    runs: u64,
    /// Runs of kernel TCP (real time), seeds seed..seed+tcp-runs; 5 to 1000.
    #[arg(long, default_value_t = MIN_TCP_RUNS,
          value_parser = crate::ui::count_in::<u64>(MIN_TCP_RUNS, 1000))]
    tcp_runs: u64,
    /// First random seed (links' losses and the object's bytes).
    #[arg(long, default_value_t = 0, value_parser = crate::ui::count_in::<u64>(0, u64::MAX / 2))]
    seed: u64,
    /// Skip the kernel TCP baseline (it runs in real time, --tcp-runs times, and needs
    /// root).
    #[arg(long)]
    no_tcp: bool,
    /// Object size for the TCP runs (default: --size; 1B to 1GB); real-time runs
    /// over slow lossy links take minutes each.
    #[arg(long, value_parser = object_size())]
    tcp_size: Option<usize>,
    /// A run still going at this multiple of its floor is stopped and reported
    /// unfinished (1 to 1000).
    #[arg(long, default_value_t = 10.0, value_parser = ui::f64_in(1.0, 1000.0))]
    limit_factor: f64,
    /// PMT window W (segments per round, 1 to 1024).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    window: u16,
    /// PMT groups K (RTT groups, 1 to 16).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=16))]
    groups: u8,
    /// Plots: bytes_vs_time.svg and groups_vs_cwnd.svg (a DIR, or FILE for
    /// FILE-stem-<name>.svg beside it); none without it.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Print one JSON row per protocol, receiver and run (each with its `clock`:
    /// virtual-time or real-time).
    #[arg(long)]
    json: bool,
    /// Also write the JSON rows to this file (with the human table on stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: CompareArgs) -> Result<()> {
    let links = parse_links(&a.links, a.capacity_schedule.as_deref())
        .map_err(|e| ui::usage(format!("--links / --capacity-schedule: {e}")))?;
    let svg = a.svg.as_deref().map(ui::SvgOut::new).transpose()?;
    if let Some(p) = &a.out {
        ui::check_output_file("--out", p)?;
    }
    let c = CompareConfig {
        size: a.size,
        tcp_size: a.tcp_size.unwrap_or(a.size),
        links,
        runs: a.runs,
        tcp_runs: a.tcp_runs,
        seed: a.seed,
        tcp: !a.no_tcp,
        limit_factor: a.limit_factor,
        window: a.window,
        groups: usize::from(a.groups),
    };
    let steps = a.runs + if a.no_tcp { 0 } else { a.tcp_runs };
    let bar = Progress::new("pmt and multicast runs", steps, !a.json);
    let rep = compare(&c, &ui::stop_flag(), |step| match step {
        CompareStep::Simulated { .. } | CompareStep::TcpDone { .. } => bar.inc(1),
        CompareStep::TcpStarting { run, limit_s } => bar.label(format!(
            "TCP run {} of {} (real time, up to {limit_s:.0} s)",
            run + 1,
            a.tcp_runs
        )),
    })?;
    drop(bar);
    let plots = match &svg {
        Some(svg) if !rep.first.is_empty() => {
            let bytes_svg = svg.path("bytes_vs_time", true);
            let groups_svg = svg.path("groups_vs_cwnd", true);
            super::plot::bytes_vs_time(&bytes_svg, &rep.first, &a.links)?;
            super::plot::groups_vs_cwnd(&groups_svg, &rep.first)?;
            Some((bytes_svg, groups_svg))
        }
        _ => None,
    };
    if let Some(p) = &a.out {
        std::fs::write(p, serde_json::to_string_pretty(&rep.rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let partial = || format!("{} result rows from the runs done", rep.rows.len());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep.rows)?);
        return ui::partial_if_interrupted(partial);
    }
    println!(
        "virtual-time rows: simulated network, seconds of virtual time; \
         real-time rows: kernel TCP through TUN devices, wall-clock seconds on this host"
    );
    let t = Table::new(">10 >12 >4 >8 >9 >9 >9 >9 >9 >8 >7");
    t.header("protocol|clock|rx|size|median_s|min_s|max_s|floor_s|med/floor|finished|intact");
    for s in &rep.summary {
        println!(
            "{:>10} {:>12} {:>4} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.3} {:>5}/{:<2} {:>4}/{:<2}",
            s.protocol,
            s.clock.label(),
            s.receiver,
            s.bytes,
            s.median_s,
            s.min_s,
            s.max_s,
            s.floor_s,
            s.median_s / s.floor_s,
            s.finished,
            s.runs,
            s.intact,
            s.runs
        );
    }
    println!(
        "(min-max over the runs; unfinished = still going at {}x floor, shown as inf)",
        a.limit_factor
    );
    for r in &rep.ratios {
        println!(
            "receiver {}: {} median / {} median = {:.3} (in multiples of each run's floor{})",
            r.receiver,
            r.protocol,
            r.baseline,
            r.median_ratio,
            if r.mixed_clocks {
                "; virtual-time over real-time"
            } else {
                "; both virtual-time"
            }
        );
    }
    if let Some((b, g)) = &plots {
        println!("plots: {} {}", b.display(), g.display());
    }
    if let Some(e) = &rep.tcp_error {
        eprintln!("kernel TCP baseline skipped: {e}");
        println!("note: TCP baseline not run: {e}");
    }
    if rep.interrupted {
        println!("PARTIAL: interrupted; the table holds the runs done");
    }
    ui::partial_if_interrupted(partial)
}
