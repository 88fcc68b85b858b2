//! `radiohost gpu`: CUDA driver and NVRTC status, kernel compilation (no GPU needed),
//! executor descriptions (SMs per opcode by occupancy), the GPU-vs-CPU self-test and
//! the per-opcode kernel benchmark (these two need a GPU).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use hdrhistogram::Histogram;
use radiohost_gpu::describe::{ExecutorTable, KernelResources};
use radiohost_gpu::kernels::MODULES;
use radiohost_gpu::nvrtc::{compile, load_nvrtc, CompiledModule};
use radiohost_gpu::occupancy::GpuSpec;
use radiohost_gpu::{probe_driver, selftest, GpuDevice, GpuExecutor};
use radiohost_phy::FrameConfig;
use radiohost_station::isa::{Instr, Opcode};
use radiohost_station::shape::FrameShape;

/// `radiohost gpu ...`
#[derive(Subcommand)]
pub enum GpuCmd {
    /// Is a CUDA driver present (devices, SMs, memory)? Is NVRTC found? Exits 0 either way.
    Info(JsonArg),
    /// Compile every kernel with NVRTC (no GPU needed) and print PTX/CUBIN sizes and
    /// each kernel's registers, shared memory and spills as ptxas reports them.
    Compile(CompileArgs),
    /// Executor descriptions: each opcode's launch (CTAs, threads, registers, shared
    /// memory) and the SMs it needs by the occupancy calculation, for a MIMO shape.
    Describe(DescribeArgs),
    /// Run the GPU kernels on a generated frame and compare them with the CPU phy
    /// kernels (FFT, CSI, ZF, LLR signs, decoded bits, downlink). Needs a GPU.
    Selftest(SelftestArgs),
    /// Time each opcode's kernels on the GPU (CUDA events, many runs) beside the CPU
    /// phy kernel for the same work measured in the same run. Needs a GPU.
    Bench(BenchArgs),
}

