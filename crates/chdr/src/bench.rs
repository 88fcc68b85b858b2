//! The CHDR pass-through benchmark: loopback pass-through with busy-poll
//! against the blocking-receive baseline in the same run, beside a
//! single-thread floor (the least any streamer can take on this machine).

use std::net::UdpSocket;
use std::time::Duration;

use radiohost_iq::Ci16;
use radiohost_rt::stats::{LatencyHistogram, Summary as LatencySummary};

use crate::net::{self, realtime_ns, RecvBatch, SendBatch};
use crate::process::Passthrough;
use crate::session::{run_session, SessionConfig, SessionError, SessionReport};
use crate::streamer::PollMode;
use crate::wire::{write_data_packet, DataPacket, DataPacketSpec, WireError, MAX_PACKET_BYTES};

/// What to run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchConfig {
    pub rate_sps: f64,
    pub samples_per_packet: usize,
    /// Packets per mode.
    pub packets: u64,
    /// Pin the streamer to this CPU (busy-poll run).
    pub cpu: Option<usize>,
    pub radio_cpu: Option<usize>,
    /// SCHED_FIFO priority of the streamer and radio threads in both runs.
    pub rt_priority: Option<i32>,
}

/// One row: a latency distribution and its ratios to the baseline and floor.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchRow {
    pub name: String,
    pub packets: u64,
    pub median_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Median relative to the blocking baseline.
    pub vs_blocking: f64,
    /// Median relative to the single-thread floor.
    pub vs_floor: f64,
}

/// Rows plus both sessions' full reports.
#[derive(serde::Serialize)]
pub struct BenchReport {
    pub rows: Vec<BenchRow>,
    pub blocking: SessionReport,
    pub busy: SessionReport,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("measuring the single-thread floor: {0}")]
    FloorIo(#[from] std::io::Error),
    #[error("measuring the single-thread floor: {0}")]
    FloorWire(#[from] WireError),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// Single thread, no waiting: send A->B, receive on B (kernel timestamp), decode,
/// encode, send B->C. The time from B's kernel timestamp to after the send is
/// the least any streamer can take on this machine's loopback path.
pub fn floor(spp: usize, iterations: usize) -> Result<LatencySummary, BenchError> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    let c = UdpSocket::bind("127.0.0.1:0")?;
    net::enable_rx_timestamps(&b)?;
    c.set_nonblocking(true)?;
    let to_b = b.local_addr()?;
    let to_c = net::to_sockaddr(&c.local_addr()?);
    let samples: Vec<Ci16> = (0..spp)
        .map(|i| Ci16::new(i as i16, (i as i16).wrapping_neg()))
        .collect();
    let mut pkt = vec![0u8; MAX_PACKET_BYTES];
    let mut rx = RecvBatch::new(1, MAX_PACKET_BYTES);
    let mut tx = SendBatch::new(1, MAX_PACKET_BYTES);
    let mut decoded = vec![Ci16::default(); spp];
    let mut drain = vec![0u8; MAX_PACKET_BYTES];
    let mut hist = LatencyHistogram::new();
    for i in 0..iterations {
        let spec = DataPacketSpec {
            seq_num: i as u16,
            timestamp: Some(i as u64),
            ..Default::default()
        };
        let n = write_data_packet(&mut pkt, &spec, &[], &samples)?;
        a.send_to(&pkt[..n], to_b)?;
        while rx.recv(&b, false)? == 0 {}
        let d = rx.get(0);
        let p = DataPacket::parse(d.bytes)?;
        p.read_samples(&mut decoded)?;
        let spec = DataPacketSpec {
            timestamp: p.timestamp,
            ..spec
        };
        tx.push(&to_c, |buf| write_data_packet(buf, &spec, &[0], &decoded))?;
        tx.flush(&b)?;
        let done = realtime_ns();
        if let Some(k) = d.kernel_rx_ns {
            hist.record_signed(done - k);
        }
        while c.recv(&mut drain).is_ok() {}
    }
    Ok(hist.summary())
}

/// The steps [`run_bench`] announces to its `progress` callback.
pub const STEPS: u64 = 3;

/// The floor, then a blocking and a busy-poll pass-through session;
/// `progress` hears each of the [`STEPS`] steps before it runs.
pub fn run_bench(
    a: &BenchConfig,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, BenchError> {
    let mut base = SessionConfig::new(1, 1, a.rate_sps, a.samples_per_packet);
    base.packets = a.packets;
    base.offset = Duration::from_millis(20);
    base.radio_cpu = a.radio_cpu;
    base.rt_priority = a.rt_priority;
    base.capacity_pkts = 4096;
    base.record = false;
    // Refuse a bad packet size or count before the floor's 20000 round trips.
    base.check()?;
    progress("floor: one thread, no waiting");
    let floor = floor(a.samples_per_packet, 20_000)?;
    progress("blocking pass-through session");
    let blocking = run_session(&base, Passthrough { ports: 1 })?;
    let busy_cfg = SessionConfig {
        poll: PollMode::BusyPoll,
        cpu: a.cpu,
        ..base
    };
    progress("busy-poll pass-through session");
    let busy = run_session(&busy_cfg, Passthrough { ports: 1 })?;
    let b = blocking.streamer.rx_to_tx;
    let row = |name: &str, s: &LatencySummary| BenchRow {
        name: name.to_string(),
        packets: s.samples,
        median_ns: s.median_ns,
        p99_ns: s.p99_ns,
        p999_ns: s.p999_ns,
        max_ns: s.max_ns,
        vs_blocking: s.median_ns as f64 / b.median_ns.max(1) as f64,
        vs_floor: s.median_ns as f64 / floor.median_ns.max(1) as f64,
    };
    let rows = vec![
        row("floor: single thread recv+decode+encode+send", &floor),
        row("blocking recvmmsg (baseline)", &b),
        row("busy-poll recvmmsg", &busy.streamer.rx_to_tx),
        row(
            "end-to-end, blocking (RX timestamp -> TX)",
            &blocking.radio.end_to_end,
        ),
        row(
            "end-to-end, busy-poll (RX timestamp -> TX)",
            &busy.radio.end_to_end,
        ),
    ];
    Ok(BenchReport {
        rows,
        blocking,
        busy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_packet_sizes_are_refused_before_any_work() {
        for spp in [0, 16_001, 100_000] {
            let cfg = BenchConfig {
                rate_sps: 1e6,
                samples_per_packet: spp,
                packets: 10,
                cpu: None,
                radio_cpu: None,
                rt_priority: None,
            };
            let started = std::time::Instant::now();
            assert!(
                matches!(run_bench(&cfg, |_| ()), Err(BenchError::Session(_))),
                "{spp}"
            );
            assert!(started.elapsed() < Duration::from_secs(1), "{spp}");
        }
    }
}
