//! `warp bench`: read/write latency versus node count, parallel against serial, on
//! emulated nodes behind paced links (`radiohost_warp::bench`); table, CSV, SVG.

use super::{LinkArgs, NetArgs};
use crate::plot::{self, Axis, LineChart, Series};
use crate::ui::{self, Progress};
use anyhow::{Context, Result};
use clap::Args;
use radiohost_warp::bench::{csv, run as run_bench, scaling, BenchConfig, BenchRow};
use std::path::PathBuf;

#[derive(Args)]
pub struct BenchArgs {
    /// Node counts to measure, each 1 to 254.
    #[arg(long, default_value = "1,2,4,8,12,16", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(1..=radiohost_warp::addressing::MAX_WARPLAB_NODES as i64))]
    nodes: Vec<u16>,
    /// Samples per read/write per node, 1 to 32768.
    #[arg(long, default_value_t = 32768, value_parser = clap::value_parser!(u32).range(1..=32768))]
    samples: u32,
    /// Also measure the serial baseline (one node after another).
    #[arg(long)]
    serial: bool,
    /// Calls per (mode, node count, operation), at least 1.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    calls: u32,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    links: LinkArgs,
    /// Host link counts to measure, each 1 or 2 (overrides --host-links), e.g. "1,2".
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=2))]
    host_link_set: Vec<u8>,
    /// Directory for the CSV and the SVG plot.
    #[arg(long, default_value = "bench-out/warp")]
    out: PathBuf,
    /// Print the rows as one JSON array.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let max_nodes = a.nodes.iter().copied().max().unwrap_or(1);
    let b = BenchConfig {
        network: a.links.network(max_nodes, &a.net),
        nodes: a.nodes.clone(),
        samples: a.samples,
        serial: a.serial,
        calls: a.calls,
        host_link_set: a.host_link_set.clone(),
    };
    crate::ui::check_output_dir("--out", &a.out)?;
    let bar = Progress::new("warp bench", b.steps() as u64, !a.json);
    let rep = run_bench(&b, &ui::stop_flag(), |m| bar.begin(m))?;
    drop(bar);
    if !a.json {
        for s in &rep.socket_buffers {
            eprintln!(
                "host socket {}: asked for {} KiB buffers, kernel granted {} KiB receive / {} KiB send",
                s.local, s.requested / 1024, s.recv_granted / 1024, s.send_granted / 1024
            );
        }
    }
    if !a.json {
        for o in &rep.offload {
            let on = |b: bool| if b { "on" } else { "off" };
            eprintln!(
                "UDP offload with {} host link(s): host GSO {} / GRO {} ({} GSO sends, {} GRO batches), emulator GSO {} / GRO {} ({} GSO sends, {} GRO batches)",
                o.host_links,
                on(o.host.iter().any(|h| h.gso)),
                on(o.host.iter().any(|h| h.gro)),
                o.host_gso_sends,
                o.host_gro_batches,
                on(o.emulator_gso),
                on(o.emulator_gro),
                o.emulator_gso_sends,
                o.emulator_gro_batches
            );
        }
    }
    for (links, stats) in &rep.troubled {
        eprintln!("host counters with {links} host link(s): {stats:?}");
    }
    let rows = &rep.rows;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let csv_path = a.out.join("warp_bench.csv");
    std::fs::write(&csv_path, csv(rows))
        .with_context(|| format!("writing {}", csv_path.display()))?;
    plot(&a.out.join("warp_bench.svg"), rows)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(rows)?);
    } else {
        print_table(rows);
        println!(
            "\nwrote {} and {}",
            a.out.join("warp_bench.csv").display(),
            a.out.join("warp_bench.svg").display()
        );
    }
    ui::partial_if_interrupted(|| format!("{} of {} steps measured", rows.len(), b.steps()))
}

fn print_table(rows: &[BenchRow]) {
    println!(
        "{:>8} {:>5} {:>5} {:>6} {:>9} {:>9} {:>9} {:>11}",
        "mode", "links", "nodes", "op", "mean_ms", "p99_ms", "floor_ms", "mean/floor"
    );
    for r in rows {
        println!(
            "{:>8} {:>5} {:>5} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>11.2}",
            r.mode,
            r.host_links,
            r.nodes,
            r.op,
            r.mean_ms,
            r.p99_ms,
            r.floor_ms,
            r.mean_ms / r.floor_ms
        );
    }
    // The ratios the design is judged by.
    println!();
    for s in scaling(rows) {
        print!(
            "{:>5}, {} host link(s): parallel {} nodes / {} node = {:.2}x",
            s.op, s.host_links, s.max_nodes, s.min_nodes, s.parallel_growth
        );
        if let Some(x) = s.serial_over_parallel {
            print!("; serial / parallel at {} nodes = {x:.1}x", s.max_nodes);
        }
        println!();
    }
}

fn plot(path: &std::path::Path, rows: &[BenchRow]) -> Result<()> {
    let max_n = rows.iter().map(|r| r.nodes).max().unwrap_or(1) as f64;
    let max_ms = rows.iter().map(|r| r.mean_ms).fold(0.1, f64::max) * 1.1;
    let mut chart = LineChart::new(
        "WARPLab buffer transport: mean latency vs nodes",
        Axis::linear("nodes", 0.0..max_n + 1.0),
        Axis::linear("mean latency (ms)", 0.0..max_ms),
    );
    let mut series: Vec<(&str, u8, &str)> =
        rows.iter().map(|r| (r.mode, r.host_links, r.op)).collect();
    series.sort();
    series.dedup();
    for (k, (mode, links, op)) in series.iter().enumerate() {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.mode == *mode && r.host_links == *links && r.op == *op)
            .map(|r| (r.nodes as f64, r.mean_ms))
            .collect();
        let label = format!("{mode} {op}, {links} host link(s)");
        chart.push(Series::new(label, points, plot::color(k)));
    }
    chart.write(path, (900, 560))
}
