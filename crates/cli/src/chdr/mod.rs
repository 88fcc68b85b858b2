//! `radiohost chdr`: CHDR streaming — the emulated streaming radio, the host
//! pass-through streamer, the live channel emulator, and their benchmark.

mod bench;
mod report;
mod session;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_chdr::process::{PacketProcessor, Passthrough};
use radiohost_chdr::radio::{run_radio, RadioConfig};
use radiohost_chdr::streamer::{run_streamer, PollMode};
use radiohost_chdr::tx::TxPolicy;
use radiohost_iq::sigmf::{self, DataType, Meta};

mod channel;
use channel::{chanemu, identity_taps, rayleigh_taps, Expected};
use session::{run_session, ChannelProcessor, SessionOpts, SessionResult};

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
        ChdrCmd::Passthrough(a) => passthrough(a),
        ChdrCmd::Chanemu(a) => chanemu(a),
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
    /// Sample rate of the emulated radio (samples/s per port).
    #[arg(long, default_value_t = 10e6)]
    rate: f64,
    /// Samples per CHDR packet.
    #[arg(long, default_value_t = 512)]
    spp: usize,
    /// RX packets per port.
    #[arg(long, default_value_t = 5000)]
    packets: u64,
    /// TX time = RX time + this budget (microseconds). Packets later than that are late.
    #[arg(long, default_value_t = 2000.0)]
    offset_us: f64,
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
    /// Datagrams per recvmmsg/sendmmsg.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// What the radio's TX does with missing or late packets.
    #[arg(long, value_enum, default_value_t = PolicyArg::ZeroFill)]
    policy: PolicyArg,
    /// Radio TX buffer in packets (the flow-control credit).
    #[arg(long, default_value_t = 1024)]
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
    /// Write the per-packet delay and end-to-end histograms as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Skip checking the transmitted samples against the expected output.
    #[arg(long)]
    no_verify: bool,
    /// Print a JSON report instead of tables.
    #[arg(long)]
    json: bool,
}

impl StreamArgs {
    fn check(&self) -> Result<()> {
        ensure!(
            self.rate > 0.0 && self.rate.is_finite(),
            "--rate must be positive"
        );
        ensure!(
            (1..=16000).contains(&self.spp),
            "--spp must be 1..=16000 (CHDR length is 16 bits)"
        );
        ensure!(
            self.offset_us >= 0.0 && self.offset_us.is_finite(),
            "--offset-us must be >= 0"
        );
        ensure!(self.batch >= 1, "--batch must be at least 1");
        ensure!(self.capacity >= 1, "--capacity must be at least 1");
        Ok(())
    }

    fn session(&self, inputs: usize, outputs: usize) -> SessionOpts {
        SessionOpts {
            inputs,
            outputs,
            rate_sps: self.rate,
            samples_per_packet: self.spp,
            packets: self.packets,
            offset: Duration::from_secs_f64(self.offset_us / 1e6),
            poll: if self.busy_poll {
                PollMode::BusyPoll
            } else {
                PollMode::Blocking
            },
            cpu: self.cpu,
            radio_cpu: self.radio_cpu,
            radio_spin: self.radio_spin,
            rt_priority: self.rt_priority,
            batch: self.batch,
            policy: self.policy.into(),
            capacity_pkts: self.capacity,
            subscribers: self.subscribers.clone(),
            record: !self.no_verify,
        }
    }
}

fn stop_flag() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)) {
        tracing::warn!("Ctrl-C handler not installed: {e}");
    }
    stop
}

#[derive(Args, Debug)]
pub struct PassthroughArgs {
    /// Ports (RX streams in, TX streams out, one to one).
    #[arg(long, default_value_t = 1)]
    ports: usize,
    #[command(flatten)]
    stream: StreamArgs,
}

fn passthrough(a: PassthroughArgs) -> Result<()> {
    a.stream.check()?;
    ensure!((1..=16).contains(&a.ports), "--ports must be 1..=16");
    let taps = identity_taps(a.ports)?;
    run_streaming(
        "pass-through",
        &a.stream,
        &Expected::Static(&taps),
        Passthrough { ports: a.ports },
    )
}

