//! Data generator: what the antennas of a base station receive from K users, with
//! the ground truth.
//!
//! Per frame and user: random payload bits -> CRC24B per code block -> LDPC ->
//! scrambling -> QAM -> OFDM; pilots on `P` symbols; through the MIMO channel; white
//! Gaussian noise at `snr_db` per antenna and subcarrier (unit-power symbols, unit
//! average channel gain); scaled to -15 dBFS RMS and quantised to ci16, as a radio
//! delivers it. Everything is drawn from a ChaCha8 stream keyed by `(seed, frame)`,
//! so any frame can be regenerated on its own.

use radiohost_iq::{Cf32, Ci16, Ci16Buf};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::channel::{complex_gaussian, ChannelRealization};
use crate::coding::{user_c_init, TxChain};
use crate::config::{FrameConfig, SymbolKind};
use crate::csi::{pilot_owner, pilot_sequence};
use crate::frontend::Synthesizer;
use crate::PhyError;

/// Target RMS level of generated samples relative to full scale (-15 dBFS leaves
/// room for the OFDM peak-to-average ratio before ci16 clipping).
pub const TARGET_RMS: f32 = 0.177_827_94;

/// One generated frame and its ground truth.
#[derive(Clone, Debug)]
pub struct GeneratedFrame {
    /// Received samples, antenna-major: antenna `m` is
    /// `samples[m * frame_len..(m + 1) * frame_len]`; from a cache-line boundary,
    /// as a radio's DMA buffer.
    pub samples: Ci16Buf,
    /// Uplink payload per user (`uplink_blocks * block_payload_bits` bits).
    pub uplink_payload: Vec<Vec<u8>>,
    /// Downlink payload per user (`downlink_blocks * block_payload_bits` bits) for the
    /// base station to send.
    pub downlink_payload: Vec<Vec<u8>>,
    /// The channel this frame went through (uplink; the downlink sees its transpose).
    pub channel: ChannelRealization,
    /// Digital gain applied before quantisation.
    pub rx_gain: f32,
    /// Noise variance per subcarrier relative to unit symbol power.
    pub noise_var: f64,
}

/// What K users transmit in one uplink frame, before any channel: the input of an
/// emulated air (`testbed::air`), with its ground truth.
#[derive(Clone, Debug)]
pub struct UserUplink {
    /// Time-domain waveform per user, user-major: user `k` is
    /// `waveforms[k * frame_len..(k + 1) * frame_len]`. Pilot and uplink symbols carry
    /// unit-power subcarriers (orthonormal IFFT, so `data_num / fft_size` average power
    /// per sample); downlink and guard symbols are silent.
    pub waveforms: Vec<Cf32>,
    /// Uplink payload per user (`uplink_blocks * block_payload_bits` bits).
    pub uplink_payload: Vec<Vec<u8>>,
    /// Downlink payload per user, for the base station to send.
    pub downlink_payload: Vec<Vec<u8>>,
}

/// Seeded frame generator (plans FFTs and code chains once).
pub struct Generator {
    cfg: FrameConfig,
    synth: Synthesizer,
    tx: TxChain,
    pilots: Vec<Cf32>,
}

/// RNG of frame `frame` for `seed`, also used by the emulated users.
pub fn frame_rng(seed: u64, frame: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(frame.wrapping_mul(4).wrapping_add(stream));
    rng
}

/// Random payload bits.
pub fn random_bits<R: Rng>(rng: &mut R, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.gen::<bool>() as u8).collect()
}

impl Generator {
    pub fn new(cfg: &FrameConfig) -> Self {
        Self {
            cfg: cfg.clone(),
            synth: Synthesizer::new(cfg),
            tx: TxChain::new(cfg),
            pilots: pilot_sequence(cfg.data_num),
        }
    }

    pub fn config(&self) -> &FrameConfig {
        &self.cfg
    }

