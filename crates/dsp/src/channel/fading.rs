//! Slowly time-varying Rayleigh channels: every tap of every path follows its own seeded
//! fading process, sampled once per update interval, and the convolver's response is
//! replaced with each new sample (see `MimoConvolver::swap_responses`).

use std::f64::consts::PI;

use radiohost_iq::Cf32;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::rayleigh::{complex_gaussian, PowerDelayProfile};
use crate::taps::{check_ports, MimoTaps};
use crate::DspError;

/// How each tap evolves between updates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FadingProcess {
    /// First-order Gauss-Markov: `g' = rho g + sqrt(1 - rho^2) w`, `w ~ CN(0, p)`.
    Ar1 {
        /// Correlation between consecutive updates, in [-1, 1].
        rho: f64,
    },
    /// Clarke/Jakes sum of sinusoids: `g(t) = sqrt(p / S) sum_s exp(j(2 pi fd cos(a_s) t + phi_s))`
    /// with random arrival angles and phases.
    Jakes {
        /// Maximum Doppler shift in Hz.
        doppler_hz: f64,
        /// Update interval in seconds (time between responses).
        interval_s: f64,
        /// Number of sinusoids per tap (more: closer to the Jakes spectrum).
        sinusoids: usize,
    },
}

/// Bessel function of the first kind, order 0: `(1/pi) int_0^pi cos(x sin t) dt`.
/// The integrand is smooth and periodic, so the midpoint rule converges fast.
pub fn bessel_j0(x: f64) -> f64 {
    let steps = 64 + (x.abs() * 4.0).min(4096.0) as usize;
    let h = PI / steps as f64;
    (0..steps)
        .map(|i| (x * ((i as f64 + 0.5) * h).sin()).cos())
        .sum::<f64>()
        * h
        / PI
}

/// AR(1) correlation matching Jakes' autocorrelation `J0(2 pi fd T)` at lag `T`.
pub fn ar1_rho_for_doppler(doppler_hz: f64, interval_s: f64) -> f64 {
    bessel_j0(2.0 * PI * doppler_hz * interval_s)
}

/// Why a fading channel was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FadingError {
    #[error("AR(1) correlation {0} is outside [-1, 1]")]
    Rho(f64),
    #[error(
        "Jakes model needs a finite Doppler >= 0 Hz, an interval > 0 s and 1 to 4096 sinusoids"
    )]
    Jakes,
    #[error(transparent)]
    Dsp(#[from] DspError),
}

/// A seeded, slowly time-varying M x N Rayleigh channel.
#[derive(Debug, Clone)]
pub struct FadingChannel {
    pdp: PowerDelayProfile,
    inputs: usize,
    outputs: usize,
    process: FadingProcess,
    rng: ChaCha8Rng,
    /// AR(1) state, `[path][tap]`.
    gains: Vec<Cf32>,
    /// Jakes `(2 pi fd cos a, phi)` per `[path][tap][sinusoid]`.
    sinusoids: Vec<(f64, f64)>,
    /// Jakes: each sinusoid's current `(cos, sin)` of `w t + phi` ...
    phasors: Vec<(f64, f64)>,
    /// ... and its turn per update, `(cos, sin)` of `w T`: an update rotates
    /// (one complex multiply) instead of evaluating sin and cos again, which made
    /// a live 2x2 512-tap channel spend most of a core on its fading worker.
    rotations: Vec<(f64, f64)>,
    step: u64,
}

/// Updates between exact re-evaluations of the Jakes phasors (bounds the
/// rounding a long chain of rotations would accumulate).
const JAKES_RESYNC_STEPS: u64 = 1024;

