//! `radiohost chanemu`: offline channel emulation on SigMF recordings (`file`), and the
//! UPOLS convolver benchmark (`bench`, in `bench.rs`).

mod bench;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_dsp::channel::{
    ar1_rho_for_doppler, draw_rayleigh, parse_tap_file, write_tap_file, FadingChannel,
    FadingProcess, PowerDelayProfile,
};
use radiohost_dsp::{MimoConvolver, MimoTaps, SwapMode};
use radiohost_iq::sigmf::{self, DataType, Meta};
use radiohost_iq::{Cf32, Ci16};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::Value;

#[derive(Subcommand, Debug)]
pub enum ChanemuCmd {
    /// Filter a SigMF recording through an emulated M x N channel (offline).
    File(FileArgs),
    /// Per-block timing of the UPOLS convolver (SISO, 2x2, 4x4) beside a naive FIR,
    /// GNU Radio's fft_filter_ccc (if installed) and the FLOP floor.
    Bench(bench::BenchArgs),
    /// Live channel emulation between CHDR radios (same as `radiohost chdr chanemu`):
    /// RX packets -> M x N UPOLS channel -> TX, with per-packet latency accounting.
    Run(crate::chdr::ChanemuArgs),
}

pub fn run(cmd: ChanemuCmd) -> Result<()> {
    match cmd {
        ChanemuCmd::File(a) => run_file(a),
        ChanemuCmd::Bench(a) => bench::run_bench(a),
        ChanemuCmd::Run(a) => crate::chdr::run(crate::chdr::ChdrCmd::Chanemu(a)),
    }
}

/// `MxN`: M input ports, N output ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub inputs: usize,
    pub outputs: usize,
}

fn parse_ports(s: &str) -> Result<Ports, String> {
    let (m, n) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?} is not MxN (inputs x outputs), e.g. 2x2"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|e| format!("{v:?} in {s:?}: {e}"))
    };
    let (inputs, outputs) = (parse(m)?, parse(n)?);
    if !(1..=radiohost_dsp::taps::MAX_PORTS).contains(&inputs)
        || !(1..=radiohost_dsp::taps::MAX_PORTS).contains(&outputs)
    {
        return Err(format!(
            "{s}: each side needs 1 to {} ports",
            radiohost_dsp::taps::MAX_PORTS
        ));
    }
    Ok(Ports { inputs, outputs })
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Port m to port m unchanged (M must equal N).
    Identity,
    /// Static i.i.d. Rayleigh taps with an exponential power-delay profile.
    Rayleigh,
    /// Rayleigh taps each following an AR(1) process, correlation J0(2 pi fd T).
    Ar1,
    /// Rayleigh taps each a Jakes sum of sinusoids (maximum Doppler fd).
    Jakes,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// Partition k switches at block t0+k: each input block sees one response wholly.
    Staggered,
    /// Linear crossfade of the two outputs over --crossfade-blocks blocks.
    Crossfade,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutType {
    Cf32,
    Ci16,
}

