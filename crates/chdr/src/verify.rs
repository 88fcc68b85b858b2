//! Output verification of a streaming session: what each TX port put on the
//! air against the channel applied to the test signal the RX ports captured.

use radiohost_dsp::MimoTaps;
use radiohost_iq::{Cf32, Ci16};

use crate::radio::RadioReport;
use crate::rx::test_signal;

/// One differing sample: TX port, sample index, what was sent, what was expected.
#[derive(Debug, serde::Serialize)]
pub struct Mismatch {
    pub port: usize,
    pub index: usize,
    pub got: (i16, i16),
    pub want: (i16, i16),
}

/// Result of checking what the radio transmitted against the expected output.
#[derive(Debug, Default, serde::Serialize)]
pub struct Verification {
    pub checked: u64,
    pub mismatches: u64,
    /// Mismatches where the radio sent zeros (late or lost packets replaced).
    pub zero_filled: u64,
    pub max_error_lsb: i32,
    pub first_mismatch: Option<Mismatch>,
    pub length_ok: bool,
}

impl Verification {
    pub fn passed(&self) -> bool {
        self.length_ok && self.mismatches == 0 && self.checked > 0
    }
}

/// Compare each TX port's recording with `taps` applied to the test signal the
/// RX ports captured (identity taps for pass-through). Every `stride`-th sample
/// is checked (a prime stride reaches every position within a packet).
pub fn verify(
    radio: &RadioReport,
    taps: &MimoTaps,
    offset_ticks: u64,
    input_len: usize,
    stride: usize,
    tolerance_lsb: i32,
) -> Verification {
    verify_schedule(
        radio,
        std::slice::from_ref(taps),
        usize::MAX,
        offset_ticks,
        input_len,
        stride,
        tolerance_lsb,
    )
}

/// Like [`verify`] for a time-varying channel: input sample `t` (counted from
/// the first RX sample) is filtered wholly by `schedule[t / samples_per_response]`
/// (the last entry from then on), the identity a staggered swap guarantees.
pub fn verify_schedule(
    radio: &RadioReport,
    schedule: &[MimoTaps],
    samples_per_response: usize,
    offset_ticks: u64,
    input_len: usize,
    stride: usize,
    tolerance_lsb: i32,
) -> Verification {
    let per = samples_per_response.max(1);
    let last = schedule.len().saturating_sub(1);
    let mut v = Verification {
        length_ok: true,
        ..Default::default()
    };
    for (n, rec) in radio.recordings.iter().enumerate() {
        let Some(origin) = rec.origin else {
            v.length_ok = false;
            continue;
        };
        if rec.samples.len() < input_len || !rec.discontinuities.is_empty() {
            v.length_ok = false;
        }
        let start = origin.saturating_sub(offset_ticks);
        for i in (0..input_len.min(rec.samples.len())).step_by(stride.max(1)) {
            let mut acc = Cf32::new(0.0, 0.0);
            for m in 0..schedule[0].inputs() {
                let len = schedule[0].path(n, m).len();
                for j in 0..len.min(i + 1) {
                    let taps = &schedule[((i - j) / per).min(last)];
                    let h = taps.path(n, m).get(j).copied().unwrap_or_default();
                    acc += h * test_signal(m as u16, start + (i - j) as u64).to_cf32();
                }
            }
            let want = Ci16::from_cf32(acc);
            let got = rec.samples[i];
            v.checked += 1;
            let err = (got.re as i32 - want.re as i32)
                .abs()
                .max((got.im as i32 - want.im as i32).abs());
            v.max_error_lsb = v.max_error_lsb.max(err);
            if err > tolerance_lsb {
                v.mismatches += 1;
                if got == Ci16::default() {
                    v.zero_filled += 1;
                }
                if v.first_mismatch.is_none() {
                    v.first_mismatch = Some(Mismatch {
                        port: n,
                        index: i,
                        got: (got.re, got.im),
                        want: (want.re, want.im),
                    });
                }
            }
        }
    }
    v
}
