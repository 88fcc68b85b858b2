//! The codec on files: payload bits as text ('0'/'1') or packed bytes, LLRs as
//! little-endian f32. What `radiohost phy ldpc encode|decode` runs.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use thiserror::Error;

use crate::{
    BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, LdpcError, MinSum, RateMatch, SimdLevel,
};

/// Bit file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitFormat {
    /// ASCII '0'/'1', whitespace ignored.
    Text,
    /// Bytes, most significant bit first; the last byte is zero-padded.
    Packed,
}

impl FromStr for BitFormat {
    type Err = FileError;
    fn from_str(s: &str) -> Result<Self, FileError> {
        match s {
            "text" => Ok(Self::Text),
            "packed" => Ok(Self::Packed),
            other => Err(FileError::Format(other.to_string())),
        }
    }
}

/// Why a file job failed.
#[derive(Debug, Error)]
pub enum FileError {
    #[error("bit format {0:?}: use text or packed")]
    Format(String),
    #[error("base graph {0}: use 1 or 2")]
    BaseGraph(u8),
    #[error("code rate {0}: must be in (0, 1]")]
    Rate(f64),
    #[error("byte {index} is {byte:?}: text bit files hold only '0', '1' and whitespace (use the packed format for binary)")]
    TextByte { index: usize, byte: char },
    #[error("{what} holds {total} bits, not a whole number of {block}-bit blocks")]
    Blocks {
        what: String,
        total: usize,
        block: usize,
    },
    #[error("{path} has {bytes} bytes, not a whole number of f32 LLRs")]
    LlrBytes { path: PathBuf, bytes: usize },
    #[error("{path} holds {llrs} LLRs, not a whole number of E = {block} blocks")]
    LlrBlocks {
        path: PathBuf,
        llrs: usize,
        block: usize,
    },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Code(#[from] LdpcError),
}

/// A code given as the command line gives it: base graph, Zc, either a rate or E, and
/// the redundancy version.
#[derive(Clone, Copy, Debug)]
pub struct CodeSpec {
    pub bg: u8,
    pub zc: usize,
    /// Code rate K'/E (default 1/3 for BG1, 1/5 for BG2); ignored when `tx_bits` is set.
    pub rate: Option<f64>,
    /// Rate-matched length E per block.
    pub tx_bits: Option<usize>,
    /// Payload bits K' per block (default K = 22*Zc or 10*Zc).
    pub payload_bits: Option<usize>,
    /// Redundancy version 0..=3 (TS 38.212 §5.4.2.1).
    pub rv: u8,
}

impl CodeSpec {
    /// The rate matching (and through it the code) this spec names. E may exceed the
    /// circular buffer (repetition).
    pub fn rate_match(&self) -> Result<RateMatch, FileError> {
        let bg = match self.bg {
            1 => BaseGraph::Bg1,
            2 => BaseGraph::Bg2,
            other => return Err(FileError::BaseGraph(other)),
        };
        let payload = self.payload_bits.unwrap_or(bg.systematic_cols() * self.zc);
        let e = match self.tx_bits {
            Some(e) => e,
            None => {
                let r = self
                    .rate
                    .unwrap_or(if bg == BaseGraph::Bg1 { 1.0 / 3.0 } else { 0.2 });
                if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                    return Err(FileError::Rate(r));
                }
                (payload as f64 / r).round() as usize
            }
        };
        Ok(RateMatch::new(bg, self.zc, payload, self.rv, e)?)
    }
}

/// Parse bits from a file's bytes.
pub fn parse_bits(bytes: &[u8], format: BitFormat) -> Result<Vec<u8>, FileError> {
    match format {
        BitFormat::Packed => Ok(bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
            .collect()),
        BitFormat::Text => {
            let mut out = Vec::with_capacity(bytes.len());
            for (index, &c) in bytes.iter().enumerate() {
                match c {
                    b'0' => out.push(0),
                    b'1' => out.push(1),
                    c if c.is_ascii_whitespace() => {}
                    c => {
                        return Err(FileError::TextByte {
                            index,
                            byte: c as char,
                        })
                    }
                }
            }
            Ok(out)
        }
    }
}

