//! PMT packet formats. All integers are big-endian.
//!
//! ```text
//! common header (8 bytes)
//!   0  version  u8   = 1
//!   1  kind     u8   1 DATA, 2 META, 3 ACK, 4 NACK (multicast baseline)
//!   2  flags    u8   bit 0 AUTH (a 16-byte HMAC tag follows the CRC); others per kind
//!   3  reserved u8   = 0
//!   4  session  u32
//! DATA body: round u32, seq u32, object_len u64, seg_size u16, idx u16, count u16,
//!            payload_len u16, payload
//! META body: round u32, object_len u64, seg_size u16, sha256 [32]
//! ACK  body: round u32, cum u32, window_end u32, ack_delay_us u32, bitmap_len u16,
//!            bitmap (bit i of byte i/8, LSB first: seq cum+1+i received)
//! NACK body: count u16, seq u32 x count
//! trailer : crc32c u32 over everything before it; then, if AUTH, HMAC-SHA256(psk,
//!           everything before the tag) truncated to 16 bytes.
//! ```
//!
//! Parsers never panic, never trust a length field beyond the bytes present and never
//! allocate: payload and bitmap are borrowed from the input.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 8;
pub const CRC_LEN: usize = 4;
pub const TAG_LEN: usize = 16;
/// Largest segment payload accepted; bounds every buffer a receiver sizes from the wire.
pub const MAX_SEGMENT: usize = 9000;
/// Largest ACK bitmap (bytes): 1024 segments beyond the cumulative point.
pub const MAX_BITMAP: usize = 128;
/// Largest number of sequence numbers in one NACK.
pub const MAX_NACK: usize = 256;
pub const DATA_BODY: usize = 4 + 4 + 8 + 2 + 2 + 2 + 2;
pub const META_BODY: usize = 4 + 8 + 2 + 32;
pub const ACK_BODY: usize = 4 + 4 + 4 + 4 + 2;
/// Bytes an IPv4 + UDP header adds on the wire (used by the simulator and floors).
pub const IP_UDP_OVERHEAD: usize = 28;

pub const FLAG_AUTH: u8 = 0x01;
/// DATA: last segment of its round (the receiver ACKs at once).
pub const FLAG_LAST: u8 = 0x02;
/// ACK: triggered by the round's last segment, so it is a valid RTT sample.
pub const FLAG_RTT_SAMPLE: u8 = 0x02;
/// ACK: the receiver holds META (object length and hash).
pub const FLAG_HAVE_META: u8 = 0x04;
/// ACK: the receiver has the whole object and checked its SHA-256.
pub const FLAG_COMPLETE: u8 = 0x08;
/// ACK: with COMPLETE, the SHA-256 matched.
pub const FLAG_INTACT: u8 = 0x10;
/// ACK: sent when the round's tail was overdue (its last segment was lost); the RTT
/// it gives is a lower bound, used only before the first full sample.
pub const FLAG_PARTIAL_SAMPLE: u8 = 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Data = 1,
    Meta = 2,
    Ack = 3,
    Nack = 4,
}

#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    #[error("packet too short ({0} bytes)")]
    TooShort(usize),
    #[error("unsupported version {0} (this build speaks version {VERSION})")]
    Version(u8),
    #[error("unknown packet kind {0}")]
    Kind(u8),
    #[error("CRC32C mismatch")]
    Checksum,
    #[error("HMAC tag missing: this endpoint requires pre-shared-key authentication")]
    Unauthenticated,
    #[error("HMAC tag present but no pre-shared key is configured")]
    UnexpectedAuth,
    #[error("HMAC tag does not match the pre-shared key")]
    BadTag,
    #[error("length field disagrees with the packet size")]
    Length,
    #[error("field out of range: {0}")]
    Field(&'static str),
}

/// A pre-shared key for per-packet HMAC-SHA256.
#[derive(Clone)]
pub struct Psk(Hmac<Sha256>);

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(..)")
    }
}