#[derive(Args)]
pub struct JsonArg {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CompileArgs {
    /// Target architecture (real, e.g. sm_80 for A100, sm_90 for H100).
    #[arg(long, default_value = "sm_90")]
    arch: String,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum GpuModel {
    H100,
    A100,
}

/// Which frame configuration to use.
#[derive(Args, Clone)]
pub struct ConfigArgs {
    /// The issue's shapes: `ANTENNASxUSERS` with a 2048-point FFT, 1200 data
    /// subcarriers, 64-QAM, LDPC BG1 rate 1/3, 14-symbol frame (1 pilot).
    #[arg(long, default_value = "64x32", conflicts_with = "config")]
    mimo: String,
    /// A phy configuration file instead (e.g. crates/phy/configs/64x16.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Subcarrier parts of ZF, EqDemod and Precode.
    #[arg(long, default_value_t = 8)]
    parts: usize,
    /// Downlink frame (1 pilot, 1 reference, 12 data symbols) instead of uplink.
    #[arg(long)]
    downlink: bool,
}

#[derive(Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    cfg: ConfigArgs,
    /// GPU model for the occupancy calculation (without a GPU).
    #[arg(long, value_enum, default_value = "h100")]
    gpu: GpuModel,
    /// Read kernel resources from GPU 0 instead of NVRTC's ptxas report.
    #[arg(long)]
    device: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SelftestArgs {
    #[command(flatten)]
    cfg: ConfigArgs,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    cfg: ConfigArgs,
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    /// Timed runs per opcode.
    #[arg(long, default_value_t = 200)]
    runs: usize,
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: GpuCmd) -> Result<()> {
    match cmd {
        GpuCmd::Info(a) => info(a.json),
        GpuCmd::Compile(a) => compile_all(&a),
        GpuCmd::Describe(a) => describe(&a),
        GpuCmd::Selftest(a) => selftest_cmd(&a),
        GpuCmd::Bench(a) => bench(&a),
    }
}

fn info(json: bool) -> Result<()> {
    let driver = probe_driver();
    let nvrtc = load_nvrtc();
    if json {
        let v = serde_json::json!({
            "driver": driver.as_ref().map_err(|e| e.to_string()),
            "nvrtc": nvrtc.as_ref().map_err(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    match &driver {
        Ok(d) => {
            println!(
                "CUDA driver {}.{} — {} device(s)",
                d.version / 1000,
                d.version % 1000 / 10,
                d.devices.len()
            );
            println!(
                "{:>3}  {:<28} {:>5} {:>5} {:>10}",
                "gpu", "name", "cc", "SMs", "memory"
            );
            for x in &d.devices {
                println!(
                    "{:>3}  {:<28} {:>5} {:>5} {:>7.1} GiB",
                    x.ordinal,
                    x.name,
                    format!("{}.{}", x.compute_capability.0, x.compute_capability.1),
                    x.sms,
                    x.memory_bytes as f64 / (1u64 << 30) as f64
                );
            }
        }
        Err(e) => println!(
            "{e}\n  (GPU executors unavailable; `radiohost gpu compile` and `describe` still work)"
        ),
    }
    match &nvrtc {
        Ok(n) => println!(
            "NVRTC {}.{} from {}",
            n.version.0,
            n.version.1,
            n.path
                .as_ref()
                .map_or("the system loader path".to_string(), |p| p
                    .display()
                    .to_string())
        ),
        Err(e) => println!("{e}"),
    }
    Ok(())
}

fn compile_modules(arch: &str) -> Result<Vec<CompiledModule>> {
    MODULES
        .iter()
        .map(|m| compile(m, arch).with_context(|| format!("compiling {} for {arch}", m.name)))
        .collect()
}

fn compile_all(a: &CompileArgs) -> Result<()> {
    let mods = compile_modules(&a.arch)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&mods)?);
        return Ok(());
    }
    println!(
        "{:<7} {:>9} {:>9} {:>8}  kernels (registers / static smem / spill st+ld bytes)",
        "module", "PTX B", "CUBIN B", "ms"
    );
    for m in &mods {
        let ks: Vec<String> = m
            .kernels
            .iter()
            .map(|k| {
                format!(
                    "{} {}r/{}B/{}",
                    k.kernel,
                    k.registers,
                    k.static_smem,
                    k.spill_stores + k.spill_loads
                )
            })
            .collect();
        println!(
            "{:<7} {:>9} {:>9} {:>8.0}  {}",
            m.module,
            m.ptx_bytes,
            m.cubin_bytes,
            m.compile_ms,
            ks.join(", ")
        );
    }
    Ok(())
}

/// The issue's frame for `ANTENNASxUSERS`.
fn issue_config(mimo: &str, downlink: bool) -> Result<FrameConfig> {
    let (m, k) = mimo
        .split_once('x')
        .and_then(|(m, k)| Some((m.parse::<usize>().ok()?, k.parse::<usize>().ok()?)))
        .with_context(|| format!("--mimo {mimo}: expected ANTENNASxUSERS, e.g. 64x32"))?;
    let schedule = if downlink {
        "PDDDDDDDDDDDDD"
    } else {
        "PUUUUUUUUUUUUU"
    };
    // 1200 subcarriers x 6 bits = 7200 bits per user and symbol: one BG1 block with
    // Zc = 104 at rate 1/3 (66 * 104 = 6864 bits).
    let json = serde_json::json!({
        "bs_ant_num": m, "ue_ant_num": k, "fft_size": 2048, "ofdm_data_num": 1200,
        "ofdm_data_start": 424, "cp_len": 144, "frame_schedule": schedule,
        "modulation": "64QAM", "base_graph": 1, "zc": 104, "code_rate": 1.0 / 3.0,
        "decoder_iter": 5, "pilot_layout": "frequency_orthogonal", "snr_db": 25.0,
        "channel": {"model": "flat"}, "seed": 8
    });
    FrameConfig::from_json(&json.to_string()).map_err(|e| anyhow::anyhow!("{mimo}: {e}"))
}

fn load_config(c: &ConfigArgs) -> Result<(FrameConfig, String)> {
    match &c.config {
        Some(p) => Ok((
            FrameConfig::load(p).with_context(|| format!("loading {}", p.display()))?,
            p.display().to_string(),
        )),
        None => Ok((issue_config(&c.mimo, c.downlink)?, c.mimo.clone())),
    }
}

fn describe(a: &DescribeArgs) -> Result<()> {
    let (cfg, name) = load_config(&a.cfg)?;
    let shape = FrameShape::new(&cfg, a.cfg.parts)?;
    let (gpu, resources, source) = if a.device {
        let dev = GpuDevice::open(0, None)?;
        (dev.spec().clone(), dev.resources(), "driver attributes")
    } else {
        let spec = match a.gpu {
            GpuModel::H100 => GpuSpec::h100(),
            GpuModel::A100 => GpuSpec::a100(),
        };
        let arch = format!("sm_{}{}", spec.cc.0, spec.cc.1);
        let mut res: HashMap<&'static str, KernelResources> = HashMap::new();
        for m in compile_modules(&arch)? {
            for k in &m.kernels {
                let name = radiohost_gpu::kernels::all_kernels()
                    .find(|n| *n == k.kernel)
                    .context("ptxas reported an unknown kernel")?;
                res.insert(
                    name,
                    KernelResources {
                        registers: k.registers,
                        static_smem: k.static_smem,
                        max_threads: 1024,
                    },
                );
            }
        }
        (spec, res, "NVRTC ptxas report")
    };
    let table = ExecutorTable::new(&gpu, &cfg, &shape, &resources)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&table)?);
        return Ok(());
    }
    println!(
        "{name} ({} antennas x {} users, FFT {}, {} parts) on {} — resources from {source}",
        cfg.antennas, cfg.users, cfg.fft_size, shape.parts, gpu.name
    );
    println!(
        "{:<9} {:<13} {:>6} {:>7} {:>5} {:>8} {:>8} {:>9} {:>9} {:>5}",
        "opcode",
        "kernel",
        "CTAs",
        "threads",
        "regs",
        "smem B",
        "CTAs/SM",
        "limiter",
        "occupancy",
        "SMs"
    );
    for r in &table.rows {
        println!(
            "{:<9} {:<13} {:>6} {:>7} {:>5} {:>8} {:>8} {:>9} {:>8.0}% {:>5}",
            r.opcode.name(),
            r.kernel,
            r.shape.ctas,
            r.shape.threads_per_cta,
            r.shape.regs_per_thread,
            r.shape.smem_per_cta,
            r.occupancy.ctas_per_sm,
            format!("{:?}", r.occupancy.limiter),
            r.occupancy.warp_occupancy * 100.0,
            r.occupancy.sms_needed
        );
    }
    let needs: Vec<String> = Opcode::ALL
        .iter()
        .map(|&o| format!("{o}={}", table.sm_need(o)))
        .collect();
    println!("sm_need per instruction: {}", needs.join(" "));
    Ok(())
}

