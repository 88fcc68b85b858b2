//! The burst tag: four CHDR metadata words that say which burst a packet
//! carries, who sent it and when the burst left the source and reached the
//! relay. The destination decodes it from every relay copy it receives.
//!
//! ```text
//! word 0: magic "RHRL" (32) | version (8) | kind (8) | relay (8) | reserved 0 (8)
//! word 1: burst number
//! word 2: source TX time of the burst (ticks)
//! word 3: relay RX timestamp of the burst (ticks; 0 in stage-1 packets)
//! ```

use radiohost_chdr::wire::{write_data_packet, DataPacket, DataPacketSpec, WireError};
use radiohost_iq::Ci16;

/// "RHRL": radiohost relay.
pub const TAG_MAGIC: u32 = 0x5248_524C;
pub const TAG_VERSION: u8 = 1;
/// Metadata words a tag occupies.
pub const TAG_WORDS: usize = 4;

/// Which hop a packet belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TagKind {
    /// The source's burst as a relay's radio received it.
    Stage1,
    /// A relay's retransmission.
    RelayCopy,
}

impl TagKind {
    fn code(self) -> u8 {
        match self {
            TagKind::Stage1 => 1,
            TagKind::RelayCopy => 2,
        }
    }
}

/// A decoded burst tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct RelayTag {
    pub kind: TagKind,
    /// Relay index (the receiving relay for stage 1, the sender for copies).
    pub relay: u8,
    pub burst: u64,
    pub source_ts: u64,
    pub rx_ts: u64,
}

/// Why a datagram is not a tagged relay packet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error("not a CHDR data packet: {0}")]
    Wire(#[from] WireError),
    #[error("relay packets carry a timestamp; this data packet has none")]
    NoTimestamp,
    #[error("relay packets carry {TAG_WORDS} metadata words of tag, this one has {words}")]
    MissingTag { words: usize },
    #[error("tag magic {found:#010x} is not RHRL ({TAG_MAGIC:#010x}): not a relay packet")]
    BadMagic { found: u32 },
    #[error("tag version {0} is not supported (this build speaks version {TAG_VERSION})")]
    BadVersion(u8),
    #[error("tag kind {0} is reserved (1 = stage 1, 2 = relay copy)")]
    BadKind(u8),
    #[error("reserved tag bits are {0:#04x}, must be 0")]
    Reserved(u8),
}

impl RelayTag {
    pub fn words(&self) -> [u64; TAG_WORDS] {
        let w0 = (TAG_MAGIC as u64) << 32
            | (TAG_VERSION as u64) << 24
            | (self.kind.code() as u64) << 16
            | (self.relay as u64) << 8;
        [w0, self.burst, self.source_ts, self.rx_ts]
    }

    /// Decode the first [`TAG_WORDS`] words; extra words are ignored.
    pub fn from_words(mut words: impl Iterator<Item = u64>) -> Result<Self, TagError> {
        let mut w = [0u64; TAG_WORDS];
        for (i, slot) in w.iter_mut().enumerate() {
            *slot = words.next().ok_or(TagError::MissingTag { words: i })?;
        }
        let magic = (w[0] >> 32) as u32;
        if magic != TAG_MAGIC {
            return Err(TagError::BadMagic { found: magic });
        }
        let version = (w[0] >> 24) as u8;
        if version != TAG_VERSION {
            return Err(TagError::BadVersion(version));
        }
        let kind = match (w[0] >> 16) as u8 {
            1 => TagKind::Stage1,
            2 => TagKind::RelayCopy,
            k => return Err(TagError::BadKind(k)),
        };
        let reserved = w[0] as u8;
        if reserved != 0 {
            return Err(TagError::Reserved(reserved));
        }
        Ok(RelayTag {
            kind,
            relay: (w[0] >> 8) as u8,
            burst: w[1],
            source_ts: w[2],
            rx_ts: w[3],
        })
    }
}

/// A timestamped CHDR data packet carrying a burst tag, borrowing the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayPacket<'a> {
    pub data: DataPacket<'a>,
    /// Tick of the first sample.
    pub timestamp: u64,
    pub tag: RelayTag,
}

