//! Runs many emulated nodes behind paced link models, in one event-loop thread.
//!
//! The network modelled: each node has its own link (default 1 Gbit/s each way) to
//! a switch, and the host reaches the switch over one or two shared host links
//! (default 10 Gbit/s each). A datagram from the host crosses its host link, then
//! the node's link, and is handled at its modelled arrival time; a node's replies
//! cross the node link, then the host link, and leave the emulator's socket at
//! their modelled arrival time. Packets enter the shared host link in the order of
//! the times they reach it, so concurrent nodes share it fairly. Reply packets of
//! one node that are due at once (the loop fell behind) leave in one UDP GSO send
//! where the kernel offers it ([`EmulatorConfig::offload`]).
//!
//! The nodes are front ends over one emulated air ([`EmulatorConfig::air`]): a trigger
//! makes every node emit its TX buffers into the air at one tick (the largest of the
//! nodes' [`NodeCore::earliest_trigger_tick`]: the air's present unless the air or a
//! node's previous trigger window is already past it), and each node's RX buffers are
//! what the air received from that tick. Without an air, the emulator builds an
//! identity air on the host clock at [`WARP_RATE_HZ`], node `n` path `r` on port
//! `4n + r`: TX comes back on the same node's RX as `WarpWord::tx_to_rx`.

use crate::addressing::{Addressing, FramePayload};
use crate::mmsg::RecvBatch;
use crate::node::{
    NodeAction, NodeCore, NodeCounters, NodePorts, ReadJob, BUFFER_SAMPLES, WARP_RATE_HZ,
};
use crate::udp::{Offload, OffloadPolicy, SegmentBatch};
use crate::wire::{
    self, NodeRefusal, PacketType, TransportHeader, CMD_READ_IQ, SAMPLE_PACKET_OVERHEAD,
};
use radiohost_testbed::air::{Air, AirClock, AirConfig};
use radiohost_testbed::link::{Fate, Link, LinkConfig, LinkStats};
use radiohost_testbed::pacing::tighten_timer_slack;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    /// Number of nodes; node n has ID `first_node + n`.
    pub nodes: u16,
    pub first_node: u16,
    pub addressing: Addressing,
    /// Largest UDP payload the nodes accept and send.
    pub payload: FramePayload,
    /// Each node's link to the switch (both directions).
    pub node_link: LinkConfig,
    /// Each host link (both directions); nodes are split evenly across them.
    pub host_link: LinkConfig,
    pub host_links: usize,
    /// Bind the trigger socket (only one emulator per address can).
    pub listen_for_triggers: bool,
    /// Hosts allowed to talk to the nodes; empty means any. Datagrams from other
    /// addresses are dropped and counted.
    pub allowed_hosts: Vec<std::net::IpAddr>,
    /// The air the nodes are front ends of, and which air ports each node's RF paths
    /// are; `None`: an identity air of its own (see the module docs).
    pub air: Option<(Air, PortMap)>,
    /// UDP GSO for replies and GRO for requests where the kernel offers them. A
    /// node's replies leave in one GSO send only when several are already due (the
    /// loop fell behind), so offload never sends a packet before its modelled time.
    pub offload: OffloadPolicy,
}

/// Which air ports each node's RF paths are: `nodes[n]` for node index `n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortMap {
    pub nodes: Vec<NodePorts>,
}

impl PortMap {
    /// Node index `n` path `r` on air port `4n + r`, both ways.
    pub fn identity(nodes: usize) -> Self {
        PortMap {
            nodes: (0..nodes).map(NodePorts::identity).collect(),
        }
    }
}

/// The identity air an emulator builds when given none.
fn identity_air(nodes: u16) -> io::Result<(Air, PortMap)> {
    let ports = 4 * (nodes as usize).max(1);
    let cfg = AirConfig {
        history: BUFFER_SAMPLES,
        max_pending: 4 * BUFFER_SAMPLES,
        clock: AirClock::Real,
        ..AirConfig::identity(WARP_RATE_HZ, ports)
    };
    let air = Air::new(cfg).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok((air, PortMap::identity(nodes as usize)))
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            nodes: 16,
            first_node: 0,
            addressing: Addressing::LOOPBACK,
            payload: FramePayload::Jumbo,
            node_link: LinkConfig {
                rate_bps: 1e9,
                delay: Duration::from_micros(5),
                queue_limit_bytes: 1 << 20,
                ..Default::default()
            },
            host_link: LinkConfig {
                rate_bps: 10e9,
                delay: Duration::from_micros(5),
                queue_limit_bytes: 4 << 20,
                ..Default::default()
            },
            host_links: 1,
            listen_for_triggers: true,
            allowed_hosts: Vec::new(),
            air: None,
            offload: OffloadPolicy::Auto,
        }
    }
}

