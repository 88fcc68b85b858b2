//! SVG plot of latency histograms: count (log) against latency (µs), one
//! line per run.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use radiohost_rt::probe::LatencyRow;
use radiohost_rt::LatencyHistogram;

const BINS: usize = 120;

/// Legend label of a row.
pub fn series_label(r: &LatencyRow) -> String {
    format!("{} {} {}", r.mode, r.policy, r.load)
}

/// Re-bins HDR buckets into `BINS` linear bins over `[0, x_max_ns]`; samples
/// beyond land in the last bin.
fn rebin(h: &LatencyHistogram, x_max_ns: u64) -> Vec<(f64, u64)> {
    let width = (x_max_ns / BINS as u64).max(1);
    let mut bins = vec![0u64; BINS];
    for (v, c) in h.buckets() {
        bins[((v / width) as usize).min(BINS - 1)] += c;
    }
    bins.into_iter()
        .enumerate()
        .map(|(i, c)| (((i as u64 * width) + width / 2) as f64 / 1000.0, c))
        .collect()
}

/// Writes the plot. The x axis ends a little past the largest P99.9 (tails
/// beyond are folded into the last bin, whose count says how many).
pub fn histogram_svg(
    path: &Path,
    title: &str,
    series: &[(String, &LatencyHistogram)],
) -> Result<()> {
    let x_max_ns = series
        .iter()
        .map(|(_, h)| h.summary().p999_ns)
        .max()
        .unwrap_or(1000)
        .max(1000)
        * 3
        / 2;
    let binned: Vec<(String, Vec<(f64, u64)>)> = series
        .iter()
        .map(|(l, h)| (l.clone(), rebin(h, x_max_ns)))
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
        .build_cartesian_2d(0f64..x_max_ns as f64 / 1000.0, (0.8f64..y_max).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("latency (us)")
        .y_desc("samples per bin")
        .draw()
        .map_err(|e| err(&e))?;
    let colors = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    for (i, (label, bins)) in binned.iter().enumerate() {
        let color = colors[i % colors.len()];
        let pts: Vec<(f64, f64)> = bins
            .iter()
            .filter(|&&(_, c)| c > 0)
            .map(|&(x, c)| (x, c as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 2, color.filled())))
            .map_err(|e| err(&e))?;
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
