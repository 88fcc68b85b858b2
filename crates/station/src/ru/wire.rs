//! Fronthaul packet: 20-byte header + `samples` ci16 (little-endian I then Q).
//!
//! ```text
//! 0      2       3        4     6        14      16       18       20
//! | magic | version | flags | ru | frame | symbol | antenna | samples | payload ...
//! ```
//! The parser checks magic, version, and that the payload is exactly `samples * 4`
//! bytes: it never trusts the length field beyond comparing it, never allocates, and
//! never panics.

use radiohost_iq::Ci16;

/// "RH" in ASCII.
pub const MAGIC: u16 = 0x5248;
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 20;
/// Largest payload a loopback UDP datagram carries (65507 bytes).
pub const MAX_SAMPLES: usize = (65_507 - HEADER_LEN) / 4;

/// Typed header of one fronthaul packet: one symbol of one antenna.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FronthaulHeader {
    pub ru: u16,
    pub frame: u64,
    pub symbol: u16,
    pub antenna: u16,
    pub samples: u16,
}

/// Why bytes are not a fronthaul packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("fronthaul packet of {len} bytes is shorter than the {HEADER_LEN}-byte header")]
    Truncated { len: usize },
    #[error("not a fronthaul packet (magic {found:#06x}, expected {MAGIC:#06x})")]
    Magic { found: u16 },
    #[error("fronthaul version {found} is not supported (this build speaks {VERSION})")]
    Version { found: u8 },
    #[error("fronthaul header declares {declared} samples ({} bytes) but {actual} payload bytes follow", *declared as usize * 4)]
    Length { declared: u16, actual: usize },
    #[error("packet buffer of {have} bytes cannot hold {need}")]
    BufferTooSmall { need: usize, have: usize },
    #[error("{samples} samples do not fit one packet (at most {MAX_SAMPLES})")]
    TooManySamples { samples: usize },
}

impl FronthaulHeader {
    /// Bytes of a packet with this header.
    pub fn packet_len(&self) -> usize {
        HEADER_LEN + self.samples as usize * 4
    }
}

/// Write a packet of `samples` with header `h` (its `samples` field is set from the
/// slice) into `out`; returns the packet length.
///
/// # Errors
/// Too many samples, or `out` too small.
pub fn encode(h: &FronthaulHeader, samples: &[Ci16], out: &mut [u8]) -> Result<usize, WireError> {
    if samples.len() > MAX_SAMPLES {
        return Err(WireError::TooManySamples {
            samples: samples.len(),
        });
    }
    let need = HEADER_LEN + samples.len() * 4;
    if out.len() < need {
        return Err(WireError::BufferTooSmall {
            need,
            have: out.len(),
        });
    }
    let h = FronthaulHeader {
        samples: samples.len() as u16,
        ..*h
    };
    write_header(&h, out);
    write_samples(samples, &mut out[HEADER_LEN..need]);
    Ok(need)
}

/// Write the header alone into `out` (its `samples` field as given): the packet's
/// samples travel apart (see `transport::SharedSamples`).
///
/// # Errors
/// `out` shorter than [`HEADER_LEN`].
pub fn encode_header(h: &FronthaulHeader, out: &mut [u8]) -> Result<usize, WireError> {
    if out.len() < HEADER_LEN {
        return Err(WireError::BufferTooSmall {
            need: HEADER_LEN,
            have: out.len(),
        });
    }
    write_header(h, out);
    Ok(HEADER_LEN)
}

/// `out` holds at least [`HEADER_LEN`] bytes.
fn write_header(h: &FronthaulHeader, out: &mut [u8]) {
    out[0..2].copy_from_slice(&MAGIC.to_be_bytes());
    out[2] = VERSION;
    out[3] = 0;
    out[4..6].copy_from_slice(&h.ru.to_le_bytes());
    out[6..14].copy_from_slice(&h.frame.to_le_bytes());
    out[14..16].copy_from_slice(&h.symbol.to_le_bytes());
    out[16..18].copy_from_slice(&h.antenna.to_le_bytes());
    out[18..20].copy_from_slice(&h.samples.to_le_bytes());
}

