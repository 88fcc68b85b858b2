//! Which vector instruction set the kernels run on, chosen at run time.
//!
//! The default build targets baseline x86-64, so every hot kernel has one portable
//! body compiled three times: as is, with AVX2+FMA and with AVX-512 (`#[target_feature]`
//! wrappers around an `#[inline(always)]` body). [`Isa::detect`] picks the best the
//! CPU has; tests force each level the CPU supports and compare with the portable one.

use std::sync::atomic::{AtomicU8, Ordering};

/// Process-wide ceiling set by [`Isa::limit`] (`u8::MAX`: none).
static CEILING: AtomicU8 = AtomicU8::new(u8::MAX);

/// A vector instruction set level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Baseline x86-64 (or any other architecture): what the compiler makes of the
    /// portable code.
    Portable,
    /// AVX2 with FMA.
    Avx2,
    /// AVX-512 F/BW/VL with FMA.
    Avx512,
}

impl Isa {
    /// The best level this CPU supports, at most the ceiling set by [`Isa::limit`].
    pub fn detect() -> Self {
        let best = Self::cpu();
        match CEILING.load(Ordering::Relaxed) {
            0 => best.min(Isa::Portable),
            1 => best.min(Isa::Avx2),
            _ => best,
        }
    }

    /// Cap every phy kernel of this process, and the LDPC decoders the pipelines
    /// build afterwards, at `ceiling`: how `phy bench --isa avx2` measures the AVX2
    /// builds on an AVX-512 machine. (rustfft, the LDPC encoder and the bit packer the
    /// CRCs share with it pick their own instruction sets.)
    pub fn limit(ceiling: Isa) {
        let v = match ceiling {
            Isa::Portable => 0,
            Isa::Avx2 => 1,
            Isa::Avx512 => 2,
        };
        CEILING.store(v, Ordering::Relaxed);
    }

    /// The LDPC kernel level matching [`Isa::detect`] (`Auto` when no ceiling is set).
    pub fn ldpc_level() -> radiohost_ldpc::SimdLevel {
        use radiohost_ldpc::SimdLevel;
        if CEILING.load(Ordering::Relaxed) == u8::MAX {
            return SimdLevel::Auto;
        }
        match Self::detect() {
            Isa::Portable => SimdLevel::Scalar,
            Isa::Avx2 => SimdLevel::Avx2,
            Isa::Avx512 => SimdLevel::Avx512,
        }
    }

    /// Parse a name as printed by [`Isa::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "portable" => Some(Isa::Portable),
            "avx2" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            _ => None,
        }
    }

    /// The best level this CPU supports, ignoring any ceiling.
    pub(crate) fn cpu() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("fma")
            {
                return Isa::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// Every level this CPU supports, portable first (for tests and benches).
    pub fn available() -> Vec<Isa> {
        let best = Self::cpu();
        [Isa::Portable, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|l| *l <= best)
            .collect()
    }

    /// Name as printed by the benches.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}

/// The CPU's vendor and family/model as `cpuid` reports them, for the few choices
/// measured to differ between microarchitectures of one [`Isa`] level (each use
/// cites its figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpuModel {
    pub intel: bool,
    pub amd: bool,
    /// Family with the extended family added (AMD Zen 1-2: 0x17).
    pub family: u32,
    /// Model with the extended model bits added.
    pub model: u32,
}

impl CpuModel {
    /// This CPU's, read once (all zero off x86-64).
    pub(crate) fn get() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            static MODEL: std::sync::OnceLock<CpuModel> = std::sync::OnceLock::new();
            *MODEL.get_or_init(|| {
                use std::arch::x86_64::__cpuid;
                let vendor = __cpuid(0);
                let signature = __cpuid(1).eax;
                Self::from_cpuid([vendor.ebx, vendor.edx, vendor.ecx], signature)
            })
        }
        #[cfg(not(target_arch = "x86_64"))]
        Self::default()
    }

    /// From leaf 0's vendor words (`ebx, edx, ecx`) and leaf 1's `eax`.
    fn from_cpuid(vendor: [u32; 3], signature: u32) -> Self {
        let word = |s: &[u8; 4]| u32::from_le_bytes(*s);
        let base_family = (signature >> 8) & 0xF;
        let base_model = (signature >> 4) & 0xF;
        let extended = base_family == 0xF || base_family == 0x6;
        Self {
            intel: vendor == [word(b"Genu"), word(b"ineI"), word(b"ntel")],
            amd: vendor == [word(b"Auth"), word(b"enti"), word(b"cAMD")],
            family: base_family
                + if base_family == 0xF {
                    (signature >> 20) & 0xFF
                } else {
                    0
                },
            model: base_model
                | if extended {
                    ((signature >> 16) & 0xF) << 4
                } else {
                    0
                },
        }
    }

    /// AMD Zen or Zen+ (family 17h, models below 30h; Zen 2 starts at 31h): each
    /// 256-bit operation runs as two 128-bit halves.
    pub(crate) fn is_zen1(self) -> bool {
        self.amd && self.family == 0x17 && self.model < 0x30
    }

    /// AMD Zen 3 or Zen 3+ (family 19h, models 00-0Fh, 20-2Fh, 40-5Fh; Zen 4, in
    /// the same family, has models 10-1Fh, 60-7Fh and A0-AFh).
    pub(crate) fn is_zen3(self) -> bool {
        self.amd
            && self.family == 0x19
            && matches!(self.model, 0x00..=0x0F | 0x20..=0x2F | 0x40..=0x5F)
    }
}

