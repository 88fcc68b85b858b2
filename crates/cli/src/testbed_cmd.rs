//! `radiohost testbed`: put an emulated link between two real UDP endpoints.

use anyhow::Result;
use clap::{Args, Subcommand};
use radiohost_testbed::relay::UdpRelay;
use radiohost_testbed::LinkConfig;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum TestbedCmd {
    /// Relay UDP from --listen to --to through an emulated link; replies from any port
    /// of --to's host go back to the client. Prints every drop, by reason, on exit.
    Relay(RelayArgs),
}

#[derive(Args)]
pub struct RelayArgs {
    /// Address clients send to.
    #[arg(long)]
    listen: SocketAddr,
    /// Address datagrams are forwarded to.
    #[arg(long)]
    to: SocketAddr,
    /// Link spec towards --to, e.g. "1G,1%,delay=1ms" or "250kbit,20%,ge=0.01/0.3/0.8".
    /// Items: rate, loss %, delay=, ge=p_gb/p_bg/loss_bad[/loss_good], reorder=P/DELAY,
    /// dup=P, queue=SIZE, seed=N, at=TIME:RATE (capacity change).
    #[arg(long, default_value = "", value_parser = parse_link)]
    link: LinkConfig,
    /// Link spec for replies (default: the same as --link with another seed).
    #[arg(long, value_parser = parse_link)]
    back: Option<LinkConfig>,
    /// Stop after this long (ns, us, ms, s, min; default: until Ctrl-C).
    #[arg(long, value_parser = radiohost_testbed::units::parse_positive_duration)]
    duration: Option<Duration>,
}

pub fn run(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Relay(a) => relay(a),
    }
}

/// A testbed link spec, read when the command line is parsed.
fn parse_link(spec: &str) -> Result<LinkConfig, radiohost_testbed::link::LinkConfigError> {
    LinkConfig::parse(spec)
}

fn relay(a: RelayArgs) -> Result<()> {
    let forward = a.link;
    let back = match a.back {
        Some(back) => back,
        None => LinkConfig {
            seed: forward.seed.wrapping_add(1),
            ..forward.clone()
        },
    };
    let relay = UdpRelay::start(a.listen, a.to, forward, back)?;
    eprintln!(
        "relaying {listen} -> {to} (Ctrl-C to stop)\n\
         replies from any port of {ip} go back to the client that last sent to {listen}, \
         sent from {listen} (one reply path for all of the target's ports); datagrams from \
         other hosts are dropped and counted. Each drop is logged with --log radiohost_testbed=debug.",
        listen = relay.listen_addr(),
        to = a.to,
        ip = a.to.ip()
    );
    let stop = crate::ui::stop_flag();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && a.duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = relay.stop()?;
    for (name, l) in [("forward", &s.forward), ("back", &s.back)] {
        println!(
            "{name:>8}: offered {} delivered {} duplicated {} reordered {}",
            l.offered, l.delivered, l.duplicated, l.reordered
        );
    }
    println!(
        "replies from other ports of {}: {} (passed on)",
        a.to.ip(),
        s.other_port_replies
    );
    println!("dropped {} datagrams:", s.dropped());
    for (reason, n) in s.drops() {
        println!("  {n:>10}  {reason}");
    }
    Ok(())
}
