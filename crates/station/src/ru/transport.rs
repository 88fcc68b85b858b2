//! Fronthaul transports: loopback UDP, or an in-process bounded ring of packet
//! buffers (allocated once; a full ring drops the packet and counts it, as a NIC
//! would, rather than stalling the radio). The ring moves buffers, not bytes: the
//! sender's filled buffer goes on the ring in exchange for a free one, and the
//! receiver's buffer goes back to the free list in exchange for the packet's. The
//! free list is a stack: the buffer just freed is the next one filled, so the few
//! in flight stay in cache (a FIFO walked all of a ring sized for 64 frames, 63 MB
//! at 16x4: every packet cache-cold, and first touches page-faulting).
//!
//! An emulated radio's samples need not be copied into the packet at all
//! ([`PacketTx::send_samples`]): the ring carries the header and a reference to the
//! samples ([`SharedSamples`]), as a NIC's DMA puts a real radio's samples in host
//! memory without the host's CPU. The copy it spares (0.4 MB per 16x4 frame, from
//! a bank of frames too large for the cache) was 4-6% of the samples of a 16x4 run
//! on the 2-core machine the station runs on. The station's ingest then stages such
//! a symbol as the reference too (`kernels::slot::StagedSymbol`), so the FFT reads the
//! samples where the radio left them. UDP still encodes the whole packet.

use std::io;
use std::net::UdpSocket;
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use radiohost_iq::Ci16;
use radiohost_phy::generator::GeneratedFrame;

use super::wire::{self, FronthaulHeader, Payload, WireError, HEADER_LEN};

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

/// Samples of a generated frame (`frame.samples[range]`) that a packet refers to
/// instead of carrying them (see the module docs).
#[derive(Clone)]
pub struct SharedSamples {
    frame: Arc<GeneratedFrame>,
    range: Range<usize>,
}

impl SharedSamples {
    /// `None` when `range` is not inside the frame's samples.
    pub fn new(frame: Arc<GeneratedFrame>, range: Range<usize>) -> Option<Self> {
        frame.samples.get(range.clone())?;
        Some(Self { frame, range })
    }

    pub fn samples(&self) -> &[Ci16] {
        &self.frame.samples[self.range.clone()]
    }

    /// The frame the samples are in.
    pub fn frame(&self) -> &Arc<GeneratedFrame> {
        &self.frame
    }

    /// Where in the frame's samples they start.
    pub fn start(&self) -> usize {
        self.range.start
    }
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

    /// Send a packet of header `h` (its `samples` field set from `samples`) and
    /// `samples`, using `pkt` as [`PacketTx::send`] does. By default the whole packet
    /// is encoded into `pkt`; the ring carries the samples by reference.
    ///
    /// # Errors
    /// A socket error, or a packet that cannot be encoded (`InvalidInput`).
    fn send_samples(
        &mut self,
        pkt: &mut Vec<u8>,
        h: &FronthaulHeader,
        samples: SharedSamples,
    ) -> io::Result<bool> {
        let n = wire::encode(h, samples.samples(), pkt).map_err(invalid)?;
        self.send(pkt, n)
    }
}

fn invalid(e: WireError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

/// A received packet: its bytes `buf[..len]`, followed (from the ring) by the samples
/// its sender shared instead of copying.
pub struct RxPacket {
    pub buf: Vec<u8>,
    pub len: usize,
    pub shared: Option<SharedSamples>,
}

impl RxPacket {
    /// An empty packet with a buffer of `capacity` bytes (UDP cuts longer datagrams).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: vec![0; capacity],
            len: 0,
            shared: None,
        }
    }

    /// Its header and payload (see [`wire::parse`]).
    ///
    /// # Errors
    /// See [`WireError`].
    pub fn parse(&self) -> Result<(FronthaulHeader, Payload<'_>), WireError> {
        let bytes = &self.buf[..self.len.min(self.buf.len())];
        match &self.shared {
            None => wire::parse(bytes).map(|(h, p)| (h, Payload::Bytes(p))),
            Some(s) => {
                let payload = Payload::Samples(s.samples());
                let h = wire::parse_parts(bytes, payload)?;
                // Bytes behind the header as well as shared samples: no sender makes that.
                let extra = bytes.len() - HEADER_LEN;
                if extra > 0 {
                    return Err(WireError::Length {
                        declared: h.samples,
                        actual: payload.byte_len() + extra,
                    });
                }
                Ok((h, payload))
            }
        }
    }
}

