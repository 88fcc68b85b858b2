//! Time-domain convolution: the reference that UPOLS is checked against and the naive
//! per-sample FIR that benchmarks compare with.

use radiohost_iq::Cf32;

/// Full linear convolution `y[i] = sum_j h[j] x[i - j]`, truncated to `x.len()` samples
/// (what a streaming filter started from silence produces). Accumulates in `f64`.
pub fn convolve_truncated(x: &[Cf32], h: &[Cf32]) -> Vec<Cf32> {
    (0..x.len())
        .map(|i| {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (j, t) in h.iter().enumerate().take(i + 1) {
                let s = x[i - j];
                re += f64::from(t.re) * f64::from(s.re) - f64::from(t.im) * f64::from(s.im);
                im += f64::from(t.re) * f64::from(s.im) + f64::from(t.im) * f64::from(s.re);
            }
            Cf32::new(re as f32, im as f32)
        })
        .collect()
}

/// Streaming direct-form FIR, one output per input sample (the naive baseline).
#[derive(Debug, Clone)]
pub struct NaiveFir {
    /// Taps reversed, so the inner loop walks both arrays forwards.
    reversed: Vec<Cf32>,
    /// `L - 1` samples of history followed by room for one block.
    line: Vec<Cf32>,
}

impl NaiveFir {
    /// A filter with `taps` (at least one tap; an empty slice acts as one zero tap).
    pub fn new(taps: &[Cf32]) -> Self {
        let mut reversed: Vec<Cf32> = taps.iter().rev().copied().collect();
        if reversed.is_empty() {
            reversed.push(Cf32::new(0.0, 0.0));
        }
        Self {
            line: vec![Cf32::new(0.0, 0.0); reversed.len() - 1],
            reversed,
        }
    }

    /// Filters `input` into `output` (same length). Allocates only when a block is longer
    /// than any before it.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn process(&mut self, input: &[Cf32], output: &mut [Cf32]) {
        assert_eq!(input.len(), output.len(), "FIR block lengths");
        let hist = self.reversed.len() - 1;
        self.line.truncate(hist);
        self.line.extend_from_slice(input);
        for (i, y) in output.iter_mut().enumerate() {
            let window = &self.line[i..i + hist + 1];
            *y = window.iter().zip(&self.reversed).map(|(s, t)| s * t).sum();
        }
        self.line.drain(..input.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naive_fir_matches_reference_across_blocks() {
        let h: Vec<Cf32> = (0..7)
            .map(|i| Cf32::new(i as f32 * 0.1, 1.0 - i as f32 * 0.2))
            .collect();
        let x: Vec<Cf32> = (0..50)
            .map(|i| Cf32::new((i as f32).sin(), (i as f32).cos()))
            .collect();
        let want = convolve_truncated(&x, &h);
        let mut fir = NaiveFir::new(&h);
        let mut got = vec![Cf32::new(0.0, 0.0); x.len()];
        for (xi, yi) in x.chunks(9).zip(got.chunks_mut(9)) {
            fir.process(xi, yi);
        }
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).norm() < 1e-5);
        }
    }
}
