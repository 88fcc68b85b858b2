//! Reference downlink and the emulated user receivers that verify it.
//!
//! Base station ([`DownlinkPipeline`]): CSI and ZF from the uplink pilots of the same
//! frame (TDD reciprocity, one detector per ZF group) -> per user CRC, LDPC,
//! scrambling, QAM -> ZF precoding `x = beta * W^T s` of each group as one matrix
//! product -> IFFT + CP per antenna -> ci16. The first `D`
//! symbol carries every user's pilot sequence, precoded like data: each user
//! equalises the following `D` symbols with the gain it measures there.
//!
//! Users ([`UserEmulator`]): the air (transposed uplink channel, white noise at
//! `snr_db`, the user's own AGC and ci16 ADC) and a single-antenna receiver (CP
//! removal, FFT, gain from the reference symbol, noise from null subcarriers, soft
//! demodulation, descrambling, LDPC decoding, CRC).

use std::time::{Duration, Instant};

use radiohost_iq::{Cf32, Ci16};
use rand::Rng;

use crate::channel::{complex_gaussian, ChannelRealization};
use crate::coding::{user_c_init, BlockResult, RxChain, TxChain};
use crate::config::{FrameConfig, SymbolKind};
use crate::csi::pilot_sequence;
use crate::frontend::{FrontEnd, Synthesizer};
use crate::generator::TARGET_RMS;
use crate::group_product::{GaussCoefficients, GroupProduct, LANES};
use crate::simd::Isa;
use crate::uplink::Detector;
use crate::PhyError;

/// What the base station reports about a transmitted frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DownlinkInfo {
    /// Digital gain from unit total power per subcarrier to ci16 full scale.
    pub tx_gain: f32,
    /// Precoder normalisation `beta`.
    pub beta: f32,
}

/// Time one frame spent in each base-station stage (one thread, so core time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DownlinkStages {
    /// Pilot FFTs, CSI and ZF of the frame's uplink pilots (the precoders).
    pub detector: Duration,
    /// Block CRC and LDPC encoding.
    pub encode: Duration,
    /// Scrambling and QAM.
    pub modulate: Duration,
    /// Precoding of every group (matrix products).
    pub precode: Duration,
    /// Subcarrier mapping, IFFT, cyclic prefix and ci16 conversion per antenna.
    pub ifft: Duration,
}

impl DownlinkStages {
    /// `(name, time)` of every stage, in pipeline order.
    pub fn named(&self) -> [(&'static str, Duration); 5] {
        [
            ("detector", self.detector),
            ("encode", self.encode),
            ("modulate", self.modulate),
            ("precode", self.precode),
            ("ifft", self.ifft),
        ]
    }
}

/// The reference downlink pipeline.
pub struct DownlinkPipeline {
    cfg: FrameConfig,
    detector: Detector,
    tx: TxChain,
    synth: Synthesizer,
    /// The reference symbol of every user (each user's pilot sequence), planar.
    pilot_re: Vec<[f32; LANES]>,
    pilot_im: Vec<[f32; LANES]>,
    dl_syms: Vec<usize>,
    /// One symbol of every user, planar `[slice][user]` (what the precoder reads).
    user_re: Vec<[f32; LANES]>,
    user_im: Vec<[f32; LANES]>,
    /// Each group's precoder (with `beta`) prepared for the three-multiplication
    /// product.
    precoders: Vec<GaussCoefficients>,
    /// One symbol of every antenna, laid out as the synthesiser reads it.
    ant_syms: Vec<Cf32>,
    stages: DownlinkStages,
}

impl DownlinkPipeline {
    pub fn new(cfg: &FrameConfig) -> Self {
        let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let rows = d.div_ceil(LANES) * k;
        let (mut pilot_re, mut pilot_im) = (vec![[0.0; LANES]; rows], vec![[0.0; LANES]; rows]);
        for (i, p) in pilot_sequence(d).iter().enumerate() {
            for u in 0..k {
                pilot_re[i / LANES * k + u][i % LANES] = p.re;
                pilot_im[i / LANES * k + u][i % LANES] = p.im;
            }
        }
        let synth = Synthesizer::new(cfg);
        Self {
            detector: Detector::new(cfg),
            tx: TxChain::new(cfg),
            ant_syms: synth.layout().zeroed(m),
            synth,
            pilot_re,
            pilot_im,
            dl_syms: cfg.symbols_of(SymbolKind::Downlink),
            user_re: vec![[0.0; LANES]; rows],
            user_im: vec![[0.0; LANES]; rows],
            precoders: vec![GaussCoefficients::default(); cfg.zf_groups()],
            stages: DownlinkStages::default(),
            cfg: cfg.clone(),
        }
    }

