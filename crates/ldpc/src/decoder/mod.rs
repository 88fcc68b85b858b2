//! Layered min-sum decoder on saturating `i8` LLRs.
//!
//! Memory layout (why): each column block's a-posteriori LLRs are stored twice in a row
//! (`app[c][j] == app[c][j + Zc]`), so the cyclic shift of a block is a plain unaligned
//! load at offset `shift`. Lanes are padded to a multiple of 64 so every kernel works on
//! whole vectors; padding lanes compute garbage that never reaches a real lane. When a
//! row block updates a column, the kernel also writes the mirror half (directly when Zc
//! is a multiple of the vector width, else by a short fix-up copy afterwards).
//! Saturation is absorbing: a saturated value is passed on and written back unchanged
//! (see `scalar::saturated`).
//! Check-to-variable messages are kept per edge as `i8` (one byte per lane), which for
//! BG1 Zc=384 is 121 KiB and stays in L2.
//!
//! All arithmetic is integer and saturating, defined once in [`scalar`]; the AVX2 and
//! AVX-512 kernels perform the same operations lane by lane, so every level gives
//! bit-identical results (tested).

mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

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
}

/// Geometry shared by kernels for one row block.
pub(crate) struct Dims {
    pub zc: usize,
    pub zpad: usize,
    /// First iteration: every old message is zero (read as such, never loaded), which
    /// spares clearing the message memory before each block.
    pub first: bool,
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
    zpad: usize,
    stride: usize,
    app: Vec<i8>,
    c2v: Vec<i8>,
    work: Vec<i8>,
    syndrome: Vec<i8>,
    quantized: Vec<i8>,
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
        let rows = p.active_rows();
        let zpad = p.zc.div_ceil(LANE_PAD) * LANE_PAD;
        // Front pad, two copies of Zc, and room for whole-vector loads at any shift and
        // for mirror stores that spill past either end (see `x86`).
        let stride = FRONT_PAD + (p.zc + zpad).div_ceil(LANE_PAD) * LANE_PAD + LANE_PAD;
        let mut edges = Vec::new();
        let mut row_start = vec![0];
        for r in 0..rows {
            for b in graph.row(r) {
                edges.push(Edge {
                    base: b.col * stride + FRONT_PAD,
                    shift: b.shift,
                });
            }
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
        let d = Decoder {
            p,
            cfg,
            level: cfg.simd.resolve(),
            correction: correction(cfg.min_sum, DEFAULT_LLR_SCALE)
                .unwrap_or(Correction::Eighths(6)),
            config_error,
            llr_scale: DEFAULT_LLR_SCALE,
            rows,
            c2v: vec![0; edges.len() * zpad],
            edges,
            row_start,
            zpad,
            stride,
            app: vec![0; p.bg.cols() * stride],
            work: vec![0; max_deg * LANE_PAD],
            syndrome: vec![0; p.zc],
            quantized: vec![0; p.tx_bits],
        };
        // The SIMD kernels use raw pointers: verify their bounds once for every row.
        #[cfg(target_arch = "x86_64")]
        for r in 0..d.rows {
            let (a, b) = (d.row_start[r], d.row_start[r + 1]);
            let dims = Dims {
                zc: p.zc,
                zpad,
                first: false,
            };
            let c2v = &d.c2v[a * zpad..b * zpad];
            x86::check_bounds(&d.app, &d.edges[a..b], c2v, &d.work, &dims, LANE_PAD);
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
        check_len("LLR input", self.p.tx_bits, llr.len())?;
        // Branch-free so it vectorises; NaN is looked for only when one is present.
        if llr.iter().fold(false, |acc, x| acc | x.is_nan()) {
            let index = llr.iter().position(|x| x.is_nan()).unwrap_or(0);
            return Err(LdpcError::NanLlr { index });
        }
        let scale = self.llr_scale;
        let max = CHANNEL_LLR_MAX as f32;
        for (q, &x) in self.quantized.iter_mut().zip(llr) {
            let v = (x * scale).clamp(-max, max);
            // Round half away from zero (as f32::round) without a libm call.
            let r = v + 0.5f32.copysign(v);
            // SAFETY: `r` is finite (NaN was rejected, infinities clamped) and within
            // +-(CHANNEL_LLR_MAX + 1), so the truncating conversion is defined.
            *q = unsafe { r.to_int_unchecked::<i32>() } as i8;
        }
        let q = std::mem::take(&mut self.quantized);
        let r = self.decode_quantized(&q, payload_out);
        self.quantized = q;
        r
    }

    /// Decodes already-quantised LLRs (positive means bit 0), used as they are.
    pub fn decode_quantized(
        &mut self,
        llr: &[i8],
        payload_out: &mut [u8],
    ) -> Result<DecodeOutcome, LdpcError> {
        if let Some(e) = &self.config_error {
            return Err(e.clone());
        }
        check_len("LLR input", self.p.tx_bits, llr.len())?;
        check_len("payload output", self.p.payload_bits, payload_out.len())?;
        self.load_channel(llr);

        let mut iterations = 0;
        let mut parity_ok = false;
        while iterations < self.cfg.max_iterations {
            self.iterate(iterations == 0);
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
            let app = &self.app[base..base + bits.len()];
            for (bit, &v) in bits.iter_mut().zip(app) {
                *bit = (v < 0) as u8;
            }
        }
        Ok(DecodeOutcome {
            iterations,
            parity_ok,
        })
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

    fn load_channel(&mut self, llr: &[i8]) {
        let (zc, stride) = (self.p.zc, self.stride);
        self.app.fill(0);
        // Writes `len` values starting at codeword position `pos`, column by column.
        let write = |mut pos: usize, len: usize, src: Option<&[i8]>, app: &mut [i8]| {
            let mut done = 0;
            while done < len {
                let (col, lane) = (pos / zc, pos % zc);
                let n = (zc - lane).min(len - done);
                let at = col * stride + FRONT_PAD + lane;
                let dst = &mut app[at..at + n];
                match src {
                    Some(s) => dst.copy_from_slice(&s[done..done + n]),
                    None => dst.fill(FILLER_LLR),
                }
                done += n;
                pos += n;
            }
        };
        write(self.p.payload_bits, self.p.fillers(), None, &mut self.app);
        let mut used = 0;
        for seg in tx_segments(&self.p) {
            let n = seg.len().min(llr.len() - used);
            write(seg.start, n, Some(&llr[used..used + n]), &mut self.app);
            used += n;
        }
        // Mirror half: app[c][j + Zc] = app[c][j].
        for col in self.app.chunks_mut(stride) {
            col.copy_within(FRONT_PAD..FRONT_PAD + zc, FRONT_PAD + zc);
        }
    }

    fn iterate(&mut self, first: bool) {
        let dims = Dims {
            zc: self.p.zc,
            zpad: self.zpad,
            first,
        };
        for r in 0..self.rows {
            let (a, b) = (self.row_start[r], self.row_start[r + 1]);
            let edges = &self.edges[a..b];
            let c2v = &mut self.c2v[a * self.zpad..b * self.zpad];
            match self.level {
                #[cfg(target_arch = "x86_64")]
                SimdLevel::Avx512 => {
                    // SAFETY: level comes from runtime detection of avx512f + avx512bw.
                    unsafe {
                        x86::layer_avx512(
                            &mut self.app,
                            edges,
                            c2v,
                            &mut self.work,
                            &dims,
                            self.correction,
                        )
                    }
                }
                #[cfg(target_arch = "x86_64")]
                SimdLevel::Avx2 => {
                    // SAFETY: level comes from runtime detection of avx2.
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
                _ => scalar::layer(&mut self.app, edges, c2v, &dims, self.correction),
            }
        }
    }

    /// Hard decisions satisfy every active row.
    fn syndrome_ok(&mut self) -> bool {
        let rows = &self.row_start[..self.rows + 1];
        let (app, edges, acc) = (&self.app, &self.edges, &mut self.syndrome);
        match self.level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Avx2 and Avx512 levels come from runtime detection (AVX-512 CPUs
            // have AVX2).
            SimdLevel::Avx2 | SimdLevel::Avx512 => unsafe {
                syndrome_ok_avx2(app, edges, rows, acc)
            },
            _ => syndrome_ok(app, edges, rows, acc),
        }
    }
}

/// Hard decisions satisfy every row listed by `row_start`: per row, the XOR of the
/// shifted blocks (the sign bit of an LLR is its hard decision) must have no sign bit set.
#[inline(always)]
fn syndrome_ok(app: &[i8], edges: &[Edge], row_start: &[usize], acc: &mut [i8]) -> bool {
    let zc = acc.len();
    for r in row_start.windows(2) {
        acc.fill(0);
        for e in &edges[r[0]..r[1]] {
            let src = &app[e.base + e.shift..e.base + e.shift + zc];
            for (a, &v) in acc.iter_mut().zip(src) {
                *a ^= v;
            }
        }
        // OR of all bytes (vectorises, unlike an early-exit search); sign bit = fail.
        if acc.iter().fold(0u8, |a, &x| a | x as u8) & 0x80 != 0 {
            return false;
        }
    }
    true
}

/// The same loops compiled for AVX2, so they vectorise 32 lanes wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn syndrome_ok_avx2(
    app: &[i8],
    edges: &[Edge],
    row_start: &[usize],
    acc: &mut [i8],
) -> bool {
    syndrome_ok(app, edges, row_start, acc)
}

/// Restores `app[c][j + Zc] == app[c][j]` after the window `[shift, shift + Zc)` of a
/// column was rewritten: copies `[Zc, Zc + shift)` down and `[shift, Zc)` up.
pub(crate) fn fixup_scalar(col: &mut [i8], zc: usize, shift: usize) {
    col.copy_within(zc..zc + shift, 0);
    col.copy_within(shift..zc, shift + zc);
}
