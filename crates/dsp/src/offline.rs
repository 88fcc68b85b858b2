//! Offline channel emulation: a SigMF recording (its channels are the M
//! inputs) through an M x N channel into a new recording (N channels
//! interleaved per sample), with the UPOLS convolver and, for fading models,
//! response swaps every update interval.

use std::path::PathBuf;
use std::time::Instant;

use radiohost_iq::sigmf::{self, DataType, SigMfError};
use radiohost_iq::{Cf32, Ci16};

use crate::spec::{build_channel, write_taps, Channel, ChannelSpec, ChannelSpecError};
use crate::{DspError, MimoConvolver, SwapMode};

/// How a time-varying channel replaces its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SwapKind {
    /// Partition k switches at block t0+k: each input block sees one response wholly.
    Staggered,
    /// Linear crossfade of the two outputs over this many blocks.
    Crossfade(usize),
}

/// Sample type of the output recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum OutputType {
    Cf32,
    /// Full scale 1.0; values beyond clip (counted).
    Ci16,
}

/// What to filter, through what, into where.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FilterConfig {
    pub channel: ChannelSpec,
    pub input: PathBuf,
    pub output: PathBuf,
    /// Convolution block length B (samples per port per block).
    pub block: usize,
    pub swap: SwapKind,
    pub output_type: OutputType,
    /// Also write the filter tails (output longer by the response length - 1).
    pub flush: bool,
    /// Sample rate when the recording has none (fading models need one).
    pub sample_rate: Option<f64>,
    /// Also write the initial responses here (.json = tap file, else SigMF cf32).
    pub write_taps: Option<PathBuf>,
}

/// What a filter run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct FilterReport {
    pub input: String,
    pub output: String,
    pub channel: String,
    pub ports: String,
    pub block: usize,
    pub taps: usize,
    pub partitions: usize,
    pub kernel: &'static str,
    pub samples_per_port: usize,
    pub blocks: usize,
    pub swaps: u64,
    /// Output samples beyond full scale (ci16 output only).
    pub clipped: usize,
    pub seconds: f64,
    pub msps_per_port: f64,
}

