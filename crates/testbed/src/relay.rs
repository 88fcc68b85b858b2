//! A UDP relay that puts an emulated link between two real endpoints.
//!
//! Clients send to the relay's listen address; the relay forwards each datagram to
//! the target through the forward [`Link`]. Answers from the target *host* — from the
//! target's port or any other port of the same IP address, as a NORM receiver sends its
//! NACKs from another port than the one data arrives on — go back through the return
//! [`Link`] to the client that last spoke, sent from the listen address (the client
//! cannot tell the target's ports apart; one reply path serves them all). Datagrams
//! from any other host are dropped. Delivery happens at the times the link model
//! computes; every datagram dropped, by the links or by the relay, is counted with its
//! reason ([`RelayStats::drops`]) and logged at debug level as it happens.

use crate::link::{Fate, Link, LinkConfig, LinkStats};
use crate::pacing::tighten_timer_slack;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest datagram the relay carries (a jumbo frame's UDP payload fits).
const MAX_DATAGRAM: usize = 65_535;
/// Datagrams waiting in the relay, per direction; beyond it they are dropped and
/// counted as queue drops (the link's own queue limit usually bites first).
const MAX_IN_FLIGHT: usize = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Direction {
    Forward,
    Return,
}

struct Pending {
    due: Duration,
    order: u64,
    direction: Direction,
    payload: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

/// Counters of a running relay; every datagram it did not pass on is in one of them.
#[derive(Clone, Debug, Default)]
pub struct RelayStats {
    pub forward: LinkStats,
    pub back: LinkStats,
    /// Datagrams dropped because the relay's own in-flight bound was reached.
    pub overflow: u64,
    /// Replies from the target before any client had spoken (nowhere to send them).
    pub orphan_replies: u64,
    /// Datagrams on the target-side socket from a host other than the target's.
    pub foreign_source: u64,
    /// Replies from the target host's other ports (passed on; not a drop).
    pub other_port_replies: u64,
    /// Due datagrams the kernel refused to send (socket buffer full, or the
    /// destination unreachable), per direction.
    pub send_failed_forward: u64,
    pub send_failed_back: u64,
}

impl RelayStats {
    /// Every drop reason with its count (zeros included), in a fixed order.
    pub fn drops(&self) -> [(&'static str, u64); 11] {
        [
            ("forward link loss", self.forward.dropped_loss),
            ("forward link burst loss", self.forward.dropped_burst),
            ("forward link queue full", self.forward.dropped_queue),
            ("forward send failed", self.send_failed_forward),
            ("return link loss", self.back.dropped_loss),
            ("return link burst loss", self.back.dropped_burst),
            ("return link queue full", self.back.dropped_queue),
            ("return send failed", self.send_failed_back),
            ("relay in-flight bound reached", self.overflow),
            ("reply before any client spoke", self.orphan_replies),
            (
                "datagram from a host other than the target",
                self.foreign_source,
            ),
        ]
    }

    /// All drops, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.drops().iter().map(|(_, n)| n).sum()
    }
}

/// A running relay; stops when dropped or on [`UdpRelay::stop`].
pub struct UdpRelay {
    listen_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<RelayStats>>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl UdpRelay {
    /// Bind `listen` (port 0 picks one) and relay to `target`.
    pub fn start(
        listen: SocketAddr,
        target: SocketAddr,
        forward: LinkConfig,
        back: LinkConfig,
    ) -> io::Result<Self> {
        let client_side = UdpSocket::bind(listen)?;
        let unspecified: SocketAddr = if target.is_ipv4() {
            "0.0.0.0:0".parse().expect("valid address")
        } else {
            "[::]:0".parse().expect("valid address")
        };
        // Not connected: a connected socket would only hear the target's own port.
        let target_side = UdpSocket::bind(unspecified)?;
        client_side.set_nonblocking(true)?;
        target_side.set_nonblocking(true)?;
        let listen_addr = client_side.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(RelayStats::default()));
        let worker = RelayWorker {
            client_side,
            target_side,
            forward: Link::new(forward),
            back: Link::new(back),
            client: None,
            queue: BinaryHeap::new(),
            order: 0,
            epoch: Instant::now(),
            stop: stop.clone(),
            stats: stats.clone(),
            target,
            counts: RelayStats::default(),
        };
        let thread = std::thread::Builder::new()
            .name("udp-relay".into())
            .spawn(move || worker.run())?;
        Ok(Self {
            listen_addr,
            stop,
            stats,
            thread: Some(thread),
        })
    }

    /// Where clients should send.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    pub fn stats(&self) -> RelayStats {
        self.stats.lock().expect("relay stats lock").clone()
    }

    /// Stop the relay and report any I/O error that ended it.
    pub fn stop(mut self) -> io::Result<RelayStats> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| io::Error::other("relay thread panicked"))??;
        }
        Ok(self.stats())
    }
}

