//! Offline channel emulation: a SigMF recording (its channels are the M
//! inputs) through an M x N channel into a new recording (N channels
//! interleaved per sample), with the UPOLS convolver and, for fading models,
//! response swaps every update interval.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;
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
    /// Store the output's `core:sha512` (hashing it costs about as much CPU as
    /// the rest of a cf32 run together); false leaves it out.
    pub checksum: bool,
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
    /// The input had a `core:sha512`, verified over every byte read.
    pub input_checksum: bool,
    /// The convolver's inner loop alone (response swaps included).
    pub filter_seconds: f64,
    /// Filtered samples per port (whole blocks) over `filter_seconds`.
    pub filter_msps_per_port: f64,
}

/// Samples (all channels together) per chunk of a streaming run: 512 KB of cf32
/// per buffer (cache-sized, so each stage finds its chunk in cache), so the run
/// holds a few MB whatever the file size.
pub const CHUNK_SAMPLES: usize = 1 << 16;

/// Chunks in flight between two pipeline stages (the buffers circulating between
/// the reader and the filter, and between the filter and the writer).
pub const CHUNKS_IN_FLIGHT: usize = 4;

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
    #[error("{path} is a directory; name the output recording inside it, e.g. {}", path.join("out").display())]
    OutputIsDirectory { path: PathBuf },
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

/// The shape of a run's chunks: B samples per block, whole blocks per chunk.
#[derive(Clone, Copy)]
struct Plan {
    inputs: usize,
    outputs: usize,
    block: usize,
    /// Input samples per port.
    len: usize,
    /// Output samples per port.
    out_len: usize,
    blocks: usize,
    chunk_blocks: usize,
}

impl Plan {
    fn chunk(&self) -> usize {
        self.chunk_blocks * self.block
    }
}

/// What the filter stage did.
struct Filtered {
    swaps: u64,
    seconds: f64,
    /// Bytes of the stage's own port buffers.
    buffer_bytes: usize,
}

/// Why the filter stage stopped early: its own error, or a neighbour stage that
/// ended (whose own error then explains why).
enum FilterStop {
    Failed(FilterError),
    InputEnded,
    OutputEnded,
}

impl From<DspError> for FilterStop {
    fn from(e: DspError) -> Self {
        FilterStop::Failed(e.into())
    }
}

impl From<ChannelSpecError> for FilterStop {
    fn from(e: ChannelSpecError) -> Self {
        FilterStop::Failed(e.into())
    }
}

