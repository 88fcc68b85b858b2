//! `radiohost pmt compare`: PMT, slowest-receiver multicast and kernel TCP Reno over
//! the same emulated links (loss on both directions). PMT and multicast run in the
//! simulated network in virtual time; TCP runs in real time through TUN devices.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use radiohost_pmt::sim::{run_multicast, run_pmt, RunOutcome};
use radiohost_pmt::tcp::run_tcp;
use radiohost_pmt::SenderConfig;
use radiohost_testbed::link::{CapacityChange, LinkConfig};
use radiohost_testbed::units::{parse_duration, parse_rate, parse_size};
use serde::Serialize;

#[derive(Args)]
pub struct CompareArgs {
    /// Object size (B, KB, MB, KiB, MiB).
    #[arg(long, default_value = "1MB")]
    size: String,
    /// One link spec per receiver, `;`-separated (testbed syntax: rate, loss%,
    /// delay=, ge=, reorder=, dup=, queue=). Both directions use the spec.
    #[arg(long, default_value = "1Mbit,1%;250kbit,20%")]
    links: String,
    /// Capacity changes: `[LINK:]TIME=RATE,...`, `;` between links; LINK is the
    /// receiver index (default 0). Example: "0:10s=700kbit,20s=500kbit".
    #[arg(long)]
    capacity_schedule: Option<String>,
    /// Runs per protocol, seeds seed..seed+runs.
    #[arg(long, default_value_t = 5)]
    runs: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Skip the kernel TCP baseline (it runs in real time and needs root).
    #[arg(long)]
    no_tcp: bool,
    /// Object size for the TCP runs (default: --size); real-time runs over slow
    /// lossy links take minutes each.
    #[arg(long)]
    tcp_size: Option<String>,
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
    /// Print one JSON row per protocol, receiver and run.
    #[arg(long)]
    json: bool,
    /// Also write the JSON rows to this file (with the human table on stdout).
    #[arg(long)]
    save_json: Option<PathBuf>,
}

#[derive(Serialize, Clone)]
pub struct Row {
    pub protocol: &'static str,
    pub receiver: usize,
    pub run: u64,
    pub bytes: u64,
    /// Completion time; null when unfinished (stopped at limit_factor x floor).
    pub seconds: Option<f64>,
    pub floor_seconds: f64,
    pub intact: bool,
}

fn parse_links(a: &CompareArgs) -> Result<Vec<LinkConfig>> {
    let mut links = a
        .links
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| LinkConfig::parse(s).with_context(|| format!("link spec {s:?}")))
        .collect::<Result<Vec<_>>>()?;
    if links.is_empty() {
        bail!("--links needs at least one link spec, e.g. \"1Mbit,1%;250kbit,20%\"");
    }
    if links.iter().any(|l| !l.rate_bps.is_finite()) {
        bail!("every link needs a finite rate (e.g. \"1Mbit\") so its floor is defined");
    }
    if let Some(sched) = &a.capacity_schedule {
        for part in sched.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (idx, changes) = match part.split_once(':') {
                Some((i, rest)) if !i.contains('=') => (
                    i.trim()
                        .parse::<usize>()
                        .with_context(|| format!("link index {i:?}"))?,
                    rest,
                ),
                _ => (0, part),
            };
            let link = links.get_mut(idx).with_context(|| {
                format!(
                    "capacity schedule names link {idx}, but there are {} links",
                    a.links.split(';').count()
                )
            })?;
            for c in changes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let (t, r) = c.split_once('=').with_context(|| {
                    format!("capacity change {c:?}: expected TIME=RATE, e.g. 10s=700kbit")
                })?;
                link.capacity_schedule.push(CapacityChange {
                    at: parse_duration(t)?,
                    rate_bps: parse_rate(r)?,
                });
            }
            link.capacity_schedule.sort_by_key(|c| c.at);
        }
    }
    Ok(links)
}