impl Psk {
    pub fn new(key: &[u8]) -> Self {
        // HMAC accepts keys of any length; new_from_slice cannot fail for it.
        Self(Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length"))
    }
    fn tag(&self, data: &[u8]) -> [u8; TAG_LEN] {
        let mut mac = self.0.clone();
        mac.update(data);
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(&full[..TAG_LEN]);
        out
    }
    fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.0.clone();
        mac.update(data);
        mac.verify_truncated_left(tag).is_ok()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data<'a> {
    pub round: u32,
    pub seq: u32,
    pub object_len: u64,
    pub seg_size: u16,
    pub idx: u16,
    pub count: u16,
    pub last: bool,
    pub payload: &'a [u8],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub round: u32,
    pub object_len: u64,
    pub seg_size: u16,
    pub sha256: [u8; 32],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack<'a> {
    pub round: u32,
    /// First sequence number not yet received (all below it are).
    pub cum: u32,
    /// Flow control: the sender may send sequence numbers below this.
    pub window_end: u32,
    /// Time the receiver held the ACK after the packet that triggered it.
    pub ack_delay_us: u32,
    pub rtt_sample: bool,
    pub partial_sample: bool,
    pub have_meta: bool,
    pub complete: bool,
    pub intact: bool,
    pub bitmap: &'a [u8],
}

impl Ack<'_> {
    /// Whether the bitmap reports `seq` (> cum) as received.
    pub fn has(&self, seq: u32) -> bool {
        if seq < self.cum {
            return true;
        }
        if seq == self.cum {
            return false;
        }
        let i = (seq - self.cum - 1) as usize;
        self.bitmap
            .get(i / 8)
            .is_some_and(|byte| byte & (1 << (i % 8)) != 0)
    }
}

/// NACK: sequence numbers a multicast-baseline receiver misses (stored big-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nack<'a> {
    raw: &'a [u8],
}

