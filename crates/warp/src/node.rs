//! A sans-IO emulated WARP v3 node: four RF interfaces, each with a TX and an RX
//! buffer of 2^15 samples, as a front end over the one emulated air
//! (`radiohost_testbed::air`).
//!
//! The core takes datagram bytes and returns what to send; the emulator driver owns
//! sockets and pacing. Anything malformed, misaddressed or out of range is dropped
//! and counted, never written into a buffer.
//!
//! RF path `r` of a node may have an air TX port and an air RX port ([`NodePorts`]). On
//! a trigger at air tick `T` the node emits every TX buffer (Fix_16_15 words as floats)
//! on its TX port from `T`; its RX buffers become what its RX ports received over
//! `[T, T + 2^15)`, converted by a 14-bit ADC model (round to nearest, saturating) to
//! Fix_14_13.
//! The capture is lazy, on the first read after the trigger, so every node triggered
//! at `T` has emitted before any of them captures. Through an identity air a TX word
//! `w` comes back as exactly `w.tx_to_rx()`.

use crate::checksum::WriteChecksum;
use crate::wire::{
    self, Datagram, Message, NodeRefusal, PacketType, ReadIqRequest, RfBuffer, SampleHeader,
    TransportHeader, BROADCAST_ID, CMD_READ_IQ, CMD_WRITE_IQ, SAMPLE_FLAG_RESET_CHECKSUM,
};
use radiohost_iq::{Cf32, Ci16, WarpWord, FIX14_SCALE};
use radiohost_testbed::air::{Air, AirClock, AirConfig};

/// Samples per RF buffer on a WARP v3 node.
pub const BUFFER_SAMPLES: usize = 1 << 15;

/// Per-node counters: every dropped datagram is counted under its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    pub received: u64,
    pub malformed: u64,
    pub wrong_node_id: u64,
    pub wrong_direction: u64,
    pub unknown_command: u64,
    pub out_of_range: u64,
    pub samples_written: u64,
    pub reads_served: u64,
    pub triggers: u64,
    pub write_acks: u64,
    /// Requests answered with an error (`CMD_PARAM_ERROR`): out of range or empty.
    pub refusals: u64,
    /// TX samples the air refused (late or over its queue bound).
    pub air_tx_dropped: u64,
    /// RX captures the air could not serve (too old, or the air refused); the RX
    /// buffers were zeroed.
    pub air_rx_lost: u64,
}

impl NodeCounters {
    pub fn dropped(&self) -> u64 {
        self.malformed
            + self.wrong_node_id
            + self.wrong_direction
            + self.unknown_command
            + self.out_of_range
    }
}

/// A READ_IQ being answered: the driver asks for each reply packet in turn so it
/// can pace them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadJob {
    pub seq_num: u16,
    pub host_id: u16,
    pub request: ReadIqRequest,
}

impl ReadJob {
    fn buffers(&self) -> impl Iterator<Item = RfBuffer> {
        RfBuffer::iter_mask(self.request.buffers)
    }

    /// Reply packets in total (every requested buffer gets `num_packets`).
    pub fn packet_count(&self) -> usize {
        self.buffers().count() * self.request.num_packets as usize
    }

    /// Buffer, start and sample count of reply packet `index` (< `packet_count`;
    /// beyond it, an empty packet of the last buffer).
    pub fn packet(&self, index: usize) -> (RfBuffer, u32, u32) {
        let end = self.request.start.saturating_add(self.request.num_samples);
        if index >= self.packet_count() {
            let last = self.buffers().last().unwrap_or(RfBuffer::A);
            return (last, end, 0);
        }
        let per_buffer = (self.request.num_packets as usize).max(1);
        let buffer = self
            .buffers()
            .nth(index / per_buffer)
            .unwrap_or(RfBuffer::A);
        let i = (index % per_buffer) as u32;
        let per_packet = self.request.samples_per_packet();
        let start = self
            .request
            .start
            .saturating_add(i.saturating_mul(per_packet))
            .min(end);
        (buffer, start, per_packet.min(end - start))
    }
}

/// What the driver should do after a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeAction {
    /// Nothing to send (absorbed or dropped; see counters).
    None,
    /// Send the first `n` bytes of the output buffer back to the sender.
    Reply(usize),
    /// Send the reply packets of this read, paced.
    Read(ReadJob),
}

/// Sample rate of a WARP v3 node's baseband (what a node's own air runs at).
pub const WARP_RATE_HZ: f64 = 40e6;

