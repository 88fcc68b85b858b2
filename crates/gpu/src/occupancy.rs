//! Occupancy: how many CTAs of a kernel fit on one SM, and so how many SMs an
//! instruction needs to run all its CTAs in one wave.
//!
//! The model is the one of CUDA's occupancy calculator (`cuda_occupancy.h`) for
//! compute capability 8.x/9.x: per-SM limits on CTAs, warps, registers (allocated per
//! warp in units of 256, split over 4 sub-partitions) and shared memory (allocated in
//! 128-byte units plus 1 KiB reserved per CTA). Pure Rust, so the scoreboard and the
//! simulator can size GPU work on machines without a GPU.

use serde::Serialize;

/// Per-SM resources of one GPU model (what the occupancy limits depend on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GpuSpec {
    pub name: String,
    /// Compute capability, e.g. (9, 0).
    pub cc: (u32, u32),
    pub sms: u32,
    pub max_threads_per_sm: u32,
    pub max_ctas_per_sm: u32,
    pub regs_per_sm: u32,
    /// Registers are allocated per warp in units of this many.
    pub reg_alloc_unit: u32,
    pub max_regs_per_thread: u32,
    /// Register file sub-partitions per SM (a warp's registers live in one).
    pub sub_partitions: u32,
    /// Shared memory per SM usable by CTAs (the largest carve-out).
    pub smem_per_sm: u32,
    /// Largest shared memory one CTA may opt in to.
    pub max_smem_per_cta: u32,
    pub smem_alloc_unit: u32,
    /// Shared memory the system reserves per resident CTA.
    pub reserved_smem_per_cta: u32,
    pub max_threads_per_cta: u32,
}

impl GpuSpec {
    /// NVIDIA H100 SXM (sm_90): 132 SMs, 228 KiB shared memory per SM.
    pub fn h100() -> Self {
        Self {
            name: "H100 SXM (sm_90)".into(),
            cc: (9, 0),
            sms: 132,
            max_threads_per_sm: 2048,
            max_ctas_per_sm: 32,
            regs_per_sm: 65536,
            reg_alloc_unit: 256,
            max_regs_per_thread: 255,
            sub_partitions: 4,
            smem_per_sm: 228 * 1024,
            max_smem_per_cta: 227 * 1024,
            smem_alloc_unit: 128,
            reserved_smem_per_cta: 1024,
            max_threads_per_cta: 1024,
        }
    }

    /// NVIDIA A100 (sm_80): 108 SMs, 164 KiB shared memory per SM.
    pub fn a100() -> Self {
        Self {
            name: "A100 (sm_80)".into(),
            cc: (8, 0),
            sms: 108,
            smem_per_sm: 164 * 1024,
            max_smem_per_cta: 163 * 1024,
            ..Self::h100()
        }
    }

    pub fn max_warps_per_sm(&self) -> u32 {
        self.max_threads_per_sm / 32
    }
}

/// What one kernel launch asks of the GPU: the executor's resource tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LaunchShape {
    pub ctas: u32,
    pub threads_per_cta: u32,
    pub regs_per_thread: u32,
    /// Static plus dynamic shared memory per CTA, bytes.
    pub smem_per_cta: u32,
}

impl LaunchShape {
    pub fn warps_per_cta(&self) -> u32 {
        self.threads_per_cta.div_ceil(32)
    }
}

/// Which per-SM limit decides the occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Limiter {
    Ctas,
    Warps,
    Registers,
    SharedMemory,
}

/// Result of the occupancy calculation for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Occupancy {
    pub ctas_per_sm: u32,
    pub limiter: Limiter,
    /// Resident warps per SM over the maximum.
    pub warp_occupancy: f32,
    /// SMs needed to hold all CTAs at once (at most the GPU's SM count: more CTAs run
    /// in waves on all of them).
    pub sms_needed: u32,
}

/// A launch that cannot run on this GPU at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OccupancyError {
    #[error("{threads} threads per CTA: must be 1..={max}")]
    Threads { threads: u32, max: u32 },
    #[error("{regs} registers per thread: the most is {max}")]
    Registers { regs: u32, max: u32 },
    #[error("{smem} bytes of shared memory per CTA: the most is {max}")]
    SharedMemory { smem: u32, max: u32 },
    #[error("zero CTAs: nothing to launch")]
    Empty,
    #[error("every logical device needs at least one SM: give each a budget of 1 or more")]
    EmptySmBudget,
    #[error("SM budgets add up to {total} but {gpu} has {sms} SMs: lower the budgets")]
    SmBudgetOver { total: u32, gpu: String, sms: u32 },
}

