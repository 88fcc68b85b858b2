//! Batched UDP receive (recvmmsg, with UDP GRO where the socket has it on): one
//! syscall for many datagrams, which matters when 16 nodes answer with hundreds of
//! jumbo frames.

use socket2::SockAddr;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Duration;

/// Control-message space per received message: one `UDP_GRO` int, 8-byte aligned.
const CONTROL_WORDS: usize = 4;

/// Receive buffers for up to `count` datagrams (or GRO batches) per call.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    iovecs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_storage>,
    controls: Vec<[u64; CONTROL_WORDS]>,
    msgs: Vec<libc::mmsghdr>,
    received: usize,
}

// SAFETY: the raw pointers in iovecs/msgs only ever point into this struct's own
// vectors and are rebuilt before every use.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// `count` buffers, each big enough for a GRO batch when `gro`, else for one
    /// datagram of `datagram` bytes.
    pub fn new(count: usize, datagram: usize, gro: bool) -> Self {
        let size = if gro {
            crate::udp::GRO_BUFFER
        } else {
            datagram
        };
        // SAFETY: all-zero is a valid value for these plain C structs.
        let zero_addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let zero_msg: libc::mmsghdr = unsafe { std::mem::zeroed() };
        Self {
            bufs: vec![vec![0u8; size]; count],
            iovecs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                count
            ],
            addrs: vec![zero_addr; count],
            controls: vec![[0u64; CONTROL_WORDS]; count],
            msgs: vec![zero_msg; count],
            received: 0,
        }
    }

    /// Take every datagram waiting on the socket (up to the batch size) without
    /// blocking; the caller polls first. Returns how many arrived.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.received = 0;
        for i in 0..self.bufs.len() {
            self.iovecs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: self.bufs[i].len(),
            };
            let m = &mut self.msgs[i].msg_hdr;
            m.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            m.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            m.msg_iov = &mut self.iovecs[i];
            m.msg_iovlen = 1;
            m.msg_control = self.controls[i].as_mut_ptr().cast();
            m.msg_controllen = std::mem::size_of::<[u64; CONTROL_WORDS]>() as _;
            m.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        // SAFETY: msgs points to `len` initialised mmsghdr whose buffers live in self.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // An ICMP port-unreachable from an earlier send; not our datagrams.
                io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(e),
            };
        }
        self.received = n as usize;
        Ok(self.received)
    }

    /// Message `i` of the last `recv`: who sent it and its datagrams (one, or
    /// several when GRO coalesced them: every one of the GRO segment size but the
    /// last).
    pub fn get(&self, i: usize) -> (Option<SocketAddr>, std::slice::Chunks<'_, u8>) {
        assert!(i < self.received, "datagram index out of range");
        let len = self.msgs[i].msg_len as usize;
        let namelen = self.msgs[i].msg_hdr.msg_namelen;
        // SAFETY: the kernel wrote a sockaddr of `namelen` bytes into addrs[i].
        let addr = unsafe { SockAddr::new(self.addrs[i], namelen) };
        let segment = self.gro_segment(i).unwrap_or(len).max(1);
        (addr.as_socket(), self.bufs[i][..len].chunks(segment))
    }

    /// The `UDP_GRO` segment size the kernel attached to message `i`, if any.
    fn gro_segment(&self, i: usize) -> Option<usize> {
        let hdr = &self.msgs[i].msg_hdr;
        // SAFETY: the kernel filled msg_control/msg_controllen of this message; the
        // CMSG_* walk stays within them.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                    let size = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return usize::try_from(size).ok().filter(|&s| s > 0);
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        None
    }
}

/// Poll several fds; true if any became readable before the timeout (their
/// `revents` say which).
pub fn wait_any_readable(fds: &mut [libc::pollfd], timeout: Duration) -> io::Result<bool> {
    for f in fds.iter_mut() {
        f.revents = 0;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `fds` is a valid slice of pollfd for the duration of the call.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(rc > 0)
}
