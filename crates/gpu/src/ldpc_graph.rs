//! The LDPC graph the GPU kernels need, taken from radiohost-ldpc's own base-graph
//! tables (so the GPU and CPU codecs cannot drift apart), lifted for one `Zc`, plus the
//! encoder's solve order.
//!
//! radiohost-ldpc exports its table through `base_graph_entries`, so the GPU kernels
//! and the CPU codec read the same entries; the tests check the lifted graph against
//! radiohost-ldpc's encoder and parity check.

use radiohost_ldpc::{
    base_graph_entries, lifting_set_index, single_edge_columns, BaseGraph, CodeParams,
};

/// Flag in an edge's `shift`: the edge is its row's single edge (its column has no
/// other active row: `radiohost_ldpc::single_edge_columns`), whose extrinsic value is
/// the channel LLR. Shifts are below Zc <= 384, so the bit is free.
pub const SINGLE_EDGE: i16 = 0x4000;
/// The shift itself, without [`SINGLE_EDGE`].
pub const SHIFT_MASK: i16 = 0x3fff;

/// The lifted graph of the active rows of one code, as the kernels read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiftedGraph {
    pub bg: BaseGraph,
    pub zc: usize,
    /// Active rows (radiohost-ldpc's `CodeParams::active_rows`).
    pub rows: usize,
    /// Edge columns and shifts (with [`SINGLE_EDGE`] set on single edges), row after
    /// row; `row_start[r]..row_start[r + 1]`.
    pub col: Vec<i16>,
    pub shift: Vec<i16>,
    pub row_start: Vec<i16>,
    /// Solve order of the encoder (all rows).
    pub steps: EncoderPlan,
}

/// Parity blocks in solve order: step `s` sets column `col[s]` so that
/// `p[(i + shift[s]) % Zc] = XOR of entries e in entry_start[s]..entry_start[s+1]`
/// of bit `(i + entry_shift[e]) % Zc` of column `entry_col[e]`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct EncoderPlan {
    pub col: Vec<i16>,
    pub shift: Vec<i16>,
    pub entry_start: Vec<i16>,
    pub entry_col: Vec<i16>,
    pub entry_shift: Vec<i16>,
}

/// Errors building a lifted graph.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    #[error(transparent)]
    Ldpc(#[from] radiohost_ldpc::LdpcError),
    #[error(
        "{bg} Zc = {zc}: the core parity rows are not double-diagonal (cannot plan the encoder)"
    )]
    NoEncoderPlan { bg: BaseGraph, zc: usize },
}

/// Blocks of all rows of (bg, zc): per row, (col, shift) ascending by column.
fn lifted_rows(bg: BaseGraph, zc: usize) -> Result<Vec<Vec<(usize, usize)>>, GraphError> {
    let ils = lifting_set_index(zc)?;
    let mut rows = vec![Vec::new(); bg.rows()];
    for (row, col, shift) in base_graph_entries(bg) {
        rows[row].push((col, shift[ils] as usize % zc));
    }
    for r in &mut rows {
        r.sort_unstable();
    }
    Ok(rows)
}

impl LiftedGraph {
    /// The graph and encoder plan for `p`.
    ///
    /// # Errors
    /// Unreadable tables or a graph the encoder cannot be planned for.
    pub fn new(p: &CodeParams) -> Result<Self, GraphError> {
        let rows = lifted_rows(p.bg, p.zc)?;
        let active = p.active_rows();
        let single = single_edge_columns(p);
        let (mut col, mut shift, mut row_start) = (Vec::new(), Vec::new(), vec![0i16]);
        for r in &rows[..active] {
            for &(c, s) in r {
                col.push(c as i16);
                shift.push(s as i16 | if single[c] { SINGLE_EDGE } else { 0 });
            }
            row_start.push(col.len() as i16);
        }
        let steps = plan_encoder(p.bg, p.zc, &rows)?;
        Ok(Self {
            bg: p.bg,
            zc: p.zc,
            rows: active,
            col,
            shift,
            row_start,
            steps,
        })
    }

    /// Edges of the active rows (c2v messages per code block = edges * Zc bytes).
    pub fn edges(&self) -> usize {
        self.col.len()
    }
}