impl FadingChannel {
    /// A channel with taps following `pdp` on every path, evolving by `process`.
    pub fn new(
        pdp: PowerDelayProfile,
        inputs: usize,
        outputs: usize,
        process: FadingProcess,
        seed: u64,
    ) -> Result<Self, FadingError> {
        check_ports(inputs, outputs)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let taps = inputs * outputs * pdp.delays().len();
        let mut gains = Vec::new();
        let mut sinusoids = Vec::new();
        match process {
            FadingProcess::Ar1 { rho } => {
                if !(-1.0..=1.0).contains(&rho) {
                    return Err(FadingError::Rho(rho));
                }
                for i in 0..taps {
                    let p = pdp.powers()[i % pdp.delays().len()];
                    gains.push(complex_gaussian(&mut rng, p));
                }
            }
            FadingProcess::Jakes {
                doppler_hz,
                interval_s,
                sinusoids: s,
            } => {
                let ok = doppler_hz.is_finite()
                    && doppler_hz >= 0.0
                    && interval_s.is_finite()
                    && interval_s > 0.0;
                if !ok || s == 0 || s > 4096 {
                    return Err(FadingError::Jakes);
                }
                for _ in 0..taps * s {
                    let angle = rng.gen_range(0.0..2.0 * PI);
                    let phase = rng.gen_range(0.0..2.0 * PI);
                    sinusoids.push((2.0 * PI * doppler_hz * angle.cos(), phase));
                }
            }
        }
        let (phasors, rotations) = match process {
            FadingProcess::Jakes { interval_s, .. } => (
                sinusoids
                    .iter()
                    .map(|&(_, phi)| (phi.cos(), phi.sin()))
                    .collect(),
                sinusoids
                    .iter()
                    .map(|&(w, _)| ((w * interval_s).cos(), (w * interval_s).sin()))
                    .collect(),
            ),
            FadingProcess::Ar1 { .. } => (Vec::new(), Vec::new()),
        };
        Ok(Self {
            pdp,
            inputs,
            outputs,
            process,
            rng,
            gains,
            sinusoids,
            phasors,
            rotations,
            step: 0,
        })
    }

    /// Response length in taps.
    pub fn len(&self) -> usize {
        self.pdp.len()
    }

    /// Always false (a profile has at least one tap).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of updates so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// A zeroed response buffer of the right shape for [`Self::write_response`].
    pub fn make_response(&self) -> MimoTaps {
        // Shape was validated in `new`, so this cannot fail.
        MimoTaps::zeros(self.inputs, self.outputs, self.len()).unwrap_or_else(|_| unreachable!())
    }

    /// Writes the current response into `out` (same shape); allocation-free.
    pub fn write_response(&self, out: &mut MimoTaps) -> Result<(), DspError> {
        if (out.inputs(), out.outputs()) != (self.inputs, self.outputs) {
            return Err(DspError::ShapeMismatch {
                expected: (self.inputs, self.outputs),
                got: (out.inputs(), out.outputs()),
            });
        }
        let ntaps = self.pdp.delays().len();
        for path in 0..self.inputs * self.outputs {
            let resp = out.path_mut(path / self.inputs, path % self.inputs);
            resp.clear();
            resp.resize(self.pdp.len(), Cf32::new(0.0, 0.0));
            for (k, &d) in self.pdp.delays().iter().enumerate() {
                resp[d] += self.gain(path * ntaps + k, self.pdp.powers()[k]);
            }
        }
        Ok(())
    }

    fn gain(&self, tap: usize, power: f32) -> Cf32 {
        match self.process {
            FadingProcess::Ar1 { .. } => self.gains[tap],
            FadingProcess::Jakes { sinusoids: s, .. } => {
                let (mut re, mut im) = (0.0, 0.0);
                for &(c, sn) in &self.phasors[tap * s..(tap + 1) * s] {
                    re += c;
                    im += sn;
                }
                let scale = (f64::from(power) / s as f64).sqrt();
                Cf32::new((re * scale) as f32, (im * scale) as f32)
            }
        }
    }

