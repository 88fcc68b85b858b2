//! Data packets (types 6 and 7) carrying sc16 samples: I then Q, int16 little-endian.

use radiohost_iq::Ci16;

use super::header::{read_word, write_word, ChdrHeader, PacketType, WORD_BYTES};
use super::WireError;

/// Bytes of one sc16 sample on the wire.
pub const SAMPLE_BYTES: usize = 4;
/// Largest packet the 16-bit length field can describe.
pub const MAX_PACKET_BYTES: usize = u16::MAX as usize;

/// A parsed data packet borrowing the datagram: nothing is copied until the
/// caller asks for samples with [`DataPacket::read_samples`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataPacket<'a> {
    pub header: ChdrHeader,
    /// Tick timestamp of the first sample (type 7 only).
    pub timestamp: Option<u64>,
    metadata: &'a [u8],
    payload: &'a [u8],
}

impl<'a> DataPacket<'a> {
    /// Parse a data packet. Other packet types, a length that does not fit the
    /// datagram and a payload that is not whole sc16 samples are errors.
    pub fn parse(buf: &'a [u8]) -> Result<Self, WireError> {
        let header = ChdrHeader::parse(buf)?;
        if !matches!(
            header.pkt_type,
            PacketType::Data | PacketType::DataWithTimestamp
        ) {
            return Err(WireError::UnexpectedType {
                expected: "data",
                got: header.pkt_type,
            });
        }
        let timestamp = match header.pkt_type.has_timestamp() {
            true => Some(read_word(buf, 1)?),
            false => None,
        };
        let md_start = WORD_BYTES * (1 + timestamp.is_some() as usize);
        let prefix = header.prefix_bytes();
        let end = header.length as usize;
        let payload = &buf[prefix..end];
        if !payload.len().is_multiple_of(SAMPLE_BYTES) {
            return Err(WireError::PartialSample {
                payload_bytes: payload.len(),
            });
        }
        Ok(DataPacket {
            header,
            timestamp,
            metadata: &buf[md_start..prefix],
            payload,
        })
    }

    pub fn num_samples(&self) -> usize {
        self.payload.len() / SAMPLE_BYTES
    }

    pub fn metadata_words(&self) -> impl Iterator<Item = u64> + 'a {
        self.metadata
            .chunks_exact(WORD_BYTES)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8-byte chunk")))
    }

    /// The raw sc16 payload bytes.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Decode the samples into the front of `out`; returns how many were written.
    /// `out` shorter than the payload is an error (nothing is truncated silently).
    pub fn read_samples(&self, out: &mut [Ci16]) -> Result<usize, WireError> {
        let n = self.num_samples();
        let have = out.len();
        let Some(dst) = out.get_mut(..n) else {
            return Err(WireError::BufferTooSmall { need: n, have });
        };
        for (s, b) in dst.iter_mut().zip(self.payload.chunks_exact(SAMPLE_BYTES)) {
            *s = Ci16::new(
                i16::from_le_bytes([b[0], b[1]]),
                i16::from_le_bytes([b[2], b[3]]),
            );
        }
        Ok(n)
    }
}

/// The header fields a sender chooses for a data packet; length and type follow
/// from the contents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DataPacketSpec {
    pub vc: u8,
    pub eob: bool,
    pub eov: bool,
    pub seq_num: u16,
    pub dst_epid: u16,
    pub timestamp: Option<u64>,
}

/// Bytes a data packet with these contents occupies.
pub fn data_packet_len(timestamp: bool, metadata_words: usize, samples: usize) -> usize {
    WORD_BYTES * (1 + timestamp as usize + metadata_words) + SAMPLE_BYTES * samples
}