/// Receiving half (the station's side).
pub trait PacketRx: Send {
    /// Receive one packet into `pkt`, waiting at most `timeout`; `Packet(n)` has
    /// `pkt.len == n`. The transport may swap `pkt.buf` for the buffer the packet
    /// arrived in (the ring does: no copy), which may differ in length; UDP cuts a
    /// datagram longer than `pkt.buf`.
    ///
    /// # Errors
    /// A socket error.
    fn recv(&mut self, pkt: &mut RxPacket, timeout: Duration) -> io::Result<Recv>;
}

/// Free packet buffers, most recently freed on top.
type FreeStack = Arc<Mutex<Vec<Vec<u8>>>>;

fn lock(free: &FreeStack) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
    // Every critical section is one push or pop: a poisoned stack is still whole.
    free.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What one ring slot carries.
type RingPacket = (Vec<u8>, usize, Option<SharedSamples>);

struct RingTx {
    free: FreeStack,
    full: SyncSender<RingPacket>,
}

struct RingRx {
    full: Receiver<RingPacket>,
    free: FreeStack,
}

impl RingTx {
    /// Puts `pkt[..len]` (and `shared`) on the ring and gives the sender a free buffer
    /// at least as long; false (dropped) when none is free.
    fn push(
        &mut self,
        pkt: &mut Vec<u8>,
        len: usize,
        shared: Option<SharedSamples>,
    ) -> io::Result<bool> {
        let Some(mut spare) = lock(&self.free).pop() else {
            return Ok(false);
        };
        let len = len.min(pkt.len());
        if spare.len() < pkt.len() {
            spare.resize(pkt.len(), 0);
        }
        std::mem::swap(pkt, &mut spare);
        // Never blocks: the ring holds as many slots as there are buffers.
        self.full
            .send((spare, len, shared))
            .map(|()| true)
            .map_err(|_| {
                io::Error::new(io::ErrorKind::BrokenPipe, "fronthaul ring receiver is gone")
            })
    }
}

impl PacketTx for RingTx {
    fn send(&mut self, pkt: &mut Vec<u8>, len: usize) -> io::Result<bool> {
        self.push(pkt, len, None)
    }

    fn send_samples(
        &mut self,
        pkt: &mut Vec<u8>,
        h: &FronthaulHeader,
        samples: SharedSamples,
    ) -> io::Result<bool> {
        let count = samples.samples().len();
        if count > wire::MAX_SAMPLES {
            return Err(invalid(WireError::TooManySamples { samples: count }));
        }
        let h = FronthaulHeader {
            samples: count as u16,
            ..*h
        };
        let n = wire::encode_header(&h, pkt).map_err(invalid)?;
        self.push(pkt, n, Some(samples))
    }
}