#[derive(Args, Debug)]
pub struct ChanemuArgs {
    /// JSON tap file (dsp tap-file format); its shape gives the ports.
    #[arg(long, conflicts_with = "model")]
    taps: Option<PathBuf>,
    /// Channel model: rayleigh (i.i.d. Rayleigh taps, exponential power-delay
    /// profile), identity (each output = its input), or the slowly time-varying
    /// ar1 / jakes (Rayleigh taps fading with --doppler-hz, response replaced
    /// every --update-blocks blocks by a glitch-free staggered swap).
    #[arg(long, value_enum)]
    model: Option<ModelArg>,
    /// Ports as INPUTSxOUTPUTS, e.g. 2x2 (default 2x2 for --model; a tap file's
    /// shape is checked against it when given).
    #[arg(long)]
    ports: Option<String>,
    /// Convolution block B (samples); --spp must be a multiple of it.
    #[arg(long, default_value_t = 256)]
    block: usize,
    /// Impulse response length for --model rayleigh/ar1/jakes.
    #[arg(long, default_value_t = 512)]
    length: usize,
    /// Total power decay across the response for --model rayleigh/ar1/jakes (dB).
    #[arg(long, default_value_t = 30.0)]
    decay_db: f32,
    /// Seed for --model rayleigh/ar1/jakes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Maximum Doppler shift for ar1/jakes, Hz.
    #[arg(long, default_value_t = 10.0)]
    doppler_hz: f64,
    /// Blocks between response updates for ar1/jakes (at least the response's
    /// partition count, length / block rounded up).
    #[arg(long, default_value_t = 64)]
    update_blocks: usize,
    /// Sinusoids per tap for jakes.
    #[arg(long, default_value_t = 16)]
    sinusoids: usize,
    #[command(flatten)]
    stream: StreamArgs,
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

/// Run a streamer with `proc`, against the in-process radio or an external one.
fn run_streaming<P: PacketProcessor + 'static>(
    what: &str,
    s: &StreamArgs,
    expected: &Expected,
    proc: P,
) -> Result<()> {
    let (m, n) = (proc.inputs(), proc.outputs());
    let opts = s.session(m, n);
    if let (Some(bind), Some(radio_tx)) = (s.bind, s.radio_tx) {
        let mut cfg = opts.streamer_config(bind, radio_tx);
        // Stop 2 s after the radio goes quiet (or on Ctrl-C).
        cfg.idle_timeout = Duration::from_secs(2);
        if !s.json {
            println!("{what}: streamer on {bind}, radio TX at {radio_tx}; stops 2 s after the stream ends or on Ctrl-C");
        }
        let stop = stop_flag();
        let r = run_streamer(cfg, proc, &stop)?;
        if s.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "streamer": r }))?
            );
        } else {
            report::print_latency(&r, None);
            report::print_counts(&r, None);
        }
        if let Some(p) = &s.plot {
            report::plot(p, what, &r.rx_to_tx_hist, None)?;
        }
        return Ok(());
    }
    let result = run_session(&opts, proc)?;
    let verification = (!s.no_verify && opts.policy == TxPolicy::ZeroFill).then(|| {
        let (schedule, per) = match expected {
            Expected::Static(taps) => (std::slice::from_ref(*taps), usize::MAX),
            Expected::Varying {
                schedule,
                samples_per_response,
            } => (*schedule, *samples_per_response),
        };
        if !s.json {
            match expected {
                Expected::Static(_) => println!(
                    "  check: output vs direct convolution with the static channel"
                ),
                Expected::Varying { schedule, samples_per_response } => println!(
                    "  check: output vs direct convolution with the {} responses switched every {} input samples (each block filtered wholly by one response)",
                    schedule.len(),
                    samples_per_response
                ),
            }
        }
        let stride = if schedule[0].max_len() > 1 { 61 } else { 1 };
        report::verify_schedule(
            &result.radio,
            schedule,
            per,
            opts.offset_ticks(),
            (s.packets as usize) * s.spp,
            stride,
            2,
        )
    });
    print_session(what, s, &opts, &result, verification.as_ref())?;
    if let Some(v) = &verification {
        if !v.passed() {
            bail!(
                "the transmitted samples do not match the expected output ({} of {} differ, {} zero-filled): \
                 with late (L) or lost packets try a larger --offset-us",
                v.mismatches,
                v.checked,
                v.zero_filled
            );
        }
    }
    Ok(())
}

