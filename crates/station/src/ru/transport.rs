//! Fronthaul transports: loopback UDP, or an in-process bounded ring of packet
//! buffers (allocated once; a full ring drops the packet and counts it, as a NIC
//! would, rather than stalling the radio). The ring moves buffers, not bytes: the
//! sender's filled buffer goes on the ring in exchange for a free one, and the
//! receiver's buffer goes back to the free list in exchange for the packet's. The
//! free list is a stack: the buffer just freed is the next one filled, so the few
//! in flight stay in cache (a FIFO walked all of a ring sized for 64 frames, 63 MB
//! at 16x4: every packet cache-cold, and first touches page-faulting).

use std::io;
use std::net::UdpSocket;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which transport carries fronthaul packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TransportKind {
    Udp,
    Ring,
}

/// A transport name that is neither `udp` nor `ring`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown transport `{0}`: use udp or ring")]
pub struct UnknownTransport(pub String);

impl std::str::FromStr for TransportKind {
    type Err = UnknownTransport;
    fn from_str(s: &str) -> Result<Self, UnknownTransport> {
        match s {
            "udp" => Ok(TransportKind::Udp),
            "ring" => Ok(TransportKind::Ring),
            o => Err(UnknownTransport(o.to_string())),
        }
    }
}

/// What one receive attempt got.
#[derive(Debug, PartialEq, Eq)]
pub enum Recv {
    Packet(usize),
    Timeout,
    /// The sending side is gone (ring only; UDP cannot tell).
    Closed,
}

/// Sending half (the radio unit's side).
pub trait PacketTx: Send {
    /// Send the packet `pkt[..len]`; `false` if it was dropped (ring full). The
    /// transport may keep `pkt` and hand back another buffer at least as long (the
    /// ring does: no copy), whose contents are then unspecified.
    ///
    /// # Errors
    /// A socket error.
    fn send(&mut self, pkt: &mut Vec<u8>, len: usize) -> io::Result<bool>;
}

/// Receiving half (the station's side).
pub trait PacketRx: Send {
    /// Receive one packet into `buf[..n]`, waiting at most `timeout`. The transport
    /// may swap `buf` for the buffer the packet arrived in (the ring does: no copy),
    /// which may differ in length; UDP cuts a datagram longer than `buf`.
    ///
    /// # Errors
    /// A socket error.
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> io::Result<Recv>;
}

/// Free packet buffers, most recently freed on top.
type FreeStack = Arc<Mutex<Vec<Vec<u8>>>>;

fn lock(free: &FreeStack) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
    // Every critical section is one push or pop: a poisoned stack is still whole.
    free.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct RingTx {
    free: FreeStack,
    full: SyncSender<(Vec<u8>, usize)>,
}

struct RingRx {
    full: Receiver<(Vec<u8>, usize)>,
    free: FreeStack,
}

impl PacketTx for RingTx {
    fn send(&mut self, pkt: &mut Vec<u8>, len: usize) -> io::Result<bool> {
        let Some(mut spare) = lock(&self.free).pop() else {
            return Ok(false);
        };
        // The filled buffer goes on the ring and a free one comes back to the sender.
        let len = len.min(pkt.len());
        if spare.len() < pkt.len() {
            spare.resize(pkt.len(), 0);
        }
        std::mem::swap(pkt, &mut spare);
        // Never blocks: the ring holds as many slots as there are buffers.
        self.full.send((spare, len)).map(|()| true).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "fronthaul ring receiver is gone")
        })
    }
}

impl PacketRx for RingRx {
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> io::Result<Recv> {
        match self.full.recv_timeout(timeout) {
            Ok((mut pkt, n)) => {
                // The packet's buffer becomes the receiver's; its old one goes back
                // to the free list.
                std::mem::swap(buf, &mut pkt);
                lock(&self.free).push(pkt);
                Ok(Recv::Packet(n))
            }
            Err(RecvTimeoutError::Timeout) => Ok(Recv::Timeout),
            Err(RecvTimeoutError::Disconnected) => Ok(Recv::Closed),
        }
    }
}

/// A bounded ring of `packets` buffers of `max_packet` bytes.
pub fn ring(packets: usize, max_packet: usize) -> (Box<dyn PacketTx>, Box<dyn PacketRx>) {
    let packets = packets.max(1);
    let free: FreeStack = Arc::new(Mutex::new(
        (0..packets).map(|_| vec![0u8; max_packet]).collect(),
    ));
    let (full_tx, full_rx) = sync_channel(packets);
    (
        Box::new(RingTx {
            free: free.clone(),
            full: full_tx,
        }),
        Box::new(RingRx {
            full: full_rx,
            free,
        }),
    )
}

