//! An emulated IP link for the kernel's own TCP: two network namespaces, one TUN
//! device in each, and a user-space forwarder that moves every IP packet between the
//! two devices through a [`Link`] model per direction, in real time.
//!
//! The kernel here has no netem; TUN plus the sans-IO link model gives the same
//! capacity, delay, loss, bursts, reordering, duplication and queue limit as the
//! simulated network, so PMT and TCP face the same links. Needs CAP_NET_ADMIN (root):
//! [`probe`] says clearly when namespaces or TUN are refused.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use radiohost_testbed::link::{Fate, Link, LinkConfig, LinkStats};
use thiserror::Error;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[derive(Debug, Error)]
pub enum TunError {
    #[error("network namespaces are not permitted here ({0}); run as root (CAP_SYS_ADMIN and CAP_NET_ADMIN) with the `ip` tool installed")]
    NotPermitted(String),
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> TunError {
    let what = what.into();
    move |source| TunError::Io { what, source }
}

fn ip(args: &[&str]) -> Result<(), TunError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| TunError::NotPermitted(format!("cannot run `ip`: {e}")))?;
    if !out.status.success() {
        return Err(TunError::Command {
            cmd: format!("ip {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// A thread running inside a network namespace.
pub struct NsThread<R>(JoinHandle<Option<R>>);

impl<R> NsThread<R> {
    pub fn join(self) -> Result<R, TunError> {
        self.0
            .join()
            .ok()
            .flatten()
            .ok_or_else(|| TunError::NotPermitted("namespace thread panicked".into()))
    }
}

/// Run `f` on a thread that has entered network namespace `ns`; sockets it creates
/// live in that namespace and stay usable from any thread.
pub fn in_netns<R: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<NsThread<R>, TunError> {
    let path = format!("/var/run/netns/{ns}");
    let file = File::open(&path).map_err(io_err(format!("open {path}")))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        // SAFETY: setns on a valid namespace fd affects only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            let _ = tx.send(Err(io::Error::last_os_error()));
            return None;
        }
        let _ = tx.send(Ok(()));
        Some(f())
    });
    match rx.recv() {
        Ok(Ok(())) => Ok(NsThread(h)),
        Ok(Err(e)) => Err(TunError::NotPermitted(format!("setns({ns}): {e}"))),
        Err(_) => Err(TunError::NotPermitted(format!("setns({ns}) thread died"))),
    }
}

fn open_tun(name: &str) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")?;
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        pad: [u8; 22],
    }
    let mut req = IfReq {
        name: [0; 16],
        flags: IFF_TUN | IFF_NO_PI,
        pad: [0; 22],
    };
    let n = name.len().min(15);
    req.name[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: TUNSETIFF reads an ifreq-sized struct we own.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fcntl on our own fd.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok(f)
}

/// A namespace tag unique on this host while this process runs: the process id and a
/// per-process counter, so concurrent probes and runs (parallel tests) never collide.
pub fn unique_tag(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}n{n}", std::process::id())
}

/// Check that namespaces and TUN devices can be created here.
pub fn probe() -> Result<(), TunError> {
    let ns = unique_tag("rhprobe");
    ip(&["netns", "add", &ns]).map_err(|e| TunError::NotPermitted(e.to_string()))?;
    let r = in_netns(&ns, || open_tun("rhprobe0").map(drop))
        .and_then(NsThread::join)
        .and_then(|r| r.map_err(|e| TunError::NotPermitted(format!("TUN refused: {e}"))));
    let _ = ip(&["netns", "del", &ns]);
    r
}

/// Two namespaces joined by an emulated IP link.
pub struct IpLinkPair {
    pub ns_a: String,
    pub ns_b: String,
    pub addr_a: Ipv4Addr,
    pub addr_b: Ipv4Addr,
    stop: Arc<AtomicBool>,
    forwarder: Option<JoinHandle<(LinkStats, LinkStats)>>,
}

