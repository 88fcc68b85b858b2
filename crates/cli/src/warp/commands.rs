//! `warp emulate|read|write|trigger`.

use super::{LinkArgs, NetArgs};
use anyhow::{Context, Result};
use clap::Args;
use radiohost_iq::WarpWord;
use radiohost_testbed::units::{parse_duration, parse_positive_duration, parse_sample_rate};
use radiohost_warp::app::{
    connect, connect_nodes, host_config, parse_node_list, save_rx_sigmf, test_waveform,
    tx_from_sigmf, NodeSetup,
};
use radiohost_warp::emulator::Emulator;
use radiohost_warp::host::{Mode, WarpHost};
use radiohost_warp::RfBuffer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Samples in one RF buffer of a WARP v3 node.
const BUFFER: u32 = radiohost_warp::node::BUFFER_SAMPLES as u32;

#[derive(Args)]
pub struct EmulateArgs {
    /// Number of nodes (IDs 0..N), 1 to 254.
    #[arg(long, default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..=radiohost_warp::addressing::MAX_WARPLAB_NODES as i64))]
    nodes: u16,
    #[command(flatten)]
    net: NetArgs,
    #[command(flatten)]
    links: LinkArgs,
    /// Stop after this long, a duration with its unit (e.g. 30s; default: run until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// While running, print the drop counters this often when they changed, a duration
    /// with its unit (e.g. 5s). Each drop is also logged with its reason at debug
    /// level (`--log radiohost_warp=debug`).
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration)]
    stats_every: Duration,
}

pub fn emulate(a: EmulateArgs) -> Result<()> {
    // The last node must have an address (its port at most 65535).
    a.net.addressing().node_addr(a.nodes - 1).map_err(|e| {
        crate::ui::usage(format!(
            "--nodes {} --base-port {}: {e}",
            a.nodes, a.net.base_port
        ))
    })?;
    let cfg = a.links.network(a.nodes, &a.net).emulator_config()?;
    let emu = Emulator::start(cfg.clone()).context("starting the emulated nodes")?;
    let first = emu.node_addrs().first().copied();
    let last = emu.node_addrs().last().copied();
    eprintln!(
        "{} emulated WARP v3 nodes on {} .. {} ({} frames, node links {} bit/s, {} host link(s) of {} bit/s); triggers on {}",
        a.nodes,
        first.map_or("-".into(), |x| x.to_string()),
        last.map_or("-".into(), |x| x.to_string()),
        if a.net.standard { "standard" } else { "jumbo" },
        a.links.link_rate,
        a.links.host_links,
        a.links.host_link_rate,
        emu.trigger_addr().map_or("(none)".into(), |x| x.to_string()),
    );
    let stop = crate::ui::stop_flag();
    let own_stop = emu.stop_flag();
    let started = Instant::now();
    let mut reported = 0;
    loop {
        let left = a.duration.map(|d| d.saturating_sub(started.elapsed()));
        if left == Some(Duration::ZERO)
            || stop.load(Ordering::Relaxed)
            || own_stop.load(Ordering::Relaxed)
        {
            break;
        }
        emu.run_until(
            &stop,
            Some(left.map_or(a.stats_every, |l| l.min(a.stats_every))),
        );
        let s = emu.stats();
        if s.dropped_total() != reported {
            reported = s.dropped_total();
            eprintln!(
                "[{:.1}s] dropped so far: {} ({} by nodes, {} by links, {} oversized, {} from unexpected hosts)",
                started.elapsed().as_secs_f64(),
                reported,
                s.node_drops(),
                s.link_drops(),
                s.oversized,
                s.unexpected_source
            );
        }
    }
    let stats = emu.stop()?;
    println!(
        "{:>5} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9}",
        "node", "received", "samples", "reads", "triggers", "dropped", "link-lost"
    );
    for (i, c) in stats.nodes.iter().enumerate() {
        let lost = stats.node_links_down.get(i).map_or(0, |l| l.dropped())
            + stats.node_links_up.get(i).map_or(0, |l| l.dropped());
        println!(
            "{:>5} {:>9} {:>9} {:>7} {:>8} {:>10} {:>9}",
            i,
            c.received,
            c.samples_written,
            c.reads_served,
            c.triggers,
            c.dropped(),
            lost
        );
    }
    println!(
        "oversized datagrams dropped: {}, from unexpected hosts: {}, reply send errors: {}",
        stats.oversized, stats.unexpected_source, stats.send_errors
    );
    Ok(())
}

/// Options shared by host commands.
#[derive(Args)]
pub struct HostArgs {
    /// Node IDs, e.g. "0-15" or "0,2,5".
    #[arg(long, default_value = "0-15")]
    nodes: String,
    #[command(flatten)]
    net: NetArgs,
    /// Local addresses to use; nodes are split evenly across them (e.g. two 10G NICs).
    #[arg(long = "interface", default_value = "0.0.0.0:0")]
    interfaces: Vec<SocketAddr>,
    /// One node after another instead of all at once.
    #[arg(long)]
    serial: bool,
    /// Quiet period before missing replies are re-requested, a duration with its unit.
    #[arg(long = "timeout", alias = "timeout-ms", default_value = "20ms", value_parser = parse_positive_duration)]
    timeout: Duration,
    /// Re-request rounds before giving up on a node.
    #[arg(long, default_value_t = 5)]
    retries: u32,
}

