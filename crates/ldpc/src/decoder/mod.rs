//! Layered min-sum decoder on saturating `i8` LLRs.
//!
//! Memory layout (why): a cyclic shift of a column block must be a plain unaligned load,
//! so each column's a-posteriori LLRs are followed by a copy of their start. When Zc is
//! a multiple of 64 (the widest vector), a window starting at lane `q = (shift + i) mod
//! Zc` is read at `q`, and only the first 64 lanes are mirrored (`app[c][Zc + j] ==
//! app[c][j]` for `j < 64`): a row block rewrites each lane once plus at most two
//! mirror stores per edge. For other Zc the whole block is stored twice (`j < Zc`) and
//! windows start at `shift + i`; lanes are padded to a multiple of 64 so every kernel
//! works on whole vectors, and padding lanes compute garbage that never reaches a real
//! lane. When a row block updates a column the kernel also restores the mirror (with
//! direct stores where the layout allows it, else by a short fix-up copy afterwards;
//! the AVX2 kernel's doubled layout copies only what the column's next row reads, and
//! restores the whole mirror after the column's last row of the iteration).
//! Saturation (`|x| >= 127`) is absorbing: a saturated value is passed on and written
//! back unchanged (see `scalar::saturated`).
//! Check-to-variable messages are kept per edge as `i8` (one byte per lane), which for
//! BG1 Zc=384 is 121 KiB and stays in L2.
//!
//! Degree-1 columns (BG1's and BG2's extension parity columns: one active row each)
//! get a single message, so their extrinsic value is always the channel LLR: such an
//! edge ("single", at most one per row, put last in its row) reads `t` from a copy of
//! the channel LLRs kept in a second region of the APP buffer (`Dims::chan` further
//! on), loads and stores no message, and its APP value is only written when someone
//! reads it (the last iteration, or every iteration under early termination).
//!
//! Where Zc is not a multiple of 64, [`BatchDecoder`] decodes several blocks at once
//! in the wrapped layout, their lanes interleaved (see `batch`).
//!
//! All arithmetic is integer and saturating, defined once in [`scalar`]; the AVX2 and
//! AVX-512 kernels perform the same operations lane by lane, so every level gives
//! bit-identical results (tested).

mod batch;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
mod x86_rows;

pub use batch::BatchDecoder;

use crate::encoder::{check_len, tx_segments};
use crate::graph::Graph;
use crate::{CodeParams, LdpcError};

/// Min-sum check-node approximation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinSum {
    /// Magnitudes scaled by alpha in (0, 1], applied in eighths (alpha rounded to k/8).
    Normalized(f32),
    /// Magnitudes reduced by beta LLR units (rounded to the quantisation step), floor 0.
    Offset(f32),
}

impl Default for MinSum {
    fn default() -> Self {
        MinSum::Normalized(0.75)
    }
}

/// Which kernel to use. `Auto` picks the best the CPU supports; asking for a level the CPU
/// lacks falls back to the best supported one below it (see [`Decoder::simd_level`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SimdLevel {
    #[default]
    Auto,
    Scalar,
    Avx2,
    Avx512,
}

impl SimdLevel {
    /// The best level this CPU supports.
    pub fn detect() -> SimdLevel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512bw") && std::is_x86_feature_detected!("avx512f")
            {
                return SimdLevel::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") {
                return SimdLevel::Avx2;
            }
        }
        SimdLevel::Scalar
    }

    fn rank(self) -> u8 {
        match self {
            SimdLevel::Scalar => 0,
            SimdLevel::Avx2 => 1,
            SimdLevel::Avx512 | SimdLevel::Auto => 2,
        }
    }

    /// The level actually used when `self` is requested on this CPU.
    pub fn resolve(self) -> SimdLevel {
        let best = SimdLevel::detect();
        if self.rank() >= best.rank() {
            best
        } else {
            self
        }
    }
}

impl std::fmt::Display for SimdLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SimdLevel::Auto => "auto",
            SimdLevel::Scalar => "scalar",
            SimdLevel::Avx2 => "avx2",
            SimdLevel::Avx512 => "avx512",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecoderConfig {
    pub max_iterations: usize,
    pub min_sum: MinSum,
    pub early_termination: bool,
    pub simd: SimdLevel,
}

