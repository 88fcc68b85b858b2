//! `radiohost relay`: the cooperative relay on the virtual testbed. A source's
//! burst reaches two relays; each relay host schedules its copy at RX
//! timestamp + delta through timed TX; the destination classifies every copy.
//! The on-time fraction against delta, idle and loaded, with and without
//! real-time thread setup, says which delta a deployment can rely on.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_relay::air::LatePolicy;
use radiohost_relay::sweep::{measure, recommended_delta, Condition, SweepConfig, SweepRow};
use radiohost_testbed::link::LinkConfigError;
use radiohost_testbed::{units, LinkConfig};

use crate::plot::{self, Axis, LineChart, Series};
use crate::table::Table;
use crate::ui::{self, with_progress};

/// `radiohost relay ...`
#[derive(Subcommand)]
pub enum RelayCmd {
    /// Source -> relays -> destination with emulated radios and links: each
    /// relay retransmits at RX timestamp + delta through timed TX, the
    /// destination classifies each copy (on time / late / missing). Reports
    /// the on-time fraction per delta, idle or loaded, normal or real-time.
    Run(RunArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LatePolicyArg {
    /// The radio transmits a late copy as soon as it arrives (shows how late).
    Send,
    /// The radio drops a late copy (UHD's behaviour): it is missing.
    Drop,
}

#[derive(Args)]
pub struct RunArgs {
    /// Retransmission delay after the burst's RX timestamp (ns, us, ms, s; e.g. 200us).
    #[arg(long, value_parser = units::parse_duration, conflicts_with = "deltas")]
    delta: Option<Duration>,
    /// Sweep several deltas, comma-separated (e.g. 50us,100us,200us,400us,800us).
    #[arg(long, value_delimiter = ',', value_parser = units::parse_duration)]
    deltas: Vec<Duration>,
    /// Bursts per run (per delta and condition), 1 to 100000000.
    #[arg(long, default_value_t = 10_000, value_parser = crate::ui::count_in::<u64>(1, 100_000_000))]
    bursts: u64,
    /// Time between the source's bursts (ns, us, ms, s).
    #[arg(long, default_value = "500us", value_parser = units::parse_positive_duration)]
    period: Duration,
    /// Sample rate of the emulated radios (S/s, kS/s, MS/s; e.g. 10MS/s).
    #[arg(long, default_value = "10MS/s",
          value_parser = ui::within(units::parse_sample_rate, 1.0, 1e9, "1S/s..=1GS/s"))]
    rate: f64,
    /// Samples per burst (one CHDR packet of at most 16000 samples; 200 at 10 Msps = 20 us).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(1..=16_000))]
    burst_samples: u16,
    /// A copy is on time if it arrives within this of its intended time
    /// (ns, us, ms, s; 0us = exact).
    #[arg(long, default_value = "1us", value_parser = units::parse_duration)]
    tolerance: Duration,
    /// A copy not seen this long after its intended time is missing (ns, us, ms, s).
    #[arg(long, default_value = "2ms", value_parser = units::parse_positive_duration)]
    deadline: Duration,
    /// What a relay radio does with a copy that reaches it after its TX time.
    #[arg(long, value_enum, default_value = "send")]
    late_policy: LatePolicyArg,
    /// Emulated link for every hop (testbed link spec, e.g. `delay=5us,1%`);
    /// each hop gets its own random seed.
    #[arg(long, default_value = "delay=5us", value_parser = parse_link)]
    link: LinkConfig,
    /// Number of relays.
    #[arg(long, default_value_t = 2,
          value_parser = clap::value_parser!(u8).range(1..=radiohost_relay::MAX_RELAYS as i64))]
    relays: u8,
    /// Run under the built-in background load (a separate `radiohost rt load`
    /// process shaped like a parallel kernel build).
    #[arg(long)]
    load: bool,
    /// Configure the relay host threads for real time (SCHED_FIFO, mlockall,
    /// prefaulted stack); refusals are reported, the run goes on.
    #[arg(long)]
    rt: bool,
    /// Run all four conditions: idle and loaded, normal and real-time.
    #[arg(long, conflicts_with_all = ["load", "rt"])]
    compare: bool,
    /// SCHED_FIFO priority of the relay hosts with --rt, 1 to 99.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(i32).range(1..=99))]
    priority: i32,
    /// Pin the relay host threads to these CPUs (kernel list syntax, e.g. 1 or 2-3).
    #[arg(long, value_parser = crate::rt::parse_cpus)]
    cpu: Option<crate::rt::Cpus>,
    /// Relay hosts spin on their sockets instead of sleeping (one busy core each).
    #[arg(long)]
    busy_poll: bool,
    /// Smallest on-time fraction (percent, 0 to 100) a delta must reach to be recommended.
    #[arg(long, default_value_t = 99.9, value_parser = ui::f64_in(0.0, 100.0))]
    target: f64,
    /// Print JSON rows instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the on-time-vs-delta curve as SVG (FILE, or DIR for DIR/relay_on_time.svg).
    #[arg(long)]
    svg: Option<PathBuf>,
}

