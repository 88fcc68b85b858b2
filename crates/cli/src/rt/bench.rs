//! `radiohost rt bench`: the timer probe against cyclictest, back to back.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use radiohost_rt::clock::{clock_read_cost_ns, ClockId};
use radiohost_rt::cyclictest::{self, CyclictestRun};
use radiohost_rt::pmqos::CpuDmaLatency;
use radiohost_rt::probe::timer::TimerProbe;
use radiohost_rt::probe::{effective_policy_label, LatencyRow, ProbeControl};
use radiohost_rt::{ApplyReport, LatencyHistogram};
use serde::Serialize;

use radiohost_testbed::units;

use super::{print_rows, under_load, with_progress, ThreadArgs};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    thread: ThreadArgs,
    /// Wake-up period (ns, us, ms, s; e.g. 1ms).
    #[arg(long, default_value = "1ms", value_parser = units::parse_positive_duration)]
    interval: Duration,
    /// Length of each run (four runs: probe and cyclictest, idle and loaded;
    /// ns, us, ms, s, min).
    #[arg(long, default_value = "10s", value_parser = units::parse_positive_duration)]
    duration: Duration,
    /// Alternate the tools this many times (each run lasts duration/rounds).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Skip the loaded pair.
    #[arg(long)]
    idle_only: bool,
    /// Hold /dev/cpu_dma_latency at this many µs in both tools' runs
    /// (default: neither touches power management).
    #[arg(long)]
    pm_qos_us: Option<u32>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ToolRow {
    tool: &'static str,
    #[serde(flatten)]
    row: LatencyRow,
}

#[derive(Serialize)]
struct Ratio {
    load: String,
    median_ratio: f64,
    p999_ratio: f64,
}

#[derive(Serialize)]
struct BenchOut {
    rows: Vec<ToolRow>,
    ratios: Vec<Ratio>,
    clock_read_ns: u64,
    cyclictest_cmdline: String,
}

pub fn run(a: BenchArgs) -> Result<()> {
    if !cyclictest::available() {
        bail!("cyclictest not found: install it with `apt-get install -y rt-tests`");
    }
    let mut thread = a.thread.clone();
    // Same CPU for both tools: default to the last allowed one (CPU 0 takes
    // most housekeeping).
    if thread.cpu.is_none() {
        let allowed = radiohost_rt::sys::current_affinity()?;
        thread.cpu = allowed.last().map(|&c| super::Cpus(vec![c]));
    }
    let Some(cpu) = thread.cpu.as_ref().and_then(|c| c.0.first().copied()) else {
        bail!("no CPU available to pin to");
    };
    if thread.cpu.as_ref().map_or(0, |c| c.0.len()) != 1 {
        bail!("bench needs exactly one CPU (--cpu N) so both tools run on the same one");
    }
    let cfg = thread.config();
    cfg.validate()?;
    let _pm = match a.pm_qos_us {
        Some(us) => Some(CpuDmaLatency::request(us)?),
        None => None,
    };
    let interval = a.interval;
    let probe = TimerProbe::for_duration(cfg.clone(), interval, a.duration / a.rounds);
    let ct = CyclictestRun {
        policy: cfg.policy,
        priority: cfg.priority,
        cpu: Some(cpu),
        interval,
        samples: probe.samples,
        lock_memory: cfg.lock_memory,
        pm_qos_us: a.pm_qos_us,
    };
    let loads: &[bool] = if a.idle_only {
        &[false]
    } else {
        &[false, true]
    };
    let mut out = BenchOut {
        rows: Vec::new(),
        ratios: Vec::new(),
        clock_read_ns: clock_read_cost_ns(ClockId::Monotonic, 10_000),
        cyclictest_cmdline: ct.cmdline(),
    };
    for &loaded in loads {
        let load = if loaded { "loaded" } else { "idle" };
        // One load instance for the whole alternating sequence, so both tools
        // see the same background; alternating short rounds spreads the
        // machine's own drift (other users, hypervisor) over both.
        let (pair, _) = under_load(loaded, a.duration * 2 + Duration::from_secs(2), || {
            alternate(&probe, &ct, a.rounds, load)
        })?;
        let (ours, theirs, report, gaps) = pair?;
        if !a.json {
            for p in report.problems() {
                eprintln!("warning: probe thread {}: {:?}", p.step, p.outcome);
            }
            if gaps > 0 {
                eprintln!("note: {gaps} cyclictest samples lost from its verbose output");
            }
        }
        let s_ours = ours.summary();
        let s_theirs = theirs.summary();
        let ratio = |a: u64, b: u64| {
            if b == 0 {
                f64::NAN
            } else {
                a as f64 / b as f64
            }
        };
        out.ratios.push(Ratio {
            load: load.into(),
            median_ratio: ratio(s_ours.median_ns, s_theirs.median_ns),
            p999_ratio: ratio(s_ours.p999_ns, s_theirs.p999_ns),
        });
        out.rows.push(ToolRow {
            tool: "radiohost",
            row: LatencyRow::new("timer", &effective_policy_label(&report), load, &s_ours),
        });
        let ct_policy = if cfg.policy.is_realtime() {
            format!("{}:{}", cfg.policy, cfg.priority)
        } else {
            cfg.policy.to_string()
        };
        out.rows.push(ToolRow {
            tool: "cyclictest",
            row: LatencyRow::new("timer", &ct_policy, load, &s_theirs),
        });
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "cpu {cpu}, interval {:?}, {:?} per tool and load, in {} alternating rounds",
        a.interval, a.duration, a.rounds
    );
    println!("cyclictest: {}", out.cyclictest_cmdline);
    println!("\nradiohost timer probe:");
    let pick = |tool: &str| -> Vec<LatencyRow> {
        out.rows
            .iter()
            .filter(|r| r.tool == tool)
            .map(|r| r.row.clone())
            .collect()
    };
    print_rows(&pick("radiohost"));
    println!("\ncyclictest:");
    print_rows(&pick("cyclictest"));
    println!("\nradiohost / cyclictest (1.0 = no overhead):");
    for r in &out.ratios {
        println!(
            "  {:<7} median {:.2}   p99.9 {:.2}",
            r.load, r.median_ratio, r.p999_ratio
        );
    }
    println!(
        "floor: one clock_gettime(CLOCK_MONOTONIC) costs {} ns here; a wake-up cannot be \
         measured finer than that",
        out.clock_read_ns
    );
    Ok(())
}

/// Runs the probe and cyclictest `rounds` times each, alternating, and merges
/// each tool's histograms. Returns ours, theirs, our thread's report and the
/// number of samples missing from cyclictest's output.
fn alternate(
    probe: &TimerProbe,
    ct: &CyclictestRun,
    rounds: u32,
    load: &str,
) -> Result<(LatencyHistogram, LatencyHistogram, ApplyReport, u64)> {
    let (mut ours, mut theirs, mut gaps) = (LatencyHistogram::new(), LatencyHistogram::new(), 0);
    let mut report = None;
    for r in 0..rounds {
        let control = ProbeControl::default();
        let label = format!("radiohost {load} {}/{rounds}", r + 1);
        let run = with_progress(&label, probe.samples, &control, || probe.run(&control))?;
        ours.merge(&run.histogram);
        report.get_or_insert(run.report);
        let parsed = ct.run()?;
        theirs.merge(&parsed.histogram);
        gaps += parsed.gaps;
    }
    let report = report.ok_or_else(|| anyhow::anyhow!("no rounds ran"))?;
    Ok((ours, theirs, report, gaps))
}
