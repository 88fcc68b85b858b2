//! Saving generated frames: a multi-channel ci16 SigMF recording (one channel per
//! base-station antenna, interleaved per sample, one annotation per frame) and the
//! ground truth beside it (`truth.json`: payload bits as hex, gains, noise; and
//! `channel.cf32`: the channel of every frame, little-endian cf32,
//! `[frame][subcarrier][user][antenna]`).

use std::path::Path;

use radiohost_iq::sigmf::{self, Annotation, DataType, Meta, Samples};
use radiohost_iq::Ci16Buf;
use serde::{Deserialize, Serialize};

use crate::config::FrameConfig;
use crate::generator::GeneratedFrame;
use crate::PhyError;

/// Ground truth of one frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameTruth {
    pub frame: u64,
    /// Per user, uplink payload bits packed MSB first as hex.
    pub uplink_payload_hex: Vec<String>,
    pub downlink_payload_hex: Vec<String>,
    pub rx_gain: f32,
    pub noise_var: f64,
}

/// The `truth.json` document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    pub config: crate::config::FrameConfigFile,
    pub block_payload_bits: usize,
    pub frames: Vec<FrameTruth>,
}

/// Bits (0/1) to hex, MSB first; a last partial nibble is zero-padded.
pub fn bits_to_hex(bits: &[u8]) -> String {
    bits.chunks(4)
        .map(|c| {
            let v = c
                .iter()
                .enumerate()
                .fold(0u32, |v, (i, &b)| v | ((b as u32 & 1) << (3 - i)));
            char::from_digit(v, 16).unwrap_or('0')
        })
        .collect()
}

/// Hex back to `n` bits; `None` if the text is not hex or too short.
pub fn hex_to_bits(hex: &str, n: usize) -> Option<Vec<u8>> {
    if hex.len() * 4 < n {
        return None;
    }
    let mut out = Vec::with_capacity(n.min(hex.len() * 4));
    for c in hex.chars() {
        let v = c.to_digit(16)?;
        for i in (0..4).rev() {
            if out.len() < n {
                out.push(((v >> i) & 1) as u8);
            }
        }
    }
    Some(out)
}

fn io_err(e: impl std::fmt::Display) -> PhyError {
    PhyError::Recording(e.to_string())
}

/// Write `frames` into directory `dir` as `dir/rx.sigmf-{meta,data}`, `dir/truth.json`,
/// `dir/channel.cf32` and `dir/config.json`.
///
/// # Errors
/// File-system or SigMF errors, with the path.
pub fn save(
    dir: &Path,
    cfg: &FrameConfig,
    frames: &[(u64, GeneratedFrame)],
) -> Result<(), PhyError> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(format!("create {}: {e}", dir.display())))?;
    let m_n = cfg.antennas;
    let frame_len = cfg.frame_len();
    let mut meta = Meta::new(DataType::Ci16Le, cfg.sample_rate)
        .num_channels(m_n)
        .description(format!(
            "radiohost phy generator: {}x{} massive-MIMO uplink, schedule {}, {}, SNR {} dB",
            cfg.antennas,
            cfg.users,
            cfg.file.frame_schedule,
            cfg.modulation.name(),
            cfg.snr_db
        ))
        .author("radiohost phy generate")
        .capture(0, None);
    let mut interleaved = Vec::with_capacity(frames.len() * frame_len * m_n);
    let mut channel_bytes = Vec::new();
    let mut truth = Truth {
        config: cfg.file.clone(),
        block_payload_bits: cfg.block_payload_bits(),
        frames: Vec::new(),
    };
    for (j, (index, f)) in frames.iter().enumerate() {
        meta = meta.annotation(Annotation {
            sample_start: (j * frame_len) as u64,
            sample_count: Some(frame_len as u64),
            label: Some(format!("frame {index}")),
            comment: Some(cfg.file.frame_schedule.clone()),
            ..Default::default()
        });
        for t in 0..frame_len {
            for m in 0..m_n {
                interleaved.push(f.samples[m * frame_len + t]);
            }
        }
        for h in &f.channel.freq {
            channel_bytes.extend_from_slice(&h.re.to_le_bytes());
            channel_bytes.extend_from_slice(&h.im.to_le_bytes());
        }
        truth.frames.push(FrameTruth {
            frame: *index,
            uplink_payload_hex: f.uplink_payload.iter().map(|b| bits_to_hex(b)).collect(),
            downlink_payload_hex: f.downlink_payload.iter().map(|b| bits_to_hex(b)).collect(),
            rx_gain: f.rx_gain,
            noise_var: f.noise_var,
        });
    }
    sigmf::write_ci16(&dir.join("rx"), &meta, &interleaved).map_err(io_err)?;
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| io_err(format!("write {}: {e}", p.display())))
    };
    write("channel.cf32", &channel_bytes)?;
    write(
        "truth.json",
        serde_json::to_string(&truth).map_err(io_err)?.as_bytes(),
    )?;
    write(
        "config.json",
        serde_json::to_string_pretty(&cfg.file)
            .map_err(io_err)?
            .as_bytes(),
    )?;
    Ok(())
}

/// Read the frames of a recording written by [`save`] back into antenna-major
/// buffers (as the generator's, from a cache-line boundary).
///
/// # Errors
/// Unreadable files, a wrong data type or channel count, or a length that is not a
/// whole number of frames.
pub fn load_frames(dir: &Path, cfg: &FrameConfig) -> Result<Vec<Ci16Buf>, PhyError> {
    let rec = sigmf::read(&dir.join("rx")).map_err(io_err)?;
    let m_n = cfg.antennas;
    if rec.meta.channels() != m_n {
        return Err(io_err(format!(
            "recording has {} channels but the configuration has {m_n} antennas",
            rec.meta.channels()
        )));
    }
    let Samples::Ci16(samples) = rec.samples else {
        return Err(io_err("recording is not ci16 (generate writes ci16_le)"));
    };
    let per_frame = cfg.frame_len() * m_n;
    if samples.len() % per_frame != 0 {
        return Err(io_err(format!(
            "{} samples is not a whole number of {per_frame}-sample frames",
            samples.len()
        )));
    }
    let frame_len = cfg.frame_len();
    Ok(samples
        .chunks_exact(per_frame)
        .map(|chunk| {
            let mut out = Ci16Buf::zeroed(per_frame);
            for (t, s) in chunk.chunks_exact(m_n).enumerate() {
                for (m, v) in s.iter().enumerate() {
                    out[m * frame_len + t] = *v;
                }
            }
            out
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn hex_roundtrip(bits in proptest::collection::vec(0u8..2, 0..100)) {
            let h = bits_to_hex(&bits);
            prop_assert_eq!(hex_to_bits(&h, bits.len()).unwrap(), bits);
        }
    }

    #[test]
    fn bad_hex_is_rejected() {
        assert!(hex_to_bits("zz", 4).is_none());
        assert!(hex_to_bits("f", 5).is_none());
    }
}