/// A packet's payload as its transport delivered it: wire bytes behind the header, or
/// the samples a ring sender shared instead of copying them (`transport::SharedSamples`).
#[derive(Clone, Copy, Debug)]
pub enum Payload<'a> {
    Bytes(&'a [u8]),
    Samples(&'a [Ci16]),
}

impl Payload<'_> {
    /// Wire bytes the payload stands for (4 per sample).
    pub fn byte_len(&self) -> usize {
        match self {
            Payload::Bytes(b) => b.len(),
            Payload::Samples(s) => s.len() * 4,
        }
    }

    /// Decode into `out` (as many samples as both hold); see [`read_samples`].
    pub fn read_into(&self, out: &mut [Ci16]) -> usize {
        match self {
            Payload::Bytes(b) => read_samples(b, out),
            Payload::Samples(s) => {
                let n = s.len().min(out.len());
                out[..n].copy_from_slice(&s[..n]);
                n
            }
        }
    }
}

/// Parse a packet into its header and payload bytes (`samples * 4` of them).
///
/// # Errors
/// See [`WireError`].
pub fn parse(buf: &[u8]) -> Result<(FronthaulHeader, &[u8]), WireError> {
    let head = buf.get(..HEADER_LEN).unwrap_or(buf);
    let payload = buf.get(HEADER_LEN..).unwrap_or_default();
    parse_parts(head, Payload::Bytes(payload)).map(|h| (h, payload))
}

/// Parse the header at the start of `head` (bytes after [`HEADER_LEN`] are ignored),
/// whose payload arrived as `payload`, with the checks of [`parse`].
///
/// # Errors
/// See [`WireError`].
pub fn parse_parts(head: &[u8], payload: Payload<'_>) -> Result<FronthaulHeader, WireError> {
    let Some(head) = head.first_chunk::<HEADER_LEN>() else {
        return Err(WireError::Truncated { len: head.len() });
    };
    let u16_at = |i: usize| u16::from_le_bytes([head[i], head[i + 1]]);
    let magic = u16::from_be_bytes([head[0], head[1]]);
    if magic != MAGIC {
        return Err(WireError::Magic { found: magic });
    }
    if head[2] != VERSION {
        return Err(WireError::Version { found: head[2] });
    }
    let mut frame = [0u8; 8];
    frame.copy_from_slice(&head[6..14]);
    let h = FronthaulHeader {
        ru: u16_at(4),
        frame: u64::from_le_bytes(frame),
        symbol: u16_at(14),
        antenna: u16_at(16),
        samples: u16_at(18),
    };
    if payload.byte_len() != h.samples as usize * 4 {
        return Err(WireError::Length {
            declared: h.samples,
            actual: payload.byte_len(),
        });
    }
    Ok(h)
}

/// Samples as wire bytes (`out` is exactly `samples.len() * 4` long). On a
/// little-endian machine `Ci16`'s memory layout (`repr(C)`, I then Q) is the wire
/// format, so this is one copy (the radio unit sends ~0.4 MB per 16x4 frame).
fn write_samples(samples: &[Ci16], out: &mut [u8]) {
    if cfg!(target_endian = "little") {
        out.copy_from_slice(bytemuck::cast_slice(samples));
    } else {
        write_samples_portable(samples, out);
    }
}

/// [`write_samples`] on any byte order (the big-endian path; tested everywhere).
fn write_samples_portable(samples: &[Ci16], out: &mut [u8]) {
    for (c, s) in out.chunks_exact_mut(4).zip(samples) {
        c[0..2].copy_from_slice(&s.re.to_le_bytes());
        c[2..4].copy_from_slice(&s.im.to_le_bytes());
    }
}

/// Decode a parsed payload into `out` (as many samples as both hold). A copy on a
/// little-endian machine (see [`write_samples`]); the payload need not be aligned.
pub fn read_samples(payload: &[u8], out: &mut [Ci16]) -> usize {
    let n = (payload.len() / 4).min(out.len());
    if cfg!(target_endian = "little") {
        bytemuck::cast_slice_mut::<Ci16, u8>(&mut out[..n]).copy_from_slice(&payload[..n * 4]);
    } else {
        read_samples_portable(payload, out);
    }
    n
}