fn open_device(ordinal: usize) -> Result<Arc<GpuDevice>> {
    GpuDevice::open(ordinal, None)
        .map(Arc::new)
        .map_err(|e| anyhow::anyhow!("{e}\nthis command runs the kernels on a GPU; without one use `radiohost gpu compile` or `radiohost gpu describe`"))
}

fn selftest_cmd(a: &SelftestArgs) -> Result<()> {
    let (cfg, name) = load_config(&a.cfg)?;
    let dev = open_device(a.ordinal)?;
    let report = selftest::run(dev, &cfg, &name, a.cfg.parts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("GPU self-test of {} on {}", report.config, report.device);
        for c in &report.checks {
            println!(
                "{:>5}  {:<62} {:>11.3e}  (bound {:e})",
                if c.passed { "ok" } else { "FAIL" },
                c.name,
                c.value,
                c.bound
            );
        }
    }
    if !report.passed() {
        bail!("the GPU kernels disagree with the CPU kernels (see the FAIL lines)");
    }
    Ok(())
}

/// Instructions that must run before `op` can be timed on the frame (its inputs).
fn prerequisites(shape: &FrameShape, op: Opcode) -> Vec<Instr> {
    let mut v = Vec::new();
    for &s in &shape.received_symbols() {
        v.push(Instr::new(0, s, Opcode::Load, 0));
    }
    for &s in &shape.pilot_symbols {
        v.push(Instr::new(0, s, Opcode::PilotFft, 0));
    }
    for &s in &shape.uplink_symbols {
        v.push(Instr::new(0, s, Opcode::UpFft, 0));
    }
    for p in 0..shape.parts {
        v.push(Instr::new(0, 0, Opcode::Zf, p));
    }
    if let Some(&s) = shape.uplink_symbols.first() {
        for p in 0..shape.parts {
            v.push(Instr::new(0, s, Opcode::EqDemod, p));
        }
    }
    if let Some(&s) = shape.downlink_symbols.first() {
        for u in 0..shape.users {
            v.push(Instr::new(0, s, Opcode::Encode, u));
            v.push(Instr::new(0, s, Opcode::Modul, u));
        }
        for p in 0..shape.parts {
            v.push(Instr::new(0, s, Opcode::Precode, p));
        }
    }
    let _ = op;
    v
}