fn print_session(
    what: &str,
    s: &StreamArgs,
    o: &SessionOpts,
    r: &SessionResult,
    v: Option<&report::Verification>,
) -> Result<()> {
    if s.json {
        let j = serde_json::json!({
            "what": what,
            "rate_sps": o.rate_sps,
            "samples_per_packet": o.samples_per_packet,
            "packets": o.packets,
            "inputs": o.inputs,
            "outputs": o.outputs,
            "offset_us": s.offset_us,
            "poll": o.poll,
            "streamer": r.streamer,
            "radio": r.radio,
            "verification": v,
            "wall_s": r.wall.as_secs_f64(),
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        println!(
            "{what}: {}x{} ports, {} packets of {} samples at {:.3} MSa/s, {:?}, TX offset {} us, {:.2} s",
            o.inputs,
            o.outputs,
            o.packets,
            o.samples_per_packet,
            o.rate_sps / 1e6,
            o.poll,
            s.offset_us,
            r.wall.as_secs_f64()
        );
        report::print_latency(&r.streamer, Some(&r.radio));
        report::print_counts(&r.streamer, Some(&r.radio));
        if let Some(v) = v {
            report::print_verification(v);
        }
    }
    if let Some(p) = &s.plot {
        report::plot(
            p,
            what,
            &r.streamer.rx_to_tx_hist,
            Some(&r.radio.end_to_end_hist),
        )?;
        if !s.json {
            println!("  plot written to {}", p.display());
        }
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
    /// RX and TX ports (streams).
    #[arg(long, default_value_t = 1)]
    ports: usize,
    #[arg(long, default_value_t = 10e6)]
    rate: f64,
    #[arg(long, default_value_t = 512)]
    spp: usize,
    /// RX packets per port (the last carries EOB).
    #[arg(long, default_value_t = 10000)]
    packets: u64,
    #[arg(long, value_enum, default_value_t = PolicyArg::ZeroFill)]
    policy: PolicyArg,
    /// TX buffer in packets (advertised as flow-control capacity).
    #[arg(long, default_value_t = 1024)]
    capacity: u32,
    /// Wait this long before the first RX sample (ms).
    #[arg(long, default_value_t = 500)]
    start_delay_ms: u64,
    /// Keep the TX side running this long after the last RX packet (ms).
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
    /// Spin between packets for exact pacing (uses a core).
    #[arg(long)]
    spin: bool,
    /// Write what each TX port transmitted as a SigMF ci16 recording
    /// (<OUTPUT>-txN.sigmf-meta/-data), for verification.
    #[arg(long)]
    output: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

fn emulate(a: EmulateArgs) -> Result<()> {
    ensure!((1..=16).contains(&a.ports), "--ports must be 1..=16");
    let cfg = RadioConfig {
        host: a.host,
        rx_bind: a.rx_bind,
        tx_bind: a.tx_bind,
        rx_dst_epids: (0..a.ports as u16)
            .map(|p| session::HOST_RX_EPID + p)
            .collect(),
        tx_epids: (0..a.ports as u16)
            .map(|p| session::RADIO_TX_EPID + p)
            .collect(),
        rate_sps: a.rate,
        samples_per_packet: a.spp,
        packets: a.packets,
        start_delay: Duration::from_millis(a.start_delay_ms),
        tx_capacity_pkts: a.capacity,
        policy: a.policy.into(),
        linger: Duration::from_millis(a.linger_ms),
        record: a.output.is_some(),
        spin: a.spin,
    };
    if !a.json {
        println!(
            "emulated radio: {} ports, {:.3} MSa/s, {} samples/packet, RX -> {}, TX on {} (EPIDs 0x{:04x}+)",
            a.ports,
            a.rate / 1e6,
            a.spp,
            a.host,
            a.tx_bind,
            session::RADIO_TX_EPID
        );
    }
    let stop = stop_flag();
    let r = run_radio(cfg, &stop).context("emulated radio failed")?;
    if let Some(out) = &a.output {
        for (p, rec) in r.recordings.iter().enumerate() {
            let base = PathBuf::from(format!("{}-tx{p}", out.display()));
            let meta = Meta::new(DataType::Ci16Le, a.rate)
                .description(format!(
                    "radiohost chdr emulate: TX port {p} as transmitted"
                ))
                .capture(rec.origin.unwrap_or(0), None);
            sigmf::write_ci16(&base, &meta, &rec.samples)
                .with_context(|| format!("writing {}", base.display()))?;
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!("  RX packets sent: {}", r.rx_packets);
        for (p, t) in r.tx.iter().enumerate() {
            println!(
                "  TX{p}: {} packets, {} samples played, {} zero-filled; U={} L={} S={} O={}",
                t.packets,
                t.samples_played,
                t.zeros_played,
                t.underruns,
                t.late_packets,
                t.seq_errors,
                t.overflows
            );
        }
        let letters: String = r.event_letters.chars().take(200).collect();
        println!(
            "  events: {}",
            if letters.is_empty() { "none" } else { &letters }
        );
        let e = &r.end_to_end;
        println!(
            "  end-to-end (RX timestamp -> TX arrival): median {:.2} us, p99.9 {:.2} us, max {:.2} us over {} packets",
            e.median_ns as f64 / 1e3,
            e.p999_ns as f64 / 1e3,
            e.max_ns as f64 / 1e3,
            e.count
        );
        if let Some(out) = &a.output {
            println!("  TX recordings written to {}-txN.sigmf-*", out.display());
        }
    }
    Ok(())
}

/// The demo's channel stage: emulated RX radio -> host streamer with a 2x2
/// Rayleigh UPOLS channel -> emulated TX radio; verifies the transmitted samples
/// against a direct convolution of the captured input.
pub fn demo_stage() -> Result<()> {
    println!("== channel stage: live 2x2 channel emulation over CHDR (UPOLS, B=256, 512 taps) ==");
    // 2 MSa/s and 100 ms of TX slack: verifiable even on a loaded shared machine.
    let (m, n, length, block, spp, packets, rate) = (2, 2, 512, 256, 512, 2000u64, 2e6);
    let taps = rayleigh_taps(m, n, length, 30.0, 7)?;
    let proc = ChannelProcessor::new(&taps, block, spp)?;
    let opts = SessionOpts {
        inputs: m,
        outputs: n,
        rate_sps: rate,
        samples_per_packet: spp,
        packets,
        offset: Duration::from_millis(100),
        poll: PollMode::Blocking,
        cpu: None,
        radio_cpu: None,
        radio_spin: false,
        rt_priority: None,
        batch: 32,
        policy: TxPolicy::ZeroFill,
        capacity_pkts: 2048,
        subscribers: Vec::new(),
        record: true,
    };
    let r = run_session(&opts, proc)?;
    println!(
        "  {} packets x {} samples per port at {} MSa/s through the 2x2 channel in {:.2} s",
        packets,
        spp,
        rate / 1e6,
        r.wall.as_secs_f64()
    );
    let d = &r.streamer.rx_to_tx;
    println!(
        "  per-packet RX->TX delay: median {:.2} us, P99.9 {:.2} us ({} frames); end-to-end median {:.2} us",
        d.median_ns as f64 / 1e3,
        d.p999_ns as f64 / 1e3,
        d.count,
        r.radio.end_to_end.median_ns as f64 / 1e3
    );
    report::print_counts(&r.streamer, Some(&r.radio));
    let v = report::verify(
        &r.radio,
        &taps,
        opts.offset_ticks(),
        packets as usize * spp,
        61,
        2,
    );
    report::print_verification(&v);
    ensure!(
        v.passed(),
        "channel stage: transmitted samples differ from the convolution of the input ({} of {} checked)",
        v.mismatches,
        v.checked
    );
    Ok(())
}