/// Format bits for a file.
pub fn format_bits(bits: &[u8], format: BitFormat) -> Vec<u8> {
    match format {
        BitFormat::Text => {
            let mut s: Vec<u8> = bits.iter().map(|&b| b'0' + (b & 1)).collect();
            s.push(b'\n');
            s
        }
        BitFormat::Packed => bits
            .chunks(8)
            .map(|c| {
                c.iter()
                    .enumerate()
                    .fold(0u8, |v, (i, &b)| v | ((b & 1) << (7 - i)))
            })
            .collect(),
    }
}

/// Whole blocks of `block` bits in `total`, allowing the up to 7 padding bits of a
/// packed file.
fn blocks_in(
    total: usize,
    block: usize,
    format: BitFormat,
    what: &Path,
) -> Result<usize, FileError> {
    let n = total / block;
    let slack = if format == BitFormat::Packed { 7 } else { 0 };
    if n == 0 || total - n * block > slack {
        return Err(FileError::Blocks {
            what: what.display().to_string(),
            total,
            block,
        });
    }
    Ok(n)
}

fn read(path: &Path) -> Result<Vec<u8>, FileError> {
    std::fs::read(path).map_err(|source| FileError::Io {
        op: "read",
        path: path.into(),
        source,
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), FileError> {
    std::fs::write(path, bytes).map_err(|source| FileError::Io {
        op: "write",
        path: path.into(),
        source,
    })
}

/// What an encode or decode job did.
#[derive(Clone, Debug)]
pub struct FileReport {
    /// The code (its `tx_bits` is the decoder's input length, see
    /// [`RateMatch::code_params`]).
    pub params: CodeParams,
    /// Redundancy version.
    pub rv: u8,
    /// E, the rate-matched bits per block.
    pub tx_bits: usize,
    pub blocks: usize,
    pub output_bits: usize,
    /// Decode only: blocks whose parity checks were all satisfied.
    pub parity_ok: usize,
    /// Decode only: mean decoder iterations per block.
    pub mean_iterations: f64,
    /// Decode only: the decoder kernel used.
    pub simd: Option<SimdLevel>,
}

/// Encode the payload bits in `input` block by block into `output`.
pub fn encode_file(
    code: &CodeSpec,
    input: &Path,
    output: &Path,
    format: BitFormat,
) -> Result<FileReport, FileError> {
    let rm = code.rate_match()?;
    let p = rm.code_params();
    let e = rm.tx_bits();
    let bits = parse_bits(&read(input)?, format)?;
    let k = p.payload_bits;
    let n = blocks_in(bits.len(), k, format, input)?;
    let mut enc = Encoder::new(p);
    let mut full = vec![0u8; p.full_len()];
    let mut out = vec![0u8; n * e];
    for (blk, o) in bits.chunks_exact(k).take(n).zip(out.chunks_exact_mut(e)) {
        enc.encode_full(blk, &mut full)?;
        rm.select(&full, o)?;
    }
    write(output, &format_bits(&out, format))?;
    Ok(FileReport {
        params: p,
        rv: rm.rv(),
        tx_bits: e,
        blocks: n,
        output_bits: out.len(),
        parity_ok: 0,
        mean_iterations: 0.0,
        simd: None,
    })
}

/// Decoder settings of a file job.
#[derive(Clone, Copy, Debug)]
pub struct DecodeSettings {
    pub iterations: usize,
    /// Normalised min-sum factor alpha (0 < alpha <= 1).
    pub alpha: f32,
    pub early_termination: bool,
}

/// Decode the LLRs (f32 little-endian, positive = bit 0) in `input`, E per block.
pub fn decode_file(
    code: &CodeSpec,
    settings: DecodeSettings,
    input: &Path,
    output: &Path,
    format: BitFormat,
) -> Result<FileReport, FileError> {
    let rm = code.rate_match()?;
    let p = rm.code_params();
    let e = rm.tx_bits();
    let bytes = read(input)?;
    if !bytes.len().is_multiple_of(4) {
        return Err(FileError::LlrBytes {
            path: input.into(),
            bytes: bytes.len(),
        });
    }
    let llrs: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if llrs.is_empty() || !llrs.len().is_multiple_of(e) {
        return Err(FileError::LlrBlocks {
            path: input.into(),
            llrs: llrs.len(),
            block: e,
        });
    }
    let cfg = DecoderConfig {
        max_iterations: settings.iterations,
        min_sum: MinSum::Normalized(settings.alpha),
        early_termination: settings.early_termination,
        simd: SimdLevel::Auto,
    };
    let mut dec = Decoder::try_new(p, cfg)?;
    let n = llrs.len() / e;
    let mut out = vec![0u8; n * p.payload_bits];
    let mut combined = vec![0f32; p.tx_bits];
    let (mut ok, mut iters) = (0, 0);
    for (l, o) in llrs
        .chunks_exact(e)
        .zip(out.chunks_exact_mut(p.payload_bits))
    {
        rm.combine(l, &mut combined)?;
        let r = dec.decode(&combined, o)?;
        ok += r.parity_ok as usize;
        iters += r.iterations;
    }
    write(output, &format_bits(&out, format))?;
    Ok(FileReport {
        params: p,
        rv: rm.rv(),
        tx_bits: e,
        blocks: n,
        output_bits: out.len(),
        parity_ok: ok,
        mean_iterations: iters as f64 / n as f64,
        simd: Some(dec.simd_level()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_formats_roundtrip() {
        let bits: Vec<u8> = (0..21).map(|i| (i % 3 == 0) as u8).collect();
        for f in [BitFormat::Text, BitFormat::Packed] {
            let back = parse_bits(&format_bits(&bits, f), f).unwrap();
            assert_eq!(&back[..21], &bits[..]);
        }
        assert!(parse_bits(b"01x", BitFormat::Text).is_err());
        let f = Path::new("f");
        assert_eq!(blocks_in(24, 8, BitFormat::Text, f).unwrap(), 3);
        assert!(blocks_in(25, 8, BitFormat::Text, f).is_err());
        assert_eq!(blocks_in(21 + 3, 21, BitFormat::Packed, f).unwrap(), 1);
    }

    #[test]
    fn files_encode_then_decode_to_the_payload() {
        let dir = std::env::temp_dir().join(format!("ldpc-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = CodeSpec {
            bg: 2,
            zc: 16,
            rate: None,
            tx_bits: None,
            payload_bits: None,
            rv: 0,
        };
        // Default rate, every redundancy version with E > N (repetition), and shortening.
        let specs = [
            base,
            CodeSpec {
                rv: 2,
                tx_bits: Some(1000),
                ..base
            },
            CodeSpec {
                rv: 3,
                tx_bits: Some(700),
                payload_bits: Some(150),
                ..base
            },
            CodeSpec { rv: 1, ..base },
        ];
        for code in specs {
            let rm = code.rate_match().unwrap();
            let k = rm.code_params().payload_bits;
            let e = rm.tx_bits();
            let bits: Vec<u8> = (0..2 * k).map(|i| (i % 5 == 1) as u8).collect();
            let (src, coded, llr, back) = (
                dir.join("in"),
                dir.join("coded"),
                dir.join("llr"),
                dir.join("out"),
            );
            std::fs::write(&src, format_bits(&bits, BitFormat::Text)).unwrap();
            let r = encode_file(&code, &src, &coded, BitFormat::Text).unwrap();
            assert_eq!((r.blocks, r.output_bits, r.rv), (2, 2 * e, code.rv));
            let cbits = parse_bits(&std::fs::read(&coded).unwrap(), BitFormat::Text).unwrap();
            let llrs: Vec<u8> = cbits
                .iter()
                .flat_map(|&b| if b == 0 { 4.0f32 } else { -4.0 }.to_le_bytes())
                .collect();
            std::fs::write(&llr, llrs).unwrap();
            let s = DecodeSettings {
                iterations: 10,
                alpha: 0.75,
                early_termination: true,
            };
            let r = decode_file(&code, s, &llr, &back, BitFormat::Packed).unwrap();
            assert_eq!(r.parity_ok, 2, "rv {} E {e}", code.rv);
            let got = parse_bits(&std::fs::read(&back).unwrap(), BitFormat::Packed).unwrap();
            assert_eq!(&got[..bits.len()], &bits[..], "rv {} E {e}", code.rv);
        }
        assert!(matches!(
            CodeSpec { bg: 3, ..base }.rate_match(),
            Err(FileError::BaseGraph(3))
        ));
        assert!(matches!(
            CodeSpec { rv: 4, ..base }.rate_match(),
            Err(FileError::Code(LdpcError::InvalidRv(4)))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