impl<'a> Nack<'a> {
    pub fn len(&self) -> usize {
        self.raw.len() / 4
    }
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.raw
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    Data(Data<'a>),
    Meta(Meta),
    Ack(Ack<'a>),
    Nack(Nack<'a>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    pub session: u32,
    pub body: Body<'a>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Length)?;
        let s = self.buf.get(self.pos..end).ok_or(WireError::Length)?;
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
}

/// Parse and authenticate one datagram.
pub fn decode<'a>(buf: &'a [u8], psk: Option<&Psk>) -> Result<Packet<'a>, WireError> {
    if buf.len() < HEADER_LEN + CRC_LEN {
        return Err(WireError::TooShort(buf.len()));
    }
    if buf[0] != VERSION {
        return Err(WireError::Version(buf[0]));
    }
    let flags = buf[2];
    let authed = flags & FLAG_AUTH != 0;
    let body_end = if authed {
        buf.len()
            .checked_sub(TAG_LEN + CRC_LEN)
            .filter(|&e| e >= HEADER_LEN)
            .ok_or(WireError::TooShort(buf.len()))?
    } else {
        buf.len() - CRC_LEN
    };
    let crc_stored = u32::from_be_bytes([
        buf[body_end],
        buf[body_end + 1],
        buf[body_end + 2],
        buf[body_end + 3],
    ]);
    if crc32c::crc32c(&buf[..body_end]) != crc_stored {
        return Err(WireError::Checksum);
    }
    match (authed, psk) {
        (true, Some(k)) => {
            let signed = body_end + CRC_LEN;
            if !k.verify(&buf[..signed], &buf[signed..]) {
                return Err(WireError::BadTag);
            }
        }
        (true, None) => return Err(WireError::UnexpectedAuth),
        (false, Some(_)) => return Err(WireError::Unauthenticated),
        (false, None) => {}
    }
    if buf[3] != 0 {
        return Err(WireError::Field("reserved byte must be zero"));
    }
    let allowed = FLAG_AUTH
        | match buf[1] {
            1 => FLAG_LAST,
            3 => {
                FLAG_RTT_SAMPLE | FLAG_HAVE_META | FLAG_COMPLETE | FLAG_INTACT | FLAG_PARTIAL_SAMPLE
            }
            _ => 0,
        };
    if flags & !allowed != 0 {
        return Err(WireError::Field("unknown flag bits"));
    }
    let session = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    let mut r = Reader {
        buf: &buf[..body_end],
        pos: HEADER_LEN,
    };
    let body = match buf[1] {
        1 => {
            let round = r.u32()?;
            let seq = r.u32()?;
            let object_len = r.u64()?;
            let seg_size = r.u16()?;
            let idx = r.u16()?;
            let count = r.u16()?;
            let payload_len = r.u16()? as usize;
            let payload = r.take(payload_len)?;
            if seg_size == 0 || seg_size as usize > MAX_SEGMENT {
                return Err(WireError::Field("segment size"));
            }
            if payload_len > seg_size as usize {
                return Err(WireError::Field("payload longer than segment size"));
            }
            if idx >= count {
                return Err(WireError::Field("index within round"));
            }
            Body::Data(Data {
                round,
                seq,
                object_len,
                seg_size,
                idx,
                count,
                last: flags & FLAG_LAST != 0,
                payload,
            })
        }
        2 => {
            let round = r.u32()?;
            let object_len = r.u64()?;
            let seg_size = r.u16()?;
            if seg_size == 0 || seg_size as usize > MAX_SEGMENT {
                return Err(WireError::Field("segment size"));
            }
            let mut sha256 = [0u8; 32];
            sha256.copy_from_slice(r.take(32)?);
            Body::Meta(Meta {
                round,
                object_len,
                seg_size,
                sha256,
            })
        }
        3 => {
            let round = r.u32()?;
            let cum = r.u32()?;
            let window_end = r.u32()?;
            let ack_delay_us = r.u32()?;
            let blen = r.u16()? as usize;
            if blen > MAX_BITMAP {
                return Err(WireError::Field("bitmap length"));
            }
            let bitmap = r.take(blen)?;
            Body::Ack(Ack {
                round,
                cum,
                window_end,
                ack_delay_us,
                rtt_sample: flags & FLAG_RTT_SAMPLE != 0,
                partial_sample: flags & FLAG_PARTIAL_SAMPLE != 0,
                have_meta: flags & FLAG_HAVE_META != 0,
                complete: flags & FLAG_COMPLETE != 0,
                intact: flags & FLAG_INTACT != 0,
                bitmap,
            })
        }
        4 => {
            let n = r.u16()? as usize;
            if n > MAX_NACK {
                return Err(WireError::Field("NACK count"));
            }
            let raw = r.take(n * 4)?;
            Body::Nack(Nack { raw })
        }
        k => return Err(WireError::Kind(k)),
    };
    if r.pos != body_end {
        return Err(WireError::Length);
    }
    Ok(Packet { session, body })
}

/// Appends a packet to a caller-owned buffer (cleared first); reusing the buffer keeps
/// the send path allocation-free once it has grown.
pub struct Encoder<'b> {
    out: &'b mut Vec<u8>,
}

impl<'b> Encoder<'b> {
    fn start(out: &'b mut Vec<u8>, kind: Kind, flags: u8, session: u32) -> Self {
        out.clear();
        out.extend_from_slice(&[VERSION, kind as u8, flags, 0]);
        out.extend_from_slice(&session.to_be_bytes());
        Self { out }
    }
    fn finish(self, psk: Option<&Psk>) -> usize {
        if psk.is_some() {
            self.out[2] |= FLAG_AUTH;
        }
        let crc = crc32c::crc32c(self.out);
        self.out.extend_from_slice(&crc.to_be_bytes());
        if let Some(k) = psk {
            let tag = k.tag(self.out);
            self.out.extend_from_slice(&tag);
        }
        self.out.len()
    }
}

