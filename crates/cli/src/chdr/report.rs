//! Printing, plotting and verifying a streaming session.

use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use radiohost_chdr::radio::RadioReport;
use radiohost_chdr::rx::test_signal;
use radiohost_chdr::stats::{LatencyHistogram, LatencySummary};
use radiohost_chdr::streamer::StreamerReport;
use radiohost_dsp::MimoTaps;
use radiohost_iq::{Cf32, Ci16};

fn us(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e3)
}

fn row(name: &str, s: &LatencySummary) -> String {
    format!(
        "  {name:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        s.count,
        us(s.min_ns),
        us(s.median_ns),
        us(s.p90_ns),
        us(s.p99_ns),
        us(s.p999_ns),
        us(s.max_ns)
    )
}

pub fn print_latency(streamer: &StreamerReport, radio: Option<&RadioReport>) {
    println!(
        "  {:<34} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "latency (us)", "packets", "min", "median", "p90", "p99", "p99.9", "max"
    );
    println!(
        "{}",
        row("RX->TX (kernel RX stamp -> sent)", &streamer.rx_to_tx)
    );
    println!(
        "{}",
        row("RX->TX (recv return -> sent)", &streamer.user_rx_to_tx)
    );
    if let Some(r) = radio {
        println!("{}", row("end-to-end (RX timestamp -> TX)", &r.end_to_end));
        println!(
            "  (end-to-end includes one packet duration, {} us, spent capturing the samples)",
            us(r.packet_duration_ns)
        );
    }
}

pub fn print_counts(s: &StreamerReport, radio: Option<&RadioReport>) {
    let c = &s.counters;
    println!(
        "  streamer: {} frames, {} RX datagrams, {} TX packets, {} fan-out copies",
        c.frames, c.rx_datagrams, c.tx_packets, c.fanout_packets
    );
    let gaps: u64 = s.reorder.iter().map(|r| r.missing).sum();
    let held: u64 = s.reorder.iter().map(|r| r.held).sum();
    let stale: u64 = s.reorder.iter().map(|r| r.stale).sum();
    let stalls: u64 = s.credit.iter().map(|c| c.stalls).sum();
    println!(
        "  RX sequence: {gaps} gaps (zero-filled {}), {held} reordered, {stale} stale; \
         flow control: {stalls} stalls; drops: {} host queue, {} send, {} unknown stream, {} malformed",
        c.zero_filled_packets, c.host_queue_drops, c.send_drops, c.unknown_stream, c.malformed
    );
    if let Some(p) = &s.pin_error {
        println!("  note: {p}");
    }
    if let Some(r) = radio {
        let (mut u, mut l, mut sq, mut o) = (0, 0, 0, 0);
        for t in &r.tx {
            u += t.underruns;
            l += t.late_packets;
            sq += t.seq_errors;
            o += t.overflows;
        }
        let zeros: u64 = r.tx.iter().map(|t| t.zeros_played).sum();
        let played: u64 = r.tx.iter().map(|t| t.samples_played).sum();
        println!(
            "  radio: {} RX packets; TX played {played} samples + {zeros} zero-fill; \
             events U={u} L={l} S={sq} O={o}",
            r.rx_packets
        );
    }
}

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

pub fn print_verification(v: &Verification) {
    if v.passed() {
        println!(
            "  verified: {} output samples equal the expected output (max error {} LSB), none lost or duplicated",
            v.checked, v.max_error_lsb
        );
    } else {
        println!(
            "  VERIFICATION FAILED: {} of {} checked samples differ ({} were zero-filled), length/continuity ok: {}, first: {:?}",
            v.mismatches, v.checked, v.zero_filled, v.length_ok, v.first_mismatch
        );
    }
}

/// Two panels: the per-packet RX->TX delay histogram and the end-to-end one.
pub fn plot(
    path: &Path,
    title: &str,
    rx_to_tx: &LatencyHistogram,
    e2e: Option<&LatencyHistogram>,
) -> Result<()> {
    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let panels = root.split_evenly((2, 1));
    let series = [
        (
            "per-packet RX->TX processing delay (kernel RX timestamp -> TX sent)",
            Some(rx_to_tx),
        ),
        (
            "end-to-end latency (RX timestamp -> TX arrival at the radio)",
            e2e,
        ),
    ];
    for (area, (caption, hist)) in panels.iter().zip(series) {
        let Some(hist) = hist else { continue };
        let buckets = hist.log_buckets();
        if buckets.is_empty() {
            continue;
        }
        let xs: Vec<(f64, f64)> = buckets
            .iter()
            .map(|&(v, c)| (v as f64 / 1e3, c as f64))
            .collect();
        let x_lo = xs.first().map_or(0.01, |p| p.0).max(0.01) * 0.8;
        let x_hi = xs.last().map_or(1.0, |p| p.0) * 1.25;
        let y_hi = xs.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("microseconds (log)")
            .y_desc("packets per bucket")
            .draw()?;
        chart.draw_series(LineSeries::new(xs.iter().copied(), &BLUE))?;
        chart.draw_series(PointSeries::of_element(
            xs.iter().copied(),
            3,
            &BLUE,
            &|c, s, st| Circle::new(c, s, st.filled()),
        ))?;
    }
    root.present()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
