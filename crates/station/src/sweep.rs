//! The scheduling policies in the discrete-event simulator, swept over device and
//! radio-unit counts: what `radiohost station simulate` runs.

use crate::policy::POLICY_NAMES;
use crate::sim::{simulate, SimConfig, SimError, SimResult};
use std::sync::atomic::{AtomicBool, Ordering};

/// One sweep: every policy at every (devices, RUs) pair, the rest from `base`.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    pub policies: Vec<String>,
    pub devices: Vec<u32>,
    pub rus: Vec<u32>,
    pub base: SimConfig,
}

impl SweepConfig {
    /// Runs the sweep will make.
    pub fn runs(&self) -> usize {
        self.devices.len() * self.rus.len() * self.policies.len()
    }
}

/// Run the sweep, rows in (devices, RUs, policy) order; `progress` hears each run
/// before it starts. Once `stop` is set (Ctrl-C) no further run starts and the
/// rows so far return.
pub fn sweep(
    c: &SweepConfig,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<Vec<SimResult>, SimError> {
    if let Some(p) = c
        .policies
        .iter()
        .find(|p| !POLICY_NAMES.contains(&p.as_str()))
    {
        return Err(SimError::Config(format!(
            "unknown policy `{p}`: use lroc, frame, symbol, task, a comma list or all"
        )));
    }
    if c.base.frames_per_ru == 0 || c.runs() == 0 {
        return Err(SimError::Config(
            "frames, devices, RUs and policies must not be empty or 0".into(),
        ));
    }
    c.base.shape()?;
    let mut rows = Vec::with_capacity(c.runs());
    for &d in &c.devices {
        for &r in &c.rus {
            for p in &c.policies {
                if stop.load(Ordering::Relaxed) {
                    return Ok(rows);
                }
                progress(&format!("{p} {d} devices {r} RUs"));
                let cfg = SimConfig {
                    devices: d,
                    rus: r,
                    ..c.base.clone()
                };
                rows.push(simulate(p, &cfg)?);
            }
        }
    }
    Ok(rows)
}

/// Each row's P99.99 over LROC's at the same devices and RUs (`None` without a
/// LROC row or when LROC's is 0).
pub fn p9999_over_lroc(rows: &[SimResult], r: &SimResult) -> Option<f64> {
    rows.iter()
        .find(|x| x.policy == "lroc" && x.devices == r.devices && x.rus == r.rus)
        .map(|x| x.p9999_ms)
        .filter(|&l| l > 0.0)
        .map(|l| r.p9999_ms / l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sweep_rows_and_bad_input() {
        let base = SimConfig {
            antennas: 16,
            users: 4,
            data_num: 300,
            fft_size: 512,
            parts: 4,
            frames_per_ru: 20,
            ..SimConfig::default()
        };
        let c = SweepConfig {
            policies: vec!["lroc".into(), "frame".into()],
            devices: vec![2],
            rus: vec![1, 2],
            base,
        };
        let mut heard = 0;
        let rows = sweep(&c, &AtomicBool::new(false), |_| heard += 1).unwrap();
        assert_eq!((rows.len(), heard), (4, 4));
        // A stop during the first run: it finishes, no other starts.
        let stop = AtomicBool::new(false);
        let partial = sweep(&c, &stop, |_| stop.store(true, Ordering::Relaxed)).unwrap();
        assert_eq!(partial.len(), 1);
        assert!(rows.iter().all(|r| r.completed > 0));
        assert_eq!(p9999_over_lroc(&rows, &rows[0]), Some(1.0));
        let bad = SweepConfig {
            policies: vec!["fifo".into()],
            ..c.clone()
        };
        assert!(sweep(&bad, &AtomicBool::new(false), |_| ()).is_err());
        let mut zero = c;
        zero.base.frames_per_ru = 0;
        assert!(sweep(&zero, &AtomicBool::new(false), |_| ()).is_err());
    }
}
