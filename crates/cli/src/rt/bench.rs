//! `radiohost rt bench`: the timer probe against cyclictest, back to back.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use radiohost_rt::clock::{clock_read_cost_ns, ClockId};
use radiohost_rt::cyclictest::{self, CyclictestRun};
use radiohost_rt::pmqos::CpuDmaLatency;
use radiohost_rt::probe::timer::TimerProbe;
use radiohost_rt::probe::ProbeControl;
use radiohost_rt::sys::single_cpu;
use radiohost_rt::versus::{alternate, VersusReport};

use radiohost_testbed::units;

use super::{print_rows, under_load, ThreadArgs};
use crate::ui::{self, with_progress};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    thread: ThreadArgs,
    /// Wake-up period (ns, us, ms, s; 10us to 10s, e.g. 1ms).
    #[arg(long, default_value = "1ms", value_parser = super::interval_arg())]
    interval: Duration,
    /// Length of each run (four runs: probe and cyclictest, idle and loaded;
    /// ns, us, ms, s, min; 1ms to 24h).
    #[arg(long, default_value = "10s", value_parser = super::run_length_arg())]
    duration: Duration,
    /// Alternate the tools this many times (each run lasts duration/rounds).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Skip the loaded pair.
    #[arg(long)]
    idle_only: bool,
    /// Hold /dev/cpu_dma_latency at this latency in both tools' runs, e.g.
    /// 10us (default: neither touches power management).
    #[arg(long, value_parser = units::parse_duration)]
    pm_qos: Option<Duration>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    if !cyclictest::available() {
        bail!("cyclictest not found: install it with `apt-get install -y rt-tests`");
    }
    let mut thread = a.thread.clone();
    let cpu = single_cpu(thread.cpu.as_ref().map(|c| c.0.as_slice()))?;
    thread.cpu = Some(super::Cpus(vec![cpu]));
    let cfg = thread.config();
    cfg.validate()?;
    let pm_qos_us = a.pm_qos.map(super::whole_us);
    let _pm = match pm_qos_us {
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
        pm_qos_us,
    };
    let loads: &[bool] = if a.idle_only {
        &[false]
    } else {
        &[false, true]
    };
    let mut out = VersusReport::new(&ct, clock_read_cost_ns(ClockId::Monotonic, 10_000));
    let stop = ui::stop_flag();
    let mut done = Vec::new();
    for &loaded in loads {
        if ui::interrupted() {
            break;
        }
        let load = if loaded { "loaded" } else { "idle" };
        // One load instance for the whole alternating sequence, so both tools
        // see the same background.
        let (pair, _) = under_load(loaded, a.duration * 2 + Duration::from_secs(2), || {
            alternate(&probe, &ct, a.rounds, &stop, |probe, r| {
                let control = ProbeControl::default();
                let label = format!("radiohost {load} {}/{}", r + 1, a.rounds);
                // Ctrl-C stops the probe early; it returns the samples it has.
                let progress = || {
                    if ui::interrupted() {
                        control.stop();
                    }
                    control.samples()
                };
                with_progress(&label, probe.samples, !a.json, progress, || {
                    probe.run(&control)
                })
            })
        })?;
        let pair = pair?;
        if !a.json {
            for p in pair.report.problems() {
                eprintln!("warning: probe thread {}: {:?}", p.step, p.outcome);
            }
            if pair.gaps > 0 {
                eprintln!(
                    "note: {} cyclictest samples lost from its verbose output",
                    pair.gaps
                );
            }
        }
        out.add(load, &ct, &pair);
        done.push(load);
    }
    let partial = || {
        format!(
            "loads measured: {} (the last one cut short)",
            if done.is_empty() {
                "none".to_string()
            } else {
                done.join(", ")
            }
        )
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return ui::partial_if_interrupted(partial);
    }
    println!(
        "cpu {cpu}, interval {:?}, {:?} per tool and load, in {} alternating rounds",
        a.interval, a.duration, a.rounds
    );
    println!("cyclictest: {}", out.cyclictest_cmdline);
    println!("\nradiohost timer probe:");
    print_rows(&out.rows_of("radiohost"));
    println!("\ncyclictest:");
    print_rows(&out.rows_of("cyclictest"));
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
    ui::partial_if_interrupted(partial)
}
