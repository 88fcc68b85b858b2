//! Read and write latency versus node count, parallel against serial, on emulated
//! nodes behind paced links, in one run so the ratios are fair: what `radiohost warp
//! bench` runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use radiohost_iq::WarpWord;
use radiohost_rt::stats::LatencyHistogram;
use serde::Serialize;

use crate::app::{connect, host_config, loopback_interfaces, test_waveform, AppError, NetworkSpec};
use crate::emulator::Emulator;
use crate::host::{HostConfig, HostStats, Mode, WarpHost};
use crate::udp::Offload;
use crate::{FramePayload, RfBuffer};

/// A benchmark: `network` with as many nodes as the largest count, once per host
/// link count.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub network: NetworkSpec,
    /// Node counts to measure.
    pub nodes: Vec<u16>,
    /// Samples per read/write per node (1..=32768).
    pub samples: u32,
    /// Also measure the serial baseline.
    pub serial: bool,
    /// Timed calls per (mode, node count, operation), after 5 warm-up calls.
    pub calls: u32,
    /// Host link counts to measure.
    pub host_link_set: Vec<u8>,
}

/// One (mode, host links, node count, operation).
#[derive(Serialize, Clone, Debug)]
pub struct BenchRow {
    pub mode: &'static str,
    pub host_links: u8,
    pub nodes: u16,
    pub op: &'static str,
    pub samples: u32,
    pub mean_ms: f64,
    /// rt::stats' P99.
    pub p99_ms: f64,
    /// Link-capacity floor: the slower of one node's link and the shared host link(s).
    pub floor_ms: f64,
}

/// Rows plus what went wrong on the way (host counters with any re-requests).
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    /// Per host-link count: the host's counters when it re-requested or retried.
    pub troubled: Vec<(u8, HostStats)>,
    /// What the kernel granted each host socket.
    pub socket_buffers: Vec<crate::host::SocketBuffers>,
    /// Per host-link count: UDP GSO/GRO of the host's sockets and of the emulator's
    /// node sockets (after the run), and how many GSO sends / GRO receives each made.
    pub offload: Vec<OffloadReport>,
}

/// UDP segmentation offload during one host-link count's run.
#[derive(Clone, Debug)]
pub struct OffloadReport {
    pub host_links: u8,
    pub host: Vec<Offload>,
    pub emulator_gso: bool,
    pub emulator_gro: bool,
    pub host_gso_sends: u64,
    pub host_gro_batches: u64,
    pub emulator_gso_sends: u64,
    pub emulator_gro_batches: u64,
}

/// Why the benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Invalid(&'static str),
    #[error("starting the emulated nodes: {0}")]
    Emulator(std::io::Error),
    #[error("node {0} returned different samples than were written")]
    Mismatch(usize),
    #[error(transparent)]
    App(#[from] AppError),
    #[error(transparent)]
    Transport(#[from] crate::host::TransportError),
}

fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Parallel => "parallel",
        Mode::Serial => "serial",
    }
}

