//! Socket buffers large enough for bursts of jumbo frames from many nodes.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// What the kernel granted for one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketBuffers {
    pub local: SocketAddr,
    pub requested: usize,
    pub recv_granted: usize,
    pub send_granted: usize,
}

/// Ask for `bytes` of receive and send buffer, forcing past `net.core.rmem_max`
/// when privileged (CAP_NET_ADMIN), and report what the kernel granted.
pub fn grow_buffers(sock: &UdpSocket, bytes: usize) -> io::Result<SocketBuffers> {
    let fd = sock.as_raw_fd();
    let val = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    let set = |opt| {
        // SAFETY: setsockopt on a valid fd with an int option value.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&val as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if set(force) != 0 {
            set(plain);
        }
    }
    let s = socket2::SockRef::from(sock);
    Ok(SocketBuffers {
        local: sock.local_addr()?,
        requested: bytes,
        recv_granted: s.recv_buffer_size()?,
        send_granted: s.send_buffer_size()?,
    })
}