impl Drop for UdpRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct RelayWorker {
    client_side: UdpSocket,
    target_side: UdpSocket,
    forward: Link,
    back: Link,
    client: Option<SocketAddr>,
    queue: BinaryHeap<Reverse<Pending>>,
    order: u64,
    epoch: Instant,
    stop: Arc<AtomicBool>,
    stats: Arc<Mutex<RelayStats>>,
    target: SocketAddr,
    /// The relay's own counters (the links keep theirs).
    counts: RelayStats,
}

impl RelayWorker {
    fn run(mut self) -> io::Result<()> {
        tighten_timer_slack();
        let mut buf = vec![0u8; MAX_DATAGRAM];
        while !self.stop.load(Ordering::Relaxed) {
            self.deliver_due()?;
            let wait = self
                .queue
                .peek()
                .map(|Reverse(p)| p.due.saturating_sub(self.epoch.elapsed()))
                .unwrap_or(Duration::from_millis(20))
                .min(Duration::from_millis(20));
            self.wait_readable(wait)?;
            self.drain(&mut buf, Direction::Forward)?;
            self.drain(&mut buf, Direction::Return)?;
            self.publish_stats();
        }
        self.publish_stats();
        Ok(())
    }

    fn publish_stats(&self) {
        let mut s = self.stats.lock().expect("relay stats lock");
        *s = RelayStats {
            forward: self.forward.stats().clone(),
            back: self.back.stats().clone(),
            ..self.counts.clone()
        };
    }

