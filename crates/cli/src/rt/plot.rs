//! SVG plot of latency histograms: samples per bin (log) against latency (µs,
//! log), one line per run. Log-log keeps both the body (µs) and the tail (ms)
//! readable on one plot.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use radiohost_rt::probe::LatencyRow;
use radiohost_rt::LatencyHistogram;

/// Bins per decade of latency.
const BINS_PER_DECADE: f64 = 20.0;

/// Legend label of a row.
pub fn series_label(r: &LatencyRow) -> String {
    format!("{} {} {}", r.mode, r.policy, r.load)
}

/// Re-bins HDR buckets into log-spaced bins starting at `lo_us`; returns
/// `(bin centre µs, count)` for every bin up to `bins`.
fn rebin(h: &LatencyHistogram, lo_us: f64, bins: usize) -> Vec<(f64, u64)> {
    let mut counts = vec![0u64; bins];
    for (v, c) in h.buckets() {
        let us = (v as f64 / 1000.0).max(lo_us);
        let i = ((us / lo_us).log10() * BINS_PER_DECADE) as usize;
        counts[i.min(bins - 1)] += c;
    }
    counts
        .into_iter()
        .enumerate()
        .map(|(i, c)| (lo_us * 10f64.powf((i as f64 + 0.5) / BINS_PER_DECADE), c))
        .collect()
}

/// Splits bins into runs of non-empty ones, so lines do not bridge gaps.
fn runs(bins: &[(f64, u64)]) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for &(x, c) in bins {
        if c == 0 {
            if out.last().is_some_and(|r| !r.is_empty()) {
                out.push(Vec::new());
            }
        } else if let Some(r) = out.last_mut() {
            r.push((x, c as f64));
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// Writes the plot.
pub fn histogram_svg(
    path: &Path,
    title: &str,
    series: &[(String, &LatencyHistogram)],
) -> Result<()> {
    let nonempty = || series.iter().filter(|(_, h)| !h.is_empty());
    let min_us = nonempty()
        .map(|(_, h)| h.summary().min_ns as f64 / 1000.0)
        .fold(f64::INFINITY, f64::min);
    let max_us = nonempty()
        .map(|(_, h)| h.summary().max_ns as f64 / 1000.0)
        .fold(0.0, f64::max);
    // Whole decades around the data, at least 1 µs .. 10 µs.
    let lo_us = if min_us.is_finite() {
        10f64.powf(min_us.max(0.1).log10().floor())
    } else {
        1.0
    };
    let hi_us = 10f64.powf(max_us.max(lo_us * 10.0).log10().ceil());
    let bins = ((hi_us / lo_us).log10() * BINS_PER_DECADE).ceil().max(1.0) as usize;
    let binned: Vec<(String, Vec<(f64, u64)>)> = series
        .iter()
        .map(|(l, h)| (l.clone(), rebin(h, lo_us, bins)))
        .collect();
    let y_max = binned
        .iter()
        .flat_map(|(_, b)| b.iter().map(|&(_, c)| c))
        .max()
        .unwrap_or(1)
        .max(10) as f64
        * 2.0;
    let err = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo_us..hi_us).log_scale(), (0.8f64..y_max).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("latency (us, log)")
        .y_desc(format!("samples per bin ({BINS_PER_DECADE} bins/decade)"))
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (label, bins)) in binned.iter().enumerate() {
        let color = colors[i % colors.len()];
        let mut first = true;
        for run in runs(bins) {
            let drawn = chart
                .draw_series(LineSeries::new(run.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?;
            if first {
                drawn
                    .label(label.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
                first = false;
            }
            chart
                .draw_series(run.into_iter().map(|p| Circle::new(p, 2, color.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