    /// The users' transmit waveforms of frame number `frame`, without channel or
    /// noise (the emulated air adds both). Payloads are drawn from
    /// `frame_rng(seed, frame, 2)`, so any frame can be regenerated on its own.
    ///
    /// # Errors
    /// LDPC errors (none are expected for a validated configuration).
    pub fn uplink_users(&mut self, frame: u64) -> Result<UserUplink, PhyError> {
        let cfg = &self.cfg;
        let (k_n, d) = (cfg.users, cfg.data_num);
        let mut rng = frame_rng(cfg.seed, frame, 2);
        let pb = cfg.block_payload_bits();
        let uplink_payload: Vec<Vec<u8>> = (0..k_n)
            .map(|_| random_bits(&mut rng, cfg.uplink_blocks() * pb))
            .collect();
        let downlink_payload: Vec<Vec<u8>> = (0..k_n)
            .map(|_| random_bits(&mut rng, cfg.downlink_blocks() * pb))
            .collect();
        let (sym_len, frame_len) = (cfg.symbol_len(), cfg.frame_len());
        let mut waveforms = vec![Cf32::default(); k_n * frame_len];
        let mut user_sym = vec![Cf32::default(); d];
        let blocks = cfg.blocks_per_symbol;
        let (mut pilot_idx, mut ul_idx) = (0usize, 0usize);
        for (s, kind) in cfg.schedule.iter().enumerate() {
            for k in 0..k_n {
                match kind {
                    SymbolKind::Pilot => {
                        for (i, v) in user_sym.iter_mut().enumerate() {
                            let owner = pilot_owner(cfg.pilot_layout, k_n, pilot_idx, i);
                            *v = if owner == k {
                                self.pilots[i]
                            } else {
                                Cf32::default()
                            };
                        }
                    }
                    SymbolKind::Uplink => {
                        let payload = &uplink_payload[k][ul_idx * blocks * pb..][..blocks * pb];
                        self.tx
                            .symbol(payload, user_c_init(cfg, k), ul_idx, &mut user_sym)?;
                    }
                    SymbolKind::Downlink | SymbolKind::Guard => continue,
                }
                let out = &mut waveforms[k * frame_len + s * sym_len..][..sym_len];
                self.synth.symbol(&user_sym, 1.0, out);
            }
            match kind {
                SymbolKind::Pilot => pilot_idx += 1,
                SymbolKind::Uplink => ul_idx += 1,
                SymbolKind::Downlink | SymbolKind::Guard => {}
            }
        }
        Ok(UserUplink {
            waveforms,
            uplink_payload,
            downlink_payload,
        })
    }

    /// Generate frame number `frame`.
    ///
    /// # Errors
    /// LDPC errors (none are expected for a validated configuration).
    pub fn frame(&mut self, frame: u64) -> Result<GeneratedFrame, PhyError> {
        let cfg = &self.cfg;
        let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
        let mut rng = frame_rng(cfg.seed, frame, 0);
        let channel = ChannelRealization::draw(cfg, &mut rng);
        let pb = cfg.block_payload_bits();
        let uplink_payload: Vec<Vec<u8>> = (0..k_n)
            .map(|_| random_bits(&mut rng, cfg.uplink_blocks() * pb))
            .collect();
        let downlink_payload: Vec<Vec<u8>> = (0..k_n)
            .map(|_| random_bits(&mut rng, cfg.downlink_blocks() * pb))
            .collect();
        let noise_var = cfg.noise_var();
        let expected_power = (k_n * d) as f64 / cfg.fft_size as f64 + noise_var;
        let rx_gain = TARGET_RMS / expected_power.sqrt() as f32;

        let sym_len = cfg.symbol_len();
        let frame_len = cfg.frame_len();
        let mut samples = Ci16Buf::zeroed(m_n * frame_len);
        let mut user_syms = vec![Cf32::default(); k_n * d];
        let mut ant_freq = vec![Cf32::default(); d];
        let mut time = vec![Cf32::default(); sym_len];
        let blocks = cfg.blocks_per_symbol;
        let (mut pilot_idx, mut ul_idx) = (0usize, 0usize);
        for (s, kind) in cfg.schedule.iter().enumerate() {
            let active = match kind {
                SymbolKind::Pilot => {
                    user_syms.fill(Cf32::default());
                    for i in 0..d {
                        let k = pilot_owner(cfg.pilot_layout, k_n, pilot_idx, i);
                        user_syms[k * d + i] = self.pilots[i];
                    }
                    pilot_idx += 1;
                    true
                }
                SymbolKind::Uplink => {
                    for k in 0..k_n {
                        let payload = &uplink_payload[k][ul_idx * blocks * pb..][..blocks * pb];
                        let out = &mut user_syms[k * d..(k + 1) * d];
                        self.tx.symbol(payload, user_c_init(cfg, k), ul_idx, out)?;
                    }
                    ul_idx += 1;
                    true
                }
                SymbolKind::Downlink | SymbolKind::Guard => false,
            };
            for m in 0..m_n {
                if active {
                    for (i, y) in ant_freq.iter_mut().enumerate() {
                        let h = channel.at(i);
                        let mut acc = Cf32::default();
                        for k in 0..k_n {
                            acc += h[k * m_n + m] * user_syms[k * d + i];
                        }
                        *y = acc;
                    }
                    self.synth.symbol(&ant_freq, 1.0, &mut time);
                } else {
                    time.fill(Cf32::default());
                }
                let out = &mut samples[m * frame_len + s * sym_len..][..sym_len];
                for (o, t) in out.iter_mut().zip(&time) {
                    let noisy = t + complex_gaussian(&mut rng, noise_var);
                    *o = Ci16::from_cf32(noisy * rx_gain);
                }
            }
        }
        Ok(GeneratedFrame {
            samples,
            uplink_payload,
            downlink_payload,
            channel,
            rx_gain,
            noise_var,
        })
    }
}
