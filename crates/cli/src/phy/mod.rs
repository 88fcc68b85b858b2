//! `radiohost phy`: LDPC on files, the data generator, the reference uplink and
//! downlink pipelines, and the baseband benchmarks.

mod bench;
mod ldpc;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use radiohost_phy::downlink::{DownlinkPipeline, DownlinkUserOutput, UserEmulator};
use radiohost_phy::generator::{frame_rng, Generator};
use radiohost_phy::recording;
use radiohost_phy::uplink::{ErrorCount, UplinkOutput, UplinkPipeline};
use radiohost_phy::FrameConfig;
use serde::Serialize;

/// `radiohost phy ...`
#[derive(Subcommand)]
pub enum PhyCmd {
    /// 5G NR LDPC encode/decode of files (bits as '0'/'1' text or packed bytes,
    /// LLRs as little-endian f32).
    #[command(subcommand)]
    Ldpc(ldpc::LdpcCmd),
    /// Generate frames (what the base-station antennas receive) as a SigMF ci16
    /// recording plus ground truth (truth.json, channel.cf32, config.json).
    Generate(GenerateArgs),
    /// Run the reference uplink on generated frames and report bit/block errors.
    Uplink(RunArgs),
    /// Run the reference downlink, decode it with emulated users and report
    /// bit/block errors.
    Downlink(RunArgs),
    /// Baseband throughput with its physical floor beside it (LDPC decode/encode,
    /// FFT, ZF 64x16, demodulation, a whole 64x16 uplink frame on one core).
    Bench(bench::BenchArgs),
}

#[derive(Args)]
pub struct GenerateArgs {
    /// Frame configuration JSON (see crates/phy/configs/).
    #[arg(long)]
    config: PathBuf,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Number of frames.
    #[arg(long, default_value_t = 1)]
    frames: u64,
}

#[derive(Args)]
pub struct RunArgs {
    /// Frame configuration JSON (see crates/phy/configs/).
    #[arg(long)]
    config: PathBuf,
    /// Number of frames to generate and process.
    #[arg(long, default_value_t = 1)]
    frames: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: PhyCmd) -> Result<()> {
    match cmd {
        PhyCmd::Ldpc(c) => ldpc::run(c),
        PhyCmd::Generate(a) => generate(a),
        PhyCmd::Uplink(a) => pipeline(a, Direction::Uplink),
        PhyCmd::Downlink(a) => pipeline(a, Direction::Downlink),
        PhyCmd::Bench(a) => bench::run(a),
    }
}

fn load(path: &Path) -> Result<FrameConfig> {
    FrameConfig::load(path).with_context(|| format!("frame configuration {}", path.display()))
}

fn generate(a: GenerateArgs) -> Result<()> {
    anyhow::ensure!(
        a.frames >= 1 && a.frames <= 1000,
        "--frames must be 1..=1000 (got {})",
        a.frames
    );
    let cfg = load(&a.config)?;
    let mut gen = Generator::new(&cfg);
    let frames = (0..a.frames)
        .map(|f| Ok((f, gen.frame(f)?)))
        .collect::<Result<Vec<_>>>()?;
    recording::save(&a.out, &cfg, &frames)?;
    println!(
        "wrote {} frame(s) of {}x{} ({} samples per antenna per frame, {} uplink + {} downlink blocks per user) to {}",
        a.frames,
        cfg.antennas,
        cfg.users,
        cfg.frame_len(),
        cfg.uplink_blocks(),
        cfg.downlink_blocks(),
        a.out.display()
    );
    println!(
        "  rx.sigmf-meta / rx.sigmf-data: ci16_le, {} channels, {} Hz",
        cfg.antennas, cfg.sample_rate
    );
    println!("  truth.json (payload bits, gains), channel.cf32 (per-frame channel), config.json");
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Uplink,
    Downlink,
}

#[derive(Serialize)]
struct Report {
    direction: &'static str,
    config: String,
    antennas: usize,
    users: usize,
    modulation: &'static str,
    zc: usize,
    code_rate: f64,
    snr_db: f64,
    frames: u64,
    bits: u64,
    bit_errors: u64,
    ber: f64,
    blocks: u64,
    block_errors: u64,
    bler: f64,
    crc_failures: u64,
    mean_decoder_iterations: f64,
    seconds_per_frame: f64,
}

