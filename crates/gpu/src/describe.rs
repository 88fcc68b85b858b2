//! Executor descriptions: for every station opcode, the kernel launches it makes for a
//! frame shape (CTAs, threads, dynamic shared memory) combined with each kernel's
//! compiled resources (registers, static shared memory), turned into SMs by the
//! occupancy calculation. This is what the scoreboard's GPU device table charges.

use std::collections::HashMap;

use radiohost_phy::FrameConfig;
use radiohost_station::isa::Opcode;
use radiohost_station::shape::FrameShape;
use serde::Serialize;

use crate::occupancy::{occupancy, GpuSpec, LaunchShape, Occupancy};
use crate::GpuError;

/// Threads per CTA of the element-wise kernels.
pub const ELEMENTWISE_THREADS: u32 = 128;
/// Threads per CTA of the channel estimation kernel.
pub const CSI_THREADS: u32 = 256;

/// What a compiled kernel uses, from the driver (`cuFuncGetAttribute`) on a GPU or
/// from `ptxas -v` through NVRTC without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KernelResources {
    pub registers: u32,
    pub static_smem: u32,
    /// Largest CTA the compiled kernel allows (1024 when not known).
    pub max_threads: u32,
}

/// One kernel launch of an opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KernelLaunch {
    pub kernel: &'static str,
    pub ctas: u32,
    pub threads: u32,
    pub dynamic_smem: u32,
}

/// Threads of a one-CTA-per-code-block LDPC kernel: one per lifting lane, whole warps.
pub fn ldpc_threads(zc: usize) -> u32 {
    (zc as u32).div_ceil(32) * 32
}

/// Threads of the FFT kernels (butterflies per stage are n/2; 256 keeps smem traffic
/// and occupancy balanced for 512..4096 points).
pub fn fft_threads(n: usize) -> u32 {
    ((n / 2) as u32).clamp(32, 256)
}

/// CTAs of `csi_estimate` for a part of `len` subcarriers: one thread per (subcarrier,
/// user, antenna), capped at one CTA per subcarrier (the kernel strides over the rest).
pub fn csi_ctas(len: usize, k: usize, m: usize) -> u32 {
    (len * k * m).div_ceil(CSI_THREADS as usize).min(len) as u32
}

/// Dynamic shared memory of `zf_detect` for `k` users.
pub fn zf_smem(k: usize) -> u32 {
    (16 * k * k + 4 * k + 16) as u32
}

/// The kernel launches of `opcode` on `cfg` cut as `shape` (for the largest part of
/// part-wise opcodes). Load and Store are copies (copy engines, no kernel).
pub fn launches(cfg: &FrameConfig, shape: &FrameShape, opcode: Opcode) -> Vec<KernelLaunch> {
    let (m, k) = (cfg.antennas as u32, cfg.users as u32);
    let part = shape.part_range(0).len() as u32;
    let group = shape.user_range(0).len();
    let n = cfg.fft_size;
    let fft_smem = (n * 8) as u32;
    let ew = |items: u32| items.div_ceil(ELEMENTWISE_THREADS);
    let zc = cfg.code.zc;
    let ldpc_smem = (cfg.code.bg.cols() * zc) as u32;
    let blocks = cfg.blocks_per_symbol as u32;
    let one = |kernel, ctas, threads, dynamic_smem| KernelLaunch {
        kernel,
        ctas,
        threads,
        dynamic_smem,
    };
    match opcode {
        Opcode::Load | Opcode::Store => vec![],
        Opcode::PilotFft | Opcode::UpFft => vec![one("ofdm_rx", m, fft_threads(n), fft_smem)],
        Opcode::Ifft => vec![one("ofdm_tx", m, fft_threads(n), fft_smem)],
        Opcode::Zf => vec![
            one(
                "csi_estimate",
                csi_ctas(part as usize, k as usize, m as usize),
                CSI_THREADS,
                0,
            ),
            one("zf_detect", part, 256, zf_smem(cfg.users)),
        ],
        Opcode::EqDemod => vec![one("eq_demod", ew(part * k), ELEMENTWISE_THREADS, 0)],
        Opcode::Precode => vec![one("precode", ew(part * m), ELEMENTWISE_THREADS, 0)],
        // One launch (two to encode) per user of the first user group.
        Opcode::Decode => vec![one("ldpc_decode", blocks, ldpc_threads(zc), ldpc_smem); group],
        Opcode::Encode => [
            one("ldpc_encode", blocks, ldpc_threads(zc), ldpc_smem),
            one("modulate", ew(cfg.data_num as u32), ELEMENTWISE_THREADS, 0),
        ]
        .repeat(group),
    }
}

