//! 5G NR LDPC channel coding (3GPP TS 38.212 §5.3.2 and §5.4.2).
//!
//! * Both base graphs, all 51 lifting sizes `Zc` and all 8 shift-value sets (iLS).
//! * [`Encoder`]: systematic encoder exploiting the double-diagonal core parity
//!   structure, on bit-packed words (a byte-per-bit reference is kept); rate matching
//!   by puncturing the first `2*Zc` systematic bits, shortening (filler bits) and
//!   truncation to `E` bits (redundancy version 0).
//! * [`RateMatch`]: bit selection for redundancy versions 0-3 and any `E`, repetition
//!   included (TS 38.212 §5.4.2.1, full circular buffer), and the matching LLR
//!   combining for the decoder.
//! * [`Decoder`]: layered min-sum (normalized or offset) on saturating `i8` LLRs, with
//!   early termination on a zero syndrome. AVX-512 (BW), AVX2 and scalar kernels are
//!   chosen at run time and give bit-identical results.
//!
//! Bits are one per byte (`0`/`1`); LLRs are `ln P(0)/P(1)` (positive means bit 0).
//!
//! ```
//! use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder};
//!
//! let p = CodeParams::for_rate(BaseGraph::Bg2, 52, 1.0 / 3.0)?;
//! let payload: Vec<u8> = (0..p.payload_bits).map(|i| (i % 3 == 0) as u8).collect();
//! let mut tx = vec![0u8; p.tx_bits];
//! Encoder::new(p).encode(&payload, &mut tx)?;
//! // BPSK with a few bits received wrong.
//! let llr: Vec<f32> = tx
//!     .iter()
//!     .enumerate()
//!     .map(|(i, &b)| if (b == 0) != (i % 97 == 0) { 1.5 } else { -1.5 })
//!     .collect();
//! let mut out = vec![0u8; p.payload_bits];
//! let outcome = Decoder::try_new(p, DecoderConfig::default())?.decode(&llr, &mut out)?;
//! assert!(outcome.parity_ok);
//! assert_eq!(out, payload);
//! # Ok::<(), radiohost_ldpc::LdpcError>(())
//! ```

mod decoder;
mod encoder;
pub mod files;
mod graph;
mod packed;
mod params;
mod ratematch;
mod tables;

pub use decoder::{
    single_edge_columns, BatchDecoder, DecodeOutcome, Decoder, DecoderConfig, MinSum, SimdLevel,
    CHANNEL_LLR_MAX, DEFAULT_LLR_SCALE,
};
pub use encoder::Encoder;
pub use graph::parity_check;
pub use packed::pack_bits;
pub use params::{lifting_set_index, CodeParams, LIFTING_SIZES};
pub use ratematch::{k0, RateMatch, MAX_RATE_MATCHED_BITS};

/// The non-zero positions of base graph `bg` as `(row, column, V(i,j) per lifting set
/// iLS 0..7)`, row-major (TS 38.212 Tables 5.3.2-2/3). For other codecs of the same
/// code (e.g. GPU kernels) so they read the very table this crate decodes with.
pub fn base_graph_entries(bg: BaseGraph) -> impl Iterator<Item = (usize, usize, [u16; 8])> {
    graph::table(bg)
        .iter()
        .map(|e| (e.row as usize, e.col as usize, e.shift))
}

/// Which of the two NR base graphs (TS 38.212 Tables 5.3.2-2 and 5.3.2-3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BaseGraph {
    /// 46 x 68, 22 systematic columns: large blocks and high rates.
    Bg1,
    /// 42 x 52, 10 systematic columns: small blocks and low rates.
    Bg2,
}

impl BaseGraph {
    /// Number of base-graph rows (check-node blocks).
    pub const fn rows(self) -> usize {
        match self {
            BaseGraph::Bg1 => 46,
            BaseGraph::Bg2 => 42,
        }
    }
    /// Number of base-graph columns (variable-node blocks), punctured ones included.
    pub const fn cols(self) -> usize {
        match self {
            BaseGraph::Bg1 => 68,
            BaseGraph::Bg2 => 52,
        }
    }
    /// Number of systematic columns `Kb` (the maximum; TS 38.212 allows fewer for BG2
    /// small blocks, which is expressed here through filler bits).
    pub const fn systematic_cols(self) -> usize {
        match self {
            BaseGraph::Bg1 => 22,
            BaseGraph::Bg2 => 10,
        }
    }
}

impl std::fmt::Display for BaseGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BaseGraph::Bg1 => f.write_str("BG1"),
            BaseGraph::Bg2 => f.write_str("BG2"),
        }
    }
}

/// Everything that can be wrong with LDPC parameters or buffers.
#[derive(thiserror::Error, Debug, Clone, PartialEq)]
pub enum LdpcError {
    #[error("lifting size Zc = {0} is not one of the 51 values of TS 38.212 Table 5.3.2-1 (2..=384, a*2^j with a in 2,3,5,7,9,11,13,15)")]
    InvalidLiftingSize(usize),
    #[error("payload of {payload_bits} bits does not fit {bg} with Zc = {zc}: K = {k} is the most (use a larger Zc or split the transport block)")]
    PayloadTooLarge {
        bg: BaseGraph,
        zc: usize,
        payload_bits: usize,
        k: usize,
    },
    #[error("payload must have at least one bit (got 0)")]
    EmptyPayload,
    #[error("{tx_bits} transmitted bits is out of range for {bg} Zc = {zc} with {fillers} filler bits: E must be in {min}..={max} (E >= payload bits minus the 2*Zc punctured ones, E <= N - fillers)")]
    InvalidTxBits {
        bg: BaseGraph,
        zc: usize,
        tx_bits: usize,
        fillers: usize,
        min: usize,
        max: usize,
    },
    #[error("code rate {0} is out of range: it must be finite, > 0 and such that E = K/rate fits the codeword (BG1: >= 1/3, BG2: >= 1/5)")]
    InvalidRate(f64),
    #[error("{what} has {got} elements but {expected} are required")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{what}[{index}] = {value} is not a bit (bits are one per byte, 0 or 1)")]
    NotABit {
        what: &'static str,
        index: usize,
        value: u8,
    },
    #[error("LLR {index} is NaN: demodulator output must be a number (use 0.0 for an erased bit)")]
    NanLlr { index: usize },
    #[error("redundancy version {0} does not exist: use 0, 1, 2 or 3")]
    InvalidRv(u8),
    #[error("rate-matched length E = {tx_bits} is out of range: use 1..={max} bits")]
    RateMatchedLength { tx_bits: usize, max: usize },
    #[error("max_iterations must be at least 1 (got 0)")]
    ZeroIterations,
    #[error("min-sum parameter {0} is invalid: Normalized(alpha) needs 0 < alpha <= 1, Offset(beta) needs 0 <= beta < 16 (LLR units)")]
    InvalidMinSum(f32),
    #[error("LLR scale {0} is invalid: it must be finite and > 0 (quanta per LLR unit)")]
    InvalidLlrScale(f32),
}