impl EmulatorConfig {
    /// Which host link serves node index `i` (contiguous halves for two links, the
    /// way a host splits nodes across two interfaces).
    pub fn host_link_of(&self, i: usize) -> usize {
        let per_link = (self.nodes as usize).div_ceil(self.host_links.max(1));
        (i / per_link.max(1)).min(self.host_links.max(1) - 1)
    }
}

/// Counters of the whole emulator. Every datagram the emulator drops is counted
/// here under its reason (and logged at debug level as it happens); the counters are
/// live: [`Emulator::stats`] reads them while the emulator runs (link counters are
/// refreshed at least every 100 ms).
#[derive(Clone, Debug, Default)]
pub struct EmulatorStats {
    pub nodes: Vec<NodeCounters>,
    pub node_links_down: Vec<LinkStats>,
    pub node_links_up: Vec<LinkStats>,
    pub host_links_down: Vec<LinkStats>,
    pub host_links_up: Vec<LinkStats>,
    /// Datagrams larger than the configured payload (dropped).
    pub oversized: u64,
    /// Replies the socket refused (host gone or buffer full).
    pub send_errors: u64,
    /// Datagrams from hosts not in `allowed_hosts` (dropped).
    pub unexpected_source: u64,
    /// Reply sends that carried several datagrams (UDP GSO).
    pub gso_sends: u64,
    /// Receives that returned several GRO-coalesced datagrams at once.
    pub gro_batches: u64,
    /// What each node's socket got of UDP GSO/GRO (GSO turns off for good on a
    /// socket whose route refused it).
    pub offload: Vec<Offload>,
}

impl EmulatorStats {
    /// Datagrams the nodes themselves dropped (malformed, misaddressed, ...).
    pub fn node_drops(&self) -> u64 {
        self.nodes.iter().map(NodeCounters::dropped).sum()
    }

    /// Datagrams the modelled links lost (loss, bursts, full queues), both ways.
    pub fn link_drops(&self) -> u64 {
        [
            &self.node_links_down,
            &self.node_links_up,
            &self.host_links_down,
            &self.host_links_up,
        ]
        .into_iter()
        .flatten()
        .map(LinkStats::dropped)
        .sum()
    }

    /// Every datagram dropped, for whatever reason.
    pub fn dropped_total(&self) -> u64 {
        self.node_drops() + self.link_drops() + self.oversized + self.unexpected_source
    }
}

struct Shared {
    nodes: Vec<NodeCore>,
    stats: EmulatorStats,
}

