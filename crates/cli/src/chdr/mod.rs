//! `radiohost chdr`: CHDR streaming — the emulated streaming radio, the host
//! pass-through streamer, the live channel emulator, and their benchmark. The
//! work is radiohost_chdr's (`session`, `live`, `bench`); this module parses,
//! calls and prints.

mod bench;
mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand, ValueEnum};
use radiohost_chdr::emulate;
use radiohost_chdr::live::{self, RunConfig, RunReport};
use radiohost_chdr::radio::RadioConfig;
use radiohost_chdr::session::SessionConfig;
use radiohost_chdr::streamer::PollMode;
use radiohost_chdr::tx::TxPolicy;
use radiohost_dsp::spec::{parse_ports, ChannelModel, ChannelSpec};
use radiohost_testbed::units;

#[derive(Subcommand)]
pub enum ChdrCmd {
    /// Run an emulated streaming radio: RX ports send timestamped sc16 packets to a
    /// host, TX ports play received packets against the sample clock and report
    /// U (underrun), L (late) and S (sequence) events.
    Emulate(EmulateArgs),
    /// Host streamer pass-through (RX -> TX per packet) against an emulated radio,
    /// with per-packet RX->TX delay and end-to-end latency histograms.
    Passthrough(PassthroughArgs),
    /// Live channel emulator: every RX packet goes through an M x N UPOLS channel
    /// (dsp crate) and out to TX, between emulated radios.
    Chanemu(ChanemuArgs),
    /// Benchmark: loopback pass-through with busy-poll vs the blocking-receive
    /// baseline, measured in the same run.
    Bench(bench::BenchArgs),
}

pub fn run(cmd: ChdrCmd) -> Result<()> {
    match cmd {
        ChdrCmd::Emulate(a) => emulate(a),
        ChdrCmd::Passthrough(a) => {
            let cfg = a.stream.run_config(a.ports, a.ports);
            let r = live::passthrough(&cfg, &crate::ui::stop_flag())?;
            finish(&a.stream, &r)
        }
        ChdrCmd::Chanemu(a) => {
            let cfg = a.stream.run_config(1, 1);
            if !a.stream.json {
                println!("live channel emulator, UPOLS block {}", a.block);
            }
            let r = live::chanemu(&cfg, &a.spec()?, a.block, &crate::ui::stop_flag())?;
            finish(&a.stream, &r)
        }
        ChdrCmd::Bench(a) => bench::run(a),
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PolicyArg {
    /// Replace missing/late samples by zeros: output stays sample-synchronous.
    ZeroFill,
    /// Stop on underrun, drop late packets whole, drop until RESYNC after a sequence error.
    DropResync,
}

impl From<PolicyArg> for TxPolicy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::ZeroFill => TxPolicy::ZeroFill,
            PolicyArg::DropResync => TxPolicy::DropResync,
        }
    }
}

/// Options shared by the streaming commands.
#[derive(Args, Clone, Debug)]
pub struct StreamArgs {
    /// Sample rate of the emulated radio per port (S/s, kS/s, MS/s; e.g. 10MS/s).
    #[arg(long, default_value = "10MS/s", value_parser = units::parse_sample_rate)]
    rate: f64,
    /// Samples per CHDR packet, 1 to 16000.
    #[arg(long, default_value_t = 512, value_parser = crate::ui::count_in::<usize>(1, 16_000))]
    spp: usize,
    /// RX packets per port, 1 to 100000000.
    #[arg(long, default_value_t = 5000, value_parser = crate::ui::count_in::<u64>(1, 100_000_000))]
    packets: u64,
    /// TX time = RX time + this budget (ns, us, ms, s). Packets later than that are late.
    #[arg(long, default_value = "2ms", value_parser = units::parse_duration)]
    offset: Duration,
    /// Spin on non-blocking recvmmsg instead of sleeping in it.
    #[arg(long)]
    busy_poll: bool,
    /// Pin the streamer thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Pin the emulated radio thread to this CPU.
    #[arg(long)]
    radio_cpu: Option<usize>,
    /// Let the emulated radio spin between packets (exact pacing, one busy core).
    #[arg(long)]
    radio_spin: bool,
    /// Run the streamer and emulated radio threads under SCHED_FIFO at this
    /// priority (1-99; needs CAP_SYS_NICE), so other tasks cannot time-slice them.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=99))]
    rt_priority: Option<i32>,
    /// Datagrams per recvmmsg/sendmmsg, 1 to 1024.
    #[arg(long, default_value_t = 32, value_parser = crate::ui::count_in::<usize>(1, 1024))]
    batch: usize,
    /// What the radio's TX does with missing or late packets.
    #[arg(long, value_enum, default_value_t = PolicyArg::ZeroFill)]
    policy: PolicyArg,
    /// Radio TX buffer in packets (the flow-control credit), 1 to 1000000.
    #[arg(long, default_value_t = 1024, value_parser = crate::ui::count_in::<u32>(1, 1_000_000))]
    capacity: u32,
    /// Also forward every RX packet, unchanged, to this address (repeatable).
    #[arg(long = "subscribe")]
    subscribers: Vec<SocketAddr>,
    /// External radio mode: bind the streamer here (the radio sends RX packets to it) ...
    #[arg(long, requires = "radio_tx")]
    bind: Option<SocketAddr>,
    /// ... and send TX packets and stream commands to this radio TX address.
    #[arg(long, requires = "bind")]
    radio_tx: Option<SocketAddr>,
    /// Write the per-packet delay and end-to-end histograms as SVG: to FILE, or into
    /// DIR (an existing directory or a path ending in `/`) as chdr_run.svg.
    #[arg(long, value_name = "FILE|DIR", value_parser = |s: &str| crate::ui::SvgOut::new(std::path::Path::new(s)).map_err(|e| e.to_string()))]
    svg: Option<crate::ui::SvgOut>,
    /// Skip checking the transmitted samples against the expected output.
    #[arg(long)]
    no_verify: bool,
    /// Exit 0 even when the host did not keep up with the radio (late or dropped
    /// TX packets are still reported; the output check still applies).
    #[arg(long)]
    allow_late: bool,
    /// Print a JSON report instead of tables.
    #[arg(long)]
    json: bool,
}