/// Receive buffer asked for on the station's fronthaul socket.
const RECV_BUFFER: usize = 16 << 20;

struct UdpTx(UdpSocket);
struct UdpRx(UdpSocket);

impl PacketTx for UdpTx {
    fn send(&mut self, pkt: &mut Vec<u8>, len: usize) -> io::Result<bool> {
        match self.0.send(&pkt[..len.min(pkt.len())]) {
            Ok(_) => Ok(true),
            // Loopback with a full receive buffer: the packet is lost, count it.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

impl PacketRx for UdpRx {
    fn recv(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> io::Result<Recv> {
        self.0
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))?;
        match self.0.recv(buf) {
            Ok(n) => Ok(Recv::Packet(n)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(Recv::Timeout)
            }
            Err(e) => Err(e),
        }
    }
}

/// A loopback UDP pair: the receiver binds an ephemeral port on 127.0.0.1.
///
/// # Errors
/// If the sockets cannot be bound or connected.
pub fn udp() -> io::Result<(Box<dyn PacketTx>, Box<dyn PacketRx>)> {
    let rx = UdpSocket::bind("127.0.0.1:0")?;
    // A frame of a 16-antenna RU is ~0.4 MB: ask for a receive buffer that rides out
    // a few ms of ingest stall (the kernel caps it at net.core.rmem_max; what is
    // still dropped shows up as lost or incomplete frames, never silently).
    let _ = socket2::SockRef::from(&rx).set_recv_buffer_size(RECV_BUFFER);
    let tx = UdpSocket::bind("127.0.0.1:0")?;
    tx.connect(rx.local_addr()?)?;
    Ok((Box::new(UdpTx(tx)), Box::new(UdpRx(rx))))
}

/// A transport pair of `kind` (`ring_packets` only matters for the ring).
///
/// # Errors
/// UDP socket errors.
pub fn link(
    kind: TransportKind,
    ring_packets: usize,
    max_packet: usize,
) -> io::Result<(Box<dyn PacketTx>, Box<dyn PacketRx>)> {
    match kind {
        TransportKind::Udp => udp(),
        TransportKind::Ring => Ok(ring(ring_packets, max_packet)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(tx: &mut Box<dyn PacketTx>, bytes: &[u8]) -> bool {
        let mut pkt = vec![0u8; 8];
        pkt[..bytes.len()].copy_from_slice(bytes);
        tx.send(&mut pkt, bytes.len()).unwrap()
    }

    #[test]
    fn ring_is_bounded_and_recycles_buffers() {
        let (mut tx, mut rx) = ring(2, 8);
        assert!(send(&mut tx, b"one"));
        assert!(send(&mut tx, b"two"));
        assert!(!send(&mut tx, b"three"), "a full ring drops");
        let mut buf = vec![0u8; 16];
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(3)
        );
        assert_eq!(&buf[..3], b"one");
        assert!(send(&mut tx, b"four"));
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(3)
        );
        assert_eq!(&buf[..3], b"two");
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(4)
        );
        assert_eq!(&buf[..4], b"four");
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(1)).unwrap(),
            Recv::Timeout
        );
        drop(tx);
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(1)).unwrap(),
            Recv::Closed
        );
    }

    #[test]
    fn ring_send_hands_back_a_buffer_as_long_as_the_packet_buffer() {
        let (mut tx, mut rx) = ring(4, 8);
        let mut pkt = vec![7u8; 32];
        assert!(tx.send(&mut pkt, 32).unwrap());
        assert!(
            pkt.len() >= 32,
            "the sender can encode the next packet in place"
        );
        let mut buf = vec![0u8; 8];
        // The receiver takes the packet's own buffer, whatever its own length.
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(32)
        );
        assert!(buf[..32].iter().all(|&b| b == 7));
    }

    #[test]
    fn udp_loopback_carries_packets() {
        let (mut tx, mut rx) = udp().unwrap();
        assert!(send(&mut tx, b"hello"));
        let mut buf = vec![0u8; 16];
        assert_eq!(
            rx.recv(&mut buf, Duration::from_secs(2)).unwrap(),
            Recv::Packet(5)
        );
        assert_eq!(&buf[..5], b"hello");
    }
}
