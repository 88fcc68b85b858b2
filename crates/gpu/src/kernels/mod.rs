//! The CUDA C sources of every kernel (compiled at run time by NVRTC), which station
//! opcode each serves, and the host-side constants the kernels take from the CPU
//! crates (PAM levels from phy's modulator, min-sum correction from ldpc's rules).

use radiohost_iq::Cf32;
use radiohost_ldpc::MinSum;
use radiohost_phy::qam::{Modulation, Modulator};

const COMMON: &str = include_str!("common.cuh");

/// One NVRTC program: a source file and the kernels it defines.
#[derive(Clone, Copy, Debug)]
pub struct KernelModule {
    pub name: &'static str,
    source: &'static str,
    pub kernels: &'static [&'static str],
}

impl KernelModule {
    /// The complete translation unit (shared helpers first).
    pub fn source(&self) -> String {
        format!("{COMMON}\n{}", self.source)
    }
}

/// Every module, in pipeline order.
pub const MODULES: [KernelModule; 3] = [
    KernelModule {
        name: "ofdm",
        source: include_str!("ofdm.cu"),
        kernels: &["ofdm_rx", "ofdm_tx"],
    },
    KernelModule {
        name: "mimo",
        source: include_str!("mimo.cu"),
        kernels: &[
            "csi_estimate",
            "zf_detect",
            "eq_demod",
            "modulate",
            "precode",
        ],
    },
    KernelModule {
        name: "ldpc",
        source: include_str!("ldpc.cu"),
        kernels: &["ldpc_decode", "ldpc_encode"],
    },
];

/// Names of all kernels.
pub fn all_kernels() -> impl Iterator<Item = &'static str> {
    MODULES.iter().flat_map(|m| m.kernels.iter().copied())
}

/// The min-sum correction as the decode kernel takes it: (0, eighths) for normalised,
/// (1, offset in quanta at the default LLR scale) for offset min-sum — the rules of
/// radiohost-ldpc's decoder. `None` for a parameter that decoder rejects.
pub fn min_sum_correction(ms: MinSum) -> Option<(i32, i32)> {
    match ms {
        MinSum::Normalized(a) if a.is_finite() && a > 0.0 && a <= 1.0 => {
            Some((0, ((a * 8.0).round() as i32).clamp(1, 8)))
        }
        MinSum::Offset(b) if b.is_finite() && (0.0..16.0).contains(&b) => Some((
            1,
            (b * radiohost_ldpc::DEFAULT_LLR_SCALE).round().min(127.0) as i32,
        )),
        _ => None,
    }
}

/// PAM levels of one axis indexed by the axis label (bits b0 b2 b4 .. as a binary
/// number, MSB first), read from phy's modulator so both sides share one mapping.
pub fn pam_levels(m: Modulation) -> Vec<f32> {
    let qa = m.bits_per_axis();
    let md = Modulator::new(m);
    (0..1usize << qa)
        .map(|label| {
            let bits: Vec<u8> = (0..2 * qa)
                .map(|j| {
                    if j % 2 == 0 {
                        ((label >> (qa - 1 - j / 2)) & 1) as u8
                    } else {
                        0
                    }
                })
                .collect();
            let mut s = [Cf32::default()];
            md.modulate(&bits, &mut s);
            s[0].re
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_gray_mapping() {
        let q = pam_levels(Modulation::Qpsk);
        assert_eq!(q.len(), 2);
        assert!(q[0] > 0.0 && q[1] < 0.0);
        let l16 = pam_levels(Modulation::Qam16);
        let s = 1.0 / 10f32.sqrt();
        // b0 b2: 00 -> +1*(2-1)=1, 01 -> 3, 10 -> -1, 11 -> -3 (38.211).
        for (got, want) in l16.iter().zip([1.0, 3.0, -1.0, -3.0]) {
            assert!((got - want * s).abs() < 1e-6);
        }
        assert_eq!(pam_levels(Modulation::Qam256).len(), 16);
    }

    #[test]
    fn min_sum_rules() {
        assert_eq!(min_sum_correction(MinSum::Normalized(0.75)), Some((0, 6)));
        assert_eq!(min_sum_correction(MinSum::Offset(0.5)), Some((1, 2)));
        assert_eq!(min_sum_correction(MinSum::Normalized(0.0)), None);
        assert_eq!(min_sum_correction(MinSum::Offset(f32::NAN)), None);
    }

    #[test]
    fn every_kernel_is_defined_in_its_module() {
        for m in MODULES {
            let src = m.source();
            for k in m.kernels {
                assert!(
                    src.contains(&format!("__global__ void {k}(")),
                    "{k} not in {}",
                    m.name
                );
            }
        }
        assert_eq!(all_kernels().count(), 9);
    }
}
