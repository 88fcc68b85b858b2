//! The real-time driver: the emulated hardware ([`Air`]) on one thread, each
//! relay host on its own thread configured with [`ThreadConfig`] (the
//! time-critical part), talking CHDR over loopback UDP with kernel receive
//! timestamps. Radio time is `CLOCK_REALTIME` (the clock of the kernel's
//! timestamps) since the run's start, as [`Time`], mapped to ticks at the sample rate
//! with [`Time::to_ticks`] / [`Time::from_ticks`].
//!
//! What a relay host must do within `delta` of a burst's RX timestamp: wait
//! for its last sample (one burst duration), get it from the radio (the air
//! thread's hand-over lag, reported as `emit_lag`), wake up, build the copy and
//! send it to the radio, which must have it before its TX time.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radiohost_chdr::net::{self, RecvBatch, SendBatch};
use radiohost_chdr::wire::ChdrHeader;
use radiohost_rt::clock::realtime_ns;
use radiohost_rt::{
    ApplyReport, LatencyHistogram, RtThreadBuilder, SpawnError, Summary, ThreadConfig, Time,
};

use crate::air::{radio_tx_epid, relay_of_epid, Air, AirConfig, AirError, AirReport};
use crate::schedule::{RelayScheduler, SchedulerConfig, SchedulerCounters};
use crate::tag::relay_packet_len;

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// `start_tick` is set by the driver (`lead` after the start).
    pub air: AirConfig,
    /// Setup of each relay host thread (the thing under test).
    pub relay_thread: ThreadConfig,
    /// Setup of the emulated-hardware thread.
    pub air_thread: ThreadConfig,
    /// Time between start and the first burst (threads settle).
    pub lead: Duration,
    /// Relay hosts spin on their socket instead of sleeping in recvmmsg.
    pub busy_poll: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Air(#[from] AirError),
    #[error("socket setup failed: {0}")]
    Io(#[from] io::Error),
    #[error("starting a thread failed: {0}")]
    Spawn(#[from] SpawnError),
    #[error("the {0} thread panicked")]
    Panicked(String),
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct HostReport {
    pub counters: SchedulerCounters,
    /// What the thread setup achieved (kernel read-back).
    pub setup: ApplyReport,
    /// Kernel RX timestamp of the stage-1 packet -> return of the sendmmsg
    /// carrying the copy.
    pub rx_to_tx: Summary,
    pub send_drops: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RunReport {
    pub air: AirReport,
    /// Counters of the emulated air the source's bursts crossed.
    pub medium: radiohost_testbed::air::AirStats,
    pub hosts: Vec<HostReport>,
    pub air_setup: ApplyReport,
    /// Radio had the whole burst -> its stage-1 packet was sent to the host.
    pub emit_lag: Summary,
    pub wall_s: f64,
    /// The run overran its time bound; open bursts were classified missing.
    pub stopped_early: bool,
}

/// `CLOCK_REALTIME` now, the clock of the kernel's receive timestamps.
fn realtime() -> Time {
    Time::from_ns(realtime_ns())
}

/// A kernel receive timestamp (`CLOCK_REALTIME` ns), or now when there is none.
fn stamp_or_now(kernel_rx_ns: Option<i64>) -> Time {
    kernel_rx_ns
        .and_then(|ns| u64::try_from(ns).ok())
        .map_or_else(realtime, Time::from_ns)
}

/// Signed `a - b` in ns (a latency that may come out negative).
fn signed_ns(a: Time, b: Time) -> i64 {
    (a.ns() as i128 - b.ns() as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn udp_socket() -> io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    // Without kernel timestamps the user-space receive time is used instead.
    let _ = net::enable_rx_timestamps(&s);
    net::set_buffer_sizes(&s, 4 << 20);
    Ok(s)
}

/// Run the relay network in real time. `progress` counts classified bursts.
pub fn run(mut cfg: RunConfig, progress: Arc<AtomicU64>) -> Result<RunReport, RunError> {
    // The air refuses a rate of 0; `max` keeps the conversion below defined until then.
    let rate = cfg.air.rate_sps.max(1) as f64;
    let n = cfg.air.burst_samples;
    cfg.air.start_tick = Time::from(cfg.lead).to_ticks(rate);
    // Validate before any thread starts.
    let air = Air::new(cfg.air.clone())?;
    let relays = air.relays();
    // Radio tick 0.
    let epoch = realtime();
    let air_sock = udp_socket()?;
    air_sock.set_nonblocking(true)?;
    let air_addr = air_sock.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut host_addrs = Vec::new();
    let mut hosts = Vec::new();
    for i in 0..relays {
        let sock = udp_socket()?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        host_addrs.push(sock.local_addr()?);
        let sched = RelayScheduler::new(SchedulerConfig {
            relay: i as u8,
            delta_ticks: cfg.air.delta_ticks,
            tx_epid: radio_tx_epid(i),
            max_samples: n,
        });
        let stop = stop.clone();
        let busy = cfg.busy_poll;
        let t = RtThreadBuilder::new(format!("relay-host-{i}"))
            .config(cfg.relay_thread.clone())
            .spawn(move |_| relay_host(sock, air_addr, sched, epoch, rate, busy, &stop))?;
        hosts.push(t);
    }
    let started = Instant::now();
    let run_ticks = (cfg.air.bursts.saturating_mul(cfg.air.period_ticks))
        .saturating_add(cfg.air.delta_ticks)
        .saturating_add(cfg.air.deadline_ticks);
    let bound = (Time::from(cfg.lead) + Time::from_ticks(run_ticks, rate) + Time::from_secs(5))
        .as_duration();
    let air_thread = RtThreadBuilder::new("relay-air")
        .config(cfg.air_thread.clone())
        .spawn(move |_| air_loop(air, air_sock, host_addrs, epoch, bound, progress))?;
    let air_setup = air_thread.report().clone();
    let air_out = air_thread
        .join()
        .map_err(|_| RunError::Panicked("emulated air".into()));
    stop.store(true, Ordering::Relaxed);
    let mut host_reports = Vec::new();
    for h in hosts {
        let setup = h.report().clone();
        let name = h.name().to_string();
        let (counters, hist, send_drops) = h.join().map_err(|_| RunError::Panicked(name))??;
        host_reports.push(HostReport {
            counters,
            setup,
            rx_to_tx: hist.summary(),
            send_drops,
        });
    }
    let (air_report, medium, emit_lag, stopped_early) = air_out??;
    Ok(RunReport {
        air: air_report,
        medium,
        hosts: host_reports,
        air_setup,
        emit_lag: emit_lag.summary(),
        wall_s: started.elapsed().as_secs_f64(),
        stopped_early,
    })
}

type HostOut = (SchedulerCounters, LatencyHistogram, u64);

/// A relay host: stage-1 packet in, copy stamped RX + delta out, at once.
fn relay_host(
    sock: UdpSocket,
    air: SocketAddr,
    mut sched: RelayScheduler,
    epoch: Time,
    rate: f64,
    busy: bool,
    stop: &AtomicBool,
) -> Result<HostOut, RunError> {
    let n = sched.config().max_samples;
    let mut rx = RecvBatch::new(32, relay_packet_len(n) + 64);
    let mut tx = SendBatch::new(32, RelayScheduler::out_len(n));
    let dest = net::to_sockaddr(&air);
    let mut hist = LatencyHistogram::new();
    let mut stamps: Vec<Time> = Vec::with_capacity(32);
    let mut send_drops = 0u64;
    let mut idle_checks = 0u32;
    loop {
        let got = rx.recv(&sock, !busy)?;
        for i in 0..got {
            let d = rx.get(i);
            let k = stamp_or_now(d.kernel_rx_ns);
            let now = (k - epoch).to_ticks(rate);
            let pushed = tx.try_push(&dest, |b| {
                Ok::<_, io::Error>(sched.on_stage1(d.bytes, now, b).ok().map(|s| s.len))
            })?;
            if pushed {
                stamps.push(k);
            }
            if tx.is_full() {
                flush_copies(&mut tx, &sock, &mut stamps, &mut hist, &mut send_drops)?;
            }
        }
        if !tx.is_empty() {
            flush_copies(&mut tx, &sock, &mut stamps, &mut hist, &mut send_drops)?;
        }
        if got == 0 {
            idle_checks = idle_checks.wrapping_add(1);
            if (!busy || idle_checks.is_multiple_of(1024)) && stop.load(Ordering::Relaxed) {
                break;
            }
        }
    }
    Ok((sched.counters(), hist, send_drops))
}

/// Send the batched copies; each one's latency is kernel RX stamp -> now.
fn flush_copies(
    tx: &mut SendBatch,
    sock: &UdpSocket,
    stamps: &mut Vec<Time>,
    hist: &mut LatencyHistogram,
    send_drops: &mut u64,
) -> io::Result<()> {
    let r = tx.flush(sock)?;
    let done = realtime();
    *send_drops += r.dropped as u64;
    for k in stamps.drain(..) {
        hist.record_signed(signed_ns(done, k));
    }
    Ok(())
}

type AirOut = (
    AirReport,
    radiohost_testbed::air::AirStats,
    LatencyHistogram,
    bool,
);

/// How long the air keeps running for late copies after the last verdict.
const LINGER: Duration = Duration::from_millis(50);

/// Spin (rather than sleep) this close to a stage-1 hand-over.
const SPIN: Time = Time::from_us(25);

fn air_loop(
    mut air: Air,
    sock: UdpSocket,
    hosts: Vec<SocketAddr>,
    epoch: Time,
    bound: Duration,
    progress: Arc<AtomicU64>,
) -> Result<AirOut, RunError> {
    radiohost_testbed::pacing::tighten_timer_slack();
    let n = air.config().burst_samples;
    let rate = air.config().rate_sps as f64;
    let relays = air.relays();
    let dests: Vec<_> = hosts.iter().map(net::to_sockaddr).collect();
    let mut out = SendBatch::new(64, relay_packet_len(n));
    let mut inb = RecvBatch::new(64, relay_packet_len(n) + 64);
    let mut lag = LatencyHistogram::new();
    let mut dues: Vec<u64> = Vec::with_capacity(64);
    let mut stage1 = vec![0u8; relay_packet_len(n)];
    let started = Instant::now();
    let mut stopped_early = false;
    let mut drained_at: Option<Instant> = None;
    let mut count = |_: &crate::classify::BurstOutcome| {
        progress.fetch_add(1, Ordering::Relaxed);
    };
    loop {
        let now = (realtime() - epoch).to_ticks(rate);
        // Stage-1 hand-over first: it is the timing-critical step.
        while let Some(s) = air.poll_stage1(now, &mut stage1)? {
            if out.is_full() {
                flush_stage1(&mut out, &sock, &mut dues, epoch, rate, &mut lag)?;
            }
            out.push(&dests[s.relay], |b| {
                b[..s.len].copy_from_slice(&stage1[..s.len]);
                Ok::<_, io::Error>(s.len)
            })?;
            dues.push(s.due);
        }
        flush_stage1(&mut out, &sock, &mut dues, epoch, rate, &mut lag)?;
        // Host TX packets, stamped with their kernel arrival time.
        loop {
            let got = inb.recv(&sock, false)?;
            for i in 0..got {
                let d = inb.get(i);
                let arrival = (stamp_or_now(d.kernel_rx_ns) - epoch).to_ticks(rate);
                let relay = ChdrHeader::parse(d.bytes)
                    .ok()
                    .and_then(|h| relay_of_epid(h.dst_epid, relays))
                    .unwrap_or(usize::MAX);
                air.on_relay_tx(relay, d.bytes, arrival);
            }
            if got < 64 {
                break;
            }
        }
        air.advance(now, &mut count);
        if air.finished() {
            // Let copies still on their way land (as stale), briefly.
            let t = *drained_at.get_or_insert_with(Instant::now);
            if air.next_wake().is_none() || t.elapsed() > LINGER {
                break;
            }
        }
        if started.elapsed() > bound {
            air.finish(&mut count);
            stopped_early = true;
            break;
        }
        let wake = air.next_wake().unwrap_or(now + 1);
        // Zero once `wake` has passed (Time saturates).
        let wait = (epoch + Time::from_ticks(wake, rate)) - realtime();
        // Sleep, but wake at once for host TX packets; spin only before a
        // stage-1 hand-over, the one step whose lateness the hosts would pay.
        if air.next_stage1_due() == Some(wake) {
            if wait > SPIN {
                wait_readable(&sock, wait - SPIN);
            } else if wait > Time::ZERO {
                std::hint::spin_loop();
            }
        } else if wait > Time::ZERO {
            wait_readable(&sock, wait);
        }
    }
    Ok((air.report(), air.medium_stats(), lag, stopped_early))
}

fn flush_stage1(
    out: &mut SendBatch,
    sock: &UdpSocket,
    dues: &mut Vec<u64>,
    epoch: Time,
    rate: f64,
    lag: &mut LatencyHistogram,
) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    out.flush(sock)?;
    let done = realtime();
    for due in dues.drain(..) {
        lag.record_signed(signed_ns(done, epoch + Time::from_ticks(due, rate)));
    }
    Ok(())
}

/// Sleep until `sock` is readable or `wait` passes.
fn wait_readable(sock: &UdpSocket, wait: Time) {
    let ns = wait.ns();
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
}
