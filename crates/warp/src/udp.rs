//! UDP segmentation offload, detected at run time: GSO sends many equal-sized
//! datagrams to one destination in one syscall (one socket buffer through the stack;
//! the kernel or the NIC cuts it into datagrams), GRO hands several datagrams from
//! one source to the receiver as one buffer. Where the kernel lacks either, or a
//! route refuses GSO, the same calls fall back to one datagram per syscall.
//!
//! Written on libc rather than quinn-udp: the host and the emulator need GSO per
//! destination with a forced-off path for tests and comparisons (quinn-udp always
//! turns GRO on and decides the fallback itself), and recvmmsg batching we already
//! own in [`crate::mmsg`].

use socket2::SockAddr;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

/// Largest GSO send: the UDP payload of one IPv4 datagram, rounded down.
pub const MAX_GSO_BYTES: usize = 65_000;
/// Most datagrams in one GSO send (the kernel's oldest limit, `UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: usize = 64;
/// A receive buffer that holds any GRO-coalesced batch.
pub const GRO_BUFFER: usize = 65_536;

/// Whether to use UDP segmentation offload where the kernel offers it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OffloadPolicy {
    /// GSO and GRO where the kernel offers them (detected per socket).
    #[default]
    Auto,
    /// One datagram per syscall both ways (the portable path).
    Off,
}

/// What one socket got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offload {
    /// Sends may carry a segment size (`UDP_SEGMENT`).
    pub gso: bool,
    /// Receives may return coalesced datagrams (`UDP_GRO` is on).
    pub gro: bool,
}

impl Offload {
    /// Detect and switch on what `policy` allows for `sock`.
    pub fn enable(sock: &UdpSocket, policy: OffloadPolicy) -> Self {
        if policy == OffloadPolicy::Off {
            return Self::default();
        }
        let fd = sock.as_raw_fd();
        Self {
            gso: gso_available(fd),
            gro: set_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1),
        }
    }
}

/// Whether the kernel knows `UDP_SEGMENT` (it answers the socket's default, 0).
fn gso_available(fd: RawFd) -> bool {
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt on a valid fd with an int-sized output buffer.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    rc == 0
}

fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, val: libc::c_int) -> bool {
    // SAFETY: setsockopt on a valid fd with an int option value.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// Datagrams to one destination, packed back to back for one GSO send: every
/// datagram but the last has the first one's size, the last may be shorter.
#[derive(Default)]
pub struct SegmentBatch {
    /// Room for a full batch plus one datagram being built, allocated on first use
    /// and never zeroed again (empty in a `Default` batch).
    bytes: Vec<u8>,
    /// Bytes of `bytes` in use.
    used: usize,
    /// Length of each datagram in `bytes`, in order.
    lens: Vec<usize>,
}

impl SegmentBatch {
    pub fn new() -> Self {
        Self {
            bytes: vec![0; MAX_GSO_BYTES + crate::wire::MAX_DATAGRAM],
            used: 0,
            lens: Vec::with_capacity(MAX_GSO_SEGMENTS),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Whether a datagram of `len` bytes may join: same size as the first, none
    /// shorter before it, and within the kernel's limits.
    pub fn fits(&self, len: usize) -> bool {
        let Some(&segment) = self.lens.first() else {
            return len <= MAX_GSO_BYTES;
        };
        let last = *self.lens.last().expect("non-empty");
        len <= segment
            && last == segment
            && self.lens.len() < MAX_GSO_SEGMENTS
            && self.used + len <= MAX_GSO_BYTES
    }

    /// Append one datagram built by `encode` into at most `max` bytes (at most
    /// `wire::MAX_DATAGRAM`; it returns its length). The caller checked
    /// [`Self::fits`] for a datagram of that size.
    pub fn push_with(&mut self, max: usize, encode: impl FnOnce(&mut [u8]) -> usize) {
        if self.bytes.is_empty() {
            self.bytes = vec![0; MAX_GSO_BYTES + crate::wire::MAX_DATAGRAM];
        }
        let room = max.min(self.bytes.len() - self.used);
        let n = encode(&mut self.bytes[self.used..self.used + room]).min(room);
        self.used += n;
        self.lens.push(n);
    }

    /// The datagrams, in order.
    pub fn datagrams(&self) -> impl Iterator<Item = &[u8]> {
        self.lens.iter().scan(0usize, |at, &n| {
            let d = &self.bytes[*at..*at + n];
            *at += n;
            Some(d)
        })
    }

    pub fn clear(&mut self) {
        self.used = 0;
        self.lens.clear();
    }

    /// Send the batch to `to` from `sock` (one GSO send when `offload.gso` and more
    /// than one datagram, else one send each) and empty it. A GSO send the route
    /// refuses switches `offload.gso` off and is sent again one datagram at a time.
    /// Returns the syscalls made.
    pub fn send(
        &mut self,
        sock: &UdpSocket,
        to: SocketAddr,
        offload: &mut Offload,
    ) -> io::Result<usize> {
        let result = self.send_inner(sock, to, offload);
        self.clear();
        result
    }

    fn send_inner(
        &self,
        sock: &UdpSocket,
        to: SocketAddr,
        offload: &mut Offload,
    ) -> io::Result<usize> {
        if offload.gso && self.lens.len() > 1 {
            match send_gso(sock.as_raw_fd(), to, &self.bytes[..self.used], self.lens[0]) {
                Ok(()) => return Ok(1),
                Err(e) if gso_refused(&e) => {
                    tracing::debug!(%to, "UDP GSO refused ({e}); sending one datagram per syscall");
                    offload.gso = false;
                }
                Err(e) => return Err(e),
            }
        }
        for d in self.datagrams() {
            send_one(sock, d, to)?;
        }
        Ok(self.lens.len())
    }
}

/// Errors with which a kernel or route refuses a GSO send (no checksum offload on
/// the device, segment larger than the path MTU, too many segments).
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::EMSGSIZE | libc::ENOPROTOOPT)
    )
}

