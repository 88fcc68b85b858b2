//! `radiohost phy ldpc encode|decode`: the NR LDPC codec on files
//! (`radiohost_ldpc::files`).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use radiohost_ldpc::files::{decode_file, encode_file, BitFormat, CodeSpec, DecodeSettings};

#[derive(Subcommand)]
pub enum LdpcCmd {
    /// Encode payload bits block by block (input length: a whole number of K' bits).
    Encode(EncodeArgs),
    /// Decode LLRs (f32 little-endian, positive = bit 0), E per block.
    Decode(DecodeArgs),
}

#[derive(Args)]
pub struct CodeArgs {
    /// Base graph, 1 or 2.
    #[arg(long, default_value_t = 1)]
    bg: u8,
    /// Lifting size Zc (one of the 51 NR values, 2..=384).
    #[arg(long, value_parser = crate::ui::count_in::<usize>(2, 384))]
    zc: usize,
    /// Code rate K'/E as a fraction or a decimal, above 0 and at most 1 (e.g. 1/3
    /// or 0.5; default 1/3 for BG1, 1/5 for BG2; lower rates repeat bits).
    #[arg(long, conflicts_with = "tx_bits", value_parser = crate::ui::parse_fraction)]
    rate: Option<f64>,
    /// Rate-matched length E per block (beyond the circular buffer, bits repeat).
    #[arg(long)]
    tx_bits: Option<usize>,
    /// Redundancy version 0..=3: where bit selection starts in the circular buffer
    /// (TS 38.212 Table 5.4.2.1-2).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=3))]
    rv: u8,
    /// Payload bits K' per block (default K = 22*Zc or 10*Zc; the rest are fillers).
    #[arg(long)]
    payload_bits: Option<usize>,
    /// Input file: payload bits (encode) or f32 LLRs (decode).
    #[arg(long)]
    input: PathBuf,
    /// Output file: E coded bits (encode) or K' decoded bits (decode) per block.
    #[arg(long)]
    output: PathBuf,
    /// Bit file format: text ('0'/'1', whitespace ignored) or packed (MSB first).
    #[arg(long, default_value = "text")]
    format: BitFormat,
}

impl CodeArgs {
    fn spec(&self) -> CodeSpec {
        CodeSpec {
            bg: self.bg,
            zc: self.zc,
            rate: self.rate,
            tx_bits: self.tx_bits,
            payload_bits: self.payload_bits,
            rv: self.rv,
        }
    }
}

#[derive(Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    code: CodeArgs,
}

#[derive(Args)]
pub struct DecodeArgs {
    #[command(flatten)]
    code: CodeArgs,
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
        LdpcCmd::Encode(a) => {
            let c = &a.code;
            let r = encode_file(&c.spec(), &c.input, &c.output, c.format)?;
            let p = r.params;
            eprintln!(
                "encoded {} block(s): {} Zc={} K'={} E={} rv={} (rate {:.4}) -> {} bits",
                r.blocks,
                p.bg,
                p.zc,
                p.payload_bits,
                r.tx_bits,
                r.rv,
                p.payload_bits as f64 / r.tx_bits as f64,
                r.output_bits
            );
        }
        LdpcCmd::Decode(a) => {
            let c = &a.code;
            let settings = DecodeSettings {
                iterations: a.iterations,
                alpha: a.alpha,
                early_termination: !a.no_early_termination,
            };
            let r = decode_file(&c.spec(), settings, &c.input, &c.output, c.format)?;
            eprintln!(
                "decoded {} block(s) ({}, E={} rv={}, {}): {} with every parity check satisfied, {:.2} iterations on average",
                r.blocks,
                r.params.bg,
                r.tx_bits,
                r.rv,
                r.simd.map_or("-".into(), |s| s.to_string()),
                r.parity_ok,
                r.mean_iterations
            );
        }
    }
    Ok(())
}
