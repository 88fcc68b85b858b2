//! A sans-IO emulated WARP v3 node: four RF interfaces, each with a TX and an RX
//! buffer of 2^15 samples.
//!
//! The core takes datagram bytes and returns what to send; the emulator driver owns
//! sockets and pacing. Anything malformed, misaddressed or out of range is dropped
//! and counted, never written into a buffer.

use crate::checksum::WriteChecksum;
use crate::wire::{
    self, Datagram, Message, PacketType, ReadIqRequest, RfBuffer, SampleHeader, TransportHeader,
    BROADCAST_ID, CMD_READ_IQ, CMD_WRITE_IQ, SAMPLE_FLAG_RESET_CHECKSUM,
};
use radiohost_iq::WarpWord;

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

    /// Buffer, start and sample count of reply packet `index`.
    pub fn packet(&self, index: usize) -> (RfBuffer, u32, u32) {
        let per_buffer = self.request.num_packets as usize;
        let buffer = self
            .buffers()
            .nth(index / per_buffer)
            .expect("index within packet_count");
        let i = (index % per_buffer) as u32;
        let per_packet = self.request.samples_per_packet();
        let end = self.request.start + self.request.num_samples;
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

/// A hook that turns a TX buffer into what the RX buffer receives on trigger.
pub type Channel = Box<dyn FnMut(RfBuffer, &[WarpWord], &mut [WarpWord]) + Send>;

pub struct NodeCore {
    id: u16,
    tx: [Vec<WarpWord>; 4],
    rx: [Vec<WarpWord>; 4],
    checksum: WriteChecksum,
    trigger_mask: u32,
    channel: Option<Channel>,
    counters: NodeCounters,
}

impl NodeCore {
    /// A node with WARPLab node ID `id`, answering every trigger ID.
    pub fn new(id: u16) -> Self {
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
            channel: None,
            counters: NodeCounters::default(),
        }
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    /// Respond only to triggers whose bitmask shares a bit with `mask`.
    pub fn set_trigger_mask(&mut self, mask: u32) {
        self.trigger_mask = mask;
    }

    /// Replace the default TX->RX loopback (a shift right by 2 per half, Fix_16_15 to
    /// Fix_14_13) with another channel.
    pub fn set_channel(&mut self, channel: Channel) {
        self.channel = Some(channel);
    }

    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    pub fn tx_buffer(&self, b: RfBuffer) -> &[WarpWord] {
        &self.tx[b.index()]
    }

    pub fn rx_buffer(&self, b: RfBuffer) -> &[WarpWord] {
        &self.rx[b.index()]
    }

    /// Copy every TX buffer to its RX buffer through the channel.
    pub fn trigger(&mut self) {
        self.counters.triggers += 1;
        for b in RfBuffer::ALL {
            let (tx, rx) = (&self.tx[b.index()], &mut self.rx[b.index()]);
            match &mut self.channel {
                Some(ch) => ch(b, tx, rx),
                None => {
                    for (r, t) in rx.iter_mut().zip(tx.iter()) {
                        *r = t.tx_to_rx();
                    }
                }
            }
        }
    }

    /// Handle one datagram; replies are built in `out` (at least `wire::MAX_DATAGRAM`).
    pub fn handle(&mut self, bytes: &[u8], out: &mut [u8]) -> NodeAction {
        self.counters.received += 1;
        let Ok(Datagram { transport, message }) = wire::decode(bytes) else {
            self.counters.malformed += 1;
            return NodeAction::None;
        };
        if let Message::Trigger { trigger_ids } = message {
            if trigger_ids & self.trigger_mask != 0 {
                self.trigger();
            }
            return NodeAction::None;
        }
        if transport.pkt_type != PacketType::HostToNode {
            self.counters.wrong_direction += 1;
            return NodeAction::None;
        }
        if transport.dest_id != self.id && transport.dest_id != BROADCAST_ID {
            self.counters.wrong_node_id += 1;
            return NodeAction::None;
        }
        match message {
            Message::ReadIq(request) => self.accept_read(&transport, request),
            Message::Samples {
                command: CMD_WRITE_IQ,
                header,
                words,
            } => self.write(&transport, &header, words, out),
            _ => {
                self.counters.unknown_command += 1;
                NodeAction::None
            }
        }
    }

    fn accept_read(&mut self, t: &TransportHeader, request: ReadIqRequest) -> NodeAction {
        let end = request.start as u64 + request.num_samples as u64;
        if end > BUFFER_SAMPLES as u64 {
            self.counters.out_of_range += 1;
            return NodeAction::None;
        }
        self.counters.reads_served += 1;
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
            return NodeAction::None;
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
