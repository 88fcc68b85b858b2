//! `radiohost phy ldpc encode|decode`: the NR LDPC codec on files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, MinSum, SimdLevel};

#[derive(Subcommand)]
pub enum LdpcCmd {
    /// Encode payload bits block by block (input length: a whole number of K' bits).
    Encode(EncodeArgs),
    /// Decode LLRs (f32 little-endian, positive = bit 0), E per block.
    Decode(DecodeArgs),
}

/// Bit file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BitFormat {
    /// ASCII '0'/'1', whitespace ignored.
    Text,
    /// Bytes, most significant bit first; the last byte is zero-padded.
    Packed,
}

#[derive(Args)]
pub struct CodeArgs {
    /// Base graph, 1 or 2.
    #[arg(long, default_value_t = 1)]
    bg: u8,
    /// Lifting size Zc (one of the 51 NR values, 2..=384).
    #[arg(long)]
    zc: usize,
    /// Code rate K'/E (default 1/3 for BG1, 1/5 for BG2).
    #[arg(long, conflicts_with = "tx_bits")]
    rate: Option<f64>,
    /// Rate-matched length E per block.
    #[arg(long)]
    tx_bits: Option<usize>,
    /// Payload bits K' per block (default K = 22*Zc or 10*Zc; the rest are fillers).
    #[arg(long)]
    payload_bits: Option<usize>,
}

impl CodeArgs {
    fn params(&self) -> Result<CodeParams> {
        let bg = match self.bg {
            1 => BaseGraph::Bg1,
            2 => BaseGraph::Bg2,
            other => bail!("--bg {other}: the base graph is 1 or 2"),
        };
        let k = bg.systematic_cols() * self.zc;
        let payload = self.payload_bits.unwrap_or(k);
        let e = match (self.tx_bits, self.rate) {
            (Some(e), _) => e,
            (None, rate) => {
                let r = rate.unwrap_or(if bg == BaseGraph::Bg1 { 1.0 / 3.0 } else { 0.2 });
                if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                    bail!("--rate {r}: must be in (0, 1]");
                }
                (payload as f64 / r).round() as usize
            }
        };
        CodeParams::new(bg, self.zc, payload, e).context("invalid code parameters")
    }
}

#[derive(Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    code: CodeArgs,
    /// Payload bits file.
    #[arg(long)]
    input: PathBuf,
    /// Output file of E coded bits per block.
    #[arg(long)]
    output: PathBuf,
    #[arg(long, value_enum, default_value_t = BitFormat::Text)]
    format: BitFormat,
}

#[derive(Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    code: CodeArgs,
    /// LLR file (f32 little-endian, positive = bit 0).
    #[arg(long)]
    input: PathBuf,
    /// Output file of K' decoded payload bits per block.
    #[arg(long)]
    output: PathBuf,
    #[arg(long, value_enum, default_value_t = BitFormat::Text)]
    format: BitFormat,
    /// Maximum decoder iterations.
    #[arg(long, default_value_t = 10)]
    iterations: usize,
    /// Normalised min-sum factor alpha (0 < alpha <= 1).
    #[arg(long, default_value_t = 0.75)]
    alpha: f32,
    /// Run all iterations even when the syndrome is zero.
    #[arg(long)]
    no_early_termination: bool,
}

pub fn run(cmd: LdpcCmd) -> Result<()> {
    match cmd {
        LdpcCmd::Encode(a) => encode(a),
        LdpcCmd::Decode(a) => decode(a),
    }
}

/// Parse bits from a file's bytes.
pub fn parse_bits(bytes: &[u8], format: BitFormat) -> Result<Vec<u8>> {
    match format {
        BitFormat::Packed => Ok(bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
            .collect()),
        BitFormat::Text => {
            let mut out = Vec::with_capacity(bytes.len());
            for (i, &c) in bytes.iter().enumerate() {
                match c {
                    b'0' => out.push(0),
                    b'1' => out.push(1),
                    c if c.is_ascii_whitespace() => {}
                    c => bail!("byte {i} is {:?}: text bit files hold only '0', '1' and whitespace (use --format packed for binary)", c as char),
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

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Number of whole blocks of `block` bits in `total`, allowing up to 7 padding bits
/// of a packed file.
fn blocks_in(total: usize, block: usize, format: BitFormat, what: &str) -> Result<usize> {
    let n = total / block;
    let rest = total - n * block;
    let slack = if format == BitFormat::Packed { 7 } else { 0 };
    if n == 0 || rest > slack {
        bail!("{what} holds {total} bits, not a whole number of {block}-bit blocks");
    }
    Ok(n)
}

fn encode(a: EncodeArgs) -> Result<()> {
    let p = a.code.params()?;
    let bits = parse_bits(&read(&a.input)?, a.format)?;
    let k = p.payload_bits;
    let n = blocks_in(bits.len(), k, a.format, &a.input.display().to_string())?;
    let mut enc = Encoder::new(p);
    let mut out = vec![0u8; n * p.tx_bits];
    for (blk, o) in bits
        .chunks_exact(k)
        .take(n)
        .zip(out.chunks_exact_mut(p.tx_bits))
    {
        enc.encode(blk, o)?;
    }
    write(&a.output, &format_bits(&out, a.format))?;
    eprintln!(
        "encoded {n} block(s): {} Zc={} K'={k} E={} (rate {:.4}) -> {} bits",
        p.bg,
        p.zc,
        p.tx_bits,
        p.rate(),
        out.len()
    );
    Ok(())
}

fn decode(a: DecodeArgs) -> Result<()> {
    let p = a.code.params()?;
    let bytes = read(&a.input)?;
    if !bytes.len().is_multiple_of(4) {
        bail!(
            "{} has {} bytes, not a whole number of f32 LLRs",
            a.input.display(),
            bytes.len()
        );
    }
    let llrs: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if llrs.is_empty() || !llrs.len().is_multiple_of(p.tx_bits) {
        bail!(
            "{} holds {} LLRs, not a whole number of E = {} blocks",
            a.input.display(),
            llrs.len(),
            p.tx_bits
        );
    }
    let cfg = DecoderConfig {
        max_iterations: a.iterations,
        min_sum: MinSum::Normalized(a.alpha),
        early_termination: !a.no_early_termination,
        simd: SimdLevel::Auto,
    };
    let mut dec = Decoder::try_new(p, cfg).context("invalid decoder settings")?;
    let n = llrs.len() / p.tx_bits;
    let mut out = vec![0u8; n * p.payload_bits];
    let (mut ok, mut iters) = (0, 0);
    for (l, o) in llrs
        .chunks_exact(p.tx_bits)
        .zip(out.chunks_exact_mut(p.payload_bits))
    {
        let r = dec.decode(l, o)?;
        ok += r.parity_ok as usize;
        iters += r.iterations;
    }
    write(&a.output, &format_bits(&out, a.format))?;
    eprintln!(
        "decoded {n} block(s) ({}, {}): {ok} with every parity check satisfied, {:.2} iterations on average",
        p.bg,
        dec.simd_level(),
        iters as f64 / n as f64
    );
    Ok(())
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
        assert_eq!(blocks_in(24, 8, BitFormat::Text, "f").unwrap(), 3);
        assert!(blocks_in(25, 8, BitFormat::Text, "f").is_err());
        assert_eq!(blocks_in(21 + 3, 21, BitFormat::Packed, "f").unwrap(), 1);
    }
}