/// `a * b + c`, fused when the body is compiled with FMA (`FMA = true`), plain
/// otherwise (`mul_add` without the FMA feature is a slow library call).
#[inline(always)]
pub(crate) fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Call `$body::<FMA>(args)` (an `#[inline(always)]` portable function) built for the
/// given [`Isa`], clamped to what the CPU supports: the AVX2 and AVX-512 builds are
/// `#[target_feature]` wrappers the macro defines.
macro_rules! dispatch {
    ($isa:expr, fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
        unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
            $body::<true>($($arg),*)
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
            $body::<true>($($arg),*)
        }
        // Never above what the CPU has, whatever the caller asked for.
        match ($isa).min($crate::simd::Isa::cpu()) {
            // SAFETY: `Isa::detect` established the CPU has these features.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx512 => unsafe { avx512($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx2 => unsafe { avx2($($arg),*) },
            _ => $body::<false>($($arg),*),
        }
    }};
}
pub(crate) use dispatch;

#[cfg(test)]
mod tests {
    use super::CpuModel;

    fn vendor(s: &[u8; 12]) -> [u32; 3] {
        let word = |i: usize| u32::from_le_bytes(s[4 * i..4 * i + 4].try_into().unwrap());
        [word(0), word(1), word(2)]
    }

    #[test]
    fn family_and_model_decode_as_published() {
        // (vendor, leaf 1 eax, family, model, Zen 1, Zen 3): EPYC 7601, Ryzen 2700X
        // (Zen+), EPYC 7002 (Zen 2), EPYC 7003 (Zen 3), Ryzen 5000 desktop (Zen 3),
        // Ryzen 6000 mobile (Zen 3+), EPYC 9004 and Ryzen 7000 (Zen 4), EPYC 9005
        // (Zen 5, family 1Ah), Xeon Skylake-SP.
        let amd = vendor(b"AuthenticAMD");
        let intel = vendor(b"GenuineIntel");
        for (v, eax, family, model, zen1, zen3) in [
            (amd, 0x0080_0F12, 0x17, 0x01, true, false),
            (amd, 0x0080_0F82, 0x17, 0x08, true, false),
            (amd, 0x0083_0F10, 0x17, 0x31, false, false),
            (amd, 0x00A0_0F11, 0x19, 0x01, false, true),
            (amd, 0x00A2_0F10, 0x19, 0x21, false, true),
            (amd, 0x00A4_0F41, 0x19, 0x44, false, true),
            (amd, 0x00A1_0F11, 0x19, 0x11, false, false),
            (amd, 0x00A6_0F12, 0x19, 0x61, false, false),
            (amd, 0x00B0_0F21, 0x1A, 0x02, false, false),
            (intel, 0x0005_0654, 0x06, 0x55, false, false),
        ] {
            let cpu = CpuModel::from_cpuid(v, eax);
            assert_eq!((cpu.family, cpu.model), (family, model), "{eax:#x}");
            assert_eq!(cpu.is_zen1(), zen1, "{eax:#x}");
            assert_eq!(cpu.is_zen3(), zen3, "{eax:#x}");
            assert_eq!((cpu.amd, cpu.intel), (v == amd, v == intel));
        }
    }

    #[test]
    fn this_cpu_matches_proc_cpuinfo() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            println!("SKIPPED: no /proc/cpuinfo to compare cpuid with");
            return;
        };
        let field = |name: &str| {
            info.lines()
                .find(|l| l.split(':').next().map(str::trim) == Some(name))
                .and_then(|l| l.split(':').nth(1)?.trim().parse::<u32>().ok())
        };
        let (Some(family), Some(model)) = (field("cpu family"), field("model")) else {
            println!("SKIPPED: /proc/cpuinfo names no x86 family and model");
            return;
        };
        let cpu = CpuModel::get();
        assert_eq!((cpu.family, cpu.model), (family, model));
    }
}
