//! `radiohost phy`: LDPC on files, the data generator, the reference uplink and
//! downlink pipelines (`radiohost_phy::evaluate`), and the baseband benchmarks
//! (`radiohost_phy::bench`).

mod ldpc;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use radiohost_phy::evaluate::{evaluate, generate_recording, Direction};
use radiohost_phy::FrameConfig;

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
    /// FFT, ZF 64x16, demodulation, whole 64x16 uplink and downlink frames on one
    /// core with each stage's core time beside its floor).
    Bench(BenchArgs),
}

#[derive(Args)]
pub struct GenerateArgs {
    /// Frame configuration JSON (see crates/phy/configs/).
    #[arg(long)]
    config: PathBuf,
    /// Output directory (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Number of frames (1..=1000).
    #[arg(long, default_value_t = 1, value_parser = crate::ui::count_in::<u64>(1, 1000))]
    frames: u64,
}

#[derive(Args)]
pub struct RunArgs {
    /// Frame configuration JSON (see crates/phy/configs/).
    #[arg(long)]
    config: PathBuf,
    /// Number of frames to generate and process (1..=100000).
    #[arg(long, default_value_t = 1, value_parser = crate::ui::count_in::<u64>(1, 100_000))]
    frames: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Print a JSON array of {name, value, unit, floor}.
    #[arg(long)]
    json: bool,
    /// Time to measure each kernel, with a unit (e.g. 500ms, 2s; more is steadier).
    #[arg(long = "per-kernel", alias = "seconds", default_value = "500ms",
          value_parser = radiohost_testbed::units::parse_positive_duration)]
    per_kernel: std::time::Duration,
    /// Highest instruction set the phy kernels and LDPC decoders may use:
    /// avx512, avx2 or portable (default: the best this CPU has).
    #[arg(long)]
    isa: Option<String>,
}

pub fn run(cmd: PhyCmd) -> Result<()> {
    match cmd {
        PhyCmd::Ldpc(c) => ldpc::run(c),
        PhyCmd::Generate(a) => generate(a),
        PhyCmd::Uplink(a) => pipeline(a, Direction::Uplink),
        PhyCmd::Downlink(a) => pipeline(a, Direction::Downlink),
        PhyCmd::Bench(a) => bench(a),
    }
}

fn load(path: &Path) -> Result<FrameConfig> {
    FrameConfig::load(path).with_context(|| format!("frame configuration {}", path.display()))
}

fn generate(a: GenerateArgs) -> Result<()> {
    let cfg = load(&a.config)?;
    generate_recording(&cfg, &a.out, a.frames)?;
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

fn pipeline(a: RunArgs, dir: Direction) -> Result<()> {
    let cfg = load(&a.config)?;
    let bar = crate::ui::Progress::new(format!("{} frames", dir.name()), a.frames, !a.json);
    let name = a.config.display().to_string();
    let r = evaluate(&cfg, &name, dir, a.frames, |_| bar.inc(1))
        .with_context(|| format!("{} on {name}", dir.name()))?;
    drop(bar);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{} {}x{} {} Zc={} rate={:.3} SNR={} dB, {} frame(s) ({})",
        dir.name(),
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
    Ok(())
}

fn bench(a: BenchArgs) -> Result<()> {
    use radiohost_phy::simd::Isa;
    let secs = a.per_kernel.as_secs_f64();
    anyhow::ensure!(
        secs > 0.0 && secs <= 60.0,
        "--per-kernel must be in (0, 60s]"
    );
    if let Some(name) = &a.isa {
        let isa = Isa::from_name(name)
            .with_context(|| format!("--isa {name:?}: expected avx512, avx2 or portable"))?;
        anyhow::ensure!(
            Isa::available().contains(&isa),
            "--isa {name}: this CPU does not support it (best: {})",
            Isa::detect().name()
        );
        Isa::limit(isa);
    }
    let bar = crate::ui::Progress::new("phy bench", radiohost_phy::bench::STEPS, !a.json);
    let rep = radiohost_phy::bench::run(secs, &crate::ui::stop_flag(), |m| bar.begin(m))?;
    drop(bar);
    let partial = || format!("{} kernel rows measured", rep.rows.len());
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep.rows)?);
        return crate::ui::partial_if_interrupted(partial);
    }
    println!(
        "phy bench, one core; peak {}; kernels at {}; copy bandwidth {:.1} GB/s",
        rep.peak,
        Isa::detect().name(),
        rep.copy_bandwidth / 1e9
    );
    println!(
        "{:<36} {:>10} {:<12} {:>10} {:>7}  baseline (same run)",
        "kernel", "value", "unit", "floor", "% floor"
    );
    for r in &rep.rows {
        let base = r.baseline.map_or(String::new(), |(name, v)| {
            format!("{:.1}x {name}", r.value / v)
        });
        println!(
            "{:<36} {:>10.2} {:<12} {:>10.2} {:>6.1}%  {base}",
            r.name,
            r.value,
            r.unit,
            r.floor,
            100.0 * r.value / r.floor
        );
        if !r.note.is_empty() {
            println!("{:<36} {}", "", r.note);
        }
    }
    for r in rep.rows.iter().filter(|r| !r.stages.is_empty()) {
        println!();
        println!(
            "{}: {:.2} core-ms per frame, floor {:.2} ms ({:.0}% of floor)",
            r.name,
            r.ms_per_frame.unwrap_or(0.0),
            r.floor_ms_per_frame.unwrap_or(0.0),
            100.0 * r.value / r.floor
        );
        println!(
            "  {:<10} {:>14} {:>14} {:>8}  floor basis",
            "stage", "core-us/frame", "floor us", "x floor"
        );
        for st in &r.stages {
            println!(
                "  {:<10} {:>14.0} {:>14.0} {:>8.1}  {}",
                st.stage,
                st.us_per_frame,
                st.floor_us_per_frame,
                st.us_per_frame / st.floor_us_per_frame.max(1e-9),
                st.floor_basis
            );
        }
    }
    crate::ui::partial_if_interrupted(partial)
}