/// A running emulator; stops when dropped.
pub struct Emulator {
    addrs: Vec<SocketAddr>,
    trigger_addr: Option<SocketAddr>,
    payload: FramePayload,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Emulator {
    pub fn start(cfg: EmulatorConfig) -> io::Result<Self> {
        if cfg.nodes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an emulator runs at least one node",
            ));
        }
        let payload = cfg.payload;
        let mut sockets = Vec::new();
        let mut addrs = Vec::new();
        for n in 0..cfg.nodes {
            // Base port 0: let the kernel choose (several testbeds on one machine).
            let id = cfg.first_node.checked_add(n).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("node IDs {}.. run past 65535", cfg.first_node),
                )
            })?;
            let mut addr = cfg
                .addressing
                .node_addr(id)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
            if cfg.addressing.base_port == 0 {
                addr.set_port(0);
            }
            let sock = UdpSocket::bind(addr).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "node {} cannot bind {addr}: {e} (another emulator running?)",
                        cfg.first_node + n
                    ),
                )
            })?;
            sock.set_nonblocking(true)?;
            crate::sockbuf::grow_buffers(&sock, 8 << 20)?;
            addrs.push(sock.local_addr()?);
            sockets.push(sock);
        }
        let trigger = if cfg.listen_for_triggers {
            let addr = cfg.addressing.trigger_bind_addr();
            let s = UdpSocket::bind(addr).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot bind the trigger socket {addr}: {e}"),
                )
            })?;
            s.set_nonblocking(true)?;
            s.set_broadcast(true)?;
            Some(s)
        } else {
            None
        };
        let trigger_addr = trigger.as_ref().map(|s| s.local_addr()).transpose()?;
        let (air, map) = match &cfg.air {
            Some(given) => given.clone(),
            None => identity_air(cfg.nodes)?,
        };
        if map.nodes.len() < cfg.nodes as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the port map covers {} nodes but the emulator runs {}; give every node its air ports",
                    map.nodes.len(),
                    cfg.nodes
                ),
            ));
        }
        let nodes: Vec<NodeCore> = (0..cfg.nodes)
            .map(|n| NodeCore::on_air(cfg.first_node + n, air.clone(), map.nodes[n as usize]))
            .collect();
        let shared = Arc::new(Mutex::new(Shared {
            nodes,
            stats: EmulatorStats::default(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let mut lp = EventLoop::new(cfg, sockets, trigger, shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("warp-emulator".into())
            .spawn(move || lp.run())?;
        Ok(Self {
            addrs,
            trigger_addr,
            payload,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Address of node index `i`.
    pub fn node_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub fn trigger_addr(&self) -> Option<SocketAddr> {
        self.trigger_addr
    }

    /// Largest UDP payload the nodes accept and send (what a host must use).
    pub fn payload(&self) -> FramePayload {
        self.payload
    }

    /// Look at (or change) the nodes, e.g. to verify buffers in tests.
    pub fn with_nodes<R>(&self, f: impl FnOnce(&mut [NodeCore]) -> R) -> R {
        f(&mut self.shared.lock().expect("emulator lock").nodes)
    }

    pub fn stats(&self) -> EmulatorStats {
        let s = self.shared.lock().expect("emulator lock");
        let mut stats = s.stats.clone();
        stats.nodes = s.nodes.iter().map(|n| n.counters().clone()).collect();
        stats
    }

    /// Stop and report the error that ended the loop, if any.
    pub fn stop(mut self) -> io::Result<EmulatorStats> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| io::Error::other("emulator thread panicked"))??;
        }
        Ok(self.stats())
    }

    /// A handle that stops the emulator when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Serve until `stop` (e.g. set by Ctrl-C) or the emulator's own stop flag is
    /// set, or `limit` has passed (`None`: no limit); then call [`Emulator::stop`].
    pub fn run_until(&self, stop: &AtomicBool, limit: Option<Duration>) {
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) && !self.stop.load(Ordering::Relaxed) {
            if limit.is_some_and(|d| started.elapsed() >= d) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A datagram from the host, waiting for its modelled arrival at a node.
struct Arrival {
    node: usize,
    from: SocketAddr,
    bytes: Vec<u8>,
}

/// The reply stream of one node: what it still has to put on its link.
#[derive(Default)]
struct Outbox {
    /// Single replies (write acks) not yet on the link, with when they were ready.
    acks: std::collections::VecDeque<(SocketAddr, Vec<u8>, Duration)>,
    /// Read jobs not yet fully on the link, with the next packet index.
    reads: std::collections::VecDeque<(SocketAddr, ReadJob, usize, Duration)>,
    /// Whether this node has an entry in the link-entry heap.
    scheduled: bool,
}

/// A packet that has crossed everything and leaves at `due`.
enum Departure {
    Ack(Vec<u8>),
    ReadPacket(ReadJob, usize),
}

struct Timed<T> {
    due: Duration,
    order: u64,
    item: T,
}

impl<T> PartialEq for Timed<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.due, self.order) == (o.due, o.order)
    }
}
impl<T> Eq for Timed<T> {}
impl<T> PartialOrd for Timed<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Timed<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.due, self.order).cmp(&(o.due, o.order))
    }
}

type Heap<T> = BinaryHeap<Reverse<Timed<T>>>;