/// CTAs of `shape` resident on one SM of `gpu`, and the SMs all of them need.
///
/// # Errors
/// A launch that cannot run on `gpu` (too many threads, registers or shared memory).
pub fn occupancy(gpu: &GpuSpec, shape: &LaunchShape) -> Result<Occupancy, OccupancyError> {
    if shape.ctas == 0 {
        return Err(OccupancyError::Empty);
    }
    if shape.threads_per_cta == 0 || shape.threads_per_cta > gpu.max_threads_per_cta {
        return Err(OccupancyError::Threads {
            threads: shape.threads_per_cta,
            max: gpu.max_threads_per_cta,
        });
    }
    if shape.regs_per_thread > gpu.max_regs_per_thread {
        return Err(OccupancyError::Registers {
            regs: shape.regs_per_thread,
            max: gpu.max_regs_per_thread,
        });
    }
    if shape.smem_per_cta > gpu.max_smem_per_cta {
        return Err(OccupancyError::SharedMemory {
            smem: shape.smem_per_cta,
            max: gpu.max_smem_per_cta,
        });
    }
    let warps = shape.warps_per_cta();
    let by_ctas = gpu.max_ctas_per_sm;
    let by_warps = gpu.max_warps_per_sm() / warps;
    let by_regs = if shape.regs_per_thread == 0 {
        u32::MAX
    } else {
        let per_warp =
            (shape.regs_per_thread * 32).div_ceil(gpu.reg_alloc_unit) * gpu.reg_alloc_unit;
        let warps_per_partition = gpu.regs_per_sm / gpu.sub_partitions / per_warp;
        warps_per_partition * gpu.sub_partitions / warps
    };
    let by_smem = if shape.smem_per_cta == 0 {
        u32::MAX
    } else {
        let per_cta = shape.smem_per_cta.div_ceil(gpu.smem_alloc_unit) * gpu.smem_alloc_unit
            + gpu.reserved_smem_per_cta;
        gpu.smem_per_sm / per_cta
    };
    let limits = [
        (by_ctas, Limiter::Ctas),
        (by_warps, Limiter::Warps),
        (by_regs, Limiter::Registers),
        (by_smem, Limiter::SharedMemory),
    ];
    let (ctas_per_sm, limiter) = limits
        .iter()
        .copied()
        .min_by_key(|(n, _)| *n)
        .expect("four limits");
    if ctas_per_sm == 0 {
        // Registers per CTA beyond the register file: reported as a register error.
        return Err(OccupancyError::Registers {
            regs: shape.regs_per_thread,
            max: gpu.max_regs_per_thread,
        });
    }
    Ok(Occupancy {
        ctas_per_sm,
        limiter,
        warp_occupancy: (ctas_per_sm * warps) as f32 / gpu.max_warps_per_sm() as f32,
        sms_needed: shape.ctas.div_ceil(ctas_per_sm).min(gpu.sms),
    })
}