impl IpLinkPair {
    /// Create namespaces `<tag>a`/`<tag>b` with addresses 10.77.`index`.1/.2 and start
    /// forwarding through `a_to_b` and `b_to_a`.
    pub fn create(
        tag: &str,
        index: u8,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<Self, TunError> {
        let ns_a = format!("{tag}a");
        let ns_b = format!("{tag}b");
        let addr_a = Ipv4Addr::new(10, 77, index, 1);
        let addr_b = Ipv4Addr::new(10, 77, index, 2);
        let _ = ip(&["netns", "del", &ns_a]);
        let _ = ip(&["netns", "del", &ns_b]);
        ip(&["netns", "add", &ns_a])?;
        let mut pair = Self {
            ns_a: ns_a.clone(),
            ns_b: ns_b.clone(),
            addr_a,
            addr_b,
            stop: Arc::new(AtomicBool::new(false)),
            forwarder: None,
        };
        ip(&["netns", "add", &ns_b])?;
        let mut tuns = Vec::new();
        for (ns, addr) in [(&ns_a, addr_a), (&ns_b, addr_b)] {
            let tun = in_netns(ns, || open_tun("rhtun0"))?
                .join()?
                .map_err(io_err(format!("TUN device in {ns}")))?;
            ip(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "rhtun0",
            ])?;
            ip(&["-n", ns, "link", "set", "rhtun0", "up", "mtu", "1500"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            tuns.push(tun);
        }
        let b = tuns.pop().expect("two devices");
        let a = tuns.pop().expect("two devices");
        let stop = pair.stop.clone();
        pair.forwarder = Some(std::thread::spawn(move || {
            forward(a, b, a_to_b, b_to_a, &stop)
        }));
        Ok(pair)
    }

    /// Stop forwarding; returns the link statistics (a->b, b->a).
    pub fn shutdown(mut self) -> (LinkStats, LinkStats) {
        self.stop.store(true, Ordering::Relaxed);
        self.forwarder
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for IpLinkPair {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.forwarder.take() {
            let _ = h.join();
        }
        let _ = ip(&["netns", "del", &self.ns_a]);
        let _ = ip(&["netns", "del", &self.ns_b]);
    }
}

struct Pending {
    at: Duration,
    order: u64,
    to_b: bool,
    data: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.order) == (o.at, o.order)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.order).cmp(&(o.at, o.order))
    }
}

fn forward(
    mut a: File,
    mut b: File,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    stop: &AtomicBool,
) -> (LinkStats, LinkStats) {
    let mut ab = Link::new(a_to_b);
    let mut ba = Link::new(b_to_a);
    let start = Instant::now();
    let mut heap: BinaryHeap<Reverse<Pending>> = BinaryHeap::new();
    let mut order = 0u64;
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let now = start.elapsed();
        while heap.peek().is_some_and(|Reverse(p)| p.at <= now) {
            let Reverse(p) = heap.pop().expect("peeked");
            let dev = if p.to_b { &mut b } else { &mut a };
            let _ = dev.write(&p.data);
        }
        let wait = heap
            .peek()
            .map_or(Duration::from_millis(20), |Reverse(p)| {
                p.at.saturating_sub(now)
            })
            .min(Duration::from_millis(20));
        let mut fds = [
            libc::pollfd {
                fd: a.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: b.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        // SAFETY: valid pollfd array and timespec for the call's duration.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        for (from_a, dev, link) in [(true, &mut a, &mut ab), (false, &mut b, &mut ba)] {
            loop {
                match dev.read(&mut buf) {
                    Ok(n) if n > 0 => {
                        let now = start.elapsed();
                        if let Fate::Deliver { at, duplicate_at } = link.offer(now, n) {
                            for t in std::iter::once(at).chain(duplicate_at) {
                                order += 1;
                                heap.push(Reverse(Pending {
                                    at: t,
                                    order,
                                    to_b: from_a,
                                    data: buf[..n].to_vec(),
                                }));
                            }
                        }
                    }
                    _ => break,
                }
            }
        }
    }
    (ab.stats().clone(), ba.stats().clone())
}
