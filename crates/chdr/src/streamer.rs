//! The host streamer: RX packets in, [`PacketProcessor`], TX packets out, one
//! packet time at a time. It owns the socket; the protocol decisions live in the
//! sans-IO cores ([`Reorder`], [`CreditSender`]).
//!
//! One UDP socket carries everything: RX data from the radio, stream status from
//! the radio's TX endpoints, and our TX data and stream commands. Datagrams are
//! received and sent in batches (recvmmsg/sendmmsg). Each input port's packets
//! go through a reorder window; holes become zero packets so a convolution (or
//! the radio's TX clock) stays sample-synchronous. TX packets wait in a bounded
//! per-port queue while flow-control credit is exhausted.

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use radiohost_iq::Ci16;

use crate::flow::{CreditCounters, CreditSender, StatusAction};
use crate::net::{self, realtime_ns, RecvBatch, SendBatch};
use crate::process::{Block, PacketProcessor};
use crate::seq::{Delivery, Reorder, ReorderCounters};
use crate::wire::{
    data_packet_len, write_data_packet, DataPacket, DataPacketSpec, Packet, StreamCommand,
    StreamStatusCode, WireError, MAX_PACKET_BYTES,
};
use radiohost_rt::stats::{LatencyHistogram, Summary};

/// How the streaming thread waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PollMode {
    /// Sleep in `recvmmsg` until a datagram arrives (the baseline).
    Blocking,
    /// Spin on non-blocking `recvmmsg`: no wake-up latency, one core at 100%.
    BusyPoll,
}

#[derive(Clone, Debug)]
pub struct StreamerConfig {
    pub bind: SocketAddr,
    /// The radio's TX endpoint (data and stream commands go there).
    pub radio_tx: SocketAddr,
    /// Destination EPID of each input port's RX stream, in port order.
    pub rx_epids: Vec<u16>,
    /// The radio's TX endpoint EPID for each output port.
    pub tx_epids: Vec<u16>,
    /// Our EPID for output port 0; port p uses `host_epid + p`.
    pub host_epid: u16,
    pub samples_per_packet: usize,
    /// Added to the RX timestamp to give the TX timestamp (the pass-through budget).
    pub tx_offset_ticks: u64,
    pub poll: PollMode,
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority for the streaming thread (needs CAP_SYS_NICE).
    pub rt_priority: Option<i32>,
    pub batch: usize,
    pub reorder_window: usize,
    /// TX packets held per output port while out of credit.
    pub pending_capacity: usize,
    /// Ask the radio for a stream status every this many packets.
    pub status_period: u64,
    /// Each RX datagram is also forwarded, unchanged, to these addresses.
    pub subscribers: Vec<SocketAddr>,
    pub stop_after_frames: Option<u64>,
    /// Stop when nothing arrives for this long once streaming has started.
    pub idle_timeout: Duration,
    /// Give up waiting for flow-control credit at the end after this long.
    pub drain_timeout: Duration,
}