impl HostArgs {
    fn connect(&self) -> Result<(WarpHost, Vec<u16>)> {
        let ids = parse_node_list(&self.nodes).map_err(|e| crate::ui::usage(e.to_string()))?;
        for &id in &ids {
            self.net
                .addressing()
                .node_addr(id)
                .map_err(|e| crate::ui::usage(e.to_string()))?;
        }
        let setup = NodeSetup {
            ids,
            addressing: self.net.addressing(),
            payload: self.net.payload(),
            interfaces: self.interfaces.clone(),
            mode: if self.serial {
                Mode::Serial
            } else {
                Mode::Parallel
            },
            timeout: self.timeout,
            retries: self.retries,
            offload: self.net.offload(),
        };
        let (host, shortfalls) = connect_nodes(&setup)?;
        for s in shortfalls {
            eprintln!("note: {s}");
        }
        Ok((host, setup.ids))
    }
}

fn parse_buffer(s: &str) -> Result<RfBuffer, String> {
    RfBuffer::parse(s).ok_or_else(|| format!("{s:?} is not one of A, B, C, D"))
}

#[derive(Args)]
pub struct ReadArgs {
    #[command(flatten)]
    host: HostArgs,
    /// RF buffer: A, B, C or D.
    #[arg(long, default_value = "A", value_parser = parse_buffer)]
    buffer: RfBuffer,
    /// First sample to read, 0 to 32767.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..BUFFER as i64))]
    start: u32,
    /// Samples to read per node, 1 to 32768 (start + samples at most 32768).
    #[arg(long, default_value_t = BUFFER, value_parser = clap::value_parser!(u32).range(1..=BUFFER as i64))]
    samples: u32,
    /// Directory for one SigMF recording per node (node<ID>_rf<B>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Sample rate written into the recordings' metadata, with its unit (e.g. 40MS/s).
    #[arg(long, default_value = "40MS/s", value_parser = parse_sample_rate)]
    sample_rate: f64,
}

/// `start + samples` must stay within a node's buffer.
fn check_window(start: u32, samples: u64) -> Result<()> {
    if start as u64 + samples > BUFFER as u64 {
        return Err(crate::ui::usage(format!(
            "--start {start} plus {samples} samples runs past the {BUFFER}-sample buffer (start + samples at most {BUFFER})"
        )));
    }
    Ok(())
}

pub fn read(a: ReadArgs) -> Result<()> {
    check_window(a.start, a.samples as u64)?;
    let (mut host, ids) = a.host.connect()?;
    let idx: Vec<usize> = (0..ids.len()).collect();
    let began = Instant::now();
    let data = host.read_iq(&idx, a.buffer, a.start, a.samples)?;
    let total = began.elapsed();
    println!("{:>5} {:>12}", "node", "latency_ms");
    for (id, lat) in ids.iter().zip(host.last_node_latency()) {
        println!("{:>5} {:>12.3}", id, lat.as_secs_f64() * 1e3);
    }
    println!(
        "total {:>12.3} ms for {} nodes x {} samples",
        total.as_secs_f64() * 1e3,
        ids.len(),
        a.samples
    );
    if let Some(dir) = a.out {
        save_rx_sigmf(&dir, &ids, &data, a.buffer, a.sample_rate)?;
        println!("saved {} recordings in {}", ids.len(), dir.display());
    }
    Ok(())
}

#[derive(Args)]
pub struct WriteArgs {
    #[command(flatten)]
    host: HostArgs,
    /// RF buffer: A, B, C or D.
    #[arg(long, default_value = "A", value_parser = parse_buffer)]
    buffer: RfBuffer,
    /// First sample to write, 0 to 32767.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..BUFFER as i64))]
    start: u32,
    /// SigMF recording to write; channel k goes to the k-th node (a one-channel
    /// recording goes to every node). Without it, each node gets its test tone.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Samples of test tone per node when no --input is given, 1 to 32768.
    #[arg(long, default_value_t = BUFFER, value_parser = clap::value_parser!(u32).range(1..=BUFFER as i64))]
    samples: u32,
}

pub fn write(a: WriteArgs) -> Result<()> {
    let (mut host, ids) = a.host.connect()?;
    let data: Vec<Vec<WarpWord>> = match &a.input {
        None => ids
            .iter()
            .map(|&id| test_waveform(id, a.samples as usize))
            .collect(),
        Some(path) => tx_from_sigmf(path, ids.len())?,
    };
    let longest = data.iter().map(Vec::len).max().unwrap_or(0);
    if longest == 0 {
        anyhow::bail!("nothing to write: no samples");
    }
    check_window(a.start, longest as u64)?;
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
    let idx: Vec<usize> = (0..ids.len()).collect();
    let began = Instant::now();
    host.write_iq(&idx, a.buffer, a.start, &refs)?;
    println!(
        "wrote {} samples to RF{:?} of {} nodes in {:.3} ms (checksums verified; retries {}, fallbacks {})",
        data.first().map_or(0, Vec::len),
        a.buffer,
        ids.len(),
        began.elapsed().as_secs_f64() * 1e3,
        host.stats().write_retries,
        host.stats().write_fallbacks
    );
    Ok(())
}

#[derive(Args)]
pub struct TriggerArgs {
    #[command(flatten)]
    net: NetArgs,
    /// Trigger ID bitmask.
    #[arg(long, default_value_t = 1)]
    ids: u32,
}

pub fn trigger(a: TriggerArgs) -> Result<()> {
    let addressing = a.net.addressing();
    let cfg = host_config(
        &["0.0.0.0:0".parse()?],
        a.net.payload(),
        addressing.trigger_addr(),
    );
    let mut host = connect(&[], &[], |_| 0, cfg)?;
    host.trigger(a.ids)?;
    println!("trigger {:#x} sent to {}", a.ids, addressing.trigger_addr());
    Ok(())
}