/// The air ports of a node's four RF paths (index = `RfBuffer::index()`); `None`: the
/// path does not transmit into, or hears nothing from, the air.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodePorts {
    pub tx: [Option<usize>; 4],
    pub rx: [Option<usize>; 4],
}

impl NodePorts {
    /// Node index `n` of an identity air: path `r` is air port `4n + r` both ways.
    pub fn identity(n: usize) -> Self {
        let p = |r: usize| Some(4 * n + r);
        NodePorts {
            tx: [p(0), p(1), p(2), p(3)],
            rx: [p(0), p(1), p(2), p(3)],
        }
    }
}

/// The 14-bit ADC model: round to the nearest Fix_14_13 value (ties away from zero,
/// as [`WarpWord::tx_to_rx`]), saturating at the 14-bit range. Within range the error
/// is at most 0.5 LSB; only values above 8191.5 LSB (the top 0.006 % of full scale)
/// saturate further from their value.
pub fn adc_fix14(x: Cf32) -> WarpWord {
    let q = |v: f32| (v * FIX14_SCALE).round().clamp(-8192.0, 8191.0) as i16;
    WarpWord::from_ci16(Ci16::new(q(x.re), q(x.im)))
}

pub struct NodeCore {
    id: u16,
    tx: [Vec<WarpWord>; 4],
    rx: [Vec<WarpWord>; 4],
    checksum: WriteChecksum,
    trigger_mask: u32,
    air: Air,
    ports: NodePorts,
    /// Air tick of the last trigger whose RX capture has not happened yet.
    pending_capture: Option<u64>,
    /// Earliest tick of the next trigger: after the previous trigger's buffers.
    next_free: u64,
    scratch: Vec<Cf32>,
    counters: NodeCounters,
}

impl NodeCore {
    /// A node with WARPLab node ID `id`, answering every trigger ID, on its own
    /// 4-port identity air (simulated clock): TX path `r` loops back to RX path `r`.
    pub fn new(id: u16) -> Self {
        let cfg = AirConfig {
            history: BUFFER_SAMPLES,
            max_pending: 2 * BUFFER_SAMPLES,
            clock: AirClock::Simulated(radiohost_rt::ManualClock::new(0)),
            ..AirConfig::identity(WARP_RATE_HZ, 4)
        };
        // Every field above is in range, so the air always builds.
        let air = Air::new(cfg).unwrap_or_else(|e| unreachable!("node air: {e}"));
        Self::on_air(id, air, NodePorts::identity(0))
    }

    /// A node with WARPLab node ID `id` whose RF paths are `ports` of `air`. Ports the
    /// air does not have act as absent (the first trigger counts them as losses).
    pub fn on_air(id: u16, air: Air, ports: NodePorts) -> Self {
        // Touch every page now so the first write or read is not slowed by page faults.
        let buf = || {
            let mut v = vec![WarpWord(0); BUFFER_SAMPLES];
            for w in v.iter_mut().step_by(1024) {
                // SAFETY: `w` is a valid, aligned element of `v`.
                unsafe { std::ptr::write_volatile(w, WarpWord(0)) };
            }
            v
        };
        Self {
            id,
            tx: [buf(), buf(), buf(), buf()],
            rx: [buf(), buf(), buf(), buf()],
            checksum: WriteChecksum::default(),
            trigger_mask: u32::MAX,
            air,
            ports,
            pending_capture: None,
            next_free: 0,
            scratch: vec![Cf32::new(0.0, 0.0); BUFFER_SAMPLES],
            counters: NodeCounters::default(),
        }
    }

    /// The air this node is a front end of.
    pub fn air(&self) -> &Air {
        &self.air
    }

    pub fn ports(&self) -> NodePorts {
        self.ports
    }

