//! `radiohost`: the command-line front end. Each area lives in its own module
//! with a clap `Subcommand` enum and a `run` function; `main` only dispatches.

mod chanemu;
mod chdr;
mod demo;
mod gpu;
mod phy;
mod plot;
mod pmt;
mod relay;
mod rt;
mod station;
mod table;
mod testbed_cmd;
mod ui;
mod warp;

use std::io::Write;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "radiohost",
    version,
    about = "Host-side software for software-defined-radio deployments",
    long_about = "radiohost moves IQ samples to and from many radios, processes them under \
deadlines and delivers the results to many receivers. With no hardware attached it runs \
a virtual testbed of emulated nodes, links and users."
)]
struct Cli {
    /// Log filter (tracing env-filter syntax), e.g. `info` or `radiohost_warp=debug`.
    #[arg(long, global = true, env = "RADIOHOST_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// CHDR streaming: emulated streaming radio, host pass-through streamer, live channel emulator.
    #[command(subcommand)]
    Chdr(chdr::ChdrCmd),
    /// Channel emulation by UPOLS convolution: offline on SigMF recordings, and its benchmark.
    #[command(subcommand)]
    Chanemu(chanemu::ChanemuCmd),
    /// Walk the data path end to end on the virtual testbed (the main job).
    Demo(demo::DemoArgs),
    /// Point-to-multipoint transport: send one object to many receivers over unequal
    /// lossy links (PMT), and compare with multicast and TCP baselines.
    #[command(subcommand)]
    Pmt(pmt::PmtCmd),
    /// WARPLab-compatible multi-radio IQ buffer transport.
    #[command(subcommand)]
    Warp(warp::WarpCmd),
    /// Virtual testbed tools: emulated links between real endpoints.
    #[command(subcommand)]
    Testbed(testbed_cmd::TestbedCmd),
    /// Real-time layer: machine audit, latency probes, cyclictest comparison.
    #[command(subcommand)]
    Rt(rt::RtCmd),
    /// Cooperative relay: source -> relays -> destination with timed TX; on-time
    /// fraction versus delta, idle or loaded, normal or real-time.
    #[command(subcommand)]
    Relay(relay::RelayCmd),
    /// Massive-MIMO baseband: LDPC on files, data generator, reference uplink and
    /// downlink pipelines, kernel benchmarks.
    #[command(subcommand)]
    Phy(phy::PhyCmd),
    /// Massive-MIMO baseband engine: radio units, CPU executors and deadline-aware
    /// schedulers (LROC and frame/symbol/task baselines); run, bench, simulate.
    #[command(subcommand)]
    Station(station::StationCmd),
    /// GPU executors: CUDA driver and NVRTC status, kernel compilation, executor
    /// descriptions (SMs per opcode), GPU-vs-CPU self-test and kernel benchmark.
    #[command(subcommand)]
    Gpu(gpu::GpuCmd),
}

fn main() {
    ui::quiet_broken_pipe();
    let cli = Cli::parse_from(ui::attach_negative_values(std::env::args_os()));
    let outcome = std::panic::catch_unwind(|| run(cli));
    let code = match outcome {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            let (code, line) = ui::exit_for(&e);
            if let Some(line) = line {
                // Not `eprintln!`: with stderr closed (`2>&1 | head`) it would panic
                // here, outside the catch above, and exit 101 instead of `code`.
                let _ = writeln!(std::io::stderr(), "error: {line}");
            }
            code
        }
        Err(payload) if ui::is_broken_pipe_panic(ui::panic_text(&*payload)) => ui::EXIT_BROKEN_PIPE,
        Err(payload) => std::panic::resume_unwind(payload),
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log)
                .map_err(|e| ui::usage(format!("--log {:?}: {e}", cli.log)))?,
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Chdr(cmd) => chdr::run(cmd),
        Command::Chanemu(cmd) => chanemu::run(cmd),
        Command::Demo(a) => demo::run(a),
        Command::Pmt(cmd) => pmt::run(cmd),
        Command::Warp(cmd) => warp::run(cmd),
        Command::Testbed(cmd) => testbed_cmd::run(cmd),
        Command::Rt(cmd) => rt::run(cmd),
        Command::Relay(cmd) => relay::run(cmd),
        Command::Phy(cmd) => phy::run(cmd),
        Command::Station(cmd) => station::run(cmd),
        Command::Gpu(cmd) => gpu::run(cmd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command and option in the `--help` tree, as `radiohost a b --opt`.
    fn walk(cmd: &clap::Command, path: &str, found: &mut Vec<(String, Option<String>)>) {
        let here = format!("{path} {}", cmd.get_name());
        let about = cmd.get_about().map(|s| s.to_string());
        found.push((here.clone(), about));
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            let name = match arg.get_long() {
                Some(l) => format!("{here} --{l}"),
                None => format!("{here} <{id}>"),
            };
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|s| s.to_string());
            found.push((name, help));
        }
        for sub in cmd.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, &here, found);
            }
        }
    }

    #[test]
    fn every_command_and_option_has_help() {
        let mut found = Vec::new();
        walk(&Cli::command(), "", &mut found);
        let missing: Vec<&str> = found
            .iter()
            .filter(|(_, help)| help.as_deref().is_none_or(|h| h.trim().is_empty()))
            .map(|(name, _)| name.as_str())
            .collect();
        assert!(found.len() > 100, "walked only {} entries", found.len());
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    /// Options holding a quantity name its unit in their help (docs/CLI.md).
    #[test]
    fn quantity_options_name_their_unit() {
        let mut found = Vec::new();
        walk(&Cli::command(), "", &mut found);
        let quantity = [
            "duration", "period", "delay", "deadline", "timeout", "interval",
        ];
        let units = ["ns", "us", "ms", "min", "second", "unit"];
        // "30s", "1.5s": a number with the seconds unit.
        let seconds = |h: &str| {
            let b = h.as_bytes();
            b.windows(2).any(|w| w[0].is_ascii_digit() && w[1] == b's')
        };
        let silent: Vec<&str> = found
            .iter()
            .filter(|(name, _)| {
                let opt = name.rsplit(' ').next().unwrap_or("");
                opt.starts_with("--") && quantity.iter().any(|q| opt.contains(q))
            })
            .filter(|(_, help)| {
                let h = help.as_deref().unwrap_or("");
                !units.iter().any(|u| h.contains(u)) && !seconds(h)
            })
            .map(|(name, _)| name.as_str())
            .collect();
        assert!(
            silent.is_empty(),
            "duration options without a unit in their help: {silent:#?}"
        );
    }
}