impl StreamArgs {
    fn run_config(&self, inputs: usize, outputs: usize) -> RunConfig {
        let mut s = SessionConfig::new(inputs, outputs, self.rate, self.spp);
        s.packets = self.packets;
        s.offset = self.offset;
        s.poll = if self.busy_poll {
            PollMode::BusyPoll
        } else {
            PollMode::Blocking
        };
        s.cpu = self.cpu;
        s.radio_cpu = self.radio_cpu;
        s.radio_spin = self.radio_spin;
        s.rt_priority = self.rt_priority;
        s.batch = self.batch;
        s.policy = self.policy.into();
        s.capacity_pkts = self.capacity;
        s.subscribers = self.subscribers.clone();
        s.record = !self.no_verify;
        RunConfig {
            session: s,
            external: self.bind.zip(self.radio_tx),
            verify: !self.no_verify,
        }
    }
}

#[derive(Args, Debug)]
pub struct PassthroughArgs {
    /// Ports (RX streams in, TX streams out, one to one).
    #[arg(long, default_value_t = 1)]
    ports: usize,
    #[command(flatten)]
    stream: StreamArgs,
}

#[derive(Args, Debug)]
pub struct ChanemuArgs {
    /// Tap file: JSON (dsp tap-file format) or SigMF cf32; its shape gives the ports.
    #[arg(long, conflicts_with = "model")]
    taps: Option<PathBuf>,
    /// Channel model: rayleigh (i.i.d. Rayleigh taps, exponential power-delay
    /// profile), identity (each output = its input), or the slowly time-varying
    /// ar1 / jakes (Rayleigh taps fading with --doppler, response replaced
    /// every --update-blocks blocks by a glitch-free staggered swap).
    #[arg(long, value_enum)]
    model: Option<ModelArg>,
    /// Ports as INPUTSxOUTPUTS, e.g. 2x2 (default 2x2 for --model; a tap file's
    /// shape is checked against it when given).
    #[arg(long, value_parser = |s: &str| parse_ports(s).map_err(|e| e.to_string()))]
    ports: Option<(usize, usize)>,
    /// Convolution block B (samples, 1..=16000); --spp must be a multiple of it.
    #[arg(long, default_value_t = 256, value_parser = crate::ui::count_in::<usize>(1, 16000))]
    block: usize,
    /// Impulse response length for --model rayleigh/ar1/jakes (taps, 1 to 65536).
    #[arg(long, default_value_t = 512, value_parser = crate::ui::count_in::<usize>(1, 65_536))]
    length: usize,
    /// Total power decay across the response for --model rayleigh/ar1/jakes (dB, 0 to 200).
    #[arg(long, default_value_t = 30.0, value_parser = crate::ui::f64_in(0.0, 200.0).map(|v| v as f32))]
    decay_db: f32,
    /// Seed for --model rayleigh/ar1/jakes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Maximum Doppler shift for ar1/jakes (Hz, kHz; e.g. 10Hz): 0 Hz to 100 kHz,
    /// and below half the update rate (--rate / (--update-blocks x --block) / 2).
    #[arg(long, default_value = "10Hz", value_parser = crate::chanemu::parse_doppler)]
    doppler: f64,
    /// Blocks between response updates for ar1/jakes (at least the response's
    /// partition count, length / block rounded up; at most 1000000).
    #[arg(long, default_value_t = 64, value_parser = crate::ui::count_in::<usize>(1, 1_000_000))]
    update_blocks: usize,
    /// Sinusoids per tap for jakes, 1 to 4096.
    #[arg(long, default_value_t = 16, value_parser = crate::ui::count_in::<usize>(1, 4096))]
    sinusoids: usize,
    #[command(flatten)]
    stream: StreamArgs,
}