pub fn run(cmd: RelayCmd) -> Result<()> {
    match cmd {
        RelayCmd::Run(a) => run_cmd(a),
    }
}

/// A testbed link spec, read when the command line is parsed.
fn parse_link(spec: &str) -> Result<LinkConfig, LinkConfigError> {
    LinkConfig::parse(spec)
}

/// The sweep's settings and its conditions, from the arguments.
fn plan(a: &RunArgs) -> Result<(SweepConfig, Vec<Condition>)> {
    let link = a.link.clone();
    let mut deltas = a.deltas.clone();
    deltas.extend(a.delta);
    let cfg = SweepConfig {
        rate_sps: a.rate.round() as u64,
        burst_samples: usize::from(a.burst_samples),
        period: a.period,
        bursts: a.bursts,
        tolerance: a.tolerance,
        deadline: a.deadline,
        late_policy: match a.late_policy {
            LatePolicyArg::Send => LatePolicy::Send,
            LatePolicyArg::Drop => LatePolicy::Drop,
        },
        link,
        relays: usize::from(a.relays),
        deltas,
        priority: a.priority,
        relay_cpus: a.cpu.clone().map(|c| c.0),
        busy_poll: a.busy_poll,
    };
    let conditions = if a.compare {
        Condition::ALL.to_vec()
    } else {
        vec![Condition {
            load: a.load,
            rt: a.rt,
        }]
    };
    Ok((cfg, conditions))
}

fn run_cmd(a: RunArgs) -> Result<()> {
    let (cfg, conditions) = plan(&a)?;
    cfg.validate().map_err(|e| ui::usage(e.to_string()))?;
    let svg = a.svg.as_deref().map(ui::SvgOut::new).transpose()?;
    let stop = ui::stop_flag();
    let planned = conditions.len() * cfg.deltas().len();
    let mut rows = Vec::new();
    for c in conditions {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let (results, load_stats) = crate::rt::under_load(
            c.load,
            cfg.condition_bound(),
            || -> Result<Vec<SweepRow>> {
                let mut out = Vec::new();
                for delta in cfg.deltas() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let label = format!("{} delta {}us", c.label(), delta.as_micros());
                    let bursts = Arc::new(AtomicU64::new(0));
                    let (counter, run) = (|| bursts.load(Ordering::Relaxed), bursts.clone());
                    out.push(with_progress(&label, cfg.bursts, !a.json, counter, || {
                        measure(&cfg, delta, c, run)
                    })?);
                }
                Ok(out)
            },
        )?;
        let results = results?;
        if let Some(s) = load_stats {
            tracing::info!(?s, "background load");
            if s.cpu_blocks == 0 {
                bail!("the background load did no work: the loaded figures would be idle ones");
            }
        }
        rows.extend(results);
    }
    let partial = rows.len() < planned;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_rows(&rows, a.target);
        if partial {
            println!(
                "PARTIAL: {} of {planned} runs done when interrupted",
                rows.len()
            );
        }
    }
    if let (Some(svg), false) = (&svg, rows.is_empty()) {
        let path = svg.path("relay_on_time", false);
        on_time_svg(&path, &rows, a.target)?;
        if !a.json {
            println!("plot written to {}", path.display());
        }
    }
    ui::partial_if_interrupted(|| format!("{} of {planned} runs done", rows.len()))
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn print_rows(rows: &[SweepRow], target: f64) {
    let t = Table::new("<14 >7.0 >8 >9.3 >6 >7 >9.3 >24 >10.1 >10");
    t.header("condition|delta|bursts|on time|late|missing|any copy|host rx->tx p50/p99.9/max|hand-over|late max");
    t.header("|us||%|||on time %|us|p99.9 us|us");
    for r in rows {
        let rep = &r.report;
        let (p50, p999, max) = r.slowest_host();
        let pct = |n: u64| 100.0 * n as f64 / r.bursts.max(1) as f64;
        let host = format!("{:.1}/{:.1}/{:.1}", us(p50), us(p999), us(max));
        let late_max = rep.air.max_offset_ns.filter(|&o| o > 0);
        let late_max = late_max.map_or("-".to_string(), |o| format!("{:.1}", o as f64 / 1000.0));
        t.row(&[
            &r.condition().label(),
            &r.delta_us,
            &r.bursts,
            &pct(r.on_time),
            &r.late,
            &r.missing,
            &pct(r.any_on_time),
            &host,
            &us(rep.emit_lag.p999_ns),
            &late_max,
        ]);
    }
    println!();
    // Where each relay's copies went: late ones, and one cause per missing one.
    let notes: Vec<String> = rows.iter().flat_map(SweepRow::notes).collect();
    if !notes.is_empty() {
        println!("copies sent late by the relay radios, and why copies were missing:");
        for l in notes {
            println!("  {l}");
        }
        println!();
    }
    // Thread setup as the kernel reports it.
    let mut seen = std::collections::BTreeSet::new();
    for r in rows {
        let key = (r.rt, r.relay_setup.clone(), r.air_setup.clone());
        if seen.insert(key) {
            println!(
                "{}: relay hosts {}, emulated radios {}",
                if r.rt { "rt" } else { "normal" },
                r.relay_setup,
                r.air_setup
            );
            let problems = r.report.hosts[0]
                .setup
                .problems()
                .chain(r.report.air_setup.problems());
            for p in problems {
                println!("  {}: {:?}", p.step, p.outcome);
            }
        }
    }
    println!();
    let mut conditions: Vec<Condition> = rows.iter().map(SweepRow::condition).collect();
    conditions.dedup();
    for c in conditions {
        match recommended_delta(rows, c, target) {
            Some(best) => println!(
                "{}: smallest delta with >= {target}% of bursts on time: {best:.0} us",
                c.label()
            ),
            None => println!(
                "{}: no delta tried reached {target}% on time; try larger ones",
                c.label()
            ),
        }
    }
}

