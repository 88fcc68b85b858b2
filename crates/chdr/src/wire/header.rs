//! The 64-bit CHDR header word (RFNoC, 64-bit CHDR width, little-endian).
//!
//! ```text
//! VC[63:58] EOB[57] EOV[56] PktType[55:53] NumMData[52:48] SeqNum[47:32] Length[31:16] DstEPID[15:0]
//! ```

use super::WireError;

/// Bytes in one CHDR word at the 64-bit width.
pub const WORD_BYTES: usize = 8;

/// CHDR packet type (3 bits). Values 3 and 5 are reserved and rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum PacketType {
    Management,
    StreamStatus,
    StreamCommand,
    Control,
    Data,
    DataWithTimestamp,
}

impl PacketType {
    pub const fn code(self) -> u8 {
        match self {
            PacketType::Management => 0,
            PacketType::StreamStatus => 1,
            PacketType::StreamCommand => 2,
            PacketType::Control => 4,
            PacketType::Data => 6,
            PacketType::DataWithTimestamp => 7,
        }
    }

    pub fn from_code(code: u8) -> Result<Self, WireError> {
        Ok(match code {
            0 => PacketType::Management,
            1 => PacketType::StreamStatus,
            2 => PacketType::StreamCommand,
            4 => PacketType::Control,
            6 => PacketType::Data,
            7 => PacketType::DataWithTimestamp,
            other => return Err(WireError::ReservedPacketType(other)),
        })
    }

    /// Whether a 64-bit timestamp word follows the header.
    pub const fn has_timestamp(self) -> bool {
        matches!(self, PacketType::DataWithTimestamp)
    }
}

/// A decoded CHDR header. Field widths are enforced by [`ChdrHeader::encode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ChdrHeader {
    /// Virtual channel, 6 bits.
    pub vc: u8,
    /// End of burst.
    pub eob: bool,
    /// End of vector.
    pub eov: bool,
    pub pkt_type: PacketType,
    /// Number of 64-bit metadata words, 5 bits (0..=31).
    pub num_mdata: u8,
    pub seq_num: u16,
    /// Whole packet length in bytes, header included.
    pub length: u16,
    pub dst_epid: u16,
}

impl ChdrHeader {
    pub const MAX_VC: u8 = 0x3f;
    pub const MAX_MDATA: u8 = 0x1f;

    /// Pack into the 64-bit word. Fails if `vc` or `num_mdata` overflow their fields.
    pub fn encode(&self) -> Result<u64, WireError> {
        if self.vc > Self::MAX_VC {
            return Err(WireError::FieldOverflow {
                field: "vc",
                value: self.vc as u64,
            });
        }
        if self.num_mdata > Self::MAX_MDATA {
            return Err(WireError::FieldOverflow {
                field: "num_mdata",
                value: self.num_mdata as u64,
            });
        }
        Ok(((self.vc as u64) << 58)
            | ((self.eob as u64) << 57)
            | ((self.eov as u64) << 56)
            | ((self.pkt_type.code() as u64) << 53)
            | ((self.num_mdata as u64) << 48)
            | ((self.seq_num as u64) << 32)
            | ((self.length as u64) << 16)
            | self.dst_epid as u64)
    }

    /// Unpack a header word. Only the packet type can be invalid.
    pub fn decode(word: u64) -> Result<Self, WireError> {
        Ok(ChdrHeader {
            vc: ((word >> 58) & 0x3f) as u8,
            eob: (word >> 57) & 1 == 1,
            eov: (word >> 56) & 1 == 1,
            pkt_type: PacketType::from_code(((word >> 53) & 0x7) as u8)?,
            num_mdata: ((word >> 48) & 0x1f) as u8,
            seq_num: (word >> 32) as u16,
            length: (word >> 16) as u16,
            dst_epid: word as u16,
        })
    }

    /// Bytes before the payload: header, optional timestamp, metadata.
    pub fn prefix_bytes(&self) -> usize {
        WORD_BYTES * (1 + self.pkt_type.has_timestamp() as usize + self.num_mdata as usize)
    }

