//! What `radiohost gpu describe|bench` compute: the issue's frame shapes, executor
//! descriptions from NVRTC's ptxas report (no GPU needed), and per-opcode kernel
//! timings on a GPU beside the CPU phy kernels doing the same work in the same run.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use radiohost_iq::Cf32;
use radiohost_phy::coding::{BlockResult, RxChain, TxChain};
use radiohost_phy::zf::{equalize, precode, zf_detector, ZfScratch};
use radiohost_phy::{ConfigError, FrameConfig, PhyError};
use radiohost_station::isa::{Instr, Opcode};
use radiohost_station::shape::{FrameShape, ShapeError};
use serde::Serialize;
use thiserror::Error;

use crate::describe::{ExecutorTable, KernelResources};
use crate::kernels::MODULES;
use crate::nvrtc::{compile, CompiledModule};
use crate::occupancy::GpuSpec;
use crate::{GpuDevice, GpuError, GpuExecutor};

/// Why a description or benchmark could not be made.
#[derive(Debug, Error)]
pub enum BenchError {
    #[error("--mimo {0}: expected ANTENNASxUSERS, e.g. 64x32")]
    Mimo(String),
    #[error("frame configuration {name}: {source}")]
    Config { name: String, source: ConfigError },
    #[error("ptxas reported kernel {0}, which this crate does not know; rebuild radiohost")]
    UnknownKernel(String),
    #[error(transparent)]
    Shape(#[from] ShapeError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error("CPU baseline: {0}")]
    Phy(#[from] PhyError),
    #[error("CPU baseline: {0}")]
    Ldpc(#[from] radiohost_ldpc::LdpcError),
    #[error("CPU baseline: {0}")]
    Zf(#[from] radiohost_phy::zf::ZfError),
}

/// The issue's frame for `ANTENNASxUSERS`: 2048-point FFT, 1200 data subcarriers,
/// 64-QAM, LDPC BG1 rate 1/3, 14-symbol frame with one pilot.
pub fn issue_config(mimo: &str, downlink: bool) -> Result<FrameConfig, BenchError> {
    let (m, k) = mimo
        .split_once('x')
        .and_then(|(m, k)| Some((m.parse::<usize>().ok()?, k.parse::<usize>().ok()?)))
        .ok_or_else(|| BenchError::Mimo(mimo.to_string()))?;
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
    FrameConfig::from_json(&json.to_string()).map_err(|source| BenchError::Config {
        name: mimo.to_string(),
        source,
    })
}

/// A configuration file, or else the issue's frame for `mimo`; with its name.
pub fn load_config(
    file: Option<&Path>,
    mimo: &str,
    downlink: bool,
) -> Result<(FrameConfig, String), BenchError> {
    match file {
        Some(p) => FrameConfig::load(p)
            .map(|c| (c, p.display().to_string()))
            .map_err(|source| BenchError::Config {
                name: p.display().to_string(),
                source,
            }),
        None => Ok((issue_config(mimo, downlink)?, mimo.to_string())),
    }
}

/// Compile every kernel module for `arch` (NVRTC, no GPU needed).
pub fn compile_modules(arch: &str) -> Result<Vec<CompiledModule>, GpuError> {
    MODULES.iter().map(|m| compile(m, arch)).collect()
}

/// Kernel resources of `spec`'s architecture as NVRTC's ptxas reports them.
pub fn compiled_resources(
    spec: &GpuSpec,
) -> Result<HashMap<&'static str, KernelResources>, BenchError> {
    let arch = format!("sm_{}{}", spec.cc.0, spec.cc.1);
    let mut res = HashMap::new();
    for m in compile_modules(&arch)? {
        for k in &m.kernels {
            let name = crate::kernels::all_kernels()
                .find(|n| *n == k.kernel)
                .ok_or_else(|| BenchError::UnknownKernel(k.kernel.to_string()))?;
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
    Ok(res)
}

/// One opcode's timing: GPU kernels (CUDA events) against one CPU thread.
#[derive(Clone, Debug, Serialize)]
pub struct OpcodeTiming {
    pub opcode: &'static str,
    /// SMs the executor description gives this opcode.
    pub sms: u32,
    pub gpu_mean_us: f64,
    /// P99 with rt::stats' definition: the smallest time that at least ceil(0.99 n)
    /// runs did not exceed.
    pub gpu_p99_us: f64,
    pub cpu_us: f64,
    pub cpu_over_gpu: f64,
}

/// The per-opcode benchmark of one configuration on one GPU.
#[derive(Clone, Debug, Serialize)]
pub struct GpuBenchReport {
    pub config: String,
    pub gpu: String,
    pub runs: usize,
    pub rows: Vec<OpcodeTiming>,
}

/// Instructions that must run before an opcode can be timed on the frame (its inputs).
fn prerequisites(shape: &FrameShape) -> Vec<Instr> {
    let mut v = crate::selftest::front_program(shape);
    if let Some(&s) = shape.uplink_symbols.first() {
        for p in 0..shape.parts {
            v.push(Instr::new(0, s, Opcode::EqDemod, p));
        }
    }
    if let Some(&s) = shape.downlink_symbols.first() {
        for g in 0..shape.user_groups {
            v.push(Instr::new(0, s, Opcode::Encode, g));
        }
        for p in 0..shape.parts {
            v.push(Instr::new(0, s, Opcode::Precode, p));
        }
    }
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
        Opcode::Encode | Opcode::Precode | Opcode::Ifft => dl,
    }?;
    Some(Instr::new(0, s, op, 0))
}

/// Time each opcode's kernels `runs` times on `dev` for `cfg` split into `parts`,
/// beside the CPU phy kernels doing one instruction's work.
pub fn bench(
    dev: Arc<GpuDevice>,
    cfg: &FrameConfig,
    name: &str,
    parts: usize,
    runs: usize,
) -> Result<GpuBenchReport, BenchError> {
    let shape = FrameShape::new(cfg, parts)?;
    let table = ExecutorTable::new(dev.spec(), cfg, &shape, &dev.resources())?;
    let mut ex = GpuExecutor::new(dev.clone(), cfg, &shape, 1)?;
    let frame = radiohost_phy::generator::Generator::new(cfg).frame(0)?;
    ex.set_input(0, &frame.samples)?;
    let pb = cfg.block_payload_bits() * cfg.blocks_per_symbol;
    for j in 0..shape.downlink_symbols.len() {
        for u in 0..cfg.users {
            ex.set_downlink_payload(0, j, u, &frame.downlink_payload[u][j * pb..(j + 1) * pb])?;
        }
    }
    for i in prerequisites(&shape) {
        ex.launch(0, &i, false, &[])?;
    }
    dev.synchronize()?;
    let runs = runs.max(1);
    let mut rows = Vec::new();
    for op in Opcode::ALL {
        let Some(instr) = sample_instr(&shape, op) else {
            continue;
        };
        let mut ns = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = dev.timing_event(false)?;
            ex.launch(0, &instr, false, &[])?;
            let end = dev.timing_event(false)?;
            ns.push(f64::from(dev.elapsed_ms(&start, &end)?) * 1e6);
        }
        ns.sort_by(f64::total_cmp);
        let mean = ns.iter().sum::<f64>() / runs as f64;
        let p99 = ns[(runs * 99).div_ceil(100).max(1) - 1];
        let cpu_ns = cpu_baseline_ns(cfg, &shape, op)?;
        rows.push(OpcodeTiming {
            opcode: op.name(),
            sms: table.sm_need(op),
            gpu_mean_us: mean / 1e3,
            gpu_p99_us: p99 / 1e3,
            cpu_us: cpu_ns / 1e3,
            cpu_over_gpu: cpu_ns / mean,
        });
    }
    Ok(GpuBenchReport {
        config: name.to_string(),
        gpu: dev.spec().name.clone(),
        runs,
        rows,
    })
}

/// Nanoseconds of the CPU phy kernels doing the work of one instruction of `op` on
/// one thread of this host, measured now (the baseline printed beside the GPU).
fn cpu_baseline_ns(cfg: &FrameConfig, shape: &FrameShape, op: Opcode) -> Result<f64, BenchError> {
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
    let mut tx = TxChain::new(cfg);
    let mut rx = RxChain::new(cfg)?;
    let payload = vec![0u8; cfg.block_payload_bits() * cfg.blocks_per_symbol];
    let mut syms = vec![Cf32::new(0.7, -0.7); d];
    let t0 = Instant::now();
    match op {
        // One antenna-batch of transforms (what one FFT instruction does).
        Opcode::PilotFft | Opcode::UpFft => fft.forward_batch(&mut buf),
        Opcode::Ifft => fft.inverse_batch(&mut buf),
        Opcode::Zf => {
            for _ in 0..part {
                zf_detector(&h, m, k, &mut scratch, &mut w, &mut ng)?;
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
        // CRC + LDPC encode + scrambling + modulation of the first group's users'
        // symbols.
        Opcode::Encode => {
            for _ in shape.user_range(0) {
                tx.symbol(&payload, 1, 0, &mut syms)?;
            }
        }
        // Demodulation + descrambling + LDPC decode + CRC of the first group's users'
        // symbols.
        Opcode::Decode => {
            let nv = vec![0.1f32; d];
            let mut out = payload.clone();
            let mut results = vec![BlockResult::default(); cfg.blocks_per_symbol];
            for _ in shape.user_range(0) {
                rx.symbol(&syms, &nv, 1, 0, &mut out, &mut results)?;
            }
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
                assert!(!prerequisites(&shape).is_empty());
                assert!(sample_instr(&shape, Opcode::Zf).is_some());
                assert!(sample_instr(&shape, Opcode::Load).is_none());
            }
        }
        assert!(issue_config("64", false).is_err());
        assert!(issue_config("8x16", false).is_err());
    }

    #[test]
    fn cpu_baseline_runs_every_opcode() {
        let cfg = issue_config("8x4", true).unwrap();
        let shape = FrameShape::new(&cfg, 2).unwrap();
        for op in Opcode::ALL {
            assert!(cpu_baseline_ns(&cfg, &shape, op).unwrap() >= 0.0);
        }
    }
}
