//! Complex sample types and conversions between them.

pub use num_complex::Complex32 as Cf32;

/// A complex sample of two signed 16-bit integers (UHD "sc16", SigMF "ci16").
///
/// `#[repr(C)]` with I first, so a `&[Ci16]` can be viewed as interleaved
/// `i16` pairs (the layout of every radio's wire format and of SigMF data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Ci16 {
    pub re: i16,
    pub im: i16,
}

impl Ci16 {
    pub const fn new(re: i16, im: i16) -> Self {
        Self { re, im }
    }

    /// Scale to `Cf32` so that full scale (`i16::MAX`) maps to 1.0.
    pub fn to_cf32(self) -> Cf32 {
        Cf32::new(
            self.re as f32 / i16::MAX as f32,
            self.im as f32 / i16::MAX as f32,
        )
    }

    /// Quantise a `Cf32` in [-1, 1] to full-scale `i16`, rounding to nearest and
    /// saturating out-of-range values (never wrapping, so a clipped signal stays
    /// recognisable).
    pub fn from_cf32(x: Cf32) -> Self {
        Self {
            re: quantise(x.re),
            im: quantise(x.im),
        }
    }
}

fn quantise(v: f32) -> i16 {
    // `as` saturates for floats and maps NaN to 0, which is what we want.
    (v * i16::MAX as f32).round() as i16
}

/// Convert a slice of `Ci16` into `Cf32` (full scale maps to 1.0).
///
/// # Panics
/// If the slices differ in length (a caller bug, not a data error).
pub fn ci16_to_cf32(input: &[Ci16], output: &mut [Cf32]) {
    assert_eq!(input.len(), output.len(), "ci16_to_cf32: length mismatch");
    for (o, i) in output.iter_mut().zip(input) {
        *o = i.to_cf32();
    }
}

/// Convert a slice of `Cf32` into saturated `Ci16`.
///
/// # Panics
/// If the slices differ in length (a caller bug, not a data error).
pub fn cf32_to_ci16(input: &[Cf32], output: &mut [Ci16]) {
    assert_eq!(input.len(), output.len(), "cf32_to_ci16: length mismatch");
    for (o, i) in output.iter_mut().zip(input) {
        *o = Ci16::from_cf32(*i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn saturates_instead_of_wrapping() {
        assert_eq!(
            Ci16::from_cf32(Cf32::new(2.0, -2.0)),
            Ci16::new(i16::MAX, i16::MIN)
        );
        assert_eq!(Ci16::from_cf32(Cf32::new(f32::NAN, 0.0)), Ci16::new(0, 0));
    }

    proptest! {
        #[test]
        fn ci16_roundtrips_through_cf32(re in -32767i16..=32767, im in -32767i16..=32767) {
            let s = Ci16::new(re, im);
            prop_assert_eq!(Ci16::from_cf32(s.to_cf32()), s);
        }
    }
}
