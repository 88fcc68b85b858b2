//! `radiohost chdr bench`: loopback pass-through, busy-poll against the
//! blocking-receive baseline in the same run, beside a single-thread floor.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use radiohost_chdr::net::{self, realtime_ns, RecvBatch, SendBatch};
use radiohost_chdr::process::Passthrough;
use radiohost_chdr::stats::{LatencyHistogram, LatencySummary};
use radiohost_chdr::streamer::PollMode;
use radiohost_chdr::tx::TxPolicy;
use radiohost_chdr::wire::{write_data_packet, DataPacket, DataPacketSpec, MAX_PACKET_BYTES};
use radiohost_iq::Ci16;

use super::report;
use super::session::{run_session, SessionOpts};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Sample rate of the emulated radio.
    #[arg(long, default_value_t = 10e6)]
    rate: f64,
    /// Samples per packet.
    #[arg(long, default_value_t = 512)]
    spp: usize,
    /// Packets per mode.
    #[arg(long, default_value_t = 20000)]
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
    /// Write the busy-poll run's histograms as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print JSON rows instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(serde::Serialize)]
struct Row {
    name: String,
    packets: u64,
    median_ns: u64,
    p99_ns: u64,
    p999_ns: u64,
    max_ns: u64,
    /// Median relative to the blocking baseline.
    vs_blocking: f64,
    /// Median relative to the single-thread floor.
    vs_floor: f64,
}

/// Single thread, no waiting: send A->B, receive on B (kernel timestamp), decode,
/// encode, send B->C. The time from B's kernel timestamp to after the send is
/// the least any streamer can take on this machine's loopback path.
fn floor(spp: usize, iterations: usize) -> Result<LatencySummary> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    let c = UdpSocket::bind("127.0.0.1:0")?;
    net::enable_rx_timestamps(&b)?;
    c.set_nonblocking(true)?;
    let to_b = b.local_addr()?;
    let to_c = net::to_sockaddr(&c.local_addr()?);
    let samples: Vec<Ci16> = (0..spp).map(|i| Ci16::new(i as i16, -(i as i16))).collect();
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
            hist.record(done - k);
        }
        while c.recv(&mut drain).is_ok() {}
    }
    Ok(hist.summary())
}

pub fn run(a: BenchArgs) -> Result<()> {
    let floor = floor(a.spp, 20_000).context("measuring the single-thread floor")?;
    let base = SessionOpts {
        inputs: 1,
        outputs: 1,
        rate_sps: a.rate,
        samples_per_packet: a.spp,
        packets: a.packets,
        offset: Duration::from_millis(20),
        poll: PollMode::Blocking,
        cpu: None,
        radio_cpu: a.radio_cpu,
        radio_spin: false,
        rt_priority: a.rt_priority,
        batch: 32,
        policy: TxPolicy::ZeroFill,
        capacity_pkts: 4096,
        subscribers: Vec::new(),
        record: false,
    };
    let blocking = run_session(&base, Passthrough { ports: 1 })?;
    let busy_opts = SessionOpts {
        poll: PollMode::BusyPoll,
        cpu: a.cpu,
        ..base.clone()
    };
    let busy = run_session(&busy_opts, Passthrough { ports: 1 })?;
    let b = blocking.streamer.rx_to_tx;
    let row = |name: &str, s: &LatencySummary| Row {
        name: name.to_string(),
        packets: s.count,
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
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
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
        for r in &rows {
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
        for (name, s) in [("blocking", &blocking), ("busy-poll", &busy)] {
            print!("  {name}: ");
            report::print_counts(&s.streamer, Some(&s.radio));
        }
    }
    if let Some(p) = &a.plot {
        report::plot(
            p,
            "chdr pass-through, busy-poll",
            &busy.streamer.rx_to_tx_hist,
            Some(&busy.radio.end_to_end_hist),
        )?;
    }
    Ok(())
}
