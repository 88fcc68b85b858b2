//! `radiohost warp`: WARPLab-compatible buffer transport — emulated nodes, host
//! commands and the transport benchmark.

mod bench;
mod commands;

use anyhow::Result;
use clap::{Args, Subcommand};
use radiohost_testbed::units::parse_rate;
use radiohost_warp::app::NetworkSpec;
use radiohost_warp::udp::OffloadPolicy;
use radiohost_warp::{Addressing, FramePayload};

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
    /// Use jumbo frames (8960-byte payloads after the 2-byte pad, 2232 samples per packet, as WARPLab 7.4). The default.
    #[arg(long, conflicts_with = "standard")]
    pub jumbo: bool,
    /// Use standard 1500-byte frames (1470-byte payloads after the pad, 359 samples per packet).
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
    /// Send and receive one datagram per syscall: no UDP GSO/GRO even where the
    /// kernel offers them (the default uses them; e.g. to compare).
    #[arg(long)]
    pub no_udp_offload: bool,
}

impl NetArgs {
    pub fn payload(&self) -> FramePayload {
        if self.standard {
            FramePayload::Standard
        } else {
            FramePayload::Jumbo
        }
    }

    pub fn offload(&self) -> OffloadPolicy {
        if self.no_udp_offload {
            OffloadPolicy::Off
        } else {
            OffloadPolicy::Auto
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
    /// Capacity of each node's link, a rate with its unit (e.g. 1Gbit).
    #[arg(long, default_value = "1G", value_parser = parse_rate)]
    pub link_rate: f64,
    /// Extra link spec items for node links, e.g. "1%,delay=20us" (see testbed link specs).
    #[arg(long, default_value = "")]
    pub link: String,
    /// Capacity of each shared host link, a rate with its unit (e.g. 10Gbit).
    #[arg(long, default_value = "10G", value_parser = parse_rate)]
    pub host_link_rate: f64,
    /// Only answer these host addresses (repeatable; default: any). Others are
    /// dropped and counted.
    #[arg(long = "allow-host")]
    pub allowed_hosts: Vec<std::net::IpAddr>,
    /// Number of host links (nodes are split evenly across them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub host_links: u8,
}

impl LinkArgs {
    pub fn network(&self, nodes: u16, net: &NetArgs) -> NetworkSpec {
        NetworkSpec {
            nodes,
            addressing: net.addressing(),
            payload: net.payload(),
            node_rate: self.link_rate,
            node_link: self.link.clone(),
            host_rate: self.host_link_rate,
            host_links: self.host_links as usize,
            allowed_hosts: self.allowed_hosts.clone(),
            offload: net.offload(),
        }
    }
}
