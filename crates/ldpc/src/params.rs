//! Code parameters: base graph, lifting size, payload (K') and rate-matched length (E).

use crate::{BaseGraph, LdpcError};

/// All 51 lifting sizes Zc of TS 38.212 Table 5.3.2-1, ascending.
pub const LIFTING_SIZES: [usize; 51] = [
    2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 26, 28, 30, 32, 36, 40, 44,
    48, 52, 56, 60, 64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 176, 192, 208, 224, 240, 256,
    288, 320, 352, 384,
];

/// The set index iLS (0..8) of a lifting size: Zc = a * 2^j with a = 2,3,5,7,9,11,13,15
/// for iLS = 0..7 (TS 38.212 Table 5.3.2-1). Errors when `zc` is not a lifting size.
pub fn lifting_set_index(zc: usize) -> Result<usize, LdpcError> {
    if !LIFTING_SIZES.contains(&zc) {
        return Err(LdpcError::InvalidLiftingSize(zc));
    }
    let odd = zc >> zc.trailing_zeros();
    Ok(match odd {
        1 => 0, // Zc = 2^j belongs to the a = 2 set
        3 => 1,
        5 => 2,
        7 => 3,
        9 => 4,
        11 => 5,
        13 => 6,
        15 => 7,
        _ => return Err(LdpcError::InvalidLiftingSize(zc)),
    })
}

/// Parameters of one LDPC code block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeParams {
    pub bg: BaseGraph,
    pub zc: usize,
    /// K' <= K information bits; the K - K' filler bits are known zeros, not transmitted.
    pub payload_bits: usize,
    /// E, the rate-matched length.
    pub tx_bits: usize,
}

impl CodeParams {
    /// payload_bits = K' <= K (K - K' filler bits, known zeros, not transmitted);
    /// tx_bits = E, the rate-matched length: codeword with the first 2*Zc systematic bits
    /// punctured and fillers removed, truncated to E bits (E <= N - fillers).
    pub fn new(
        bg: BaseGraph,
        zc: usize,
        payload_bits: usize,
        tx_bits: usize,
    ) -> Result<Self, LdpcError> {
        lifting_set_index(zc)?;
        let k = bg.systematic_cols() * zc;
        if payload_bits == 0 {
            return Err(LdpcError::EmptyPayload);
        }
        if payload_bits > k {
            return Err(LdpcError::PayloadTooLarge {
                bg,
                zc,
                payload_bits,
                k,
            });
        }
        let fillers = k - payload_bits;
        let n = (bg.cols() - 2) * zc;
        // Fillers inside the punctured first 2*Zc positions take no room.
        let max = n - (k - payload_bits.max(2 * zc));
        // At least the transmitted systematic bits: lower rates than that are fine, a
        // higher one would leave information bits unsent.
        let min = payload_bits.saturating_sub(2 * zc).max(1);
        if tx_bits < min || tx_bits > max {
            return Err(LdpcError::InvalidTxBits {
                bg,
                zc,
                tx_bits,
                fillers,
                min,
                max,
            });
        }
        Ok(CodeParams {
            bg,
            zc,
            payload_bits,
            tx_bits,
        })
    }

    /// Full K payload, E chosen for the code rate K/E (e.g. BG1 rate 1/3 -> E = 66*Zc).
    /// E = round(K / rate); a rate within 0.5 % above the lowest (0.333 for BG1) maps to
    /// E = N.
    pub fn for_rate(bg: BaseGraph, zc: usize, rate: f64) -> Result<Self, LdpcError> {
        lifting_set_index(zc)?;
        if !rate.is_finite() || rate <= 0.0 || rate > 1.0e6 {
            return Err(LdpcError::InvalidRate(rate));
        }
        let k = bg.systematic_cols() * zc;
        let n = ((bg.cols() - 2) * zc) as f64;
        let mut e = (k as f64 / rate).round();
        // A rate written with few digits (0.333 for 1/3) may overshoot N by a hair.
        if e > n && e <= n * 1.005 {
            e = n;
        }
        if e < 1.0 || e > n {
            return Err(LdpcError::InvalidRate(rate));
        }
        Self::new(bg, zc, k, e as usize).map_err(|_| LdpcError::InvalidRate(rate))
    }

