//! The emulated streaming radio, a front end over the one emulated air
//! (`radiohost_testbed::air`): RX cores send timestamped packets of what the air
//! received on their ports, TX cores play received packets into the air at their
//! timestamps, behind two UDP sockets. Time is the air's clock.
//!
//! [`run_radio_on_air`] takes an air and the ports of each core. [`run_radio`] and
//! [`run_radio_on`] build an identity air on the host clock at `rate_sps` whose first
//! ports carry the users' signal: [`crate::rx::test_signal`] of port `p` is emitted on air
//! port `p`, which RX core `p` hears; TX core `q` plays into air port `R + q` (`R` RX
//! cores), heard by no core, so RX carries exactly the test signal as before.
//!
//! TX samples go into the air as soon as their packet is accepted (the air holds
//! emissions ahead of its horizon), not when their time comes, so a loop that stalls
//! cannot make timed TX late on the air; the TX core still plays out against the clock
//! for its events, flow-control credit and the recording. An RX packet is captured one
//! air block after its last sample's time, so TX accepted at "now" is in the air before
//! anyone reads that tick; TX samples later than that are counted by the air as late
//! (see [`RadioReport::air`]).
//!
//! [`RadioAir::tx_loopback`] is the air where TX core `c` is heard on RX core `c`.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use radiohost_iq::{Cf32, Ci16};
use radiohost_testbed::air::{Air, AirClock, AirConfig, AirError, AirStats};

use crate::net::{self, realtime_ns, RecvBatch, SendBatch};
use crate::rx::{test_signal, RxConfig, RxSource};
use crate::tx::{TxAction, TxConfig, TxCore, TxCounters, TxEvent, TxPolicy};
use crate::wire::{ChdrHeader, MAX_PACKET_BYTES};
use radiohost_rt::stats::{LatencyHistogram, Summary};

