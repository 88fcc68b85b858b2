//! WARPLab 7.4 datagram codec (all fields big-endian).
//!
//! ```text
//! transport (14 B): u16 pad | u16 dest_id | u16 src_id | u8 reserved | u8 pkt_type
//!                   | u16 length | u16 seq_num | u16 flags
//! command    (8 B): u32 command (group<<24 | id) | u16 cmd_length | u16 num_args
//! sample    (12 B): u16 buffer_id | u8 flags | u8 reserved | u32 start | u32 num_samples
//! samples:          u32 words, I in bits 31..16, Q in bits 15..0
//! ```
//! `length` counts the bytes after the transport header. WARPLab's 2-byte `pad` only
//! aligns the rest on 32-bit words: the reference host counts a node's maximum
//! payload without it (8960 bytes with jumbo frames, so 2232 samples per packet:
//! 12 + 8 + 12 + 8928 bytes of message, 8962-byte UDP datagrams with the pad).
//! Hosts fill `cmd_length` and `num_args` differently (0, or the reference's
//! byte count and 1), so the decoder never relies on them: it sizes everything
//! from the datagram itself and rejects anything that does not fit.

use radiohost_iq::WarpWord;
use thiserror::Error;

pub const TRANSPORT_HEADER_LEN: usize = 14;
pub const COMMAND_HEADER_LEN: usize = 8;
pub const SAMPLE_HEADER_LEN: usize = 12;
/// Bytes before the first sample word of a sample packet (the pad included).
pub const SAMPLE_PACKET_OVERHEAD: usize =
    TRANSPORT_HEADER_LEN + COMMAND_HEADER_LEN + SAMPLE_HEADER_LEN;
/// The alignment pad at the start of every datagram; not part of the payload a
/// WARPLab node reports.
pub const PAD_LEN: usize = 2;
pub const BROADCAST_ID: u16 = 0xFFFF;
/// Transport flag: the sender wants a reply.
pub const FLAG_ROBUST: u16 = 0x0001;
/// Sample flag: first packet of a write, reset the checksum.
pub const SAMPLE_FLAG_RESET_CHECKSUM: u8 = 0x01;

pub const CMD_WRITE_IQ: u32 = 0x3000_0007;
pub const CMD_READ_IQ: u32 = 0x3000_0008;
/// WARPLab's status word for a command a node could not carry out.
pub const CMD_PARAM_ERROR: u32 = 0xFF00_0000;

/// Why a node refused a command (the second argument of its error response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum NodeRefusal {
    /// Samples beyond the node's 32768-sample buffer.
    OutOfRange = 1,
    /// A request for zero samples.
    Empty = 2,
    /// Reply packets larger than the node's frames.
    PacketTooLarge = 3,
    /// A reason this codec does not know.
    Other = 0xFFFF_FFFF,
}

impl NodeRefusal {
    fn from_code(code: u32) -> Self {
        match code {
            1 => Self::OutOfRange,
            2 => Self::Empty,
            3 => Self::PacketTooLarge,
            _ => Self::Other,
        }
    }
}

impl std::fmt::Display for NodeRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::OutOfRange => "samples beyond the node's 32768-sample buffer",
            Self::Empty => "zero samples asked",
            Self::PacketTooLarge => "reply packets larger than the node's frames",
            Self::Other => "an unknown reason",
        })
    }
}
/// Arguments of a READ_IQ request.
const READ_IQ_ARGS: usize = 5;

/// Largest message a node accepts with jumbo frames, the pad excluded (what a
/// WARPLab 7.4 node reports as its maximum payload).
pub const MAX_PAYLOAD: usize = 8960;
/// Largest datagram we build or accept: the jumbo payload plus the pad (8962 bytes,
/// a full 2232-sample packet).
pub const MAX_DATAGRAM: usize = MAX_PAYLOAD + PAD_LEN;
/// Most samples one sample packet can carry (2232).
pub const MAX_SAMPLES_PER_PACKET: usize = (MAX_DATAGRAM - SAMPLE_PACKET_OVERHEAD) / 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketType {
    Trigger = 0,
    HostToNode = 1,
    NodeToHost = 2,
}

/// One of a node's four RF interfaces (buffer bitmask values 1, 2, 4, 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RfBuffer {
    A,
    B,
    C,
    D,
}

impl RfBuffer {
    pub const ALL: [RfBuffer; 4] = [RfBuffer::A, RfBuffer::B, RfBuffer::C, RfBuffer::D];

