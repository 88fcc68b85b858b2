//! `radiohost station`: the massive-MIMO baseband engine on real CPU executors
//! (`run`, `bench`) and, from the core engineer, the scheduling simulator.

mod bench;
mod calibrate;
mod common;
mod run;
mod simulate;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum StationCmd {
    /// Run the engine on this machine: radio units send frames over UDP or an
    /// in-process ring, CPU devices decode them under one policy (or several, one
    /// after the other); prints latency, throughput, misses and a per-stage breakdown.
    Run(run::RunArgs),
    /// Sweep offered load up to saturation for every policy on 2 CPU devices and
    /// print throughput and tail latency per policy with LROC/baseline ratios.
    Bench(bench::BenchArgs),
    /// Compare the scheduling policies in the discrete-event simulator at scales this
    /// machine cannot run (up to 32 GPUs, 8 RUs, 256x128), with devices that come and
    /// go; table, `--json` rows and an SVG of P99.99 latency against RUs.
    Simulate(simulate::SimulateArgs),
    /// Run every opcode of a configuration on each device (cpu:N, gpu:K) through its
    /// executor and save the latency distributions and resource needs as JSON, for
    /// `station run --calibration` and `station simulate --calibration`.
    Calibrate(calibrate::CalibrateArgs),
}

pub fn run(cmd: StationCmd) -> Result<()> {
    match cmd {
        StationCmd::Run(a) => run::run(a),
        StationCmd::Bench(a) => bench::run(a),
        StationCmd::Simulate(a) => simulate::run(a),
        StationCmd::Calibrate(a) => calibrate::run(a),
    }
}
