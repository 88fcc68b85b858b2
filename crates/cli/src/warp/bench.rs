//! `warp bench`: read/write latency versus node count, parallel against serial, on
//! emulated nodes behind paced links, in one run so the ratios are fair.

use super::{connect, host_config, loopback_interfaces, test_waveform, LinkArgs, NetArgs};
use anyhow::{ensure, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use radiohost_iq::WarpWord;
use radiohost_testbed::units::parse_rate;
use radiohost_warp::addressing::FramePayload;
use radiohost_warp::host::{Mode, WarpHost};
use radiohost_warp::RfBuffer;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct BenchArgs {
    /// Node counts to measure.
    #[arg(long, default_value = "1,2,4,8,12,16", value_delimiter = ',')]
    nodes: Vec<u16>,
    /// Samples per read/write per node.
    #[arg(long, default_value_t = 32768)]
    samples: u32,
    /// Also measure the serial baseline (one node after another).
    #[arg(long)]
    serial: bool,
    /// Calls per (mode, node count, operation).
    #[arg(long, default_value_t = 1000)]
    calls: u32,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    links: LinkArgs,
    /// Host link counts to measure (overrides --host-links), e.g. "1,2".
    #[arg(long, value_delimiter = ',')]
    host_link_set: Vec<u8>,
    /// Directory for the CSV and the SVG plot.
    #[arg(long, default_value = "bench-out/warp")]
    out: PathBuf,
    /// Print the rows as one JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone)]
struct Row {
    mode: &'static str,
    host_links: u8,
    nodes: u16,
    op: &'static str,
    samples: u32,
    mean_ms: f64,
    p99_ms: f64,
    /// Link-capacity floor: the slower of one node's link and the shared host link(s).
    floor_ms: f64,
}

pub fn run(mut a: BenchArgs) -> Result<()> {
    ensure!(
        !a.nodes.is_empty() && a.nodes.iter().all(|&n| n > 0),
        "--nodes needs positive counts"
    );
    ensure!(a.calls > 0, "--calls must be positive");
    ensure!(
        a.samples > 0 && a.samples <= 32768,
        "--samples must be within 1..=32768"
    );
    let link_sets = if a.host_link_set.is_empty() {
        vec![a.links.host_links]
    } else {
        a.host_link_set.clone()
    };
    let max_nodes = *a.nodes.iter().max().expect("non-empty");
    // Ephemeral ports: the bench never collides with a running emulator.
    a.net.base_port = 0;
    a.net.trigger_port = 0;
    let modes: Vec<Mode> = if a.serial {
        vec![Mode::Parallel, Mode::Serial]
    } else {
        vec![Mode::Parallel]
    };
    let steps = link_sets.len() * modes.len() * a.nodes.len() * 2;
    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(steps as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("valid template"),
    );
    let mut rows = Vec::new();
    for &links in &link_sets {
        let mut link_args = a.links.clone();
        link_args.host_links = links;
        let cfg = link_args.emulator_config(max_nodes, &a.net)?;
        let emu = super::commands::emulator_for_bench(cfg.clone())?;
        let ids: Vec<u16> = (0..max_nodes).collect();
        let trigger = emu
            .trigger_addr()
            .context("emulator has no trigger socket")?;
        let host_cfg = host_config(
            &loopback_interfaces(links as usize),
            a.net.payload(),
            trigger,
        );
        let mut host = connect(&ids, emu.node_addrs(), |i| cfg.host_link_of(i), host_cfg)?;
        if !a.json {
            for b in host.socket_buffers() {
                eprintln!(
                    "host socket {}: asked for {} KiB buffers, kernel granted {} KiB receive / {} KiB send",
                    b.local,
                    b.requested / 1024,
                    b.recv_granted / 1024,
                    b.send_granted / 1024
                );
            }
        }
        let data: Vec<Vec<WarpWord>> = ids
            .iter()
            .map(|&id| test_waveform(id, a.samples as usize))
            .collect();
        prepare(&mut host, &emu, &data)?;
        for &mode in &modes {
            host.set_mode(mode);
            for &n in &a.nodes {
                for op in ["read", "write"] {
                    bar.set_message(format!(
                        "{} {op} {n} nodes, {links} host link(s)",
                        mode_name(mode)
                    ));
                    let (mean_ms, p99_ms) = measure(&mut host, op, n, &data, a.calls, a.samples)?;
                    rows.push(Row {
                        mode: mode_name(mode),
                        host_links: links,
                        nodes: n,
                        op,
                        samples: a.samples,
                        mean_ms,
                        p99_ms,
                        floor_ms: floor_ms(&a, n, links)?,
                    });
                    bar.inc(1);
                }
            }
        }
        let stats = host.stats().clone();
        if stats.rerequests + stats.write_retries + stats.stale_replies > 0 {
            eprintln!("host counters with {links} host link(s): {stats:?}");
        }
    }
    bar.finish_and_clear();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    write_csv(&a.out.join("warp_bench.csv"), &rows)?;
    plot(&a.out.join("warp_bench.svg"), &rows)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
        println!(
            "\nwrote {} and {}",
            a.out.join("warp_bench.csv").display(),
            a.out.join("warp_bench.svg").display()
        );
    }
    Ok(())
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Parallel => "parallel",
        Mode::Serial => "serial",
    }
}

