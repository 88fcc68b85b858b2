//! CHDR wire formats (64-bit CHDR width, little-endian). Parsers borrow the
//! datagram, return typed values or a [`WireError`], and never trust a length.

mod data;
mod header;
mod stream;

pub use data::{
    data_packet_len, write_data_packet, DataPacket, DataPacketSpec, MAX_PACKET_BYTES, SAMPLE_BYTES,
};
pub use header::{ChdrHeader, PacketType, WORD_BYTES};
pub use stream::{
    StreamCommand, StreamCommandOp, StreamStatus, StreamStatusCode, STREAM_COMMAND_BYTES,
    STREAM_STATUS_BYTES,
};

/// Why a buffer is not a valid CHDR packet (or cannot hold one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("packet truncated: need {need} bytes, datagram has {have}")]
    Truncated { need: usize, have: usize },
    #[error("length field {length} is shorter than the {min} bytes of header, timestamp and metadata it announces")]
    LengthTooShort { length: usize, min: usize },
    #[error("reserved CHDR packet type {0} (valid: 0,1,2,4,6,7)")]
    ReservedPacketType(u8),
    #[error("reserved {field} code {code}")]
    ReservedCode { field: &'static str, code: u8 },
    #[error("expected a {expected} packet, got {got:?}")]
    UnexpectedType {
        expected: &'static str,
        got: PacketType,
    },
    #[error("payload of {payload_bytes} bytes is not a whole number of 4-byte sc16 samples")]
    PartialSample { payload_bytes: usize },
    #[error("value {value} does not fit the {field} field")]
    FieldOverflow { field: &'static str, value: u64 },
    #[error("packet of {length} bytes exceeds the 16-bit length field (max 65535)")]
    PacketTooLong { length: usize },
    #[error("buffer too small: need {need}, have {have}")]
    BufferTooSmall { need: usize, have: usize },
}

/// Any CHDR packet, dispatched on its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet<'a> {
    Data(DataPacket<'a>),
    Status(ChdrHeader, StreamStatus),
    Command(ChdrHeader, StreamCommand),
    /// Management and control packets: header checked, payload not interpreted here.
    Other(ChdrHeader, &'a [u8]),
}

impl<'a> Packet<'a> {
    pub fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let header = ChdrHeader::parse(buf)?;
        Ok(match header.pkt_type {
            PacketType::Data | PacketType::DataWithTimestamp => {
                Packet::Data(DataPacket::parse(buf)?)
            }
            PacketType::StreamStatus => {
                let (h, s) = StreamStatus::parse(buf)?;
                Packet::Status(h, s)
            }
            PacketType::StreamCommand => {
                let (h, c) = StreamCommand::parse(buf)?;
                Packet::Command(h, c)
            }
            PacketType::Management | PacketType::Control => {
                Packet::Other(header, &buf[header.prefix_bytes()..header.length as usize])
            }
        })
    }
}