/// The instruction timed for `op` (first symbol, part and user of its kind).
fn sample_instr(shape: &FrameShape, op: Opcode) -> Option<Instr> {
    let up = shape.uplink_symbols.first().copied();
    let dl = shape.downlink_symbols.first().copied();
    let s = match op {
        Opcode::Load | Opcode::Store => return None,
        Opcode::PilotFft => shape.pilot_symbols.first().copied(),
        Opcode::UpFft | Opcode::EqDemod | Opcode::Decode => up,
        Opcode::Zf => Some(0),
        Opcode::Encode | Opcode::Modul | Opcode::Precode | Opcode::Ifft => dl,
    }?;
    Some(Instr::new(0, s, op, 0))
}

fn bench(a: &BenchArgs) -> Result<()> {
    let (cfg, name) = load_config(&a.cfg)?;
    let shape = FrameShape::new(&cfg, a.cfg.parts)?;
    let dev = open_device(a.ordinal)?;
    let table = ExecutorTable::new(dev.spec(), &cfg, &shape, &dev.resources())?;
    let mut ex = GpuExecutor::new(dev.clone(), &cfg, &shape, 1)?;
    let frame = radiohost_phy::generator::Generator::new(&cfg).frame(0)?;
    ex.set_input(0, &frame.samples)?;
    let pb = cfg.block_payload_bits() * cfg.blocks_per_symbol;
    for j in 0..shape.downlink_symbols.len() {
        for u in 0..cfg.users {
            ex.set_downlink_payload(0, j, u, &frame.downlink_payload[u][j * pb..(j + 1) * pb])?;
        }
    }
    for i in prerequisites(&shape, Opcode::Zf) {
        ex.launch(0, &i, false, &[])?;
    }
    dev.synchronize()?;
    let mut rows = Vec::new();
    for op in Opcode::ALL {
        let Some(instr) = sample_instr(&shape, op) else {
            continue;
        };
        let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 3)?;
        for _ in 0..a.runs.max(1) {
            let start = dev.timing_event(false)?;
            ex.launch(0, &instr, false, &[])?;
            let end = dev.timing_event(false)?;
            let ms = dev.elapsed_ms(&start, &end)?;
            hist.record(((ms as f64) * 1e6).max(1.0) as u64)?;
        }
        let cpu_ns = cpu_baseline_ns(&cfg, &shape, op)?;
        rows.push(serde_json::json!({
            "opcode": op.name(), "sms": table.sm_need(op),
            "gpu_mean_us": hist.mean() / 1e3, "gpu_p99_us": hist.value_at_quantile(0.99) as f64 / 1e3,
            "cpu_us": cpu_ns / 1e3, "cpu_over_gpu": cpu_ns / hist.mean(),
        }));
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"config": name, "gpu": dev.spec().name, "rows": rows})
            )?
        );
        return Ok(());
    }
    println!(
        "{name} on {} ({} runs per opcode; CPU = one thread of this host, same run)",
        dev.spec().name,
        a.runs
    );
    println!(
        "{:<9} {:>5} {:>12} {:>12} {:>12} {:>9}",
        "opcode", "SMs", "GPU mean us", "GPU P99 us", "CPU us", "CPU/GPU"
    );
    for r in &rows {
        println!(
            "{:<9} {:>5} {:>12.1} {:>12.1} {:>12.1} {:>9.1}",
            r["opcode"].as_str().unwrap_or_default(),
            r["sms"],
            r["gpu_mean_us"].as_f64().unwrap_or(0.0),
            r["gpu_p99_us"].as_f64().unwrap_or(0.0),
            r["cpu_us"].as_f64().unwrap_or(0.0),
            r["cpu_over_gpu"].as_f64().unwrap_or(0.0)
        );
    }
    Ok(())
}

