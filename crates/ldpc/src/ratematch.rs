//! Rate matching for any redundancy version and any length (TS 38.212 §5.4.2.1).
//!
//! The circular buffer is the codeword without its first `2*Zc` (always punctured)
//! systematic bits: `d_j = c_{2Zc + j}`, `j < Ncb = N` (66*Zc for BG1, 50*Zc for BG2;
//! limited-buffer rate matching, `Ncb < N`, is not supported). Filler bits are `<NULL>`
//! in it. Bit selection starts at `k0` (Table 5.4.2.1-2, per redundancy version and base
//! graph) and reads the buffer circularly, skipping fillers, until `E` bits are taken;
//! `E` beyond the buffer repeats it (repetition).
//!
//! The receiver side ([`RateMatch::combine`]) adds the LLRs of repeated bits and leaves
//! untransmitted ones at 0, giving the [`Decoder`](crate::Decoder) of
//! [`RateMatch::code_params`] its input. For `rv = 0` and `E <= N - fillers` this is
//! exactly [`Encoder::encode`](crate::Encoder::encode)'s output order.

use crate::encoder::check_bits;
use crate::encoder::check_len;
use crate::{BaseGraph, CodeParams, LdpcError};

/// Largest rate-matched length accepted: 64 times the longest circular buffer (BG1,
/// Zc = 384). Far beyond any NR allocation; it bounds the index table.
pub const MAX_RATE_MATCHED_BITS: usize = 64 * 66 * 384;

/// Starting position `k0` of redundancy version `rv` in a circular buffer of `ncb` bits
/// (TS 38.212 Table 5.4.2.1-2): BG1 `floor(a * Ncb / (66 Zc)) * Zc` with
/// `a = 0, 17, 33, 56`; BG2 `floor(a * Ncb / (50 Zc)) * Zc` with `a = 0, 13, 25, 43`.
pub fn k0(bg: BaseGraph, zc: usize, ncb: usize, rv: u8) -> Result<usize, LdpcError> {
    let (a, d) = match (bg, rv) {
        (_, 0) => return Ok(0),
        (BaseGraph::Bg1, 1) => (17, 66),
        (BaseGraph::Bg1, 2) => (33, 66),
        (BaseGraph::Bg1, 3) => (56, 66),
        (BaseGraph::Bg2, 1) => (13, 50),
        (BaseGraph::Bg2, 2) => (25, 50),
        (BaseGraph::Bg2, 3) => (43, 50),
        (_, rv) => return Err(LdpcError::InvalidRv(rv)),
    };
    Ok(a * ncb / (d * zc) * zc)
}

/// Rate matching of one code block: base graph, Zc, K' payload bits, redundancy version
/// and rate-matched length E (any E >= 1 up to [`MAX_RATE_MATCHED_BITS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateMatch {
    code: CodeParams,
    rv: u8,
    k0: usize,
    /// For each transmitted bit, its index in the decoder's input (the non-filler
    /// circular-buffer positions in order).
    index: Vec<u32>,
}

impl RateMatch {
    pub fn new(
        bg: BaseGraph,
        zc: usize,
        payload_bits: usize,
        rv: u8,
        tx_bits: usize,
    ) -> Result<Self, LdpcError> {
        // Validates Zc and K' (with the smallest E that is always allowed).
        let full = CodeParams::new(
            bg,
            zc,
            payload_bits,
            payload_bits.saturating_sub(2 * zc).max(1),
        )?;
        let ncb = full.n();
        let k0 = k0(bg, zc, ncb, rv)?;
        if tx_bits == 0 || tx_bits > MAX_RATE_MATCHED_BITS {
            return Err(LdpcError::RateMatchedLength {
                tx_bits,
                max: MAX_RATE_MATCHED_BITS,
            });
        }
        // Fillers in the buffer: codeword positions [max(K', 2Zc), K).
        let two_z = 2 * zc;
        let fill_start = payload_bits.max(two_z) - two_z;
        let fill_end = full.k() - two_z;
        let fillers = fill_end - fill_start;
        let mut index = Vec::with_capacity(tx_bits);
        let mut j = k0;
        while index.len() < tx_bits {
            if !(fill_start..fill_end).contains(&j) {
                let i = if j < fill_start { j } else { j - fillers };
                index.push(i as u32);
            }
            j += 1;
            if j == ncb {
                j = 0;
            }
        }
        // The decoder reads every non-filler buffer position up to the last one sent.
        let used = index.iter().map(|&i| i as usize + 1).max().unwrap_or(1);
        let code = CodeParams::new(bg, zc, payload_bits, used)?;
        Ok(RateMatch {
            code,
            rv,
            k0,
            index,
        })
    }