/// Encode a data packet into the front of `buf` and return its length in bytes.
pub fn write_data_packet(
    buf: &mut [u8],
    spec: &DataPacketSpec,
    metadata: &[u64],
    samples: &[Ci16],
) -> Result<usize, WireError> {
    if metadata.len() > ChdrHeader::MAX_MDATA as usize {
        return Err(WireError::FieldOverflow {
            field: "num_mdata",
            value: metadata.len() as u64,
        });
    }
    let len = data_packet_len(spec.timestamp.is_some(), metadata.len(), samples.len());
    if len > MAX_PACKET_BYTES {
        return Err(WireError::PacketTooLong { length: len });
    }
    if buf.len() < len {
        return Err(WireError::BufferTooSmall {
            need: len,
            have: buf.len(),
        });
    }
    let header = ChdrHeader {
        vc: spec.vc,
        eob: spec.eob,
        eov: spec.eov,
        pkt_type: match spec.timestamp {
            Some(_) => PacketType::DataWithTimestamp,
            None => PacketType::Data,
        },
        num_mdata: metadata.len() as u8,
        seq_num: spec.seq_num,
        length: len as u16,
        dst_epid: spec.dst_epid,
    };
    write_word(buf, 0, header.encode()?)?;
    let mut word = 1;
    if let Some(ts) = spec.timestamp {
        write_word(buf, word, ts)?;
        word += 1;
    }
    for &m in metadata {
        write_word(buf, word, m)?;
        word += 1;
    }
    let payload = &mut buf[word * WORD_BYTES..len];
    for (b, s) in payload.chunks_exact_mut(SAMPLE_BYTES).zip(samples) {
        b[..2].copy_from_slice(&s.re.to_le_bytes());
        b[2..].copy_from_slice(&s.im.to_le_bytes());
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sample_layout_is_i_then_q_little_endian() {
        let mut buf = [0u8; 64];
        let spec = DataPacketSpec {
            timestamp: Some(0x0102),
            ..Default::default()
        };
        let n = write_data_packet(&mut buf, &spec, &[], &[Ci16::new(0x1234, -2)]).unwrap();
        assert_eq!(n, 20);
        assert_eq!(&buf[8..16], &0x0102u64.to_le_bytes());
        assert_eq!(&buf[16..20], &[0x34, 0x12, 0xfe, 0xff]);
    }

    #[test]
    fn rejects_partial_samples_wrong_types_and_short_buffers() {
        let mut buf = [0u8; 64];
        let n = write_data_packet(
            &mut buf,
            &DataPacketSpec::default(),
            &[],
            &[Ci16::new(1, 2)],
        )
        .unwrap();
        // Shrink the announced length by two bytes: half a sample.
        let mut h = ChdrHeader::parse(&buf).unwrap();
        h.length = (n - 2) as u16;
        buf[..8].copy_from_slice(&h.encode().unwrap().to_le_bytes());
        assert_eq!(
            DataPacket::parse(&buf[..n]),
            Err(WireError::PartialSample { payload_bytes: 2 })
        );
        h.length = n as u16;
        h.pkt_type = PacketType::Control;
        buf[..8].copy_from_slice(&h.encode().unwrap().to_le_bytes());
        assert!(matches!(
            DataPacket::parse(&buf[..n]),
            Err(WireError::UnexpectedType { .. })
        ));
        let mut small = [0u8; 8];
        assert!(matches!(
            write_data_packet(
                &mut small,
                &DataPacketSpec::default(),
                &[],
                &[Ci16::default(); 2]
            ),
            Err(WireError::BufferTooSmall { .. })
        ));
        let mut big = vec![0u8; 70_000];
        assert!(matches!(
            write_data_packet(
                &mut big,
                &DataPacketSpec::default(),
                &[],
                &[Ci16::default(); 17_000]
            ),
            Err(WireError::PacketTooLong { .. })
        ));
    }

    proptest! {
        #[test]
        fn data_packet_roundtrips(
            seq: u16, epid: u16, vc in 0u8..64, eob: bool, eov: bool,
            ts in proptest::option::of(any::<u64>()),
            md in proptest::collection::vec(any::<u64>(), 0..4),
            iq in proptest::collection::vec(any::<(i16, i16)>(), 0..300),
            slack in 0usize..16,
        ) {
            let samples: Vec<Ci16> = iq.iter().map(|&(i, q)| Ci16::new(i, q)).collect();
            let spec = DataPacketSpec { vc, eob, eov, seq_num: seq, dst_epid: epid, timestamp: ts };
            let mut buf = vec![0u8; data_packet_len(ts.is_some(), md.len(), samples.len()) + slack];
            let n = write_data_packet(&mut buf, &spec, &md, &samples).unwrap();
            // Trailing bytes beyond Length (padding) are ignored.
            let p = DataPacket::parse(&buf).unwrap();
            prop_assert_eq!(p.header.length as usize, n);
            prop_assert_eq!(p.header.seq_num, seq);
            prop_assert_eq!(p.header.dst_epid, epid);
            prop_assert_eq!((p.header.vc, p.header.eob, p.header.eov), (vc, eob, eov));
            prop_assert_eq!(p.timestamp, ts);
            prop_assert_eq!(p.metadata_words().collect::<Vec<_>>(), md);
            let mut out = vec![Ci16::default(); samples.len()];
            prop_assert_eq!(p.read_samples(&mut out).unwrap(), samples.len());
            prop_assert_eq!(out, samples);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(p) = DataPacket::parse(&bytes) {
                let mut out = vec![Ci16::default(); p.num_samples()];
                prop_assert!(p.read_samples(&mut out).is_ok());
            }
        }
    }
}