fn pipeline(a: RunArgs, dir: Direction) -> Result<()> {
    anyhow::ensure!(a.frames >= 1, "--frames must be at least 1");
    let cfg = load(&a.config)?;
    let blocks_per_frame = match dir {
        Direction::Uplink => cfg.uplink_blocks(),
        Direction::Downlink => cfg.downlink_blocks(),
    };
    anyhow::ensure!(
        blocks_per_frame > 0,
        "{} has no {} data symbols in frame_schedule {:?}",
        a.config.display(),
        if dir == Direction::Uplink {
            "U"
        } else {
            "D (beyond the reference one)"
        },
        cfg.file.frame_schedule
    );
    let mut gen = Generator::new(&cfg);
    let mut total = ErrorCount::default();
    let (mut iters, mut decoded) = (0u64, 0u64);
    let mut busy = std::time::Duration::ZERO;
    let bar = progress(a.frames, a.json);
    match dir {
        Direction::Uplink => {
            let mut ul = UplinkPipeline::new(&cfg)?;
            let mut out = UplinkOutput::for_config(&cfg);
            for f in 0..a.frames {
                let frame = gen.frame(f)?;
                let t = std::time::Instant::now();
                ul.process_frame(&frame.samples, &mut out)?;
                busy += t.elapsed();
                total.add(&ErrorCount::compare(
                    &frame.uplink_payload,
                    &out.payload,
                    &out.blocks,
                    cfg.block_payload_bits(),
                ));
                for r in out.blocks.iter().flatten() {
                    iters += r.iterations as u64;
                    decoded += 1;
                }
                bar.inc(1);
            }
        }
        Direction::Downlink => {
            let mut dl = DownlinkPipeline::new(&cfg);
            let mut ues = UserEmulator::new(&cfg)?;
            let mut out = DownlinkUserOutput::for_config(&cfg);
            let mut tx = vec![Default::default(); cfg.antennas * cfg.frame_len()];
            for f in 0..a.frames {
                let frame = gen.frame(f)?;
                let t = std::time::Instant::now();
                let info = dl.process_frame(&frame.samples, &frame.downlink_payload, &mut tx)?;
                busy += t.elapsed();
                let mut rng = frame_rng(cfg.seed, f, 1);
                ues.receive(&tx, &info, &frame.channel, &mut rng, &mut out)?;
                total.add(&ErrorCount::compare(
                    &frame.downlink_payload,
                    &out.payload,
                    &out.blocks,
                    cfg.block_payload_bits(),
                ));
                for r in out.blocks.iter().flatten() {
                    iters += r.iterations as u64;
                    decoded += 1;
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let report = Report {
        direction: if dir == Direction::Uplink {
            "uplink"
        } else {
            "downlink"
        },
        config: a.config.display().to_string(),
        antennas: cfg.antennas,
        users: cfg.users,
        modulation: cfg.modulation.name(),
        zc: cfg.code.zc,
        code_rate: cfg.code.rate(),
        snr_db: cfg.snr_db,
        frames: a.frames,
        bits: total.bits,
        bit_errors: total.bit_errors,
        ber: total.bit_errors as f64 / total.bits.max(1) as f64,
        blocks: total.blocks,
        block_errors: total.block_errors,
        bler: total.block_errors as f64 / total.blocks.max(1) as f64,
        crc_failures: total.crc_failures,
        mean_decoder_iterations: iters as f64 / decoded.max(1) as f64,
        seconds_per_frame: busy.as_secs_f64() / a.frames as f64,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let r = &report;
        println!(
            "{} {}x{} {} Zc={} rate={:.3} SNR={} dB, {} frame(s) ({})",
            r.direction,
            r.antennas,
            r.users,
            r.modulation,
            r.zc,
            r.code_rate,
            r.snr_db,
            r.frames,
            r.config
        );
        println!("  {:<22} {:>12}", "bits", r.bits);
        println!(
            "  {:<22} {:>12}  (BER {:.3e})",
            "bit errors", r.bit_errors, r.ber
        );
        println!("  {:<22} {:>12}", "code blocks", r.blocks);
        println!(
            "  {:<22} {:>12}  (BLER {:.3e})",
            "block errors", r.block_errors, r.bler
        );
        println!("  {:<22} {:>12}", "CRC failures", r.crc_failures);
        println!(
            "  {:<22} {:>12.2}",
            "decoder iterations", r.mean_decoder_iterations
        );
        println!(
            "  {:<22} {:>12.3}  (base-station side, one thread)",
            "ms per frame",
            r.seconds_per_frame * 1e3
        );
    }
    Ok(())
}

fn progress(n: u64, hidden: bool) -> indicatif::ProgressBar {
    if hidden || n < 4 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} frames {eta}")
    {
        bar.set_style(style);
    }
    bar
}
