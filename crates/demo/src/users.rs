//! Stage 1: K users' payload bits and uplink waveforms (phy's generator, with
//! truth), scaled to the level they leave their radios at.

use radiohost_iq::{Block, Cf32};
use radiohost_phy::config::{FrameConfig, FrameConfigFile};
use radiohost_phy::generator::{Generator, TARGET_RMS};
use radiohost_warp::node::BUFFER_SAMPLES;

use crate::report::{blocks_digest, pack_bits, sha256_hex, sha256_parts, StageReport};
use crate::{DemoConfig, DemoError};

/// The frame format every stage shares: phy's 16x4 configuration (1024-point
/// FFT, 600 data subcarriers, 16QAM, LDPC BG1 rate 1/3) with the demo's antenna
/// and user counts. The channel section is not used: the air is the channel.
const BASE_CONFIG: &str = include_str!("../../phy/configs/16x4.json");

pub fn frame_config(cfg: &DemoConfig) -> Result<FrameConfig, DemoError> {
    let mut file: FrameConfigFile = serde_json::from_str(BASE_CONFIG)?;
    file.bs_ant_num = cfg.antennas();
    file.ue_ant_num = cfg.users;
    file.snr_db = cfg.snr_db;
    file.seed = cfg.seed;
    Ok(FrameConfig::validate(file)?)
}

/// What the users send: one block per frame (K ports x frame length, on the
/// air's sample clock) and the truth.
pub struct UsersOutput {
    pub frames: Vec<Block>,
    /// `payload[frame][user]`: payload bits (0/1), as the station must decode them.
    pub payload: Vec<Vec<Vec<u8>>>,
    /// Linear amplitude every user transmits at (unit-power subcarriers times this).
    pub tx_gain: f32,
    /// Ticks from the start of one frame to the next.
    pub frame_period: u64,
}

impl UsersOutput {
    /// Each user's payload over all frames, packed MSB first: what the
    /// receivers must end up holding.
    pub fn user_payload_bytes(&self, user: usize) -> Vec<u8> {
        let bits: Vec<u8> = self
            .payload
            .iter()
            .flat_map(|f| f[user].iter().copied())
            .collect();
        pack_bits(&bits)
    }
}

/// Linear gain that puts K users' sum at the antennas at phy's -15 dBFS RMS
/// (unit average channel gain), leaving room for the OFDM peaks before the
/// radios' fixed-point converters clip.
pub fn tx_gain(fc: &FrameConfig) -> f32 {
    let per_user_power = fc.data_num as f32 / fc.fft_size as f32;
    TARGET_RMS / (fc.users as f32 * per_user_power).sqrt()
}

pub fn run(
    cfg: &DemoConfig,
    fc: &FrameConfig,
    report: &mut StageReport,
) -> Result<UsersOutput, DemoError> {
    report.input = format!(
        "{} users x {} frames, seed {}, {} {}x{} config",
        cfg.users,
        cfg.frames,
        cfg.seed,
        fc.modulation.name(),
        fc.antennas,
        fc.users
    );
    report.input_digest = sha256_hex(serde_json::to_string(cfg)?.as_bytes());
    let mut gen = Generator::new(fc);
    let frame_len = fc.frame_len();
    let gain = tx_gain(fc);
    // One frame per WARP capture window: a node's trigger records a whole RX
    // buffer, so the next trigger (and frame) starts one buffer later.
    let period = BUFFER_SAMPLES as u64;
    if frame_len as u64 > period {
        return Err(DemoError::Config(format!(
            "a frame of {frame_len} samples does not fit a WARP RX buffer of {period}"
        )));
    }
    let mut frames = Vec::with_capacity(cfg.frames as usize);
    let mut payload = Vec::with_capacity(cfg.frames as usize);
    for f in 0..cfg.frames {
        let up = gen.uplink_users(f)?;
        let ports: Vec<Vec<Cf32>> = up
            .waveforms
            .chunks(frame_len)
            .map(|w| w.iter().map(|s| s * gain).collect())
            .collect();
        let mut block = Block::from_ports(ports, fc.sample_rate, f * period)?;
        block.start_of_burst = true;
        block.end_of_burst = true;
        frames.push(block);
        payload.push(up.uplink_payload);
    }
    let out = UsersOutput {
        frames,
        payload,
        tx_gain: gain,
        frame_period: period,
    };
    let bits: usize = out.payload.iter().flatten().map(Vec::len).sum();
    let per_user: Vec<Vec<u8>> = (0..cfg.users).map(|u| out.user_payload_bytes(u)).collect();
    report.output = format!(
        "{} frames of {} samples x {} users at {:.2} MS/s; {} payload bits ({} bytes per user)",
        cfg.frames,
        frame_len,
        cfg.users,
        fc.sample_rate / 1e6,
        bits,
        per_user.first().map_or(0, Vec::len)
    );
    report.output_digest = blocks_digest(&out.frames);
    report.count("payload_bits", bits as f64, "bit");
    report.count(
        "samples_per_user",
        (frame_len as u64 * cfg.frames) as f64,
        "sample",
    );
    report.count("tx_gain", gain as f64, "linear");
    report.check(bits > 0, || {
        "the configuration carries no uplink payload".into()
    });
    // The payload digest is what every receiver must reproduce at the end.
    tracing::debug!(digest = %sha256_parts(per_user.iter().map(Vec::as_slice)), "user payloads");
    Ok(out)
}
