//! `radiohost chanemu`: offline channel emulation on SigMF recordings (`file`,
//! radiohost_dsp::offline), the UPOLS convolver benchmark (`bench`,
//! radiohost_dsp::bench) and the live emulator (`run`, same as `chdr chanemu`).

mod bench;

use std::path::PathBuf;

use anyhow::Result;
use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand, ValueEnum};
use radiohost_dsp::offline::{filter_recording, FilterConfig, OutputType, SwapKind};
use radiohost_dsp::spec::{parse_ports, ChannelModel, ChannelSpec};

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

/// Widest Doppler any fading model here takes (the model's own check against its
/// update rate is usually tighter).
const MAX_DOPPLER_HZ: f64 = 100e3;

/// `--doppler`: a frequency with its unit, 0 Hz to [`MAX_DOPPLER_HZ`].
pub fn parse_doppler(s: &str) -> Result<f64, String> {
    let hz = radiohost_testbed::units::parse_frequency(s).map_err(|e| e.to_string())?;
    if (0.0..=MAX_DOPPLER_HZ).contains(&hz) {
        Ok(hz)
    } else {
        Err(format!(
            "{s} is out of range: the Doppler must be 0 Hz to 100kHz (and below half the \
             fading model's update rate)"
        ))
    }
}

/// Command-line names of radiohost_dsp's channel models.
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

impl From<Model> for ChannelModel {
    fn from(m: Model) -> Self {
        match m {
            Model::Identity => ChannelModel::Identity,
            Model::Rayleigh => ChannelModel::Rayleigh,
            Model::Ar1 => ChannelModel::Ar1,
            Model::Jakes => ChannelModel::Jakes,
        }
    }
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
    #[arg(long, value_parser = |s: &str| parse_ports(s).map_err(|e| e.to_string()))]
    pub ports: Option<(usize, usize)>,
    /// Taps of the model's exponential power-delay profile, 1 to 65536.
    #[arg(long, default_value_t = 8, value_parser = crate::ui::count_in::<usize>(1, 65_536))]
    pub model_taps: usize,
    /// Samples between model taps, 1 to 65536.
    #[arg(long, default_value_t = 1, value_parser = crate::ui::count_in::<usize>(1, 65_536))]
    pub spacing: usize,
    /// Power decay per model tap, dB (0 to 200).
    #[arg(long, default_value_t = 1.0, value_parser = crate::ui::f64_in(0.0, 200.0).map(|v| v as f32))]
    pub decay_db: f32,
    /// Maximum Doppler shift for ar1/jakes (Hz, kHz; e.g. 10Hz): 0 Hz to 100 kHz,
    /// and below half the update rate (sample rate / (update blocks x block) / 2).
    #[arg(long, default_value = "10Hz", value_parser = parse_doppler)]
    pub doppler: f64,
    /// Blocks between response updates for ar1/jakes, 1 to 1000000.
    #[arg(long, default_value_t = 64, value_parser = crate::ui::count_in::<usize>(1, 1_000_000))]
    pub update_blocks: usize,
    /// Sinusoids per tap for jakes, 1 to 4096.
    #[arg(long, default_value_t = 16, value_parser = crate::ui::count_in::<usize>(1, 4096))]
    pub sinusoids: usize,
    /// Seed of the model's random draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl ChannelArgs {
    fn spec(&self) -> ChannelSpec {
        ChannelSpec {
            taps_file: self.taps.clone(),
            model: self.model.unwrap_or(Model::Identity).into(),
            ports: self.ports,
            default_ports: (1, 1),
            model_taps: self.model_taps,
            spacing: self.spacing,
            decay_db_per_tap: self.decay_db,
            seed: self.seed,
            doppler_hz: self.doppler,
            update_blocks: self.update_blocks,
            sinusoids: self.sinusoids,
        }
    }
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
    /// Convolution block length B (samples per port per block, 1..=1048576).
    #[arg(long, default_value_t = 256, value_parser = crate::ui::count_in::<usize>(1, 1_048_576))]
    pub block: usize,
    /// How time-varying models replace responses.
    #[arg(long, value_enum, default_value_t = Swap::Staggered)]
    pub swap: Swap,
    /// Crossfade length in blocks (with --swap crossfade), 1 to 65536.
    #[arg(long, default_value_t = 4, value_parser = crate::ui::count_in::<usize>(1, 65_536))]
    pub crossfade_blocks: usize,
    /// Output sample type (ci16 is full scale 1.0 and clips).
    #[arg(long, value_enum, default_value_t = OutType::Cf32)]
    pub output_type: OutType,
    /// Also write the filter tails (output longer by the response length - 1).
    #[arg(long)]
    pub flush: bool,
    /// Sample rate when the recording has none (needed by jakes/ar1), e.g. 1MS/s
    /// or 250kS/s.
    #[arg(long, value_parser = radiohost_testbed::units::parse_sample_rate)]
    pub sample_rate: Option<f64>,
    /// Also write the (initial) responses: .json = tap file, else SigMF cf32.
    #[arg(long)]
    pub write_taps: Option<PathBuf>,
    /// Leave core:sha512 out of the output's metadata (optional in SigMF): skips
    /// hashing the output, about as much CPU as the rest of a cf32 run together.
    #[arg(long)]
    pub no_checksum: bool,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn run_file(a: FileArgs) -> Result<()> {
    let s = filter_recording(&FilterConfig {
        channel: a.channel.spec(),
        input: a.input,
        output: a.output,
        block: a.block,
        swap: match a.swap {
            Swap::Staggered => SwapKind::Staggered,
            Swap::Crossfade => SwapKind::Crossfade(a.crossfade_blocks),
        },
        output_type: match a.output_type {
            OutType::Cf32 => OutputType::Cf32,
            OutType::Ci16 => OutputType::Ci16,
        },
        flush: a.flush,
        sample_rate: a.sample_rate,
        write_taps: a.write_taps,
        checksum: !a.no_checksum,
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!("chanemu file: {} -> {}", s.input, s.output);
    println!("  channel     {}", s.channel);
    println!(
        "  ports       {}   block {}   taps {}   partitions {}   MAC {}",
        s.ports, s.block, s.taps, s.partitions, s.kernel
    );
    println!(
        "  samples     {} per port in {} blocks, {} response swaps",
        s.samples_per_port, s.blocks, s.swaps
    );
    if a.output_type == OutType::Ci16 {
        println!("  clipped     {} samples beyond full scale", s.clipped);
    }
    println!(
        "  file to file  {:.3} s, {:.1} MSa/s per port (open to final rename: read{}, filter, {}write)",
        s.seconds,
        s.msps_per_port,
        if s.input_checksum { " + verify SHA-512" } else { "" },
        if a.no_checksum { "" } else { "SHA-512 + " }
    );
    println!(
        "  filter only   {:.3} s, {:.1} MSa/s per port (convolver inner loop)",
        s.filter_seconds, s.filter_msps_per_port
    );
    println!(
        "  streaming     {} samples per port per chunk, {:.1} MB of chunk buffers",
        s.chunk_samples,
        s.buffer_bytes as f64 / 1e6
    );
    Ok(())
}
