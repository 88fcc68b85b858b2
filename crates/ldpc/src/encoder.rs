//! Systematic encoder (TS 38.212 §5.3.2) and rate matching (§5.4.2, rv = 0).
//!
//! The parity part of H is [core | 0; extension | I]: the four core parity blocks have the
//! double-diagonal structure, so summing the four core rows cancels all but one shifted
//! copy of the first parity block, which gives it directly; the other three follow by
//! back-substitution, and every extension parity block is one row sum.

use crate::graph::{xor_rotated, Graph};
use crate::packed::{Packed, PackedStep};
use crate::{CodeParams, LdpcError};

/// How to obtain one parity block: `p[(i + shift) % Zc] = acc[i]` after accumulating the
/// listed row's known blocks (or the sum of the four core rows).
#[derive(Clone, Debug)]
struct Step {
    /// Rows whose known blocks are summed into the accumulator.
    rows: Vec<usize>,
    /// Parity column solved for, and its (net) shift in the summed rows.
    col: usize,
    shift: usize,
}

/// LDPC encoder for one set of code parameters; reusable, allocation-free per call.
/// [`Encoder::encode`] works on bit-packed words; [`Encoder::encode_full`] is the
/// byte-per-bit reference (same plan, tested equal).
pub struct Encoder {
    p: CodeParams,
    graph: Graph,
    steps: Vec<Step>,
    packed: Packed,
    acc: Vec<u8>,
}

/// Plans the solve order of the parity blocks from the graph itself, so that both base
/// graphs and every shift set are handled by the same code (and checked by the tests).
fn plan(graph: &Graph) -> Vec<Step> {
    let kb = graph.bg.systematic_cols();
    let zc = graph.zc;
    let mut steps = Vec::new();
    // Net shift of each core parity column in the sum of rows 0..4: equal shifts cancel
    // in pairs over GF(2).
    let mut first = None;
    for col in kb..kb + 4 {
        let mut odd: Vec<usize> = Vec::new();
        for r in 0..4 {
            for b in graph.row(r).iter().filter(|b| b.col == col) {
                if let Some(i) = odd.iter().position(|&s| s == b.shift) {
                    odd.swap_remove(i);
                } else {
                    odd.push(b.shift);
                }
            }
        }
        if odd.len() == 1 && first.is_none() {
            first = Some((col, odd[0]));
        }
    }
    let (col0, shift0) =
        first.expect("TS 38.212 core parity is double-diagonal (tested for every Zc)");
    steps.push(Step {
        rows: vec![0, 1, 2, 3],
        col: col0,
        shift: shift0,
    });
    let mut known: Vec<bool> = (0..graph.bg.cols()).map(|c| c < kb || c == col0).collect();
    // Back-substitution: repeatedly take a core row with exactly one unknown block.
    while steps.len() < 4 {
        let next = (0..4).find_map(|r| {
            let unknown: Vec<_> = graph.row(r).iter().filter(|b| !known[b.col]).collect();
            (unknown.len() == 1).then(|| (r, *unknown[0]))
        });
        let (r, b) = next.expect("core rows solvable by back-substitution (tested for every Zc)");
        known[b.col] = true;
        steps.push(Step {
            rows: vec![r],
            col: b.col,
            shift: b.shift,
        });
    }
    // Extension rows: the last block of row r is its own parity column.
    for r in 4..graph.bg.rows() {
        let own = *graph.row(r).last().expect("extension rows are non-empty");
        steps.push(Step {
            rows: vec![r],
            col: own.col,
            shift: own.shift,
        });
    }
    debug_assert!(steps.iter().all(|s| s.shift < zc));
    steps
}

/// The (column, shift) blocks summed for one step. In the summed core rows the other
/// core parity blocks cancel, so only systematic blocks contribute; a single row uses
/// every block except the one solved for (all others are known by then).
fn step_terms<'a>(
    graph: &'a Graph,
    step: &'a Step,
    kb: usize,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let summed = step.rows.len() > 1;
    step.rows
        .iter()
        .flat_map(move |&r| graph.row(r))
        .filter(move |b| !(b.col == step.col || (summed && b.col >= kb)))
        .map(|b| (b.col, b.shift))
}

/// Codeword positions that are transmitted, in order: [2Zc, K') then [max(K, 2Zc), end).
pub(crate) fn tx_segments(p: &CodeParams) -> [std::ops::Range<usize>; 2] {
    let two_z = 2 * p.zc;
    let seg1 = two_z..p.payload_bits.max(two_z);
    let seg2 = p.k().max(two_z)..p.full_len();
    [seg1, seg2]
}