/// [`filter_recording`] with chunks of about `chunk_samples` samples (all channels
/// together; rounded to whole blocks of B samples per port, at least one block).
/// The output does not depend on the chunk size.
///
/// Three stages overlap on their own threads, joined by bounded queues of
/// recycled chunk buffers (so memory stays a few chunks whatever the file size):
/// reading (with the input's SHA-512 and the conversion to floats), filtering
/// (this thread), and writing (conversion, the output's SHA-512, the write).
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
    if cfg.output.is_dir() {
        return Err(FilterError::OutputIsDirectory {
            path: cfg.output.clone(),
        });
    }
    let mut reader = SampleReader::open(&cfg.input).map_err(read_err)?;
    let input_checksum = reader.meta().global.sha512.is_some();
    let sample_rate = reader.meta().global.sample_rate.or(cfg.sample_rate);
    let (channel, what) = build_channel(&cfg.channel, cfg.block, sample_rate)?;
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
    let conv = MimoConvolver::with_capacity(cfg.block, capacity, &taps)?;
    let (partitions, kernel) = (conv.partitions(), conv.kernel().name());
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
    if !cfg.checksum {
        writer = writer.without_checksum();
    }

    let len = usize::try_from(reader.samples()).unwrap_or(usize::MAX);
    let out_len = if cfg.flush { len + capacity - 1 } else { len };
    let b = cfg.block;
    let plan = Plan {
        inputs: m,
        outputs: n,
        block: b,
        len,
        out_len,
        blocks: out_len.div_ceil(b),
        chunk_blocks: (chunk_samples / m.max(n) / b).max(1),
    };
    let chunk = plan.chunk();
    let ci16 = cfg.output_type == OutputType::Ci16;

    // The chunk buffers, allocated once and recycled through the `free` queues.
    let (free_in_tx, free_in_rx) = sync_channel::<Vec<Cf32>>(CHUNKS_IN_FLIGHT);
    let (full_in_tx, full_in_rx) = sync_channel::<Vec<Cf32>>(CHUNKS_IN_FLIGHT);
    let (free_out_tx, free_out_rx) = sync_channel::<Vec<Cf32>>(CHUNKS_IN_FLIGHT);
    let (full_out_tx, full_out_rx) = sync_channel::<Vec<Cf32>>(CHUNKS_IN_FLIGHT);
    for _ in 0..CHUNKS_IN_FLIGHT {
        // Capacity matches the number of buffers: never blocks, never fails.
        let _ = free_in_tx.send(Vec::with_capacity(chunk * m));
        let _ = free_out_tx.send(Vec::with_capacity(chunk * n));
    }
    let pool_bytes = CHUNKS_IN_FLIGHT * chunk * (m + n) * size_of::<Cf32>();

    let (filtered, read, written) = thread::scope(|s| {
        let reading = thread::Builder::new()
            .name("chanemu-read".into())
            .spawn_scoped(s, move || {
                read_stage(&mut reader, chunk, &free_in_rx, &full_in_tx).map(|()| reader)
            });
        let writing = thread::Builder::new()
            .name("chanemu-write".into())
            .spawn_scoped(s, move || {
                write_stage(&mut writer, ci16, &full_out_rx, &free_out_tx)
                    .map(|clipped| (writer, clipped))
            });
        let filtered = filter_stage(
            plan,
            channel,
            conv,
            cfg.swap,
            (full_in_rx, free_in_tx),
            (free_out_rx, full_out_tx),
        );
        // The stage's queue ends are dropped: both neighbours see the end.
        (filtered, join_stage(reading), join_stage(writing))
    });
    // A reader or writer failure explains a filter stage that stopped early.
    let reader = read.map_err(read_err)?;
    let (writer, clipped) = written.map_err(write_err)?;
    let filtered = match filtered {
        Ok(f) => f,
        Err(FilterStop::Failed(e)) => return Err(e),
        Err(FilterStop::InputEnded) => {
            return Err(read_err(SigMfError::Invalid {
                path: cfg.input.clone(),
                what: "the data ended before the length given at open".into(),
            }))
        }
        Err(FilterStop::OutputEnded) => {
            return Err(write_err(SigMfError::Invalid {
                path: cfg.output.clone(),
                what: "the writer stopped early".into(),
            }))
        }
    };
    let buffer_bytes =
        reader.buffer_capacity() + writer.buffer_capacity() + pool_bytes + filtered.buffer_bytes;
    // The input's checksum covers every byte read: verify it before the output
    // takes its final name (an unfinished writer removes its temporary file).
    reader.finish().map_err(read_err)?;
    writer.finish().map_err(write_err)?;
    let seconds = started.elapsed().as_secs_f64();
    let filter_seconds = filtered.seconds;

    Ok(FilterReport {
        input: cfg.input.display().to_string(),
        output: cfg.output.display().to_string(),
        channel: what,
        ports: format!("{m}x{n}"),
        block: b,
        taps: capacity,
        partitions,
        kernel,
        samples_per_port: out_len,
        blocks: plan.blocks,
        swaps: filtered.swaps,
        clipped,
        chunk_samples: chunk,
        buffer_bytes,
        seconds,
        msps_per_port: out_len as f64 / seconds.max(1e-12) / 1e6,
        input_checksum,
        filter_seconds,
        filter_msps_per_port: (plan.blocks * b) as f64 / filter_seconds.max(1e-12) / 1e6,
    })
}