#[derive(Args, Debug)]
pub struct ChannelArgs {
    /// Impulse responses: a JSON tap file (see docs/ARCHITECTURE.md, DSP) or a SigMF cf32
    /// recording with inputs*outputs channels (channel n*inputs+m = path m -> n).
    #[arg(long, conflicts_with = "model")]
    pub taps: Option<PathBuf>,
    /// A channel model instead of a tap file.
    #[arg(long, value_enum)]
    pub model: Option<Model>,
    /// Ports as MxN (inputs x outputs); defaults to the tap file's, else 1x1.
    #[arg(long, value_parser = parse_ports)]
    pub ports: Option<Ports>,
    /// Taps of the model's exponential power-delay profile.
    #[arg(long, default_value_t = 8)]
    pub model_taps: usize,
    /// Samples between model taps.
    #[arg(long, default_value_t = 1)]
    pub spacing: usize,
    /// Power decay per model tap, dB.
    #[arg(long, default_value_t = 1.0)]
    pub decay_db: f32,
    /// Maximum Doppler shift for ar1/jakes, Hz.
    #[arg(long, default_value_t = 10.0)]
    pub doppler_hz: f64,
    /// Blocks between response updates for ar1/jakes.
    #[arg(long, default_value_t = 64)]
    pub update_blocks: usize,
    /// Sinusoids per tap for jakes.
    #[arg(long, default_value_t = 16)]
    pub sinusoids: usize,
    /// Seed of the model's random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct FileArgs {
    #[command(flatten)]
    pub channel: ChannelArgs,
    /// Input SigMF recording (base name or either file); its channels are the M inputs.
    #[arg(long)]
    pub input: PathBuf,
    /// Output SigMF recording (base name); N channels interleaved per sample.
    #[arg(long)]
    pub output: PathBuf,
    /// Convolution block length B (samples per port per block).
    #[arg(long, default_value_t = 256)]
    pub block: usize,
    /// How time-varying models replace responses.
    #[arg(long, value_enum, default_value_t = Swap::Staggered)]
    pub swap: Swap,
    /// Crossfade length in blocks (with --swap crossfade).
    #[arg(long, default_value_t = 4)]
    pub crossfade_blocks: usize,
    /// Output sample type (ci16 is full scale 1.0 and clips).
    #[arg(long, value_enum, default_value_t = OutType::Cf32)]
    pub output_type: OutType,
    /// Also write the filter tails (output longer by the response length - 1).
    #[arg(long)]
    pub flush: bool,
    /// Sample rate in Hz when the recording has none (needed by jakes/ar1).
    #[arg(long)]
    pub sample_rate: Option<f64>,
    /// Also write the (initial) responses: .json = tap file, else SigMF cf32.
    #[arg(long)]
    pub write_taps: Option<PathBuf>,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Static responses, or a fading channel updated every `update_blocks` blocks.
enum Channel {
    Static(MimoTaps),
    Fading {
        channel: Box<FadingChannel>,
        update_blocks: usize,
    },
}

fn build_channel(
    args: &ChannelArgs,
    block: usize,
    sample_rate: Option<f64>,
) -> Result<(Channel, String)> {
    if let Some(path) = &args.taps {
        let taps = read_taps(path, args.ports)?;
        return Ok((
            Channel::Static(taps),
            format!("taps from {}", path.display()),
        ));
    }
    let ports = args.ports.unwrap_or(Ports {
        inputs: 1,
        outputs: 1,
    });
    let model = args.model.unwrap_or(Model::Identity);
    let pdp = || {
        PowerDelayProfile::exponential(args.model_taps, args.spacing, args.decay_db)
            .context("model power-delay profile")
    };
    let interval = |rate: Option<f64>| -> Result<f64> {
        let rate = rate
            .context("ar1/jakes need a sample rate: the recording has none, give --sample-rate")?;
        if args.update_blocks == 0 {
            bail!("--update-blocks must be at least 1");
        }
        Ok((args.update_blocks * block) as f64 / rate)
    };
    let (inputs, outputs) = (ports.inputs, ports.outputs);
    Ok(match model {
        Model::Identity => {
            if inputs != outputs {
                bail!("the identity model needs as many inputs as outputs, got {inputs}x{outputs}");
            }
            let mut taps = MimoTaps::zeros(inputs, outputs, 1)?;
            for p in 0..inputs {
                taps.path_mut(p, p)[0] = Cf32::new(1.0, 0.0);
            }
            (
                Channel::Static(taps),
                format!("identity {inputs}x{outputs}"),
            )
        }
        Model::Rayleigh => {
            let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
            let taps = draw_rayleigh(&pdp()?, inputs, outputs, &mut rng)?;
            (
                Channel::Static(taps),
                format!(
                    "rayleigh {inputs}x{outputs}, {} taps, seed {}",
                    args.model_taps, args.seed
                ),
            )
        }
        Model::Ar1 | Model::Jakes => {
            let interval_s = interval(sample_rate)?;
            let process = if model == Model::Ar1 {
                FadingProcess::Ar1 {
                    rho: ar1_rho_for_doppler(args.doppler_hz, interval_s),
                }
            } else {
                FadingProcess::Jakes {
                    doppler_hz: args.doppler_hz,
                    interval_s,
                    sinusoids: args.sinusoids,
                }
            };
            let channel = FadingChannel::new(pdp()?, inputs, outputs, process, args.seed)?;
            let what = format!(
                "{model:?} fading {inputs}x{outputs}, {} taps, fd {} Hz, update every {} blocks ({:.3} ms), seed {}",
                args.model_taps,
                args.doppler_hz,
                args.update_blocks,
                interval_s * 1e3,
                args.seed
            )
            .to_lowercase();
            (
                Channel::Fading {
                    channel: Box::new(channel),
                    update_blocks: args.update_blocks,
                },
                what,
            )
        }
    })
}

/// Reads a JSON tap file or a SigMF cf32 impulse-response recording.
fn read_taps(path: &Path, ports: Option<Ports>) -> Result<MimoTaps> {
    let is_json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let taps = if is_json {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading tap file {}", path.display()))?;
        parse_tap_file(&text)
            .with_context(|| format!("tap file {}", path.display()))?
            .taps
    } else {
        let rec = sigmf::read(path)
            .with_context(|| format!("reading impulse responses {}", path.display()))?;
        let channels = rec.meta.channels();
        let field = |k: &str| {
            rec.meta
                .global
                .extra
                .get(k)
                .and_then(Value::as_u64)
                .map(|v| v as usize)
        };
        let (inputs, outputs) = match (field("radiohost:inputs"), field("radiohost:outputs"), ports)
        {
            (Some(m), Some(n), _) => (m, n),
            (_, _, Some(p)) => (p.inputs, p.outputs),
            _ if channels == 1 => (1, 1),
            _ => bail!(
                "{}: {channels} channels but no radiohost:inputs/outputs fields; give --ports MxN",
                path.display()
            ),
        };
        if inputs * outputs != channels {
            bail!(
                "{}: {channels} channels cannot hold {inputs}x{outputs} paths",
                path.display()
            );
        }
        let samples = rec.samples.to_cf32();
        let paths = (0..channels)
            .map(|c| samples.iter().skip(c).step_by(channels).copied().collect())
            .collect();
        MimoTaps::from_paths(inputs, outputs, paths)?
    };
    if let Some(p) = ports {
        if (p.inputs, p.outputs) != (taps.inputs(), taps.outputs()) {
            bail!(
                "--ports {}x{} but {} describes a {}x{} channel",
                p.inputs,
                p.outputs,
                path.display(),
                taps.inputs(),
                taps.outputs()
            );
        }
    }
    Ok(taps)
}

/// Writes responses as a tap file (.json) or a SigMF cf32 recording.
fn write_taps(path: &Path, taps: &MimoTaps, sample_rate: Option<f64>, what: &str) -> Result<()> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        std::fs::write(path, write_tap_file(taps, sample_rate, Some(what)))
            .with_context(|| format!("writing {}", path.display()))?;
        return Ok(());
    }
    let len = taps.max_len();
    let channels = taps.inputs() * taps.outputs();
    let mut data = vec![Cf32::new(0.0, 0.0); len * channels];
    for (c, p) in taps.paths().iter().enumerate() {
        for (i, v) in p.iter().enumerate() {
            data[i * channels + c] = *v;
        }
    }
    let mut meta = Meta::new(DataType::Cf32Le, sample_rate.unwrap_or(1.0))
        .num_channels(channels)
        .description(what);
    meta.global.sample_rate = sample_rate;
    meta.global
        .extra
        .insert("radiohost:inputs".into(), taps.inputs().into());
    meta.global
        .extra
        .insert("radiohost:outputs".into(), taps.outputs().into());
    sigmf::write_cf32(path, &meta, &data).with_context(|| format!("writing {}", path.display()))
}

