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
