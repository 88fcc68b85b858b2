//! Reference uplink: one frame of per-antenna ci16 samples to every user's payload,
//! on one thread, with every buffer allocated once in [`UplinkPipeline::new`].
//!
//! Stages: CP removal + batched FFT per antenna -> noise from null subcarriers ->
//! CSI at the centre of every ZF group (`zf_block` adjacent subcarriers, Agora's zf
//! block) -> one ZF detector per group -> per data symbol: equalisation of each group
//! as one matrix product, then per user soft demodulation, descrambling, LDPC
//! decoding and CRC. [`UplinkPipeline::stages`] gives each stage's time.

use std::time::{Duration, Instant};

use radiohost_iq::{Cf32, Ci16};

use crate::coding::{user_c_init, BlockResult, RxChain};
use crate::config::{FrameConfig, SymbolKind};
use crate::csi::CsiEstimator;
use crate::frontend::{planar_index, FrontEnd, SLICE};
use crate::group_product::{transpose, Coefficients, GroupProduct};
use crate::simd::Isa;
use crate::zf::{zf_detector, ZfScratch};
use crate::PhyError;

/// Everything the uplink recovered from one frame.
#[derive(Clone, Debug, Default)]
pub struct UplinkOutput {
    /// Per user, the decoded payload bits of every block in order.
    pub payload: Vec<Vec<u8>>,
    /// Per user, per block: CRC result and decoder iterations.
    pub blocks: Vec<Vec<BlockResult>>,
    /// Measured noise variance per FFT bin (receiver units).
    pub noise_var: f64,
}

impl UplinkOutput {
    /// Buffers sized for `cfg`, to be reused frame after frame.
    pub fn for_config(cfg: &FrameConfig) -> Self {
        Self {
            payload: vec![vec![0; cfg.uplink_blocks() * cfg.block_payload_bits()]; cfg.users],
            blocks: vec![vec![BlockResult::default(); cfg.uplink_blocks()]; cfg.users],
            noise_var: 0.0,
        }
    }
}

/// Time one frame spent in each stage (one thread, so core time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UplinkStages {
    /// CP removal, FFT, data-subcarrier gather and null-bin energy of every symbol.
    pub fft: Duration,
    /// Pilot channel estimate at every ZF group's centre.
    pub csi: Duration,
    /// One ZF detector per group.
    pub zf: Duration,
    /// Equalisation of every data symbol (group matrix products) and noise scaling.
    pub equalize: Duration,
    /// Soft demodulation and descrambling.
    pub demod: Duration,
    /// LDPC decoding and block CRC.
    pub decode: Duration,
}

impl UplinkStages {
    /// `(name, time)` of every stage, in pipeline order.
    pub fn named(&self) -> [(&'static str, Duration); 6] {
        [
            ("fft", self.fft),
            ("csi", self.csi),
            ("zf", self.zf),
            ("equalize", self.equalize),
            ("demod", self.demod),
            ("decode", self.decode),
        ]
    }
}

/// Channel estimate and detectors of one frame, reusable by the downlink: one ZF
/// detector per group of `zf_block` adjacent data subcarriers, computed from the
/// channel at the group's centre.
#[derive(Debug)]
pub struct Detector {
    front: FrontEnd,
    csi_est: CsiEstimator,
    pilot_syms: Vec<usize>,
    pilot_data: Vec<Cf32>,
    /// `[group][user][antenna]`: the channel at each group's centre subcarrier.
    pub h: Vec<Cf32>,
    /// `[group][user][antenna]` (row-major `K x M` per group).
    pub w: Vec<Cf32>,
    /// `[group][antenna][user]`: each `W` transposed, what equalisation reads.
    pub w_transposed: Vec<Cf32>,
    /// `[group][user]`: `[(H^H H)^-1]_kk`.
    pub noise_gain: Vec<f32>,
    zf_scratch: ZfScratch,
    antennas: usize,
    users: usize,
    data_num: usize,
    group: usize,
    frame_len: usize,
    /// Stage times of the last [`Self::process`] (fft, csi, zf filled).
    pub stages: UplinkStages,
}

impl Detector {
    pub fn new(cfg: &FrameConfig) -> Self {
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let pilot_syms = cfg.symbols_of(SymbolKind::Pilot);
        let groups = cfg.zf_groups();
        Self {
            front: FrontEnd::new(cfg),
            csi_est: CsiEstimator::new(cfg.pilot_layout, m, k, d),
            pilot_data: vec![Cf32::default(); pilot_syms.len() * m * d],
            pilot_syms,
            h: vec![Cf32::default(); groups * k * m],
            w: vec![Cf32::default(); groups * k * m],
            w_transposed: vec![Cf32::default(); groups * k * m],
            noise_gain: vec![0.0; groups * k],
            zf_scratch: ZfScratch::with_antennas(m, k),
            antennas: m,
            users: k,
            data_num: d,
            group: cfg.zf_block,
            frame_len: cfg.frame_len(),
            stages: UplinkStages::default(),
        }
    }