/// Nanoseconds of the CPU phy kernels doing the work of one instruction of `op` on
/// one thread of this host, measured now (the baseline printed beside the GPU).
fn cpu_baseline_ns(cfg: &FrameConfig, shape: &FrameShape, op: Opcode) -> Result<f64> {
    use radiohost_iq::Cf32;
    use radiohost_phy::zf::{equalize, precode, zf_detector, ZfScratch};
    let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let part = shape.part_range(0).len();
    let h: Vec<Cf32> = (0..m * k)
        .map(|i| Cf32::new(((i * 7) % 13) as f32 - 6.0, ((i * 5) % 11) as f32 - 5.0))
        .collect();
    let mut w = vec![Cf32::default(); m * k];
    let mut ng = vec![0f32; k];
    let mut scratch = ZfScratch::with_antennas(m, k);
    let mut fft = radiohost_phy::ofdm::OfdmFft::new(cfg.fft_size);
    let mut buf = vec![Cf32::new(0.1, -0.2); m * cfg.fft_size];
    let mut tx = radiohost_phy::coding::TxChain::new(cfg);
    let mut rx = radiohost_phy::coding::RxChain::new(cfg)?;
    let payload = vec![0u8; cfg.block_payload_bits() * cfg.blocks_per_symbol];
    let mut syms = vec![Cf32::new(0.7, -0.7); d];
    let t0 = Instant::now();
    match op {
        // One antenna-batch of transforms (what one FFT instruction does).
        Opcode::PilotFft | Opcode::UpFft => fft.forward_batch(&mut buf),
        Opcode::Ifft => fft.inverse_batch(&mut buf),
        Opcode::Zf => {
            for _ in 0..part {
                zf_detector(&h, m, k, &mut scratch, &mut w, &mut ng)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        Opcode::EqDemod => {
            let y = vec![Cf32::new(0.3, 0.1); m];
            let mut x = vec![Cf32::default(); k];
            let nv = vec![0.1f32; k];
            let demod = radiohost_phy::qam::Demodulator::new(cfg.modulation);
            let mut llr = vec![0f32; k * cfg.modulation.bits_per_symbol()];
            for _ in 0..part {
                equalize(&w, &y, &mut x);
                demod.demodulate(&x, &nv, &mut llr);
            }
        }
        Opcode::Precode => {
            let s = vec![Cf32::new(0.3, 0.1); k];
            let mut out = vec![Cf32::default(); m];
            for _ in 0..part {
                precode(&w, &s, 1.0, &mut out);
            }
        }
        // CRC + LDPC encode + scrambling + modulation of one user's symbol (the CPU
        // chain does Encode and Modul together).
        Opcode::Encode | Opcode::Modul => tx.symbol(&payload, 1, 0, &mut syms)?,
        // Demodulation + descrambling + LDPC decode + CRC of one user's symbol.
        Opcode::Decode => {
            let nv = vec![0.1f32; d];
            let mut out = payload.clone();
            let mut results =
                vec![radiohost_phy::coding::BlockResult::default(); cfg.blocks_per_symbol];
            rx.symbol(&syms, &nv, 1, 0, &mut out, &mut results)?;
        }
        Opcode::Load | Opcode::Store => {}
    }
    Ok(t0.elapsed().as_nanos() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_shapes_are_valid_frames() {
        for mimo in ["64x32", "128x32", "128x64"] {
            for downlink in [false, true] {
                let cfg = issue_config(mimo, downlink).unwrap();
                assert_eq!(
                    (cfg.fft_size, cfg.data_num, cfg.schedule.len()),
                    (2048, 1200, 14)
                );
                assert_eq!(cfg.blocks_per_symbol, 1);
                let shape = FrameShape::new(&cfg, 8).unwrap();
                assert_eq!(shape.has_downlink(), downlink);
            }
        }
        assert!(issue_config("64", false).is_err());
        assert!(issue_config("8x16", false).is_err());
    }
}