/// Solve order: the sum of the four core rows leaves one shifted copy of one core
/// parity column (double-diagonal structure); the other three follow row by row; each
/// extension row solves its own (last) column.
fn plan_encoder(
    bg: BaseGraph,
    zc: usize,
    rows: &[Vec<(usize, usize)>],
) -> Result<EncoderPlan, GraphError> {
    let kb = bg.systematic_cols();
    let fail = || GraphError::NoEncoderPlan { bg, zc };
    let mut plan = EncoderPlan {
        entry_start: vec![0],
        ..Default::default()
    };
    let push = |plan: &mut EncoderPlan, col: usize, shift: usize, entries: &[(usize, usize)]| {
        plan.col.push(col as i16);
        plan.shift.push(shift as i16);
        for &(c, s) in entries {
            plan.entry_col.push(c as i16);
            plan.entry_shift.push(s as i16);
        }
        plan.entry_start.push(plan.entry_col.len() as i16);
    };
    // Core parity column whose shifts do not cancel in the sum of rows 0..4.
    let mut first = None;
    for c in kb..kb + 4 {
        let mut odd: Vec<usize> = Vec::new();
        for (_, s) in rows[..4].iter().flatten().filter(|(col, _)| *col == c) {
            match odd.iter().position(|x| x == s) {
                Some(i) => {
                    odd.swap_remove(i);
                }
                None => odd.push(*s),
            }
        }
        if odd.len() == 1 {
            first = Some((c, odd[0]));
            break;
        }
    }
    let (c0, s0) = first.ok_or_else(fail)?;
    let systematic: Vec<(usize, usize)> = rows[..4]
        .iter()
        .flatten()
        .copied()
        .filter(|(c, _)| *c < kb)
        .collect();
    push(&mut plan, c0, s0, &systematic);
    let mut known: Vec<bool> = (0..bg.cols()).map(|c| c < kb || c == c0).collect();
    for _ in 0..3 {
        let (r, (c, s)) = (0..4)
            .find_map(|r| {
                let unknown: Vec<_> = rows[r].iter().filter(|(c, _)| !known[*c]).collect();
                (unknown.len() == 1).then(|| (r, *unknown[0]))
            })
            .ok_or_else(fail)?;
        known[c] = true;
        let others: Vec<_> = rows[r].iter().copied().filter(|&(x, _)| x != c).collect();
        push(&mut plan, c, s, &others);
    }
    for row in &rows[4..] {
        let &(c, s) = row.last().ok_or_else(fail)?;
        let others: Vec<_> = row.iter().copied().filter(|&(x, _)| x != c).collect();
        push(&mut plan, c, s, &others);
    }
    Ok(plan)
}

/// Codeword positions of the transmitted bits (radiohost-ldpc's rate matching):
/// `[2Zc, seg1_end)` then `[seg2_start, full_len)`.
pub fn tx_segments(p: &CodeParams) -> (usize, usize) {
    let two_z = 2 * p.zc;
    (p.payload_bits.max(two_z), p.k().max(two_z))
}

/// CPU execution of exactly what the `ldpc_encode` kernel does for one block (lane
/// loops in place of threads): the reference the tests hold against radiohost-ldpc.
pub fn encode_like_kernel(g: &LiftedGraph, p: &CodeParams, payload: &[u8]) -> Vec<u8> {
    let zc = p.zc;
    let mut cw = vec![0u8; p.full_len()];
    cw[..payload.len()].copy_from_slice(payload);
    let plan = &g.steps;
    for s in 0..plan.col.len() {
        let (a, b) = (
            plan.entry_start[s] as usize,
            plan.entry_start[s + 1] as usize,
        );
        for i in 0..zc {
            let mut acc = 0u8;
            for e in a..b {
                let pos = (i + plan.entry_shift[e] as usize) % zc;
                acc ^= cw[plan.entry_col[e] as usize * zc + pos];
            }
            cw[plan.col[s] as usize * zc + (i + plan.shift[s] as usize) % zc] = acc;
        }
    }
    let (seg1_end, seg2_start) = tx_segments(p);
    (0..p.tx_bits)
        .map(|t| {
            let seg1_len = seg1_end - 2 * zc;
            let pos = if t < seg1_len {
                2 * zc + t
            } else {
                seg2_start + t - seg1_len
            };
            cw[pos]
        })
        .collect()
}