impl Default for DecoderConfig {
    /// 10 iterations, normalized min-sum 0.75, early termination on, best SIMD level.
    fn default() -> Self {
        DecoderConfig {
            max_iterations: 10,
            min_sum: MinSum::default(),
            early_termination: true,
            simd: SimdLevel::Auto,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOutcome {
    /// Iterations run (each processes every active row block once).
    pub iterations: usize,
    /// Whether the hard decisions satisfy every active parity check.
    pub parity_ok: bool,
}

/// Default quantisation: LLR units to `i8` quanta.
pub const DEFAULT_LLR_SCALE: f32 = 4.0;
/// Largest channel LLR magnitude after quantisation; the headroom up to 127 lets the
/// a-posteriori LLRs grow during decoding before they saturate.
pub const CHANNEL_LLR_MAX: i8 = 63;
/// LLR given to filler bits (known zeros): the most certain value.
const FILLER_LLR: i8 = 127;
/// Lane padding: the widest vector (AVX-512, 64 x i8).
const LANE_PAD: usize = 64;
/// Bytes before each column's data, written (never read) by mirror stores.
const FRONT_PAD: usize = 64;

/// Check-node magnitude post-processing, in quanta (shared by all kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Correction {
    /// m * k / 8 as the sum of (m >> 1), (m >> 2), (m >> 3) per bit of k (k = 8: m).
    Eighths(u8),
    /// max(m - beta, 0).
    Offset(u8),
}

/// Per-edge precomputed addressing: the column's start in `app` and the shift.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Edge {
    pub base: usize,
    pub shift: usize,
    /// The column has no other active edge: `t` is its channel LLR (see the module
    /// docs), read at `base + Dims::chan`.
    pub single: bool,
}

/// Geometry shared by kernels for one row block.
pub(crate) struct Dims {
    pub zc: usize,
    pub zpad: usize,
    /// Zc is a multiple of 64: windows wrap at Zc and only 64 lanes are mirrored.
    pub wrap: bool,
    /// First iteration: every old message is zero (read as such, never loaded), which
    /// spares clearing the message memory before each block.
    pub first: bool,
    /// Offset of the channel copy of a single edge's column from its APP column.
    pub chan: usize,
    /// Single edges write their APP values (the SIMD kernels skip their second pass
    /// otherwise: nothing reads those values before the next write).
    pub write_single: bool,
}

/// Zeroed bytes starting on a 64-byte boundary, so that vectors at multiples of 64 are
/// aligned (message vectors always, APP windows whenever the shift is a multiple of 64).
struct Aligned(Vec<Line>, usize);

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([i8; 64]);

impl Aligned {
    fn zeroed(len: usize) -> Aligned {
        Aligned(vec![Line([0; 64]); len.div_ceil(64)], len)
    }
}

impl std::ops::Deref for Aligned {
    type Target = [i8];
    fn deref(&self) -> &[i8] {
        // SAFETY: `Line` is 64 plain bytes without padding and `len <= 64 * lines`.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const i8, self.1) }
    }
}

impl std::ops::DerefMut for Aligned {
    fn deref_mut(&mut self) -> &mut [i8] {
        // SAFETY: as in `deref`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr() as *mut i8, self.1) }
    }
}

/// Layered min-sum LDPC decoder for one set of code parameters.
pub struct Decoder {
    p: CodeParams,
    cfg: DecoderConfig,
    level: SimdLevel,
    correction: Correction,
    config_error: Option<LdpcError>,
    llr_scale: f32,
    rows: usize,
    /// Edges of the active rows, row after row; `row_start` as in [`Graph`].
    edges: Vec<Edge>,
    row_start: Vec<usize>,
    /// Wrapped layout: the AVX-512 row kernel's window table (and the syndrome's), per
    /// row from `row_start[r] * Zc / 64` (see `x86_rows::windows`).
    #[cfg(target_arch = "x86_64")]
    windows: Vec<u32>,
    /// AVX2 level: the AVX2 row kernel's table for every Zc, per row from
    /// `row_start[r] * ceil(Zc / 32)` (see `x86_rows::halves`).
    #[cfg(target_arch = "x86_64")]
    halves: Vec<u32>,
    /// Doubled layout at the AVX2 kernel's levels: per edge, where the next row of the
    /// iteration reads its column (`x86::next_readers`), so that the fix-up after a row
    /// copies only what that reader needs.
    #[cfg(target_arch = "x86_64")]
    next_shift: Vec<u32>,
    /// `correction` as the AVX-512 row kernel uses it (kept equal to `correction`).
    #[cfg(target_arch = "x86_64")]
    corrector: x86_rows::Corrector,
    zpad: usize,
    stride: usize,
    /// Columns with a single edge (see the module docs), per base-graph column.
    single_col: Vec<bool>,
    app: Aligned,
    c2v: Aligned,
    work: Vec<i8>,
    syndrome: Vec<i8>,
    /// The channel LLRs of a float `decode` call, quantised (`tx_bits` bytes) when
    /// they are quantised in one pass before being placed; empty when each piece is
    /// quantised in place (see `Decoder::new`).
    quantized: Vec<i8>,
    /// Where each codeword position goes in `app` (see [`channel_pieces`]).
    pieces: Vec<Piece>,
}

/// A run of codeword positions as the APP buffer holds them: `len` bytes at `at`,
/// taken from the input or set to a constant.
#[derive(Clone, Copy, Debug)]
struct Piece {
    at: usize,
    len: usize,
    from: Source,
}

#[derive(Clone, Copy, Debug)]
enum Source {
    /// Input LLRs starting at this index.
    Input(usize),
    Fill(i8),
}

/// The pieces that write every codeword position for each block (no clearing pass):
/// the punctured first 2*Zc positions as erasures (0), fillers as certain zeros (they
/// may lie among the punctured ones), then each transmitted segment, its untransmitted
/// rest as erasures. Pieces never cross a column; single columns go to their channel
/// copy. Built once: placing a piece needs no division by Zc.
fn channel_pieces(p: &CodeParams, stride: usize, single_col: &[bool]) -> Vec<Piece> {
    let (zc, chan) = (p.zc, p.bg.cols() * stride);
    let mut pieces = Vec::new();
    let mut put = |mut pos: usize, len: usize, from: Source| {
        let mut done = 0;
        while done < len {
            let (col, lane) = (pos / zc, pos % zc);
            let n = (zc - lane).min(len - done);
            let at = col * stride + if single_col[col] { chan } else { 0 } + FRONT_PAD + lane;
            let from = match from {
                Source::Input(s) => Source::Input(s + done),
                fill => fill,
            };
            pieces.push(Piece { at, len: n, from });
            done += n;
            pos += n;
        }
    };
    put(0, 2 * zc, Source::Fill(0));
    put(p.payload_bits, p.fillers(), Source::Fill(FILLER_LLR));
    let mut used = 0;
    for seg in tx_segments(p) {
        let n = seg.len().min(p.tx_bits - used);
        put(seg.start, n, Source::Input(used));
        put(seg.start + n, seg.len() - n, Source::Fill(0));
        used += n;
    }
    pieces
}

/// Hard decisions (1 for a negative LLR) of `app` into `bits`, 64 at a time so that
/// the loop compiles to whole-vector compares.
#[inline(always)]
fn hard_decisions(app: &[i8], bits: &mut [u8]) {
    let mut b = bits.chunks_exact_mut(64);
    let mut a = app.chunks_exact(64);
    for (b, a) in (&mut b).zip(&mut a) {
        for (bit, &v) in b.iter_mut().zip(a) {
            *bit = (v < 0) as u8;
        }
    }
    for (bit, &v) in b.into_remainder().iter_mut().zip(a.remainder()) {
        *bit = (v < 0) as u8;
    }
}

/// The base-graph columns the decoder treats as single (see the module docs of the
/// decoder): per active row, the first column (in column order) that no other active
/// row has. Their extrinsic value is the channel LLR; another decoder of this crate's
/// arithmetic (e.g. a GPU kernel) must treat the same columns so.
pub fn single_edge_columns(p: &CodeParams) -> Vec<bool> {
    let graph = Graph::new(p.bg, p.zc).expect("CodeParams holds a valid lifting size");
    single_columns(&graph, p.active_rows())
}

/// Columns with exactly one edge among the first `rows` rows, at most one per row (the
/// kernels handle one single edge per row; another such column is decoded as usual).
fn single_columns(graph: &Graph, rows: usize) -> Vec<bool> {
    let mut degree = vec![0usize; graph.bg.cols()];
    for r in 0..rows {
        for b in graph.row(r) {
            degree[b.col] += 1;
        }
    }
    let mut single = vec![false; graph.bg.cols()];
    for r in 0..rows {
        if let Some(b) = graph.row(r).iter().find(|b| degree[b.col] == 1) {
            single[b.col] = true;
        }
    }
    single
}

fn correction(ms: MinSum, llr_scale: f32) -> Result<Correction, LdpcError> {
    match ms {
        MinSum::Normalized(a) if a.is_finite() && a > 0.0 && a <= 1.0 => {
            Ok(Correction::Eighths(((a * 8.0).round() as u8).clamp(1, 8)))
        }
        MinSum::Offset(b) if b.is_finite() && (0.0..16.0).contains(&b) => {
            Ok(Correction::Offset((b * llr_scale).round().min(127.0) as u8))
        }
        MinSum::Normalized(x) | MinSum::Offset(x) => Err(LdpcError::InvalidMinSum(x)),
    }
}

impl Decoder {
    /// Never fails: an invalid configuration is reported by every `decode` call (use
    /// [`Decoder::try_new`] to get the error up front).
    pub fn new(p: CodeParams, cfg: DecoderConfig) -> Self {
        let graph = Graph::new(p.bg, p.zc).expect("CodeParams holds a valid lifting size");
        Decoder::over(p, &graph, cfg)
    }

