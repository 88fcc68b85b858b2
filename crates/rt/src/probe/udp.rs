//! UDP probe: round-trip time of a datagram over loopback between a configured
//! pinger thread and an echo that is either another configured thread or
//! another process (`radiohost rt echo`). Reported latency is the full round
//! trip: send, echo wake-up and send, receive wake-up.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{ProbeControl, ProbeError, ProbeRun};
use crate::clock::ClockId;
use crate::config::ThreadConfig;
use crate::spawn::RtThreadBuilder;
use crate::stats::LatencyHistogram;

/// Bytes of a probe datagram: sequence number and send time.
pub const PACKET_BYTES: usize = 16;

/// Who answers the pings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UdpPeer {
    /// An echo thread in this process, set up with this configuration.
    Thread(ThreadConfig),
    /// An echo already listening at this address (e.g. another process).
    Remote(SocketAddr),
}

/// Parameters of a UDP probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpProbe {
    /// Pinger thread setup.
    pub thread: ThreadConfig,
    /// Echo side.
    pub peer: UdpPeer,
    /// Period between pings.
    pub interval: Duration,
    /// Number of pings.
    pub samples: u64,
    /// How long to wait for a reply before counting it missing.
    pub timeout: Duration,
}

impl UdpProbe {
    /// As many pings as fit in `duration`, 100 ms reply timeout.
    pub fn for_duration(
        thread: ThreadConfig,
        peer: UdpPeer,
        interval: Duration,
        duration: Duration,
    ) -> Self {
        UdpProbe {
            thread,
            peer,
            interval,
            samples: (duration.as_nanos() / interval.as_nanos().max(1)).max(1) as u64,
            timeout: Duration::from_millis(100),
        }
    }

    /// Runs the probe; an in-process echo thread is stopped afterwards.
    pub fn run(&self, control: &ProbeControl) -> Result<ProbeRun, ProbeError> {
        let interval_ns = self.interval.as_nanos();
        if !(1_000..=10_000_000_000).contains(&interval_ns) || self.timeout.is_zero() {
            return Err(ProbeError::Invalid(format!(
                "interval {:?} outside 1 us ..= 10 s or zero timeout",
                self.interval
            )));
        }
        let socket = UdpSocket::bind("127.0.0.1:0")
            .map_err(|e| ProbeError::io("binding the pinger socket on 127.0.0.1", e))?;
        socket
            .set_read_timeout(Some(self.timeout))
            .map_err(|e| ProbeError::io("setting the reply timeout", e))?;
        let echo_stop = Arc::new(AtomicBool::new(false));
        let (target, echo) = match &self.peer {
            UdpPeer::Remote(addr) => (*addr, None),
            UdpPeer::Thread(cfg) => {
                let echo_sock = bind_echo("127.0.0.1:0".parse().expect("literal address"))?;
                let addr = echo_sock
                    .local_addr()
                    .map_err(|e| ProbeError::io("reading the echo address", e))?;
                let stop = echo_stop.clone();
                let t = RtThreadBuilder::new("rt-probe-echo")
                    .config(cfg.clone())
                    .spawn(move |_| echo_loop(&echo_sock, &stop))?;
                (addr, Some(t))
            }
        };
        socket
            .connect(target)
            .map_err(|e| ProbeError::io(format!("connecting to the echo at {target}"), e))?;
        let (samples, ctl) = (self.samples, control.clone());
        let interval_ns = interval_ns as u64;
        let pinger = RtThreadBuilder::new("rt-probe-ping")
            .config(self.thread.clone())
            .spawn(move |_| ping_loop(&socket, interval_ns, samples, &ctl));
        let result = pinger.map(|p| {
            let report = p.report().clone();
            (report, p.join())
        });
        echo_stop.store(true, Ordering::Relaxed);
        if let Some(echo) = echo {
            let _ = echo.join();
        }
        let (report, joined) = result?;
        let (histogram, missed) = joined.map_err(|e| ProbeError::Thread(e.to_string()))??;
        Ok(ProbeRun {
            histogram,
            report,
            missed,
        })
    }
}

/// Binds an echo socket with a short read timeout so its loop can notice stop.
pub fn bind_echo(addr: SocketAddr) -> Result<UdpSocket, ProbeError> {
    let sock =
        UdpSocket::bind(addr).map_err(|e| ProbeError::io(format!("binding echo on {addr}"), e))?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| ProbeError::io("setting the echo timeout", e))?;
    Ok(sock)
}

/// Sends every datagram back to its sender until `stop` is set. Returns the
/// number of datagrams echoed. The socket needs a read timeout (see
/// [`bind_echo`]) or stop is only noticed on the next datagram.
pub fn echo_loop(socket: &UdpSocket, stop: &AtomicBool) -> Result<u64, ProbeError> {
    let mut buf = [0u8; 2048];
    let mut echoed = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                // A failed send is a lost reply; the pinger counts it.
                if socket.send_to(&buf[..n], from).is_ok() {
                    echoed += 1;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(ProbeError::io("echo receive", e)),
        }
    }
    Ok(echoed)
}

fn ping_loop(
    socket: &UdpSocket,
    interval_ns: u64,
    samples: u64,
    ctl: &ProbeControl,
) -> Result<(LatencyHistogram, u64), ProbeError> {
    let clock = ClockId::Monotonic;
    let mut hist = LatencyHistogram::new();
    let (mut out, mut inp) = ([0u8; PACKET_BYTES], [0u8; 2048]);
    let mut missed = 0u64;
    let mut next = clock.now_ns() + interval_ns;
    for seq in 0..samples {
        if ctl.stopped() {
            break;
        }
        clock
            .sleep_until_ns(next)
            .map_err(|e| ProbeError::io("clock_nanosleep", e))?;
        let sent = clock.now_ns();
        out[..8].copy_from_slice(&seq.to_le_bytes());
        out[8..].copy_from_slice(&sent.to_le_bytes());
        if socket.send(&out).is_err() {
            missed += 1; // e.g. ECONNREFUSED from a vanished echo process
        } else {
            // Wait for *this* ping's reply; drop late replies to older ones.
            loop {
                match socket.recv(&mut inp) {
                    Ok(n) if n >= 8 && inp[..8] == seq.to_le_bytes() => {
                        hist.record(clock.now_ns().saturating_sub(sent));
                        ctl.add_sample();
                        break;
                    }
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        missed += 1;
                        break;
                    }
                }
            }
        }
        next += interval_ns;
        let now = clock.now_ns();
        while now > next {
            next += interval_ns;
        }
    }
    Ok((hist, missed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_echo_answers_every_ping() {
        let probe = UdpProbe {
            thread: ThreadConfig::default(),
            peer: UdpPeer::Thread(ThreadConfig::default()),
            interval: Duration::from_micros(500),
            samples: 40,
            timeout: Duration::from_millis(500),
        };
        let run = probe.run(&ProbeControl::default()).unwrap();
        assert_eq!(run.histogram.len() + run.missed, 40);
        assert!(!run.histogram.is_empty());
    }

    #[test]
    fn silent_peer_counts_missing_replies() {
        // A bound socket that never answers.
        let mute = UdpSocket::bind("127.0.0.1:0").unwrap();
        let probe = UdpProbe {
            thread: ThreadConfig::default(),
            peer: UdpPeer::Remote(mute.local_addr().unwrap()),
            interval: Duration::from_millis(1),
            samples: 3,
            timeout: Duration::from_millis(5),
        };
        let run = probe.run(&ProbeControl::default()).unwrap();
        assert_eq!((run.histogram.len(), run.missed), (0, 3));
    }
}
