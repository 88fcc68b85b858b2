//! The host transport: read, write and trigger the IQ buffers of many nodes at once.
//!
//! Robust by construction rather than by timing heuristics:
//! * every expected reply packet is tracked by its start index; after a quiet
//!   period only the missing ranges are asked for again;
//! * every request carries a fresh sequence number, and replies whose number does
//!   not belong to the operation in progress (late answers to an earlier one) are
//!   ignored and counted, as are duplicates, malformed datagrams and datagrams
//!   from addresses that are not our nodes;
//! * writes are verified by the node's checksum; a node whose checksum stays wrong
//!   is rewritten packet by packet, each packet acknowledged;
//! * retries are bounded, the quiet period doubles on each retry, and a failure
//!   names the node, its address and what was missing.

mod read;
mod write;

use crate::addressing::FramePayload;
use crate::mmsg::RecvBatch;
use crate::udp::{Offload, OffloadPolicy, SegmentBatch};
use crate::wire::{self, PacketType, RfBuffer, TransportHeader, BROADCAST_ID};
use radiohost_iq::WarpWord;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;
use thiserror::Error;

/// The host's WARPLab node ID (nodes address their replies to it).
pub const HOST_ID: u16 = 0xFFFE;

/// One node as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeTarget {
    pub id: u16,
    pub addr: SocketAddr,
    /// Index into [`HostConfig::interfaces`] of the local address that talks to it.
    pub interface: usize,
}

/// Concurrency of an operation over several nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// All nodes at once.
    Parallel,
    /// One node after another (the classic WARPLab behaviour; the baseline).
    Serial,
}

#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Local addresses to send from; nodes are assigned to them by `NodeTarget::interface`.
    pub interfaces: Vec<SocketAddr>,
    pub payload: FramePayload,
    /// Quiet period after which missing replies are re-requested.
    pub timeout: Duration,
    /// Re-requests per operation before giving up.
    pub retries: u32,
    /// Socket buffer size to ask the kernel for.
    pub socket_buffer: usize,
    pub trigger_addr: SocketAddr,
    pub mode: Mode,
    /// How long to spin on the sockets before sleeping in `ppoll` (0: never spin).
    pub busy_poll: Duration,
    /// UDP GSO for writes and GRO for replies where the kernel offers them.
    pub offload: OffloadPolicy,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self {
            interfaces: vec!["127.0.0.1:0".parse().expect("valid address")],
            payload: FramePayload::Jumbo,
            timeout: Duration::from_millis(20),
            retries: 5,
            socket_buffer: 32 << 20,
            trigger_addr: crate::Addressing::LOOPBACK.trigger_addr(),
            mode: Mode::Parallel,
            busy_poll: Duration::from_micros(200),
            offload: OffloadPolicy::Auto,
        }
    }
}

/// Counters of everything the host ignored or repeated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    pub datagrams: u64,
    pub stale_replies: u64,
    pub duplicate_replies: u64,
    pub malformed: u64,
    pub unexpected_source: u64,
    pub unexpected_reply: u64,
    pub rerequests: u64,
    pub write_retries: u64,
    pub write_fallbacks: u64,
    /// Receives that returned several GRO-coalesced datagrams at once.
    pub gro_batches: u64,
    /// Sends that carried several datagrams (UDP GSO).
    pub gso_sends: u64,
}

pub use crate::sockbuf::SocketBuffers;

/// One node that an operation could not complete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFailure {
    pub id: u16,
    pub addr: SocketAddr,
    pub op: &'static str,
    pub tries: u32,
    pub timeout: Duration,
    pub what: String,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} ({}) did not complete {} after {} tries (last timeout {} ms): {}",
            self.id,
            self.addr,
            self.op,
            self.tries,
            self.timeout.as_millis(),
            self.what
        )
    }
}

#[derive(Debug, Error)]
pub enum TransportError {
    #[error("{}; is `radiohost warp emulate` running and are the node addresses right?",
        .0.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("; "))]
    Nodes(Vec<NodeFailure>),
    #[error("node {id} ({addr}) refused {op}: {reason}")]
    Refused {
        id: u16,
        addr: SocketAddr,
        op: &'static str,
        reason: wire::NodeRefusal,
    },
    #[error("cannot use local interface {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
    #[error("invalid request: {0}")]
    Invalid(String),
}

pub struct WarpHost {
    cfg: HostConfig,
    nodes: Vec<NodeTarget>,
    by_addr: HashMap<SocketAddr, usize>,
    sockets: Vec<UdpSocket>,
    buffers: Vec<SocketBuffers>,
    /// What each socket got of UDP GSO/GRO.
    offload: Vec<Offload>,
    /// Kept between writes so they allocate nothing.
    write_batch: SegmentBatch,
    next_seq: u16,
    batch: RecvBatch,
    pollfds: Vec<libc::pollfd>,
    stats: HostStats,
    /// Per node of the last operation: time from its start until that node's
    /// last reply arrived.
    node_latency: Vec<Duration>,
}