/// A stage thread's result (a thread that could not start is an I/O error; a
/// panic carries on as one).
fn join_stage<T>(
    handle: std::io::Result<thread::ScopedJoinHandle<'_, Result<T, SigMfError>>>,
) -> Result<T, SigMfError> {
    match handle {
        Ok(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
        Err(source) => Err(SigMfError::Io {
            path: PathBuf::from("(starting a pipeline thread)"),
            source,
        }),
    }
}

/// Reads `chunk` samples per port at a time into recycled buffers until the end
/// of the data (or until the filter stage stops taking them).
fn read_stage(
    reader: &mut SampleReader,
    chunk: usize,
    free: &Receiver<Vec<Cf32>>,
    full: &SyncSender<Vec<Cf32>>,
) -> Result<(), SigMfError> {
    while let Ok(mut buf) = free.recv() {
        if reader.read_cf32(&mut buf, chunk)? == 0 || full.send(buf).is_err() {
            break;
        }
    }
    Ok(())
}

/// Writes every filtered chunk (counting samples beyond full scale for ci16) and
/// hands its buffer back. Returns the clipped count.
fn write_stage(
    writer: &mut SampleWriter,
    ci16: bool,
    full: &Receiver<Vec<Cf32>>,
    free: &SyncSender<Vec<Cf32>>,
) -> Result<usize, SigMfError> {
    let mut clipped = 0;
    for buf in full {
        if ci16 {
            clipped += buf
                .iter()
                .filter(|s| s.re.abs() > 1.0 || s.im.abs() > 1.0)
                .count();
        }
        writer.write_from_cf32(&buf)?;
        // The filter may have finished: then the buffer is not needed again.
        let _ = free.send(buf);
    }
    Ok(clipped)
}

/// The filter stage: per chunk, interleaved input -> per-port blocks -> the
/// convolver (with the fading model's response swaps) -> interleaved output.
/// Single-port sides skip the (de)interleaving copy and work in the chunk buffer.
fn filter_stage(
    plan: Plan,
    mut channel: Channel,
    mut conv: MimoConvolver,
    swap: SwapKind,
    (full_in, free_in): (Receiver<Vec<Cf32>>, SyncSender<Vec<Cf32>>),
    (free_out, full_out): (Receiver<Vec<Cf32>>, SyncSender<Vec<Cf32>>),
) -> Result<Filtered, FilterStop> {
    let Plan {
        inputs: m,
        outputs: n,
        block: b,
        ..
    } = plan;
    let chunk = plan.chunk();
    let zero = Cf32::new(0.0, 0.0);
    let mode = match swap {
        SwapKind::Staggered => SwapMode::Staggered,
        SwapKind::Crossfade(blocks) => SwapMode::Crossfade { blocks },
    };
    let port_buffers = |ports: usize| {
        if ports > 1 {
            vec![vec![zero; chunk]; ports]
        } else {
            Vec::new()
        }
    };
    let mut ins = port_buffers(m);
    let mut outs = port_buffers(n);
    let mut next = channel.initial_response()?;
    let mut swaps = 0u64;
    let mut seconds = 0.0;
    let mut received = 0usize;
    // Past the end of the input (the flushed tails): a chunk of zeros.
    let mut tail: Vec<Cf32> = Vec::new();
    let mut k0 = 0;
    while k0 < plan.blocks {
        let here = plan.chunk_blocks.min(plan.blocks - k0);
        let need = here * b;
        let from_file = received < plan.len;
        let mut input = if from_file {
            full_in.recv().map_err(|_| FilterStop::InputEnded)?
        } else {
            std::mem::take(&mut tail)
        };
        let got = input.len() / m;
        received += got;
        if from_file && got < need && received < plan.len {
            return Err(FilterStop::InputEnded);
        }
        input.resize(need * m, zero);
        let mut output = free_out.recv().map_err(|_| FilterStop::OutputEnded)?;
        // Every sample written is overwritten below: resize, never clear (no memset).
        output.resize(need * n, zero);
        if m > 1 {
            for (p, port) in ins.iter_mut().enumerate() {
                for (dst, src) in port[..need].iter_mut().zip(input.iter().skip(p).step_by(m)) {
                    *dst = *src;
                }
            }
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
            let in_refs: Vec<&[Cf32]> = if m > 1 {
                ins.iter().map(|v| &v[span.clone()]).collect()
            } else {
                vec![&input[span.clone()]]
            };
            let mut out_refs: Vec<&mut [Cf32]> = if n > 1 {
                outs.iter_mut().map(|v| &mut v[span.clone()]).collect()
            } else {
                vec![&mut output[span.clone()]]
            };
            conv.process_block(&in_refs, &mut out_refs)?;
        }
        seconds += filtering.elapsed().as_secs_f64();
        let write = need.min(plan.out_len - k0 * b);
        if n > 1 {
            for (i, frame) in output.chunks_exact_mut(n).take(write).enumerate() {
                for (dst, port) in frame.iter_mut().zip(&outs) {
                    *dst = port[i];
                }
            }
        }
        output.truncate(write * n);
        full_out.send(output).map_err(|_| FilterStop::OutputEnded)?;
        input.clear();
        if from_file {
            // The reader may have finished: then the buffer is not needed again.
            let _ = free_in.send(input);
        } else {
            tail = input;
        }
        k0 += here;
    }
    Ok(Filtered {
        swaps,
        seconds,
        buffer_bytes: ins
            .iter()
            .chain(&outs)
            .chain(std::iter::once(&tail))
            .map(|v| v.capacity() * size_of::<Cf32>())
            .sum(),
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
            checksum: true,
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
            checksum: true,
        }
    }

    /// One input to two outputs and two inputs to one: the single-port sides work
    /// in the chunk buffers, the others (de)interleave; both equal the one-shot run.
    #[test]
    fn streaming_equals_one_shot_with_one_port_on_either_side() {
        let dir = tempfile_dir("shapes");
        let len = 3_001;
        let x2 = two_channel_input(&dir, len);
        let x1: Vec<Cf32> = x2.iter().step_by(2).copied().collect();
        let one = dir.join("one");
        sigmf::write_cf32(&one, &Meta::new(DataType::Cf32Le, 1e6), &x1).unwrap();
        for ((m, n), input, x) in [((1, 2), &one, &x1), ((2, 1), &dir.join("in"), &x2)] {
            let mut s = spec(ChannelModel::Rayleigh, 1);
            s.ports = Some((m, n));
            let mut cfg = config(&dir, s, true);
            cfg.input = input.clone();
            let report = filter_recording_chunked(&cfg, 3 * 32).unwrap();
            assert_eq!(report.ports, format!("{m}x{n}"));
            let want = one_shot(&cfg, x, m);
            let got = sigmf::read(&dir.join("out")).unwrap().samples.to_cf32();
            assert_eq!(got.len(), want.len(), "{m}x{n}");
            for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!((a - b).norm() < 1e-5, "{m}x{n} sample {i}: {a} vs {b}");
            }
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn without_checksum_the_output_has_no_sha512_and_reads_back() {
        let dir = tempfile_dir("nosum");
        let x = two_channel_input(&dir, 1_000);
        let mut cfg = config(&dir, spec(ChannelModel::Identity, 2), false);
        cfg.checksum = false;
        filter_recording(&cfg).unwrap();
        let out = sigmf::read(&dir.join("out")).unwrap();
        assert_eq!(out.meta.global.sha512, None);
        let got = out.samples.to_cf32();
        assert_eq!(got.len(), x.len());
        assert!(got.iter().zip(&x).all(|(a, b)| (a - b).norm() < 1e-5));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn a_directory_as_output_is_refused_before_any_work() {
        let dir = tempfile_dir("outdir");
        two_channel_input(&dir, 1_000);
        let target = dir.join("results");
        std::fs::create_dir(&target).unwrap();
        let mut cfg = config(&dir, spec(ChannelModel::Identity, 2), false);
        cfg.output = target.clone();
        let err = filter_recording(&cfg).unwrap_err().to_string();
        assert!(
            err.contains("is a directory") && err.contains("results/out"),
            "{err}"
        );
        // Nothing was written beside it (results.sigmf-*) or inside it.
        assert!(!sigmf::data_path(&target).exists() && !sigmf::meta_path(&target).exists());
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
        std::fs::remove_dir_all(dir).ok();
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
        let len = 40_000;
        two_channel_input(&dir, len);
        let chunk_samples = 2 * 8 * 32; // 8 blocks per port: ~80 chunks
        for output_type in [OutputType::Cf32, OutputType::Ci16] {
            let mut cfg = config(&dir, spec(ChannelModel::Rayleigh, 2), true);
            cfg.output_type = output_type;
            let r = filter_recording_chunked(&cfg, chunk_samples).unwrap();
            assert_eq!(r.chunk_samples, 8 * 32);
            assert!(r.blocks / 8 > 70, "{} blocks", r.blocks);
            // Reader and writer bytes, the chunks in flight on either side of the
            // filter, its 2 input and 2 output ports and its tail of zeros: each at
            // most one chunk of 2 channels of cf32.
            let one_chunk = r.chunk_samples * 2 * size_of::<Cf32>();
            let most = 2 * CHUNKS_IN_FLIGHT + 5;
            assert!(
                r.buffer_bytes <= most * one_chunk,
                "{} > {most} x {one_chunk}",
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