    /// The decoder of `graph`, whose lifting size is `p.zc` (for [`BatchDecoder`]:
    /// `p` and `graph` of several blocks interleaved, every length scaled alike).
    fn over(p: CodeParams, graph: &Graph, cfg: DecoderConfig) -> Self {
        debug_assert_eq!(graph.zc, p.zc);
        let rows = p.active_rows();
        let zpad = p.zc.div_ceil(LANE_PAD) * LANE_PAD;
        // Front pad, two copies of Zc, and room for whole-vector loads at any shift and
        // for mirror stores that spill past either end (see `x86`).
        let stride = FRONT_PAD + (p.zc + zpad).div_ceil(LANE_PAD) * LANE_PAD + LANE_PAD;
        let single_col = single_columns(graph, rows);
        let mut edges = Vec::new();
        let mut row_start = vec![0];
        for r in 0..rows {
            let start = edges.len();
            for b in graph.row(r) {
                edges.push(Edge {
                    base: b.col * stride + FRONT_PAD,
                    shift: b.shift,
                    single: single_col[b.col],
                });
            }
            // The single edge last (kernels rely on it); the order of a row's edges does
            // not change the arithmetic.
            edges[start..].sort_by_key(|e| e.single);
            row_start.push(edges.len());
        }
        let max_deg = graph.max_row_degree();
        let config_error = match (
            cfg.max_iterations,
            correction(cfg.min_sum, DEFAULT_LLR_SCALE),
        ) {
            (0, _) => Some(LdpcError::ZeroIterations),
            (_, Err(e)) => Some(e),
            _ => None,
        };
        #[cfg(target_arch = "x86_64")]
        let windows = if wraps(p.zc) {
            (0..rows)
                .flat_map(|r| x86_rows::windows(&edges[row_start[r]..row_start[r + 1]], p.zc))
                .collect()
        } else {
            Vec::new()
        };
        let level = cfg.simd.resolve();
        #[cfg(target_arch = "x86_64")]
        let halves = if runs_halves(level, p.zc) {
            (0..rows)
                .flat_map(|r| x86_rows::halves(&edges[row_start[r]..row_start[r + 1]], p.zc))
                .collect()
        } else {
            Vec::new()
        };
        #[cfg(target_arch = "x86_64")]
        let next_shift = if runs_halves(level, p.zc) && !wraps(p.zc) {
            x86::next_readers(&edges, &row_start)
        } else {
            Vec::new()
        };
        let correction =
            correction(cfg.min_sum, DEFAULT_LLR_SCALE).unwrap_or(Correction::Eighths(6));
        let pieces = channel_pieces(&p, stride, &single_col);
        let d = Decoder {
            #[cfg(target_arch = "x86_64")]
            windows,
            #[cfg(target_arch = "x86_64")]
            halves,
            #[cfg(target_arch = "x86_64")]
            next_shift,
            #[cfg(target_arch = "x86_64")]
            corrector: x86_rows::Corrector::new(correction),
            p,
            cfg,
            level,
            correction,
            config_error,
            llr_scale: DEFAULT_LLR_SCALE,
            rows,
            c2v: Aligned::zeroed(edges.len() * zpad),
            edges,
            row_start,
            zpad,
            stride,
            // APP columns, then the channel copies of the single columns (`Dims::chan`).
            app: Aligned::zeroed(2 * p.bg.cols() * stride),
            single_col,
            work: vec![0; max_deg * LANE_PAD],
            syndrome: vec![0; zpad],
            // AVX2 quantises pieces whose length is not a multiple of 32 through a
            // zero-padded tail: piece by piece, that made the quantiser 19% of a
            // decode with early termination at the station's Zc = 36. Such codes
            // quantise in one pass, then place the pieces; the others (AVX-512's
            // masked tails are cheap) quantise each piece in place.
            quantized: if level == SimdLevel::Avx2 && !p.zc.is_multiple_of(32) {
                vec![0; p.tx_bits]
            } else {
                Vec::new()
            },
            pieces,
        };
        // The SIMD kernels use raw pointers: verify their bounds once for every row.
        #[cfg(target_arch = "x86_64")]
        for r in 0..d.rows {
            let (a, b) = (d.row_start[r], d.row_start[r + 1]);
            let dims = d.dims(false, true);
            let c2v = &d.c2v[a * zpad..b * zpad];
            x86::check_bounds(&d.app, &d.edges[a..b], c2v, &d.work, &dims, LANE_PAD);
            if runs_halves(d.level, d.p.zc) {
                let nh = d.p.zc.div_ceil(32);
                let halves = &d.halves[a * nh..b * nh];
                x86_rows::check_halves(&d.app, &d.edges[a..b], halves, d.p.zc, dims.chan);
            }
        }
        d
    }

    /// Like [`Decoder::new`] but rejects an invalid configuration.
    pub fn try_new(p: CodeParams, cfg: DecoderConfig) -> Result<Self, LdpcError> {
        let d = Decoder::new(p, cfg);
        match &d.config_error {
            Some(e) => Err(e.clone()),
            None => Ok(d),
        }
    }

    /// Sets the quantisation scale (quanta per LLR unit, default [`DEFAULT_LLR_SCALE`]).
    /// Channel LLRs are clipped to +-[`CHANNEL_LLR_MAX`] quanta after scaling.
    pub fn set_llr_scale(&mut self, scale: f32) -> Result<(), LdpcError> {
        if !scale.is_finite() || scale <= 0.0 {
            return Err(LdpcError::InvalidLlrScale(scale));
        }
        self.llr_scale = scale;
        if let Ok(c) = correction(self.cfg.min_sum, scale) {
            self.correction = c;
            #[cfg(target_arch = "x86_64")]
            {
                self.corrector = x86_rows::Corrector::new(c);
            }
        }
        Ok(())
    }

    pub fn params(&self) -> CodeParams {
        self.p
    }

    pub fn config(&self) -> DecoderConfig {
        self.cfg
    }

    /// What is actually used after runtime detection.
    pub fn simd_level(&self) -> SimdLevel {
        self.level
    }

    /// llr.len() == tx_bits, LLR convention: POSITIVE means bit 0 (ln P(0)/P(1)).
    /// payload_out.len() == payload_bits, bits one per byte.
    /// +-infinity is a certain bit; NaN is rejected with [`LdpcError::NanLlr`].
    pub fn decode(
        &mut self,
        llr: &[f32],
        payload_out: &mut [u8],
    ) -> Result<DecodeOutcome, LdpcError> {
        self.check_call(llr.len(), payload_out.len())?;
        let (scale, level) = (self.llr_scale, self.level);
        let nan = if self.quantized.is_empty() {
            // Each piece quantised straight into its place.
            let mut nan = false;
            self.place_channel(|s, dst| {
                nan |= quantize_at(level, &llr[s..s + dst.len()], scale, dst);
            });
            nan
        } else {
            let mut q = std::mem::take(&mut self.quantized);
            let nan = quantize_at(level, llr, scale, &mut q);
            self.load_channel(&q);
            self.quantized = q;
            nan
        };
        if nan {
            let index = llr.iter().position(|x| x.is_nan()).unwrap_or(0);
            return Err(LdpcError::NanLlr { index });
        }
        Ok(self.run(payload_out))
    }

    /// Decodes already-quantised LLRs (positive means bit 0), used as they are.
    pub fn decode_quantized(
        &mut self,
        llr: &[i8],
        payload_out: &mut [u8],
    ) -> Result<DecodeOutcome, LdpcError> {
        self.check_call(llr.len(), payload_out.len())?;
        self.load_channel(llr);
        Ok(self.run(payload_out))
    }

    /// The configuration and the buffer lengths of a decode call.
    fn check_call(&self, llr_len: usize, payload_len: usize) -> Result<(), LdpcError> {
        if let Some(e) = &self.config_error {
            return Err(e.clone());
        }
        check_len("LLR input", self.p.tx_bits, llr_len)?;
        check_len("payload output", self.p.payload_bits, payload_len)
    }

    /// Iterates on the loaded channel LLRs and writes the hard decisions of the payload.
    fn run(&mut self, payload_out: &mut [u8]) -> DecodeOutcome {
        let mut iterations = 0;
        let mut parity_ok = false;
        while iterations < self.cfg.max_iterations {
            // Single edges' APP values are read by the syndrome and the output only.
            let last = iterations + 1 == self.cfg.max_iterations;
            self.iterate(iterations == 0, last || self.cfg.early_termination);
            iterations += 1;
            if self.cfg.early_termination {
                parity_ok = self.syndrome_ok();
                if parity_ok {
                    break;
                }
            }
        }
        if !self.cfg.early_termination {
            parity_ok = self.syndrome_ok();
        }
        let zc = self.p.zc;
        for (col, bits) in payload_out.chunks_mut(zc).enumerate() {
            let base = col * self.stride + FRONT_PAD;
            hard_decisions(&self.app[base..base + bits.len()], bits);
        }
        DecodeOutcome {
            iterations,
            parity_ok,
        }
    }