#[derive(Clone, Debug)]
pub struct RadioConfig {
    /// Where RX packets are sent (the host streamer).
    pub host: SocketAddr,
    /// Local address of the RX sending socket.
    pub rx_bind: SocketAddr,
    /// Local address the TX endpoints listen on.
    pub tx_bind: SocketAddr,
    /// Destination EPID written into each RX port's packets.
    pub rx_dst_epids: Vec<u16>,
    /// EPID of each TX port (data packets are routed by their DstEPID).
    pub tx_epids: Vec<u16>,
    pub rate_sps: f64,
    pub samples_per_packet: usize,
    /// RX packets per port (the last one carries EOB).
    pub packets: u64,
    /// Delay before the first RX sample (lets the host set up).
    pub start_delay: Duration,
    pub tx_capacity_pkts: u32,
    pub policy: TxPolicy,
    /// Keep TX running this long after the last RX packet.
    pub linger: Duration,
    /// Keep the transmitted samples for verification / writing out.
    pub record: bool,
    /// Spin between packets instead of sleeping (exact pacing, one busy core).
    pub spin: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RadioError {
    #[error("cannot bind the emulated radio's {what} socket to {addr}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("socket I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error("invalid radio configuration: {0}")]
    Config(String),
    #[error("encoding an RX packet failed: {0}")]
    Wire(#[from] crate::wire::WireError),
    #[error("the emulated air: {0}")]
    Air(#[from] AirError),
    #[error("{cores} {what} cores but {ports} air ports given; give one air port per core")]
    AirPorts {
        what: &'static str,
        cores: usize,
        ports: usize,
    },
    #[error("the radio runs at {radio} S/s but its air at {air} S/s; use the air's rate")]
    AirRate { radio: f64, air: f64 },
}

/// The air a radio is a front end of, and its ports.
#[derive(Clone, Debug)]
pub struct RadioAir {
    pub air: Air,
    /// Air RX port of each RX core (`RadioConfig::rx_dst_epids` order).
    pub rx_ports: Vec<usize>,
    /// Air TX port of each TX core (`RadioConfig::tx_epids` order).
    pub tx_ports: Vec<usize>,
    /// Air TX ports carrying the users' signal: `test_signal(i)` on `test_signal_ports[i]`.
    pub test_signal_ports: Vec<usize>,
    /// Air tick of the first RX sample; `None`: `start_delay` after the air's now.
    pub start_tick: Option<u64>,
}

impl RadioAir {
    /// An identity air on the host clock at `rate_sps` where TX core `c` is heard,
    /// unchanged, on RX core `c`, and no test signal: RX carries exactly what was
    /// transmitted (zeros elsewhere). TX cores beyond the RX cores reach no one.
    pub fn tx_loopback(cfg: &RadioConfig) -> Result<Self, RadioError> {
        let (rx, tx) = (cfg.rx_dst_epids.len(), cfg.tx_epids.len());
        Ok(RadioAir {
            air: Self::identity_air(cfg, rx.max(tx))?,
            rx_ports: (0..rx).collect(),
            tx_ports: (0..tx).collect(),
            test_signal_ports: Vec::new(),
            start_tick: Some(Self::first_tick(cfg)),
        })
    }

    /// The air [`run_radio_on`] uses (see the module docs).
    pub fn test_signal_loopback(cfg: &RadioConfig) -> Result<Self, RadioError> {
        let (rx, tx) = (cfg.rx_dst_epids.len(), cfg.tx_epids.len());
        Ok(RadioAir {
            air: Self::identity_air(cfg, rx + tx)?,
            rx_ports: (0..rx).collect(),
            tx_ports: (rx..rx + tx).collect(),
            test_signal_ports: (0..rx).collect(),
            start_tick: Some(Self::first_tick(cfg)),
        })
    }

    /// A noiseless identity air of `ports` ports on the host clock at the radio's rate.
    fn identity_air(cfg: &RadioConfig, ports: usize) -> Result<Air, RadioError> {
        check_rate(cfg)?;
        Ok(Air::new(AirConfig {
            block: 128,
            history: (4 * cfg.samples_per_packet).max(1 << 16),
            max_pending: 1 << 22,
            clock: AirClock::Real,
            ..AirConfig::identity(cfg.rate_sps, ports.max(1))
        })?)
    }

    /// The air starts with the radio: its tick 0 is the radio's start, and the first RX
    /// sample comes `start_delay` later.
    fn first_tick(cfg: &RadioConfig) -> u64 {
        (cfg.start_delay.as_secs_f64() * cfg.rate_sps) as u64
    }
}

/// Emits the users' test signal into the air ahead of the RX cores.
struct SignalSource {
    port: usize,
    index: u16,
    /// First tick not yet emitted.
    next: u64,
    skipped: u64,
}

/// Largest test-signal chunk emitted per loop turn (bounds work after a stall).
const MAX_SOURCE_CHUNK: u64 = 1 << 18;

impl SignalSource {
    /// Emits up to `until`, never before what the air has already processed.
    fn emit(&mut self, air: &Air, until: u64, scratch: &mut Vec<Cf32>) {
        let horizon = air.horizon();
        if self.next < horizon {
            self.skipped += horizon - self.next;
            self.next = horizon;
        }
        let end = until.min(self.next + MAX_SOURCE_CHUNK);
        if end <= self.next {
            return;
        }
        scratch.clear();
        scratch.extend((self.next..end).map(|t| test_signal(self.index, t).to_cf32()));
        // Refusals (a full queue) are counted by the air.
        let _ = air.transmit(self.port, self.next, scratch);
        self.next = end;
    }
}

/// What one TX port put on the air.
#[derive(Clone, Debug, Default)]
pub struct TxRecording {
    /// Tick of the first recorded sample.
    pub origin: Option<u64>,
    pub samples: Vec<Ci16>,
    /// Places where the recording skips time (DropResync only): (index, ticks skipped).
    pub discontinuities: Vec<(usize, u64)>,
    /// Samples not kept because the recording was full.
    pub truncated: u64,
}

#[derive(serde::Serialize)]
pub struct RadioReport {
    pub rx_packets: u64,
    pub tx: Vec<TxCounters>,
    /// UHD-style event letters in order (U underrun, L late, S sequence, O overflow).
    pub event_letters: String,
    pub events: Vec<(usize, TxEvent)>,
    /// RX timestamp (first sample captured) -> TX packet arrival at the radio.
    pub end_to_end: Summary,
    /// Packet duration: the part of `end_to_end` spent capturing samples.
    pub packet_duration_ns: u64,
    pub malformed: u64,
    pub unknown_epid: u64,
    /// What the air did (late TX samples, drops, samples processed).
    pub air: AirStats,
    /// RX packets whose samples the air could not give (sent as zeros).
    pub rx_air_lost: u64,
    /// Test-signal ticks never emitted because the air had moved past them.
    pub source_skipped: u64,
    #[serde(skip)]
    pub recordings: Vec<TxRecording>,
    #[serde(skip)]
    pub end_to_end_hist: LatencyHistogram,
}

const MAX_EVENTS: usize = 10_000;

/// Bind the radio's sockets (so callers know the ports before running).
pub struct RadioSockets {
    pub rx: UdpSocket,
    pub tx: UdpSocket,
}

impl RadioSockets {
    pub fn bind(cfg: &RadioConfig) -> Result<Self, RadioError> {
        let rx = UdpSocket::bind(cfg.rx_bind).map_err(|source| RadioError::Bind {
            what: "RX",
            addr: cfg.rx_bind,
            source,
        })?;
        let tx = UdpSocket::bind(cfg.tx_bind).map_err(|source| RadioError::Bind {
            what: "TX",
            addr: cfg.tx_bind,
            source,
        })?;
        Ok(RadioSockets { rx, tx })
    }
}

pub fn run_radio(cfg: RadioConfig, stop: &AtomicBool) -> Result<RadioReport, RadioError> {
    let s = RadioSockets::bind(&cfg)?;
    run_radio_on(s, cfg, stop)
}

/// Runs on bound sockets with the test-signal air of [`RadioAir::test_signal_loopback`].
pub fn run_radio_on(
    s: RadioSockets,
    cfg: RadioConfig,
    stop: &AtomicBool,
) -> Result<RadioReport, RadioError> {
    check_rate(&cfg)?;
    let air = RadioAir::test_signal_loopback(&cfg)?;
    run_radio_on_air(s, cfg, air, stop)
}

fn check_rate(cfg: &RadioConfig) -> Result<(), RadioError> {
    if !(cfg.rate_sps > 0.0 && cfg.rate_sps.is_finite()) {
        return Err(RadioError::Config(format!(
            "sample rate {} must be positive",
            cfg.rate_sps
        )));
    }
    Ok(())
}

/// Runs on bound sockets as a front end of `radio_air` (its clock must be moving:
/// `AirClock::Real`, or a simulated clock someone advances).
pub fn run_radio_on_air(
    s: RadioSockets,
    cfg: RadioConfig,
    radio_air: RadioAir,
    stop: &AtomicBool,
) -> Result<RadioReport, RadioError> {
    check_rate(&cfg)?;
    let RadioAir {
        air,
        rx_ports,
        tx_ports,
        test_signal_ports,
        start_tick,
    } = radio_air;
    if air.rate_hz() != cfg.rate_sps {
        return Err(RadioError::AirRate {
            radio: cfg.rate_sps,
            air: air.rate_hz(),
        });
    }
    for (what, cores, ports) in [
        ("RX", cfg.rx_dst_epids.len(), rx_ports.len()),
        ("TX", cfg.tx_epids.len(), tx_ports.len()),
    ] {
        if cores != ports {
            return Err(RadioError::AirPorts { what, cores, ports });
        }
    }
    if cfg.samples_per_packet == 0
        || crate::wire::data_packet_len(true, 31, cfg.samples_per_packet) > MAX_PACKET_BYTES
    {
        return Err(RadioError::Config(format!(
            "{} samples per packet do not fit a CHDR packet (1..=16000)",
            cfg.samples_per_packet
        )));
    }
    s.tx.set_nonblocking(true)?;
    net::set_buffer_sizes(&s.tx, 8 << 20);
    net::set_buffer_sizes(&s.rx, 8 << 20);
    let spp = cfg.samples_per_packet;
    let ns_per_tick = 1e9 / cfg.rate_sps;
    let start_tick = start_tick
        .unwrap_or_else(|| air.now_tick() + (cfg.start_delay.as_secs_f64() * cfg.rate_sps) as u64);
    // RX reads a tick one block after it, so TX played at that tick is already in.
    let rx_lag = air.block() as u64;
    let mut sources: Vec<SignalSource> = test_signal_ports
        .iter()
        .enumerate()
        .map(|(i, &port)| SignalSource {
            port,
            index: i as u16,
            next: start_tick,
            skipped: 0,
        })
        .collect();
    let (mut rx_scratch, mut tx_scratch, mut source_scratch) = (
        vec![Cf32::new(0.0, 0.0); spp],
        Vec::<Cf32>::with_capacity(spp),
        Vec::<Cf32>::new(),
    );
    let mut rx_air_lost = 0u64;
    let mut rx_cores: Vec<RxSource> = cfg
        .rx_dst_epids
        .iter()
        .enumerate()
        .map(|(p, &e)| {
            RxSource::new(RxConfig {
                port: p as u16,
                dst_epid: e,
                samples_per_packet: spp,
                start_tick,
                packets: Some(cfg.packets),
            })
        })
        .collect();
    let mut tx_cores: Vec<TxCore> = cfg
        .tx_epids
        .iter()
        .map(|&e| {
            TxCore::new(TxConfig {
                epid: e,
                capacity_pkts: cfg.tx_capacity_pkts,
                max_samples: spp,
                policy: cfg.policy,
            })
        })
        .collect();
    // Room for the input plus up to 1 s of zero-fill (e.g. a late end of burst).
    let record_cap = if cfg.record {
        cfg.packets as usize * spp + (cfg.rate_sps as usize).min(4_000_000)
    } else {
        0
    };
    let mut recordings: Vec<TxRecording> = (0..tx_cores.len())
        .map(|_| TxRecording {
            samples: Vec::with_capacity(record_cap),
            ..Default::default()
        })
        .collect();
    let host = net::to_sockaddr(&cfg.host);
    let mut out = SendBatch::new(64, MAX_PACKET_BYTES);
    let mut inb = RecvBatch::new(64, MAX_PACKET_BYTES);
    let mut e2e = LatencyHistogram::new();
    let mut events: Vec<(usize, TxEvent)> = Vec::with_capacity(256);
    let mut letters = String::new();
    let (mut malformed, mut unknown_epid) = (0u64, 0u64);
    let mut status_dest: Option<(libc::sockaddr_storage, libc::socklen_t)> = None;
    // Wall-clock time of air tick 0, for the end-to-end latency.
    let epoch_real = realtime_ns() - air.now().ns() as i64;
    let now_tick = || air.now_tick();
    let mut done_at: Option<Instant> = None;
    let mut ctl_seq = 0u16;

    loop {
        let now = now_tick();
        // The users' signal goes into the air ahead of what RX will read.
        for src in sources.iter_mut() {
            src.emit(&air, now + 2 * (spp as u64 + rx_lag), &mut source_scratch);
        }
        let now_rx = now.saturating_sub(rx_lag);
        // RX: every packet whose last sample the air has goes out, ports interleaved
        // per packet time as a radio's streams would be.
        loop {
            if out.len() + rx_cores.len() > out.capacity() {
                out.flush(&s.rx)?;
            }
            let mut any = false;
            for (core, &port) in rx_cores.iter_mut().zip(&rx_ports) {
                let (air, scratch, lost) = (&air, &mut rx_scratch, &mut rx_air_lost);
                any |= out.try_push(&host, |b| {
                    core.poll_with(now_rx, b, |ts, samples| {
                        let buf = &mut scratch[..samples.len()];
                        if air.receive(port, ts, buf).is_ok() {
                            for (s, x) in samples.iter_mut().zip(buf.iter()) {
                                *s = Ci16::from_cf32(*x);
                            }
                        } else {
                            *lost += 1;
                            samples.fill(Ci16::default());
                        }
                    })
                    .map(|r| r.map(|(n, _)| n))
                })?;
            }
            if !any {
                break;
            }
        }
        out.flush(&s.rx)?;

        // TX: take in everything that arrived, then play out to `now`.
        let now = now_tick();
        let n = inb.recv(&s.tx, false)?;
        for i in 0..n {
            let d = inb.get(i);
            let arrival_real = realtime_ns();
            let Ok(h) = ChdrHeader::parse(d.bytes) else {
                malformed += 1;
                continue;
            };
            let Some(port) = tx_cores.iter().position(|c| c.config().epid == h.dst_epid) else {
                unknown_epid += 1;
                continue;
            };
            if let Some(from) = d.from {
                status_dest = Some(net::to_sockaddr(&from));
            }
            let core = &mut tx_cores[port];
            let mut pending_status = Vec::new();
            let res = core.on_datagram(d.bytes, now, &mut |a| match a {
                TxAction::Event(e) => {
                    if let Some(l) = e.letter() {
                        letters.push(l);
                    }
                    if events.len() < MAX_EVENTS {
                        events.push((port, e));
                    }
                }
                TxAction::Status(st) => pending_status.push(st),
            });
            match res {
                Ok(Some(arrival)) => {
                    // Into the air now, ahead of its time: the core plays every queued
                    // sample at exactly its tick, and an emission ahead of the horizon
                    // waits in the air, so a stalled loop cannot make it late.
                    if let Some(samples) = core.queued_at(arrival.queued_tick) {
                        tx_scratch.clear();
                        tx_scratch.extend(samples.iter().map(|s| s.to_cf32()));
                        // Late or refused samples are counted by the air.
                        let _ = air.transmit(tx_ports[port], arrival.queued_tick, &tx_scratch);
                    }
                    if let Some(rx_ts) = arrival.rx_timestamp {
                        let captured = epoch_real + (rx_ts as f64 * ns_per_tick) as i64;
                        e2e.record_signed(arrival_real - captured);
                    }
                }
                Ok(None) => {}
                Err(_) => malformed += 1,
            }
            let peer = core.peer_epid();
            if let Some(dest) = status_dest {
                for st in pending_status {
                    let seq = ctl_seq;
                    ctl_seq = ctl_seq.wrapping_add(1);
                    if out.is_full() {
                        out.flush(&s.tx)?;
                    }
                    out.push(&dest, |b| st.write(b, seq, peer))?;
                }
            }
        }
        let now = now_tick();
        for (port, core) in tx_cores.iter_mut().enumerate() {
            let rec = &mut recordings[port];
            let mut statuses = Vec::new();
            // Queued samples went into the air on arrival and zero fill adds nothing:
            // playing out only keeps the core's clock, events and credit, and records.
            core.advance(
                now,
                &mut |tick, samples: &[Ci16]| {
                    if !cfg.record {
                        return;
                    }
                    match rec.origin {
                        None => rec.origin = Some(tick),
                        Some(o) => {
                            let skipped: u64 = rec.discontinuities.iter().map(|d| d.1).sum();
                            let expect = o + rec.samples.len() as u64 + rec.truncated + skipped;
                            if tick != expect {
                                rec.discontinuities
                                    .push((rec.samples.len(), tick.saturating_sub(expect)));
                            }
                        }
                    }
                    let room = rec.samples.capacity() - rec.samples.len();
                    let keep = samples.len().min(room);
                    rec.samples.extend_from_slice(&samples[..keep]);
                    rec.truncated += (samples.len() - keep) as u64;
                },
                &mut |a| match a {
                    TxAction::Event(e) => {
                        if let Some(l) = e.letter() {
                            letters.push(l);
                        }
                        if events.len() < MAX_EVENTS {
                            events.push((port, e));
                        }
                    }
                    TxAction::Status(st) => statuses.push(st),
                },
            );
            if let Some(dest) = status_dest {
                let peer = core.peer_epid();
                for st in statuses {
                    let seq = ctl_seq;
                    ctl_seq = ctl_seq.wrapping_add(1);
                    if out.is_full() {
                        out.flush(&s.tx)?;
                    }
                    out.push(&dest, |b| st.write(b, seq, peer))?;
                }
            }
        }
        out.flush(&s.tx)?;

        if stop.load(Ordering::Relaxed) {
            break;
        }
        let rx_done = rx_cores.iter().all(|c| c.finished());
        if rx_done {
            let t = *done_at.get_or_insert_with(Instant::now);
            if t.elapsed() >= cfg.linger {
                break;
            }
        }
        // Wait for the next RX packet or a TX datagram, whichever comes first.
        let next_due = rx_cores
            .iter()
            .filter(|c| !c.finished())
            .map(|c| c.next_due())
            .min();
        let wait_ns = match next_due {
            Some(t) => ((t + rx_lag).saturating_sub(now_tick()) as f64 * ns_per_tick) as i64,
            None => 1_000_000,
        };
        if !cfg.spin && wait_ns > 20_000 {
            // Wake early for TX traffic; TX playout granularity is bounded by this.
            wait_readable(&s.tx, (wait_ns - 10_000).min(200_000));
        } else if n == 0 {
            std::hint::spin_loop();
        }
    }
    Ok(RadioReport {
        rx_packets: rx_cores.iter().map(|c| c.packets_sent()).sum(),
        tx: tx_cores.iter().map(|c| c.counters()).collect(),
        event_letters: letters,
        events,
        end_to_end: e2e.summary(),
        packet_duration_ns: (spp as f64 * ns_per_tick) as u64,
        malformed,
        unknown_epid,
        air: air.stats(),
        rx_air_lost,
        source_skipped: sources.iter().map(|s| s.skipped).sum(),
        recordings,
        end_to_end_hist: e2e,
    })
}

/// Sleep until `sock` is readable or `ns` pass.
fn wait_readable(sock: &UdpSocket, ns: i64) {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: ns / 1_000_000_000,
        tv_nsec: ns % 1_000_000_000,
    };
    // SAFETY: one valid pollfd, valid timespec, no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DataPacket;
    use radiohost_dsp::MimoTaps;
    use radiohost_testbed::air::AirChannel;

    /// An RX core streams what another front end put into a shared air, through the
    /// air's channel: here a gain of 0.5 on a 1x1 air.
    #[test]
    fn rx_streams_what_the_air_received() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let host = UdpSocket::bind(any).unwrap();
        host.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let cfg = RadioConfig {
            host: host.local_addr().unwrap(),
            rx_bind: any,
            tx_bind: any,
            rx_dst_epids: vec![0x10],
            tx_epids: vec![],
            rate_sps: 200e3,
            samples_per_packet: 100,
            packets: 3,
            start_delay: Duration::ZERO,
            tx_capacity_pkts: 8,
            policy: TxPolicy::ZeroFill,
            linger: Duration::ZERO,
            record: false,
            spin: false,
        };
        let taps = MimoTaps::siso(vec![Cf32::new(0.5, 0.0)]).unwrap();
        let air = Air::new(AirConfig {
            channel: AirChannel::Static(taps),
            clock: AirClock::Real,
            ..AirConfig::identity(cfg.rate_sps, 1)
        })
        .unwrap();
        // Another front end's burst, scheduled before the radio starts reading.
        let start = air.now_tick() + 2000;
        let burst: Vec<Cf32> = (0..300)
            .map(|i| Cf32::new((i % 7) as f32 * 0.1, -(i % 5) as f32 * 0.1))
            .collect();
        air.transmit(0, start, &burst).unwrap();
        let radio_air = RadioAir {
            air: air.clone(),
            rx_ports: vec![0],
            tx_ports: vec![],
            test_signal_ports: vec![],
            start_tick: Some(start),
        };
        let sockets = RadioSockets::bind(&cfg).unwrap();
        let stop = AtomicBool::new(false);
        let report = run_radio_on_air(sockets, cfg, radio_air, &stop).unwrap();
        assert_eq!(report.rx_packets, 3);
        assert_eq!(report.rx_air_lost, 0);
        let mut buf = vec![0u8; MAX_PACKET_BYTES];
        for k in 0..3u64 {
            let n = host.recv(&mut buf).unwrap();
            let p = DataPacket::parse(&buf[..n]).unwrap();
            assert_eq!(p.timestamp, Some(start + 100 * k));
            let mut s = vec![Ci16::default(); 100];
            p.read_samples(&mut s).unwrap();
            for (i, got) in s.iter().enumerate() {
                let want = Ci16::from_cf32(burst[100 * k as usize + i] * 0.5);
                assert!(
                    (got.re - want.re).abs() <= 1 && (got.im - want.im).abs() <= 1,
                    "packet {k} sample {i}: {got:?} vs {want:?}"
                );
            }
        }
    }

    #[test]
    fn mismatched_air_ports_are_refused() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let cfg = RadioConfig {
            host: any,
            rx_bind: any,
            tx_bind: any,
            rx_dst_epids: vec![1, 2],
            tx_epids: vec![],
            rate_sps: 1e6,
            samples_per_packet: 100,
            packets: 1,
            start_delay: Duration::ZERO,
            tx_capacity_pkts: 8,
            policy: TxPolicy::ZeroFill,
            linger: Duration::ZERO,
            record: false,
            spin: false,
        };
        let mut radio_air = RadioAir::test_signal_loopback(&cfg).unwrap();
        radio_air.rx_ports.pop();
        let sockets = RadioSockets::bind(&cfg).unwrap();
        let err = run_radio_on_air(sockets, cfg, radio_air, &AtomicBool::new(false));
        assert!(matches!(
            err,
            Err(RadioError::AirPorts {
                what: "RX",
                cores: 2,
                ports: 1
            })
        ));
    }
}
