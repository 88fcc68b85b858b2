//! Offline channel emulation: a SigMF recording (its channels are the M
//! inputs) through an M x N channel into a new recording (N channels
//! interleaved per sample), with the UPOLS convolver and, for fading models,
//! response swaps every update interval.

use std::path::PathBuf;
use std::time::Instant;

use radiohost_iq::sigmf::{DataType, SampleReader, SampleWriter, SigMfError};
use radiohost_iq::Cf32;

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
    /// Samples per port read, filtered and written per chunk.
    pub chunk_samples: usize,
    /// Bytes held by the chunk buffers (reader, writer, per-port and interleaved
    /// samples) at the end of the run: the streaming memory, whatever the file size.
    pub buffer_bytes: usize,
    /// The whole command, file to file: from opening the input to the output's
    /// final rename (reading, checksums, filtering, writing).
    pub seconds: f64,
    /// Output samples per port over `seconds`.
    pub msps_per_port: f64,
    /// The convolver's inner loop alone (response swaps included).
    pub filter_seconds: f64,
    /// Filtered samples per port (whole blocks) over `filter_seconds`.
    pub filter_msps_per_port: f64,
}

/// Samples (all channels together) per chunk of a streaming run: about 2 MB of
/// cf32 per buffer, so the run holds a few tens of MB whatever the file size.
pub const CHUNK_SAMPLES: usize = 1 << 18;

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

/// Filters `cfg.input` through `cfg.channel` into `cfg.output`, streaming in
/// chunks of [`CHUNK_SAMPLES`] samples.
pub fn filter_recording(cfg: &FilterConfig) -> Result<FilterReport, FilterError> {
    filter_recording_chunked(cfg, CHUNK_SAMPLES)
}