    /// The quantised a-posteriori LLRs of the whole unpunctured codeword after the last
    /// decode (68*Zc or 52*Zc values), for inspection and cross-checks.
    pub fn posterior(&self) -> Vec<i8> {
        let zc = self.p.zc;
        (0..self.p.bg.cols())
            .flat_map(|c| {
                self.app[c * self.stride + FRONT_PAD..c * self.stride + FRONT_PAD + zc]
                    .iter()
                    .copied()
            })
            .collect()
    }

    /// Writes the quantised channel LLRs (`tx_bits` of them) into the APP buffer.
    fn load_channel(&mut self, llr: &[i8]) {
        self.place_channel(|s, dst| dst.copy_from_slice(&llr[s..s + dst.len()]));
    }

    /// Writes every codeword position through [`channel_pieces`]: `input(s, dst)`
    /// fills `dst` from the input starting at index `s`; then the mirror,
    /// `app[c][j + Zc] = app[c][j]` for the lanes the layout mirrors, in every column
    /// (single columns in their channel copy).
    fn place_channel(&mut self, mut input: impl FnMut(usize, &mut [i8])) {
        for piece in &self.pieces {
            let dst = &mut self.app[piece.at..piece.at + piece.len];
            match piece.from {
                Source::Input(s) => input(s, dst),
                Source::Fill(v) => dst.fill(v),
            }
        }
        let (zc, stride) = (self.p.zc, self.stride);
        let mirrored = if wraps(zc) { LANE_PAD } else { zc };
        let chan = self.p.bg.cols() * stride;
        for (c, &single) in self.single_col.iter().enumerate() {
            let at = c * stride + if single { chan } else { 0 } + FRONT_PAD;
            self.app.copy_within(at..at + mirrored, at + zc);
        }
    }

    /// The kernels' view of this decoder's layout.
    fn dims(&self, first: bool, write_single: bool) -> Dims {
        Dims {
            zc: self.p.zc,
            zpad: self.zpad,
            wrap: wraps(self.p.zc),
            first,
            chan: self.p.bg.cols() * self.stride,
            write_single,
        }
    }

    fn iterate(&mut self, first: bool, write_single: bool) {
        let dims = self.dims(first, write_single);
        for r in 0..self.rows {
            let (a, b) = (self.row_start[r], self.row_start[r + 1]);
            let edges = &self.edges[a..b];
            let c2v = &mut self.c2v[a * self.zpad..b * self.zpad];
            match self.level {
                // AVX2, and the doubled layout at the AVX-512 level (see `runs_halves`).
                #[cfg(target_arch = "x86_64")]
                _ if runs_halves(self.level, self.p.zc) => {
                    let nh = self.p.zc.div_ceil(32);
                    // SAFETY: level comes from runtime detection of avx2 (and the VL
                    // build runs only where `corrector.vl` detected AVX-512VL and BW);
                    // `new` checked the bounds and this decoder's `halves` table.
                    let done = unsafe {
                        x86_rows::layer_avx2(
                            &mut self.app,
                            edges,
                            &self.halves[a * nh..b * nh],
                            c2v,
                            &dims,
                            &self.corrector,
                            self.level == SimdLevel::Avx512 && self.corrector.vl,
                        )
                    };
                    // The row kernel leaves the mirror to a copy after the row.
                    if done && dims.wrap {
                        // SAFETY: as above.
                        unsafe { x86::fixup_wrap_avx2(&mut self.app, edges, &dims) }
                    } else if done {
                        let next = &self.next_shift[a..b];
                        // SAFETY: as above; `new` built `next_shift` for this layout.
                        unsafe { x86::fixup_next_avx2(&mut self.app, edges, next, &dims) }
                    } else {
                        // SAFETY: as above.
                        unsafe {
                            x86::layer_avx2(
                                &mut self.app,
                                edges,
                                c2v,
                                &mut self.work,
                                &dims,
                                self.correction,
                            )
                        }
                    }
                }
                #[cfg(target_arch = "x86_64")]
                SimdLevel::Avx512 => {
                    // SAFETY: level comes from runtime detection of avx512f + avx512bw;
                    // `new` checked the bounds.
                    let nvec = self.p.zc / LANE_PAD;
                    let done = unsafe {
                        x86_rows::layer(
                            &mut self.app,
                            edges,
                            &self.windows[a * nvec..b * nvec],
                            c2v,
                            &dims,
                            &self.corrector,
                        )
                    };
                    if !done {
                        scalar::layer(&mut self.app, edges, c2v, &dims, self.correction);
                    }
                }
                _ => scalar::layer(&mut self.app, edges, c2v, &dims, self.correction),
            }
        }
    }

    /// Hard decisions satisfy every active row.
    fn syndrome_ok(&mut self) -> bool {
        self.failing_blocks(1) == 0
    }