    /// Subcarriers per ZF group.
    pub fn group_size(&self) -> usize {
        self.group
    }

    /// The data subcarriers of group `g`: `(first, count)`.
    pub fn group_range(&self, g: usize) -> (usize, usize) {
        let i0 = g * self.group;
        (i0, self.group.min(self.data_num - i0))
    }

    /// Number of ZF groups.
    pub fn groups(&self) -> usize {
        self.data_num.div_ceil(self.group)
    }

    /// The detector of group `g` (`K x M`, row-major).
    pub fn detector(&self, g: usize) -> &[Cf32] {
        let mk = self.antennas * self.users;
        &self.w[g * mk..(g + 1) * mk]
    }

    /// The detector of group `g` transposed (`M x K`, row-major).
    pub fn detector_transposed(&self, g: usize) -> &[Cf32] {
        let mk = self.antennas * self.users;
        &self.w_transposed[g * mk..(g + 1) * mk]
    }

    /// FFT the pilot symbols of every antenna, estimate the channel at every group's
    /// centre and compute each group's ZF detector. Returns the pilot symbols'
    /// null-bin energy and bin count (for the noise estimate).
    ///
    /// # Errors
    /// A wrong sample count, or a group whose channel matrix is rank deficient.
    pub fn process(&mut self, samples: &[Ci16]) -> Result<(f64, usize), PhyError> {
        let (m_n, k_n, d) = (self.antennas, self.users, self.data_num);
        if samples.len() != m_n * self.frame_len {
            return Err(PhyError::SampleCount {
                expected: m_n * self.frame_len,
                got: samples.len(),
            });
        }
        let t0 = Instant::now();
        let (mut e, mut c) = (0.0, 0);
        for m in 0..m_n {
            let frame = &samples[m * self.frame_len..(m + 1) * self.frame_len];
            let (e1, c1) = self.front.antenna(
                frame,
                &self.pilot_syms,
                &mut self.pilot_data,
                m * d,
                m_n * d,
            );
            e += e1;
            c += c1;
        }
        let t1 = Instant::now();
        self.csi_est.estimate_groups(
            &self.pilot_data,
            self.pilot_syms.len(),
            self.group,
            &mut self.h,
        );
        let t2 = Instant::now();
        let mk = m_n * k_n;
        for g in 0..self.groups() {
            zf_detector(
                &self.h[g * mk..(g + 1) * mk],
                m_n,
                k_n,
                &mut self.zf_scratch,
                &mut self.w[g * mk..(g + 1) * mk],
                &mut self.noise_gain[g * k_n..(g + 1) * k_n],
            )
            .map_err(|source| PhyError::Zf {
                subcarrier: self.csi_est.group_centre(self.group, g),
                source,
            })?;
            transpose(
                &self.w[g * mk..(g + 1) * mk],
                k_n,
                m_n,
                &mut self.w_transposed[g * mk..(g + 1) * mk],
            );
        }
        let t3 = Instant::now();
        self.stages = UplinkStages {
            fft: t1 - t0,
            csi: t2 - t1,
            zf: t3 - t2,
            ..UplinkStages::default()
        };
        Ok((e, c))
    }
}

/// The reference uplink pipeline.
pub struct UplinkPipeline {
    cfg: FrameConfig,
    detector: Detector,
    front: FrontEnd,
    ul_syms: Vec<usize>,
    /// Received data symbols, planar slices (see [`FrontEnd::antenna_planar`]).
    ul_re: Vec<[f32; SLICE]>,
    ul_im: Vec<[f32; SLICE]>,
    eq: Vec<Cf32>,
    nv: Vec<f32>,
    rx: RxChain,
    stages: UplinkStages,
}

impl UplinkPipeline {
    /// Plan and allocate everything for `cfg`.
    ///
    /// # Errors
    /// If the LDPC decoder rejects the code parameters.
    pub fn new(cfg: &FrameConfig) -> Result<Self, PhyError> {
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let ul_syms = cfg.symbols_of(SymbolKind::Uplink);
        Ok(Self {
            detector: Detector::new(cfg),
            front: FrontEnd::new(cfg),
            ul_re: vec![[0.0; SLICE]; ul_syms.len() * d.div_ceil(SLICE) * m],
            ul_im: vec![[0.0; SLICE]; ul_syms.len() * d.div_ceil(SLICE) * m],
            ul_syms,
            eq: vec![Cf32::default(); k * d],
            nv: vec![0.0; k * d],
            rx: RxChain::new(cfg)?,
            stages: UplinkStages::default(),
            cfg: cfg.clone(),
        })
    }