/// Fill every node's TX and RX buffers once so reads return known data.
fn prepare(
    host: &mut WarpHost,
    emu: &radiohost_warp::emulator::Emulator,
    data: &[Vec<WarpWord>],
) -> Result<()> {
    let idx: Vec<usize> = (0..data.len()).collect();
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
    host.write_iq(&idx, RfBuffer::A, 0, &refs)?;
    emu.with_nodes(|nodes| nodes.iter_mut().for_each(|n| n.trigger()));
    let back = host.read_iq(&idx, RfBuffer::A, 0, data[0].len() as u32)?;
    for (i, (got, sent)) in back.iter().zip(data).enumerate() {
        ensure!(
            got.iter().zip(sent).all(|(g, s)| *g == s.tx_to_rx()),
            "node {i} returned different samples than were written"
        );
    }
    Ok(())
}

fn measure(
    host: &mut WarpHost,
    op: &str,
    n: u16,
    data: &[Vec<WarpWord>],
    calls: u32,
    samples: u32,
) -> Result<(f64, f64)> {
    let idx: Vec<usize> = (0..n as usize).collect();
    let refs: Vec<&[WarpWord]> = data[..n as usize].iter().map(|d| d.as_slice()).collect();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let warmup = 5.min(calls);
    for call in 0..warmup + calls {
        let t = Instant::now();
        if op == "read" {
            host.read_iq(&idx, RfBuffer::A, 0, samples)?;
        } else {
            host.write_iq(&idx, RfBuffer::A, 0, &refs)?;
        }
        if call >= warmup {
            hist.saturating_record(t.elapsed().as_micros() as u64);
        }
    }
    Ok((hist.mean() / 1e3, hist.value_at_quantile(0.99) as f64 / 1e3))
}

fn floor_ms(a: &BenchArgs, nodes: u16, links: u8) -> Result<f64> {
    let payload = a.net.payload();
    let per = payload.samples_per_packet() as u64;
    let packets = (a.samples as u64).div_ceil(per);
    let bytes = a.samples as u64 * 4
        + packets
            * (radiohost_warp::wire::SAMPLE_PACKET_OVERHEAD + FramePayload::WIRE_OVERHEAD) as u64;
    let node_rate = parse_rate(&a.links.link_rate)?;
    let host_rate = parse_rate(&a.links.host_link_rate)? * links as f64;
    let node_s = bytes as f64 * 8.0 / node_rate;
    let host_s = bytes as f64 * 8.0 * nodes as f64 / host_rate;
    Ok(node_s.max(host_s) * 1e3)
}

fn print_table(rows: &[Row]) {
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
    let find = |mode: &str, links: u8, nodes: u16, op: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.host_links == links && r.nodes == nodes && r.op == op)
    };
    let mut links: Vec<u8> = rows.iter().map(|r| r.host_links).collect();
    links.dedup();
    let min_n = rows.iter().map(|r| r.nodes).min().unwrap_or(1);
    let max_n = rows.iter().map(|r| r.nodes).max().unwrap_or(1);
    println!();
    for l in links {
        for op in ["read", "write"] {
            if let (Some(one), Some(many)) = (
                find("parallel", l, min_n, op),
                find("parallel", l, max_n, op),
            ) {
                print!(
                    "{op:>5}, {l} host link(s): parallel {max_n} nodes / {min_n} node = {:.2}x",
                    many.mean_ms / one.mean_ms
                );
                if let Some(serial) = find("serial", l, max_n, op) {
                    print!(
                        "; serial / parallel at {max_n} nodes = {:.1}x",
                        serial.mean_ms / many.mean_ms
                    );
                }
                println!();
            }
        }
    }
}

fn write_csv(path: &std::path::Path, rows: &[Row]) -> Result<()> {
    let mut text = String::from("mode,host_links,nodes,op,samples,mean_ms,p99_ms,floor_ms\n");
    for r in rows {
        text += &format!(
            "{},{},{},{},{},{:.4},{:.4},{:.4}\n",
            r.mode, r.host_links, r.nodes, r.op, r.samples, r.mean_ms, r.p99_ms, r.floor_ms
        );
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn plot(path: &std::path::Path, rows: &[Row]) -> Result<()> {
    use plotters::prelude::*;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_n = rows.iter().map(|r| r.nodes).max().unwrap_or(1) as f64;
    let max_ms = rows.iter().map(|r| r.mean_ms).fold(0.1, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "WARPLab buffer transport: mean latency vs nodes",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_n + 1.0, 0.0..max_ms)?;
    chart
        .configure_mesh()
        .x_desc("nodes")
        .y_desc("mean latency (ms)")
        .draw()?;
    let mut series: Vec<(&str, u8, &str)> =
        rows.iter().map(|r| (r.mode, r.host_links, r.op)).collect();
    series.sort();
    series.dedup();
    for (k, (mode, links, op)) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.mode == *mode && r.host_links == *links && r.op == *op)
            .map(|r| (r.nodes as f64, r.mean_ms))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
            .label(format!("{mode} {op}, {links} host link(s)"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