/// Run the benchmark; `progress` hears each step before it runs. Once `stop`
/// is set (Ctrl-C) no further step starts and the rows measured so far return.
pub fn run(
    b: &BenchConfig,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, BenchError> {
    if b.nodes.is_empty() || b.nodes.contains(&0) {
        return Err(BenchError::Invalid("node counts must be positive"));
    }
    if b.calls == 0 {
        return Err(BenchError::Invalid("calls must be positive"));
    }
    if !(1..=32768).contains(&b.samples) {
        return Err(BenchError::Invalid("samples must be within 1..=32768"));
    }
    let link_sets = if b.host_link_set.is_empty() {
        vec![b.network.host_links as u8]
    } else {
        b.host_link_set.clone()
    };
    let max_nodes = b.nodes.iter().copied().max().unwrap_or(1);
    let modes = if b.serial {
        vec![Mode::Parallel, Mode::Serial]
    } else {
        vec![Mode::Parallel]
    };
    let mut rep = BenchReport {
        rows: Vec::new(),
        troubled: Vec::new(),
        socket_buffers: Vec::new(),
        offload: Vec::new(),
    };
    for &links in &link_sets {
        // Ephemeral ports: the bench never collides with a running emulator.
        let net = NetworkSpec {
            nodes: max_nodes,
            host_links: links as usize,
            addressing: b.network.addressing.with_ports(0, 0),
            ..b.network.clone()
        };
        let cfg = net.emulator_config()?;
        let emu = Emulator::start(cfg.clone()).map_err(BenchError::Emulator)?;
        let ids: Vec<u16> = (0..max_nodes).collect();
        let trigger = emu
            .trigger_addr()
            .ok_or(BenchError::Invalid("the emulator has no trigger socket"))?;
        let host_cfg = HostConfig {
            offload: net.offload,
            ..host_config(&loopback_interfaces(links as usize), net.payload, trigger)
        };
        let mut host = connect(&ids, emu.node_addrs(), |i| cfg.host_link_of(i), host_cfg)?;
        rep.socket_buffers.extend_from_slice(host.socket_buffers());
        let data: Vec<Vec<WarpWord>> = ids
            .iter()
            .map(|&id| test_waveform(id, b.samples as usize))
            .collect();
        prepare(&mut host, &emu, &data)?;
        'steps: for &mode in &modes {
            host.set_mode(mode);
            for &n in &b.nodes {
                for op in ["read", "write"] {
                    if stop.load(Ordering::Relaxed) {
                        break 'steps;
                    }
                    progress(&format!(
                        "{} {op} {n} nodes, {links} host link(s)",
                        mode_name(mode)
                    ));
                    let (mean_ms, p99_ms) = measure(&mut host, op, n, &data, b.calls, b.samples)?;
                    rep.rows.push(BenchRow {
                        mode: mode_name(mode),
                        host_links: links,
                        nodes: n,
                        op,
                        samples: b.samples,
                        mean_ms,
                        p99_ms,
                        floor_ms: floor_ms(&net, b.samples, n),
                    });
                }
            }
        }
        let stats = host.stats().clone();
        let emu_stats = emu.stats();
        rep.offload.push(OffloadReport {
            host_links: links,
            host: host.offload().to_vec(),
            emulator_gso: emu_stats.offload.iter().any(|o| o.gso),
            emulator_gro: emu_stats.offload.iter().any(|o| o.gro),
            host_gso_sends: stats.gso_sends,
            host_gro_batches: stats.gro_batches,
            emulator_gso_sends: emu_stats.gso_sends,
            emulator_gro_batches: emu_stats.gro_batches,
        });
        if stats.rerequests + stats.write_retries + stats.stale_replies > 0 {
            rep.troubled.push((links, stats));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(rep)
}

/// Fill every node's TX and RX buffers once so reads return known data.
fn prepare(host: &mut WarpHost, emu: &Emulator, data: &[Vec<WarpWord>]) -> Result<(), BenchError> {
    let idx: Vec<usize> = (0..data.len()).collect();
    let refs: Vec<&[WarpWord]> = data.iter().map(|d| d.as_slice()).collect();
    host.write_iq(&idx, RfBuffer::A, 0, &refs)?;
    emu.with_nodes(|nodes| nodes.iter_mut().for_each(|n| n.trigger()));
    let back = host.read_iq(&idx, RfBuffer::A, 0, data[0].len() as u32)?;
    for (i, (got, sent)) in back.iter().zip(data).enumerate() {
        if !got.iter().zip(sent).all(|(g, s)| *g == s.tx_to_rx()) {
            return Err(BenchError::Mismatch(i));
        }
    }
    Ok(())
}

/// Mean and P99 (ms) of `calls` timed calls of `op` on the first `n` nodes.
fn measure(
    host: &mut WarpHost,
    op: &str,
    n: u16,
    data: &[Vec<WarpWord>],
    calls: u32,
    samples: u32,
) -> Result<(f64, f64), BenchError> {
    let idx: Vec<usize> = (0..n as usize).collect();
    let refs: Vec<&[WarpWord]> = data[..n as usize].iter().map(|d| d.as_slice()).collect();
    let mut hist = LatencyHistogram::new();
    let mut total_ns = 0u128;
    let warmup = 5.min(calls);
    // Reads land in the same buffers every call, as an application reading in a
    // loop would have them.
    let mut read_into = Vec::new();
    for call in 0..warmup + calls {
        let t = Instant::now();
        if op == "read" {
            host.read_iq_into(&idx, RfBuffer::A, 0, samples, &mut read_into)?;
        } else {
            host.write_iq(&idx, RfBuffer::A, 0, &refs)?;
        }
        if call >= warmup {
            let ns = t.elapsed().as_nanos();
            total_ns += ns;
            hist.record(ns as u64);
        }
    }
    Ok((
        total_ns as f64 / calls as f64 / 1e6,
        hist.summary().p99_ns as f64 / 1e6,
    ))
}

impl BenchConfig {
    /// The steps `run` reports progress for: each (host links, mode, count, operation).
    pub fn steps(&self) -> usize {
        self.host_link_set.len().max(1) * (1 + usize::from(self.serial)) * self.nodes.len() * 2
    }
}

/// How one operation scales with one host-link count: the ratios the design is
/// judged by.
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct Scaling {
    pub op: &'static str,
    pub host_links: u8,
    pub min_nodes: u16,
    pub max_nodes: u16,
    /// Parallel mean latency at `max_nodes` over that at `min_nodes`.
    pub parallel_growth: f64,
    /// Serial over parallel mean latency at `max_nodes`, when serial was measured.
    pub serial_over_parallel: Option<f64>,
}

/// The scaling of each (host links, operation) measured in parallel at both the
/// smallest and the largest node count, in row order.
pub fn scaling(rows: &[BenchRow]) -> Vec<Scaling> {
    let find = |mode: &str, links: u8, nodes: u16, op: &str| {
        rows.iter()
            .find(|r| r.mode == mode && r.host_links == links && r.nodes == nodes && r.op == op)
    };
    let mut links: Vec<u8> = rows.iter().map(|r| r.host_links).collect();
    links.dedup();
    let min_nodes = rows.iter().map(|r| r.nodes).min().unwrap_or(1);
    let max_nodes = rows.iter().map(|r| r.nodes).max().unwrap_or(1);
    let mut out = Vec::new();
    for host_links in links {
        for op in ["read", "write"] {
            let one = find("parallel", host_links, min_nodes, op);
            let Some((one, many)) = one.zip(find("parallel", host_links, max_nodes, op)) else {
                continue;
            };
            out.push(Scaling {
                op,
                host_links,
                min_nodes,
                max_nodes,
                parallel_growth: many.mean_ms / one.mean_ms,
                serial_over_parallel: find("serial", host_links, max_nodes, op)
                    .map(|s| s.mean_ms / many.mean_ms),
            });
        }
    }
    out
}

/// The rows as CSV: a header line, then one line per row.
pub fn csv(rows: &[BenchRow]) -> String {
    let mut text = String::from("mode,host_links,nodes,op,samples,mean_ms,p99_ms,floor_ms\n");
    for r in rows {
        text += &format!(
            "{},{},{},{},{},{:.4},{:.4},{:.4}\n",
            r.mode, r.host_links, r.nodes, r.op, r.samples, r.mean_ms, r.p99_ms, r.floor_ms
        );
    }
    text
}

/// The link-capacity floor of one call on `nodes` nodes.
pub fn floor_ms(net: &NetworkSpec, samples: u32, nodes: u16) -> f64 {
    let per = net.payload.samples_per_packet() as u64;
    let packets = (samples as u64).div_ceil(per);
    let bytes = samples as u64 * 4
        + packets * (crate::wire::SAMPLE_PACKET_OVERHEAD + FramePayload::WIRE_OVERHEAD) as u64;
    let node_s = bytes as f64 * 8.0 / net.node_rate;
    let host_s = bytes as f64 * 8.0 * nodes as f64 / (net.host_rate * net.host_links as f64);
    node_s.max(host_s) * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Addressing;

    #[test]
    fn tiny_bench_measures_parallel_and_serial() {
        let b = BenchConfig {
            network: NetworkSpec {
                nodes: 2,
                addressing: Addressing::LOOPBACK,
                payload: FramePayload::Jumbo,
                node_rate: 1e9,
                node_link: String::new(),
                host_rate: 10e9,
                host_links: 1,
                allowed_hosts: Vec::new(),
                offload: crate::udp::OffloadPolicy::Auto,
            },
            nodes: vec![1, 2],
            samples: 1024,
            serial: true,
            calls: 3,
            host_link_set: Vec::new(),
        };
        let mut steps = 0;
        let rep = run(&b, &AtomicBool::new(false), |_| steps += 1).unwrap();
        assert_eq!((rep.rows.len(), steps), (8, 8));
        assert!(rep
            .rows
            .iter()
            .all(|r| r.mean_ms > 0.0 && r.floor_ms > 0.0 && r.p99_ms > 0.0));
        assert_eq!(b.steps(), 8);
        let sc = scaling(&rep.rows);
        assert_eq!(sc.len(), 2);
        assert!(sc.iter().all(|s| (s.min_nodes, s.max_nodes) == (1, 2)));
        assert!(sc.iter().all(|s| s.serial_over_parallel.is_some()));
        assert_eq!(csv(&rep.rows).lines().count(), 9);
        // A stop during the first step: it is measured, no other starts.
        let stop = AtomicBool::new(false);
        let partial = run(&b, &stop, |_| stop.store(true, Ordering::Relaxed)).unwrap();
        assert_eq!(partial.rows.len(), 1);
        assert_eq!(partial.offload.len(), 1, "the link set's counters are kept");
        let never = AtomicBool::new(false);
        assert!(run(&BenchConfig { calls: 0, ..b }, &never, |_| ()).is_err());
    }
}
