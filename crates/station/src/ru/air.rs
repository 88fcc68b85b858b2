//! The uplink over the one emulated air: K users' waveforms (phy's generator, with
//! truth, no channel) are transmitted into a [`testbed::air::Air`](Air) whose TX
//! ports are the users and whose RX ports are the station's `M` antennas; a radio
//! unit reads the `M` RX ports one frame at a time.
//!
//! The air's channel is a static MIMO channel drawn once from the configuration's
//! model (flat or tapped i.i.d. Rayleigh per antenna-user pair, unit average gain),
//! convolved in the time domain by dsp's UPOLS; its noise is the configuration's
//! SNR (per-subcarrier SNR for unit-power subcarriers, since the OFDM transform is
//! orthonormal). Frame `f` occupies ticks `f * frame_len ..` on the air's clock.
//! The air processes in blocks of one OFDM symbol, so a frame is a whole number of
//! blocks and frame `f + 1` can still be transmitted after frame `f` was read.

use radiohost_dsp::MimoTaps;
use radiohost_iq::{Block, Cf32, Ci16, Ci16Buf};
use radiohost_phy::channel::{complex_gaussian, ChannelRealization};
use radiohost_phy::config::ChannelModel;
use radiohost_phy::generator::{frame_rng, GeneratedFrame, Generator, UserUplink, TARGET_RMS};
use radiohost_phy::ofdm::data_bin;
use radiohost_phy::{FrameConfig, PhyError};
use radiohost_rt::ManualClock;
use radiohost_testbed::air::{Air, AirChannel, AirClock, AirConfig, AirError, AirStats};