impl PacketRx for RingRx {
    fn recv(&mut self, pkt: &mut RxPacket, timeout: Duration) -> io::Result<Recv> {
        match self.full.recv_timeout(timeout) {
            Ok((mut bytes, n, shared)) => {
                // The packet's buffer becomes the receiver's; its old one goes back
                // to the free list.
                std::mem::swap(&mut pkt.buf, &mut bytes);
                lock(&self.free).push(bytes);
                pkt.len = n;
                pkt.shared = shared;
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
    fn recv(&mut self, pkt: &mut RxPacket, timeout: Duration) -> io::Result<Recv> {
        self.0
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))?;
        pkt.shared = None;
        match self.0.recv(&mut pkt.buf) {
            Ok(n) => {
                pkt.len = n;
                Ok(Recv::Packet(n))
            }
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
        let mut buf = RxPacket::with_capacity(16);
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(3)
        );
        assert_eq!(&buf.buf[..3], b"one");
        assert!(send(&mut tx, b"four"));
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(3)
        );
        assert_eq!(&buf.buf[..3], b"two");
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(4)
        );
        assert_eq!(&buf.buf[..4], b"four");
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
        let mut buf = RxPacket::with_capacity(8);
        // The receiver takes the packet's own buffer, whatever its own length.
        assert_eq!(
            rx.recv(&mut buf, Duration::from_millis(10)).unwrap(),
            Recv::Packet(32)
        );
        assert!(buf.buf[..32].iter().all(|&b| b == 7));
    }

    #[test]
    fn udp_loopback_carries_packets() {
        let (mut tx, mut rx) = udp().unwrap();
        assert!(send(&mut tx, b"hello"));
        let mut buf = RxPacket::with_capacity(16);
        assert_eq!(
            rx.recv(&mut buf, Duration::from_secs(2)).unwrap(),
            Recv::Packet(5)
        );
        assert_eq!(&buf.buf[..5], b"hello");
    }

    /// A frame whose samples count up, for checking which ones a packet carries.
    fn frame(n: usize) -> Arc<GeneratedFrame> {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let mut f = radiohost_phy::generator::Generator::new(&cfg)
            .frame(0)
            .unwrap();
        f.samples = (0..n as i16).map(|i| Ci16::new(i, -i)).collect();
        Arc::new(f)
    }

    fn header() -> FronthaulHeader {
        FronthaulHeader {
            ru: 3,
            frame: 9,
            symbol: 2,
            antenna: 1,
            samples: 0,
        }
    }

    #[test]
    fn shared_samples_cross_the_ring_by_reference_and_udp_as_bytes() {
        let f = frame(100);
        assert!(SharedSamples::new(f.clone(), 90..101).is_none());
        let (ring_tx, ring_rx) = ring(4, 64);
        let (udp_tx, udp_rx) = udp().unwrap();
        for (mut tx, mut rx, shared) in [(ring_tx, ring_rx, true), (udp_tx, udp_rx, false)] {
            let mut pkt = vec![0u8; 64];
            let s = SharedSamples::new(f.clone(), 10..20).unwrap();
            assert!(tx.send_samples(&mut pkt, &header(), s).unwrap());
            let mut got = RxPacket::with_capacity(128);
            assert!(matches!(
                rx.recv(&mut got, Duration::from_secs(2)).unwrap(),
                Recv::Packet(_)
            ));
            assert_eq!(got.shared.is_some(), shared);
            let (h, payload) = got.parse().unwrap();
            assert_eq!(
                h,
                FronthaulHeader {
                    samples: 10,
                    ..header()
                }
            );
            let mut out = vec![Ci16::default(); 10];
            assert_eq!(payload.read_into(&mut out), 10);
            assert_eq!(out, &f.samples[10..20]);
        }
    }

    #[test]
    fn a_ring_packet_with_bytes_behind_the_header_and_shared_samples_is_refused() {
        let (mut tx, mut rx) = ring(2, 64);
        let mut pkt = vec![0u8; 64];
        let s = SharedSamples::new(frame(8), 0..4).unwrap();
        assert!(tx.send_samples(&mut pkt, &header(), s).unwrap());
        let mut got = RxPacket::with_capacity(64);
        rx.recv(&mut got, Duration::from_secs(1)).unwrap();
        got.len += 4;
        assert_eq!(
            got.parse().unwrap_err(),
            WireError::Length {
                declared: 4,
                actual: 20
            }
        );
        got.len = 10;
        assert_eq!(got.parse().unwrap_err(), WireError::Truncated { len: 10 });
    }

    #[test]
    fn too_many_samples_are_an_invalid_input_on_every_transport() {
        let f = frame(wire::MAX_SAMPLES + 1);
        let (ring_tx, _ring_rx) = ring(2, 64);
        let (udp_tx, _udp_rx) = udp().unwrap();
        for mut tx in [ring_tx, udp_tx] {
            let s = SharedSamples::new(f.clone(), 0..wire::MAX_SAMPLES + 1).unwrap();
            let err = tx
                .send_samples(&mut vec![0u8; 64], &header(), s)
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }
}