    /// Of `blocks` blocks interleaved lane by lane (see [`BatchDecoder`]), those whose
    /// hard decisions fail an active row: bit `b` for block `b` (lanes `b`, `b +
    /// blocks`, ...). `blocks` is a power of two that divides 64, and 1 unless the
    /// layout wraps.
    fn failing_blocks(&mut self, blocks: usize) -> u64 {
        let rows = &self.row_start[..self.rows + 1];
        let dims = self.dims(false, true);
        debug_assert!(blocks == 1 || dims.wrap);
        let (app, edges, acc) = (&self.app, &self.edges, &mut self.syndrome);
        #[cfg(target_arch = "x86_64")]
        if dims.wrap {
            let nvec = dims.zc / LANE_PAD;
            let windows = &self.windows[..self.row_start[self.rows] * nvec];
            match self.level {
                // SAFETY: the level comes from runtime detection; `windows` is this
                // decoder's table over `app`, bounds checked in `new`.
                SimdLevel::Avx512 => unsafe {
                    return x86_rows::syndrome_failures_avx512(app, windows, rows, dims.zc, blocks);
                },
                // SAFETY: as above.
                SimdLevel::Avx2 => unsafe {
                    return x86_rows::syndrome_failures_avx2(app, windows, rows, dims.zc, blocks);
                },
                _ => {}
            }
        }
        #[cfg(target_arch = "x86_64")]
        if runs_halves(self.level, dims.zc) {
            let halves = &self.halves[..self.row_start[self.rows] * dims.zc.div_ceil(32)];
            // SAFETY: the level comes from runtime detection; `halves` is this decoder's
            // table over `app`, bounds checked in `new`.
            let ok = unsafe { x86_rows::syndrome_ok_halves_avx2(app, halves, rows, dims.zc) };
            return u64::from(!ok);
        }
        syndrome_failures(app, edges, rows, acc, &dims, blocks)
    }
}

/// [`quantize`] by the kernel of `level`; true if an LLR was NaN.
fn quantize_at(level: SimdLevel, llr: &[f32], scale: f32, out: &mut [i8]) -> bool {
    match level {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level comes from runtime detection.
        SimdLevel::Avx512 => unsafe { quantize_avx512(llr, scale, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the level comes from runtime detection.
        SimdLevel::Avx2 => unsafe { quantize_avx2(llr, scale, out) },
        _ => quantize(llr, scale, out),
    }
}

/// Scales, clips to +-[`CHANNEL_LLR_MAX`] and rounds (half to even, as
/// `f32::round_ties_even` and the vector conversions) channel LLRs into `out`; true if
/// one was NaN (then `out` is garbage). Branch-free so it vectorises.
#[inline(always)]
fn quantize(llr: &[f32], scale: f32, out: &mut [i8]) -> bool {
    let max = CHANNEL_LLR_MAX as f32;
    let mut nan = false;
    for (q, &x) in out.iter_mut().zip(llr) {
        nan |= x.is_nan();
        // NaN is clamped to NaN and converts to 0 below; the caller reports it.
        let v = (x * scale).clamp(-max, max);
        // Saturating float-to-int conversion (well defined for NaN too); |v| <= 63.
        *q = v.round_ties_even() as i32 as i8;
    }
    nan
}

/// `quantize` 64 values at a time (same float operations, so the same results): four
/// vectors of 16 are converted, packed to bytes with saturating packs (the values are
/// already within +-63, so nothing saturates) and put back in order with one permute.
/// NaN is carried through the clamp (the operand order of `max`/`min`), converts to
/// `i32::MIN` and packs to -128, which no number gives: one byte compare per 64 values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_avx512(llr: &[f32], scale: f32, out: &mut [i8]) -> bool {
    use std::arch::x86_64::*;
    let n = llr.len().min(out.len());
    let s = scale;
    let (scale, max) = (_mm512_set1_ps(s), _mm512_set1_ps(CHANNEL_LLR_MAX as f32));
    let min = _mm512_set1_ps(-(CHANNEL_LLR_MAX as f32));
    let nan_byte = _mm512_set1_epi8(i8::MIN);
    let mut nan: __mmask64 = 0;
    // A macro, not a closure: a closure is not always inlined, and then every vector
    // goes through memory.
    macro_rules! one {
        ($x:expr) => {{
            // maxps/minps return their second operand when one is NaN.
            let v = _mm512_min_ps(max, _mm512_max_ps(min, _mm512_mul_ps($x, scale)));
            _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v)
        }};
    }
    // The packs work within 128-bit lanes: lane L holds 4 values of each input in turn.
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let mut i = 0;
    while i + 64 <= n {
        let p = llr.as_ptr().add(i);
        let [a, b, c, d] = [
            one!(_mm512_loadu_ps(p)),
            one!(_mm512_loadu_ps(p.add(16))),
            one!(_mm512_loadu_ps(p.add(32))),
            one!(_mm512_loadu_ps(p.add(48))),
        ];
        let q = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
        let q = _mm512_permutexvar_epi32(order, q);
        nan |= _mm512_cmpeq_epi8_mask(q, nan_byte);
        _mm512_storeu_si512(out.as_mut_ptr().add(i) as *mut __m512i, q);
        i += 64;
    }
    // The rest 16 at a time under a lane mask (a scalar loop with `roundf` here was
    // 8% of a station run when the quantiser ran per 36-value column piece).
    // The saturating byte conversion maps NaN's i32::MIN to -128 as the packs do.
    while i < n {
        let m = ((1u32 << (n - i).min(16)) - 1) as __mmask16;
        let v = one!(_mm512_maskz_loadu_ps(m, llr.as_ptr().add(i)));
        nan |= _mm512_mask_cmpeq_epi32_mask(m, v, _mm512_set1_epi32(i32::MIN)) as __mmask64;
        _mm512_mask_cvtsepi32_storeu_epi8(out.as_mut_ptr().add(i), m, v);
        i += 16;
    }
    nan != 0
}

/// `quantize` 32 values at a time (same float operations, so the same results). As in
/// `quantize_avx512`, NaN is carried through the clamp (the operand order of
/// `max`/`min`), converts to `i32::MIN` and packs to -128, which no number gives: one
/// byte compare per 32 values instead of one float compare per 8. The conversion rounds
/// by MXCSR, which Rust code may assume is the default (to nearest, ties to even).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantize_avx2(llr: &[f32], scale: f32, out: &mut [i8]) -> bool {
    use std::arch::x86_64::*;
    let n = llr.len().min(out.len());
    let s = scale;
    let (scale, max) = (_mm256_set1_ps(s), _mm256_set1_ps(CHANNEL_LLR_MAX as f32));
    let min = _mm256_set1_ps(-(CHANNEL_LLR_MAX as f32));
    let nan_byte = _mm256_set1_epi8(i8::MIN);
    let mut nan = _mm256_setzero_si256();
    let one = |x: __m256| {
        // maxps/minps return their second operand when one is NaN.
        let v = _mm256_min_ps(max, _mm256_max_ps(min, _mm256_mul_ps(x, scale)));
        _mm256_cvtps_epi32(v)
    };
    // packs works within 128-bit halves: this restores the order of the 8 i32 groups.
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let block = |p: *const f32| {
        let [a, b, c, d] = [0, 8, 16, 24].map(|o| one(_mm256_loadu_ps(p.add(o))));
        let q = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
        _mm256_permutevar8x32_epi32(q, order)
    };
    let mut i = 0;
    while i + 32 <= n {
        let q = block(llr.as_ptr().add(i));
        nan = _mm256_or_si256(nan, _mm256_cmpeq_epi8(q, nan_byte));
        _mm256_storeu_si256(out.as_mut_ptr().add(i) as *mut __m256i, q);
        i += 32;
    }
    // The rest through a zero-padded block (zeros quantise to 0, never to the NaN
    // byte).
    if i < n {
        let mut padded = [0f32; 32];
        padded[..n - i].copy_from_slice(&llr[i..n]);
        let q = block(padded.as_ptr());
        nan = _mm256_or_si256(nan, _mm256_cmpeq_epi8(q, nan_byte));
        let mut bytes = [0i8; 32];
        _mm256_storeu_si256(bytes.as_mut_ptr() as *mut __m256i, q);
        out[i..n].copy_from_slice(&bytes[..n - i]);
    }
    _mm256_movemask_epi8(nan) != 0
}

/// Whether a decoder at `level` runs the 32-lane row kernel (`x86_rows::layer_avx2`,
/// over its `halves` table): always with AVX2, and with AVX-512 for the doubled layout
/// (Zc not a multiple of 64). There a 64-lane kernel padded Zc = 72 to 128 lanes and
/// restored the mirror with masked copies; the 32-lane row kernel built with AVX-512VL
/// took 20.2 / 33.5 / 41.7 us per block at Zc 72 / 144 / 208 against its 30.5 / 41.4 /
/// 52.2 (best of 8 alternated rounds, `examples/zc_scan`, an Emerald Rapids Xeon).
#[cfg(target_arch = "x86_64")]
fn runs_halves(level: SimdLevel, zc: usize) -> bool {
    match level {
        SimdLevel::Avx2 => true,
        SimdLevel::Avx512 => !wraps(zc),
        _ => false,
    }
}

/// Whether Zc uses the wrapped layout (see the module docs).
pub(crate) fn wraps(zc: usize) -> bool {
    zc.is_multiple_of(LANE_PAD)
}

/// Every block of `blocks` (bits `0..blocks`).
pub(crate) fn all_blocks(blocks: usize) -> u64 {
    u64::MAX >> (64 - blocks)
}

/// Folds a mask of failing lanes (bit `l` for lane `l mod 64`) into the failing blocks
/// of `blocks` interleaved ones (a power of two dividing 64): lane `l` is block `l
/// mod blocks`.
#[inline(always)]
pub(crate) fn failing_blocks(mut lanes: u64, blocks: usize) -> u64 {
    let mut width = 64;
    while width > blocks {
        width /= 2;
        lanes |= lanes >> width;
    }
    lanes & all_blocks(blocks)
}