pub fn encode_data(out: &mut Vec<u8>, session: u32, d: &Data<'_>, psk: Option<&Psk>) -> usize {
    let flags = if d.last { FLAG_LAST } else { 0 };
    let e = Encoder::start(out, Kind::Data, flags, session);
    e.out.extend_from_slice(&d.round.to_be_bytes());
    e.out.extend_from_slice(&d.seq.to_be_bytes());
    e.out.extend_from_slice(&d.object_len.to_be_bytes());
    e.out.extend_from_slice(&d.seg_size.to_be_bytes());
    e.out.extend_from_slice(&d.idx.to_be_bytes());
    e.out.extend_from_slice(&d.count.to_be_bytes());
    e.out
        .extend_from_slice(&(d.payload.len() as u16).to_be_bytes());
    e.out.extend_from_slice(d.payload);
    e.finish(psk)
}

pub fn encode_meta(out: &mut Vec<u8>, session: u32, m: &Meta, psk: Option<&Psk>) -> usize {
    let e = Encoder::start(out, Kind::Meta, 0, session);
    e.out.extend_from_slice(&m.round.to_be_bytes());
    e.out.extend_from_slice(&m.object_len.to_be_bytes());
    e.out.extend_from_slice(&m.seg_size.to_be_bytes());
    e.out.extend_from_slice(&m.sha256);
    e.finish(psk)
}

pub fn encode_ack(out: &mut Vec<u8>, session: u32, a: &Ack<'_>, psk: Option<&Psk>) -> usize {
    let mut flags = 0;
    if a.rtt_sample {
        flags |= FLAG_RTT_SAMPLE;
    }
    if a.partial_sample {
        flags |= FLAG_PARTIAL_SAMPLE;
    }
    if a.have_meta {
        flags |= FLAG_HAVE_META;
    }
    if a.complete {
        flags |= FLAG_COMPLETE;
    }
    if a.intact {
        flags |= FLAG_INTACT;
    }
    let bitmap = &a.bitmap[..a.bitmap.len().min(MAX_BITMAP)];
    let e = Encoder::start(out, Kind::Ack, flags, session);
    e.out.extend_from_slice(&a.round.to_be_bytes());
    e.out.extend_from_slice(&a.cum.to_be_bytes());
    e.out.extend_from_slice(&a.window_end.to_be_bytes());
    e.out.extend_from_slice(&a.ack_delay_us.to_be_bytes());
    e.out
        .extend_from_slice(&(bitmap.len() as u16).to_be_bytes());
    e.out.extend_from_slice(bitmap);
    e.finish(psk)
}