/// Errors of an offline filter run.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: SigMfError },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: SigMfError },
    #[error("{path} has {channels} channel(s) but the channel has {inputs} input(s) ({what})")]
    InputChannels {
        path: PathBuf,
        channels: usize,
        inputs: usize,
        what: String,
    },
    #[error("update interval of {update_blocks} blocks is shorter than one swap ({needed} blocks); raise it or lower the block size")]
    UpdateTooShort { update_blocks: usize, needed: usize },
    #[error(transparent)]
    Spec(#[from] ChannelSpecError),
    #[error(transparent)]
    Dsp(#[from] DspError),
}

/// Filters `cfg.input` through `cfg.channel` into `cfg.output`.
pub fn filter_recording(cfg: &FilterConfig) -> Result<FilterReport, FilterError> {
    let rec = sigmf::read(&cfg.input).map_err(|source| FilterError::Read {
        path: cfg.input.clone(),
        source,
    })?;
    let sample_rate = rec.meta.global.sample_rate.or(cfg.sample_rate);
    let (mut channel, what) = build_channel(&cfg.channel, cfg.block, sample_rate)?;
    let taps = channel.initial_response()?;
    let capacity = match &channel {
        Channel::Static(t) => t.max_len(),
        Channel::Fading { channel, .. } => channel.len(),
    };
    let (m, n) = (taps.inputs(), taps.outputs());
    let channels = rec.meta.channels();
    if channels != m {
        return Err(FilterError::InputChannels {
            path: cfg.input.clone(),
            channels,
            inputs: m,
            what,
        });
    }
    if let Some(path) = &cfg.write_taps {
        write_taps(path, &taps, sample_rate, &what)?;
    }
    let mut conv = MimoConvolver::with_capacity(cfg.block, capacity, &taps)?;
    let mode = match cfg.swap {
        SwapKind::Staggered => SwapMode::Staggered,
        SwapKind::Crossfade(blocks) => SwapMode::Crossfade { blocks },
    };
    if let Channel::Fading { update_blocks, .. } = &channel {
        let needed = match cfg.swap {
            SwapKind::Staggered => conv.partitions(),
            SwapKind::Crossfade(blocks) => blocks,
        };
        if *update_blocks < needed {
            return Err(FilterError::UpdateTooShort {
                update_blocks: *update_blocks,
                needed,
            });
        }
    }

    let samples = rec.samples.to_cf32();
    let len = samples.len() / m;
    let out_len = if cfg.flush { len + capacity - 1 } else { len };
    let b = cfg.block;
    let blocks = out_len.div_ceil(b);
    let mut ins = vec![vec![Cf32::new(0.0, 0.0); blocks * b]; m];
    for (i, s) in samples.iter().enumerate() {
        ins[i % m][i / m] = *s;
    }
    let mut outs = vec![vec![Cf32::new(0.0, 0.0); blocks * b]; n];
    let mut next = taps;
    let mut swaps = 0u64;
    let started = Instant::now();
    for k in 0..blocks {
        if let Channel::Fading {
            channel,
            update_blocks,
        } = &mut channel
        {
            if k > 0 && k % *update_blocks == 0 {
                channel.advance();
                channel.write_response(&mut next)?;
                conv.swap_responses(&next, mode)?;
                swaps += 1;
            }
        }
        let in_refs: Vec<&[Cf32]> = ins.iter().map(|v| &v[k * b..(k + 1) * b]).collect();
        let mut out_refs: Vec<&mut [Cf32]> = outs
            .iter_mut()
            .map(|v| &mut v[k * b..(k + 1) * b])
            .collect();
        conv.process_block(&in_refs, &mut out_refs)?;
    }
    let seconds = started.elapsed().as_secs_f64();

    let mut interleaved = Vec::with_capacity(out_len * n);
    for i in 0..out_len {
        interleaved.extend(outs.iter().map(|o| o[i]));
    }
    let mut meta = rec.meta.clone();
    meta.global.num_channels = Some(n);
    meta.global.description = Some(format!(
        "radiohost chanemu: {} through {what}",
        cfg.input.display()
    ));
    // Captures and annotations index samples, which keep their places (the output is
    // as long as the input, or longer with the tails); the writer computes the
    // output's own core:sha512.
    let mut clipped = 0;
    match cfg.output_type {
        OutputType::Cf32 => {
            meta.global.datatype = DataType::Cf32Le.name().into();
            sigmf::write_cf32(&cfg.output, &meta, &interleaved)
        }
        OutputType::Ci16 => {
            meta.global.datatype = DataType::Ci16Le.name().into();
            clipped = interleaved
                .iter()
                .filter(|s| s.re.abs() > 1.0 || s.im.abs() > 1.0)
                .count();
            let v: Vec<Ci16> = interleaved.iter().map(|s| Ci16::from_cf32(*s)).collect();
            sigmf::write_ci16(&cfg.output, &meta, &v)
        }
    }
    .map_err(|source| FilterError::Write {
        path: cfg.output.clone(),
        source,
    })?;

    Ok(FilterReport {
        input: cfg.input.display().to_string(),
        output: cfg.output.display().to_string(),
        channel: what,
        ports: format!("{m}x{n}"),
        block: b,
        taps: capacity,
        partitions: conv.partitions(),
        kernel: conv.kernel().name(),
        samples_per_port: out_len,
        blocks,
        swaps,
        clipped,
        seconds,
        msps_per_port: (blocks * b) as f64 / seconds.max(1e-12) / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ChannelModel;
    use radiohost_iq::sigmf::{Annotation, Meta};

    #[test]
    fn identity_file_run_copies_the_recording() {
        let dir = std::env::temp_dir().join(format!("radiohost-offline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input: Vec<Cf32> = (0..1000)
            .map(|i| Cf32::new((i as f32 * 0.1).sin(), i as f32 * 1e-3))
            .collect();
        let mut meta = Meta::new(DataType::Cf32Le, 1e6)
            .num_channels(2)
            .capture(0, Some(2.4e9))
            .capture(200, Some(2.5e9))
            .annotation(Annotation {
                sample_start: 10,
                sample_count: Some(100),
                label: Some("burst".into()),
                ..Default::default()
            });
        meta.captures[1].global_index = Some(5_000);
        sigmf::write_cf32(&dir.join("in"), &meta, &input).unwrap();
        let cfg = FilterConfig {
            channel: ChannelSpec {
                taps_file: None,
                model: ChannelModel::Identity,
                ports: Some((2, 2)),
                default_ports: (1, 1),
                model_taps: 8,
                spacing: 1,
                decay_db_per_tap: 1.0,
                seed: 1,
                doppler_hz: 10.0,
                update_blocks: 64,
                sinusoids: 16,
            },
            input: dir.join("in"),
            output: dir.join("out"),
            block: 64,
            swap: SwapKind::Staggered,
            output_type: OutputType::Cf32,
            flush: false,
            sample_rate: None,
            write_taps: None,
        };
        let report = filter_recording(&cfg).unwrap();
        assert_eq!(report.samples_per_port, 500);
        let out = sigmf::read(&dir.join("out")).unwrap();
        assert_eq!(out.meta.channels(), 2);
        // Annotations and captures carry over; the checksum is the output's own
        // (read() verified it against the output's data).
        assert_eq!(out.meta.annotations, meta.annotations);
        assert_eq!(out.meta.captures, meta.captures);
        let input_meta = sigmf::read(&dir.join("in")).unwrap().meta;
        let out_data = std::fs::read(sigmf::data_path(&dir.join("out"))).unwrap();
        assert_eq!(out.meta.global.sha512, Some(sigmf::sha512_hex(&out_data)));
        assert!(input_meta.global.sha512.is_some());
        let got = out.samples.to_cf32();
        assert_eq!(got.len(), input.len());
        for (a, b) in got.iter().zip(&input) {
            assert!((a - b).norm() < 1e-5);
        }
        std::fs::remove_dir_all(dir).ok();
    }
}
