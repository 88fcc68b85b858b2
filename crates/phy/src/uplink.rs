//! Reference uplink: one frame of per-antenna ci16 samples to every user's payload,
//! on one thread, with every buffer allocated once in [`UplinkPipeline::new`].
//!
//! Stages: the pilot symbols' FFTs -> CSI at the centre of every ZF group
//! (`zf_block` adjacent subcarriers, Agora's zf block) -> one ZF detector per group
//! -> per data symbol: CP removal and FFT of every antenna into planar slices, then
//! their equalisation (each group's matrix product) while the symbol (600 KiB at
//! 64x16) is still in the caches -> noise from the null subcarriers of every symbol
//! -> per data symbol and 16-subcarrier slice: every user's soft demodulation,
//! descrambling and quantisation straight into the LDPC decoder's `i8` input
//! ([`crate::soft`]) -> per user LDPC decoding and CRC. [`UplinkPipeline::stages`]
//! gives each stage's time.

use std::time::{Duration, Instant};

use radiohost_iq::{Cf32, Ci16};

use crate::coding::{user_c_init, BlockResult, RxChain};
use crate::config::{FrameConfig, SymbolKind};
use crate::csi::{group_channel, CsiEstimator};
use crate::frontend::{planar_index, FrontEnd, PlanarBuf, SLICE};
use crate::group_product::{transpose, Coefficients, GaussCoefficients, GroupProduct};
use crate::qam::{inverse_noise, Demodulator};
use crate::scramble::{sequence_bits, sequence_words};
use crate::simd::Isa;
use crate::soft::SoftSlice;
use crate::zf::{zf_detector, BatchIo, Lanes, ZfBatch, ZfScratch, BATCH};
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
    /// `[batch][user][antenna]` lanes (group `g` in lane `g % 16` of batch `g / 16`):
    /// the channel at each group's centre subcarrier.
    h_re: Vec<Lanes>,
    h_im: Vec<Lanes>,
    /// One batch's detectors `W^T` (`[antenna][user]` lanes) and noise gains.
    batch_wt_re: Vec<Lanes>,
    batch_wt_im: Vec<Lanes>,
    batch_gain: Vec<Lanes>,
    /// `[group][antenna][user]`: each group's `W^T`, contiguous for the products.
    w_transposed: Vec<Cf32>,
    /// `[group][user]`: `[(H^H H)^-1]_kk`.
    noise_gain: Vec<f32>,
    zf: ZfBatch,
    /// The per-group solver's scratch and one group's channel and detector.
    zf_scratch: ZfScratch,
    /// Picks the ZF solver and builds it ([`Isa::detect`] when built).
    isa: Isa,
    group_h: Vec<Cf32>,
    group_w: Vec<Cf32>,
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
        let lanes = cfg.zf_groups().div_ceil(BATCH) * k * m;
        Self {
            front: FrontEnd::new(cfg),
            csi_est: CsiEstimator::new(cfg.pilot_layout, m, k, d),
            pilot_data: vec![Cf32::default(); pilot_syms.len() * m * d],
            pilot_syms,
            h_re: vec![[0.0; BATCH]; lanes],
            h_im: vec![[0.0; BATCH]; lanes],
            batch_wt_re: vec![[0.0; BATCH]; k * m],
            batch_wt_im: vec![[0.0; BATCH]; k * m],
            batch_gain: vec![[0.0; BATCH]; k],
            w_transposed: vec![Cf32::default(); cfg.zf_groups() * k * m],
            noise_gain: vec![0.0; cfg.zf_groups() * k],
            zf: ZfBatch::new(m, k),
            zf_scratch: ZfScratch::with_antennas(m, k),
            isa: Isa::detect(),
            group_h: vec![Cf32::default(); k * m],
            group_w: vec![Cf32::default(); k * m],
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

    /// Group `g`'s ZF detector transposed, `W^T` (`M x K` row-major).
    pub fn detector_transposed(&self, g: usize) -> &[Cf32] {
        let mk = self.antennas * self.users;
        &self.w_transposed[g * mk..(g + 1) * mk]
    }

    /// Group `g`'s ZF detector `W` (`K x M`) as equalisation coefficients.
    pub fn equalizer(&self, g: usize) -> Coefficients<'_> {
        Coefficients::detector(self.detector_transposed(g), self.users, self.antennas)
    }

    /// Group `g`'s reciprocity precoder `gain * W^T` (`M x K`) as coefficients.
    pub fn precoder(&self, g: usize, gain: f32) -> Coefficients<'_> {
        let wt = self.detector_transposed(g);
        Coefficients::precoder_transposed(wt, self.users, self.antennas, gain)
    }

    /// `[(H^H H)^-1]_kk` of user `k` in group `g` (post-equaliser noise per unit of
    /// receiver noise variance).
    pub fn noise_gain(&self, g: usize, k: usize) -> f32 {
        self.noise_gain[g * self.users + k]
    }

    /// ZF of the 16 groups of batch `b` at once (AVX2 or AVX-512), each lane's detector then
    /// copied to its group's contiguous matrix.
    fn zf_batch(&mut self, b: usize) -> Result<(), PhyError> {
        let (k_n, mk) = (self.users, self.antennas * self.users);
        let valid = BATCH.min(self.groups() - b * BATCH);
        let io = BatchIo {
            hr: &self.h_re[b * mk..(b + 1) * mk],
            hi: &self.h_im[b * mk..(b + 1) * mk],
            wtr: &mut self.batch_wt_re,
            wti: &mut self.batch_wt_im,
            noise_gain: &mut self.batch_gain,
        };
        self.zf
            .solve_at(self.isa, io, valid)
            .map_err(|e| PhyError::Zf {
                subcarrier: self.csi_est.group_centre(self.group, b * BATCH + e.lane),
                source: e.source,
            })?;
        let first = b * BATCH;
        let wt = &mut self.w_transposed[first * mk..(first + valid) * mk];
        let ng = &mut self.noise_gain[first * k_n..(first + valid) * k_n];
        // In blocks of 16 entries: element-major order would write 16 streams 8 KiB
        // apart (one L1 set), lane-major order would read a line per element.
        let (re, im) = (&self.batch_wt_re, &self.batch_wt_im);
        for e0 in (0..mk).step_by(BATCH) {
            let n = BATCH.min(mk - e0);
            let (re, im) = (&re[e0..e0 + n], &im[e0..e0 + n]);
            for l in 0..valid {
                let out = &mut wt[l * mk + e0..l * mk + e0 + n];
                for ((o, r), i) in out.iter_mut().zip(re).zip(im) {
                    *o = Cf32::new(r[l], i[l]);
                }
            }
        }
        for (k, gain) in self.batch_gain.iter().enumerate() {
            for l in 0..valid {
                ng[l * k_n + k] = gain[l];
            }
        }
        Ok(())
    }

    /// ZF of group `g` alone (the per-subcarrier solver on the group's channel).
    fn zf_group(&mut self, g: usize) -> Result<(), PhyError> {
        let (m_n, k_n) = (self.antennas, self.users);
        group_channel(&self.h_re, &self.h_im, k_n, m_n, g, &mut self.group_h);
        zf_detector(
            &self.group_h,
            m_n,
            k_n,
            &mut self.zf_scratch,
            &mut self.group_w,
            &mut self.noise_gain[g * k_n..(g + 1) * k_n],
        )
        .map_err(|source| PhyError::Zf {
            subcarrier: self.csi_est.group_centre(self.group, g),
            source,
        })?;
        transpose(
            &self.group_w,
            k_n,
            m_n,
            &mut self.w_transposed[g * m_n * k_n..(g + 1) * m_n * k_n],
        );
        Ok(())
    }

    /// FFT the pilot symbols of every antenna, estimate the channel at every group's
    /// centre and compute each group's ZF detector. Returns the pilot symbols'
    /// null-bin energy and bin count (for the noise estimate).
    ///
    /// # Errors
    /// A wrong sample count, or a group whose channel matrix is rank deficient.
    pub fn process(&mut self, samples: &[Ci16]) -> Result<(f64, usize), PhyError> {
        let m_n = self.antennas;
        if samples.len() != m_n * self.frame_len {
            return Err(PhyError::SampleCount {
                expected: m_n * self.frame_len,
                got: samples.len(),
            });
        }
        let t0 = Instant::now();
        let (e, c) = self
            .front
            .frame_rows(samples, m_n, &self.pilot_syms, &mut self.pilot_data);
        let t1 = Instant::now();
        self.csi_est.estimate_groups(
            &self.pilot_data,
            self.pilot_syms.len(),
            self.group,
            0..usize::MAX,
            &mut self.h_re,
            &mut self.h_im,
        );
        let t2 = Instant::now();
        let groups = self.groups();
        if self.isa >= Isa::Avx2 {
            for b in 0..groups.div_ceil(BATCH) {
                self.zf_batch(b)?;
            }
        } else {
            // The batched solver's portable build is slower than the per-group one
            // (its 16-lane accumulators live in memory).
            for g in 0..groups {
                self.zf_group(g)?;
            }
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
    /// One received data symbol, planar slices (see [`FrontEnd::antenna_planar`]):
    /// each symbol is equalised right after its transforms, while its slices are
    /// still in the caches.
    ul_re: PlanarBuf,
    ul_im: PlanarBuf,
    /// Each group's equaliser prepared for the three-multiplication product.
    equalizers: Vec<GaussCoefficients>,
    /// Every equalised 16-subcarrier slice of the frame, `[symbol][slice][user]`
    /// (planar), demodulated once the frame's noise is known.
    eq_re: Vec<[f32; SLICE]>,
    eq_im: Vec<[f32; SLICE]>,
    /// `[slice][user]`: `1 / noise variance` of every equalised symbol of the frame.
    inv_noise: Vec<[f32; SLICE]>,
    /// Each user's scrambling sequence over the frame's uplink symbols, and the
    /// current slice's part of it.
    sequences: Vec<Vec<u32>>,
    flips: Vec<u128>,
    demod: Demodulator,
    /// `[user][symbol bit]`: one data symbol's decoder input.
    llrs: Vec<i8>,
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
        let ul_bits = ul_syms.len() * cfg.symbol_bits();
        Ok(Self {
            detector: Detector::new(cfg),
            front: FrontEnd::new(cfg),
            ul_re: PlanarBuf::zeroed(d.div_ceil(SLICE) * m),
            ul_im: PlanarBuf::zeroed(d.div_ceil(SLICE) * m),
            eq_re: vec![[0.0; SLICE]; ul_syms.len() * d.div_ceil(SLICE) * k],
            eq_im: vec![[0.0; SLICE]; ul_syms.len() * d.div_ceil(SLICE) * k],
            ul_syms,
            equalizers: vec![GaussCoefficients::default(); cfg.zf_groups()],
            inv_noise: vec![[0.0; SLICE]; d.div_ceil(SLICE) * k],
            sequences: (0..k)
                .map(|u| sequence_words(user_c_init(cfg, u), ul_bits))
                .collect(),
            flips: vec![0; k],
            demod: Demodulator::new(cfg.modulation),
            llrs: vec![0; k * cfg.symbol_bits()],
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
        let mut t = Instant::now();
        let mut lap = |slot: &mut Duration| {
            let now = Instant::now();
            *slot += now - t;
            t = now;
        };
        let isa = Isa::detect();
        let det = &self.detector;
        for (g, prepared) in self.equalizers.iter_mut().enumerate() {
            prepared.fill(isa, &det.equalizer(g));
        }
        lap(&mut st.equalize);
        let group = det.group_size();
        let slices = d.div_ceil(SLICE);
        // The users' rows of slice `s` of data symbol `u` in `eq_re` / `eq_im`.
        let eq_rows = |u: usize, s: usize| (u * slices + s) * k_n..(u * slices + s + 1) * k_n;
        for u in 0..self.ul_syms.len() {
            let (e, c) = self.front.frame_planar(
                samples,
                m_n,
                &self.ul_syms[u..u + 1],
                &mut self.ul_re,
                &mut self.ul_im,
            );
            energy += e;
            count += c;
            lap(&mut st.fft);
            for s in 0..slices {
                let (s0, n) = (s * SLICE, SLICE.min(d - s * SLICE));
                let at = planar_index(0, s, 0, slices, m_n);
                let rows = eq_rows(u, s);
                // Every group with subcarriers in this slice, on its lanes.
                for g in s0 / group..=(s0 + n - 1) / group {
                    let (i0, gn) = det.group_range(g);
                    let lanes = i0.max(s0) - s0..(i0 + gn).min(s0 + n) - s0;
                    GroupProduct::apply_gauss_planar(
                        isa,
                        &self.equalizers[g],
                        &self.ul_re[at..at + m_n],
                        &self.ul_im[at..at + m_n],
                        lanes,
                        &mut self.eq_re[rows.clone()],
                        &mut self.eq_im[rows.clone()],
                    );
                }
            }
            lap(&mut st.equalize);
        }
        let noise = energy / count.max(1) as f64;
        out.noise_var = noise;
        for g in 0..det.groups() {
            let (i0, n) = det.group_range(g);
            for k in 0..k_n {
                let inv = inverse_noise((noise * det.noise_gain(g, k) as f64) as f32);
                for i in i0..i0 + n {
                    self.inv_noise[(i / SLICE) * k_n + k][i % SLICE] = inv;
                }
            }
        }
        let blocks = self.cfg.blocks_per_symbol;
        let pb = self.cfg.block_payload_bits();
        let (qm, sb) = (
            self.cfg.modulation.bits_per_symbol(),
            self.cfg.symbol_bits(),
        );
        lap(&mut st.demod);
        for u in 0..self.ul_syms.len() {
            for s in 0..slices {
                let n = SLICE.min(d - s * SLICE);
                let rows = eq_rows(u, s);
                let first_bit = s * SLICE * qm;
                for (f, words) in self.flips.iter_mut().zip(&self.sequences) {
                    *f = sequence_bits(words, u * sb + first_bit, n * qm);
                }
                let slice = SoftSlice {
                    re: &self.eq_re[rows.clone()],
                    im: &self.eq_im[rows],
                    inv_noise: &self.inv_noise[s * k_n..(s + 1) * k_n],
                    flips: &self.flips,
                    symbols: n,
                };
                let llrs = &mut self.llrs;
                if !self.demod.slice_llrs_i8(isa, &slice, llrs, sb, first_bit) {
                    let index = first_bit;
                    return Err(radiohost_ldpc::LdpcError::NanLlr { index }.into());
                }
            }
            lap(&mut st.demod);
            let (payloads, results) = (&mut out.payload, &mut out.blocks);
            self.rx
                .decode_users_quantized(&self.llrs, sb, k_n, |k, b, bits, result| {
                    let at = (u * blocks + b) * pb;
                    payloads[k][at..at + pb].copy_from_slice(bits);
                    results[k][u * blocks + b] = result;
                })?;
            lap(&mut st.decode);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Generator;

    /// The fused path (planar slices, `i8` LLRs) decodes exactly what the float chain
    /// decodes from the same frame: interleaved equalisation ([`GroupProduct::apply_gauss`]),
    /// per-subcarrier noise variances, [`RxChain::symbol`] (float demodulation,
    /// descrambling, the decoder's own quantisation). Same payload bits and decoder
    /// iterations in every block, for whole and partial slices, several groups per
    /// slice (16x4: groups of 4, 600 subcarriers) and every order, at an SNR where the
    /// decoder has work to do; at 64x16 (Zc = 72) the pipeline decodes 8 users'
    /// blocks per batch, the float chain one block at a time.
    #[test]
    fn fused_soft_path_matches_the_float_chain() {
        let cases = [
            ("64x16", include_str!("../configs/64x16.json"), "16QAM", 0.0),
            ("16x4", include_str!("../configs/16x4.json"), "16QAM", 8.0),
            (
                "16x4 QPSK",
                include_str!("../configs/16x4.json"),
                "QPSK",
                2.0,
            ),
            (
                "16x4 64QAM",
                include_str!("../configs/16x4.json"),
                "64QAM",
                14.0,
            ),
            (
                "16x4 256QAM",
                include_str!("../configs/16x4.json"),
                "256QAM",
                20.0,
            ),
        ];
        for (name, json, modulation, snr) in cases {
            let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
            v["modulation"] = modulation.into();
            v["snr_db"] = snr.into();
            let cfg = FrameConfig::from_json(&v.to_string()).unwrap();
            let frame = Generator::new(&cfg).frame(3).unwrap();
            let mut pipe = UplinkPipeline::new(&cfg).unwrap();
            let mut out = UplinkOutput::for_config(&cfg);
            pipe.process_frame(&frame.samples, &mut out).unwrap();

            let (k_n, d, m_n) = (cfg.users, cfg.data_num, cfg.antennas);
            // Every data symbol's slices at once (the pipeline keeps one at a time).
            let slices = d.div_ceil(SLICE);
            let mut ul_re = PlanarBuf::zeroed(pipe.ul_syms.len() * slices * m_n);
            let mut ul_im = PlanarBuf::zeroed(pipe.ul_syms.len() * slices * m_n);
            FrontEnd::new(&cfg).frame_planar(
                &frame.samples,
                m_n,
                &pipe.ul_syms,
                &mut ul_re,
                &mut ul_im,
            );
            let det = &pipe.detector;
            let mut nv = vec![0f32; k_n * d];
            for g in 0..det.groups() {
                let (i0, n) = det.group_range(g);
                for k in 0..k_n {
                    let v = (out.noise_var * det.noise_gain(g, k) as f64) as f32;
                    nv[k * d + i0..k * d + i0 + n].fill(v);
                }
            }
            let (blocks, pb) = (cfg.blocks_per_symbol, cfg.block_payload_bits());
            let mut eq = vec![Cf32::default(); k_n * d];
            let mut rx = RxChain::new(&cfg).unwrap();
            let mut iterations = 0;
            for u in 0..pipe.ul_syms.len() {
                for g in 0..det.groups() {
                    let (i0, n) = det.group_range(g);
                    for s in i0 / SLICE..(i0 + n).div_ceil(SLICE) {
                        let s0 = s * SLICE;
                        let lanes = i0.max(s0) - s0..(i0 + n).min(s0 + SLICE) - s0;
                        let at = planar_index(u, s, 0, slices, m_n);
                        GroupProduct::apply_gauss(
                            Isa::detect(),
                            &pipe.equalizers[g],
                            &ul_re[at..at + m_n],
                            &ul_im[at..at + m_n],
                            lanes,
                            &mut eq,
                            d,
                            s0,
                        );
                    }
                }
                for k in 0..k_n {
                    let mut payload = vec![0u8; blocks * pb];
                    let mut results = vec![BlockResult::default(); blocks];
                    rx.symbol(
                        &eq[k * d..(k + 1) * d],
                        &nv[k * d..(k + 1) * d],
                        user_c_init(&cfg, k),
                        u,
                        &mut payload,
                        &mut results,
                    )
                    .unwrap();
                    let got = &out.payload[k][u * blocks * pb..(u + 1) * blocks * pb];
                    assert!(got == &payload[..], "{name}: symbol {u} user {k} payload");
                    assert_eq!(
                        &out.blocks[k][u * blocks..(u + 1) * blocks],
                        &results[..],
                        "{name}: symbol {u} user {k} blocks"
                    );
                    iterations += results.iter().map(|r| r.iterations).sum::<u32>();
                }
            }
            let total = (pipe.ul_syms.len() * k_n * blocks) as u32;
            eprintln!("{name}: {iterations} decoder iterations over {total} blocks");
            assert!(iterations > total, "{name}: the decoder had nothing to do");
        }
    }

    /// The batched ZF (AVX2 and AVX-512 builds) and the per-group solver (what the
    /// portable build runs) give the same detectors and noise gains on a real frame.
    #[test]
    fn batched_and_per_group_zf_agree() {
        let cfg = FrameConfig::from_json(include_str!("../configs/64x16.json")).unwrap();
        let frame = Generator::new(&cfg).frame(0).unwrap();
        let mut single = Detector::new(&cfg);
        single.isa = Isa::Portable;
        single.process(&frame.samples).unwrap();
        for isa in Isa::available().into_iter().filter(|&i| i >= Isa::Avx2) {
            let mut batched = Detector::new(&cfg);
            batched.isa = isa;
            batched.process(&frame.samples).unwrap();
            same_detectors(&cfg, &batched, &single);
        }
    }

    fn same_detectors(cfg: &FrameConfig, batched: &Detector, single: &Detector) {
        assert!(
            !cfg.zf_groups().is_multiple_of(BATCH),
            "the config should leave a partial batch"
        );
        for g in 0..cfg.zf_groups() {
            let (a, b) = (
                batched.detector_transposed(g),
                single.detector_transposed(g),
            );
            let scale = b.iter().map(|v| v.norm()).fold(0.0, f32::max);
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).norm() <= 1e-4 * scale, "group {g}: {x} vs {y}");
            }
            for k in 0..cfg.users {
                let (x, y) = (batched.noise_gain(g, k), single.noise_gain(g, k));
                assert!(
                    (x - y).abs() <= 1e-4 * y.abs(),
                    "group {g} user {k} noise gain"
                );
            }
        }
    }
}
