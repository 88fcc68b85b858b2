//! `radiohost warp`: WARPLab-compatible buffer transport — emulated nodes, host
//! commands and the transport benchmark.

mod bench;
mod commands;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use radiohost_iq::WarpWord;
use radiohost_testbed::units::parse_rate;
use radiohost_testbed::LinkConfig;
use radiohost_warp::emulator::EmulatorConfig;
use radiohost_warp::host::{HostConfig, NodeTarget, WarpHost};
use radiohost_warp::{Addressing, FramePayload};
use std::net::SocketAddr;

#[derive(Subcommand)]
pub enum WarpCmd {
    /// Run emulated WARP v3 nodes that answer READ_IQ, WRITE_IQ and triggers, paced
    /// by the link model. Runs until Ctrl-C, then prints every node's counters.
    Emulate(commands::EmulateArgs),
    /// Read RX buffers of several nodes in parallel and save them as SigMF.
    Read(commands::ReadArgs),
    /// Write a SigMF recording (or a test tone) to TX buffers of several nodes.
    Write(commands::WriteArgs),
    /// Broadcast a trigger (TX buffers -> RX buffers on every node).
    Trigger(commands::TriggerArgs),
    /// Measure read and write latency versus node count, parallel vs serial.
    Bench(bench::BenchArgs),
}

pub fn run(cmd: WarpCmd) -> Result<()> {
    match cmd {
        WarpCmd::Emulate(a) => commands::emulate(a),
        WarpCmd::Read(a) => commands::read(a),
        WarpCmd::Write(a) => commands::write(a),
        WarpCmd::Trigger(a) => commands::trigger(a),
        WarpCmd::Bench(a) => bench::run(a),
    }
}

/// Where the nodes are and how big their frames are.
#[derive(Args, Clone, Debug)]
pub struct NetArgs {
    /// Use jumbo frames (8960-byte payloads). The default.
    #[arg(long, conflicts_with = "standard")]
    pub jumbo: bool,
    /// Use standard 1500-byte frames (1472-byte payloads).
    #[arg(long)]
    pub standard: bool,
    /// Real WARPLab addressing: node n at 10.0.0.(n+1):9000+n, triggers broadcast to
    /// 10.0.0.255:10000 (run inside a network namespace that has those addresses).
    #[arg(long)]
    pub warplab_addressing: bool,
    /// Node n listens on this port + n.
    #[arg(long, default_value_t = radiohost_warp::addressing::NODE_BASE_PORT)]
    pub base_port: u16,
    /// UDP port triggers go to.
    #[arg(long, default_value_t = radiohost_warp::addressing::TRIGGER_PORT)]
    pub trigger_port: u16,
}

impl NetArgs {
    pub fn payload(&self) -> FramePayload {
        if self.standard {
            FramePayload::Standard
        } else {
            FramePayload::Jumbo
        }
    }

    pub fn addressing(&self) -> Addressing {
        let base = if self.warplab_addressing {
            Addressing::WARPLAB
        } else {
            Addressing::LOOPBACK
        };
        base.with_ports(self.base_port, self.trigger_port)
    }
}

/// Link model options of an emulated network.
#[derive(Args, Clone, Debug)]
pub struct LinkArgs {
    /// Capacity of each node's link.
    #[arg(long, default_value = "1G")]
    pub link_rate: String,
    /// Extra link spec items for node links, e.g. "1%,delay=20us" (see testbed link specs).
    #[arg(long, default_value = "")]
    pub link: String,
    /// Capacity of each shared host link.
    #[arg(long, default_value = "10G")]
    pub host_link_rate: String,
    /// Only answer these host addresses (repeatable; default: any). Others are
    /// dropped and counted.
    #[arg(long = "allow-host")]
    pub allowed_hosts: Vec<std::net::IpAddr>,
    /// Number of host links (nodes are split evenly across them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub host_links: u8,
}

impl LinkArgs {
    pub fn emulator_config(&self, nodes: u16, net: &NetArgs) -> Result<EmulatorConfig> {
        let defaults = EmulatorConfig::default();
        let mut node_link = LinkConfig::parse(&self.link).context("--link")?;
        node_link.rate_bps = parse_rate(&self.link_rate).context("--link-rate")?;
        if node_link.delay.is_zero() {
            node_link.delay = defaults.node_link.delay;
        }
        node_link.queue_limit_bytes = node_link
            .queue_limit_bytes
            .min(defaults.node_link.queue_limit_bytes);
        let mut host_link = defaults.host_link.clone();
        host_link.rate_bps = parse_rate(&self.host_link_rate).context("--host-link-rate")?;
        Ok(EmulatorConfig {
            nodes,
            addressing: net.addressing(),
            payload: net.payload(),
            node_link,
            host_link,
            host_links: self.host_links as usize,
            allowed_hosts: self.allowed_hosts.clone(),
            ..defaults
        })
    }
}

/// Parse "0-3,7" into node IDs.
pub fn parse_node_list(text: &str) -> Result<Vec<u16>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u16, u16) = (a.parse()?, b.parse()?);
                anyhow::ensure!(a <= b, "node range {part} goes backwards");
                out.extend(a..=b);
            }
            None => out.push(
                part.parse()
                    .with_context(|| format!("node {part:?} is not a number"))?,
            ),
        }
    }
    anyhow::ensure!(!out.is_empty(), "no nodes given");
    Ok(out)
}

/// A host for nodes `ids` at `addrs`, node i talking through local interface
/// `interface_of(i)` of `cfg.interfaces`.
pub fn connect(
    ids: &[u16],
    addrs: &[SocketAddr],
    interface_of: impl Fn(usize) -> usize,
    cfg: HostConfig,
) -> Result<WarpHost> {
    let targets = ids
        .iter()
        .zip(addrs)
        .enumerate()
        .map(|(i, (&id, &addr))| NodeTarget {
            id,
            addr,
            interface: interface_of(i),
        })
        .collect();
    Ok(WarpHost::new(cfg, targets)?)
}

/// Host settings for `interfaces`, frame size and trigger address; the rest default.
pub fn host_config(
    interfaces: &[SocketAddr],
    payload: FramePayload,
    trigger_addr: SocketAddr,
) -> HostConfig {
    HostConfig {
        interfaces: interfaces.to_vec(),
        payload,
        trigger_addr,
        ..Default::default()
    }
}

/// A distinct, recognisable test waveform per node: a complex tone at a
/// node-specific frequency with a node-specific amplitude, as Fix_16_15 words.
pub fn test_waveform(node: u16, samples: usize) -> Vec<WarpWord> {
    let freq = (node as f32 + 1.0) / 64.0;
    let amp = 0.5 + 0.02 * (node % 16) as f32;
    (0..samples)
        .map(|n| {
            let phase = std::f32::consts::TAU * freq * n as f32;
            WarpWord::from_cf32_fix16(radiohost_iq::Cf32::from_polar(amp, phase))
        })
        .collect()
}

/// The local addresses a host uses for `links` host links on loopback.
pub fn loopback_interfaces(links: usize) -> Vec<SocketAddr> {
    (0..links.max(1))
        .map(|i| SocketAddr::from(([127, 0, 0, 1 + i as u8], 0)))
        .collect()
}