/// Bursts not on time (%) against delta, both log scales: the tail that
/// decides a deployment (99.9% on time = 0.1% not) stays readable.
fn on_time_svg(path: &Path, rows: &[SweepRow], target: f64) -> Result<()> {
    let lo = rows
        .iter()
        .map(|r| r.delta_us)
        .fold(f64::INFINITY, f64::min);
    let hi = rows.iter().map(|r| r.delta_us).fold(0.0, f64::max);
    if !lo.is_finite() {
        bail!("nothing to plot");
    }
    // Floor: half a burst of the largest run (a run with none missed sits there).
    let bursts = rows.iter().map(|r| r.bursts).max().unwrap_or(1).max(1);
    let floor = 50.0 / bursts as f64;
    let (lo, hi) = (lo / 1.3, (hi * 1.3).max(lo * 2.0));
    let mut chart = LineChart::new(
        "cooperative relay: bursts not on time vs delta",
        Axis::log("delta after RX timestamp (us, log)", lo..hi),
        Axis::log(
            format!("bursts not on time (%, log; {floor:.3} = none of {bursts})"),
            floor.min(100.0 - target) * 0.8..150.0,
        ),
    );
    let miss_target = vec![(lo, 100.0 - target), (hi, 100.0 - target)];
    let label = format!("target: {target}% on time");
    chart.push(
        Series::new(label, miss_target, plot::color(7))
            .width(1)
            .markers(0)
            .opacity(0.5),
    );
    let mut conditions: Vec<Condition> = rows.iter().map(SweepRow::condition).collect();
    conditions.dedup();
    for (i, c) in conditions.into_iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.condition() == c)
            .map(|r| (r.delta_us, (100.0 * (1.0 - r.on_time_fraction)).max(floor)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart.push(Series::new(c.label(), pts, plot::color(i)));
    }
    chart.legend = plotters::prelude::SeriesLabelPosition::UpperRight;
    chart.write(path, (900, 540))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: RelayCmd,
    }

    fn args(line: &str) -> Result<RunArgs, clap::Error> {
        let argv = std::iter::once("relay").chain(line.split_whitespace());
        Cli::try_parse_from(argv).map(|c| match c.cmd {
            RelayCmd::Run(a) => a,
        })
    }

    #[test]
    fn sweep_and_conditions_follow_the_flags() {
        let a = args("run --deltas 50us,100us --bursts 10 --compare").unwrap();
        let (p, conditions) = plan(&a).unwrap();
        assert_eq!(
            p.deltas(),
            vec![Duration::from_micros(50), Duration::from_micros(100)]
        );
        assert_eq!(conditions, Condition::ALL.to_vec());
        let air = p.air(Duration::from_micros(50));
        assert_eq!(air.tolerance_ticks, 10);
        assert_eq!(air.period_ticks, 5_000);
        let (p, conditions) = plan(&args("run --delta 300us --load").unwrap()).unwrap();
        assert_eq!(p.deltas(), vec![Duration::from_micros(300)]);
        assert_eq!(
            conditions,
            vec![Condition {
                load: true,
                rt: false
            }]
        );
        assert!(args("run --delta 1ms --deltas 2ms").is_err());
        assert!(args("run --compare --rt").is_err());
        assert!(args("run --rate 10M").is_ok());
        assert!(
            args("run --period 500").is_err(),
            "a bare number has no unit"
        );
        let Err(e) = args("run --link nonsense=1") else {
            panic!("a bad link spec was accepted");
        };
        assert!(e.to_string().contains("unknown item"), "{e}");
        let Err(e) = args("run --relays 9") else {
            panic!("9 relays were accepted");
        };
        assert!(e.to_string().contains("1..=8"), "{e}");
        let (p, _) = plan(&args("run --delta 10us").unwrap()).unwrap();
        assert!(p.validate().is_err(), "a delta shorter than the burst");
    }
}