/// One datagram, waiting out a full send buffer.
pub fn send_one(sock: &UdpSocket, bytes: &[u8], to: SocketAddr) -> io::Result<()> {
    loop {
        match sock.send_to(bytes, to) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            // Interrupted, or an earlier datagram bounced (port unreachable): that
            // error is now consumed, this datagram was not sent yet.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// One sendmsg carrying `bytes` cut into `segment`-byte datagrams by the kernel.
fn send_gso(fd: RawFd, to: SocketAddr, bytes: &[u8], segment: usize) -> io::Result<()> {
    let addr = SockAddr::from(to);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // u64 storage keeps the control buffer aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as libc::c_uint) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = addr.as_ptr() as *mut libc::c_void;
    msg.msg_namelen = addr.len();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points to `space` zeroed, aligned bytes, enough for one
    // cmsghdr carrying a u16.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as libc::c_uint) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), segment as u16);
    }
    loop {
        // SAFETY: msg and everything it points to live until the call returns.
        let rc = unsafe { libc::sendmsg(fd, &msg, 0) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => std::thread::yield_now(),
            io::ErrorKind::Interrupted | io::ErrorKind::ConnectionRefused => {}
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pair(policy: OffloadPolicy) -> (UdpSocket, UdpSocket, Offload, Offload) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let oa = Offload::enable(&a, policy);
        let ob = Offload::enable(&b, policy);
        (a, b, oa, ob)
    }

    fn batch_of(sizes: &[usize]) -> SegmentBatch {
        let mut batch = SegmentBatch::new();
        for (k, &n) in sizes.iter().enumerate() {
            assert!(batch.fits(n), "datagram {k} of {n} bytes fits");
            batch.push_with(n, |out| {
                out[..n].fill(k as u8);
                n
            });
        }
        batch
    }

    #[test]
    fn batches_hold_equal_segments_and_one_shorter_last() {
        let mut b = batch_of(&[100, 100, 60]);
        assert!(!b.fits(60) && !b.fits(100), "nothing after a short last");
        assert_eq!(
            b.datagrams().map(<[u8]>::len).collect::<Vec<_>>(),
            [100, 100, 60]
        );
        b.clear();
        let b = batch_of(&[8962; 7]);
        assert!(
            !b.fits(8962),
            "an 8th jumbo datagram exceeds one IPv4 datagram"
        );
        let b = batch_of(&[10]);
        assert!(!b.fits(11), "no segment larger than the first");
    }

    /// The same datagrams arrive intact whether sent with GSO or one by one (the
    /// receiver here reads plainly: a GRO-less socket gets separate datagrams).
    #[test]
    fn gso_and_plain_sends_deliver_the_same_datagrams() {
        for policy in [OffloadPolicy::Auto, OffloadPolicy::Off] {
            let (a, b, mut oa, _) = pair(policy);
            // A plain receiver: switch GRO back off so datagrams come one by one.
            set_int(b.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 0);
            if policy == OffloadPolicy::Auto && !oa.gso {
                eprintln!("SKIPPED: GSO half of this test: the kernel has no UDP_SEGMENT");
                continue;
            }
            let mut batch = batch_of(&[1000, 1000, 1000, 400]);
            let calls = batch.send(&a, b.local_addr().unwrap(), &mut oa).unwrap();
            assert_eq!(calls, if policy == OffloadPolicy::Auto { 1 } else { 4 });
            assert!(batch.is_empty());
            let mut buf = [0u8; 2000];
            for (k, n) in [1000, 1000, 1000, 400].into_iter().enumerate() {
                let (got, _) = b.recv_from(&mut buf).unwrap();
                assert_eq!(got, n);
                assert!(buf[..n].iter().all(|&x| x == k as u8));
            }
        }
    }

    /// A GRO receiver gets a GSO send back as one buffer that splits into the same
    /// datagrams (where the kernel has both), or as separate datagrams otherwise.
    #[test]
    fn gro_receiver_splits_a_gso_send_into_its_datagrams() {
        let (a, b, mut oa, ob) = pair(OffloadPolicy::Auto);
        if !(oa.gso && ob.gro) {
            eprintln!(
                "SKIPPED: the kernel lacks UDP GSO or GRO (gso {}, gro {})",
                oa.gso, ob.gro
            );
            return;
        }
        let sizes = [8962, 8962, 8962, 1234];
        let mut batch = batch_of(&sizes);
        assert_eq!(batch.send(&a, b.local_addr().unwrap(), &mut oa).unwrap(), 1);
        let mut rx = crate::mmsg::RecvBatch::new(4, 9000, true);
        let mut fds = [libc::pollfd {
            fd: b.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut coalesced = false;
        while got.len() < sizes.len() {
            assert!(crate::mmsg::wait_any_readable(&mut fds, Duration::from_secs(2)).unwrap());
            for m in 0..rx.recv(b.as_raw_fd()).unwrap() {
                let (from, datagrams) = rx.get(m);
                assert_eq!(from, Some(a.local_addr().unwrap()));
                coalesced |= datagrams.len() > 1;
                got.extend(datagrams.map(<[u8]>::to_vec));
            }
        }
        assert!(
            coalesced,
            "loopback keeps a GSO send whole for a GRO socket"
        );
        assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), sizes);
        for (k, d) in got.iter().enumerate() {
            assert!(d.iter().all(|&x| x == k as u8), "datagram {k} intact");
        }
    }

    #[test]
    fn off_policy_enables_nothing() {
        let (_, _, oa, ob) = pair(OffloadPolicy::Off);
        assert_eq!((oa, ob), (Offload::default(), Offload::default()));
    }
}
