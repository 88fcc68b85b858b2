//! The reference pipelines run end to end on generated frames, with bit and block
//! errors against the generator's truth: what `radiohost phy uplink|downlink|generate`
//! run.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;

use crate::coding::BlockResult;
use crate::downlink::{DownlinkPipeline, DownlinkUserOutput, UserEmulator};
use crate::generator::{frame_rng, Generator};
use crate::uplink::{ErrorCount, UplinkOutput, UplinkPipeline};
use crate::{recording, FrameConfig, PhyError};

/// Which reference pipeline to evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Uplink,
    Downlink,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Uplink => "uplink",
            Direction::Downlink => "downlink",
        }
    }
}

/// Why an evaluation could not run.
#[derive(Debug, Error)]
pub enum EvalError {
    #[error("frames must be {0} (got {1})")]
    Frames(&'static str, u64),
    #[error("the configuration has no {what} data symbols in frame_schedule {schedule:?}; add some or pick another configuration")]
    NoDataSymbols {
        what: &'static str,
        schedule: String,
    },
    #[error(transparent)]
    Phy(#[from] PhyError),
}

/// Bit and block errors of `frames` frames through one pipeline.
#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    pub direction: Direction,
    pub config: String,
    pub antennas: usize,
    pub users: usize,
    pub modulation: &'static str,
    pub zc: usize,
    pub code_rate: f64,
    pub snr_db: f64,
    pub frames: u64,
    pub bits: u64,
    pub bit_errors: u64,
    pub ber: f64,
    pub blocks: u64,
    pub block_errors: u64,
    pub bler: f64,
    pub crc_failures: u64,
    pub mean_decoder_iterations: f64,
    /// Base-station side only, one thread.
    pub seconds_per_frame: f64,
}

/// Generate `frames` frames of `cfg`, run them through the `dir` pipeline (the
/// downlink decoded by emulated users) and count errors. `on_frame` is called after
/// each frame (progress).
pub fn evaluate(
    cfg: &FrameConfig,
    name: &str,
    dir: Direction,
    frames: u64,
    mut on_frame: impl FnMut(u64),
) -> Result<EvalReport, EvalError> {
    if frames == 0 {
        return Err(EvalError::Frames("at least 1", frames));
    }
    let blocks_per_frame = match dir {
        Direction::Uplink => cfg.uplink_blocks(),
        Direction::Downlink => cfg.downlink_blocks(),
    };
    if blocks_per_frame == 0 {
        return Err(EvalError::NoDataSymbols {
            what: match dir {
                Direction::Uplink => "U",
                Direction::Downlink => "D (beyond the reference one)",
            },
            schedule: cfg.file.frame_schedule.clone(),
        });
    }
    let mut gen = Generator::new(cfg);
    let mut total = ErrorCount::default();
    let (mut iters, mut decoded) = (0u64, 0u64);
    let mut busy = Duration::ZERO;
    let mut count = |total: &mut ErrorCount, e: ErrorCount, blocks: &[Vec<BlockResult>]| {
        total.add(&e);
        for r in blocks.iter().flatten() {
            iters += r.iterations as u64;
            decoded += 1;
        }
    };
    match dir {
        Direction::Uplink => {
            let mut ul = UplinkPipeline::new(cfg)?;
            let mut out = UplinkOutput::for_config(cfg);
            for f in 0..frames {
                let frame = gen.frame(f)?;
                let t = Instant::now();
                ul.process_frame(&frame.samples, &mut out)?;
                busy += t.elapsed();
                let e = ErrorCount::compare(
                    &frame.uplink_payload,
                    &out.payload,
                    &out.blocks,
                    cfg.block_payload_bits(),
                );
                count(&mut total, e, &out.blocks);
                on_frame(f);
            }
        }
        Direction::Downlink => {
            let mut dl = DownlinkPipeline::new(cfg);
            let mut ues = UserEmulator::new(cfg)?;
            let mut out = DownlinkUserOutput::for_config(cfg);
            let mut tx = vec![Default::default(); cfg.antennas * cfg.frame_len()];
            for f in 0..frames {
                let frame = gen.frame(f)?;
                let t = Instant::now();
                let info = dl.process_frame(&frame.samples, &frame.downlink_payload, &mut tx)?;
                busy += t.elapsed();
                let mut rng = frame_rng(cfg.seed, f, 1);
                ues.receive(&tx, &info, &frame.channel, &mut rng, &mut out)?;
                let e = ErrorCount::compare(
                    &frame.downlink_payload,
                    &out.payload,
                    &out.blocks,
                    cfg.block_payload_bits(),
                );
                count(&mut total, e, &out.blocks);
                on_frame(f);
            }
        }
    }
    Ok(EvalReport {
        direction: dir,
        config: name.to_string(),
        antennas: cfg.antennas,
        users: cfg.users,
        modulation: cfg.modulation.name(),
        zc: cfg.code.zc,
        code_rate: cfg.code.rate(),
        snr_db: cfg.snr_db,
        frames,
        bits: total.bits,
        bit_errors: total.bit_errors,
        ber: total.bit_errors as f64 / total.bits.max(1) as f64,
        blocks: total.blocks,
        block_errors: total.block_errors,
        bler: total.block_errors as f64 / total.blocks.max(1) as f64,
        crc_failures: total.crc_failures,
        mean_decoder_iterations: iters as f64 / decoded.max(1) as f64,
        seconds_per_frame: busy.as_secs_f64() / frames as f64,
    })
}

/// Generate `frames` frames (1..=1000) of `cfg` and save them with their truth in
/// `out` (SigMF ci16 recording, truth.json, channel.cf32, config.json).
pub fn generate_recording(cfg: &FrameConfig, out: &Path, frames: u64) -> Result<(), EvalError> {
    if !(1..=1000).contains(&frames) {
        return Err(EvalError::Frames("1..=1000", frames));
    }
    let mut gen = Generator::new(cfg);
    let frames = (0..frames)
        .map(|f| Ok((f, gen.frame(f)?)))
        .collect::<Result<Vec<_>, PhyError>>()?;
    recording::save(out, cfg, &frames)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_uplink_decodes_without_errors_and_bad_input_is_refused() {
        let text = include_str!("../configs/8x2.json");
        let cfg = FrameConfig::from_json(text).unwrap();
        let mut seen = 0;
        let r = evaluate(&cfg, "8x2", Direction::Uplink, 1, |_| seen += 1).unwrap();
        assert_eq!(seen, 1);
        assert!(r.bits > 0 && r.blocks > 0);
        assert_eq!(r.bit_errors, 0, "8x2 at its SNR decodes cleanly: {r:?}");
        assert!(matches!(
            evaluate(&cfg, "8x2", Direction::Uplink, 0, |_| ()),
            Err(EvalError::Frames(..))
        ));
    }
}