pub(crate) fn check_bits(what: &'static str, bits: &[u8]) -> Result<(), LdpcError> {
    // OR of all bytes first (vectorises); the position only when one is bad.
    if bits.iter().fold(0u8, |a, &b| a | b) <= 1 {
        return Ok(());
    }
    match bits.iter().position(|&b| b > 1) {
        Some(index) => Err(LdpcError::NotABit {
            what,
            index,
            value: bits[index],
        }),
        None => Ok(()),
    }
}

pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), LdpcError> {
    if expected == got {
        Ok(())
    } else {
        Err(LdpcError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

impl Encoder {
    pub fn new(p: CodeParams) -> Self {
        // CodeParams can only be built with a valid lifting size.
        let graph = Graph::new(p.bg, p.zc).expect("CodeParams holds a valid lifting size");
        let steps = plan(&graph);
        let kb = p.bg.systematic_cols();
        let flat = steps
            .iter()
            .map(|step| PackedStep {
                terms: step_terms(&graph, step, kb).collect(),
                col: step.col,
                shift: step.shift,
            })
            .collect();
        Encoder {
            p,
            packed: Packed::new(p.zc, kb, p.bg.cols(), flat),
            graph,
            steps,
            acc: vec![0; p.zc],
        }
    }

    pub fn params(&self) -> CodeParams {
        self.p
    }

    /// bits one per byte (0/1). payload.len() == payload_bits, out.len() == tx_bits.
    pub fn encode(&mut self, payload: &[u8], out: &mut [u8]) -> Result<(), LdpcError> {
        check_len("payload", self.p.payload_bits, payload.len())?;
        check_len("encoder output", self.p.tx_bits, out.len())?;
        if !self.packed.encode(payload) {
            // Not a bit somewhere: find where for the error.
            check_bits("payload", payload)?;
        }
        let [seg1, seg2] = tx_segments(&self.p);
        // Transmitted systematic bits are the payload's own; the rest is parity, which
        // starts at K (>= 2*Zc) on a column boundary.
        // (Empty when the payload fits in the punctured 2*Zc positions.)
        let n1 = seg1.len().min(out.len());
        if n1 > 0 {
            out[..n1].copy_from_slice(&payload[seg1.start..seg1.start + n1]);
        }
        let (zc, kb) = (self.p.zc, self.p.bg.systematic_cols());
        debug_assert_eq!(seg2.start, kb * zc);
        self.packed.unpack_parity(&mut out[n1..]);
        Ok(())
    }

    /// The full unpunctured codeword (len 68*Zc or 52*Zc, fillers as 0), for tests/checks.
    pub fn encode_full(&mut self, payload: &[u8], out: &mut [u8]) -> Result<(), LdpcError> {
        check_len("payload", self.p.payload_bits, payload.len())?;
        check_len("full codeword", self.p.full_len(), out.len())?;
        check_bits("payload", payload)?;
        let zc = self.p.zc;
        out[..payload.len()].copy_from_slice(payload);
        out[payload.len()..].fill(0);
        let kb = self.p.bg.systematic_cols();
        for step in &self.steps {
            self.acc.fill(0);
            for (col, shift) in step_terms(&self.graph, step, kb) {
                xor_rotated(&mut self.acc, &out[col * zc..(col + 1) * zc], shift);
            }
            // p[(i + shift) % Zc] = acc[i]
            let dst = &mut out[step.col * zc..(step.col + 1) * zc];
            let s = step.shift;
            dst[s..].copy_from_slice(&self.acc[..zc - s]);
            dst[..s].copy_from_slice(&self.acc[zc - s..]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BaseGraph, LIFTING_SIZES};

    /// The AVX2 parity sums and whole-vector unpacking (where the CPU has them) and the
    /// portable ones give the same codewords for both base graphs and every lifting
    /// size.
    #[test]
    fn avx2_and_portable_parity_sums_agree() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for bg in [BaseGraph::Bg1, BaseGraph::Bg2] {
            for &zc in &LIFTING_SIZES {
                let p = CodeParams::for_rate(bg, zc, 0.5).unwrap();
                let payload: Vec<u8> = (0..p.payload_bits)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8 & 1
                    })
                    .collect();
                let mut enc = Encoder::new(p);
                let mut fast = vec![0u8; p.tx_bits];
                enc.encode(&payload, &mut fast).unwrap();
                enc.packed.avx2 = false;
                enc.packed.avx2_unpack = false;
                let mut portable = vec![0u8; p.tx_bits];
                enc.encode(&payload, &mut portable).unwrap();
                assert!(fast == portable, "{bg} Zc={zc}");
            }
        }
    }
}
