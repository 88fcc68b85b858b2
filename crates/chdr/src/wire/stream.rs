//! Stream status (type 1) and stream command (type 2) packets: the two halves
//! of CHDR's credit-based flow control.
//!
//! Stream status payload, four words:
//! ```text
//! w0: CapacityBytes[63:24] Reserved[23:20] Status[19:16] SrcEPID[15:0]
//! w1: XferCountPkts[63:24] CapacityPkts[23:0]
//! w2: XferCountBytes[63:0]
//! w3: StatusInfo[63:16] BuffInfo[15:0]
//! ```
//! Stream command payload, two words:
//! ```text
//! w0: NumPkts[63:24] OpData[23:20] OpCode[19:16] SrcEPID[15:0]
//! w1: NumBytes[63:0]
//! ```

use super::header::{read_word, write_word, ChdrHeader, PacketType, WORD_BYTES};
use super::WireError;

const MASK_40: u64 = (1 << 40) - 1;
const MASK_24: u64 = (1 << 24) - 1;
const MASK_48: u64 = (1 << 48) - 1;

/// Status code of a stream status packet (4 bits; 5..=15 are reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum StreamStatusCode {
    Okay,
    CmdErr,
    SeqErr,
    DataErr,
    RtErr,
}

impl StreamStatusCode {
    pub const fn code(self) -> u8 {
        match self {
            StreamStatusCode::Okay => 0,
            StreamStatusCode::CmdErr => 1,
            StreamStatusCode::SeqErr => 2,
            StreamStatusCode::DataErr => 3,
            StreamStatusCode::RtErr => 4,
        }
    }

    pub fn from_code(code: u8) -> Result<Self, WireError> {
        Ok(match code {
            0 => StreamStatusCode::Okay,
            1 => StreamStatusCode::CmdErr,
            2 => StreamStatusCode::SeqErr,
            3 => StreamStatusCode::DataErr,
            4 => StreamStatusCode::RtErr,
            other => {
                return Err(WireError::ReservedCode {
                    field: "status",
                    code: other,
                })
            }
        })
    }
}

/// A stream status report: the receiver's buffer capacity and how much it has
/// consumed so far. The sender's credit is capacity minus (sent - consumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StreamStatus {
    pub src_epid: u16,
    pub status: StreamStatusCode,
    /// Buffer capacity in bytes, 40 bits.
    pub capacity_bytes: u64,
    /// Buffer capacity in packets, 24 bits.
    pub capacity_pkts: u32,
    /// Packets consumed since INIT, 40 bits (wraps).
    pub xfer_count_pkts: u64,
    /// Bytes consumed since INIT, 64 bits (wraps).
    pub xfer_count_bytes: u64,
    pub buff_info: u16,
    /// Free-form detail, 48 bits (we put the expected sequence number on SEQERR).
    pub status_info: u64,
}

/// Stream command operation (4 bits; 3..=15 are reserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum StreamCommandOp {
    /// Reset counters and ask for a status with the capacity.
    Init,
    /// Ask for a status now.
    Ping,
    /// Set the receiver's transfer counts to the given values (after an error).
    Resync,
}

impl StreamCommandOp {
    pub const fn code(self) -> u8 {
        match self {
            StreamCommandOp::Init => 0,
            StreamCommandOp::Ping => 1,
            StreamCommandOp::Resync => 2,
        }
    }

