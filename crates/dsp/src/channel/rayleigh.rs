//! Power-delay profiles and i.i.d. Rayleigh tap draws.

use radiohost_iq::Cf32;
use rand::Rng;
use rand_distr::StandardNormal;

use crate::taps::{MimoTaps, MAX_TAPS};
use crate::DspError;

/// Mean power of each tap at an integer sample delay, normalised to unit total power.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerDelayProfile {
    delays: Vec<usize>,
    powers: Vec<f32>,
}

/// Why a power-delay profile was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PdpError {
    #[error("a power-delay profile needs at least one tap")]
    Empty,
    #[error("{delays} delays but {powers} powers")]
    Lengths { delays: usize, powers: usize },
    #[error("delay {0} is beyond the longest response ({MAX_TAPS} taps)")]
    Delay(usize),
    #[error("tap powers must be finite and >= 0 with a positive sum")]
    Power,
}

impl PowerDelayProfile {
    /// Taps at `delays` with powers in dB (relative), normalised to unit total power.
    pub fn from_db(delays: Vec<usize>, powers_db: &[f32]) -> Result<Self, PdpError> {
        let powers: Vec<f32> = powers_db.iter().map(|db| 10f32.powf(db / 10.0)).collect();
        Self::from_linear(delays, powers)
    }

    /// Taps at `delays` with linear powers, normalised to unit total power.
    pub fn from_linear(delays: Vec<usize>, powers: Vec<f32>) -> Result<Self, PdpError> {
        if delays.is_empty() {
            return Err(PdpError::Empty);
        }
        if delays.len() != powers.len() {
            return Err(PdpError::Lengths {
                delays: delays.len(),
                powers: powers.len(),
            });
        }
        if let Some(&d) = delays.iter().find(|&&d| d >= MAX_TAPS) {
            return Err(PdpError::Delay(d));
        }
        let total: f32 = powers.iter().sum();
        if powers.iter().any(|p| !p.is_finite() || *p < 0.0) || !(total > 0.0 && total.is_finite())
        {
            return Err(PdpError::Power);
        }
        let powers = powers.iter().map(|p| p / total).collect();
        Ok(Self { delays, powers })
    }

    /// `taps` taps `spacing` samples apart whose power falls by `decay_db` per tap.
    pub fn exponential(taps: usize, spacing: usize, decay_db: f32) -> Result<Self, PdpError> {
        let spacing = spacing.max(1);
        let delays = (0..taps).map(|i| i.saturating_mul(spacing)).collect();
        let db: Vec<f32> = (0..taps).map(|i| -decay_db * i as f32).collect();
        Self::from_db(delays, &db)
    }

    /// Tap delays in samples.
    pub fn delays(&self) -> &[usize] {
        &self.delays
    }

    /// Normalised linear tap powers (sum 1).
    pub fn powers(&self) -> &[f32] {
        &self.powers
    }

    /// Response length the profile needs (largest delay + 1).
    pub fn len(&self) -> usize {
        self.delays.iter().max().map_or(1, |d| d + 1)
    }

    /// Always false: a profile has at least one tap.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// A circularly symmetric complex Gaussian sample of the given mean power.
pub(crate) fn complex_gaussian(rng: &mut impl Rng, power: f32) -> Cf32 {
    let s = (power / 2.0).sqrt();
    let re: f32 = rng.sample(StandardNormal);
    let im: f32 = rng.sample(StandardNormal);
    Cf32::new(re * s, im * s)
}

/// Draws an M x N channel whose every path has independent Rayleigh taps following `pdp`
/// (each tap CN(0, p_k), so each path has unit mean power).
pub fn draw_rayleigh(
    pdp: &PowerDelayProfile,
    inputs: usize,
    outputs: usize,
    rng: &mut impl Rng,
) -> Result<MimoTaps, DspError> {
    let mut taps = MimoTaps::zeros(inputs, outputs, pdp.len())?;
    for n in 0..outputs {
        for m in 0..inputs {
            let path = taps.path_mut(n, m);
            for (&d, &p) in pdp.delays.iter().zip(&pdp.powers) {
                path[d] += complex_gaussian(rng, p);
            }
        }
    }
    Ok(taps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn exponential_profile_is_normalised_and_decays() {
        let pdp = PowerDelayProfile::exponential(4, 2, 3.0).unwrap();
        assert_eq!(pdp.delays(), &[0, 2, 4, 6]);
        assert!((pdp.powers().iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(pdp.powers().windows(2).all(|w| w[1] < w[0]));
        assert_eq!(pdp.len(), 7);
    }

    #[test]
    fn bad_profiles_are_refused() {
        assert_eq!(
            PowerDelayProfile::from_linear(vec![], vec![]),
            Err(PdpError::Empty)
        );
        assert_eq!(
            PowerDelayProfile::from_linear(vec![0], vec![-1.0]),
            Err(PdpError::Power)
        );
        assert_eq!(
            PowerDelayProfile::from_linear(vec![0], vec![0.0]),
            Err(PdpError::Power)
        );
        assert!(matches!(
            PowerDelayProfile::from_linear(vec![0, 1], vec![1.0]),
            Err(PdpError::Lengths { .. })
        ));
        assert!(matches!(
            PowerDelayProfile::from_linear(vec![MAX_TAPS], vec![1.0]),
            Err(PdpError::Delay(_))
        ));
    }

    #[test]
    fn rayleigh_taps_have_the_profile_power_on_average() {
        let pdp = PowerDelayProfile::from_db(vec![0, 3], &[0.0, -3.0]).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut power = [0.0f64; 4];
        let draws = 4000;
        for _ in 0..draws {
            let t = draw_rayleigh(&pdp, 1, 1, &mut rng).unwrap();
            for (acc, v) in power.iter_mut().zip(t.path(0, 0)) {
                *acc += f64::from(v.norm_sqr());
            }
        }
        let mean: Vec<f64> = power.iter().map(|p| p / draws as f64).collect();
        assert!(
            (mean[0] - f64::from(pdp.powers()[0])).abs() < 0.05,
            "{mean:?}"
        );
        assert!(
            (mean[3] - f64::from(pdp.powers()[1])).abs() < 0.05,
            "{mean:?}"
        );
        assert_eq!((mean[1], mean[2]), (0.0, 0.0));
    }
}