    /// K: 22*Zc (BG1) or 10*Zc (BG2).
    pub fn k(&self) -> usize {
        self.bg.systematic_cols() * self.zc
    }

    /// N: 66*Zc (BG1) or 50*Zc (BG2), the codeword length after puncturing 2*Zc.
    pub fn n(&self) -> usize {
        (self.bg.cols() - 2) * self.zc
    }

    /// Number of filler bits K - K'.
    pub fn fillers(&self) -> usize {
        self.k() - self.payload_bits
    }

    /// Length of the full unpunctured codeword: 68*Zc (BG1) or 52*Zc (BG2).
    pub fn full_len(&self) -> usize {
        self.bg.cols() * self.zc
    }

    /// Effective code rate K'/E.
    pub fn rate(&self) -> f64 {
        self.payload_bits as f64 / self.tx_bits as f64
    }

    /// Number of base-graph rows the decoder must process: the 4 core rows plus one per
    /// extension parity block that carries at least one transmitted bit. Rows whose
    /// parity block was not sent carry no information and are skipped.
    pub fn active_rows(&self) -> usize {
        let kb = self.bg.systematic_cols();
        // Codeword positions 2*Zc.. are sent in order, skipping fillers, until E bits.
        let last_pos = 2 * self.zc + self.tx_bits + self.fillers(); // exclusive
        let cols_touched = last_pos.div_ceil(self.zc);
        let parity_cols = cols_touched.saturating_sub(kb);
        parity_cols.clamp(4, self.bg.rows())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifting_sizes_are_a_times_power_of_two_and_indexed() {
        let a = [2, 3, 5, 7, 9, 11, 13, 15];
        let mut all = Vec::new();
        for (ils, &a) in a.iter().enumerate() {
            let mut z = a;
            while z <= 384 {
                all.push(z);
                assert_eq!(lifting_set_index(z).unwrap(), ils, "Zc {z}");
                z *= 2;
            }
        }
        all.sort();
        all.dedup();
        assert_eq!(all.as_slice(), &LIFTING_SIZES[..]);
        assert!(lifting_set_index(17).is_err());
        assert!(lifting_set_index(0).is_err());
        assert!(lifting_set_index(768).is_err());
    }

    #[test]
    fn params_validate_and_rate() {
        let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
        assert_eq!(p.tx_bits, 66 * 384);
        assert_eq!(p.k(), 22 * 384);
        assert_eq!(p.n(), 66 * 384);
        assert_eq!(p.active_rows(), 46);
        let p = CodeParams::for_rate(BaseGraph::Bg2, 10, 1.0 / 5.0).unwrap();
        assert_eq!(p.tx_bits, 500);
        assert_eq!(p.active_rows(), 42);
        assert!(CodeParams::for_rate(BaseGraph::Bg1, 384, 0.2).is_err());
        assert!(CodeParams::for_rate(BaseGraph::Bg1, 384, 0.32).is_err());
        assert_eq!(
            CodeParams::for_rate(BaseGraph::Bg1, 384, 0.333)
                .unwrap()
                .tx_bits,
            66 * 384
        );
        assert!(CodeParams::for_rate(BaseGraph::Bg1, 384, f64::NAN).is_err());
        assert!(CodeParams::new(BaseGraph::Bg1, 17, 10, 10).is_err());
        assert!(CodeParams::new(BaseGraph::Bg2, 8, 81, 200).is_err());
        assert!(CodeParams::new(BaseGraph::Bg2, 8, 80, 50 * 8 + 1).is_err());
        // Fillers lower the maximum E.
        assert!(CodeParams::new(BaseGraph::Bg2, 8, 70, 50 * 8 - 10).is_ok());
        assert!(CodeParams::new(BaseGraph::Bg2, 8, 70, 50 * 8 - 9).is_err());
        // High rate: only the core rows are needed.
        let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 0.95).unwrap();
        assert_eq!(p.active_rows(), 4);
        // 8/9: E = 24.75 Zc reaches into the first extension parity block.
        let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 8.0 / 9.0).unwrap();
        assert_eq!(p.active_rows(), 5);
    }
}