/// Why the uplink air could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum UplinkAirError {
    #[error("the emulated air refused: {0}")]
    Air(#[from] AirError),
    #[error("generating the users' uplink failed: {0}")]
    Phy(#[from] PhyError),
    #[error("the channel taps are not a valid MIMO response: {0}")]
    Taps(#[from] radiohost_dsp::DspError),
}

/// K users transmitting over the air to M antennas.
pub struct UplinkAir {
    cfg: FrameConfig,
    generator: Generator,
    air: Air,
    channel: ChannelRealization,
    antenna_ports: Vec<usize>,
}

impl UplinkAir {
    /// An air for `cfg`: users on TX ports `0..K`, antennas on RX ports `0..M`, a
    /// simulated clock, the channel drawn from `cfg.seed`.
    ///
    /// # Errors
    /// A configuration the air cannot hold (more than 64 antennas or users).
    pub fn new(cfg: &FrameConfig) -> Result<Self, UplinkAirError> {
        let (m_n, k_n) = (cfg.antennas, cfg.users);
        let taps = draw_taps(cfg)?;
        let channel = frequency_response(cfg, &taps);
        let frame_len = cfg.frame_len();
        let air = Air::new(AirConfig {
            rate_hz: cfg.sample_rate,
            tx_ports: k_n,
            rx_ports: m_n,
            channel: AirChannel::Static(taps),
            snr_db: Some(cfg.snr_db),
            seed: cfg.seed,
            block: cfg.symbol_len(),
            history: 2 * frame_len,
            max_pending: 2 * frame_len,
            clock: AirClock::Simulated(ManualClock::new(0)),
        })?;
        Ok(Self {
            cfg: cfg.clone(),
            generator: Generator::new(cfg),
            air,
            channel,
            antenna_ports: (0..m_n).collect(),
        })
    }

    /// The air itself (for other front ends or its statistics).
    pub fn air(&self) -> &Air {
        &self.air
    }

    pub fn stats(&self) -> AirStats {
        self.air.stats()
    }

    /// The channel's response on the data subcarriers (the truth for downlink checks).
    pub fn channel(&self) -> &ChannelRealization {
        &self.channel
    }

    /// Tick at which frame `frame` starts on the air.
    pub fn frame_tick(&self, frame: u64) -> u64 {
        frame.saturating_mul(self.cfg.frame_len() as u64)
    }

    /// The users transmit frame `frame` into the air at its tick (without anyone
    /// receiving it yet: read it off the RX ports directly, or through a radio on
    /// [`UplinkAir::air`]); returns the users' truth.
    ///
    /// # Errors
    /// A frame whose ticks the air has already processed (late), or a generator
    /// error.
    pub fn transmit_frame(&mut self, frame: u64) -> Result<UserUplink, UplinkAirError> {
        let users = self.generator.uplink_users(frame)?;
        let fl = self.cfg.frame_len();
        let start = self.frame_tick(frame);
        for (k, wave) in users.waveforms.chunks_exact(fl).enumerate() {
            self.air.transmit(k, start, wave)?;
        }
        Ok(users)
    }

    /// The users transmit frame `frame` at its tick; returns what the antennas
    /// received over that frame (`M` ports x `frame_len`) and the users' truth.
    /// Frames must be read in increasing order (the air's past is final).
    ///
    /// # Errors
    /// A frame read out of order (late emission or too old), or a generator error.
    pub fn frame(&mut self, frame: u64) -> Result<(Block, UserUplink), UplinkAirError> {
        let users = self.transmit_frame(frame)?;
        let fl = self.cfg.frame_len();
        let start = self.frame_tick(frame);
        let block = self.air.receive_block(&self.antenna_ports, start, fl)?;
        // The simulated clock follows the frames read (the end of this frame).
        if let Some(clock) = self.air.simulated_clock() {
            clock.set_ns(self.air.time_of(start + fl as u64).ns());
        }
        Ok((block, users))
    }

    /// Frame `frame` as a radio unit delivers it: received over the air, scaled to
    /// -15 dBFS RMS for the expected power and quantised to ci16, with its truth.
    ///
    /// # Errors
    /// As [`UplinkAir::frame`].
    pub fn generated_frame(&mut self, frame: u64) -> Result<GeneratedFrame, UplinkAirError> {
        let (block, users) = self.frame(frame)?;
        let cfg = &self.cfg;
        let noise_var = cfg.noise_var();
        let expected_power = (cfg.users * cfg.data_num) as f64 / cfg.fft_size as f64 + noise_var;
        let rx_gain = TARGET_RMS / expected_power.sqrt() as f32;
        let received = block.as_slice();
        let mut samples = Ci16Buf::zeroed(received.len());
        for (out, s) in samples.iter_mut().zip(received) {
            *out = Ci16::from_cf32(s * rx_gain);
        }
        Ok(GeneratedFrame {
            samples,
            uplink_payload: users.uplink_payload,
            downlink_payload: users.downlink_payload,
            channel: self.channel.clone(),
            rx_gain,
            noise_var,
        })
    }
}

/// Time-domain taps per antenna-user pair (`path(antenna, user)`), i.i.d.
/// Rayleigh per tap with the model's power profile (unit average gain).
fn draw_taps(cfg: &FrameConfig) -> Result<MimoTaps, UplinkAirError> {
    let (m_n, k_n) = (cfg.antennas, cfg.users);
    let profile: Vec<(usize, f64)> = match &cfg.channel {
        ChannelModel::Flat => vec![(0, 1.0)],
        ChannelModel::Selective(t) => t.clone(),
    };
    let len = profile.iter().map(|&(d, _)| d + 1).max().unwrap_or(1);
    // Stream 3 of frame u64::MAX: apart from every frame's payload and noise draws.
    let mut rng = frame_rng(cfg.seed, u64::MAX, 3);
    let mut taps = MimoTaps::zeros(k_n, m_n, len)?;
    for m in 0..m_n {
        for k in 0..k_n {
            let path = taps.path_mut(m, k);
            for &(delay, power) in &profile {
                path[delay] += complex_gaussian(&mut rng, power);
            }
        }
    }
    Ok(taps)
}

/// The taps' response on each data subcarrier, laid out as phy's CSI
/// (`[subcarrier][user][antenna]`).
fn frequency_response(cfg: &FrameConfig, taps: &MimoTaps) -> ChannelRealization {
    let (m_n, k_n, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let n = cfg.fft_size as f64;
    let mut freq = vec![Cf32::default(); d * k_n * m_n];
    for i in 0..d {
        let bin = data_bin(cfg.fft_size, cfg.data_start, i) as f64;
        for k in 0..k_n {
            for m in 0..m_n {
                let mut h = Cf32::default();
                for (delay, c) in taps.path(m, k).iter().enumerate() {
                    let phase = -2.0 * std::f64::consts::PI * bin * delay as f64 / n;
                    h += c * Cf32::new(phase.cos() as f32, phase.sin() as f32);
                }
                freq[(i * k_n + k) * m_n + m] = h;
            }
        }
    }
    ChannelRealization {
        antennas: m_n,
        users: k_n,
        data_num: d,
        freq,
    }
}