    /// Time each stage took in the last [`Self::process_frame`].
    pub fn stages(&self) -> UplinkStages {
        self.stages
    }

    /// Decode one frame (`samples` antenna-major, `frame_len` per antenna) into `out`
    /// (from [`UplinkOutput::for_config`]).
    ///
    /// # Errors
    /// Wrong sample count, rank-deficient channel, or an LDPC input error.
    pub fn process_frame(
        &mut self,
        samples: &[Ci16],
        out: &mut UplinkOutput,
    ) -> Result<(), PhyError> {
        let (m_n, k_n, d) = (self.cfg.antennas, self.cfg.users, self.cfg.data_num);
        let (mut energy, mut count) = self.detector.process(samples)?;
        let mut st = self.detector.stages;
        let t0 = Instant::now();
        let frame_len = self.cfg.frame_len();
        for m in 0..m_n {
            let frame = &samples[m * frame_len..(m + 1) * frame_len];
            let (e, c) = self.front.antenna_planar(
                frame,
                &self.ul_syms,
                &mut self.ul_re,
                &mut self.ul_im,
                m,
                m_n,
            );
            energy += e;
            count += c;
        }
        let noise = energy / count.max(1) as f64;
        out.noise_var = noise;
        let mut t = Instant::now();
        st.fft += t - t0;
        let det = &self.detector;
        for g in 0..det.groups() {
            let (i0, n) = det.group_range(g);
            for k in 0..k_n {
                let v = (noise * det.noise_gain[g * k_n + k] as f64) as f32;
                self.nv[k * d + i0..k * d + i0 + n].fill(v);
            }
        }
        let isa = Isa::detect();
        let blocks = self.cfg.blocks_per_symbol;
        let pb = self.cfg.block_payload_bits();
        let slices = d.div_ceil(SLICE);
        let mut lap = |slot: &mut Duration| {
            let now = Instant::now();
            *slot += now - t;
            t = now;
        };
        lap(&mut st.equalize);
        for u in 0..self.ul_syms.len() {
            for g in 0..det.groups() {
                let (i0, n) = det.group_range(g);
                let w = Coefficients::detector(det.detector_transposed(g), k_n, m_n);
                // The 16-subcarrier slices this group covers, and its lanes in each.
                for s in i0 / SLICE..(i0 + n).div_ceil(SLICE) {
                    let s0 = s * SLICE;
                    let lanes = i0.max(s0) - s0..(i0 + n).min(s0 + SLICE) - s0;
                    let at = planar_index(u, s, 0, slices, m_n);
                    GroupProduct::apply_planar(
                        isa,
                        w,
                        &self.ul_re[at..at + m_n],
                        &self.ul_im[at..at + m_n],
                        lanes,
                        &mut self.eq,
                        d,
                        s0,
                    );
                }
            }
            lap(&mut st.equalize);
            for k in 0..k_n {
                self.rx.soft_bits(
                    &self.eq[k * d..(k + 1) * d],
                    &self.nv[k * d..(k + 1) * d],
                    user_c_init(&self.cfg, k),
                    u,
                );
                lap(&mut st.demod);
                let payload = &mut out.payload[k][u * blocks * pb..(u + 1) * blocks * pb];
                let results = &mut out.blocks[k][u * blocks..(u + 1) * blocks];
                self.rx.decode(payload, results)?;
                lap(&mut st.decode);
            }
        }
        self.stages = st;
        Ok(())
    }
}

/// Bit and block errors of decoded payloads against the truth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ErrorCount {
    pub bits: u64,
    pub bit_errors: u64,
    pub blocks: u64,
    pub block_errors: u64,
    /// Blocks whose CRC failed (what a receiver would know without the truth).
    pub crc_failures: u64,
}

impl ErrorCount {
    /// Compare per-user payloads block by block.
    pub fn compare(
        truth: &[Vec<u8>],
        got: &[Vec<u8>],
        results: &[Vec<BlockResult>],
        block_bits: usize,
    ) -> Self {
        let mut c = ErrorCount::default();
        for ((t, g), r) in truth.iter().zip(got).zip(results) {
            for ((tb, gb), res) in t.chunks(block_bits).zip(g.chunks(block_bits)).zip(r) {
                let errs = tb.iter().zip(gb).filter(|(a, b)| a != b).count() as u64;
                c.bits += tb.len() as u64;
                c.bit_errors += errs;
                c.blocks += 1;
                c.block_errors += (errs > 0) as u64;
                c.crc_failures += (!res.crc_ok) as u64;
            }
        }
        c
    }

    pub fn add(&mut self, o: &ErrorCount) {
        self.bits += o.bits;
        self.bit_errors += o.bit_errors;
        self.blocks += o.blocks;
        self.block_errors += o.block_errors;
        self.crc_failures += o.crc_failures;
    }
}