/// CPU execution of the `ldpc_decode` kernel's arithmetic for one block: quantised
/// LLRs in, hard decisions of the K' payload positions and (iterations, parity) out.
pub fn decode_like_kernel(
    g: &LiftedGraph,
    p: &CodeParams,
    llr: &[f32],
    scale: f32,
    corr: (i32, i32),
    max_iterations: usize,
) -> (Vec<u8>, usize, bool) {
    let zc = p.zc;
    let mut app = vec![0i32; p.full_len()];
    for v in &mut app[p.payload_bits..p.payload_bits + p.fillers()] {
        *v = 127;
    }
    let (seg1_end, seg2_start) = tx_segments(p);
    for (t, &x) in llr.iter().enumerate() {
        let v = (x * scale).clamp(-63.0, 63.0);
        let seg1_len = seg1_end - 2 * zc;
        let pos = if t < seg1_len {
            2 * zc + t
        } else {
            seg2_start + t - seg1_len
        };
        // Half to even, as radiohost-ldpc's quantiser.
        app[pos] = v.round_ties_even() as i32;
    }
    let sat = |v: i32| v.clamp(-128, 127);
    let correct = |m: i32| -> i32 {
        let (kind, value) = corr;
        if kind == 1 {
            return (m - value).max(0);
        }
        let mut r = 0;
        if value & 8 != 0 {
            r = m;
        }
        if value & 4 != 0 {
            r += m >> 1;
        }
        if value & 2 != 0 {
            r += m >> 2;
        }
        if value & 1 != 0 {
            r += m >> 3;
        }
        r
    };
    let mut c2v = vec![0i32; g.edges() * zc];
    let at =
        |e: usize, i: usize| g.col[e] as usize * zc + (i + (g.shift[e] & SHIFT_MASK) as usize) % zc;
    let single = |e: usize| g.shift[e] & SINGLE_EDGE != 0;
    // radiohost-ldpc's saturation: |v| >= 127, absorbing.
    let saturated = |v: i32| v.abs() >= 127;
    let syndrome = |app: &[i32]| {
        (0..g.rows).all(|r| {
            (0..zc).all(|i| {
                let x =
                    (g.row_start[r]..g.row_start[r + 1]).fold(0, |x, e| x ^ app[at(e as usize, i)]);
                x >= 0
            })
        })
    };
    let mut iterations = 0;
    let mut parity = false;
    while iterations < max_iterations {
        let first = iterations == 0;
        for r in 0..g.rows {
            let edges = g.row_start[r] as usize..g.row_start[r + 1] as usize;
            for i in 0..zc {
                // A single edge's t is its channel LLR, kept in its message slot from
                // the first iteration on (it needs no message).
                let t_of = |app: &[i32], c2v: &[i32], e: usize| {
                    let a = app[at(e, i)];
                    if first || (!single(e) && saturated(a)) {
                        a
                    } else if single(e) {
                        c2v[e * zc + i]
                    } else {
                        sat(a - c2v[e * zc + i])
                    }
                };
                let (mut min1, mut min2, mut sgn) = (255, 255, 0);
                for e in edges.clone() {
                    let t = t_of(&app, &c2v, e);
                    min2 = min2.min(min1.max(t.abs()));
                    min1 = min1.min(t.abs());
                    sgn ^= t;
                }
                let (m1, m2) = (correct(min1.min(127)), correct(min2.min(127)));
                for e in edges.clone() {
                    let t = t_of(&app, &c2v, e);
                    let mag = if t.abs() == min1 { m2 } else { m1 };
                    let msg = if (t ^ sgn) < 0 { -mag } else { mag };
                    c2v[e * zc + i] = if single(e) { t } else { msg };
                    // A saturated t is final (radiohost-ldpc's absorbing saturation).
                    app[at(e, i)] = if saturated(t) { t } else { sat(t + msg) };
                }
            }
        }
        iterations += 1;
        parity = syndrome(&app);
        if parity {
            break;
        }
    }
    let bits = app[..p.payload_bits]
        .iter()
        .map(|&v| (v < 0) as u8)
        .collect();
    (bits, iterations, parity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_ldpc::{parity_check, Decoder, DecoderConfig, Encoder, MinSum, SimdLevel};
    use rand::{Rng, SeedableRng};

    #[test]
    fn base_graph_tables_have_the_standard_entry_counts() {
        let bg1: Vec<_> = base_graph_entries(BaseGraph::Bg1).collect();
        let bg2: Vec<_> = base_graph_entries(BaseGraph::Bg2).collect();
        assert_eq!((bg1.len(), bg2.len()), (316, 197));
        assert_eq!(bg1[0].2, [250, 307, 73, 223, 211, 294, 0, 135]);
        assert_eq!(bg2[0].2, [9, 174, 0, 72, 3, 156, 143, 145]);
        assert!(bg1.iter().all(|&(r, c, _)| r < 46 && c < 68));
    }

    /// The kernel's encoding (plan + rate matching) equals radiohost-ldpc's encoder, and
    /// the lifted graph's full codewords satisfy radiohost-ldpc's parity check.
    #[test]
    fn kernel_encoding_matches_the_ldpc_crate() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for (bg, zc, rate, short) in [
            (BaseGraph::Bg1, 384, 1.0 / 3.0, 0),
            (BaseGraph::Bg1, 52, 0.5, 100),
            (BaseGraph::Bg2, 36, 0.25, 7),
            (BaseGraph::Bg2, 7, 0.2, 0),
        ] {
            let full = CodeParams::for_rate(bg, zc, rate).unwrap();
            let p =
                CodeParams::new(bg, zc, full.payload_bits - short, full.tx_bits - short).unwrap();
            let g = LiftedGraph::new(&p).unwrap();
            let payload: Vec<u8> = (0..p.payload_bits).map(|_| rng.gen_range(0..2)).collect();
            let mut expect = vec![0u8; p.tx_bits];
            let mut enc = Encoder::new(p);
            enc.encode(&payload, &mut expect).unwrap();
            assert_eq!(encode_like_kernel(&g, &p, &payload), expect, "{bg} Zc {zc}");
            let mut cw = vec![0u8; p.full_len()];
            enc.encode_full(&payload, &mut cw).unwrap();
            assert!(parity_check(bg, zc, &cw));
        }
    }

    /// The kernel's decoding arithmetic is bit-identical to radiohost-ldpc's decoder
    /// (bits, iterations and parity verdict), on noisy and on hopeless inputs.
    #[test]
    fn kernel_decoding_matches_the_ldpc_crate() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        // Near the threshold too (BG1 rate 1/3: 42 single edges, LLRs that saturate).
        for (bg, zc, rate, sigma) in [
            (BaseGraph::Bg2, 52, 1.0 / 3.0, 0.8),
            (BaseGraph::Bg1, 64, 0.5, 0.7),
            (BaseGraph::Bg2, 16, 0.25, 2.5),
            (BaseGraph::Bg1, 128, 1.0 / 3.0, 1.05),
            (BaseGraph::Bg2, 64, 0.2, 1.2),
        ] {
            let p = CodeParams::for_rate(bg, zc, rate).unwrap();
            let g = LiftedGraph::new(&p).unwrap();
            for ms in [MinSum::Normalized(0.75), MinSum::Offset(0.5)] {
                let payload: Vec<u8> = (0..p.payload_bits).map(|_| rng.gen_range(0..2)).collect();
                let mut tx = vec![0u8; p.tx_bits];
                Encoder::new(p).encode(&payload, &mut tx).unwrap();
                let llr: Vec<f32> = tx
                    .iter()
                    .map(|&b| {
                        let x = 1.0 - 2.0 * b as f32 + sigma * rng.gen_range(-1.7f32..1.7);
                        2.0 * x / (sigma * sigma)
                    })
                    .collect();
                let cfg = DecoderConfig {
                    max_iterations: 8,
                    min_sum: ms,
                    early_termination: true,
                    simd: SimdLevel::Auto,
                };
                let mut out = vec![0u8; p.payload_bits];
                let got = Decoder::try_new(p, cfg)
                    .unwrap()
                    .decode(&llr, &mut out)
                    .unwrap();
                let corr = crate::kernels::min_sum_correction(ms).unwrap();
                let (bits, it, ok) = decode_like_kernel(&g, &p, &llr, 4.0, corr, 8);
                assert_eq!(bits, out, "{bg} Zc {zc} {ms:?}");
                assert_eq!((it, ok), (got.iterations, got.parity_ok), "{bg} Zc {zc}");
            }
        }
    }
}