    /// Time each stage took in the last [`Self::process_frame`].
    pub fn stages(&self) -> DownlinkStages {
        self.stages
    }

    /// From the received frame (`rx_samples`, for its pilots) and each user's payload
    /// (`downlink_blocks * block_payload_bits` bits), write the transmitted frame into
    /// `tx_samples` (antenna-major, `frame_len` per antenna; only `D` symbols are
    /// non-zero).
    ///
    /// # Errors
    /// Wrong buffer sizes, rank-deficient channel, or payload bytes that are not bits.
    pub fn process_frame(
        &mut self,
        rx_samples: &[Ci16],
        payload: &[Vec<u8>],
        tx_samples: &mut [Ci16],
    ) -> Result<DownlinkInfo, PhyError> {
        let cfg = &self.cfg;
        let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let frame_len = cfg.frame_len();
        if tx_samples.len() != m_n * frame_len {
            return Err(PhyError::SampleCount {
                expected: m_n * frame_len,
                got: tx_samples.len(),
            });
        }
        let pb = cfg.block_payload_bits();
        let blocks = cfg.blocks_per_symbol;
        let need = cfg.downlink_blocks() * pb;
        if payload.len() != k_n || payload.iter().any(|p| p.len() != need) {
            return Err(PhyError::PayloadSize {
                users: k_n,
                bits_per_user: need,
            });
        }
        let t0 = Instant::now();
        self.detector.process(rx_samples)?;
        let det = &self.detector;
        // beta: total transmit power K per subcarrier on average over the band (each
        // group's noise gains count once per subcarrier of the group).
        let total: f64 = (0..det.groups())
            .map(|g| {
                let gains: f64 = (0..k_n).map(|k| det.noise_gain(g, k) as f64).sum();
                det.group_range(g).1 as f64 * gains
            })
            .sum();
        let beta = (k_n as f64 * d as f64 / total.max(f64::MIN_POSITIVE)).sqrt() as f32;
        let per_antenna = (k_n * d) as f64 / (cfg.fft_size * m_n) as f64;
        let tx_gain = TARGET_RMS / per_antenna.sqrt() as f32;
        let sym_len = cfg.symbol_len();
        // Only the symbols the synthesiser does not write need zeros (a whole-frame
        // fill cost ~0.4 ms of memory traffic per 64x16 frame).
        for sym in (0..cfg.schedule.len()).filter(|s| !self.dl_syms.contains(s)) {
            for m in 0..m_n {
                tx_samples[m * frame_len + sym * sym_len..][..sym_len].fill(Ci16::default());
            }
        }
        let isa = Isa::detect();
        let mut st = DownlinkStages::default();
        let mut t = Instant::now();
        st.detector = t - t0;
        for (g, prepared) in self.precoders.iter_mut().enumerate() {
            prepared.fill(isa, &det.precoder(g, beta));
        }
        let now = Instant::now();
        st.precode += now - t;
        t = now;
        let mut lap = |slot: &mut Duration| {
            let now = Instant::now();
            *slot += now - t;
            t = now;
        };
        for (j, &sym) in self.dl_syms.iter().enumerate() {
            let (user_re, user_im) = if j == 0 {
                (&self.pilot_re, &self.pilot_im)
            } else {
                let u = j - 1;
                for (k, user_payload) in payload.iter().enumerate() {
                    let bits = &user_payload[u * blocks * pb..(u + 1) * blocks * pb];
                    self.tx.encode(bits)?;
                    lap(&mut st.encode);
                    let (re, im) = (&mut self.user_re[k..], &mut self.user_im[k..]);
                    self.tx.modulate_planar(user_c_init(cfg, k), u, re, im, k_n);
                    lap(&mut st.modulate);
                }
                (&self.user_re, &self.user_im)
            };
            let layout = self.synth.layout();
            for g in 0..det.groups() {
                let (i0, n) = det.group_range(g);
                let p = &self.precoders[g];
                // The 16-subcarrier slices this group covers, and its lanes in each;
                // each piece straight to where the synthesiser reads it.
                for s in i0 / LANES..(i0 + n).div_ceil(LANES) {
                    let s0 = s * LANES;
                    let lanes = i0.max(s0) - s0..(i0 + n).min(s0 + LANES) - s0;
                    let rows = s * k_n..(s + 1) * k_n;
                    for (p0, part) in layout.pieces(s0, lanes) {
                        GroupProduct::apply_gauss(
                            isa,
                            p,
                            &user_re[rows.clone()],
                            &user_im[rows.clone()],
                            part,
                            &mut self.ant_syms,
                            layout.stride(),
                            p0,
                        );
                    }
                }
            }
            lap(&mut st.precode);
            self.synth.antennas_ci16(
                &self.ant_syms,
                m_n,
                tx_gain,
                tx_samples,
                frame_len,
                sym * sym_len,
            );
            lap(&mut st.ifft);
        }
        self.stages = st;
        Ok(DownlinkInfo { tx_gain, beta })
    }
}

/// What every emulated user decoded from one downlink frame.
#[derive(Clone, Debug, Default)]
pub struct DownlinkUserOutput {
    pub payload: Vec<Vec<u8>>,
    pub blocks: Vec<Vec<BlockResult>>,
}

impl DownlinkUserOutput {
    pub fn for_config(cfg: &FrameConfig) -> Self {
        Self {
            payload: vec![vec![0; cfg.downlink_blocks() * cfg.block_payload_bits()]; cfg.users],
            blocks: vec![vec![BlockResult::default(); cfg.downlink_blocks()]; cfg.users],
        }
    }
}

/// K emulated single-antenna users: the air plus each user's receiver.
pub struct UserEmulator {
    cfg: FrameConfig,
    front: FrontEnd,
    synth: Synthesizer,
    rx: RxChain,
    pilots: Vec<Cf32>,
    dl_syms: Vec<usize>,
    /// Base-station symbols on the data subcarriers, `[symbol][antenna][subcarrier]`.
    bs_freq: Vec<Cf32>,
    user_freq: Vec<Cf32>,
    user_time: Vec<Cf32>,
    user_frame: Vec<Ci16>,
    rx_freq: Vec<Cf32>,
    gain: Vec<Cf32>,
    eq: Vec<Cf32>,
    nv: Vec<f32>,
}

impl UserEmulator {
    /// # Errors
    /// If the LDPC decoder rejects the code parameters.
    pub fn new(cfg: &FrameConfig) -> Result<Self, PhyError> {
        let (m, d) = (cfg.antennas, cfg.data_num);
        let dl_syms = cfg.symbols_of(SymbolKind::Downlink);
        let ns = dl_syms.len();
        Ok(Self {
            front: FrontEnd::new(cfg),
            synth: Synthesizer::new(cfg),
            rx: RxChain::new(cfg)?,
            pilots: pilot_sequence(d),
            bs_freq: vec![Cf32::default(); ns * m * d],
            user_freq: vec![Cf32::default(); d],
            user_time: vec![Cf32::default(); ns * cfg.symbol_len()],
            user_frame: vec![Ci16::default(); cfg.frame_len()],
            rx_freq: vec![Cf32::default(); ns * d],
            gain: vec![Cf32::default(); d],
            eq: vec![Cf32::default(); d],
            nv: vec![0.0; d],
            dl_syms,
            cfg: cfg.clone(),
        })
    }

