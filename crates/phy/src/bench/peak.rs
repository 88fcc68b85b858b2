//! The core's peak arithmetic rates, measured in the same run: what the compute
//! floors divide by.
//!
//! A floor from the datasheet (`cpu MHz` x FMA pipes x lanes) assumes the pipes the
//! vendor's widest core has. Zen 4, for one, runs a 512-bit FMA as two 256-bit halves:
//! one per cycle, not two, so an assumed floor there is twice what any code can reach.
//! Measuring the rate with independent accumulator chains (enough of them to hide the
//! latency on two pipes) gives the floor this core has, at the instruction set the
//! kernels run at.

use std::hint::black_box;
use std::time::Instant;

use crate::simd::Isa;

/// Peak rates of one core at one instruction set.
pub(super) struct Peak {
    /// f32 flops per second (an FMA is two).
    pub flops: f64,
    /// i8 vector lane-operations per second (saturating adds).
    pub i8_ops: f64,
    /// The rates in words, with the clock /proc/cpuinfo reports.
    pub what: String,
}

/// Iterations of each measured loop: ~10-20 ms at a few GHz.
const ROUNDS: u64 = 1 << 20;
/// Independent accumulators: two pipes x latency 4-5 needs at least 10.
const CHAINS: usize = 12;

/// Measure the peak f32 FMA and i8 vector rates at `isa` (the best of five tries of
/// each, so a preemption cannot lower the floor).
pub(super) fn measure(isa: Isa) -> Peak {
    let best = |f: fn() -> f64| (0..5).map(|_| f()).fold(0.0, f64::max);
    let (flops, i8_ops, how) = match isa {
        Isa::Avx512 => (best(fma_avx512), best(adds_avx512), "AVX-512"),
        Isa::Avx2 => (best(fma_avx2), best(adds_avx2), "AVX2 + FMA"),
        Isa::Portable => (best(mul_add_sse), best(adds_sse), "SSE2, no FMA"),
    };
    let mhz = cpuinfo_mhz();
    let per_cycle = mhz.map_or(String::new(), |m| {
        format!(" = {:.1} flops/cycle at {:.0} MHz", flops / (m * 1e6), m)
    });
    Peak {
        flops,
        i8_ops,
        what: format!(
            "measured {how}: {:.0} GFLOP/s f32{per_cycle}, {:.0} G i8 lane-ops/s",
            flops / 1e9,
            i8_ops / 1e9
        ),
    }
}

fn cpuinfo_mhz() -> Option<f64> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("cpu MHz"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().parse::<f64>().ok())
    })
}