impl WarpHost {
    pub fn new(cfg: HostConfig, nodes: Vec<NodeTarget>) -> Result<Self, TransportError> {
        if cfg.interfaces.is_empty() {
            return Err(TransportError::Invalid(
                "at least one local interface is needed".into(),
            ));
        }
        if let Some(n) = nodes.iter().find(|n| n.interface >= cfg.interfaces.len()) {
            return Err(TransportError::Invalid(format!(
                "node {} uses interface {} but only {} are configured",
                n.id,
                n.interface,
                cfg.interfaces.len()
            )));
        }
        let mut sockets = Vec::new();
        let mut buffers = Vec::new();
        let mut offload = Vec::new();
        for &addr in &cfg.interfaces {
            let sock =
                UdpSocket::bind(addr).map_err(|source| TransportError::Bind { addr, source })?;
            sock.set_nonblocking(true)?;
            sock.set_broadcast(true)?;
            buffers.push(crate::sockbuf::grow_buffers(&sock, cfg.socket_buffer)?);
            offload.push(Offload::enable(&sock, cfg.offload));
            sockets.push(sock);
        }
        let by_addr = nodes.iter().enumerate().map(|(i, n)| (n.addr, i)).collect();
        Ok(Self {
            batch: RecvBatch::new(32, wire::MAX_DATAGRAM + 64, offload.iter().any(|o| o.gro)),
            pollfds: sockets
                .iter()
                .map(|s| libc::pollfd {
                    fd: s.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect(),
            cfg,
            nodes,
            by_addr,
            sockets,
            buffers,
            offload,
            write_batch: SegmentBatch::new(),
            next_seq: 1,
            stats: HostStats::default(),
            node_latency: Vec::new(),
        })
    }

    pub fn nodes(&self) -> &[NodeTarget] {
        &self.nodes
    }

    pub fn config(&self) -> &HostConfig {
        &self.cfg
    }

    pub fn set_mode(&mut self, mode: Mode) {
        self.cfg.mode = mode;
    }

    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// For each node of the last read or write (in the order given), how long it
    /// took from the start of the operation until that node was complete.
    pub fn last_node_latency(&self) -> &[Duration] {
        &self.node_latency
    }

    /// Socket buffer sizes asked for and granted, per local interface.
    pub fn socket_buffers(&self) -> &[SocketBuffers] {
        &self.buffers
    }

    /// UDP GSO/GRO in use, per local interface (GSO turns off for good on a socket
    /// whose route refused it).
    pub fn offload(&self) -> &[Offload] {
        &self.offload
    }

    /// A fresh sequence number.
    fn take_seq(&mut self) -> u16 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        seq
    }

    fn header(&self, node: usize, seq: u16, flags: u16) -> TransportHeader {
        TransportHeader {
            dest_id: self.nodes[node].id,
            src_id: HOST_ID,
            pkt_type: PacketType::HostToNode,
            seq_num: seq,
            flags,
        }
    }

    /// The error for node index `node` refusing `op`.
    fn refused(&self, node: usize, op: &'static str, reason: wire::NodeRefusal) -> TransportError {
        let target = self.nodes[node];
        TransportError::Refused {
            id: target.id,
            addr: target.addr,
            op,
            reason,
        }
    }

    fn check_nodes(&self, nodes: &[usize]) -> Result<(), TransportError> {
        match nodes.iter().find(|&&n| n >= self.nodes.len()) {
            Some(n) => Err(TransportError::Invalid(format!(
                "node index {n} out of range (0..{})",
                self.nodes.len()
            ))),
            None => Ok(()),
        }
    }

    /// Read `count` samples from `start` of `buffer` on each of `nodes` (indices
    /// into [`WarpHost::nodes`]). Returns one vector per node, in order.
    pub fn read_iq(
        &mut self,
        nodes: &[usize],
        buffer: RfBuffer,
        start: u32,
        count: u32,
    ) -> Result<Vec<Vec<WarpWord>>, TransportError> {
        let mut out = Vec::new();
        self.read_iq_into(nodes, buffer, start, count, &mut out)?;
        Ok(out)
    }

    /// As [`Self::read_iq`], into `out` (one vector of `count` words per node),
    /// reusing its allocations: repeated reads allocate and page-fault nothing.
    pub fn read_iq_into(
        &mut self,
        nodes: &[usize],
        buffer: RfBuffer,
        start: u32,
        count: u32,
        out: &mut Vec<Vec<WarpWord>>,
    ) -> Result<(), TransportError> {
        self.check_nodes(nodes)?;
        out.resize_with(nodes.len(), Vec::new);
        for v in out.iter_mut() {
            v.resize(count as usize, WarpWord(0));
        }
        match self.cfg.mode {
            Mode::Parallel => read::read_nodes(self, nodes, buffer, start, count, out),
            Mode::Serial => {
                let mut latency = Vec::with_capacity(nodes.len());
                let began = std::time::Instant::now();
                for (i, &n) in nodes.iter().enumerate() {
                    read::read_nodes(self, &[n], buffer, start, count, &mut out[i..=i])?;
                    latency.push(began.elapsed());
                }
                self.node_latency = latency;
                Ok(())
            }
        }
    }

    /// Write `samples[i]` to `buffer` of `nodes[i]` from `start`, verifying each
    /// node's checksum.
    pub fn write_iq(
        &mut self,
        nodes: &[usize],
        buffer: RfBuffer,
        start: u32,
        samples: &[&[WarpWord]],
    ) -> Result<(), TransportError> {
        self.check_nodes(nodes)?;
        if samples.len() != nodes.len() {
            return Err(TransportError::Invalid(format!(
                "{} sample buffers for {} nodes",
                samples.len(),
                nodes.len()
            )));
        }
        match self.cfg.mode {
            Mode::Parallel => write::write_nodes(self, nodes, buffer, start, samples),
            Mode::Serial => {
                let mut latency = Vec::with_capacity(nodes.len());
                let began = std::time::Instant::now();
                for (i, &n) in nodes.iter().enumerate() {
                    write::write_nodes(self, &[n], buffer, start, &samples[i..=i])?;
                    latency.push(began.elapsed());
                }
                self.node_latency = latency;
                Ok(())
            }
        }
    }

    /// Broadcast a trigger with bitmask `trigger_ids` (fire and forget, as on WARP).
    pub fn trigger(&mut self, trigger_ids: u32) -> Result<(), TransportError> {
        let mut buf = [0u8; 32];
        let seq = self.take_seq();
        let t = TransportHeader {
            dest_id: BROADCAST_ID,
            src_id: HOST_ID,
            pkt_type: PacketType::Trigger,
            seq_num: seq,
            flags: 0,
        };
        let n = wire::encode_trigger(&mut buf, &t, trigger_ids).expect("trigger fits");
        self.sockets[0].send_to(&buf[..n], self.cfg.trigger_addr)?;
        Ok(())
    }

    /// Receive whatever arrives within `timeout` on any interface and hand each
    /// decoded datagram from a known node to `on_reply(node_index, datagram)`.
    /// Returns true if anything arrived.
    fn receive(
        &mut self,
        timeout: Duration,
        mut on_reply: impl FnMut(&mut HostStats, usize, &wire::Datagram<'_>),
    ) -> Result<bool, TransportError> {
        // Spin briefly first (replies usually follow within microseconds, and a
        // sleeping thread pays a wake-up per datagram), then wait on every
        // interface at once and drain whichever are readable.
        let spin_until = std::time::Instant::now() + self.cfg.busy_poll.min(timeout);
        loop {
            if crate::mmsg::wait_any_readable(&mut self.pollfds, Duration::ZERO)? {
                break;
            }
            if std::time::Instant::now() >= spin_until {
                if !crate::mmsg::wait_any_readable(&mut self.pollfds, timeout)? {
                    return Ok(false);
                }
                break;
            }
            std::hint::spin_loop();
        }
        let mut any = false;
        for s in 0..self.sockets.len() {
            if self.pollfds[s].revents == 0 {
                continue;
            }
            let fd = self.sockets[s].as_raw_fd();
            loop {
                let n = self.batch.recv(fd)?;
                if n == 0 {
                    break;
                }
                any = true;
                for i in 0..n {
                    let (from, datagrams) = self.batch.get(i);
                    if datagrams.len() > 1 {
                        self.stats.gro_batches += 1;
                    }
                    let node = from.and_then(|a| self.by_addr.get(&a)).copied();
                    for bytes in datagrams {
                        self.stats.datagrams += 1;
                        let Some(node) = node else {
                            self.stats.unexpected_source += 1;
                            continue;
                        };
                        match wire::decode(bytes) {
                            Ok(d)
                                if d.transport.pkt_type == PacketType::NodeToHost
                                    && d.transport.src_id == self.nodes[node].id =>
                            {
                                on_reply(&mut self.stats, node, &d)
                            }
                            Ok(_) => self.stats.unexpected_reply += 1,
                            Err(_) => self.stats.malformed += 1,
                        }
                    }
                }
            }
        }
        Ok(any)
    }

    fn send(&self, node: usize, bytes: &[u8]) -> Result<(), TransportError> {
        let target = self.nodes[node];
        Ok(crate::udp::send_one(
            &self.sockets[target.interface],
            bytes,
            target.addr,
        )?)
    }

    /// Packets of one node to send at once: as many as one GSO send carries when
    /// any interface has GSO, else 1 (nodes interleaved packet by packet).
    fn gso_burst(&self) -> usize {
        if self.offload.iter().any(|o| o.gso) {
            (crate::udp::MAX_GSO_BYTES / self.cfg.payload.udp_payload())
                .clamp(1, crate::udp::MAX_GSO_SEGMENTS)
        } else {
            1
        }
    }

    /// Send `batch` to `node` (one GSO send where the socket has it) and empty it.
    fn send_batch(&mut self, node: usize, batch: &mut SegmentBatch) -> Result<(), TransportError> {
        let target = self.nodes[node];
        let datagrams = batch.len();
        let offload = &mut self.offload[target.interface];
        let sock = &self.sockets[target.interface];
        let calls = batch.send(sock, target.addr, offload)?;
        if calls == 1 && datagrams > 1 {
            self.stats.gso_sends += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