/// The blocks (as [`failing_blocks`]) whose hard decisions fail a row listed by
/// `row_start`: per row, the XOR of the shifted blocks (the sign bit of an LLR is its
/// hard decision) must have no sign bit set in a real lane. Reads the same 64-lane
/// windows as the kernels, so it holds for either layout; `acc` has `zpad` lanes.
/// Stops once every block has failed.
#[inline(always)]
fn syndrome_failures(
    app: &[i8],
    edges: &[Edge],
    row_start: &[usize],
    acc: &mut [i8],
    dims: &Dims,
    blocks: usize,
) -> u64 {
    let all = all_blocks(blocks);
    let mut failed = 0;
    for r in row_start.windows(2) {
        acc.fill(0);
        for e in &edges[r[0]..r[1]] {
            for (i0, a) in acc.chunks_exact_mut(LANE_PAD).enumerate() {
                let q = e.base + scalar::window(e.shift, i0 * LANE_PAD, dims);
                for (x, &y) in a.iter_mut().zip(&app[q..q + LANE_PAD]) {
                    *x ^= y;
                }
            }
        }
        // The OR of the real lanes' sign bits per lane position (vectorises, unlike an
        // early-exit search).
        let mut signs = [0u8; LANE_PAD];
        for chunk in acc[..dims.zc].chunks(LANE_PAD) {
            for (s, &x) in signs.iter_mut().zip(chunk) {
                *s |= x as u8 >> 7;
            }
        }
        let lanes = signs
            .iter()
            .enumerate()
            .fold(0u64, |m, (l, &s)| m | u64::from(s) << l);
        failed |= failing_blocks(lanes, blocks);
        if failed == all {
            break;
        }
    }
    failed
}

/// Restores `app[c][j + Zc] == app[c][j]` after the window `[shift, shift + Zc)` of a
/// column was rewritten: copies `[Zc, Zc + shift)` down and `[shift, Zc)` up.
pub(crate) fn fixup_scalar(col: &mut [i8], zc: usize, shift: usize) {
    col.copy_within(zc..zc + shift, 0);
    col.copy_within(shift..zc, shift + zc);
}