/// [`filter_recording`] with chunks of about `chunk_samples` samples (all channels
/// together; rounded to whole blocks of B samples per port, at least one block).
/// The output does not depend on the chunk size.
pub fn filter_recording_chunked(
    cfg: &FilterConfig,
    chunk_samples: usize,
) -> Result<FilterReport, FilterError> {
    let started = Instant::now();
    let read_err = |source| FilterError::Read {
        path: cfg.input.clone(),
        source,
    };
    let write_err = |source| FilterError::Write {
        path: cfg.output.clone(),
        source,
    };
    let mut reader = SampleReader::open(&cfg.input).map_err(read_err)?;
    let sample_rate = reader.meta().global.sample_rate.or(cfg.sample_rate);
    let (mut channel, what) = build_channel(&cfg.channel, cfg.block, sample_rate)?;
    let taps = channel.initial_response()?;
    let capacity = match &channel {
        Channel::Static(t) => t.max_len(),
        Channel::Fading { channel, .. } => channel.len(),
    };
    let (m, n) = (taps.inputs(), taps.outputs());
    let channels = reader.channels();
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

    let mut meta = reader.meta().clone();
    meta.global.num_channels = Some(n);
    meta.global.description = Some(format!(
        "radiohost chanemu: {} through {what}",
        cfg.input.display()
    ));
    meta.global.datatype = match cfg.output_type {
        OutputType::Cf32 => DataType::Cf32Le,
        OutputType::Ci16 => DataType::Ci16Le,
    }
    .name()
    .into();
    // Captures and annotations index samples, which keep their places (the output is
    // as long as the input, or longer with the tails); the writer computes the
    // output's own core:sha512.
    meta.global.sha512 = None;
    let mut writer = SampleWriter::create(&cfg.output, &meta).map_err(write_err)?;

    let len = usize::try_from(reader.samples()).unwrap_or(usize::MAX);
    let out_len = if cfg.flush { len + capacity - 1 } else { len };
    let b = cfg.block;
    let blocks = out_len.div_ceil(b);
    let chunk_blocks = (chunk_samples / m.max(n) / b).max(1);
    let chunk = chunk_blocks * b;
    let zero = Cf32::new(0.0, 0.0);
    // The chunk buffers: allocated once, reused for every chunk.
    let mut interleaved_in: Vec<Cf32> = Vec::with_capacity(chunk * m);
    let mut ins = vec![vec![zero; chunk]; m];
    let mut outs = vec![vec![zero; chunk]; n];
    let mut interleaved_out: Vec<Cf32> = Vec::with_capacity(chunk * n);
    let mut next = taps;
    let mut swaps = 0u64;
    let mut clipped = 0;
    let mut filter_seconds = 0.0;
    let mut k0 = 0;
    while k0 < blocks {
        let here = chunk_blocks.min(blocks - k0);
        let got = reader
            .read_cf32(&mut interleaved_in, here * b)
            .map_err(read_err)?;
        for (p, port) in ins.iter_mut().enumerate() {
            for (dst, src) in port
                .iter_mut()
                .zip(interleaved_in.iter().skip(p).step_by(m))
            {
                *dst = *src;
            }
            // Past the end of the input (the tails): zeros.
            port[got..here * b].fill(zero);
        }
        let filtering = Instant::now();
        for j in 0..here {
            let k = k0 + j;
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
            let span = j * b..(j + 1) * b;
            let in_refs: Vec<&[Cf32]> = ins.iter().map(|v| &v[span.clone()]).collect();
            let mut out_refs: Vec<&mut [Cf32]> =
                outs.iter_mut().map(|v| &mut v[span.clone()]).collect();
            conv.process_block(&in_refs, &mut out_refs)?;
        }
        filter_seconds += filtering.elapsed().as_secs_f64();
        let write = (here * b).min(out_len - k0 * b);
        interleaved_out.clear();
        for i in 0..write {
            interleaved_out.extend(outs.iter().map(|o| o[i]));
        }
        if cfg.output_type == OutputType::Ci16 {
            clipped += interleaved_out
                .iter()
                .filter(|s| s.re.abs() > 1.0 || s.im.abs() > 1.0)
                .count();
        }
        writer
            .write_from_cf32(&interleaved_out)
            .map_err(write_err)?;
        k0 += here;
    }
    let buffer_bytes = reader.buffer_capacity()
        + writer.buffer_capacity()
        + (interleaved_in.capacity() + interleaved_out.capacity()) * size_of::<Cf32>()
        + ins
            .iter()
            .chain(&outs)
            .map(|v| v.capacity() * size_of::<Cf32>())
            .sum::<usize>();
    // The input's checksum covers every byte read: verify it before the output
    // takes its final name (an unfinished writer removes its temporary file).
    reader.finish().map_err(read_err)?;
    writer.finish().map_err(write_err)?;
    let seconds = started.elapsed().as_secs_f64();

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
        chunk_samples: chunk,
        buffer_bytes,
        seconds,
        msps_per_port: out_len as f64 / seconds.max(1e-12) / 1e6,
        filter_seconds,
        filter_msps_per_port: (blocks * b) as f64 / filter_seconds.max(1e-12) / 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ChannelModel;
    use radiohost_iq::sigmf::{self, Annotation, Meta};

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

    fn spec(model: ChannelModel, ports: usize) -> ChannelSpec {
        ChannelSpec {
            taps_file: None,
            model,
            ports: Some((ports, ports)),
            default_ports: (1, 1),
            model_taps: 40,
            spacing: 1,
            decay_db_per_tap: 0.2,
            seed: 7,
            doppler_hz: 200.0,
            update_blocks: 3,
            sinusoids: 8,
        }
    }

    /// A 2-channel cf32 recording of `len` samples per channel.
    fn two_channel_input(dir: &std::path::Path, len: usize) -> Vec<Cf32> {
        let x: Vec<Cf32> = (0..2 * len)
            .map(|i| {
                let t = i as f32;
                Cf32::new(
                    (t * 0.013).sin() * 0.5,
                    (t * 0.007).cos() * 0.25 - 1e-4 * (i % 17) as f32,
                )
            })
            .collect();
        let meta = Meta::new(DataType::Cf32Le, 1e6)
            .num_channels(2)
            .capture(0, Some(2.4e9))
            .annotation(Annotation {
                sample_start: 100,
                sample_count: Some(50),
                label: Some("x".into()),
                ..Default::default()
            });
        sigmf::write_cf32(&dir.join("in"), &meta, &x).unwrap();
        x
    }

    /// The pre-streaming algorithm: the whole input in memory, filtered in one pass
    /// (same block schedule and swaps), interleaved, truncated to `out_len`.
    fn one_shot(cfg: &FilterConfig, x: &[Cf32], m: usize) -> Vec<Cf32> {
        let (mut channel, _) = build_channel(&cfg.channel, cfg.block, Some(1e6)).unwrap();
        let taps = channel.initial_response().unwrap();
        let capacity = match &channel {
            Channel::Static(t) => t.max_len(),
            Channel::Fading { channel, .. } => channel.len(),
        };
        let n = taps.outputs();
        let mut conv = MimoConvolver::with_capacity(cfg.block, capacity, &taps).unwrap();
        let len = x.len() / m;
        let out_len = if cfg.flush { len + capacity - 1 } else { len };
        let b = cfg.block;
        let blocks = out_len.div_ceil(b);
        let mut ins = vec![vec![Cf32::new(0.0, 0.0); blocks * b]; m];
        for (i, s) in x.iter().enumerate() {
            ins[i % m][i / m] = *s;
        }
        let mut outs = vec![vec![Cf32::new(0.0, 0.0); blocks * b]; n];
        let mut next = taps;
        for k in 0..blocks {
            if let Channel::Fading {
                channel,
                update_blocks,
            } = &mut channel
            {
                if k > 0 && k % *update_blocks == 0 {
                    channel.advance();
                    channel.write_response(&mut next).unwrap();
                    conv.swap_responses(&next, SwapMode::Staggered).unwrap();
                }
            }
            let i: Vec<&[Cf32]> = ins.iter().map(|v| &v[k * b..(k + 1) * b]).collect();
            let mut o: Vec<&mut [Cf32]> = outs
                .iter_mut()
                .map(|v| &mut v[k * b..(k + 1) * b])
                .collect();
            conv.process_block(&i, &mut o).unwrap();
        }
        (0..out_len)
            .flat_map(|i| outs.iter().map(move |o| o[i]))
            .collect()
    }

    fn config(dir: &std::path::Path, channel: ChannelSpec, flush: bool) -> FilterConfig {
        FilterConfig {
            channel,
            input: dir.join("in"),
            output: dir.join("out"),
            block: 32,
            swap: SwapKind::Staggered,
            output_type: OutputType::Cf32,
            flush,
            sample_rate: None,
            write_taps: None,
        }
    }

    #[test]
    fn streaming_equals_one_shot_on_many_chunks_with_two_channels() {
        let dir = tempfile_dir("stream");
        let len = 5_003; // not a whole number of blocks or chunks
        let x = two_channel_input(&dir, len);
        for (model, flush) in [
            (ChannelModel::Rayleigh, true),
            (ChannelModel::Jakes, false),
            (ChannelModel::Ar1, true),
        ] {
            let cfg = config(&dir, spec(model, 2), flush);
            // 4 blocks of 32 samples per port per chunk: 40 chunks.
            let report = filter_recording_chunked(&cfg, 2 * 4 * 32).unwrap();
            assert_eq!(report.chunk_samples, 128);
            assert!(
                report.blocks > 30 * 4,
                "{model:?}: only {} blocks",
                report.blocks
            );
            let want = one_shot(&cfg, &x, 2);
            let out = sigmf::read(&dir.join("out")).unwrap();
            assert_eq!(out.meta.channels(), 2);
            assert_eq!(out.meta.annotations.len(), 1);
            let got = out.samples.to_cf32();
            assert_eq!(got.len(), want.len(), "{model:?}");
            assert_eq!(report.samples_per_port * 2, want.len());
            if model != ChannelModel::Rayleigh {
                assert!(report.swaps > 10, "{model:?}: {} swaps", report.swaps);
            }
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).norm() <= 1e-6, "{model:?} sample {i}: {a} vs {b}");
            }
            // The default chunk (one chunk here) gives the same file.
            let whole = filter_recording(&cfg).unwrap();
            assert_eq!(whole.samples_per_port, report.samples_per_port);
            assert_eq!(
                sigmf::read(&dir.join("out")).unwrap().samples.to_cf32(),
                got
            );
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn streaming_static_channel_matches_direct_convolution() {
        let dir = tempfile_dir("direct");
        let len = 3_000;
        let x = two_channel_input(&dir, len);
        let cfg = config(&dir, spec(ChannelModel::Rayleigh, 2), true);
        let report = filter_recording_chunked(&cfg, 2 * 3 * 32).unwrap();
        let (channel, _) = build_channel(&cfg.channel, cfg.block, Some(1e6)).unwrap();
        let taps = channel.initial_response().unwrap();
        let out_len = len + taps.max_len() - 1;
        assert_eq!(report.samples_per_port, out_len);
        let got = sigmf::read(&dir.join("out")).unwrap().samples.to_cf32();
        for n in 0..2 {
            let mut want = vec![Cf32::new(0.0, 0.0); out_len];
            for m in 0..2 {
                let mut xm: Vec<Cf32> = x.iter().skip(m).step_by(2).copied().collect();
                xm.resize(out_len, Cf32::new(0.0, 0.0)); // the flushed tail
                for (w, y) in want
                    .iter_mut()
                    .zip(crate::direct::convolve_truncated(&xm, taps.path(n, m)))
                {
                    *w += y;
                }
            }
            for i in 0..out_len {
                let a = got[2 * i + n];
                assert!(
                    (a - want[i]).norm() < 1e-4,
                    "port {n} sample {i}: {a} vs {}",
                    want[i]
                );
            }
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn streaming_holds_one_chunk_whatever_the_file_size() {
        let dir = tempfile_dir("memory");
        let len = 20_000;
        two_channel_input(&dir, len);
        let chunk_samples = 2 * 8 * 32; // 8 blocks per port: ~80 chunks
        for output_type in [OutputType::Cf32, OutputType::Ci16] {
            let mut cfg = config(&dir, spec(ChannelModel::Rayleigh, 2), true);
            cfg.output_type = output_type;
            let r = filter_recording_chunked(&cfg, chunk_samples).unwrap();
            assert_eq!(r.chunk_samples, 8 * 32);
            assert!(r.blocks / 8 > 70, "{} blocks", r.blocks);
            // Reader bytes, interleaved in, 2 input and 2 output ports, interleaved
            // out, writer bytes: each at most one chunk of 2 channels of cf32.
            let one_chunk = r.chunk_samples * 2 * size_of::<Cf32>();
            assert!(
                r.buffer_bytes <= 6 * one_chunk,
                "{} > 6 x {one_chunk}",
                r.buffer_bytes
            );
            let file_bytes = std::fs::metadata(sigmf::data_path(&dir.join("in")))
                .unwrap()
                .len();
            assert!((r.buffer_bytes as u64) * 10 < file_bytes);
            assert!(r.seconds >= r.filter_seconds);
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn corrupt_input_leaves_no_output() {
        let dir = tempfile_dir("corrupt");
        two_channel_input(&dir, 2_000);
        let data = sigmf::data_path(&dir.join("in"));
        let mut bytes = std::fs::read(&data).unwrap();
        bytes[9_000] ^= 0x40;
        std::fs::write(&data, bytes).unwrap();
        let cfg = config(&dir, spec(ChannelModel::Rayleigh, 2), false);
        let err = filter_recording_chunked(&cfg, 256).unwrap_err().to_string();
        assert!(
            err.contains("in.sigmf-data") && err.contains("SHA-512"),
            "{err}"
        );
        assert!(!sigmf::data_path(&dir.join("out")).exists());
        assert!(!sigmf::meta_path(&dir.join("out")).exists());
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 2, "{leftovers:?}");
        std::fs::remove_dir_all(dir).ok();
    }

    fn tempfile_dir(what: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("radiohost-offline-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
