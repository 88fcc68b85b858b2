//! A UDP relay that puts an emulated link between two real endpoints.
//!
//! Clients send to the relay's listen address; the relay forwards each datagram to
//! the target through the forward [`Link`], and the target's answers back to the
//! client that last spoke, through the return [`Link`]. Delivery happens at the
//! times the link model computes; drops are counted in the links' stats.

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

/// Counters of a running relay.
#[derive(Clone, Debug, Default)]
pub struct RelayStats {
    pub forward: LinkStats,
    pub back: LinkStats,
    /// Datagrams dropped because the relay's own in-flight bound was reached.
    pub overflow: u64,
    /// Replies from the target before any client had spoken (nowhere to send them).
    pub orphan_replies: u64,
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
        let target_side = UdpSocket::bind(unspecified)?;
        target_side.connect(target)?;
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
            overflow: 0,
            orphans: 0,
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
    overflow: u64,
    orphans: u64,
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
        s.forward = self.forward.stats().clone();
        s.back = self.back.stats().clone();
        s.overflow = self.overflow;
        s.orphan_replies = self.orphans;
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
                Direction::Return => self.target_side.recv(buf),
            };
            let n = match received {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A target that is not (yet) listening makes Linux report ECONNREFUSED
                // on the connected socket; the datagram is gone, keep relaying.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            let now = self.epoch.elapsed();
            let link = match direction {
                Direction::Forward => &mut self.forward,
                Direction::Return => &mut self.back,
            };
            if let Fate::Deliver { at, duplicate_at } = link.offer(now, n) {
                for due in std::iter::once(at).chain(duplicate_at) {
                    if self.queue.len() >= MAX_IN_FLIGHT {
                        self.overflow += 1;
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
        }
    }

    fn deliver_due(&mut self) -> io::Result<()> {
        while let Some(Reverse(p)) = self.queue.peek() {
            if p.due > self.epoch.elapsed() {
                break;
            }
            let Reverse(p) = self.queue.pop().expect("peeked");
            let sent = match p.direction {
                Direction::Forward => self.target_side.send(&p.payload),
                Direction::Return => match self.client {
                    Some(client) => self.client_side.send_to(&p.payload, client),
                    None => {
                        self.orphans += 1;
                        continue;
                    }
                },
            };
            match sent {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    self.overflow += 1
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
        assert!((60..140).contains(&got), "{got}");
    }
}