    /// The code whose [`Decoder`](crate::Decoder) takes [`RateMatch::combine`]'s output
    /// (and whose [`Encoder`](crate::Encoder) gives [`RateMatch::select`]'s input).
    pub fn code_params(&self) -> CodeParams {
        self.code
    }

    pub fn rv(&self) -> u8 {
        self.rv
    }

    /// Start of bit selection in the circular buffer.
    pub fn k0(&self) -> usize {
        self.k0
    }

    /// E, the rate-matched length.
    pub fn tx_bits(&self) -> usize {
        self.index.len()
    }

    /// Code rate K'/E.
    pub fn rate(&self) -> f64 {
        self.code.payload_bits as f64 / self.tx_bits() as f64
    }

    /// Codeword position of decoder input index `i`.
    fn position(&self, i: usize) -> usize {
        let p = &self.code;
        let two_z = 2 * p.zc;
        let fill_start = p.payload_bits.max(two_z);
        let pos = two_z + i;
        if pos < fill_start {
            pos
        } else {
            pos + (p.k() - fill_start)
        }
    }

    /// Bit selection: `full` is the whole codeword ([`Encoder::encode_full`](
    /// crate::Encoder::encode_full), 68*Zc or 52*Zc bits), `out` the E bits sent.
    pub fn select(&self, full: &[u8], out: &mut [u8]) -> Result<(), LdpcError> {
        check_len("full codeword", self.code.full_len(), full.len())?;
        check_len("rate-matched output", self.tx_bits(), out.len())?;
        check_bits("full codeword", full)?;
        for (o, &i) in out.iter_mut().zip(&self.index) {
            *o = full[self.position(i as usize)];
        }
        Ok(())
    }

    /// De-rate-matching: the E received LLRs into the decoder's input
    /// (`code_params().tx_bits` values): repeated bits add up, bits not sent are 0.
    /// NaN is rejected; a bit received as both +inf and -inf becomes 0 (erased).
    pub fn combine(&self, llr: &[f32], out: &mut [f32]) -> Result<(), LdpcError> {
        check_len("rate-matched LLRs", self.tx_bits(), llr.len())?;
        check_len("decoder input", self.code.tx_bits, out.len())?;
        if let Some(index) = llr.iter().position(|x| x.is_nan()) {
            return Err(LdpcError::NanLlr { index });
        }
        out.fill(0.0);
        for (&x, &i) in llr.iter().zip(&self.index) {
            out[i as usize] += x;
        }
        for v in out.iter_mut().filter(|v| v.is_nan()) {
            *v = 0.0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k0_matches_table_5_4_2_1_2_with_full_buffer() {
        // Ncb = N: BG1 66 Zc -> 17, 33, 56 Zc; BG2 50 Zc -> 13, 25, 43 Zc.
        let zc = 384;
        let bg1: Vec<usize> = (0..4)
            .map(|rv| k0(BaseGraph::Bg1, zc, 66 * zc, rv).unwrap())
            .collect();
        assert_eq!(bg1, [0, 6528, 12672, 21504]);
        let zc = 52;
        let bg2: Vec<usize> = (0..4)
            .map(|rv| k0(BaseGraph::Bg2, zc, 50 * zc, rv).unwrap())
            .collect();
        assert_eq!(bg2, [0, 676, 1300, 2236]);
        // A shorter buffer (LBRM-style Ncb) floors to whole Zc: BG1 Zc=8, Ncb=400:
        // floor(17*400/528)=12 -> 96; floor(33*400/528)=25 -> 200; floor(56*400/528)=42 -> 336.
        let short: Vec<usize> = (1..4)
            .map(|rv| k0(BaseGraph::Bg1, 8, 400, rv).unwrap())
            .collect();
        assert_eq!(short, [96, 200, 336]);
        assert_eq!(k0(BaseGraph::Bg1, 8, 528, 4), Err(LdpcError::InvalidRv(4)));
    }
}
