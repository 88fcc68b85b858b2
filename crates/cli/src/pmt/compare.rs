//! `radiohost pmt compare`: PMT, slowest-receiver multicast and kernel TCP Reno over
//! the same emulated links (`radiohost_pmt::app::compare`), printed, plotted and
//! optionally saved as JSON.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use radiohost_pmt::app::{compare, parse_links, CompareConfig, MIN_TCP_RUNS};
use radiohost_testbed::units::parse_size;

use crate::table::Table;

#[derive(Args)]
pub struct CompareArgs {
    /// Object size with its unit (B, KB, MB, KiB, MiB).
    #[arg(long, default_value = "1MB", value_parser = parse_size)]
    size: usize,
    /// One link spec per receiver, `;`-separated (testbed syntax: rate, loss%,
    /// delay=, ge=, reorder=, dup=, queue=). Both directions use the spec.
    #[arg(long, default_value = "1Mbit,1%;250kbit,20%")]
    links: String,
    /// Capacity changes: `[LINK:]TIME=RATE,...`, `;` between links; LINK is the
    /// receiver index (default 0). Example: "0:10s=700kbit,20s=500kbit".
    #[arg(long)]
    capacity_schedule: Option<String>,
    /// Runs of PMT and multicast (virtual time), seeds seed..seed+runs.
    #[arg(long, default_value_t = 5)]
    runs: u64,
    /// Runs of kernel TCP (real time, at least 5), seeds seed..seed+tcp-runs.
    #[arg(long, default_value_t = MIN_TCP_RUNS)]
    tcp_runs: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Skip the kernel TCP baseline (it runs in real time, --tcp-runs times, and needs
    /// root).
    #[arg(long)]
    no_tcp: bool,
    /// Object size for the TCP runs (default: --size); real-time runs over slow
    /// lossy links take minutes each.
    #[arg(long, value_parser = parse_size)]
    tcp_size: Option<usize>,
    /// A run still going at this multiple of its floor is stopped and reported unfinished.
    #[arg(long, default_value_t = 10.0)]
    limit_factor: f64,
    /// PMT window W (segments per round).
    #[arg(long, default_value_t = 8)]
    window: u16,
    /// PMT groups K.
    #[arg(long, default_value_t = 2)]
    groups: usize,
    /// Directory for the SVG plots.
    #[arg(long, default_value = "pmt-compare")]
    plot_dir: PathBuf,
    /// Print one JSON row per protocol, receiver and run (each with its `clock`:
    /// virtual-time or real-time).
    #[arg(long)]
    json: bool,
    /// Also write the JSON rows to this file (with the human table on stdout).
    #[arg(long)]
    save_json: Option<PathBuf>,
}

pub fn run(a: CompareArgs) -> Result<()> {
    let c = CompareConfig {
        size: a.size,
        tcp_size: a.tcp_size.unwrap_or(a.size),
        links: parse_links(&a.links, a.capacity_schedule.as_deref())?,
        runs: a.runs,
        tcp_runs: a.tcp_runs,
        seed: a.seed,
        tcp: !a.no_tcp,
        limit_factor: a.limit_factor,
        window: a.window,
        groups: a.groups,
    };
    let rep = compare(&c, |run, secs| {
        if !a.json {
            eprintln!(
                "TCP run {} of {}: kernel TCP Reno in real time (up to {secs:.1} s)...",
                run + 1,
                a.tcp_runs
            );
        }
    })?;
    std::fs::create_dir_all(&a.plot_dir)
        .with_context(|| format!("creating {}", a.plot_dir.display()))?;
    let bytes_svg = a.plot_dir.join("bytes_vs_time.svg");
    let groups_svg = a.plot_dir.join("groups_vs_cwnd.svg");
    super::plot::bytes_vs_time(&bytes_svg, &rep.first, &a.links)?;
    super::plot::groups_vs_cwnd(&groups_svg, &rep.first)?;
    if let Some(p) = &a.save_json {
        std::fs::write(p, serde_json::to_string_pretty(&rep.rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep.rows)?);
        return Ok(());
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
    println!("plots: {} {}", bytes_svg.display(), groups_svg.display());
    if let Some(e) = rep.tcp_error {
        eprintln!("kernel TCP baseline skipped: {e}");
        println!("note: TCP baseline not run: {e}");
    }
    Ok(())
}
