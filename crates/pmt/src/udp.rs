//! UDP driver: runs the sans-IO cores over real sockets.
//!
//! The sender unicasts to each receiver. Receivers may sit behind different local
//! interfaces: each receiver can name the local address to send from; the driver opens
//! one socket per distinct local address (default: one wildcard socket, and the
//! kernel's routing picks the interface per destination) and waits on all of them
//! with `poll(2)`. Both drivers stop cleanly when the `stop` flag is raised.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::receiver::{Receiver, ReceiverConfig, ReceiverEvent, ReceiverStats};
use crate::sender::{PeerState, Sender, SenderConfig, SenderError, SenderEvent, SenderStats};

#[derive(Debug, Error)]
pub enum DriverError {
    #[error(
        "cannot bind UDP socket on {addr}: {source} (is the address local and the port free?)"
    )]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("socket I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Sender(#[from] SenderError),
    #[error("stopped before completion")]
    Stopped,
    #[error("no sender heard within {0:?}: is `radiohost pmt send` running and pointed at this address?")]
    Idle(Duration),
    #[error("writing the received object failed: {0}")]
    Sink(io::Error),
}

/// One destination: where to send and, optionally, which local address to send from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Destination {
    pub to: SocketAddr,
    pub local: Option<SocketAddr>,
}

/// Progress seen by the drivers' callbacks.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Sender side: receiver `i` has `acked` of `total` bytes acknowledged.
    Acked {
        receiver: usize,
        acked: u64,
        total: u64,
        group: usize,
        srtt: Duration,
    },
    Sender(SenderEvent),
    /// Receiver side: `got` of `total` bytes in order.
    Received {
        got: u64,
        total: u64,
    },
    Complete {
        intact: bool,
    },
}

#[derive(Clone, Debug)]
pub struct SendReport {
    pub elapsed: Duration,
    /// Per receiver: Some(intact) when done, None when failed.
    pub outcome: Vec<Option<bool>>,
    pub done_after: Vec<Option<Duration>>,
    pub stats: SenderStats,
}