/// Wrapped layout: restores `app[c][Zc + j] == app[c][j]` for `j < 64` after every
/// window `[(shift + i) mod Zc, +64)` of a column was rewritten. With `r = shift % 64`,
/// the window that wrapped wrote lanes `[0, r)` into the mirror and the one starting at
/// `r` wrote `[r, 64)` directly.
pub(crate) fn fixup_wrap(col: &mut [i8], zc: usize, shift: usize) {
    let r = shift % LANE_PAD;
    col.copy_within(zc..zc + r, 0);
    col.copy_within(r..LANE_PAD, zc + r);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift64 generator: reproducible bits for the tests, no crate needed.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    /// Quantised LLRs of a random codeword of `p`: +-`amplitude` plus noise uniform in
    /// `-noise..=noise`, clamped to `i8`.
    fn noisy_codeword(
        p: CodeParams,
        next: &mut impl FnMut() -> u64,
        amplitude: i32,
        noise: u64,
    ) -> Vec<i8> {
        let payload: Vec<u8> = (0..p.payload_bits).map(|_| next() as u8 & 1).collect();
        let mut tx = vec![0u8; p.tx_bits];
        crate::Encoder::new(p).encode(&payload, &mut tx).unwrap();
        tx.iter()
            .map(|&b| {
                let n = (next() % (2 * noise + 1)) as i32 - noise as i32;
                (if b == 0 { amplitude } else { -amplitude } + n).clamp(-128, 127) as i8
            })
            .collect()
    }

    /// The AVX-512 row kernel gives the scalar kernel's posteriors with the correction
    /// looked up by byte permute (VBMI) and with it computed by shifts (the path of
    /// AVX-512 CPUs without VBMI), for several corrections, with saturated inputs.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_row_kernel_with_and_without_vbmi_matches_scalar() {
        use crate::BaseGraph;
        if SimdLevel::Avx512.resolve() != SimdLevel::Avx512 {
            println!("SKIPPED: AVX-512 row kernel (CPU lacks AVX-512BW)");
            return;
        }
        let vbmi = std::is_x86_feature_detected!("avx512vbmi");
        if !vbmi {
            println!("SKIPPED: VBMI correction lookup (CPU lacks AVX-512 VBMI)");
        }
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for (bg, zc, rate, ms) in [
            (BaseGraph::Bg1, 384, 1.0 / 3.0, MinSum::Normalized(0.75)),
            (BaseGraph::Bg1, 128, 0.5, MinSum::Offset(0.5)),
            // One vector per row block: the interleaved degree-19 rows run only their
            // first and last passes.
            (BaseGraph::Bg1, 64, 1.0 / 3.0, MinSum::Normalized(0.75)),
            (BaseGraph::Bg2, 256, 0.2, MinSum::Normalized(0.625)),
            (BaseGraph::Bg2, 64, 0.4, MinSum::Normalized(1.0)),
        ] {
            let p = CodeParams::for_rate(bg, zc, rate).unwrap();
            let llr = noisy_codeword(p, &mut next, 20, 140);
            let mut results = Vec::new();
            for (level, use_vbmi) in [
                (SimdLevel::Scalar, false),
                (SimdLevel::Avx512, false),
                (SimdLevel::Avx512, true),
            ] {
                if use_vbmi && !vbmi {
                    continue;
                }
                let cfg = DecoderConfig {
                    max_iterations: 6,
                    min_sum: ms,
                    early_termination: false,
                    simd: level,
                };
                let mut dec = Decoder::new(p, cfg);
                dec.corrector.vbmi = use_vbmi;
                let mut out = vec![0u8; p.payload_bits];
                let o = dec.decode_quantized(&llr, &mut out).unwrap();
                results.push((o, out, dec.posterior()));
            }
            for r in &results[1..] {
                assert_eq!(r.0, results[0].0, "{bg} Zc={zc}: outcome");
                assert!(r.1 == results[0].1, "{bg} Zc={zc}: payload");
                assert!(r.2 == results[0].2, "{bg} Zc={zc}: posteriors");
            }
        }
    }

    /// True, after saying the test `what` cannot run, where the CPU lacks AVX2.
    #[cfg(target_arch = "x86_64")]
    fn lacks_avx2(what: &str) -> bool {
        let lacks = SimdLevel::Avx2.resolve() != SimdLevel::Avx2;
        if lacks {
            println!("SKIPPED: {what} (CPU lacks AVX2)");
        }
        lacks
    }

    /// A batch decodes every block exactly as a decoder of that block alone: same
    /// payload bits, iteration count and parity verdict, at every kernel level, with
    /// and without early termination, for full and partial batches, at lifting sizes
    /// whose batches hold 1, 4, 8 and 64 blocks. The noise gives blocks of one batch
    /// different iteration counts and leaves some undecodable.
    #[test]
    fn batch_decodes_each_block_as_a_decoder_alone() {
        use crate::BaseGraph;
        let mut levels = vec![SimdLevel::Scalar];
        for level in [SimdLevel::Avx2, SimdLevel::Avx512] {
            if level.resolve() == level {
                levels.push(level);
            } else {
                println!("SKIPPED: batch decode at {level} (the CPU lacks it)");
            }
        }
        let mut next = xorshift(0x5851_f42d_4c95_7f2d);
        let (mut counts, mut failures) = (std::collections::BTreeSet::new(), 0);
        for level in levels {
            for (bg, zc, rate, noise) in [
                (BaseGraph::Bg1, 72, 1.0 / 3.0, 75),
                (BaseGraph::Bg2, 104, 0.4, 70),
                (BaseGraph::Bg1, 208, 0.5, 60),
                (BaseGraph::Bg2, 11, 0.3, 70),
                (BaseGraph::Bg1, 384, 1.0 / 3.0, 75),
            ] {
                let p = CodeParams::for_rate(bg, zc, rate).unwrap();
                for (max_iterations, early_termination) in [(5, true), (3, false)] {
                    let cfg = DecoderConfig {
                        max_iterations,
                        early_termination,
                        simd: level,
                        ..Default::default()
                    };
                    let mut batch = BatchDecoder::try_new(p, cfg).unwrap();
                    let nb = batch.blocks();
                    // The fewest blocks that fill whole 64-lane vectors.
                    assert!(
                        (nb * zc).is_multiple_of(64)
                            && (nb == 1 || !(nb / 2 * zc).is_multiple_of(64))
                    );
                    let mut alone = Decoder::try_new(p, cfg).unwrap();
                    for n in [nb, nb.div_ceil(3)] {
                        // Noise from light to heavy across the batch.
                        let llrs: Vec<Vec<i8>> = (0..n as u64)
                            .map(|b| noisy_codeword(p, &mut next, 24, noise - 30 + b % 4 * 12))
                            .collect();
                        let views: Vec<&[i8]> = llrs.iter().map(|l| &l[..]).collect();
                        let pb = p.payload_bits;
                        let mut bits = vec![2u8; n * pb];
                        let mut outcomes = vec![
                            DecodeOutcome {
                                iterations: 0,
                                parity_ok: false
                            };
                            n
                        ];
                        batch
                            .decode_quantized(&views, &mut bits, &mut outcomes)
                            .unwrap();
                        let what = format!("{level} {bg} Zc={zc} {cfg:?}, {n} blocks");
                        let mut expected = vec![0u8; pb];
                        for (b, llr) in llrs.iter().enumerate() {
                            let outcome = alone.decode_quantized(llr, &mut expected).unwrap();
                            assert_eq!(outcomes[b], outcome, "{what}: block {b}");
                            assert!(
                                bits[b * pb..(b + 1) * pb] == expected[..],
                                "{what}: block {b}"
                            );
                            counts.insert(outcome.iterations);
                            failures += usize::from(!outcome.parity_ok);
                        }
                    }
                }
            }
        }
        // Blocks stopped at different iterations, and some did not decode.
        assert!(
            counts.len() >= 3 && failures > 0,
            "{counts:?}, {failures} failures"
        );
    }

    /// A batch of float LLRs decodes each block as `Decoder::decode` does, and a NaN
    /// is reported at its place in the blocks laid end to end.
    #[test]
    fn batch_of_floats_decodes_each_block_as_a_decoder_alone() {
        let p = CodeParams::for_rate(crate::BaseGraph::Bg1, 72, 1.0 / 3.0).unwrap();
        let mut next = xorshift(0x1234_5678_9abc_def1);
        let cfg = DecoderConfig::default();
        let mut batch = BatchDecoder::try_new(p, cfg).unwrap();
        let mut alone = Decoder::try_new(p, cfg).unwrap();
        // Quantised values over 4 (the default scale), past the clip and between steps.
        let llrs: Vec<Vec<f32>> = (0..6u64)
            .map(|b| {
                let q = noisy_codeword(p, &mut next, 24, 45 + 8 * b);
                q.iter().map(|&x| x as f32 / 3.7).collect()
            })
            .collect();
        let views: Vec<&[f32]> = llrs.iter().map(|l| &l[..]).collect();
        let pb = p.payload_bits;
        let mut bits = vec![2u8; 6 * pb];
        let none = DecodeOutcome {
            iterations: 0,
            parity_ok: false,
        };
        let mut outcomes = vec![none; 6];
        batch.decode(&views, &mut bits, &mut outcomes).unwrap();
        let mut expected = vec![0u8; pb];
        for (b, llr) in llrs.iter().enumerate() {
            let outcome = alone.decode(llr, &mut expected).unwrap();
            assert_eq!(outcomes[b], outcome, "block {b}");
            assert!(bits[b * pb..(b + 1) * pb] == expected[..], "block {b}");
        }
        let mut bad = llrs[2].clone();
        bad[33] = f32::NAN;
        let views = [views[0], views[1], &bad[..]];
        let got = batch.decode(&views, &mut bits[..3 * pb], &mut outcomes[..3]);
        assert_eq!(
            got,
            Err(LdpcError::NanLlr {
                index: 2 * p.tx_bits + 33
            })
        );
    }

    /// A batch call checks its lengths.
    #[test]
    fn batch_rejects_wrong_lengths() {
        let p = CodeParams::for_rate(crate::BaseGraph::Bg1, 72, 1.0 / 3.0).unwrap();
        let mut batch = BatchDecoder::try_new(p, DecoderConfig::default()).unwrap();
        let llr: &[i8] = &vec![0i8; p.tx_bits];
        let short: &[i8] = &vec![0i8; p.tx_bits - 1];
        let ok = DecodeOutcome {
            iterations: 0,
            parity_ok: false,
        };
        let mut bits = vec![0u8; 2 * p.payload_bits];
        let mut out = [ok; 2];
        assert!(batch.decode_quantized(&[], &mut [], &mut []).is_err());
        assert!(batch
            .decode_quantized(&[llr, short], &mut bits, &mut out)
            .is_err());
        assert!(batch
            .decode_quantized(&[llr, llr], &mut bits[1..], &mut out)
            .is_err());
        assert!(batch
            .decode_quantized(&[llr; 9], &mut bits, &mut out)
            .is_err());
        assert!(batch
            .decode_quantized(&[llr, llr], &mut bits, &mut out)
            .is_ok());
    }

    /// The AVX2 and AVX-512 parity checks (the doubled layout's
    /// [`x86_rows::syndrome_ok_halves_avx2`], the wrapped layout's per level) agree
    /// with the portable one on the same APP values, after each of the first four
    /// iterations of noisy blocks (where some checks still fail) and of clean codewords
    /// (where every check holds), at lifting sizes with and without padding lanes in
    /// the last half; and where every check holds, one hard decision flipped in any
    /// column makes both fail.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn simd_parity_checks_match_the_portable_one() {
        if lacks_avx2("AVX2 parity check") {
            return;
        }
        let levels = if SimdLevel::Avx512.resolve() == SimdLevel::Avx512 {
            vec![SimdLevel::Avx2, SimdLevel::Avx512]
        } else {
            println!("SKIPPED: AVX-512 parity check (CPU lacks AVX-512BW)");
            vec![SimdLevel::Avx2]
        };
        for level in levels {
            simd_parity_check_matches_the_portable_one(level);
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn simd_parity_check_matches_the_portable_one(level: SimdLevel) {
        use crate::BaseGraph;
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut outcomes = [0usize; 2];
        let mut flipped = 0;
        for (bg, zc, rate) in [
            (BaseGraph::Bg1, 72, 1.0 / 3.0),
            (BaseGraph::Bg1, 36, 0.5),
            (BaseGraph::Bg2, 15, 0.25),
            (BaseGraph::Bg2, 3, 0.3),
            (BaseGraph::Bg1, 96, 0.5),
            (BaseGraph::Bg2, 208, 0.4),
            (BaseGraph::Bg1, 384, 1.0 / 3.0),
            (BaseGraph::Bg1, 64, 0.5),
            (BaseGraph::Bg2, 128, 0.3),
            (BaseGraph::Bg1, 320, 0.4),
        ] {
            let p = CodeParams::for_rate(bg, zc, rate).unwrap();
            for noise in [0, 40, 70] {
                let llr = noisy_codeword(p, &mut next, 24, noise);
                let cfg = DecoderConfig {
                    simd: level,
                    ..Default::default()
                };
                let mut dec = Decoder::new(p, cfg);
                dec.load_channel(&llr);
                let portable = |dec: &mut Decoder| {
                    let rows = &dec.row_start[..dec.rows + 1];
                    let dims = dec.dims(false, true);
                    syndrome_failures(&dec.app, &dec.edges, rows, &mut dec.syndrome, &dims, 1) == 0
                };
                let what = format!("{level} {bg} Zc={zc} noise {noise}");
                for it in 0..4 {
                    dec.iterate(it == 0, true);
                    let fast = dec.syndrome_ok();
                    assert_eq!(fast, portable(&mut dec), "{what} iteration {it}");
                    outcomes[fast as usize] += 1;
                }
                if !dec.syndrome_ok() {
                    continue;
                }
                // One real lane of a column an active row checks (and its mirror copy)
                // negated, then restored, at 20 places.
                for _ in 0..20 {
                    let edge = (next() % dec.edges.len() as u64) as usize;
                    let lane = (next() % zc as u64) as usize;
                    let base = dec.edges[edge].base;
                    let mirrored = if wraps(zc) { LANE_PAD } else { zc };
                    let copies = if lane < mirrored { 2 } else { 1 };
                    let flip = |dec: &mut Decoder| {
                        for at in [base + lane, base + lane + zc].into_iter().take(copies) {
                            dec.app[at] = if dec.app[at] < 0 { 1 } else { -1 };
                        }
                    };
                    flip(&mut dec);
                    let what = format!("{what}, column {} lane {lane}", base / dec.stride);
                    assert!(!dec.syndrome_ok(), "{what} flipped");
                    assert!(!portable(&mut dec), "{what} flipped: portable");
                    flip(&mut dec);
                    assert!(dec.syndrome_ok(), "{what} restored");
                    flipped += 1;
                }
            }
        }
        // Both answers occurred, so neither was compared alone.
        assert!(outcomes[0] > 0 && outcomes[1] > 0, "{level}: {outcomes:?}");
        assert!(flipped > 0, "{level}: no block reached a valid codeword");
    }

    /// The doubled layout's fix-ups after a row that wrote its window at `shift` (real
    /// lanes, then garbage in the padding lanes): the partial copy gives the next
    /// reader's window at every `to` its lanes, and the full one the whole column, for
    /// every shift, at lifting sizes below, at and between multiples of 32.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fixups_give_the_next_reader_its_window() {
        if lacks_avx2("AVX2 fix-up copies") {
            return;
        }
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for zc in [3usize, 15, 36, 72, 96, 100, 208] {
            let lanes = zc.div_ceil(32) * 32;
            let stride = FRONT_PAD + 2 * zc + 2 * LANE_PAD;
            let dims = Dims {
                zc,
                zpad: zc.div_ceil(LANE_PAD) * LANE_PAD,
                wrap: false,
                first: false,
                chan: 0,
                write_single: true,
            };
            for shift in 0..zc {
                let value: Vec<i8> = (0..zc).map(|_| next() as i8).collect();
                let edge = Edge {
                    base: FRONT_PAD,
                    shift,
                    single: false,
                };
                for to in (0..zc as u32).chain([x86::FULL]) {
                    let mut col: Vec<i8> = (0..stride).map(|_| next() as i8).collect();
                    for i in 0..lanes {
                        col[FRONT_PAD + shift + i] = if i < zc {
                            value[(shift + i) % zc]
                        } else {
                            next() as i8
                        };
                    }
                    // SAFETY: AVX2 is present; the column has a 64-byte front pad and
                    // room for 32-byte copies past 2 Zc.
                    unsafe { x86::fixup_next_avx2(&mut col, &[edge], &[to], &dims) };
                    let (from, len) = match to {
                        x86::FULL => (0, 2 * zc),
                        to => (to as usize, zc),
                    };
                    for j in from..from + len {
                        assert_eq!(
                            col[FRONT_PAD + j],
                            value[j % zc],
                            "Zc={zc} shift {shift} to {to}: lane {j}"
                        );
                    }
                }
            }
        }
    }

    /// Every quantiser this CPU has gives the portable one's bytes, on values around
    /// every rounding boundary, the clip limits, zeros of both signs and infinities.
    #[test]
    fn quantizers_agree_with_the_portable_one() {
        let mut x: Vec<f32> = (-700..700).map(|i| i as f32 * 0.125 + 0.0625).collect();
        // Exact halves after scaling by 4 (the ties).
        x.extend((-600..600).map(|i| i as f32 * 0.125));
        x.extend((-2000..2000).map(|i| (i as f32 * 0.37 + 0.01) * 0.25));
        x.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            15.875,
            -15.875,
            1e30,
            -1e-30,
        ]);
        for n in [x.len(), x.len() - 7, 100, 72, 36, 33, 15, 1] {
            let x = &x[..n];
            let mut expected = vec![0i8; n];
            assert!(!quantize(x, 4.0, &mut expected));
            #[cfg(target_arch = "x86_64")]
            {
                // Bytes past the output are left as they were.
                let mut got = vec![7i8; n + 64];
                if SimdLevel::Avx2.resolve() == SimdLevel::Avx2 {
                    // SAFETY: AVX2 detected.
                    assert!(!unsafe { quantize_avx2(x, 4.0, &mut got[..n]) });
                    assert_eq!(got[..n], expected, "avx2, {n} values");
                    assert!(got[n..].iter().all(|&b| b == 7), "avx2 wrote past {n}");
                } else {
                    println!("SKIPPED: AVX2 quantiser (CPU lacks AVX2)");
                }
                if SimdLevel::Avx512.resolve() == SimdLevel::Avx512 {
                    // SAFETY: AVX-512F/BW detected.
                    assert!(!unsafe { quantize_avx512(x, 4.0, &mut got[..n]) });
                    assert_eq!(got[..n], expected, "avx512, {n} values");
                    assert!(got[n..].iter().all(|&b| b == 7), "avx512 wrote past {n}");
                } else {
                    println!("SKIPPED: AVX-512 quantiser (CPU lacks AVX-512BW)");
                }
            }
        }
    }

    /// Every quantiser reports a NaN wherever it is: in a whole vector (first, middle,
    /// last lane) or in the tail (a masked or zero-padded block).
    #[test]
    fn quantizers_report_nan_at_any_position() {
        let n = 64 * 3 + 21;
        for at in [0, 1, 31, 63, 64, 100, 191, 192, 200, 207, n - 1] {
            let mut x: Vec<f32> = (0..n).map(|i| (i as f32 - 90.0) * 0.7).collect();
            x[at] = f32::NAN;
            let mut out = vec![0i8; n];
            assert!(quantize(&x, 4.0, &mut out), "portable, NaN at {at}");
            #[cfg(target_arch = "x86_64")]
            {
                if SimdLevel::Avx2.resolve() == SimdLevel::Avx2 {
                    // SAFETY: AVX2 detected.
                    assert!(
                        unsafe { quantize_avx2(&x, 4.0, &mut out) },
                        "avx2, NaN at {at}"
                    );
                } else {
                    println!("SKIPPED: AVX2 quantiser (CPU lacks AVX2)");
                }
                if SimdLevel::Avx512.resolve() == SimdLevel::Avx512 {
                    // SAFETY: AVX-512F/BW detected.
                    let found = unsafe { quantize_avx512(&x, 4.0, &mut out) };
                    assert!(found, "avx512, NaN at {at}");
                } else {
                    println!("SKIPPED: AVX-512 quantiser (CPU lacks AVX-512BW)");
                }
            }
        }
    }
}