/// Operations per second of `ops_per_round` operations, `ROUNDS` times.
fn rate(ops_per_round: f64, run: impl FnOnce()) -> f64 {
    let start = Instant::now();
    run();
    ops_per_round * ROUNDS as f64 / start.elapsed().as_secs_f64()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::arch::x86_64::*;

    /// One round: every chain takes one FMA (or add); the chains share no inputs.
    macro_rules! chains {
        ($acc:ident, $step:expr) => {
            // Opaque trip count and inputs: nothing here may be folded away.
            for _ in 0..black_box(ROUNDS) {
                for a in $acc.iter_mut() {
                    *a = $step(*a);
                }
            }
        };
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn fma512() -> f32 {
        let (x, y) = (
            black_box(_mm512_set1_ps(0.999_999)),
            black_box(_mm512_set1_ps(1e-7)),
        );
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        chains!(acc, |a| _mm512_fmadd_ps(a, x, y));
        acc.iter().map(|&a| _mm512_reduce_add_ps(a)).sum()
    }

    #[target_feature(enable = "avx512bw")]
    unsafe fn adds512() -> i32 {
        let x = black_box(_mm512_set1_epi8(1));
        let mut acc = [_mm512_setzero_si512(); CHAINS];
        chains!(acc, |a| _mm512_adds_epi8(a, x));
        // Saturated lanes: the sum wraps, it only has to be used.
        acc.iter()
            .fold(0i32, |s, &a| s.wrapping_add(_mm512_reduce_add_epi32(a)))
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn fma256() -> f32 {
        let (x, y) = (
            black_box(_mm256_set1_ps(0.999_999)),
            black_box(_mm256_set1_ps(1e-7)),
        );
        let mut acc = [_mm256_set1_ps(1.0); CHAINS];
        chains!(acc, |a| _mm256_fmadd_ps(a, x, y));
        let mut out = [0f32; 8];
        acc.iter()
            .map(|&a| {
                _mm256_storeu_ps(out.as_mut_ptr(), a);
                out.iter().sum::<f32>()
            })
            .sum()
    }

    #[target_feature(enable = "avx2")]
    unsafe fn adds256() -> i32 {
        let x = black_box(_mm256_set1_epi8(1));
        let mut acc = [_mm256_setzero_si256(); CHAINS];
        chains!(acc, |a| _mm256_adds_epi8(a, x));
        acc.iter()
            .fold(0i32, |s, &a| s.wrapping_add(_mm256_extract_epi32::<0>(a)))
    }

    // SSE2 is part of x86-64: no feature check needed.
    fn mul_add128() -> f32 {
        // SAFETY: SSE2 is baseline on x86-64.
        unsafe {
            let (x, y) = (
                black_box(_mm_set1_ps(0.999_999)),
                black_box(_mm_set1_ps(1e-7)),
            );
            let mut acc = [_mm_set1_ps(1.0); CHAINS];
            chains!(acc, |a| _mm_add_ps(_mm_mul_ps(a, x), y));
            acc.iter().map(|&a| _mm_cvtss_f32(a)).sum()
        }
    }

    fn adds128() -> i32 {
        // SAFETY: SSE2 is baseline on x86-64.
        unsafe {
            let x = black_box(_mm_set1_epi8(1));
            let mut acc = [_mm_setzero_si128(); CHAINS];
            chains!(acc, |a| _mm_adds_epi8(a, x));
            acc.iter()
                .fold(0i32, |s, &a| s.wrapping_add(_mm_cvtsi128_si32(a)))
        }
    }

    // The callers below run only at the level `Isa::detect` picked, which checked the
    // CPU's features.
    pub(super) fn fma_avx512() -> f64 {
        // SAFETY: reached only when Isa::detect() saw AVX-512 F/BW.
        rate(2.0 * 16.0 * CHAINS as f64, || {
            black_box(unsafe { fma512() });
        })
    }
    pub(super) fn adds_avx512() -> f64 {
        // SAFETY: as above.
        rate(64.0 * CHAINS as f64, || {
            black_box(unsafe { adds512() });
        })
    }
    pub(super) fn fma_avx2() -> f64 {
        // SAFETY: reached only when Isa::detect() saw AVX2 and FMA.
        rate(2.0 * 8.0 * CHAINS as f64, || {
            black_box(unsafe { fma256() });
        })
    }
    pub(super) fn adds_avx2() -> f64 {
        // SAFETY: as above.
        rate(32.0 * CHAINS as f64, || {
            black_box(unsafe { adds256() });
        })
    }
    pub(super) fn mul_add_sse() -> f64 {
        rate(2.0 * 4.0 * CHAINS as f64, || {
            black_box(mul_add128());
        })
    }
    pub(super) fn adds_sse() -> f64 {
        rate(16.0 * CHAINS as f64, || {
            black_box(adds128());
        })
    }
}

#[cfg(target_arch = "x86_64")]
use x86::*;

/// Elsewhere only the portable level exists: scalar chains.
#[cfg(not(target_arch = "x86_64"))]
mod scalar {
    use super::*;

    pub(super) fn mul_add_sse() -> f64 {
        rate(2.0 * CHAINS as f64, || {
            let mut acc = [1.0f32; CHAINS];
            for _ in 0..ROUNDS {
                for a in acc.iter_mut() {
                    *a = black_box(*a) * 0.999_999 + 1e-7;
                }
            }
            black_box(acc);
        })
    }
    pub(super) fn adds_sse() -> f64 {
        rate(CHAINS as f64, || {
            let mut acc = [0i8; CHAINS];
            for _ in 0..ROUNDS {
                for a in acc.iter_mut() {
                    *a = black_box(*a).saturating_add(1);
                }
            }
            black_box(acc);
        })
    }
    pub(super) use adds_sse as adds_avx512;
    pub(super) use adds_sse as adds_avx2;
    pub(super) use mul_add_sse as fma_avx512;
    pub(super) use mul_add_sse as fma_avx2;
}

#[cfg(not(target_arch = "x86_64"))]
use scalar::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_peak_is_plausible_and_ordered_by_isa() {
        let portable = measure(Isa::Portable);
        // Between 0.1 G and what 64 flops (or 256 i8 ops) per cycle at 6 GHz would give:
        // a folded-away loop would read as absurdly fast.
        let sane = |p: &Peak| {
            (1e8..64.0 * 6e9).contains(&p.flops) && (1e8..256.0 * 6e9).contains(&p.i8_ops)
        };
        assert!(sane(&portable), "{}", portable.what);
        let best = Isa::cpu();
        if best == Isa::Portable {
            eprintln!("SKIPPED: no AVX2 on this CPU; only the portable rate was measured");
            return;
        }
        let wide = measure(best);
        assert!(sane(&wide), "{}", wide.what);
        // A wider vector is never much slower per operation than SSE. Not strictly
        // faster: AMD Zen 1 runs each 256-bit operation as two 128-bit halves, so
        // its AVX2 and SSE rates are equal and either can win a noisy run.
        assert!(
            wide.flops > 0.9 * portable.flops && wide.i8_ops > 0.9 * portable.i8_ops,
            "{} vs {}",
            wide.what,
            portable.what
        );
    }
}