    pub fn from_code(code: u8) -> Result<Self, WireError> {
        Ok(match code {
            0 => StreamCommandOp::Init,
            1 => StreamCommandOp::Ping,
            2 => StreamCommandOp::Resync,
            other => {
                return Err(WireError::ReservedCode {
                    field: "op_code",
                    code: other,
                })
            }
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StreamCommand {
    pub src_epid: u16,
    pub op: StreamCommandOp,
    /// 4 bits of operation data.
    pub op_data: u8,
    /// 40 bits: for INIT the status period in packets, for RESYNC the packet count.
    pub num_pkts: u64,
    /// For INIT the status period in bytes, for RESYNC the byte count.
    pub num_bytes: u64,
}

const STATUS_WORDS: usize = 4;
const COMMAND_WORDS: usize = 2;
/// Encoded size of a stream status packet (no metadata).
pub const STREAM_STATUS_BYTES: usize = WORD_BYTES * (1 + STATUS_WORDS);
/// Encoded size of a stream command packet (no metadata).
pub const STREAM_COMMAND_BYTES: usize = WORD_BYTES * (1 + COMMAND_WORDS);

fn control_header(pkt_type: PacketType, seq_num: u16, dst_epid: u16, words: usize) -> ChdrHeader {
    ChdrHeader {
        vc: 0,
        eob: false,
        eov: false,
        pkt_type,
        num_mdata: 0,
        seq_num,
        length: (WORD_BYTES * (1 + words)) as u16,
        dst_epid,
    }
}

/// Check the header and return the word index where the payload starts.
fn payload_start(
    buf: &[u8],
    want: PacketType,
    words: usize,
) -> Result<(ChdrHeader, usize), WireError> {
    let header = ChdrHeader::parse(buf)?;
    if header.pkt_type != want {
        let expected = match want {
            PacketType::StreamStatus => "stream status",
            _ => "stream command",
        };
        return Err(WireError::UnexpectedType {
            expected,
            got: header.pkt_type,
        });
    }
    let start = 1 + header.num_mdata as usize;
    let need = WORD_BYTES * (start + words);
    if (header.length as usize) < need {
        return Err(WireError::LengthTooShort {
            length: header.length as usize,
            min: need,
        });
    }
    Ok((header, start))
}

impl StreamStatus {
    fn check(&self) -> Result<(), WireError> {
        for (field, value, mask) in [
            ("capacity_bytes", self.capacity_bytes, MASK_40),
            ("capacity_pkts", self.capacity_pkts as u64, MASK_24),
            ("xfer_count_pkts", self.xfer_count_pkts, MASK_40),
            ("status_info", self.status_info, MASK_48),
        ] {
            if value > mask {
                return Err(WireError::FieldOverflow { field, value });
            }
        }
        Ok(())
    }

    /// Encode as a whole packet into `buf`; returns its length.
    pub fn write(&self, buf: &mut [u8], seq_num: u16, dst_epid: u16) -> Result<usize, WireError> {
        self.check()?;
        let h = control_header(PacketType::StreamStatus, seq_num, dst_epid, STATUS_WORDS);
        if buf.len() < STREAM_STATUS_BYTES {
            return Err(WireError::BufferTooSmall {
                need: STREAM_STATUS_BYTES,
                have: buf.len(),
            });
        }
        write_word(buf, 0, h.encode()?)?;
        write_word(
            buf,
            1,
            (self.capacity_bytes << 24)
                | ((self.status.code() as u64) << 16)
                | self.src_epid as u64,
        )?;
        write_word(
            buf,
            2,
            (self.xfer_count_pkts << 24) | self.capacity_pkts as u64,
        )?;
        write_word(buf, 3, self.xfer_count_bytes)?;
        write_word(buf, 4, (self.status_info << 16) | self.buff_info as u64)?;
        Ok(STREAM_STATUS_BYTES)
    }

    pub fn parse(buf: &[u8]) -> Result<(ChdrHeader, Self), WireError> {
        let (h, s) = payload_start(buf, PacketType::StreamStatus, STATUS_WORDS)?;
        let w0 = read_word(buf, s)?;
        let w1 = read_word(buf, s + 1)?;
        let w2 = read_word(buf, s + 2)?;
        let w3 = read_word(buf, s + 3)?;
        let status = StreamStatus {
            src_epid: w0 as u16,
            status: StreamStatusCode::from_code(((w0 >> 16) & 0xf) as u8)?,
            capacity_bytes: w0 >> 24,
            capacity_pkts: (w1 & MASK_24) as u32,
            xfer_count_pkts: w1 >> 24,
            xfer_count_bytes: w2,
            buff_info: w3 as u16,
            status_info: w3 >> 16,
        };
        Ok((h, status))
    }
}

impl StreamCommand {
    pub fn write(&self, buf: &mut [u8], seq_num: u16, dst_epid: u16) -> Result<usize, WireError> {
        if self.op_data > 0xf {
            return Err(WireError::FieldOverflow {
                field: "op_data",
                value: self.op_data as u64,
            });
        }
        if self.num_pkts > MASK_40 {
            return Err(WireError::FieldOverflow {
                field: "num_pkts",
                value: self.num_pkts,
            });
        }
        if buf.len() < STREAM_COMMAND_BYTES {
            return Err(WireError::BufferTooSmall {
                need: STREAM_COMMAND_BYTES,
                have: buf.len(),
            });
        }
        let h = control_header(PacketType::StreamCommand, seq_num, dst_epid, COMMAND_WORDS);
        write_word(buf, 0, h.encode()?)?;
        write_word(
            buf,
            1,
            (self.num_pkts << 24)
                | ((self.op_data as u64) << 20)
                | ((self.op.code() as u64) << 16)
                | self.src_epid as u64,
        )?;
        write_word(buf, 2, self.num_bytes)?;
        Ok(STREAM_COMMAND_BYTES)
    }

    pub fn parse(buf: &[u8]) -> Result<(ChdrHeader, Self), WireError> {
        let (h, s) = payload_start(buf, PacketType::StreamCommand, COMMAND_WORDS)?;
        let w0 = read_word(buf, s)?;
        let w1 = read_word(buf, s + 1)?;
        let cmd = StreamCommand {
            src_epid: w0 as u16,
            op: StreamCommandOp::from_code(((w0 >> 16) & 0xf) as u8)?,
            op_data: ((w0 >> 20) & 0xf) as u8,
            num_pkts: w0 >> 24,
            num_bytes: w1,
        };
        Ok((h, cmd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_status() -> impl Strategy<Value = StreamStatusCode> {
        prop_oneof![
            Just(StreamStatusCode::Okay),
            Just(StreamStatusCode::CmdErr),
            Just(StreamStatusCode::SeqErr),
            Just(StreamStatusCode::DataErr),
            Just(StreamStatusCode::RtErr),
        ]
    }

    fn any_op() -> impl Strategy<Value = StreamCommandOp> {
        prop_oneof![
            Just(StreamCommandOp::Init),
            Just(StreamCommandOp::Ping),
            Just(StreamCommandOp::Resync)
        ]
    }

    #[test]
    fn reserved_codes_and_overflows_are_errors() {
        let mut buf = [0u8; 64];
        let s = StreamStatus {
            src_epid: 1,
            status: StreamStatusCode::Okay,
            capacity_bytes: 1 << 40,
            capacity_pkts: 0,
            xfer_count_pkts: 0,
            xfer_count_bytes: 0,
            buff_info: 0,
            status_info: 0,
        };
        assert!(matches!(
            s.write(&mut buf, 0, 0),
            Err(WireError::FieldOverflow { .. })
        ));
        let s = StreamStatus {
            capacity_bytes: 5,
            ..s
        };
        s.write(&mut buf, 0, 0).unwrap();
        buf[8 + 2] |= 0x0f; // status nibble = 15
        assert!(matches!(
            StreamStatus::parse(&buf),
            Err(WireError::ReservedCode { .. })
        ));
        let c = StreamCommand {
            src_epid: 0,
            op: StreamCommandOp::Ping,
            op_data: 0,
            num_pkts: 0,
            num_bytes: 0,
        };
        let n = c.write(&mut buf, 0, 0).unwrap();
        assert!(matches!(
            StreamStatus::parse(&buf[..n]),
            Err(WireError::UnexpectedType { .. })
        ));
        assert!(matches!(
            StreamCommand::parse(&buf[..n - 1]),
            Err(WireError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn status_roundtrips(src: u16, st in any_status(), cb in 0u64..(1 << 40),
                             cp in 0u32..(1 << 24), xp in 0u64..(1 << 40), xb: u64,
                             bi: u16, si in 0u64..(1 << 48), seq: u16, dst: u16) {
            let s = StreamStatus { src_epid: src, status: st, capacity_bytes: cb, capacity_pkts: cp,
                xfer_count_pkts: xp, xfer_count_bytes: xb, buff_info: bi, status_info: si };
            let mut buf = [0u8; STREAM_STATUS_BYTES];
            s.write(&mut buf, seq, dst).unwrap();
            let (h, back) = StreamStatus::parse(&buf).unwrap();
            prop_assert_eq!(back, s);
            prop_assert_eq!((h.seq_num, h.dst_epid), (seq, dst));
        }

        #[test]
        fn command_roundtrips(src: u16, op in any_op(), od in 0u8..16,
                              np in 0u64..(1 << 40), nb: u64, seq: u16, dst: u16) {
            let c = StreamCommand { src_epid: src, op, op_data: od, num_pkts: np, num_bytes: nb };
            let mut buf = [0u8; STREAM_COMMAND_BYTES];
            c.write(&mut buf, seq, dst).unwrap();
            let (h, back) = StreamCommand::parse(&buf).unwrap();
            prop_assert_eq!(back, c);
            prop_assert_eq!((h.seq_num, h.dst_epid), (seq, dst));
        }

        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = StreamStatus::parse(&bytes);
            let _ = StreamCommand::parse(&bytes);
        }
    }
}
