//! `radiohost chdr bench`: prints radiohost_chdr::bench (loopback pass-through,
//! busy-poll against the blocking-receive baseline, beside a single-thread floor).

use anyhow::Result;
use clap::Args;
use radiohost_chdr::bench::{run_bench, BenchConfig, STEPS};
use radiohost_testbed::units;

use super::report;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Sample rate of the emulated radio (S/s, kS/s, MS/s; e.g. 10MS/s).
    #[arg(long, default_value = "10MS/s", value_parser = units::parse_sample_rate)]
    rate: f64,
    /// Samples per packet, 1 to 16000.
    #[arg(long, default_value_t = 512, value_parser = crate::ui::count_in::<usize>(1, 16_000))]
    spp: usize,
    /// Packets per mode, 1 to 100000000.
    #[arg(long, default_value_t = 20000, value_parser = crate::ui::count_in::<u64>(1, 100_000_000))]
    packets: u64,
    /// Pin the streamer to this CPU (busy-poll run).
    #[arg(long)]
    cpu: Option<usize>,
    /// Pin the emulated radio to this CPU.
    #[arg(long)]
    radio_cpu: Option<usize>,
    /// SCHED_FIFO priority for the streamer and radio threads in both runs
    /// (1-99; needs CAP_SYS_NICE).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=99))]
    rt_priority: Option<i32>,
    /// Write the busy-poll run's histograms as SVG: to FILE, or into DIR (an existing
    /// directory or a path ending in `/`) as chdr_bench.svg.
    #[arg(long, value_name = "FILE|DIR", value_parser = |s: &str| crate::ui::SvgOut::new(std::path::Path::new(s)).map_err(|e| e.to_string()))]
    svg: Option<crate::ui::SvgOut>,
    /// Print JSON rows instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let config = BenchConfig {
        rate_sps: a.rate,
        samples_per_packet: a.spp,
        packets: a.packets,
        cpu: a.cpu,
        radio_cpu: a.radio_cpu,
        rt_priority: a.rt_priority,
    };
    let bar = crate::ui::Progress::new("chdr bench", STEPS, !a.json);
    let r = run_bench(&config, |step| bar.begin(step))?;
    drop(bar);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r.rows)?);
    } else {
        println!(
            "chdr pass-through bench: {} packets of {} samples at {:.1} MSa/s per mode, loopback UDP; \
             RX->TX = kernel RX timestamp -> TX sendmmsg returned",
            a.packets,
            a.spp,
            a.rate / 1e6
        );
        println!(
            "  {:<46} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
            "RX->TX per packet (us)",
            "packets",
            "median",
            "p99",
            "p99.9",
            "max",
            "/block",
            "/floor"
        );
        for r in &r.rows {
            println!(
                "  {:<46} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.2} {:>8.2}",
                r.name,
                r.packets,
                r.median_ns as f64 / 1e3,
                r.p99_ns as f64 / 1e3,
                r.p999_ns as f64 / 1e3,
                r.max_ns as f64 / 1e3,
                r.vs_blocking,
                r.vs_floor
            );
        }
        let busy = &r.busy;
        println!(
            "  (end-to-end includes the {:.2} us packet duration; busy-poll pinned: {:?}{})",
            busy.radio.packet_duration_ns as f64 / 1e3,
            busy.streamer.pinned_cpu,
            busy.streamer
                .pin_error
                .as_deref()
                .map(|e| format!(", {e}"))
                .unwrap_or_default()
        );
        for (name, s) in [("blocking", &r.blocking), ("busy-poll", busy)] {
            print!("  {name}: ");
            report::print_counts(&s.streamer, Some(&s.radio));
        }
    }
    if let Some(svg) = &a.svg {
        report::plot(
            &svg.path("chdr_bench", false),
            "chdr pass-through, busy-poll",
            &r.busy.streamer.rx_to_tx_hist,
            Some(&r.busy.radio.end_to_end_hist),
        )?;
    }
    Ok(())
}