    fn wait_readable(&self, timeout: Duration) -> io::Result<()> {
        let mut fds = [
            libc::pollfd {
                fd: self.client_side.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.target_side.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
        let rc = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(())
    }

    fn drain(&mut self, buf: &mut [u8], direction: Direction) -> io::Result<()> {
        loop {
            let received = match direction {
                Direction::Forward => self.client_side.recv_from(buf).map(|(n, from)| {
                    self.client = Some(from);
                    n
                }),
                Direction::Return => match self.target_side.recv_from(buf) {
                    Ok((n, from)) if from.ip() != self.target.ip() => {
                        self.counts.foreign_source += 1;
                        tracing::debug!(
                            "relay: dropped a {n}-byte datagram from {from}: not the target host {}",
                            self.target.ip()
                        );
                        continue;
                    }
                    Ok((n, from)) => {
                        if from.port() != self.target.port() {
                            self.counts.other_port_replies += 1;
                        }
                        Ok(n)
                    }
                    Err(e) => Err(e),
                },
            };
            let n = match received {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // An ICMP error reported on the socket; the datagram it refers to was
                // already counted as sent. Keep relaying.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let now = self.epoch.elapsed();
            let link = match direction {
                Direction::Forward => &mut self.forward,
                Direction::Return => &mut self.back,
            };
            match link.offer(now, n) {
                Fate::Deliver { at, duplicate_at } => {
                    for due in std::iter::once(at).chain(duplicate_at) {
                        if self.queue.len() >= MAX_IN_FLIGHT {
                            self.counts.overflow += 1;
                            tracing::debug!(
                                "relay: dropped a {n}-byte {direction:?} datagram: {MAX_IN_FLIGHT} already in flight"
                            );
                            continue;
                        }
                        self.order += 1;
                        self.queue.push(Reverse(Pending {
                            due,
                            order: self.order,
                            direction,
                            payload: buf[..n].to_vec(),
                        }));
                    }
                }
                Fate::Dropped(reason) => {
                    tracing::debug!(
                        "relay: dropped a {n}-byte {direction:?} datagram: link {reason:?}"
                    );
                }
            }
        }
    }

    fn deliver_due(&mut self) -> io::Result<()> {
        while let Some(Reverse(p)) = self.queue.peek() {
            if p.due > self.epoch.elapsed() {
                break;
            }
            let Reverse(p) = self.queue.pop().expect("peeked");
            let sent = match p.direction {
                Direction::Forward => self.target_side.send_to(&p.payload, self.target),
                Direction::Return => match self.client {
                    Some(client) => self.client_side.send_to(&p.payload, client),
                    None => {
                        self.counts.orphan_replies += 1;
                        tracing::debug!(
                            "relay: dropped a {}-byte reply: no client has spoken yet",
                            p.payload.len()
                        );
                        continue;
                    }
                },
            };
            match sent {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::HostUnreachable
                            | io::ErrorKind::NetworkUnreachable
                    ) =>
                {
                    match p.direction {
                        Direction::Forward => self.counts.send_failed_forward += 1,
                        Direction::Return => self.counts.send_failed_back += 1,
                    }
                    tracing::debug!(
                        "relay: dropped a {}-byte {:?} datagram: send failed: {e}",
                        p.payload.len(),
                        p.direction
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_both_ways_with_delay_and_counts_loss() {
        let echo = UdpSocket::bind("127.0.0.1:0").unwrap();
        let echo_addr = echo.local_addr().unwrap();
        let echo_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            echo.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            while let Ok((n, from)) = echo.recv_from(&mut buf) {
                if &buf[..n] == b"quit" {
                    break;
                }
                echo.send_to(&buf[..n], from).unwrap();
            }
        });
        let delay = LinkConfig {
            delay: Duration::from_millis(5),
            ..Default::default()
        };
        let relay = UdpRelay::start(
            "127.0.0.1:0".parse().unwrap(),
            echo_addr,
            delay.clone(),
            delay,
        )
        .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let start = Instant::now();
        client.send_to(b"ping", relay.listen_addr()).unwrap();
        let mut buf = [0u8; 64];
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        assert!(
            start.elapsed() >= Duration::from_millis(10),
            "two 5 ms hops"
        );
        client.send_to(b"quit", relay.listen_addr()).unwrap();
        echo_thread.join().unwrap();
        let stats = relay.stop().unwrap();
        assert_eq!(stats.forward.delivered, 2);
        assert_eq!(stats.back.delivered, 1);
    }

    #[test]
    fn lossy_relay_drops_and_counts() {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let relay = UdpRelay::start(
            "127.0.0.1:0".parse().unwrap(),
            sink.local_addr().unwrap(),
            LinkConfig::parse("loss=50%,seed=9").unwrap(),
            LinkConfig::default(),
        )
        .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            client.send_to(b"x", relay.listen_addr()).unwrap();
        }
        sink.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = 0;
        let mut buf = [0u8; 8];
        while sink.recv(&mut buf).is_ok() {
            got += 1;
        }
        let stats = relay.stop().unwrap();
        assert_eq!(stats.forward.offered, 200);
        assert_eq!(got, stats.forward.delivered);
        assert_eq!(got + stats.forward.dropped_loss, 200);
        assert_eq!(stats.dropped(), stats.forward.dropped_loss);
        assert!((60..140).contains(&got), "{got}");
    }

    #[test]
    fn replies_from_other_ports_of_the_target_host_reach_the_client_and_strangers_are_counted() {
        let target = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other_port = UdpSocket::bind("127.0.0.1:0").unwrap();
        let stranger = UdpSocket::bind("127.0.0.2:0").unwrap();
        target
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let relay = UdpRelay::start(
            "127.0.0.1:0".parse().unwrap(),
            target.local_addr().unwrap(),
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        client.send_to(b"data", relay.listen_addr()).unwrap();
        let mut buf = [0u8; 64];
        let (n, relay_side) = target.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"data");
        // A NORM-like receiver answers from another port; a stranger tries to inject;
        // then the target answers from its own port. Same socket, so in this order.
        other_port.send_to(b"nack", relay_side).unwrap();
        stranger.send_to(b"evil", relay_side).unwrap();
        target.send_to(b"ack", relay_side).unwrap();
        let mut got = Vec::new();
        for _ in 0..2 {
            let (n, from) = client.recv_from(&mut buf).unwrap();
            assert_eq!(
                from,
                relay.listen_addr(),
                "replies come from the listen address"
            );
            got.push(buf[..n].to_vec());
        }
        assert_eq!(got, vec![b"nack".to_vec(), b"ack".to_vec()]);
        let stats = relay.stop().unwrap();
        assert_eq!(stats.foreign_source, 1);
        assert_eq!(stats.other_port_replies, 1);
        assert_eq!(stats.back.delivered, 2);
        assert_eq!(stats.dropped(), 1);
        client.set_nonblocking(true).unwrap();
        assert!(
            client.recv_from(&mut buf).is_err(),
            "the stranger's datagram leaked"
        );
    }
}
