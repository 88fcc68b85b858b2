//! Baseline: the kernel's TCP (Reno), one connection per receiver, through the same
//! link model as PMT, in real time ([`crate::tun`]). All connections run at once, as
//! PMT serves all receivers at once. The congestion window is read with TCP_INFO.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radiohost_testbed::link::LinkConfig;

use crate::sim::{floor_seconds, object_for, reverse_of, seeded, ReceiverOutcome, RunOutcome};
use crate::tun::{in_netns, unique_tag, IpLinkPair, TunError};

const PORT: u16 = 5001;

/// Why one TCP sender stopped early (logged; its receiver's outcome shows the loss).
#[derive(Debug, thiserror::Error)]
enum SenderError {
    #[error("connect {to}: {source}; the receiver's namespace or listener is not up")]
    Connect {
        to: SocketAddr,
        source: std::io::Error,
    },
    #[error("TCP_CONGESTION={algo}: {source}; load it (modprobe tcp_{algo}) or pick one of /proc/sys/net/ipv4/tcp_available_congestion_control")]
    Congestion {
        algo: String,
        source: std::io::Error,
    },
    #[error("could not clone the socket to sample its congestion window: {0}")]
    Probe(#[source] std::io::Error),
    #[error("write: {0}")]
    Write(#[source] std::io::Error),
}

/// Congestion window (segments) of a connected socket, from TCP_INFO.
pub fn tcp_cwnd(s: &TcpStream) -> Option<u32> {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len` bytes into it.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let rc = libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        );
        (rc == 0).then_some(info.tcpi_snd_cwnd)
    }
}

fn set_congestion(s: &TcpStream, algo: &str) -> std::io::Result<()> {
    // SAFETY: passes a byte buffer of the given length.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            13, // TCP_CONGESTION
            algo.as_ptr().cast(),
            algo.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

struct Received {
    bytes: Vec<u8>,
    done: Option<Duration>,
    timeline: Vec<(f64, u64)>,
}

/// Until when a TCP run goes on: its deadline, or a stop asked for (Ctrl-C).
#[derive(Clone)]
struct Until {
    deadline: Instant,
    stop: Arc<AtomicBool>,
}

impl Until {
    fn running(&self) -> bool {
        Instant::now() < self.deadline && !self.stop.load(Ordering::Relaxed)
    }
}

fn serve(listener: TcpListener, size: usize, start: Instant, until: Until) -> Received {
    let mut r = Received {
        bytes: Vec::with_capacity(size),
        done: None,
        timeline: vec![(0.0, 0)],
    };
    let _ = listener.set_nonblocking(true);
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if until.running() => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return r,
        }
    };
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 65536];
    while until.running() {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                r.bytes.extend_from_slice(&buf[..n]);
                let t = start.elapsed().as_secs_f64();
                r.timeline.push((t, r.bytes.len() as u64));
                if r.bytes.len() >= size && r.done.is_none() {
                    r.done = Some(start.elapsed());
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    r
}

fn send(
    to: SocketAddr,
    data: Arc<[u8]>,
    algo: String,
    start: Instant,
    until: Until,
    finished: Arc<AtomicBool>,
) -> Result<Vec<(f64, u32)>, SenderError> {
    let stream = loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(2)) {
            Ok(s) => break s,
            Err(source) if !until.running() => return Err(SenderError::Connect { to, source }),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    set_congestion(&stream, &algo).map_err(|source| SenderError::Congestion {
        algo: algo.clone(),
        source,
    })?;
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let probe = stream.try_clone().map_err(SenderError::Probe)?;
    let stop = finished.clone();
    let sampling = until.clone();
    let sampler = std::thread::spawn(move || {
        let mut cwnd = Vec::new();
        while !stop.load(Ordering::Relaxed) && sampling.running() {
            if let Some(c) = tcp_cwnd(&probe) {
                cwnd.push((start.elapsed().as_secs_f64(), c));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        cwnd
    });
    let mut w = &stream;
    let mut off = 0;
    while off < data.len() && until.running() {
        match w.write(&data[off..]) {
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => {
                finished.store(true, Ordering::Relaxed);
                return Err(SenderError::Write(e));
            }
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
    // Keep sampling until the receiver has everything (or the deadline).
    while !finished.load(Ordering::Relaxed) && until.running() {
        std::thread::sleep(Duration::from_millis(20));
    }
    finished.store(true, Ordering::Relaxed);
    Ok(sampler.join().unwrap_or_default())
}

/// Run one TCP connection per link concurrently, each stopped at `limit_factor` x its
/// floor, or all at once when `stop` is set (their results so far are kept). The
/// namespaces are named uniquely per call ([`unique_tag`]), so runs may overlap;
/// they are removed before this returns.
pub fn run_tcp(
    size: usize,
    links: &[LinkConfig],
    seed: u64,
    limit_factor: f64,
    congestion: &str,
    stop: &Arc<AtomicBool>,
) -> Result<RunOutcome, TunError> {
    let tag = unique_tag("rh");
    let object = object_for(size, seed);
    let mut pairs = Vec::new();
    for (i, l) in links.iter().enumerate() {
        let fwd = seeded(l, seed, i);
        let rev = reverse_of(&fwd);
        pairs.push(IpLinkPair::create(
            &format!("{tag}x{i}"),
            i as u8 + 1,
            fwd,
            rev,
        )?);
    }
    let start = Instant::now();
    let floors: Vec<f64> = links.iter().map(|l| floor_seconds(l, size)).collect();
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    let mut flags = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        let until = Until {
            deadline: start + Duration::from_secs_f64(floors[i] * limit_factor),
            stop: stop.clone(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let bind = SocketAddr::from((p.addr_b, PORT));
        let serving = until.clone();
        servers.push(in_netns(&p.ns_b, move || {
            let (listener, bind_error) = match TcpListener::bind(bind) {
                Ok(l) => (Some(l), None),
                Err(e) => (None, Some(e)),
            };
            let _ = tx.send(bind_error);
            listener.map(|l| serve(l, size, start, serving))
        })?);
        let bind_error = rx
            .recv()
            .map_err(|_| TunError::NotPermitted("server thread died".into()))?;
        if let Some(e) = bind_error {
            return Err(TunError::Command {
                cmd: format!("bind {bind}"),
                stderr: e.to_string(),
            });
        }
        let finished = Arc::new(AtomicBool::new(false));
        flags.push(finished.clone());
        let to = SocketAddr::from((p.addr_b, PORT));
        let data = object.clone();
        let algo = congestion.to_string();
        clients.push(in_netns(&p.ns_a, move || {
            send(to, data, algo, start, until, finished)
        })?);
    }
    let mut receivers = Vec::new();
    let mut cwnd = Vec::new();
    for (i, (s, c)) in servers.into_iter().zip(clients).enumerate() {
        let got = s.join()?;
        flags[i].store(true, Ordering::Relaxed);
        let trace = c.join()?.unwrap_or_else(|e| {
            tracing::warn!("TCP sender {i}: {e}");
            Vec::new()
        });
        let (bytes, done, timeline, intact) = match got {
            Some(r) => {
                let intact = r.bytes[..] == object[..];
                (r.bytes.len() as u64, r.done, r.timeline, intact)
            }
            None => (0, None, Vec::new(), false),
        };
        receivers.push(ReceiverOutcome {
            bytes,
            seconds: done.map(|d| d.as_secs_f64()),
            floor_seconds: floors[i],
            intact,
            timeline,
        });
        cwnd.push(trace);
    }
    for p in pairs {
        p.shutdown();
    }
    Ok(RunOutcome {
        receivers,
        trace: Vec::new(),
        sender_events: Vec::new(),
        sender_stats: None,
        receiver_stats: Vec::new(),
        cwnd,
    })
}

/// Addresses used by [`run_tcp`] for receiver `i` (sender side, receiver side).
pub fn tcp_addrs(i: usize) -> (Ipv4Addr, Ipv4Addr) {
    (
        Ipv4Addr::new(10, 77, i as u8 + 1, 1),
        Ipv4Addr::new(10, 77, i as u8 + 1, 2),
    )
}