/// One row of the executor table.
#[derive(Clone, Debug, Serialize)]
pub struct ExecutorRow {
    pub opcode: Opcode,
    pub kernel: &'static str,
    pub shape: LaunchShape,
    pub occupancy: Occupancy,
}

/// SMs each opcode needs on one GPU model for one frame configuration.
#[derive(Clone, Debug, Serialize)]
pub struct ExecutorTable {
    pub gpu: GpuSpec,
    pub rows: Vec<ExecutorRow>,
}

impl ExecutorTable {
    /// Build the table from kernel resources (by kernel name).
    ///
    /// # Errors
    /// A kernel without resources, or a launch the GPU cannot run.
    pub fn new(
        gpu: &GpuSpec,
        cfg: &FrameConfig,
        shape: &FrameShape,
        resources: &HashMap<&'static str, KernelResources>,
    ) -> Result<Self, GpuError> {
        let mut rows = Vec::new();
        for op in Opcode::ALL {
            for l in launches(cfg, shape, op) {
                let r = resources.get(l.kernel).ok_or_else(|| {
                    GpuError::Config(format!("no resources for kernel {}", l.kernel))
                })?;
                if l.threads > r.max_threads {
                    return Err(GpuError::Config(format!(
                        "{} needs {} threads per CTA but the compiled kernel allows {}",
                        l.kernel, l.threads, r.max_threads
                    )));
                }
                let shape = LaunchShape {
                    ctas: l.ctas,
                    threads_per_cta: l.threads,
                    regs_per_thread: r.registers,
                    smem_per_cta: r.static_smem + l.dynamic_smem,
                };
                rows.push(ExecutorRow {
                    opcode: op,
                    kernel: l.kernel,
                    shape,
                    occupancy: occupancy(gpu, &shape)?,
                });
            }
        }
        Ok(Self {
            gpu: gpu.clone(),
            rows,
        })
    }

    /// SMs an instruction of `opcode` reserves: the most any of its kernels needs
    /// (they run one after the other on the instruction's stream). 0 for copies.
    pub fn sm_need(&self, opcode: Opcode) -> u32 {
        self.rows
            .iter()
            .filter(|r| r.opcode == opcode)
            .map(|r| r.occupancy.sms_needed)
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> FrameConfig {
        FrameConfig::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../phy/configs/64x16.json"
        )))
        .unwrap()
    }

    fn uniform(regs: u32) -> HashMap<&'static str, KernelResources> {
        crate::kernels::all_kernels()
            .map(|k| {
                (
                    k,
                    KernelResources {
                        registers: regs,
                        static_smem: 128,
                        max_threads: 1024,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_compute_opcode_has_a_kernel_and_copies_need_no_sm() {
        let cfg = cfg();
        let shape = FrameShape::new(&cfg, 4).unwrap();
        let t = ExecutorTable::new(&GpuSpec::h100(), &cfg, &shape, &uniform(32)).unwrap();
        for op in Opcode::ALL {
            let n = t.sm_need(op);
            match op {
                Opcode::Load | Opcode::Store => assert_eq!(n, 0),
                _ => assert!((1..=132).contains(&n), "{op}: {n}"),
            }
        }
        // FFT: one CTA per antenna; 256 threads x 32 regs and 8*fft_size + 128 bytes.
        let fft = t.rows.iter().find(|r| r.opcode == Opcode::UpFft).unwrap();
        assert_eq!(fft.shape.ctas, cfg.antennas as u32);
        assert_eq!(fft.shape.smem_per_cta, 8 * cfg.fft_size as u32 + 128);
    }

    #[test]
    fn more_registers_never_need_fewer_sms() {
        let cfg = cfg();
        let shape = FrameShape::new(&cfg, 2).unwrap();
        let lo = ExecutorTable::new(&GpuSpec::a100(), &cfg, &shape, &uniform(32)).unwrap();
        let hi = ExecutorTable::new(&GpuSpec::a100(), &cfg, &shape, &uniform(128)).unwrap();
        for op in Opcode::ALL {
            assert!(hi.sm_need(op) >= lo.sm_need(op), "{op}");
        }
        assert!(hi.sm_need(Opcode::EqDemod) > lo.sm_need(Opcode::EqDemod));
        let mut missing = uniform(32);
        missing.remove("eq_demod");
        assert!(ExecutorTable::new(&GpuSpec::a100(), &cfg, &shape, &missing).is_err());
    }
}