/// Encode a NACK; at most [`MAX_NACK`] sequence numbers are taken from `seqs`.
pub fn encode_nack(
    out: &mut Vec<u8>,
    session: u32,
    seqs: impl IntoIterator<Item = u32>,
    psk: Option<&Psk>,
) -> usize {
    let e = Encoder::start(out, Kind::Nack, 0, session);
    let count_at = e.out.len();
    e.out.extend_from_slice(&[0, 0]);
    let mut n: u16 = 0;
    for s in seqs.into_iter().take(MAX_NACK) {
        e.out.extend_from_slice(&s.to_be_bytes());
        n += 1;
    }
    e.out[count_at..count_at + 2].copy_from_slice(&n.to_be_bytes());
    e.finish(psk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> Psk {
        Psk::new(b"correct horse battery staple")
    }

    proptest! {
        #[test]
        fn data_roundtrip(round: u32, seq: u32, object_len: u64, seg in 1u16..2000,
                          count in 1u16..64, idx_raw: u16, last: bool,
                          payload in proptest::collection::vec(any::<u8>(), 0..2000),
                          session: u32, authed: bool) {
            let payload = &payload[..payload.len().min(seg as usize)];
            let d = Data { round, seq, object_len, seg_size: seg, idx: idx_raw % count, count, last, payload };
            let k = key();
            let psk = authed.then_some(&k);
            let mut buf = Vec::new();
            let n = encode_data(&mut buf, session, &d, psk);
            prop_assert_eq!(n, buf.len());
            let p = decode(&buf, psk).unwrap();
            prop_assert_eq!(p, Packet { session, body: Body::Data(d) });
        }

        #[test]
        fn ack_roundtrip(round: u32, cum: u32, window_end: u32, delay: u32, flags in 0u8..32,
                         bitmap in proptest::collection::vec(any::<u8>(), 0..MAX_BITMAP),
                         session: u32, authed: bool) {
            let a = Ack { round, cum, window_end, ack_delay_us: delay,
                rtt_sample: flags & 1 != 0, have_meta: flags & 2 != 0,
                complete: flags & 4 != 0, intact: flags & 8 != 0,
                partial_sample: flags & 16 != 0, bitmap: &bitmap };
            let k = key();
            let psk = authed.then_some(&k);
            let mut buf = Vec::new();
            encode_ack(&mut buf, session, &a, psk);
            prop_assert_eq!(decode(&buf, psk).unwrap(), Packet { session, body: Body::Ack(a) });
        }

        #[test]
        fn meta_and_nack_roundtrip(round: u32, object_len: u64, seg in 1u16..9000, sha: [u8; 32],
                                   seqs in proptest::collection::vec(any::<u32>(), 0..MAX_NACK)) {
            let m = Meta { round, object_len, seg_size: seg, sha256: sha };
            let mut buf = Vec::new();
            encode_meta(&mut buf, 7, &m, None);
            prop_assert_eq!(decode(&buf, None).unwrap().body, Body::Meta(m));
            encode_nack(&mut buf, 7, seqs.iter().copied(), None);
            match decode(&buf, None).unwrap().body {
                Body::Nack(n) => prop_assert_eq!(n.iter().collect::<Vec<_>>(), seqs),
                other => prop_assert!(false, "wrong kind {:?}", other),
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes, None);
            let _ = decode(&bytes, Some(&key()));
        }
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let payload = [0xA5u8; 64];
        let d = Data {
            round: 3,
            seq: 9,
            object_len: 1000,
            seg_size: 64,
            idx: 1,
            count: 5,
            last: false,
            payload: &payload,
        };
        let mut buf = Vec::new();
        encode_data(&mut buf, 42, &d, None);
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&bad, None).is_err(), "flip of bit {bit} accepted");
        }
    }

    #[test]
    fn forged_or_unsigned_packets_fail_authentication() {
        let k = key();
        let other = Psk::new(b"attacker");
        let a = Ack {
            round: 1,
            cum: 2,
            window_end: 100,
            ack_delay_us: 0,
            rtt_sample: true,
            partial_sample: false,
            have_meta: true,
            complete: false,
            intact: false,
            bitmap: &[0b101],
        };
        let mut buf = Vec::new();
        encode_ack(&mut buf, 1, &a, Some(&other));
        assert_eq!(decode(&buf, Some(&k)), Err(WireError::BadTag));
        encode_ack(&mut buf, 1, &a, None);
        assert_eq!(decode(&buf, Some(&k)), Err(WireError::Unauthenticated));
        encode_ack(&mut buf, 1, &a, Some(&k));
        assert_eq!(decode(&buf, None), Err(WireError::UnexpectedAuth));
        assert!(decode(&buf, Some(&k)).is_ok());
        let p = decode(&buf, Some(&k)).unwrap();
        if let Body::Ack(ack) = p.body {
            assert!(ack.has(1) && !ack.has(2) && ack.has(3) && !ack.has(4) && ack.has(5));
        } else {
            panic!("not an ack");
        }
    }

    #[test]
    fn length_lies_are_rejected() {
        let payload = [1u8; 10];
        let d = Data {
            round: 0,
            seq: 0,
            object_len: 10,
            seg_size: 10,
            idx: 0,
            count: 1,
            last: true,
            payload: &payload,
        };
        let mut buf = Vec::new();
        encode_data(&mut buf, 1, &d, None);
        // Claim a longer payload than present, then fix the CRC so only the length lies.
        let at = HEADER_LEN + DATA_BODY - 2;
        buf[at..at + 2].copy_from_slice(&200u16.to_be_bytes());
        let end = buf.len() - CRC_LEN;
        let crc = crc32c::crc32c(&buf[..end]);
        buf[end..].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(decode(&buf, None), Err(WireError::Length));
        buf[0] = 2;
        assert_eq!(decode(&buf, None), Err(WireError::Version(2)));
    }
}