impl<'a> RelayPacket<'a> {
    pub fn parse(buf: &'a [u8]) -> Result<Self, TagError> {
        let data = DataPacket::parse(buf)?;
        let timestamp = data.timestamp.ok_or(TagError::NoTimestamp)?;
        let tag = RelayTag::from_words(data.metadata_words())?;
        Ok(RelayPacket {
            data,
            timestamp,
            tag,
        })
    }
}

/// Encode a tagged burst packet (one packet per burst, so it carries EOB).
pub fn write_relay_packet(
    buf: &mut [u8],
    seq_num: u16,
    dst_epid: u16,
    timestamp: u64,
    tag: &RelayTag,
    samples: &[Ci16],
) -> Result<usize, WireError> {
    let spec = DataPacketSpec {
        eob: true,
        seq_num,
        dst_epid,
        timestamp: Some(timestamp),
        ..Default::default()
    };
    write_data_packet(buf, &spec, &tag.words(), samples)
}

/// Bytes of a tagged packet with `samples` samples.
pub fn relay_packet_len(samples: usize) -> usize {
    radiohost_chdr::wire::data_packet_len(true, TAG_WORDS, samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = TagKind> {
        prop_oneof![Just(TagKind::Stage1), Just(TagKind::RelayCopy)]
    }

    proptest! {
        #[test]
        fn encode_then_decode_is_identity(
            k in kind(), relay in any::<u8>(), burst in any::<u64>(),
            source_ts in any::<u64>(), rx_ts in any::<u64>(), ts in any::<u64>(),
            seq in any::<u16>(), epid in any::<u16>(), n in 0usize..64,
        ) {
            let tag = RelayTag { kind: k, relay, burst, source_ts, rx_ts };
            let samples: Vec<Ci16> = (0..n).map(|i| Ci16::new(i as i16, -(i as i16))).collect();
            let mut buf = vec![0u8; relay_packet_len(n)];
            let len = write_relay_packet(&mut buf, seq, epid, ts, &tag, &samples).unwrap();
            prop_assert_eq!(len, relay_packet_len(n));
            let p = RelayPacket::parse(&buf[..len]).unwrap();
            prop_assert_eq!(p.tag, tag);
            prop_assert_eq!(p.timestamp, ts);
            prop_assert_eq!(p.data.header.seq_num, seq);
            prop_assert_eq!(p.data.header.dst_epid, epid);
            prop_assert!(p.data.header.eob);
            let mut back = vec![Ci16::default(); n];
            p.data.read_samples(&mut back).unwrap();
            prop_assert_eq!(back, samples);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = RelayPacket::parse(&bytes);
        }
    }

    fn tagged(words: &[u64], timestamp: Option<u64>) -> Vec<u8> {
        let mut buf = vec![0u8; 128];
        let spec = DataPacketSpec {
            timestamp,
            ..Default::default()
        };
        let n = write_data_packet(&mut buf, &spec, words, &[Ci16::new(1, 2)]).unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn each_defect_has_its_own_error() {
        let good = RelayTag {
            kind: TagKind::RelayCopy,
            relay: 1,
            burst: 7,
            source_ts: 100,
            rx_ts: 110,
        }
        .words();
        assert!(RelayPacket::parse(&tagged(&good, Some(5))).is_ok());
        assert_eq!(
            RelayPacket::parse(&tagged(&good, None)),
            Err(TagError::NoTimestamp)
        );
        assert_eq!(
            RelayPacket::parse(&tagged(&good[..3], Some(5))),
            Err(TagError::MissingTag { words: 3 })
        );
        let with = |w0: u64| {
            let mut w = good;
            w[0] = w0;
            RelayPacket::parse(&tagged(&w, Some(5))).map(|p| p.tag)
        };
        assert_eq!(
            with(good[0] ^ (1 << 40)),
            Err(TagError::BadMagic {
                found: TAG_MAGIC ^ (1 << 8)
            })
        );
        assert_eq!(
            with(good[0] & !(0xff << 24) | (9 << 24)),
            Err(TagError::BadVersion(9))
        );
        assert_eq!(
            with(good[0] & !(0xff << 16) | (3 << 16)),
            Err(TagError::BadKind(3))
        );
        assert_eq!(with(good[0] | 4), Err(TagError::Reserved(4)));
        assert!(matches!(
            RelayPacket::parse(&[0u8; 3]),
            Err(TagError::Wire(WireError::Truncated { .. }))
        ));
    }
}