    /// The tick a trigger now would use: the air's present, but not before what the
    /// air has already processed (that would be late) nor inside this node's previous
    /// trigger window. A driver triggering many nodes at once takes the largest over
    /// them and passes it to [`Self::trigger_at`] / [`Self::handle_at`].
    pub fn earliest_trigger_tick(&self) -> u64 {
        self.air
            .now_tick()
            .max(self.air.horizon())
            .max(self.next_free)
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    /// Respond only to triggers whose bitmask shares a bit with `mask`.
    pub fn set_trigger_mask(&mut self, mask: u32) {
        self.trigger_mask = mask;
    }

    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    pub fn tx_buffer(&self, b: RfBuffer) -> &[WarpWord] {
        &self.tx[b.index()]
    }

    /// The RX buffer, capturing it from the air first if a trigger is pending.
    pub fn rx_buffer(&mut self, b: RfBuffer) -> &[WarpWord] {
        self.capture();
        &self.rx[b.index()]
    }

    /// Triggers at [`Self::earliest_trigger_tick`].
    pub fn trigger(&mut self) {
        let tick = self.earliest_trigger_tick();
        self.trigger_at(tick);
    }

    /// Emits every TX buffer into the air from `tick`; the RX buffers will be what the
    /// air received from `tick` (captured on the next read).
    pub fn trigger_at(&mut self, tick: u64) {
        self.counters.triggers += 1;
        // A capture still owed for an earlier trigger happens first: after this
        // trigger its buffers would be overwritten anyway, and the air may forget it.
        if self.pending_capture.is_some_and(|t| t != tick) {
            self.capture();
        }
        for b in RfBuffer::ALL {
            let Some(port) = self.ports.tx[b.index()] else {
                continue;
            };
            for (s, w) in self.scratch.iter_mut().zip(&self.tx[b.index()]) {
                *s = w.to_cf32_fix16();
            }
            if self.air.transmit(port, tick, &self.scratch).is_err() {
                // Late or over the air's queue bound: the air counted what it dropped.
                self.counters.air_tx_dropped += BUFFER_SAMPLES as u64;
            }
        }
        self.pending_capture = Some(tick);
        // Whole blocks: capturing this window processes the air to a block boundary,
        // and the next trigger must not start before it.
        let block = self.air.block() as u64;
        self.next_free = tick
            .saturating_add(BUFFER_SAMPLES as u64)
            .div_ceil(block)
            .saturating_mul(block);
    }

    /// Fills the RX buffers from the air for the pending trigger, if any.
    fn capture(&mut self) {
        let Some(tick) = self.pending_capture.take() else {
            return;
        };
        for b in RfBuffer::ALL {
            let rx = &mut self.rx[b.index()];
            let Some(port) = self.ports.rx[b.index()] else {
                rx.fill(WarpWord(0));
                continue;
            };
            match self.air.receive(port, tick, &mut self.scratch) {
                Ok(()) => {
                    for (r, s) in rx.iter_mut().zip(&self.scratch) {
                        *r = adc_fix14(*s);
                    }
                }
                Err(_) => {
                    self.counters.air_rx_lost += 1;
                    rx.fill(WarpWord(0));
                }
            }
        }
    }

    /// Handle one datagram; replies are built in `out` (at least `wire::MAX_DATAGRAM`).
    /// A trigger is taken at [`Self::earliest_trigger_tick`].
    pub fn handle(&mut self, bytes: &[u8], out: &mut [u8]) -> NodeAction {
        let tick = self.earliest_trigger_tick();
        self.handle_at(bytes, out, tick)
    }

    /// As [`Self::handle`], with the air tick a trigger datagram takes effect at (so a
    /// driver gives every node of one trigger the same tick).
    pub fn handle_at(&mut self, bytes: &[u8], out: &mut [u8], trigger_tick: u64) -> NodeAction {
        self.counters.received += 1;
        let (transport, message) = match wire::decode(bytes) {
            Ok(Datagram { transport, message }) => (transport, message),
            Err(e) => {
                self.counters.malformed += 1;
                tracing::debug!(
                    node = self.id,
                    len = bytes.len(),
                    "dropped malformed datagram: {e}"
                );
                return NodeAction::None;
            }
        };
        if let Message::Trigger { trigger_ids } = message {
            if trigger_ids & self.trigger_mask != 0 {
                self.trigger_at(trigger_tick);
            }
            return NodeAction::None;
        }
        if transport.pkt_type != PacketType::HostToNode {
            self.counters.wrong_direction += 1;
            tracing::debug!(
                node = self.id,
                "dropped datagram: packet type {:?} is not host-to-node",
                transport.pkt_type
            );
            return NodeAction::None;
        }
        if transport.dest_id != self.id && transport.dest_id != BROADCAST_ID {
            self.counters.wrong_node_id += 1;
            tracing::debug!(
                node = self.id,
                dest = transport.dest_id,
                "dropped datagram addressed to another node ID"
            );
            return NodeAction::None;
        }
        match message {
            Message::ReadIq(request) => self.accept_read(&transport, request, out),
            Message::Samples {
                command: CMD_WRITE_IQ,
                header,
                words,
            } => self.write(&transport, &header, words, out),
            other => {
                self.counters.unknown_command += 1;
                let command = match other {
                    Message::Samples { command, .. } | Message::Unknown { command } => command,
                    _ => 0,
                };
                tracing::debug!(
                    node = self.id,
                    "dropped datagram with unsupported command {command:#010x}"
                );
                NodeAction::None
            }
        }
    }

    fn accept_read(
        &mut self,
        t: &TransportHeader,
        request: ReadIqRequest,
        out: &mut [u8],
    ) -> NodeAction {
        let end = request.start as u64 + request.num_samples as u64;
        if end > BUFFER_SAMPLES as u64 {
            self.counters.out_of_range += 1;
            tracing::debug!(
                node = self.id,
                start = request.start,
                samples = request.num_samples,
                "refused READ_IQ beyond the {BUFFER_SAMPLES}-sample buffer"
            );
            return self.refuse(t, CMD_READ_IQ, NodeRefusal::OutOfRange, out);
        }
        if request.num_samples == 0 {
            tracing::debug!(node = self.id, "refused READ_IQ of zero samples");
            return self.refuse(t, CMD_READ_IQ, NodeRefusal::Empty, out);
        }
        self.counters.reads_served += 1;
        // The reply packets are built from the RX buffers later; fill them now.
        self.capture();
        NodeAction::Read(ReadJob {
            seq_num: t.seq_num,
            host_id: t.src_id,
            request,
        })
    }

    fn write(
        &mut self,
        t: &TransportHeader,
        h: &SampleHeader,
        words: wire::SampleWords<'_>,
        out: &mut [u8],
    ) -> NodeAction {
        let start = h.start as usize;
        let Some(end) = start
            .checked_add(words.len())
            .filter(|&e| e <= BUFFER_SAMPLES)
        else {
            self.counters.out_of_range += 1;
            tracing::debug!(
                node = self.id,
                start,
                samples = words.len(),
                "refused WRITE_IQ beyond the {BUFFER_SAMPLES}-sample buffer"
            );
            return self.refuse(t, CMD_WRITE_IQ, NodeRefusal::OutOfRange, out);
        };
        if h.flags & SAMPLE_FLAG_RESET_CHECKSUM != 0 {
            self.checksum.reset();
        }
        words.copy_to(&mut self.tx[h.buffer.index()][start..end]);
        self.counters.samples_written += words.len() as u64;
        self.checksum
            .add_packet(h.start, words.last().map_or(0, |w| w.i_xor_q()));
        if !t.robust() {
            return NodeAction::None;
        }
        self.counters.write_acks += 1;
        let reply = self.reply_header(t);
        match wire::encode_write_ack(out, &reply, self.checksum.value()) {
            Ok(n) => NodeAction::Reply(n),
            Err(_) => NodeAction::None,
        }
    }

    /// Answer a request the node cannot carry out with WARPLab's `CMD_PARAM_ERROR`.
    pub fn refuse(
        &mut self,
        t: &TransportHeader,
        command: u32,
        reason: NodeRefusal,
        out: &mut [u8],
    ) -> NodeAction {
        self.counters.refusals += 1;
        let reply = self.reply_header(t);
        match wire::encode_refusal(out, &reply, command, reason) {
            Ok(n) => NodeAction::Reply(n),
            Err(_) => NodeAction::None,
        }
    }

    fn reply_header(&self, request: &TransportHeader) -> TransportHeader {
        TransportHeader {
            dest_id: request.src_id,
            src_id: self.id,
            pkt_type: PacketType::NodeToHost,
            seq_num: request.seq_num,
            flags: 0,
        }
    }

    /// Build reply packet `index` of a read job into `out`; returns its length.
    pub fn encode_read_packet(&self, job: &ReadJob, index: usize, out: &mut [u8]) -> usize {
        let (buffer, start, count) = job.packet(index);
        let header = SampleHeader {
            buffer,
            flags: 0,
            start,
            num_samples: count,
        };
        let t = TransportHeader {
            dest_id: job.host_id,
            src_id: self.id,
            pkt_type: PacketType::NodeToHost,
            seq_num: job.seq_num,
            flags: 0,
        };
        let words = &self.rx[buffer.index()][start as usize..(start + count) as usize];
        wire::encode_samples(out, &t, CMD_READ_IQ, &header, words)
            .expect("validated request fits a jumbo datagram")
    }
}

#[cfg(test)]
mod tests;
