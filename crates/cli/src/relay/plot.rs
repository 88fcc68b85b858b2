//! The on-time-vs-delta curve of `radiohost relay run --svg`.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use plotters::prelude::*;

use radiohost_relay::sweep::{Condition, SweepRow as Row};

fn condition_label(load: bool, rt: bool) -> String {
    Condition { load, rt }.label()
}

/// Bursts not on time (%) against delta, both log scales: the tail that
/// decides a deployment (99.9% on time = 0.1% not) stays readable.
pub fn on_time_svg(path: &Path, rows: &[Row], target: f64) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
    let lo = rows
        .iter()
        .map(|r| r.delta_us)
        .fold(f64::INFINITY, f64::min);
    let hi = rows.iter().map(|r| r.delta_us).fold(0.0, f64::max);
    if !lo.is_finite() {
        bail!("nothing to plot");
    }
    // x is log2(delta): labels land on readable values on any sweep.
    let (lo, hi) = ((lo / 1.3).log2(), (hi * 1.3).max(lo * 2.0).log2());
    // Floor: half a burst of the largest run (a run with none missed sits there).
    let bursts = rows.iter().map(|r| r.bursts).max().unwrap_or(1).max(1);
    let floor = 50.0 / bursts as f64;
    let not_on_time = |r: &Row| (100.0 * (1.0 - r.on_time_fraction)).max(floor);
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "cooperative relay: bursts not on time vs delta",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(lo..hi, (floor.min(100.0 - target) * 0.8..150.0).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_labels(8)
        .y_labels(8)
        .x_label_formatter(&|v| format!("{:.0}", v.exp2()))
        .y_label_formatter(&|v| format!("{v}"))
        .x_desc("delta after RX timestamp (us, log)")
        .y_desc(format!(
            "bursts not on time (%, log; {floor:.3} = none of {bursts})"
        ))
        .draw()
        .map_err(|e| err(&e))?;
    let miss_target = 100.0 - target;
    chart
        .draw_series(LineSeries::new(
            vec![(lo, miss_target), (hi, miss_target)],
            BLACK.mix(0.5).stroke_width(1),
        ))
        .map_err(|e| err(&e))?
        .label(format!("target: {target}% on time"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
    let colors = [BLUE, RED, GREEN, MAGENTA];
    let mut conditions: Vec<(bool, bool)> = rows.iter().map(|r| (r.load, r.rt)).collect();
    conditions.dedup();
    for (i, (load, rt)) in conditions.into_iter().enumerate() {
        let color = colors[i % colors.len()];
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.load == load && r.rt == rt)
            .map(|r| (r.delta_us.log2(), not_on_time(r)))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(condition_label(load, rt))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
