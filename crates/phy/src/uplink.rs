//! Reference uplink: one frame of per-antenna ci16 samples to every user's payload,
//! on one thread, with every buffer allocated once in [`UplinkPipeline::new`].
//!
//! Stages: CP removal + batched FFT per antenna -> noise from null subcarriers ->
//! CSI from pilots -> ZF per subcarrier -> per data symbol: equalisation, then per
//! user soft demodulation, descrambling, LDPC decoding and CRC.

use radiohost_iq::{Cf32, Ci16};

use crate::coding::{user_c_init, BlockResult, RxChain};
use crate::config::{FrameConfig, SymbolKind};
use crate::csi::CsiEstimator;
use crate::frontend::FrontEnd;
use crate::zf::{equalize, zf_detector, ZfScratch};
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

/// Channel estimate and detector of one frame, reusable by the downlink.
#[derive(Debug)]
pub struct Detector {
    front: FrontEnd,
    csi_est: CsiEstimator,
    pilot_syms: Vec<usize>,
    pilot_data: Vec<Cf32>,
    /// `[subcarrier][user][antenna]`.
    pub csi: Vec<Cf32>,
    /// `[subcarrier][user][antenna]` (row-major `K x M` per subcarrier).
    pub w: Vec<Cf32>,
    /// `[subcarrier][user]`: `[(H^H H)^-1]_kk`.
    pub noise_gain: Vec<f32>,
    zf_scratch: ZfScratch,
    antennas: usize,
    users: usize,
    data_num: usize,
    frame_len: usize,
}

impl Detector {
    pub fn new(cfg: &FrameConfig) -> Self {
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let pilot_syms = cfg.symbols_of(SymbolKind::Pilot);
        Self {
            front: FrontEnd::new(cfg),
            csi_est: CsiEstimator::new(cfg.pilot_layout, m, k, d),
            pilot_data: vec![Cf32::default(); pilot_syms.len() * m * d],
            pilot_syms,
            csi: vec![Cf32::default(); d * k * m],
            w: vec![Cf32::default(); d * k * m],
            noise_gain: vec![0.0; d * k],
            zf_scratch: ZfScratch::with_antennas(m, k),
            antennas: m,
            users: k,
            data_num: d,
            frame_len: cfg.frame_len(),
        }
    }

    /// FFT the pilot symbols of every antenna, estimate CSI and compute the ZF
    /// detector of every subcarrier. Returns the pilot symbols' null-bin energy and
    /// bin count (for the noise estimate).
    ///
    /// # Errors
    /// A wrong sample count, or a subcarrier whose channel matrix is rank deficient.
    pub fn process(&mut self, samples: &[Ci16]) -> Result<(f64, usize), PhyError> {
        let (m_n, k_n, d) = (self.antennas, self.users, self.data_num);
        if samples.len() != m_n * self.frame_len {
            return Err(PhyError::SampleCount {
                expected: m_n * self.frame_len,
                got: samples.len(),
            });
        }
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
        self.csi_est
            .estimate(&self.pilot_data, self.pilot_syms.len(), &mut self.csi);
        let mk = m_n * k_n;
        for i in 0..d {
            zf_detector(
                &self.csi[i * mk..(i + 1) * mk],
                m_n,
                k_n,
                &mut self.zf_scratch,
                &mut self.w[i * mk..(i + 1) * mk],
                &mut self.noise_gain[i * k_n..(i + 1) * k_n],
            )
            .map_err(|source| PhyError::Zf {
                subcarrier: i,
                source,
            })?;
        }
        Ok((e, c))
    }
}

/// The reference uplink pipeline.
pub struct UplinkPipeline {
    cfg: FrameConfig,
    detector: Detector,
    front: FrontEnd,
    ul_syms: Vec<usize>,
    ul_data: Vec<Cf32>,
    y: Vec<Cf32>,
    x: Vec<Cf32>,
    eq: Vec<Cf32>,
    nv: Vec<f32>,
    rx: RxChain,
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
            ul_data: vec![Cf32::default(); ul_syms.len() * m * d],
            ul_syms,
            y: vec![Cf32::default(); m],
            x: vec![Cf32::default(); k],
            eq: vec![Cf32::default(); k * d],
            nv: vec![0.0; k * d],
            rx: RxChain::new(cfg)?,
            cfg: cfg.clone(),
        })
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
        let frame_len = self.cfg.frame_len();
        for m in 0..m_n {
            let frame = &samples[m * frame_len..(m + 1) * frame_len];
            let (e, c) =
                self.front
                    .antenna(frame, &self.ul_syms, &mut self.ul_data, m * d, m_n * d);
            energy += e;
            count += c;
        }
        let noise = energy / count.max(1) as f64;
        out.noise_var = noise;
        let blocks = self.cfg.blocks_per_symbol;
        let pb = self.cfg.block_payload_bits();
        let mk = m_n * k_n;
        for u in 0..self.ul_syms.len() {
            let sym = &self.ul_data[u * m_n * d..(u + 1) * m_n * d];
            for i in 0..d {
                for (m, y) in self.y.iter_mut().enumerate() {
                    *y = sym[m * d + i];
                }
                equalize(&self.detector.w[i * mk..(i + 1) * mk], &self.y, &mut self.x);
                for k in 0..k_n {
                    self.eq[k * d + i] = self.x[k];
                    self.nv[k * d + i] =
                        (noise * self.detector.noise_gain[i * k_n + k] as f64) as f32;
                }
            }
            for k in 0..k_n {
                let payload = &mut out.payload[k][u * blocks * pb..(u + 1) * blocks * pb];
                let results = &mut out.blocks[k][u * blocks..(u + 1) * blocks];
                self.rx.symbol(
                    &self.eq[k * d..(k + 1) * d],
                    &self.nv[k * d..(k + 1) * d],
                    user_c_init(&self.cfg, k),
                    u,
                    payload,
                    results,
                )?;
            }
        }
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