#[derive(Serialize)]
struct FileSummary {
    input: String,
    output: String,
    channel: String,
    ports: String,
    block: usize,
    taps: usize,
    partitions: usize,
    kernel: &'static str,
    samples_per_port: usize,
    blocks: usize,
    swaps: u64,
    clipped: usize,
    seconds: f64,
    msps_per_port: f64,
}

fn run_file(a: FileArgs) -> Result<()> {
    let rec = sigmf::read(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let sample_rate = rec.meta.global.sample_rate.or(a.sample_rate);
    let (mut channel, what) = build_channel(&a.channel, a.block, sample_rate)?;
    let (taps, capacity) = match &mut channel {
        Channel::Static(t) => (t.clone(), t.max_len()),
        Channel::Fading { channel, .. } => {
            let mut t = channel.make_response();
            channel.write_response(&mut t)?;
            (t, channel.len())
        }
    };
    let (m, n) = (taps.inputs(), taps.outputs());
    let channels = rec.meta.channels();
    if channels != m {
        bail!(
            "{} has {channels} channel(s) but the channel has {m} input(s) ({what})",
            a.input.display()
        );
    }
    if let Some(path) = &a.write_taps {
        write_taps(path, &taps, sample_rate, &what)?;
    }
    let mut conv =
        MimoConvolver::with_capacity(a.block, capacity, &taps).context("building the convolver")?;
    let mode = match a.swap {
        Swap::Staggered => SwapMode::Staggered,
        Swap::Crossfade => SwapMode::Crossfade {
            blocks: a.crossfade_blocks,
        },
    };
    if let Channel::Fading { update_blocks, .. } = &channel {
        let needed = if mode == SwapMode::Staggered {
            conv.partitions()
        } else {
            a.crossfade_blocks
        };
        if *update_blocks < needed {
            bail!("--update-blocks {update_blocks} is shorter than one swap ({needed} blocks); raise it or lower --block");
        }
    }

    let samples = rec.samples.to_cf32();
    let len = samples.len() / m;
    let out_len = if a.flush { len + capacity - 1 } else { len };
    let b = a.block;
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
        a.input.display()
    ));
    meta.annotations.clear();
    let mut clipped = 0;
    match a.output_type {
        OutType::Cf32 => {
            meta.global.datatype = DataType::Cf32Le.name().into();
            sigmf::write_cf32(&a.output, &meta, &interleaved)
        }
        OutType::Ci16 => {
            meta.global.datatype = DataType::Ci16Le.name().into();
            clipped = interleaved
                .iter()
                .filter(|s| s.re.abs() > 1.0 || s.im.abs() > 1.0)
                .count();
            let v: Vec<Ci16> = interleaved.iter().map(|s| Ci16::from_cf32(*s)).collect();
            sigmf::write_ci16(&a.output, &meta, &v)
        }
    }
    .with_context(|| format!("writing {}", a.output.display()))?;

    let summary = FileSummary {
        input: a.input.display().to_string(),
        output: a.output.display().to_string(),
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
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!("chanemu file: {} -> {}", summary.input, summary.output);
        println!("  channel     {}", summary.channel);
        println!(
            "  ports       {}   block {}   taps {}   partitions {}   MAC {}",
            summary.ports, b, capacity, summary.partitions, summary.kernel
        );
        println!(
            "  samples     {} per port in {} blocks, {} response swaps",
            out_len, blocks, swaps
        );
        if a.output_type == OutType::Ci16 {
            println!("  clipped     {clipped} samples beyond full scale");
        }
        println!(
            "  processing  {:.3} s, {:.1} MSa/s per port",
            seconds, summary.msps_per_port
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("radiohost-chanemu-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn ports_parse_and_refuse_nonsense() {
        assert_eq!(
            parse_ports("2x3"),
            Ok(Ports {
                inputs: 2,
                outputs: 3
            })
        );
        assert_eq!(
            parse_ports("4X4"),
            Ok(Ports {
                inputs: 4,
                outputs: 4
            })
        );
        for bad in ["", "2", "0x1", "1x0", "ax2", "2x65", "1x1x1"] {
            assert!(parse_ports(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn responses_round_trip_through_sigmf_and_json() {
        let dir = scratch_dir("taps");
        let paths = (0..6)
            .map(|p| {
                (0..5)
                    .map(|i| Cf32::new(p as f32 + 0.5, -(i as f32)))
                    .collect()
            })
            .collect();
        let taps = MimoTaps::from_paths(2, 3, paths).unwrap();
        for name in ["t.json", "t.sigmf-meta"] {
            let path = dir.join(name);
            write_taps(&path, &taps, Some(1e6), "test").unwrap();
            assert_eq!(read_taps(&path, None).unwrap(), taps, "{name}");
            assert!(read_taps(
                &path,
                Some(Ports {
                    inputs: 3,
                    outputs: 2
                })
            )
            .is_err());
        }
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn identity_file_run_copies_the_recording() {
        let dir = scratch_dir("file");
        let input: Vec<Cf32> = (0..1000)
            .map(|i| Cf32::new((i as f32 * 0.1).sin(), i as f32 * 1e-3))
            .collect();
        let meta = Meta::new(DataType::Cf32Le, 1e6).num_channels(2);
        sigmf::write_cf32(&dir.join("in"), &meta, &input).unwrap();
        let args = FileArgs {
            channel: ChannelArgs {
                taps: None,
                model: Some(Model::Identity),
                ports: Some(Ports {
                    inputs: 2,
                    outputs: 2,
                }),
                model_taps: 8,
                spacing: 1,
                decay_db: 1.0,
                doppler_hz: 10.0,
                update_blocks: 64,
                sinusoids: 16,
                seed: 1,
            },
            input: dir.join("in"),
            output: dir.join("out"),
            block: 64,
            swap: Swap::Staggered,
            crossfade_blocks: 4,
            output_type: OutType::Cf32,
            flush: false,
            sample_rate: None,
            write_taps: None,
            json: true,
        };
        run_file(args).unwrap();
        let out = sigmf::read(&dir.join("out")).unwrap();
        assert_eq!(out.meta.channels(), 2);
        let got = out.samples.to_cf32();
        assert_eq!(got.len(), input.len());
        for (a, b) in got.iter().zip(&input) {
            assert!((a - b).norm() < 1e-5);
        }
        std::fs::remove_dir_all(dir).ok();
    }
}