    /// Read and validate the header of `buf`: the length field must fit the
    /// datagram and cover the header, timestamp and metadata it announces.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let word = read_word(buf, 0)?;
        let hdr = Self::decode(word)?;
        let len = hdr.length as usize;
        if len > buf.len() {
            return Err(WireError::Truncated {
                need: len,
                have: buf.len(),
            });
        }
        if len < hdr.prefix_bytes() {
            return Err(WireError::LengthTooShort {
                length: len,
                min: hdr.prefix_bytes(),
            });
        }
        Ok(hdr)
    }
}

/// Read the little-endian word at word index `index`.
pub(crate) fn read_word(buf: &[u8], index: usize) -> Result<u64, WireError> {
    let start = index * WORD_BYTES;
    match buf.get(start..start + WORD_BYTES) {
        Some(b) => Ok(u64::from_le_bytes(b.try_into().expect("slice of 8 bytes"))),
        None => Err(WireError::Truncated {
            need: start + WORD_BYTES,
            have: buf.len(),
        }),
    }
}

pub(crate) fn write_word(buf: &mut [u8], index: usize, word: u64) -> Result<(), WireError> {
    let start = index * WORD_BYTES;
    let have = buf.len();
    match buf.get_mut(start..start + WORD_BYTES) {
        Some(b) => {
            b.copy_from_slice(&word.to_le_bytes());
            Ok(())
        }
        None => Err(WireError::BufferTooSmall {
            need: start + WORD_BYTES,
            have,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_type() -> impl Strategy<Value = PacketType> {
        prop_oneof![
            Just(PacketType::Management),
            Just(PacketType::StreamStatus),
            Just(PacketType::StreamCommand),
            Just(PacketType::Control),
            Just(PacketType::Data),
            Just(PacketType::DataWithTimestamp),
        ]
    }

    #[test]
    fn field_positions_match_the_spec() {
        let h = ChdrHeader {
            vc: 0x3f,
            eob: true,
            eov: false,
            pkt_type: PacketType::DataWithTimestamp,
            num_mdata: 3,
            seq_num: 0xabcd,
            length: 0x1234,
            dst_epid: 0x5678,
        };
        let w = h.encode().unwrap();
        assert_eq!(w >> 58, 0x3f);
        assert_eq!((w >> 57) & 1, 1);
        assert_eq!((w >> 56) & 1, 0);
        assert_eq!((w >> 53) & 7, 7);
        assert_eq!((w >> 48) & 0x1f, 3);
        assert_eq!((w >> 32) & 0xffff, 0xabcd);
        assert_eq!((w >> 16) & 0xffff, 0x1234);
        assert_eq!(w & 0xffff, 0x5678);
    }

    #[test]
    fn reserved_types_and_overflows_are_errors() {
        assert_eq!(
            ChdrHeader::decode(3 << 53),
            Err(WireError::ReservedPacketType(3))
        );
        assert_eq!(
            ChdrHeader::decode(5 << 53),
            Err(WireError::ReservedPacketType(5))
        );
        let mut h = ChdrHeader::decode(0).unwrap();
        h.vc = 64;
        assert!(matches!(
            h.encode(),
            Err(WireError::FieldOverflow { field: "vc", .. })
        ));
    }

    #[test]
    fn lengths_are_never_trusted() {
        let mut h = ChdrHeader::decode(6 << 53).unwrap();
        h.length = 64;
        let bytes = h.encode().unwrap().to_le_bytes();
        assert!(matches!(
            ChdrHeader::parse(&bytes),
            Err(WireError::Truncated { need: 64, .. })
        ));
        h.length = 4;
        let bytes = h.encode().unwrap().to_le_bytes();
        assert!(matches!(
            ChdrHeader::parse(&bytes),
            Err(WireError::LengthTooShort { .. })
        ));
        assert!(matches!(
            ChdrHeader::parse(&[1, 2, 3]),
            Err(WireError::Truncated { .. })
        ));
    }

    proptest! {
        #[test]
        fn header_roundtrips(vc in 0u8..64, eob: bool, eov: bool, t in any_type(),
                             md in 0u8..32, seq: u16, len: u16, epid: u16) {
            let h = ChdrHeader { vc, eob, eov, pkt_type: t, num_mdata: md, seq_num: seq,
                                 length: len, dst_epid: epid };
            prop_assert_eq!(ChdrHeader::decode(h.encode().unwrap()).unwrap(), h);
        }
    }
}
