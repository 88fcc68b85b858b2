//! `radiohost gpu`: CUDA driver and NVRTC status, kernel compilation (no GPU needed),
//! executor descriptions (SMs per opcode by occupancy), the GPU-vs-CPU self-test and
//! the per-opcode kernel benchmark (these two need a GPU).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_gpu::bench::{compile_modules, compiled_resources, load_config};
use radiohost_gpu::describe::ExecutorTable;
use radiohost_gpu::nvrtc::report_every_kernel;
use radiohost_gpu::occupancy::GpuSpec;
use radiohost_gpu::status::GpuStatus;
use radiohost_gpu::{selftest, GpuDevice};
use radiohost_phy::FrameConfig;
use radiohost_station::isa::Opcode;
use radiohost_station::shape::FrameShape;

use crate::table::Table;

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
    /// Print the result as JSON.
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
    /// The shapes: `ANTENNASxUSERS` with a 2048-point FFT, 1200 data
    /// subcarriers, 64-QAM, LDPC BG1 rate 1/3, 14-symbol frame (1 pilot).
    #[arg(long, default_value = "64x32", conflicts_with = "config")]
    mimo: String,
    /// A phy configuration file instead (e.g. crates/phy/configs/64x16.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Subcarrier parts of ZF, EqDemod and Precode.
    #[arg(long, default_value_t = 8)]
    parts: usize,
    /// The downlink frame (1 pilot, 1 reference, 12 data symbols); not with --config.
    #[arg(long, conflicts_with = "config")]
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
    /// Print the result as JSON.
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
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    cfg: ConfigArgs,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    ordinal: usize,
    /// Timed runs per opcode (1..=1000000).
    #[arg(long, default_value_t = 200, value_parser = crate::ui::count_in::<usize>(1, 1_000_000))]
    runs: usize,
    /// Print the result as JSON.
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
    let status = GpuStatus::probe();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&status)?)?
        );
        return Ok(());
    }
    match &status.driver {
        Ok(d) => {
            let n = d.devices.len();
            println!("CUDA driver {} — {n} device(s)", d.version_text());
            println!(
                "{:>3}  {:<28} {:>5} {:>5} {:>10}",
                "gpu", "name", "cc", "SMs", "memory"
            );
            for x in &d.devices {
                println!(
                    "{:>3}  {:<28} {:>5} {:>5} {:>7.1} GiB",
                    x.ordinal,
                    x.name,
                    x.compute_capability_text(),
                    x.sms,
                    x.memory_gib()
                );
            }
        }
        Err(e) => println!(
            "{e}\n  (GPU executors unavailable; `radiohost gpu compile` and `describe` still work)"
        ),
    }
    match &status.nvrtc {
        Ok(n) => println!("NVRTC {}.{} from {}", n.version.0, n.version.1, n.source()),
        Err(e) => println!("{e}"),
    }
    Ok(())
}

fn compile_all(a: &CompileArgs) -> Result<()> {
    report_every_kernel(); // no other thread runs yet
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

impl ConfigArgs {
    fn load(&self) -> Result<(FrameConfig, String)> {
        Ok(load_config(
            self.config.as_deref(),
            &self.mimo,
            self.downlink,
        )?)
    }
}

fn describe(a: &DescribeArgs) -> Result<()> {
    let (cfg, name) = a.cfg.load()?;
    let shape = FrameShape::new(&cfg, a.cfg.parts)?;
    let (gpu, resources, source) = if a.device {
        let dev = GpuDevice::open(0, None)?;
        (dev.spec().clone(), dev.resources(), "driver attributes")
    } else {
        let spec = match a.gpu {
            GpuModel::H100 => GpuSpec::h100(),
            GpuModel::A100 => GpuSpec::a100(),
        };
        let res = compiled_resources(&spec)?;
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
    let t = Table::new("<9 <13 >6 >7 >5 >8 >8 >9 >9 >5");
    t.header("opcode|kernel|CTAs|threads|regs|smem B|CTAs/SM|limiter|occupancy|SMs");
    for r in &table.rows {
        let (s, o) = (&r.shape, &r.occupancy);
        let (limiter, occupancy) = (format!("{:?}", o.limiter), o.warp_occupancy * 100.0);
        t.row(&[
            &r.opcode.name(),
            &r.kernel,
            &s.ctas,
            &s.threads_per_cta,
            &s.regs_per_thread,
            &s.smem_per_cta,
            &o.ctas_per_sm,
            &limiter,
            &format!("{occupancy:.0}%"),
            &o.sms_needed,
        ]);
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
    let (cfg, name) = a.cfg.load()?;
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

fn bench(a: &BenchArgs) -> Result<()> {
    let (cfg, name) = a.cfg.load()?;
    let dev = open_device(a.ordinal)?;
    let rep = radiohost_gpu::bench::bench(dev, &cfg, &name, a.cfg.parts, a.runs)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    println!(
        "{} on {} ({} runs per opcode; CPU = one thread of this host, same run)",
        rep.config, rep.gpu, rep.runs
    );
    let t = Table::new("<9 >5 >12.1 >12.1 >12.1 >9.1");
    t.header("opcode|SMs|GPU mean us|GPU P99 us|CPU us|CPU/GPU");
    for r in &rep.rows {
        t.row(&[
            &r.opcode,
            &r.sms,
            &r.gpu_mean_us,
            &r.gpu_p99_us,
            &r.cpu_us,
            &r.cpu_over_gpu,
        ]);
    }
    Ok(())
}