/// One physical GPU split into logical devices by SM budget (fragmented parallelism on
/// one card): each gets `budgets[i]` SMs of the scoreboard's capacity.
///
/// # Errors
/// Budgets that are empty, zero, or add up to more SMs than the GPU has.
pub fn split_by_sm(gpu: &GpuSpec, budgets: &[u32]) -> Result<Vec<u32>, OccupancyError> {
    if budgets.is_empty() || budgets.contains(&0) {
        return Err(OccupancyError::EmptySmBudget);
    }
    let total = budgets.iter().fold(0u32, |a, &b| a.saturating_add(b));
    if total > gpu.sms {
        return Err(OccupancyError::SmBudgetOver {
            total,
            gpu: gpu.name.to_string(),
            sms: gpu.sms,
        });
    }
    Ok(budgets.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(ctas: u32, threads: u32, regs: u32, smem: u32) -> LaunchShape {
        LaunchShape {
            ctas,
            threads_per_cta: threads,
            regs_per_thread: regs,
            smem_per_cta: smem,
        }
    }

    /// Values worked by hand from the rules in the module docs.
    #[test]
    fn h100_hand_worked() {
        let h = GpuSpec::h100();
        // 256 threads = 8 warps; 32 regs -> 1024/warp -> 16 warps per partition -> 64
        // warps -> 8 CTAs; warps allow 64/8 = 8: tie resolved to the first (warps).
        let o = occupancy(&h, &shape(1000, 256, 32, 0)).unwrap();
        assert_eq!(o.ctas_per_sm, 8);
        assert_eq!(o.limiter, Limiter::Warps);
        assert_eq!(o.sms_needed, 125);
        assert_eq!(o.warp_occupancy, 1.0);
        // 64 regs -> 2048/warp -> 8 warps/partition -> 32 warps -> 4 CTAs of 8 warps.
        let o = occupancy(&h, &shape(10, 256, 64, 0)).unwrap();
        assert_eq!(
            (o.ctas_per_sm, o.limiter, o.sms_needed),
            (4, Limiter::Registers, 3)
        );
        // 255 regs -> 8160 -> 8192/warp -> 2 warps/partition -> 8 warps -> 1 CTA.
        let o = occupancy(&h, &shape(500, 256, 255, 0)).unwrap();
        assert_eq!((o.ctas_per_sm, o.sms_needed), (1, 132));
        // 40 regs -> 1280/warp -> 12 warps/partition (16384/1280 = 12.8) -> 48 warps
        // -> 6 CTAs of 8 warps.
        assert_eq!(occupancy(&h, &shape(1, 256, 40, 0)).unwrap().ctas_per_sm, 6);
        // 64 KiB dynamic smem: 65536 + 1024 reserved = 66560 -> 233472 / 66560 = 3.
        let o = occupancy(&h, &shape(12, 128, 32, 65536)).unwrap();
        assert_eq!(
            (o.ctas_per_sm, o.limiter, o.sms_needed),
            (3, Limiter::SharedMemory, 4)
        );
        // 100-byte smem rounds to 128 (+1024): 202 by smem; 32 threads, 16 regs: 32
        // CTAs by the CTA limit.
        let o = occupancy(&h, &shape(64, 32, 16, 100)).unwrap();
        assert_eq!(
            (o.ctas_per_sm, o.limiter, o.sms_needed),
            (32, Limiter::Ctas, 2)
        );
        // 1024 threads = 32 warps -> 2 CTAs by warps.
        assert_eq!(
            occupancy(&h, &shape(1, 1024, 32, 0)).unwrap().ctas_per_sm,
            2
        );
    }

    #[test]
    fn a100_hand_worked() {
        let a = GpuSpec::a100();
        // 64 KiB smem: 167936 / 66560 = 2.
        let o = occupancy(&a, &shape(108, 128, 32, 65536)).unwrap();
        assert_eq!((o.ctas_per_sm, o.sms_needed), (2, 54));
        // 26112 bytes (LDPC BG1 Zc=384 app) -> 26112 + 1024 = 27136 -> 6 CTAs;
        // 384 threads = 12 warps -> 5 by warps; 64 regs -> 8 warps/partition -> 32 ->
        // 2 CTAs by registers.
        let o = occupancy(&a, &shape(200, 384, 64, 26112)).unwrap();
        assert_eq!(
            (o.ctas_per_sm, o.limiter, o.sms_needed),
            (2, Limiter::Registers, 100)
        );
        assert_eq!(
            occupancy(&a, &shape(300, 384, 64, 26112))
                .unwrap()
                .sms_needed,
            108
        );
    }

    #[test]
    fn impossible_launches_are_errors() {
        let h = GpuSpec::h100();
        assert!(occupancy(&h, &shape(1, 2048, 32, 0)).is_err());
        assert!(occupancy(&h, &shape(1, 256, 256, 0)).is_err());
        assert!(occupancy(&h, &shape(1, 256, 32, 300 * 1024)).is_err());
        assert!(occupancy(&h, &shape(0, 256, 32, 0)).is_err());
        // 1024 threads x 255 registers exceed the register file.
        assert!(occupancy(&h, &shape(1, 1024, 255, 0)).is_err());
    }

    proptest::proptest! {
        /// Resident CTAs never exceed any per-SM limit, and asking for more of any
        /// resource never needs fewer SMs.
        #[test]
        fn limits_hold_and_need_is_monotone(
            ctas in 1u32..5000, threads in 1u32..=1024, regs in 1u32..=255,
            smem in 0u32..=(227 * 1024), more in 1u32..64,
        ) {
            for gpu in [GpuSpec::h100(), GpuSpec::a100()] {
                let s = shape(ctas, threads, regs, smem.min(gpu.max_smem_per_cta));
                let Ok(o) = occupancy(&gpu, &s) else { continue };
                let warps = s.warps_per_cta();
                proptest::prop_assert!(o.ctas_per_sm * warps <= gpu.max_warps_per_sm());
                proptest::prop_assert!(o.ctas_per_sm <= gpu.max_ctas_per_sm);
                let regs_used = o.ctas_per_sm * warps * (regs * 32).div_ceil(256) * 256;
                proptest::prop_assert!(regs_used <= gpu.regs_per_sm);
                let smem_used = o.ctas_per_sm * (s.smem_per_cta.div_ceil(128) * 128 + 1024);
                proptest::prop_assert!(s.smem_per_cta == 0 || smem_used <= gpu.smem_per_sm);
                proptest::prop_assert!(o.sms_needed >= 1 && o.sms_needed <= gpu.sms);
                for bigger in [
                    shape(ctas + more, threads, regs, s.smem_per_cta),
                    shape(ctas, threads, (regs + more).min(255), s.smem_per_cta),
                    shape(ctas, threads, regs, (s.smem_per_cta + more * 512).min(gpu.max_smem_per_cta)),
                ] {
                    if let Ok(b) = occupancy(&gpu, &bigger) {
                        proptest::prop_assert!(b.sms_needed >= o.sms_needed);
                    }
                }
            }
        }
    }

    #[test]
    fn splits_respect_the_sm_count() {
        let h = GpuSpec::h100();
        assert_eq!(split_by_sm(&h, &[66, 66]).unwrap(), vec![66, 66]);
        assert!(split_by_sm(&h, &[100, 40]).is_err());
        assert!(split_by_sm(&h, &[0, 10]).is_err());
        assert!(split_by_sm(&h, &[]).is_err());
    }
}
