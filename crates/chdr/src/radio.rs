//! The emulated streaming radio: RX cores producing timestamped packets on the
//! sample clock and TX cores playing received packets against it, behind two
//! UDP sockets. Time is the wall clock mapped to ticks at `rate_sps`.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use radiohost_iq::Ci16;

use crate::net::{self, realtime_ns, RecvBatch, SendBatch};
use crate::rx::{RxConfig, RxSource};
use radiohost_rt::stats::{LatencyHistogram, Summary};
use crate::tx::{TxAction, TxConfig, TxCore, TxCounters, TxEvent, TxPolicy};
use crate::wire::{ChdrHeader, MAX_PACKET_BYTES};

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

pub fn run_radio_on(
    s: RadioSockets,
    cfg: RadioConfig,
    stop: &AtomicBool,
) -> Result<RadioReport, RadioError> {
    if !(cfg.rate_sps > 0.0 && cfg.rate_sps.is_finite()) {
        return Err(RadioError::Config(format!(
            "sample rate {} must be positive",
            cfg.rate_sps
        )));
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
    let start_tick = (cfg.start_delay.as_secs_f64() * cfg.rate_sps) as u64;
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
    let epoch = Instant::now();
    let epoch_real = realtime_ns();
    let now_tick = || (epoch.elapsed().as_nanos() as f64 / ns_per_tick) as u64;
    let mut done_at: Option<Instant> = None;
    let mut ctl_seq = 0u16;

    loop {
        let now = now_tick();
        // RX: every packet whose last sample exists goes out, ports interleaved
        // per packet time as a radio's streams would be.
        loop {
            if out.len() + rx_cores.len() > out.capacity() {
                out.flush(&s.rx)?;
            }
            let mut any = false;
            for core in rx_cores.iter_mut() {
                any |= out.try_push(&host, |b| core.poll(now, b).map(|r| r.map(|(n, _)| n)))?;
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
            Some(t) => ((t.saturating_sub(now_tick())) as f64 * ns_per_tick) as i64,
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