struct EventLoop {
    cfg: EmulatorConfig,
    sockets: Vec<UdpSocket>,
    trigger: Option<UdpSocket>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    order: u64,
    node_down: Vec<Link>,
    node_up: Vec<Link>,
    host_down: Vec<Link>,
    host_up: Vec<Link>,
    /// Host datagrams in flight towards nodes, by modelled arrival time.
    arrivals: Heap<Arrival>,
    outboxes: Vec<Outbox>,
    /// Last time offered to each node's uplink (offers must not go back in time).
    last_offer: Vec<Duration>,
    /// Nodes whose next reply packet reaches the shared host link at `due`.
    link_entries: Heap<(usize, SocketAddr)>,
    /// Reply packets leaving the emulator at `due`.
    departures: Heap<(usize, SocketAddr, Departure)>,
    spare: Vec<Vec<u8>>,
    last_publish: Instant,
    oversized: u64,
    send_errors: u64,
    unexpected_source: u64,
    offload: Vec<Offload>,
    /// Reply packets due now, gathered per node into GSO sends.
    due: Vec<(usize, SocketAddr, Departure)>,
    batch: SegmentBatch,
    gso_sends: u64,
    gro_batches: u64,
}

/// How far ahead of the wall clock the loop may compute link entries: a new
/// request cannot produce a packet sooner than this.
const LOOKAHEAD: Duration = Duration::from_micros(5);

impl EventLoop {
    fn new(
        cfg: EmulatorConfig,
        sockets: Vec<UdpSocket>,
        trigger: Option<UdpSocket>,
        shared: Arc<Mutex<Shared>>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let n = cfg.nodes as usize;
        let seeded = |base: &LinkConfig, salt: u64| {
            let mut c = base.clone();
            c.seed = c.seed.wrapping_mul(1_000_003).wrapping_add(salt);
            Link::new(c)
        };
        let hl = cfg.host_links.max(1);
        let offload = sockets
            .iter()
            .map(|s| Offload::enable(s, cfg.offload))
            .collect();
        Self {
            node_down: (0..n)
                .map(|i| seeded(&cfg.node_link, 2 * i as u64))
                .collect(),
            node_up: (0..n)
                .map(|i| seeded(&cfg.node_link, 2 * i as u64 + 1))
                .collect(),
            host_down: (0..hl)
                .map(|i| seeded(&cfg.host_link, 1000 + 2 * i as u64))
                .collect(),
            host_up: (0..hl)
                .map(|i| seeded(&cfg.host_link, 1001 + 2 * i as u64))
                .collect(),
            outboxes: (0..n).map(|_| Outbox::default()).collect(),
            last_offer: vec![Duration::ZERO; n],
            cfg,
            sockets,
            trigger,
            shared,
            stop,
            epoch: Instant::now(),
            order: 0,
            arrivals: BinaryHeap::new(),
            link_entries: BinaryHeap::new(),
            departures: BinaryHeap::new(),
            spare: Vec::new(),
            last_publish: Instant::now(),
            oversized: 0,
            send_errors: 0,
            unexpected_source: 0,
            offload,
            due: Vec::new(),
            batch: SegmentBatch::new(),
            gso_sends: 0,
            gro_batches: 0,
        }
    }

    fn next_order(&mut self) -> u64 {
        self.order += 1;
        self.order
    }