impl StreamerConfig {
    /// A SISO pass-through configuration with sensible defaults.
    pub fn new(bind: SocketAddr, radio_tx: SocketAddr, samples_per_packet: usize) -> Self {
        StreamerConfig {
            bind,
            radio_tx,
            rx_epids: vec![0x100],
            tx_epids: vec![0x200],
            host_epid: 0x300,
            samples_per_packet,
            tx_offset_ticks: 0,
            poll: PollMode::Blocking,
            cpu: None,
            rt_priority: None,
            batch: 32,
            reorder_window: 8,
            pending_capacity: 64,
            status_period: 4,
            subscribers: Vec::new(),
            stop_after_frames: None,
            idle_timeout: Duration::from_millis(500),
            drain_timeout: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StreamerError {
    #[error("cannot bind the streamer socket to {addr}: {source} (is another streamer running?)")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("socket I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error("processor has {proc_in} inputs / {proc_out} outputs but {rx} RX and {tx} TX EPIDs are configured")]
    PortMismatch {
        proc_in: usize,
        proc_out: usize,
        rx: usize,
        tx: usize,
    },
    #[error("{samples} samples per packet do not fit a CHDR packet (max {max})")]
    PacketTooLarge { samples: usize, max: usize },
    #[error("encoding a packet failed: {0}")]
    Wire(#[from] WireError),
    #[error("cannot allocate the processing blocks: {0}")]
    Block(#[from] radiohost_iq::BlockError),
}

/// Something the streamer noticed, in the order it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StreamEvent {
    /// RX packets given up on (lost or too late); replaced by zeros.
    SequenceGap {
        port: usize,
        seq: u16,
    },
    /// An RX packet arrived early and was held until the gap before it filled.
    Reordered {
        port: usize,
        seq: u16,
    },
    /// An RX packet arrived after its slot was given up on (or twice): dropped.
    Stale {
        port: usize,
        seq: u16,
    },
    /// Output port ran out of flow-control credit.
    FlowStall {
        port: usize,
    },
    FlowResume {
        port: usize,
    },
    /// The radio reported an error; a RESYNC was sent.
    StatusError {
        port: usize,
        code: StreamStatusCode,
        info: u64,
    },
    /// The pending queue was full while stalled: a TX packet was dropped.
    HostQueueDrop {
        port: usize,
    },
}

const MAX_EVENTS: usize = 10_000;

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StreamerCounters {
    pub rx_datagrams: u64,
    pub frames: u64,
    pub tx_packets: u64,
    pub fanout_packets: u64,
    pub zero_filled_packets: u64,
    /// Frames where some port had no packet and got zeros.
    pub misaligned_frames: u64,
    /// Packets that arrived after their packet time was processed (with zeros).
    pub late_port_packets: u64,
    pub unknown_stream: u64,
    pub malformed: u64,
    pub wrong_size: u64,
    pub host_queue_drops: u64,
    pub send_drops: u64,
    pub resyncs_sent: u64,
    pub events_dropped: u64,
    /// Time spent in the packet processor, all frames together (ns): against the
    /// stream's duration, how much of a core the processing alone needs.
    pub process_ns: u64,
}

#[derive(serde::Serialize)]
pub struct StreamerReport {
    pub counters: StreamerCounters,
    pub reorder: Vec<ReorderCounters>,
    pub credit: Vec<CreditCounters>,
    /// Kernel receive timestamp -> return of the sendmmsg carrying the TX packet.
    pub rx_to_tx: Summary,
    /// Return of recvmmsg -> return of sendmmsg (excludes wake-up latency).
    pub user_rx_to_tx: Summary,
    pub events: Vec<StreamEvent>,
    pub pinned_cpu: Option<usize>,
    pub pin_error: Option<String>,
    #[serde(skip)]
    pub rx_to_tx_hist: LatencyHistogram,
}

struct InSlot {
    ts: u64,
    eob: bool,
    kernel_ns: i64,
    user_ns: i64,
    samples: Vec<Ci16>,
}

struct Pending {
    buf: Vec<u8>,
    len: usize,
    stamps: (i64, i64),
}

/// Everything but the socket and receive buffers, so borrows split cleanly.
struct Core<P> {
    cfg: StreamerConfig,
    proc: P,
    reorder: Vec<Reorder>,
    next_ts: Vec<Option<u64>>,
    inbox: Vec<VecDeque<InSlot>>,
    free_slots: Vec<Vec<Vec<Ci16>>>,
    inbox_cap: usize,
    /// End of the last processed packet time: older deliveries are late.
    processed_until: Option<u64>,
    in_block: Block<Ci16>,
    out_block: Block<Ci16>,
    credit: Vec<CreditSender>,
    tx_seq: Vec<u16>,
    ctl_seq: u16,
    pending: Vec<VecDeque<Pending>>,
    free_pending: Vec<Vec<Vec<u8>>>,
    send: SendBatch,
    send_stamps: Vec<Option<(i64, i64)>>,
    radio_tx: (libc::sockaddr_storage, libc::socklen_t),
    subscribers: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
    counters: StreamerCounters,
    events: Vec<StreamEvent>,
    hist: LatencyHistogram,
    user_hist: LatencyHistogram,
}

/// Run the streamer until `stop` is set, `stop_after_frames` is reached, or
/// the stream goes idle. Returns what happened.
pub fn run_streamer<P: PacketProcessor>(
    cfg: StreamerConfig,
    proc: P,
    stop: &AtomicBool,
) -> Result<StreamerReport, StreamerError> {
    let sock = UdpSocket::bind(cfg.bind).map_err(|source| StreamerError::Bind {
        addr: cfg.bind,
        source,
    })?;
    run_streamer_on(sock, cfg, proc, stop)
}

/// As [`run_streamer`], on an already bound socket (so callers can learn its port first).
pub fn run_streamer_on<P: PacketProcessor>(
    sock: UdpSocket,
    cfg: StreamerConfig,
    proc: P,
    stop: &AtomicBool,
) -> Result<StreamerReport, StreamerError> {
    run_streamer_ready(sock, cfg, proc, stop, || {})
}

/// As [`run_streamer_on`], calling `ready` once the streamer has built its
/// buffers and sent INIT, just before it starts receiving: an in-process radio
/// started after that finds the host listening, however slowly this thread got
/// going on a busy machine.
pub fn run_streamer_ready<P: PacketProcessor>(
    sock: UdpSocket,
    cfg: StreamerConfig,
    proc: P,
    stop: &AtomicBool,
    ready: impl FnOnce(),
) -> Result<StreamerReport, StreamerError> {
    if proc.inputs() != cfg.rx_epids.len() || proc.outputs() != cfg.tx_epids.len() {
        return Err(StreamerError::PortMismatch {
            proc_in: proc.inputs(),
            proc_out: proc.outputs(),
            rx: cfg.rx_epids.len(),
            tx: cfg.tx_epids.len(),
        });
    }
    let pkt_len = data_packet_len(true, 1, cfg.samples_per_packet);
    if pkt_len > MAX_PACKET_BYTES || cfg.samples_per_packet == 0 {
        return Err(StreamerError::PacketTooLarge {
            samples: cfg.samples_per_packet,
            max: (MAX_PACKET_BYTES - 24) / 4,
        });
    }
    let _ = net::enable_rx_timestamps(&sock);
    net::set_buffer_sizes(&sock, 8 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))?;
    let (pinned_cpu, mut pin_error) = match cfg.cpu {
        Some(cpu) => match net::pin_current_thread(cpu) {
            Ok(()) => (Some(cpu), None),
            Err(e) => (
                None,
                Some(format!(
                    "pinning to CPU {cpu} refused: {e}; running unpinned"
                )),
            ),
        },
        None => (None, None),
    };
    if let Some(prio) = cfg.rt_priority {
        if let Err(e) = net::set_fifo_priority(prio) {
            let msg = format!(
                "SCHED_FIFO priority {prio} refused: {e} (grant CAP_SYS_NICE or run as root); \
                 running with the normal policy"
            );
            pin_error = Some(pin_error.map_or(msg.clone(), |p| format!("{p}; {msg}")));
        }
    }
    let mut proc = proc;
    proc.warm_up();
    let mut core = Core::new(cfg, proc, pkt_len)?;
    let mut rx = RecvBatch::new(core.cfg.batch, MAX_PACKET_BYTES);
    core.send_init(&sock)?;
    ready();
    let mut last_rx = Instant::now();
    let mut last_init = Instant::now();
    let mut started = false;
    let mut spins = 0u32;
    loop {
        let n = rx.recv(&sock, core.cfg.poll == PollMode::Blocking)?;
        let user_ns = realtime_ns();
        for i in 0..n {
            let d = rx.get(i);
            core.on_datagram(d.bytes, d.kernel_rx_ns.unwrap_or(user_ns), user_ns, &sock)?;
        }
        if n > 0 {
            core.flush(&sock)?;
            started |= core.counters.frames > 0;
            last_rx = Instant::now();
            spins = 0;
        } else {
            spins += 1;
        }
        // Cheap checks every iteration; clock reads only when idle-ish.
        if core
            .cfg
            .stop_after_frames
            .is_some_and(|f| core.counters.frames >= f)
        {
            break;
        }
        if n == 0 && (core.cfg.poll == PollMode::Blocking || spins.is_multiple_of(1024)) {
            if stop.load(Ordering::Relaxed)
                || (started && last_rx.elapsed() > core.cfg.idle_timeout)
            {
                break;
            }
            if !core.credit.iter().all(|c| c.is_initialised())
                && last_init.elapsed() > Duration::from_millis(100)
            {
                core.send_init(&sock)?; // the first INIT or its answer was lost
                last_init = Instant::now();
            }
        }
    }
    core.finish(&sock, &mut rx)?;
    Ok(core.report(pinned_cpu, pin_error))
}

impl<P: PacketProcessor> Core<P> {
    fn new(cfg: StreamerConfig, proc: P, pkt_len: usize) -> Result<Self, StreamerError> {
        let ins = cfg.rx_epids.len();
        let outs = cfg.tx_epids.len();
        let spp = cfg.samples_per_packet;
        // Room for the reorder window plus a burst of scheduling delay per port.
        let inbox_cap = 2 * (cfg.reorder_window.next_power_of_two() + 64);
        let batch = cfg.batch.max(1) * (outs + cfg.subscribers.len() + 1);
        Ok(Core {
            reorder: (0..ins)
                .map(|_| Reorder::new(cfg.reorder_window, MAX_PACKET_BYTES))
                .collect(),
            next_ts: vec![None; ins],
            inbox: (0..ins)
                .map(|_| VecDeque::with_capacity(inbox_cap))
                .collect(),
            free_slots: (0..ins)
                .map(|_| (0..inbox_cap).map(|_| vec![Ci16::default(); spp]).collect())
                .collect(),
            inbox_cap,
            processed_until: None,
            in_block: Block::zeros(ins, spp, 0.0, 0)?,
            out_block: Block::zeros(outs, spp, 0.0, 0)?,
            credit: (0..outs)
                .map(|p| CreditSender::new(cfg.host_epid.wrapping_add(p as u16)))
                .collect(),
            tx_seq: vec![0; outs],
            ctl_seq: 0,
            pending: (0..outs)
                .map(|_| VecDeque::with_capacity(cfg.pending_capacity))
                .collect(),
            free_pending: (0..outs)
                .map(|_| {
                    (0..cfg.pending_capacity)
                        .map(|_| vec![0u8; pkt_len])
                        .collect()
                })
                .collect(),
            send: SendBatch::new(batch, MAX_PACKET_BYTES),
            send_stamps: vec![None; batch],
            radio_tx: net::to_sockaddr(&cfg.radio_tx),
            subscribers: cfg.subscribers.iter().map(net::to_sockaddr).collect(),
            counters: StreamerCounters::default(),
            events: Vec::with_capacity(1024),
            hist: LatencyHistogram::new(),
            user_hist: LatencyHistogram::new(),
            proc,
            cfg,
        })
    }

    fn event(&mut self, e: StreamEvent) {
        if self.events.len() < MAX_EVENTS {
            self.events.push(e);
        } else {
            self.counters.events_dropped += 1;
        }
    }

    fn send_init(&mut self, sock: &UdpSocket) -> Result<(), StreamerError> {
        for p in 0..self.credit.len() {
            let cmd = self.credit[p].init_command(self.cfg.status_period);
            self.send_command(sock, p, &cmd)?;
        }
        self.flush(sock)
    }

    fn send_command(
        &mut self,
        sock: &UdpSocket,
        port: usize,
        cmd: &StreamCommand,
    ) -> Result<(), StreamerError> {
        if self.send.is_full() {
            self.flush(sock)?;
        }
        let (seq, dst) = (self.ctl_seq, self.cfg.tx_epids[port]);
        self.ctl_seq = seq.wrapping_add(1);
        let i = self.send.len();
        self.send.push(&self.radio_tx, |b| cmd.write(b, seq, dst))?;
        self.send_stamps[i] = None;
        Ok(())
    }

    fn on_datagram(
        &mut self,
        bytes: &[u8],
        kernel_ns: i64,
        user_ns: i64,
        sock: &UdpSocket,
    ) -> Result<(), StreamerError> {
        self.counters.rx_datagrams += 1;
        let packet = match Packet::parse(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return Ok(());
            }
        };
        match packet {
            Packet::Data(d) => {
                let Some(port) = self
                    .cfg
                    .rx_epids
                    .iter()
                    .position(|&e| e == d.header.dst_epid)
                else {
                    self.counters.unknown_stream += 1;
                    return Ok(());
                };
                for k in 0..self.subscribers.len() {
                    if self.send.is_full() {
                        self.flush(sock)?;
                    }
                    let dest = self.subscribers[k];
                    let i = self.send.len();
                    self.send.push(&dest, |b| {
                        b[..bytes.len()].copy_from_slice(bytes);
                        Ok::<_, StreamerError>(bytes.len())
                    })?;
                    self.send_stamps[i] = None;
                    self.counters.fanout_packets += 1;
                }
                self.on_rx_data(port, d.header.seq_num, bytes, kernel_ns, user_ns, sock)
            }
            Packet::Status(_, s) => {
                let Some(port) = self.cfg.tx_epids.iter().position(|&e| e == s.src_epid) else {
                    self.counters.unknown_stream += 1;
                    return Ok(());
                };
                match self.credit[port].on_status(&s) {
                    StatusAction::Credit { unstalled } => {
                        if unstalled {
                            self.event(StreamEvent::FlowResume { port });
                        }
                    }
                    StatusAction::Error { code, info, resync } => {
                        self.event(StreamEvent::StatusError { port, code, info });
                        self.counters.resyncs_sent += 1;
                        self.send_command(sock, port, &resync)?;
                    }
                }
                self.drain_pending(port, sock)
            }
            Packet::Command(..) | Packet::Other(..) => {
                self.counters.unknown_stream += 1;
                Ok(())
            }
        }
    }

    fn on_rx_data(
        &mut self,
        port: usize,
        seq: u16,
        bytes: &[u8],
        kernel_ns: i64,
        user_ns: i64,
        sock: &UdpSocket,
    ) -> Result<(), StreamerError> {
        // Move the trackers out (no allocation) so `deliver` may borrow self.
        let mut reorder = std::mem::take(&mut self.reorder);
        let outcome = reorder[port].push(seq, bytes, |d| self.deliver(port, d, kernel_ns, user_ns));
        self.reorder = reorder;
        match outcome {
            crate::seq::PushOutcome::Held { .. } => {
                self.event(StreamEvent::Reordered { port, seq })
            }
            crate::seq::PushOutcome::Stale { .. } => self.event(StreamEvent::Stale { port, seq }),
            _ => {}
        }
        self.process_ready(sock, false)
    }

    /// Decode one in-order delivery into the port's inbox (holes become zeros).
    fn deliver(&mut self, port: usize, d: Delivery<'_>, kernel_ns: i64, user_ns: i64) {
        let spp = self.cfg.samples_per_packet;
        let Some(mut samples) = self.free_slots[port].pop() else {
            // Cannot happen while process_ready keeps inboxes below half full.
            self.counters.host_queue_drops += 1;
            return;
        };
        let (ts, eob) = match d {
            Delivery::Packet { bytes, .. } => match DataPacket::parse(bytes) {
                Ok(p) if p.num_samples() == spp => {
                    p.read_samples(&mut samples)
                        .expect("slot holds spp samples");
                    (
                        p.timestamp.or(self.next_ts[port]).unwrap_or(0),
                        p.header.eob,
                    )
                }
                _ => {
                    self.counters.wrong_size += 1;
                    samples.fill(Ci16::default());
                    (self.next_ts[port].unwrap_or(0), false)
                }
            },
            Delivery::Missing { seq } => {
                self.event(StreamEvent::SequenceGap { port, seq });
                self.counters.zero_filled_packets += 1;
                samples.fill(Ci16::default());
                (self.next_ts[port].unwrap_or(0), false)
            }
        };
        self.next_ts[port] = Some(ts.saturating_add(spp as u64));
        if self.processed_until.is_some_and(|t| ts < t) {
            // Its packet time was already processed with zeros for this port.
            self.counters.late_port_packets += 1;
            self.free_slots[port].push(samples);
            return;
        }
        self.inbox[port].push_back(InSlot {
            ts,
            eob,
            kernel_ns,
            user_ns,
            samples,
        });
    }

    /// Process every packet time for which all input ports have data. If one
    /// port runs half an inbox ahead (another port's stream stopped), process the
    /// oldest packet time anyway with zeros for the ports that lack it, so
    /// memory stays bounded and the live ports keep flowing.
    /// With `force` (end of stream) every remaining packet time is processed.
    fn process_ready(&mut self, sock: &UdpSocket, force: bool) -> Result<(), StreamerError> {
        let spp = self.cfg.samples_per_packet;
        loop {
            let all = self.inbox.iter().all(|q| !q.is_empty());
            let overfull = self.inbox.iter().any(|q| q.len() >= self.inbox_cap / 2);
            if !all && !overfull && !force {
                return Ok(());
            }
            let Some(ts) = self
                .inbox
                .iter()
                .filter_map(|q| q.front().map(|s| s.ts))
                .min()
            else {
                return Ok(());
            };
            let mut kernel_ns = i64::MIN;
            let mut user_ns = i64::MIN;
            let mut eob = false;
            let mut filled = false;
            for p in 0..self.inbox.len() {
                if self.inbox[p].front().is_some_and(|s| s.ts == ts) {
                    let slot = self.inbox[p].pop_front().expect("front exists");
                    // The frame is ready when its last port arrived.
                    kernel_ns = kernel_ns.max(slot.kernel_ns);
                    user_ns = user_ns.max(slot.user_ns);
                    eob |= slot.eob;
                    self.in_block.port_mut(p).copy_from_slice(&slot.samples);
                    self.free_slots[p].push(slot.samples);
                } else {
                    // This port has nothing for `ts` (lost beyond the reorder
                    // window, or its stream stalled): zeros keep time aligned.
                    self.in_block.port_mut(p).fill(Ci16::default());
                    self.counters.zero_filled_packets += 1;
                    filled = true;
                }
            }
            if filled {
                self.counters.misaligned_frames += 1;
            }
            self.processed_until = Some(ts.saturating_add(spp as u64));
            let processing = Instant::now();
            self.proc.process(&self.in_block, &mut self.out_block);
            self.counters.process_ns += processing.elapsed().as_nanos() as u64;
            self.counters.frames += 1;
            for port in 0..self.out_block.ports() {
                self.emit_tx(port, ts, ts, eob, (kernel_ns, user_ns), sock)?;
            }
        }
    }

    fn emit_tx(
        &mut self,
        port: usize,
        ts: u64,
        rx_ts: u64,
        eob: bool,
        stamps: (i64, i64),
        sock: &UdpSocket,
    ) -> Result<(), StreamerError> {
        let spec = DataPacketSpec {
            eob,
            seq_num: self.tx_seq[port],
            dst_epid: self.cfg.tx_epids[port],
            timestamp: Some(ts.wrapping_add(self.cfg.tx_offset_ticks)),
            ..Default::default()
        };
        let len = data_packet_len(true, 1, self.out_block.len());
        if self.pending[port].is_empty() && self.credit[port].can_send(len) {
            if self.send.is_full() {
                self.flush(sock)?;
            }
            let i = self.send.len();
            let samples = self.out_block.port(port);
            self.send.push(&self.radio_tx, |b| {
                write_data_packet(b, &spec, &[rx_ts], samples)
            })?;
            self.send_stamps[i] = Some(stamps);
            self.credit[port].on_sent(len);
        } else {
            if self.credit[port].is_stalled() && self.pending[port].is_empty() {
                self.event(StreamEvent::FlowStall { port });
            }
            let Some(mut buf) = self.free_pending[port].pop() else {
                self.counters.host_queue_drops += 1;
                self.event(StreamEvent::HostQueueDrop { port });
                return Ok(()); // seq not advanced: the radio sees a time gap, not a seq error
            };
            let len = write_data_packet(&mut buf, &spec, &[rx_ts], self.out_block.port(port))?;
            self.pending[port].push_back(Pending { buf, len, stamps });
        }
        self.tx_seq[port] = self.tx_seq[port].wrapping_add(1);
        self.counters.tx_packets += 1;
        Ok(())
    }

    /// Move queued TX packets into the send batch while credit allows.
    fn drain_pending(&mut self, port: usize, sock: &UdpSocket) -> Result<(), StreamerError> {
        while let Some(front) = self.pending[port].front() {
            if !self.credit[port].can_send(front.len) {
                break;
            }
            if self.send.is_full() {
                self.flush(sock)?;
            }
            let p = self.pending[port].pop_front().expect("front exists");
            let i = self.send.len();
            self.send.push(&self.radio_tx, |b| {
                b[..p.len].copy_from_slice(&p.buf[..p.len]);
                Ok::<_, StreamerError>(p.len)
            })?;
            self.credit[port].on_sent(p.len);
            self.send_stamps[i] = Some(p.stamps);
            self.free_pending[port].push(p.buf);
        }
        Ok(())
    }

    fn flush(&mut self, sock: &UdpSocket) -> Result<(), StreamerError> {
        if self.send.is_empty() {
            return Ok(());
        }
        let n = self.send.len();
        let r = self.send.flush(sock)?;
        let done = realtime_ns();
        self.counters.send_drops += r.dropped as u64;
        for s in self.send_stamps[..n].iter_mut() {
            if let Some((kernel_ns, user_ns)) = s.take() {
                if kernel_ns != 0 {
                    self.hist.record_signed(done - kernel_ns);
                    self.user_hist.record_signed(done - user_ns);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, sock: &UdpSocket, rx: &mut RecvBatch) -> Result<(), StreamerError> {
        // Give up on outstanding holes and push out everything held.
        let mut reorder = std::mem::take(&mut self.reorder);
        for (port, r) in reorder.iter_mut().enumerate() {
            r.flush(&mut |d| self.deliver(port, d, 0, 0));
        }
        self.reorder = reorder;
        self.process_ready(sock, true)?;
        self.flush(sock)?;
        // Wait (bounded) for credit to send what is still queued.
        let deadline = Instant::now() + self.cfg.drain_timeout;
        while self.pending.iter().any(|q| !q.is_empty()) && Instant::now() < deadline {
            let n = rx.recv(sock, true)?;
            for i in 0..n {
                let d = rx.get(i);
                if let Ok(Packet::Status(..)) = Packet::parse(d.bytes) {
                    self.on_datagram(d.bytes, 0, 0, sock)?;
                }
            }
            self.flush(sock)?;
        }
        for port in 0..self.pending.len() {
            let left = self.pending[port].len() as u64;
            self.counters.host_queue_drops += left;
            self.pending[port].clear();
        }
        Ok(())
    }

    fn report(self, pinned_cpu: Option<usize>, pin_error: Option<String>) -> StreamerReport {
        StreamerReport {
            reorder: self.reorder.iter().map(|r| r.counters()).collect(),
            credit: self.credit.iter().map(|c| c.counters()).collect(),
            rx_to_tx: self.hist.summary(),
            user_rx_to_tx: self.user_hist.summary(),
            events: self.events,
            counters: self.counters,
            pinned_cpu,
            pin_error,
            rx_to_tx_hist: self.hist,
        }
    }
}