fn wait_readable(socks: &[UdpSocket], timeout: Duration) -> io::Result<()> {
    let mut fds: Vec<libc::pollfd> = socks
        .iter()
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().clamp(0, 100) as libc::c_int;
    // SAFETY: fds is a valid array of pollfd for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Send `object` to every destination; returns when all are done or failed.
pub fn send_object(
    cfg: SenderConfig,
    object: Arc<[u8]>,
    dests: &[Destination],
    stop: &AtomicBool,
    mut progress: impl FnMut(Progress),
) -> Result<SendReport, DriverError> {
    let start = Instant::now();
    let mut locals: Vec<SocketAddr> = Vec::new();
    let mut sock_of = Vec::with_capacity(dests.len());
    for d in dests {
        let local = d.local.unwrap_or_else(|| {
            if d.to.is_ipv4() {
                SocketAddr::from(([0, 0, 0, 0], 0))
            } else {
                SocketAddr::from(([0u16; 8], 0))
            }
        });
        let i = locals.iter().position(|&l| l == local).unwrap_or_else(|| {
            locals.push(local);
            locals.len() - 1
        });
        sock_of.push(i);
    }
    let socks = locals
        .iter()
        .map(|&addr| {
            let s = UdpSocket::bind(addr).map_err(|source| DriverError::Bind { addr, source })?;
            s.set_nonblocking(true)?;
            Ok(s)
        })
        .collect::<Result<Vec<_>, DriverError>>()?;
    let addrs: Vec<SocketAddr> = dests.iter().map(|d| d.to).collect();
    let total = object.len() as u64;
    let mut sender = Sender::new(cfg, object, &addrs, Duration::ZERO)?;
    let mut buf = Vec::with_capacity(2048);
    let mut rx = vec![0u8; 65536];
    let mut done_after = vec![None; dests.len()];
    let mut last_report = Instant::now() - Duration::from_secs(1);
    while !sender.is_finished() {
        if stop.load(Ordering::Relaxed) {
            return Err(DriverError::Stopped);
        }
        let now = start.elapsed();
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        while let Some(to) = sender.poll_transmit(&mut buf) {
            let i = addrs.iter().position(|&a| a == to).unwrap_or(0);
            match socks[sock_of[i]].send_to(&buf, to) {
                Ok(_) => {}
                // A full socket buffer or an unreachable host is a loss the protocol repairs.
                Err(e) => tracing::debug!("send to {to}: {e}"),
            }
        }
        while let Some(e) = sender.poll_event() {
            if let SenderEvent::ReceiverDone { receiver, .. } = e {
                done_after[receiver] = Some(start.elapsed());
            }
            progress(Progress::Sender(e));
        }
        if last_report.elapsed() >= Duration::from_millis(100) {
            last_report = Instant::now();
            for i in 0..addrs.len() {
                let p = sender.peer(i);
                progress(Progress::Acked {
                    receiver: i,
                    acked: p.acked_bytes,
                    total,
                    group: p.group,
                    srtt: p.srtt,
                });
            }
        }
        let wait = sender
            .poll_timeout()
            .map_or(Duration::from_millis(100), |t| {
                t.saturating_sub(start.elapsed())
            });
        wait_readable(&socks, wait)?;
        for s in &socks {
            loop {
                match s.recv_from(&mut rx) {
                    Ok((n, from)) => sender.handle_datagram(start.elapsed(), from, &rx[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    while let Some(e) = sender.poll_event() {
        if let SenderEvent::ReceiverDone { receiver, .. } = e {
            done_after[receiver] = Some(start.elapsed());
        }
        progress(Progress::Sender(e));
    }
    let outcome = (0..addrs.len())
        .map(|i| match sender.peer(i).state {
            PeerState::Done { intact } => Some(intact),
            _ => None,
        })
        .collect();
    Ok(SendReport {
        elapsed: start.elapsed(),
        outcome,
        done_after,
        stats: sender.stats().clone(),
    })
}

/// What one receive did (fields in JSON key order). As JSON, `transfer` is `seconds`
/// and `listened` is `listened_seconds`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RecvReport {
    pub bytes: u64,
    pub from: Option<SocketAddr>,
    pub intact: bool,
    /// From bind to return: includes waiting for the sender and the linger.
    #[serde(rename = "listened_seconds", serialize_with = "seconds")]
    pub listened: Duration,
    /// Transfer time: from the arrival of the first datagram of the accepted sender
    /// to the object being complete, its SHA-256 checked and its bytes written.
    #[serde(rename = "seconds", serialize_with = "seconds")]
    pub transfer: Duration,
    pub stats: ReceiverStats,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Receive one object on `listen`, writing in-order bytes to `sink`. After completion
/// it keeps answering for `linger` so a lost final ACK is repaired. Gives up after
/// `idle` without any packet.
pub fn recv_object(
    cfg: ReceiverConfig,
    listen: SocketAddr,
    sink: &mut dyn Write,
    linger: Duration,
    idle: Duration,
    stop: &AtomicBool,
    progress: impl FnMut(Progress),
) -> Result<RecvReport, DriverError> {
    let sock = UdpSocket::bind(listen).map_err(|source| DriverError::Bind {
        addr: listen,
        source,
    })?;
    recv_object_on(cfg, sock, sink, linger, idle, stop, progress)
}

/// [`recv_object`] on a socket the caller bound (e.g. to port 0).
pub fn recv_object_on(
    cfg: ReceiverConfig,
    sock: UdpSocket,
    sink: &mut dyn Write,
    linger: Duration,
    idle: Duration,
    stop: &AtomicBool,
    mut progress: impl FnMut(Progress),
) -> Result<RecvReport, DriverError> {
    sock.set_nonblocking(true)?;
    let socks = [sock];
    let start = Instant::now();
    let mut r = Receiver::new(cfg);
    let mut buf = Vec::with_capacity(256);
    let mut rx = vec![0u8; 65536];
    let mut chunk = vec![0u8; 65536];
    let mut written = 0u64;
    let mut complete_at: Option<Instant> = None;
    let mut first_at: Option<Instant> = None;
    let mut intact = false;
    let mut last_packet = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(DriverError::Stopped);
        }
        if complete_at.is_some_and(|t| t.elapsed() >= linger) {
            break;
        }
        if last_packet.elapsed() >= idle {
            if complete_at.is_some() {
                break;
            }
            return Err(DriverError::Idle(idle));
        }
        let now = start.elapsed();
        if r.poll_timeout().is_some_and(|t| t <= now) {
            r.handle_timeout(now);
        }
        loop {
            let n = r.read(&mut chunk);
            if n == 0 {
                break;
            }
            sink.write_all(&chunk[..n]).map_err(DriverError::Sink)?;
            written += n as u64;
        }
        while let Some(to) = r.poll_transmit(start.elapsed(), &mut buf) {
            if let Err(e) = socks[0].send_to(&buf, to) {
                tracing::debug!("ack to {to}: {e}");
            }
        }
        while let Some(e) = r.poll_event() {
            match e {
                ReceiverEvent::Complete { intact: ok } => {
                    intact = ok;
                    complete_at = Some(Instant::now());
                    progress(Progress::Complete { intact: ok });
                }
                ReceiverEvent::Started { .. } => {}
            }
        }
        if let Some(total) = r.object_len() {
            progress(Progress::Received {
                got: written,
                total,
            });
        }
        let wait = r.poll_timeout().map_or(Duration::from_millis(100), |t| {
            t.saturating_sub(start.elapsed())
        });
        wait_readable(&socks, wait)?;
        loop {
            match socks[0].recv_from(&mut rx) {
                Ok((n, from)) => {
                    last_packet = Instant::now();
                    r.handle_datagram(start.elapsed(), from, &rx[..n]);
                    // The first datagram the receiver accepted (it locks onto its sender).
                    if first_at.is_none() && r.sender().is_some() {
                        first_at = Some(last_packet);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
    sink.flush().map_err(DriverError::Sink)?;
    // The loop ends only after completion, so both instants are set; the fallbacks
    // keep this total.
    let done = complete_at.unwrap_or_else(Instant::now);
    let transfer = first_at.map_or(Duration::ZERO, |f| done.saturating_duration_since(f));
    Ok(RecvReport {
        from: r.sender(),
        bytes: written,
        intact,
        listened: start.elapsed(),
        transfer,
        stats: r.stats().clone(),
    })
}