    /// Pass the base station's frame through the air to every user and decode.
    ///
    /// # Errors
    /// Wrong sample count or an LDPC input error.
    pub fn receive<R: Rng>(
        &mut self,
        bs_tx: &[Ci16],
        info: &DownlinkInfo,
        channel: &ChannelRealization,
        rng: &mut R,
        out: &mut DownlinkUserOutput,
    ) -> Result<(), PhyError> {
        let cfg = &self.cfg;
        let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let frame_len = cfg.frame_len();
        if bs_tx.len() != m_n * frame_len {
            return Err(PhyError::SampleCount {
                expected: m_n * frame_len,
                got: bs_tx.len(),
            });
        }
        if (channel.antennas, channel.users, channel.data_num) != (m_n, k_n, d) {
            return Err(PhyError::ChannelShape {
                expected: (m_n, k_n, d),
                got: (channel.antennas, channel.users, channel.data_num),
            });
        }
        let ns = self.dl_syms.len();
        if ns < 2 {
            return Ok(());
        }
        // Back to per-subcarrier transmit symbols (undo the BS's FFT scale and gain).
        for m in 0..m_n {
            let frame = &bs_tx[m * frame_len..(m + 1) * frame_len];
            self.front
                .antenna(frame, &self.dl_syms, &mut self.bs_freq, m * d, m_n * d);
        }
        let unscale = 1.0 / (info.tx_gain * (cfg.fft_size as f32).sqrt());
        let noise_var = cfg.noise_var();
        let sym_len = cfg.symbol_len();
        let blocks = cfg.blocks_per_symbol;
        let pb = cfg.block_payload_bits();
        for k in 0..k_n {
            // The air: y_k = sum_m H[m][k] x_m (reciprocal channel), then noise.
            let mut power = 0f64;
            for j in 0..ns {
                for (i, r) in self.user_freq.iter_mut().enumerate() {
                    let h = &channel.at(i)[k * m_n..(k + 1) * m_n];
                    let mut acc = Cf32::default();
                    for (m, hm) in h.iter().enumerate() {
                        acc += hm * self.bs_freq[(j * m_n + m) * d + i];
                    }
                    *r = acc * unscale;
                }
                let t = &mut self.user_time[j * sym_len..(j + 1) * sym_len];
                self.synth.symbol(&self.user_freq, 1.0, t);
                for v in t.iter_mut() {
                    *v += complex_gaussian(rng, noise_var);
                    power += v.norm_sqr() as f64;
                }
            }
            // The user's AGC and ADC.
            let agc = TARGET_RMS / ((power / (ns * sym_len) as f64).sqrt() as f32).max(1e-12);
            self.user_frame.fill(Ci16::default());
            for (j, &sym) in self.dl_syms.iter().enumerate() {
                let src = &self.user_time[j * sym_len..(j + 1) * sym_len];
                let dst = &mut self.user_frame[sym * sym_len..(sym + 1) * sym_len];
                for (o, v) in dst.iter_mut().zip(src) {
                    *o = Ci16::from_cf32(v * agc);
                }
            }
            // The user's receiver.
            let (e, c) =
                self.front
                    .antenna(&self.user_frame, &self.dl_syms, &mut self.rx_freq, 0, d);
            let noise = (e / c.max(1) as f64) as f32;
            for (i, g) in self.gain.iter_mut().enumerate() {
                *g = self.rx_freq[i] * self.pilots[i].conj();
            }
            for j in 1..ns {
                let u = j - 1;
                for i in 0..d {
                    let g = self.gain[i];
                    let p = g.norm_sqr().max(1e-20);
                    self.eq[i] = self.rx_freq[j * d + i] * g.conj() / p;
                    self.nv[i] = noise / p;
                }
                self.rx.symbol(
                    &self.eq,
                    &self.nv,
                    user_c_init(cfg, k),
                    u,
                    &mut out.payload[k][u * blocks * pb..(u + 1) * blocks * pb],
                    &mut out.blocks[k][u * blocks..(u + 1) * blocks],
                )?;
            }
        }
        Ok(())
    }
}