    /// Moves one update interval forward.
    pub fn advance(&mut self) {
        self.step += 1;
        if let FadingProcess::Jakes { interval_s, .. } = self.process {
            if self.step.is_multiple_of(JAKES_RESYNC_STEPS) {
                let t = self.step as f64 * interval_s;
                for (p, &(w, phi)) in self.phasors.iter_mut().zip(&self.sinusoids) {
                    let arg = w * t + phi;
                    *p = (arg.cos(), arg.sin());
                }
            } else {
                for (p, &(rc, rs)) in self.phasors.iter_mut().zip(&self.rotations) {
                    *p = (p.0 * rc - p.1 * rs, p.0 * rs + p.1 * rc);
                }
            }
        }
        if let FadingProcess::Ar1 { rho } = self.process {
            let innov = (1.0 - rho * rho).max(0.0).sqrt() as f32;
            let ntaps = self.pdp.delays().len();
            for (i, g) in self.gains.iter_mut().enumerate() {
                let w = complex_gaussian(&mut self.rng, self.pdp.powers()[i % ntaps]);
                *g = *g * rho as f32 + w * innov;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rotated phasors stay on the directly evaluated `exp(j(w t + phi))`
    /// over thousands of updates, across the exact re-evaluations.
    #[test]
    fn jakes_rotation_tracks_direct_evaluation() {
        let pdp = PowerDelayProfile::exponential(4, 1, 1.0).unwrap();
        let process = FadingProcess::Jakes {
            doppler_hz: 300.0,
            interval_s: 1.6e-3,
            sinusoids: 8,
        };
        let mut ch = FadingChannel::new(pdp, 2, 1, process, 9).unwrap();
        let mut worst: f64 = 0.0;
        for _ in 0..3000 {
            ch.advance();
            let t = ch.step as f64 * 1.6e-3;
            for (&(c, s), &(w, phi)) in ch.phasors.iter().zip(&ch.sinusoids) {
                let arg = w * t + phi;
                worst = worst.max((c - arg.cos()).abs()).max((s - arg.sin()).abs());
            }
        }
        assert!(worst < 1e-9, "drift {worst}");
    }

    #[test]
    fn bessel_j0_known_values() {
        assert!((bessel_j0(0.0) - 1.0).abs() < 1e-12);
        assert!((bessel_j0(1.0) - 0.765_197_686_557_966_6).abs() < 1e-9);
        assert!((bessel_j0(2.404_825_557_695_773).abs()) < 1e-9);
        assert!((bessel_j0(10.0) + 0.245_935_764_451_348_3).abs() < 1e-9);
    }

    #[test]
    fn ar1_is_seeded_correlated_and_keeps_power() {
        let pdp = PowerDelayProfile::exponential(3, 1, 3.0).unwrap();
        let process = FadingProcess::Ar1 { rho: 0.99 };
        let mut a = FadingChannel::new(pdp.clone(), 2, 2, process, 5).unwrap();
        let b = FadingChannel::new(pdp.clone(), 2, 2, process, 5).unwrap();
        let (mut ra, mut rb) = (a.make_response(), b.make_response());
        a.write_response(&mut ra).unwrap();
        b.write_response(&mut rb).unwrap();
        assert_eq!(ra, rb, "same seed, same channel");
        let first = ra.clone();
        a.advance();
        a.write_response(&mut ra).unwrap();
        assert_ne!(ra, first, "it moves");
        let diff: f32 = ra
            .paths()
            .iter()
            .flatten()
            .zip(first.paths().iter().flatten())
            .map(|(x, y)| (x - y).norm_sqr())
            .sum();
        assert!(diff < 0.2 * 4.0, "but slowly: {diff}");
        // Long-run mean power of the first tap stays near its profile power.
        let mut power = 0.0f64;
        let steps = 5000;
        for _ in 0..steps {
            a.advance();
            a.write_response(&mut ra).unwrap();
            power += f64::from(ra.path(1, 0)[0].norm_sqr());
        }
        let mean = power / f64::from(steps);
        assert!((mean - f64::from(pdp.powers()[0])).abs() < 0.25, "{mean}");
    }

    #[test]
    fn jakes_has_unit_power_and_bad_parameters_are_refused() {
        let pdp = PowerDelayProfile::from_linear(vec![0], vec![1.0]).unwrap();
        let process = FadingProcess::Jakes {
            doppler_hz: 100.0,
            interval_s: 1e-3,
            sinusoids: 64,
        };
        let mut ch = FadingChannel::new(pdp.clone(), 1, 1, process, 1).unwrap();
        let mut r = ch.make_response();
        let mut power = 0.0f64;
        for _ in 0..4000 {
            ch.write_response(&mut r).unwrap();
            power += f64::from(r.path(0, 0)[0].norm_sqr());
            ch.advance();
        }
        assert!((power / 4000.0 - 1.0).abs() < 0.3, "{}", power / 4000.0);
        let bad = FadingProcess::Jakes {
            doppler_hz: f64::NAN,
            interval_s: 1e-3,
            sinusoids: 8,
        };
        assert_eq!(
            FadingChannel::new(pdp.clone(), 1, 1, bad, 1).unwrap_err(),
            FadingError::Jakes
        );
        assert_eq!(
            FadingChannel::new(pdp, 1, 1, FadingProcess::Ar1 { rho: 1.5 }, 1).unwrap_err(),
            FadingError::Rho(1.5)
        );
    }
}
