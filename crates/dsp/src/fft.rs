//! FFT planning helpers on top of rustfft.
//!
//! Plans are made once (planning allocates and runs heuristics) and shared by `Arc`;
//! every transform runs in place with scratch owned by the caller, so the hot path never
//! allocates.

use std::sync::Arc;

use radiohost_iq::Cf32;
use rustfft::{Fft, FftPlanner};

/// A planned forward/inverse pair of one size.
#[derive(Clone)]
pub struct FftPair {
    len: usize,
    forward: Arc<dyn Fft<f32>>,
    inverse: Arc<dyn Fft<f32>>,
    scratch_len: usize,
}

impl std::fmt::Debug for FftPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FftPair")
            .field("len", &self.len)
            .field("scratch_len", &self.scratch_len)
            .finish()
    }
}

impl FftPair {
    /// Plans both directions of an `len`-point complex FFT (unnormalised, like rustfft).
    ///
    /// # Panics
    /// Never for `len >= 1`; `len == 0` gives a pair whose transforms do nothing.
    pub fn new(len: usize) -> Self {
        let mut planner = FftPlanner::<f32>::new();
        Self::with_planner(&mut planner, len)
    }

    /// Plans with a caller's planner, so several sizes share its twiddle caches.
    pub fn with_planner(planner: &mut FftPlanner<f32>, len: usize) -> Self {
        let forward = planner.plan_fft_forward(len);
        let inverse = planner.plan_fft_inverse(len);
        let scratch_len = forward
            .get_inplace_scratch_len()
            .max(inverse.get_inplace_scratch_len());
        Self {
            len,
            forward,
            inverse,
            scratch_len,
        }
    }

    /// Transform length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for the degenerate zero-length plan.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Scratch length that both directions need.
    pub fn scratch_len(&self) -> usize {
        self.scratch_len
    }

    /// A scratch buffer of the right size, to be kept by the caller.
    pub fn make_scratch(&self) -> Vec<Cf32> {
        vec![Cf32::new(0.0, 0.0); self.scratch_len]
    }

    /// In-place forward transform of exactly `len` samples.
    ///
    /// # Panics
    /// If `buf.len() != len` or `scratch` is shorter than [`Self::scratch_len`]; both are
    /// programming errors of the caller, not data errors.
    pub fn forward(&self, buf: &mut [Cf32], scratch: &mut [Cf32]) {
        assert_eq!(buf.len(), self.len, "FFT buffer length");
        self.forward
            .process_with_scratch(buf, &mut scratch[..self.scratch_len]);
    }

    /// In-place inverse transform (unnormalised: the result is `len` times the inverse DFT).
    ///
    /// # Panics
    /// As [`Self::forward`].
    pub fn inverse(&self, buf: &mut [Cf32], scratch: &mut [Cf32]) {
        assert_eq!(buf.len(), self.len, "FFT buffer length");
        self.inverse
            .process_with_scratch(buf, &mut scratch[..self.scratch_len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_then_inverse_is_len_times_identity() {
        let pair = FftPair::new(512);
        let mut scratch = pair.make_scratch();
        let orig: Vec<Cf32> = (0..512)
            .map(|i| Cf32::new((i as f32 * 0.37).sin(), (i as f32 * 0.11).cos()))
            .collect();
        let mut buf = orig.clone();
        pair.forward(&mut buf, &mut scratch);
        pair.inverse(&mut buf, &mut scratch);
        for (a, b) in buf.iter().zip(&orig) {
            assert!((a / 512.0 - b).norm() < 1e-5);
        }
    }

    #[test]
    fn forward_of_impulse_is_flat() {
        let pair = FftPair::new(64);
        let mut scratch = pair.make_scratch();
        let mut buf = vec![Cf32::new(0.0, 0.0); 64];
        buf[0] = Cf32::new(2.0, -1.0);
        pair.forward(&mut buf, &mut scratch);
        assert!(buf.iter().all(|v| (v - Cf32::new(2.0, -1.0)).norm() < 1e-6));
    }
}