impl ChanemuArgs {
    fn spec(&self) -> Result<ChannelSpec> {
        if self.length == 0 {
            bail!("--length must be at least 1");
        }
        Ok(ChannelSpec {
            taps_file: self.taps.clone(),
            model: match self.model.unwrap_or(ModelArg::Rayleigh) {
                ModelArg::Rayleigh => ChannelModel::Rayleigh,
                ModelArg::Identity => ChannelModel::Identity,
                ModelArg::Ar1 => ChannelModel::Ar1,
                ModelArg::Jakes => ChannelModel::Jakes,
            },
            ports: self.ports,
            default_ports: (2, 2),
            model_taps: self.length,
            spacing: 1,
            decay_db_per_tap: ChannelSpec::per_tap_decay(self.length, self.decay_db),
            seed: self.seed,
            doppler_hz: self.doppler,
            update_blocks: self.update_blocks,
            sinusoids: self.sinusoids,
        })
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModelArg {
    Rayleigh,
    Identity,
    /// Rayleigh taps each following an AR(1) process, correlation J0(2 pi fd T).
    Ar1,
    /// Rayleigh taps each a Jakes sum of sinusoids (maximum Doppler fd).
    Jakes,
}

/// Prints a run (table or JSON), draws the plot, fails when the check failed.
fn finish(s: &StreamArgs, r: &RunReport) -> Result<()> {
    if s.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        report::print_run(r);
    }
    if let Some(svg) = &s.svg {
        let p = svg.path("chdr_run", false);
        let e2e = r.radio.as_ref().map(|r| &r.end_to_end_hist);
        report::plot(&p, &r.what, &r.streamer.rx_to_tx_hist, e2e)?;
        if !s.json {
            println!("  plot written to {}", p.display());
        }
    }
    if let Some(k) = r.keep_up.as_ref().filter(|k| !k.kept_up && !s.allow_late) {
        bail!(
            "{} (--allow-late accepts such a run)",
            k.reason
                .as_deref()
                .unwrap_or("the host did not keep up with the radio")
        );
    }
    if let Some(v) = r.verification.as_ref().filter(|v| !v.passed()) {
        bail!(
            "the transmitted samples do not match the expected output ({} of {} differ, {} zero-filled): \
             with late (L) or lost packets try a larger --offset",
            v.mismatches,
            v.checked,
            v.zero_filled
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct EmulateArgs {
    /// Where RX packets go (the host streamer's address).
    #[arg(long)]
    host: SocketAddr,
    /// Local address the TX ports listen on (the streamer's --radio-tx).
    #[arg(long, default_value = "127.0.0.1:49200")]
    tx_bind: SocketAddr,
    /// Local address RX packets are sent from.
    #[arg(long, default_value = "0.0.0.0:0")]
    rx_bind: SocketAddr,
    /// RX and TX ports (streams), 1 to 16.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16).map(usize::from))]
    ports: usize,
    /// Sample rate per port (S/s, kS/s, MS/s; e.g. 10MS/s).
    #[arg(long, default_value = "10MS/s", value_parser = units::parse_sample_rate)]
    rate: f64,
    /// Samples per RX packet, 1 to 16000 (one CHDR packet).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u16).range(1..=16_000).map(usize::from))]
    spp: usize,
    /// RX packets per port (the last carries EOB), 1 to 100000000.
    #[arg(long, default_value_t = 10000, value_parser = crate::ui::count_in::<u64>(1, 100_000_000))]
    packets: u64,
    /// What the TX side does with missing or late packets.
    #[arg(long, value_enum, default_value_t = PolicyArg::ZeroFill)]
    policy: PolicyArg,
    /// TX buffer in packets (advertised as flow-control capacity), 1 to 1000000.
    #[arg(long, default_value_t = 1024, value_parser = crate::ui::count_in::<u32>(1, 1_000_000))]
    capacity: u32,
    /// Wait this long before the first RX sample (ns, us, ms, s).
    #[arg(long, default_value = "500ms", value_parser = units::parse_duration)]
    start_delay: Duration,
    /// Keep the TX side running this long after the last RX packet (ns, us, ms, s).
    #[arg(long, default_value = "500ms", value_parser = units::parse_duration)]
    linger: Duration,
    /// Spin between packets for exact pacing (uses a core).
    #[arg(long)]
    spin: bool,
    /// Write what each TX port transmitted as a SigMF ci16 recording
    /// (<OUTPUT>-txN.sigmf-meta/-data), for verification.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

fn emulate(a: EmulateArgs) -> Result<()> {
    anyhow::ensure!((1..=16).contains(&a.ports), "--ports must be 1..=16");
    let cfg = RadioConfig {
        rx_bind: a.rx_bind,
        tx_bind: a.tx_bind,
        packets: a.packets,
        start_delay: a.start_delay,
        tx_capacity_pkts: a.capacity,
        policy: a.policy.into(),
        linger: a.linger,
        spin: a.spin,
        ..RadioConfig::with_ports(a.host, a.ports, a.rate, a.spp)
    };
    if !a.json {
        println!("emulated radio: {cfg}");
    }
    let r = emulate::emulate(cfg, a.output.as_deref(), &crate::ui::stop_flag())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    report::print_radio(&r);
    if let Some(out) = &a.output {
        println!("  TX recordings written to {}-txN.sigmf-*", out.display());
    }
    Ok(())
}