/// [`read_samples`] on any byte order (the big-endian path; tested everywhere).
fn read_samples_portable(payload: &[u8], out: &mut [Ci16]) {
    for (c, o) in payload.chunks_exact(4).zip(out.iter_mut()) {
        *o = Ci16::new(
            i16::from_le_bytes([c[0], c[1]]),
            i16::from_le_bytes([c[2], c[3]]),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn encode_then_parse_is_identity(
            ru in any::<u16>(), frame in any::<u64>(), symbol in any::<u16>(), antenna in any::<u16>(),
            samples in proptest::collection::vec((any::<i16>(), any::<i16>()), 0..300),
        ) {
            let s: Vec<Ci16> = samples.iter().map(|&(a, b)| Ci16::new(a, b)).collect();
            let h = FronthaulHeader { ru, frame, symbol, antenna, samples: s.len() as u16 };
            let mut buf = vec![0u8; h.packet_len()];
            let n = encode(&h, &s, &mut buf).unwrap();
            prop_assert_eq!(n, buf.len());
            let (back, payload) = parse(&buf).unwrap();
            prop_assert_eq!(back, h);
            let mut out = vec![Ci16::default(); s.len()];
            prop_assert_eq!(read_samples(payload, &mut out), s.len());
            prop_assert_eq!(out, s);
        }

        #[test]
        fn the_copy_and_the_portable_path_agree(
            samples in proptest::collection::vec((any::<i16>(), any::<i16>()), 0..300),
            extra in 0usize..3,
        ) {
            let s: Vec<Ci16> = samples.iter().map(|&(a, b)| Ci16::new(a, b)).collect();
            let (mut fast, mut portable) = (vec![0u8; s.len() * 4], vec![0u8; s.len() * 4]);
            write_samples(&s, &mut fast);
            write_samples_portable(&s, &mut portable);
            prop_assert_eq!(&fast, &portable);
            // An unaligned payload, and an output longer than the payload.
            let mut shifted = vec![0u8; 1];
            shifted.extend_from_slice(&fast);
            let (mut a, mut b) = (vec![Ci16::default(); s.len() + extra], vec![Ci16::default(); s.len() + extra]);
            prop_assert_eq!(read_samples(&shifted[1..], &mut a), s.len());
            read_samples_portable(&shifted[1..], &mut b);
            prop_assert_eq!(&a[..s.len()], &s[..]);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn a_header_with_its_samples_apart_parses_as_the_whole_packet() {
        let s = [Ci16::new(1, -2), Ci16::new(-3, 4)];
        let h = FronthaulHeader {
            ru: 7,
            frame: 1 << 40,
            symbol: 5,
            antenna: 6,
            samples: 2,
        };
        let mut whole = vec![0u8; h.packet_len()];
        encode(&h, &s, &mut whole).unwrap();
        let mut head = [0u8; HEADER_LEN];
        assert_eq!(encode_header(&h, &mut head), Ok(HEADER_LEN));
        assert_eq!(&head[..], &whole[..HEADER_LEN]);
        assert_eq!(parse_parts(&head, Payload::Samples(&s)), Ok(h));
        assert_eq!(
            parse_parts(&head, Payload::Samples(&s[..1])),
            Err(WireError::Length {
                declared: 2,
                actual: 4
            })
        );
        assert_eq!(
            parse_parts(&head[..19], Payload::Samples(&s)),
            Err(WireError::Truncated { len: 19 })
        );
        assert!(matches!(
            encode_header(&h, &mut [0u8; 19]),
            Err(WireError::BufferTooSmall { .. })
        ));
        let mut out = [Ci16::default(); 3];
        assert_eq!(Payload::Samples(&s).read_into(&mut out), 2);
        assert_eq!(&out[..2], &s);
    }

    #[test]
    fn malformed_packets_are_typed_errors() {
        let h = FronthaulHeader {
            ru: 1,
            frame: 2,
            symbol: 3,
            antenna: 4,
            samples: 2,
        };
        let mut buf = vec![0u8; h.packet_len()];
        encode(&h, &[Ci16::new(1, 2), Ci16::new(3, 4)], &mut buf).unwrap();
        assert_eq!(parse(&buf[..10]), Err(WireError::Truncated { len: 10 }));
        assert_eq!(
            parse(&buf[..buf.len() - 1]).unwrap_err(),
            WireError::Length {
                declared: 2,
                actual: 7
            }
        );
        let mut bad = buf.clone();
        bad[0] = 0;
        assert!(matches!(parse(&bad), Err(WireError::Magic { .. })));
        let mut bad = buf.clone();
        bad[2] = 9;
        assert_eq!(parse(&bad).unwrap_err(), WireError::Version { found: 9 });
        assert!(matches!(
            encode(&h, &[Ci16::default(); 2], &mut [0u8; 10]),
            Err(WireError::BufferTooSmall { .. })
        ));
    }
}
