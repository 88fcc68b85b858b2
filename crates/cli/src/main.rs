//! `radiohost`: the command-line front end. Each area lives in its own module
//! with a clap `Subcommand` enum and a `run` function; `main` only dispatches.

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
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&cli.log)?)
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
    }
}