    fn run(&mut self) -> io::Result<()> {
        tighten_timer_slack();
        let mut buf = vec![0u8; 65536];
        let mut batch = RecvBatch::new(16, 65536, self.offload.iter().any(|o| o.gro));
        let mut out = vec![0u8; wire::MAX_DATAGRAM];
        let mut fds: Vec<libc::pollfd> = self
            .sockets
            .iter()
            .chain(self.trigger.iter())
            .map(|s| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        while !self.stop.load(Ordering::Relaxed) {
            let wait = self.time_to_next_event();
            if wait > Duration::from_micros(50) {
                crate::mmsg::wait_any_readable(&mut fds, wait - Duration::from_micros(30))?;
            } else {
                std::hint::spin_loop();
                crate::mmsg::wait_any_readable(&mut fds, Duration::ZERO)?;
            }
            self.receive(&mut buf, &mut batch, &fds)?;
            self.process(&mut out);
        }
        self.publish();
        Ok(())
    }

    fn time_to_next_event(&self) -> Duration {
        let now = self.epoch.elapsed();
        [
            self.arrivals.peek().map(|Reverse(t)| t.due),
            self.link_entries
                .peek()
                .map(|Reverse(t)| t.due.saturating_sub(LOOKAHEAD)),
            self.departures.peek().map(|Reverse(t)| t.due),
        ]
        .into_iter()
        .flatten()
        .min()
        .map_or(Duration::from_millis(20), |due| due.saturating_sub(now))
        .min(Duration::from_millis(20))
    }

    /// Drain the sockets `ppoll` marked readable (checking only those keeps the
    /// spinning loop at one syscall per turn).
    fn receive(
        &mut self,
        buf: &mut [u8],
        batch: &mut RecvBatch,
        fds: &[libc::pollfd],
    ) -> io::Result<()> {
        let readable = |i: usize| fds[i].revents & libc::POLLIN != 0;
        if let Some(trigger) = self
            .trigger
            .as_ref()
            .filter(|_| readable(self.sockets.len()))
        {
            while let Some((n, from)) = recv_nonblocking(trigger, buf)? {
                if !self.cfg.allowed_hosts.is_empty()
                    && !self.cfg.allowed_hosts.contains(&from.ip())
                {
                    self.unexpected_source += 1;
                    tracing::debug!(%from, "dropped trigger from a host not allowed (--allow-host)");
                    continue;
                }
                let mut shared = self.shared.lock().expect("emulator lock");
                let mut sink = [0u8; 64];
                // One tick for every node, so their emissions line up in the air.
                let tick = shared
                    .nodes
                    .iter()
                    .map(NodeCore::earliest_trigger_tick)
                    .max()
                    .unwrap_or(0);
                for node in shared.nodes.iter_mut() {
                    node.handle_at(&buf[..n], &mut sink, tick);
                }
            }
        }
        let max = self.cfg.payload.udp_payload();
        for i in (0..self.sockets.len()).filter(|&i| readable(i)) {
            let fd = self.sockets[i].as_raw_fd();
            loop {
                let received = batch.recv(fd)?;
                if received == 0 {
                    break;
                }
                for m in 0..received {
                    let (from, datagrams) = batch.get(m);
                    let Some(from) = from else { continue };
                    if datagrams.len() > 1 {
                        self.gro_batches += 1;
                    }
                    for bytes in datagrams {
                        self.accept_request(i, from, bytes, max);
                    }
                }
            }
        }
        Ok(())
    }

    /// One datagram from the host to node `i`: checked, then offered to the host
    /// link and the node's link, to be handled at its modelled arrival.
    fn accept_request(&mut self, i: usize, from: SocketAddr, bytes: &[u8], max: usize) {
        let n = bytes.len();
        if n > max {
            self.oversized += 1;
            tracing::debug!(
                node = i,
                %from,
                len = n,
                "dropped oversized datagram: larger than the {max}-byte datagrams of {:?} frames",
                self.cfg.payload
            );
            return;
        }
        if !self.cfg.allowed_hosts.is_empty() && !self.cfg.allowed_hosts.contains(&from.ip()) {
            self.unexpected_source += 1;
            tracing::debug!(node = i, %from, "dropped datagram from a host not allowed (--allow-host)");
            return;
        }
        let now = self.epoch.elapsed();
        let wire_bytes = n + FramePayload::WIRE_OVERHEAD;
        let hl = self.cfg.host_link_of(i);
        let at = match self.host_down[hl].offer(now, wire_bytes) {
            Fate::Deliver { at, .. } => at,
            Fate::Dropped(why) => {
                tracing::debug!(
                    node = i,
                    host_link = hl,
                    len = n,
                    "host link dropped a datagram to the node: {why:?}"
                );
                return;
            }
        };
        let at = match self.node_down[i].offer(at, wire_bytes) {
            Fate::Deliver { at, .. } => at,
            Fate::Dropped(why) => {
                tracing::debug!(
                    node = i,
                    len = n,
                    "node link dropped a datagram to the node: {why:?}"
                );
                return;
            }
        };
        let mut copy = self.spare.pop().unwrap_or_default();
        copy.clear();
        copy.extend_from_slice(bytes);
        let order = self.next_order();
        self.arrivals.push(Reverse(Timed {
            due: at,
            order,
            item: Arrival {
                node: i,
                from,
                bytes: copy,
            },
        }));
    }

    fn process(&mut self, out: &mut [u8]) {
        let now = self.epoch.elapsed();
        let shared = self.shared.clone();
        let mut shared = shared.lock().expect("emulator lock");
        // 1. Requests that have reached their node.
        while self.arrivals.peek().is_some_and(|Reverse(t)| t.due <= now) {
            let Reverse(Timed { due, item: a, .. }) = self.arrivals.pop().expect("peeked");
            match shared.nodes[a.node].handle(&a.bytes, out) {
                NodeAction::None => {}
                NodeAction::Reply(n) => {
                    self.outboxes[a.node]
                        .acks
                        .push_back((a.from, out[..n].to_vec(), due))
                }
                NodeAction::Read(job) if self.read_fits(&job) => {
                    if job.packet_count() > 0 {
                        self.outboxes[a.node].reads.push_back((a.from, job, 0, due));
                    }
                }
                NodeAction::Read(job) => {
                    self.oversized += 1;
                    tracing::debug!(
                        node = a.node,
                        bytes_per_packet = job.request.bytes_per_packet,
                        "refused READ_IQ: its reply packets would exceed the {}-byte datagrams of {:?} frames",
                        self.cfg.payload.udp_payload(),
                        self.cfg.payload
                    );
                    let node = &mut shared.nodes[a.node];
                    let request = TransportHeader {
                        dest_id: node.id(),
                        src_id: job.host_id,
                        pkt_type: PacketType::HostToNode,
                        seq_num: job.seq_num,
                        flags: 0,
                    };
                    if let NodeAction::Reply(n) =
                        node.refuse(&request, CMD_READ_IQ, NodeRefusal::PacketTooLarge, out)
                    {
                        self.outboxes[a.node]
                            .acks
                            .push_back((a.from, out[..n].to_vec(), due));
                    }
                }
            }
            self.spare.push(a.bytes);
            self.schedule_node(a.node);
        }
        // 2. Reply packets reaching the shared host link, in time order.
        while self
            .link_entries
            .peek()
            .is_some_and(|Reverse(t)| t.due <= now + LOOKAHEAD)
        {
            let Reverse(Timed {
                due,
                item: (node, to),
                ..
            }) = self.link_entries.pop().expect("peeked");
            self.outboxes[node].scheduled = false;
            if let Some((departure, bytes)) = self.take_next_packet(node) {
                let hl = self.cfg.host_link_of(node);
                match self.host_up[hl].offer(due, bytes) {
                    Fate::Deliver { at, .. } => {
                        let order = self.next_order();
                        self.departures.push(Reverse(Timed {
                            due: at,
                            order,
                            item: (node, to, departure),
                        }));
                    }
                    Fate::Dropped(why) => {
                        tracing::debug!(node, host_link = hl, "host link dropped a reply: {why:?}");
                    }
                }
            }
            self.schedule_node(node);
        }
        // 3. Packets that have arrived at the host: send them now. Each node's
        // packets that are all due at once leave in one GSO send where the socket has
        // it (they are due together only when this loop fell behind).
        while self
            .departures
            .peek()
            .is_some_and(|Reverse(t)| t.due <= now)
        {
            let Reverse(Timed { item, .. }) = self.departures.pop().expect("peeked");
            self.due.push(item);
        }
        // Stable: every node's packets stay in their order.
        self.due.sort_by_key(|(node, _, _)| *node);
        let mut current: Option<(usize, SocketAddr)> = None;
        for (node, to, d) in std::mem::take(&mut self.due).drain(..) {
            let len = match &d {
                Departure::Ack(bytes) => bytes.len(),
                Departure::ReadPacket(job, index) => {
                    wire::SAMPLE_PACKET_OVERHEAD + 4 * job.packet(*index).2 as usize
                }
            };
            if current != Some((node, to)) || !self.batch.fits(len) {
                if let Some((n, t)) = current {
                    self.flush(n, t);
                }
                current = Some((node, to));
            }
            self.batch.push_with(wire::MAX_DATAGRAM, |out| match &d {
                Departure::Ack(bytes) => {
                    out[..bytes.len()].copy_from_slice(bytes);
                    bytes.len()
                }
                Departure::ReadPacket(job, index) => {
                    shared.nodes[node].encode_read_packet(job, *index, out)
                }
            });
        }
        if let Some((n, t)) = current {
            self.flush(n, t);
        }
        shared.stats.oversized = self.oversized;
        shared.stats.send_errors = self.send_errors;
        shared.stats.unexpected_source = self.unexpected_source;
        shared.stats.gso_sends = self.gso_sends;
        shared.stats.gro_batches = self.gro_batches;
        shared.stats.offload.clone_from(&self.offload);
        drop(shared);
        if self.order.is_multiple_of(64)
            || self.last_publish.elapsed() >= Duration::from_millis(100)
        {
            self.publish();
        }
    }

    /// Send the gathered reply packets of `node` to `to`.
    fn flush(&mut self, node: usize, to: SocketAddr) {
        let datagrams = self.batch.len();
        match self
            .batch
            .send(&self.sockets[node], to, &mut self.offload[node])
        {
            Ok(1) if datagrams > 1 => self.gso_sends += 1,
            Ok(_) => {}
            Err(e) => {
                self.send_errors += datagrams as u64;
                tracing::debug!(node, %to, datagrams, "replies not sent: {e}");
            }
        }
    }

    /// Reply packets must fit the configured frame size.
    fn read_fits(&self, job: &ReadJob) -> bool {
        job.request.bytes_per_packet as usize + SAMPLE_PACKET_OVERHEAD
            <= self.cfg.payload.udp_payload()
    }

    /// Put a node's next reply packet on its link, if it has one and none is
    /// already on its way to the host link.
    fn schedule_node(&mut self, node: usize) {
        let ob = &self.outboxes[node];
        if ob.scheduled {
            return;
        }
        let next = if let Some((to, bytes, ready)) = ob.acks.front() {
            Some((*to, bytes.len(), *ready))
        } else {
            ob.reads.front().map(|(to, job, i, ready)| {
                let (_, _, count) = job.packet(*i);
                (
                    *to,
                    wire::SAMPLE_PACKET_OVERHEAD + 4 * count as usize,
                    *ready,
                )
            })
        };
        let Some((to, len, ready)) = next else { return };
        // The packet waits behind its predecessors on the node's link (FIFO).
        let now = ready.max(self.last_offer[node]);
        self.last_offer[node] = now;
        match self.node_up[node].offer(now, len + FramePayload::WIRE_OVERHEAD) {
            Fate::Deliver { at, .. } => {
                self.outboxes[node].scheduled = true;
                let order = self.next_order();
                self.link_entries.push(Reverse(Timed {
                    due: at,
                    order,
                    item: (node, to),
                }));
            }
            Fate::Dropped(why) => {
                tracing::debug!(node, len, "node link dropped a reply: {why:?}");
                // Lost on the node's link: skip it and try the next packet.
                self.take_next_packet(node);
                self.schedule_node(node);
            }
        }
    }

    /// Remove the node's next reply packet from its outbox; returns it with its
    /// wire size.
    fn take_next_packet(&mut self, node: usize) -> Option<(Departure, usize)> {
        let ob = &mut self.outboxes[node];
        if let Some((_, bytes, _)) = ob.acks.pop_front() {
            let len = bytes.len() + FramePayload::WIRE_OVERHEAD;
            return Some((Departure::Ack(bytes), len));
        }
        let (_, job, i, _) = ob.reads.front_mut()?;
        let (job, index) = (*job, *i);
        *i += 1;
        if *i >= job.packet_count() {
            ob.reads.pop_front();
        }
        let (_, _, count) = job.packet(index);
        let len = wire::SAMPLE_PACKET_OVERHEAD + 4 * count as usize + FramePayload::WIRE_OVERHEAD;
        Some((Departure::ReadPacket(job, index), len))
    }

    fn publish(&mut self) {
        self.last_publish = Instant::now();
        let mut s = self.shared.lock().expect("emulator lock");
        s.stats.node_links_down = self.node_down.iter().map(|l| l.stats().clone()).collect();
        s.stats.node_links_up = self.node_up.iter().map(|l| l.stats().clone()).collect();
        s.stats.host_links_down = self.host_down.iter().map(|l| l.stats().clone()).collect();
        s.stats.host_links_up = self.host_up.iter().map(|l| l.stats().clone()).collect();
    }
}

fn recv_nonblocking(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<Option<(usize, SocketAddr)>> {
    match sock.recv_from(buf) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        // ICMP errors from replies to a host that has gone away: not fatal.
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
        Err(e) => Err(e),
    }
}
