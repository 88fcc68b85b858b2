//! Batched UDP I/O: `recvmmsg`/`sendmmsg` over preallocated buffers, with the
//! kernel's receive timestamp (SO_TIMESTAMPNS) per datagram so latency can be
//! measured from the moment a packet reached the socket, wake-up included.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Wall-clock nanoseconds (CLOCK_REALTIME, the clock of kernel socket timestamps).
pub fn realtime_ns() -> i64 {
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: clock_gettime writes one timespec into a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

pub fn from_sockaddr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a = unsafe { &*(s as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a = unsafe { &*(s as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Ask the kernel to timestamp received datagrams (best effort).
pub fn enable_rx_timestamps(sock: &UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: valid fd, option value points at a c_int of the stated size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            &on as *const _ as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Set SO_RCVBUF/SO_SNDBUF (best effort; the kernel caps them at rmem_max).
pub fn set_buffer_sizes(sock: &UdpSocket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: valid fd and c_int option value.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &v as *const _ as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
}

const CMSG_SPACE: usize = 64;

/// Preallocated buffers for receiving up to `batch` datagrams in one syscall.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<[u8; CMSG_SPACE]>,
    msgs: Vec<libc::mmsghdr>,
    lens: Vec<usize>,
    stamps: Vec<Option<i64>>,
    count: usize,
}

// SAFETY: the raw pointers in iovs/msgs only ever point into this struct's own
// buffers and are rebuilt before every syscall.
unsafe impl Send for RecvBatch {}

/// One received datagram.
pub struct Datagram<'a> {
    pub bytes: &'a [u8],
    pub from: Option<SocketAddr>,
    /// Kernel receive time (CLOCK_REALTIME ns) if timestamps are enabled.
    pub kernel_rx_ns: Option<i64>,
}

impl RecvBatch {
    pub fn new(batch: usize, max_len: usize) -> Self {
        let batch = batch.max(1);
        RecvBatch {
            bufs: (0..batch).map(|_| vec![0u8; max_len]).collect(),
            // SAFETY: all-zero sockaddr_storage/iovec/mmsghdr are valid values.
            addrs: vec![unsafe { zeroed() }; batch],
            iovs: vec![unsafe { zeroed() }; batch],
            ctrl: vec![[0u8; CMSG_SPACE]; batch],
            msgs: vec![unsafe { zeroed() }; batch],
            lens: vec![0; batch],
            stamps: vec![None; batch],
            count: 0,
        }
    }

    /// Receive up to the batch size. `blocking`: wait for the first datagram
    /// (bounded by the socket's read timeout); otherwise return 0 at once when
    /// nothing is there.
    pub fn recv(&mut self, sock: &UdpSocket, blocking: bool) -> io::Result<usize> {
        let n = self.bufs.len();
        for i in 0..n {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.bufs[i].len(),
            };
            let hdr = &mut self.msgs[i].msg_hdr;
            hdr.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.ctrl[i].as_mut_ptr() as *mut libc::c_void;
            hdr.msg_controllen = CMSG_SPACE as _;
            hdr.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        let flags = if blocking {
            libc::MSG_WAITFORONE
        } else {
            libc::MSG_DONTWAIT
        };
        // SAFETY: msgs points at n initialised mmsghdr whose buffers live in self.
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                n as _,
                flags,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            self.count = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        self.count = rc as usize;
        for i in 0..self.count {
            self.lens[i] = self.msgs[i].msg_len as usize;
            self.stamps[i] = kernel_timestamp(&self.msgs[i].msg_hdr);
        }
        Ok(self.count)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn get(&self, i: usize) -> Datagram<'_> {
        Datagram {
            bytes: &self.bufs[i][..self.lens[i]],
            from: from_sockaddr(&self.addrs[i]),
            kernel_rx_ns: self.stamps[i],
        }
    }
}

fn kernel_timestamp(hdr: &libc::msghdr) -> Option<i64> {
    // SAFETY: hdr's control buffer was filled by the kernel; the CMSG macros
    // stay within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    None
}

/// Preallocated outgoing datagrams flushed with one `sendmmsg`.
pub struct SendBatch {
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    count: usize,
}

// SAFETY: as for RecvBatch.
unsafe impl Send for SendBatch {}

impl SendBatch {
    pub fn new(batch: usize, max_len: usize) -> Self {
        let batch = batch.max(1);
        SendBatch {
            bufs: (0..batch).map(|_| vec![0u8; max_len]).collect(),
            lens: vec![0; batch],
            // SAFETY: zeroed plain C structs are valid.
            addrs: vec![(unsafe { zeroed() }, 0); batch],
            iovs: vec![unsafe { zeroed() }; batch],
            msgs: vec![unsafe { zeroed() }; batch],
            count: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn is_full(&self) -> bool {
        self.count == self.bufs.len()
    }

    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Append a datagram to `dest`, encoded by `fill` into the slot buffer
    /// (which returns the length). Returns false if the batch is full.
    pub fn push<E>(
        &mut self,
        dest: &(libc::sockaddr_storage, libc::socklen_t),
        fill: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<bool, E> {
        self.try_push(dest, |b| fill(b).map(Some))
    }

    /// As [`SendBatch::push`], but `fill` may decline (return `None`): nothing is queued.
    pub fn try_push<E>(
        &mut self,
        dest: &(libc::sockaddr_storage, libc::socklen_t),
        fill: impl FnOnce(&mut [u8]) -> Result<Option<usize>, E>,
    ) -> Result<bool, E> {
        if self.is_full() {
            return Ok(false);
        }
        let i = self.count;
        let Some(len) = fill(&mut self.bufs[i])? else {
            return Ok(false);
        };
        self.lens[i] = len;
        self.addrs[i] = *dest;
        self.count += 1;
        Ok(true)
    }

    /// Send everything queued. Datagrams the kernel refuses (buffer full) are
    /// counted in the returned `dropped`, never retried forever.
    pub fn flush(&mut self, sock: &UdpSocket) -> io::Result<FlushResult> {
        let mut sent = 0;
        let mut dropped = 0;
        while sent + dropped < self.count {
            let start = sent + dropped;
            let n = self.count - start;
            for k in 0..n {
                let i = start + k;
                self.iovs[i] = libc::iovec {
                    iov_base: self.bufs[i].as_mut_ptr() as *mut libc::c_void,
                    iov_len: self.lens[i],
                };
                let hdr = &mut self.msgs[i].msg_hdr;
                hdr.msg_name = &mut self.addrs[i].0 as *mut _ as *mut libc::c_void;
                hdr.msg_namelen = self.addrs[i].1;
                hdr.msg_iov = &mut self.iovs[i];
                hdr.msg_iovlen = 1;
                hdr.msg_control = std::ptr::null_mut();
                hdr.msg_controllen = 0;
            }
            // SAFETY: msgs[start..start+n] are initialised and point into self.
            let rc = unsafe {
                libc::sendmmsg(sock.as_raw_fd(), self.msgs[start..].as_mut_ptr(), n as _, 0)
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    // Loopback reports a full receiver as ECONNREFUSED/ENOBUFS/EAGAIN:
                    // drop this datagram and go on.
                    io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused => dropped += 1,
                    _ if e.raw_os_error() == Some(libc::ENOBUFS) => dropped += 1,
                    _ => {
                        self.count = 0;
                        return Err(e);
                    }
                }
            } else {
                sent += rc as usize;
            }
        }
        self.count = 0;
        Ok(FlushResult { sent, dropped })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushResult {
    pub sent: usize,
    pub dropped: usize,
}

/// Give the calling thread SCHED_FIFO at `priority` (1..=99), so a busy-polling
/// streamer is not time-sliced with ordinary tasks.
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: valid sched_param for the calling thread (pid 0).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within it (checked above).
    unsafe {
        let mut set: libc::cpu_set_t = zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_roundtrip_over_loopback_with_kernel_timestamps() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_rx_timestamps(&b).unwrap();
        b.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let dest = to_sockaddr(&b.local_addr().unwrap());
        let mut tx = SendBatch::new(4, 64);
        for k in 0..4u8 {
            assert!(tx
                .push(&dest, |buf| {
                    buf[..3].copy_from_slice(&[k, k, k]);
                    Ok::<_, ()>(3)
                })
                .unwrap());
        }
        assert!(tx.is_full());
        let before = realtime_ns();
        assert_eq!(
            tx.flush(&a).unwrap(),
            FlushResult {
                sent: 4,
                dropped: 0
            }
        );
        let mut rx = RecvBatch::new(8, 64);
        let mut got = Vec::new();
        while got.len() < 4 {
            let n = rx.recv(&b, true).unwrap();
            assert!(n > 0, "timed out");
            for i in 0..n {
                let d = rx.get(i);
                assert_eq!(d.from, Some(a.local_addr().unwrap()));
                let stamp = d.kernel_rx_ns.expect("SO_TIMESTAMPNS enabled");
                assert!(stamp >= before - 1_000_000);
                got.push(d.bytes.to_vec());
            }
        }
        assert_eq!(got, (0..4u8).map(|k| vec![k; 3]).collect::<Vec<_>>());
        assert_eq!(rx.recv(&b, false).unwrap(), 0);
    }

    #[test]
    fn sockaddr_conversion_roundtrips() {
        for a in ["127.0.0.1:5000", "[::1]:6000"] {
            let addr: SocketAddr = a.parse().unwrap();
            assert_eq!(from_sockaddr(&to_sockaddr(&addr).0), Some(addr));
        }
    }
}