fn rows_of(protocol: &'static str, run: u64, out: &RunOutcome, limit: f64, rows: &mut Vec<Row>) {
    for (i, r) in out.receivers.iter().enumerate() {
        let finished = r.seconds.filter(|&s| s <= r.floor_seconds * limit);
        rows.push(Row {
            protocol,
            receiver: i,
            run,
            bytes: r.bytes,
            seconds: finished,
            floor_seconds: r.floor_seconds,
            intact: r.intact && finished.is_some(),
        });
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

pub fn run(a: CompareArgs) -> Result<()> {
    let links = parse_links(&a)?;
    let size = parse_size(&a.size)?;
    let tcp_size = a
        .tcp_size
        .as_deref()
        .map(parse_size)
        .transpose()?
        .unwrap_or(size);
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if a.limit_factor.is_nan() || a.limit_factor < 1.0 {
        bail!("--limit-factor must be at least 1");
    }
    let cfg = SenderConfig {
        window: a.window,
        groups: a.groups,
        ..Default::default()
    };
    let max_floor = links
        .iter()
        .map(|l| radiohost_pmt::sim::floor_seconds(l, size))
        .fold(0.0, f64::max);
    let limit = Duration::from_secs_f64(max_floor * a.limit_factor);
    let mut rows = Vec::new();
    let mut first: Vec<(&'static str, RunOutcome)> = Vec::new();
    let mut tcp_error = None;
    for run in 0..a.runs {
        let seed = a.seed + run;
        let pmt = run_pmt(size, &links, seed, cfg.clone(), limit)?;
        rows_of("pmt", run, &pmt, a.limit_factor, &mut rows);
        let mc = run_multicast(size, &links, seed, limit);
        rows_of("multicast", run, &mc, a.limit_factor, &mut rows);
        if run == 0 {
            first.push(("pmt", pmt));
            first.push(("multicast", mc));
        }
        if !a.no_tcp && tcp_error.is_none() {
            if !a.json {
                eprintln!(
                    "run {run}: kernel TCP Reno in real time (up to {:.0} s)...",
                    links
                        .iter()
                        .map(|l| radiohost_pmt::sim::floor_seconds(l, tcp_size))
                        .fold(0.0, f64::max)
                        * a.limit_factor
                );
            }
            match run_tcp(tcp_size, &links, seed, a.limit_factor, "reno") {
                Ok(tcp) => {
                    rows_of("tcp-reno", run, &tcp, a.limit_factor, &mut rows);
                    if run == 0 {
                        first.push(("tcp-reno", tcp));
                    }
                }
                Err(e) => {
                    eprintln!("kernel TCP baseline skipped: {e}");
                    tcp_error = Some(e.to_string());
                }
            }
        }
    }
    std::fs::create_dir_all(&a.plot_dir)
        .with_context(|| format!("creating {}", a.plot_dir.display()))?;
    let bytes_svg = a.plot_dir.join("bytes_vs_time.svg");
    let groups_svg = a.plot_dir.join("groups_vs_cwnd.svg");
    super::plot::bytes_vs_time(&bytes_svg, &first, &a.links)?;
    super::plot::groups_vs_cwnd(&groups_svg, &first)?;
    if let Some(p) = &a.save_json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    print_table(&rows, &links, size, tcp_size, a.limit_factor);
    println!("plots: {} {}", bytes_svg.display(), groups_svg.display());
    if let Some(e) = tcp_error {
        println!("note: TCP baseline not run: {e}");
    }
    Ok(())
}

fn print_table(rows: &[Row], links: &[LinkConfig], size: usize, tcp_size: usize, limit: f64) {
    println!(
        "{:>10} {:>4} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}",
        "protocol",
        "rx",
        "size",
        "median_s",
        "worst_s",
        "floor_s",
        "med/floor",
        "finished",
        "intact"
    );
    for proto in ["pmt", "multicast", "tcp-reno"] {
        for i in 0..links.len() {
            let rs: Vec<&Row> = rows
                .iter()
                .filter(|r| r.protocol == proto && r.receiver == i)
                .collect();
            if rs.is_empty() {
                continue;
            }
            let done: Vec<f64> = rs.iter().filter_map(|r| r.seconds).collect();
            let worst = if done.len() == rs.len() {
                done.iter().cloned().fold(0.0, f64::max)
            } else {
                f64::INFINITY
            };
            let med = median(
                rs.iter()
                    .map(|r| r.seconds.unwrap_or(f64::INFINITY))
                    .collect(),
            )
            .unwrap_or(f64::NAN);
            println!(
                "{:>10} {:>4} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.3} {:>5}/{:<2} {:>4}/{:<2}",
                proto,
                i,
                if proto == "tcp-reno" { tcp_size } else { size },
                med,
                worst,
                rs[0].floor_seconds,
                med / rs[0].floor_seconds,
                done.len(),
                rs.len(),
                rs.iter().filter(|r| r.intact).count(),
                rs.len()
            );
        }
    }
    println!("(unfinished = still going at {limit}x floor; inf = unfinished)");
    // The bars, evaluated on these rows.
    let fast = (0..links.len()).min_by(|&a, &b| {
        let fa = radiohost_pmt::sim::floor_seconds(&links[a], size);
        let fb = radiohost_pmt::sim::floor_seconds(&links[b], size);
        fa.total_cmp(&fb)
    });
    let lossy = (0..links.len()).max_by(|&a, &b| links[a].loss.total_cmp(&links[b].loss));
    if let (Some(f), Some(l)) = (fast, lossy) {
        if f == l {
            return;
        }
        let worst_ratio = |rx: usize| {
            rows.iter()
                .filter(|r| r.protocol == "pmt" && r.receiver == rx)
                .map(|r| r.seconds.map_or(f64::INFINITY, |s| s / r.floor_seconds))
                .fold(0.0, f64::max)
        };
        let all_intact = rows
            .iter()
            .filter(|r| r.protocol == "pmt")
            .all(|r| r.intact);
        println!("bars:");
        println!(
            "  PMT byte-exact on every receiver and run: {}",
            verdict(all_intact)
        );
        let wf = worst_ratio(f);
        println!(
            "  fast receiver {f} worst run {wf:.3}x floor (bar 1.15x): {}",
            verdict(wf <= 1.15)
        );
        let ws = worst_ratio(l);
        println!(
            "  slow receiver {l} worst run {ws:.3}x floor (bar 1.25x): {}",
            verdict(ws <= 1.25)
        );
        let pmt_worst = rows
            .iter()
            .filter(|r| r.protocol == "pmt" && r.receiver == l)
            .map(|r| r.seconds.map_or(f64::INFINITY, |s| s / r.floor_seconds))
            .fold(0.0, f64::max);
        let tcp: Vec<f64> = rows
            .iter()
            .filter(|r| r.protocol == "tcp-reno" && r.receiver == l)
            .map(|r| r.seconds.map_or(f64::INFINITY, |s| s / r.floor_seconds))
            .collect();
        if let Some(m) = median(tcp) {
            // Compared as multiples of each run's floor, since TCP may use a smaller size.
            println!(
                "  lossy link: PMT slowest run {pmt_worst:.3}x floor vs TCP Reno median {m:.3}x floor: {}",
                verdict(pmt_worst < m)
            );
        }
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}