    pub fn mask(self) -> u16 {
        1 << self.index()
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The buffer a single-bit mask names.
    pub fn from_mask(mask: u32) -> Option<Self> {
        match mask {
            1 => Some(RfBuffer::A),
            2 => Some(RfBuffer::B),
            4 => Some(RfBuffer::C),
            8 => Some(RfBuffer::D),
            _ => None,
        }
    }

    /// Every buffer a bitmask names (bits above RFD are rejected by the caller).
    pub fn iter_mask(mask: u32) -> impl Iterator<Item = RfBuffer> {
        Self::ALL
            .into_iter()
            .filter(move |b| mask & b.mask() as u32 != 0)
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_uppercase().trim_start_matches("RF") {
            "A" => Some(RfBuffer::A),
            "B" => Some(RfBuffer::B),
            "C" => Some(RfBuffer::C),
            "D" => Some(RfBuffer::D),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportHeader {
    pub dest_id: u16,
    pub src_id: u16,
    pub pkt_type: PacketType,
    pub seq_num: u16,
    pub flags: u16,
}

impl TransportHeader {
    pub fn robust(&self) -> bool {
        self.flags & FLAG_ROBUST != 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleHeader {
    /// Single-bit buffer mask.
    pub buffer: RfBuffer,
    pub flags: u8,
    pub start: u32,
    pub num_samples: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadIqRequest {
    pub buffers: u32,
    pub start: u32,
    pub num_samples: u32,
    pub bytes_per_packet: u32,
    pub num_packets: u32,
}

impl ReadIqRequest {
    /// Samples carried by each full reply packet.
    pub fn samples_per_packet(&self) -> u32 {
        self.bytes_per_packet / 4
    }
}

/// Sample words borrowed from a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleWords<'a>(&'a [u8]);

impl<'a> SampleWords<'a> {
    pub fn len(&self) -> usize {
        self.0.len() / 4
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<WarpWord> {
        let b = self.0.get(i * 4..i * 4 + 4)?;
        Some(WarpWord(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    }

    pub fn last(&self) -> Option<WarpWord> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> impl Iterator<Item = WarpWord> + 'a {
        self.0
            .chunks_exact(4)
            .map(|b| WarpWord(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// Copy into `out` (which must have exactly `len()` words).
    pub fn copy_to(&self, out: &mut [WarpWord]) {
        for (o, w) in out.iter_mut().zip(self.iter()) {
            *o = w;
        }
    }
}

/// A decoded datagram body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    /// Broadcast trigger (no reply).
    Trigger { trigger_ids: u32 },
    /// Host asks a node for sample packets.
    ReadIq(ReadIqRequest),
    /// Sample packet: WRITE_IQ host->node or a READ_IQ reply node->host.
    Samples {
        command: u32,
        header: SampleHeader,
        words: SampleWords<'a>,
    },
    /// Node's answer to a ROBUST write packet: the running checksum.
    WriteAck { checksum: u32 },
    /// Node's answer to a READ_IQ or WRITE_IQ it cannot carry out: the command and
    /// why (status `CMD_PARAM_ERROR`, then the reason).
    Refused { command: u32, reason: NodeRefusal },
    /// A well-formed command we do not implement.
    Unknown { command: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram<'a> {
    pub transport: TransportHeader,
    pub message: Message<'a>,
}

#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum WireError {
    #[error("datagram of {got} bytes is shorter than its {need}-byte {what}")]
    Truncated {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("datagram of {got} bytes exceeds the {max}-byte maximum (8960-byte payload plus the 2-byte pad)")]
    Oversized { got: usize, max: usize },
    #[error("transport length {claimed} does not match the {actual} bytes that follow the header")]
    LengthMismatch { claimed: usize, actual: usize },
    #[error("unknown packet type {0}")]
    PacketType(u8),
    #[error("sample header names buffer mask {0:#x}, not exactly one of RFA..RFD")]
    BufferMask(u16),
    #[error("sample header claims {claimed} samples but {actual} sample bytes follow")]
    SampleCount { claimed: u64, actual: usize },
    #[error("READ_IQ request is malformed: {0}")]
    BadReadRequest(&'static str),
    #[error("output buffer of {have} bytes cannot hold the {need}-byte datagram")]
    BufferTooSmall { need: usize, have: usize },
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(WireError::Truncated {
            what,
            need: self.pos + n,
            got: self.bytes.len(),
        })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn peek_u32(&self) -> Option<u32> {
        let b = self.bytes.get(self.pos..self.pos + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn rest(&mut self) -> &'a [u8] {
        let s = &self.bytes[self.pos..];
        self.pos = self.bytes.len();
        s
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Decode a datagram. Never panics; every error says what did not fit.
pub fn decode(bytes: &[u8]) -> Result<Datagram<'_>, WireError> {
    if bytes.len() > MAX_DATAGRAM {
        return Err(WireError::Oversized {
            got: bytes.len(),
            max: MAX_DATAGRAM,
        });
    }
    let mut r = Reader { bytes, pos: 0 };
    let t = r.take(TRANSPORT_HEADER_LEN, "transport header")?;
    let pkt_type = match t[7] {
        0 => PacketType::Trigger,
        1 => PacketType::HostToNode,
        2 => PacketType::NodeToHost,
        other => return Err(WireError::PacketType(other)),
    };
    let claimed = be16(t, 8) as usize;
    let actual = bytes.len() - TRANSPORT_HEADER_LEN;
    // Some hosts leave the length 0; a non-zero one must be right.
    if claimed != 0 && claimed != actual {
        return Err(WireError::LengthMismatch { claimed, actual });
    }
    let transport = TransportHeader {
        dest_id: be16(t, 2),
        src_id: be16(t, 4),
        pkt_type,
        seq_num: be16(t, 10),
        flags: be16(t, 12),
    };
    let message = match pkt_type {
        PacketType::Trigger => Message::Trigger {
            trigger_ids: r.u32("trigger bitmask")?,
        },
        PacketType::HostToNode | PacketType::NodeToHost => decode_command(&mut r, pkt_type)?,
    };
    Ok(Datagram { transport, message })
}

fn decode_command<'a>(r: &mut Reader<'a>, pkt_type: PacketType) -> Result<Message<'a>, WireError> {
    let command = r.u32("command header")?;
    r.take(4, "command header")?; // cmd_length, num_args: not to be relied on
    Ok(match (command, pkt_type) {
        (CMD_READ_IQ, PacketType::HostToNode) => {
            let mut a = [0u32; READ_IQ_ARGS];
            for v in a.iter_mut() {
                *v = r.u32("READ_IQ arguments")?;
            }
            let req = ReadIqRequest {
                buffers: a[0],
                start: a[1],
                num_samples: a[2],
                bytes_per_packet: a[3],
                num_packets: a[4],
            };
            validate_read_request(&req)?;
            Message::ReadIq(req)
        }
        (CMD_READ_IQ | CMD_WRITE_IQ, PacketType::NodeToHost)
            if r.bytes.len() - r.pos == 8 && r.peek_u32() == Some(CMD_PARAM_ERROR) =>
        {
            r.u32("status")?;
            Message::Refused {
                command,
                reason: NodeRefusal::from_code(r.u32("reason")?),
            }
        }
        (CMD_WRITE_IQ, PacketType::NodeToHost) if r.bytes.len() - r.pos == 4 => Message::WriteAck {
            checksum: r.u32("checksum")?,
        },
        (CMD_WRITE_IQ, _) | (CMD_READ_IQ, PacketType::NodeToHost) => {
            let s = r.take(SAMPLE_HEADER_LEN, "sample header")?;
            let mask = be16(s, 0);
            let buffer = RfBuffer::from_mask(mask as u32).ok_or(WireError::BufferMask(mask))?;
            let header = SampleHeader {
                buffer,
                flags: s[2],
                start: u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
                num_samples: u32::from_be_bytes([s[8], s[9], s[10], s[11]]),
            };
            let payload = r.rest();
            if header.num_samples as u64 * 4 != payload.len() as u64 {
                return Err(WireError::SampleCount {
                    claimed: header.num_samples as u64,
                    actual: payload.len(),
                });
            }
            Message::Samples {
                command,
                header,
                words: SampleWords(payload),
            }
        }
        _ => Message::Unknown { command },
    })
}

fn validate_read_request(req: &ReadIqRequest) -> Result<(), WireError> {
    if req.buffers == 0 || req.buffers & !0xF != 0 {
        return Err(WireError::BadReadRequest("buffer mask must name RFA..RFD"));
    }
    let per_packet = req.samples_per_packet() as u64;
    if per_packet == 0 || req.bytes_per_packet as usize > MAX_DATAGRAM - SAMPLE_PACKET_OVERHEAD {
        return Err(WireError::BadReadRequest(
            "payload bytes per packet must hold 1 to 2232 samples (8928 bytes, a jumbo frame)",
        ));
    }
    // The host may round the packet count up (last packets short or empty), never down.
    if (req.num_packets as u64) * per_packet < req.num_samples as u64 {
        return Err(WireError::BadReadRequest(
            "too few packets for the samples asked",
        ));
    }
    if req.num_packets as u64 > req.num_samples as u64 / per_packet + 2 {
        return Err(WireError::BadReadRequest(
            "far more packets than samples need",
        ));
    }
    Ok(())
}

/// Builds datagrams into a caller-owned buffer (no allocation).
pub struct Encoder<'a> {
    buf: &'a mut [u8],
    len: usize,
    /// Bytes after the transport header.
    body_len: usize,
}

impl<'a> Encoder<'a> {
    fn new(buf: &'a mut [u8], t: &TransportHeader, body_len: usize) -> Result<Self, WireError> {
        let need = TRANSPORT_HEADER_LEN + body_len;
        if buf.len() < need || need > MAX_DATAGRAM {
            return Err(WireError::BufferTooSmall {
                need,
                have: buf.len().min(MAX_DATAGRAM),
            });
        }
        let mut e = Self {
            buf,
            len: 0,
            body_len,
        };
        e.u16(0);
        e.u16(t.dest_id);
        e.u16(t.src_id);
        e.u8(0);
        e.u8(t.pkt_type as u8);
        e.u16(body_len as u16);
        e.u16(t.seq_num);
        e.u16(t.flags);
        Ok(e)
    }

    fn u8(&mut self, v: u8) {
        self.buf[self.len] = v;
        self.len += 1;
    }

    fn u16(&mut self, v: u16) {
        self.buf[self.len..self.len + 2].copy_from_slice(&v.to_be_bytes());
        self.len += 2;
    }

    fn u32(&mut self, v: u32) {
        self.buf[self.len..self.len + 4].copy_from_slice(&v.to_be_bytes());
        self.len += 4;
    }

    /// Command header, filled as the WARPLab reference host fills it: `cmd_length`
    /// counts the bytes after the command header.
    fn command(&mut self, command: u32, args: u16) {
        self.u32(command);
        self.u16(self.body_len.saturating_sub(COMMAND_HEADER_LEN) as u16);
        self.u16(args);
    }
}

/// Encode a READ_IQ request; returns the datagram length.
pub fn encode_read_request(
    buf: &mut [u8],
    t: &TransportHeader,
    req: &ReadIqRequest,
) -> Result<usize, WireError> {
    let mut e = Encoder::new(buf, t, COMMAND_HEADER_LEN + 4 * READ_IQ_ARGS)?;
    e.command(CMD_READ_IQ, READ_IQ_ARGS as u16);
    for v in [
        req.buffers,
        req.start,
        req.num_samples,
        req.bytes_per_packet,
        req.num_packets,
    ] {
        e.u32(v);
    }
    Ok(e.len)
}

/// Encode a sample packet (WRITE_IQ host->node or READ_IQ reply node->host).
/// `fill` writes `num_samples` words; it lets callers stream samples straight from
/// their buffers.
pub fn encode_samples(
    buf: &mut [u8],
    t: &TransportHeader,
    command: u32,
    header: &SampleHeader,
    words: &[WarpWord],
) -> Result<usize, WireError> {
    let body = COMMAND_HEADER_LEN + SAMPLE_HEADER_LEN + words.len() * 4;
    let mut e = Encoder::new(buf, t, body)?;
    // One sample header per command: the reference sends one argument.
    e.command(command, 1);
    e.u16(header.buffer.mask());
    e.u8(header.flags);
    e.u8(0);
    e.u32(header.start);
    e.u32(words.len() as u32);
    // One pass of byte swaps the compiler vectorises: this is the node's hot loop.
    let payload = &mut e.buf[e.len..e.len + words.len() * 4];
    for (out, w) in payload.chunks_exact_mut(4).zip(words) {
        out.copy_from_slice(&w.0.to_be_bytes());
    }
    Ok(e.len + words.len() * 4)
}

/// Encode a node's write acknowledgement carrying the running checksum.
pub fn encode_write_ack(
    buf: &mut [u8],
    t: &TransportHeader,
    checksum: u32,
) -> Result<usize, WireError> {
    let mut e = Encoder::new(buf, t, COMMAND_HEADER_LEN + 4)?;
    e.command(CMD_WRITE_IQ, 1);
    e.u32(checksum);
    Ok(e.len)
}

/// Encode a node's refusal of `command` (`CMD_PARAM_ERROR`, then the reason).
pub fn encode_refusal(
    buf: &mut [u8],
    t: &TransportHeader,
    command: u32,
    reason: NodeRefusal,
) -> Result<usize, WireError> {
    let mut e = Encoder::new(buf, t, COMMAND_HEADER_LEN + 8)?;
    e.command(command, 2);
    e.u32(CMD_PARAM_ERROR);
    e.u32(reason as u32);
    Ok(e.len)
}

/// Encode a trigger.
pub fn encode_trigger(
    buf: &mut [u8],
    t: &TransportHeader,
    trigger_ids: u32,
) -> Result<usize, WireError> {
    let mut e = Encoder::new(buf, t, 4)?;
    e.u32(trigger_ids);
    Ok(e.len)
}

#[cfg(test)]
mod tests;
