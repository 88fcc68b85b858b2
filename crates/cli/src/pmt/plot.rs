//! SVG plots for `radiohost pmt compare` (plotters).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use radiohost_pmt::sim::RunOutcome;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn e<E: std::fmt::Display>(err: E) -> anyhow::Error {
    anyhow!("plotting failed: {err}")
}

/// Bytes delivered in order versus time, per protocol and receiver (first run).
pub fn bytes_vs_time(path: &Path, runs: &[(&'static str, RunOutcome)], links: &str) -> Result<()> {
    let root = SVGBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let t_max = runs
        .iter()
        .flat_map(|(_, o)| {
            o.receivers
                .iter()
                .flat_map(|r| r.timeline.last().map(|p| p.0))
        })
        .fold(1.0, f64::max);
    let b_max = runs
        .iter()
        .flat_map(|(_, o)| o.receivers.iter().map(|r| r.bytes))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1e3;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("bytes delivered vs time ({links})"),
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_max * 1.02, 0.0..b_max * 1.05)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("kB delivered in order")
        .draw()
        .map_err(e)?;
    for (pi, (proto, out)) in runs.iter().enumerate() {
        for (ri, r) in out.receivers.iter().enumerate() {
            let color = PALETTE[ri % PALETTE.len()];
            let style = match pi {
                0 => color.stroke_width(3),
                1 => color.mix(0.6).stroke_width(2),
                _ => color.mix(0.35).stroke_width(1),
            };
            // A step plot: in-order bytes stay flat across a hole until it is repaired.
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(2 * r.timeline.len());
            for &(t, b) in &r.timeline {
                if let Some(&(_, prev)) = pts.last() {
                    pts.push((t, prev));
                }
                pts.push((t, b as f64 / 1e3));
            }
            chart
                .draw_series(LineSeries::new(pts, style))
                .map_err(e)?
                .label(format!("{proto} rx{ri}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// PMT's group periods (T, T_max) and per-receiver smoothed RTT, above TCP Reno's
/// congestion window per receiver (first run).
pub fn groups_vs_cwnd(path: &Path, runs: &[(&'static str, RunOutcome)]) -> Result<()> {
    let root = SVGBackend::new(path, (1000, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let (top, bottom) = root.split_vertically(400);
    if let Some((_, pmt)) = runs.iter().find(|(p, _)| *p == "pmt") {
        let t_end = pmt.trace.last().map_or(1.0, |r| r.t).max(1.0);
        let y_max = pmt
            .trace
            .iter()
            .flat_map(|r| r.periods.iter().chain(r.srtt.iter()))
            .cloned()
            .fold(0.01, f64::max)
            * 1e3;
        let mut chart = ChartBuilder::on(&top)
            .caption(
                "PMT: group periods T, T_max and smoothed RTT",
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_end, 0.0..y_max * 1.1)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("ms")
            .draw()
            .map_err(e)?;
        let t: Vec<(f64, f64)> = pmt
            .trace
            .iter()
            .map(|r| (r.t, r.periods.first().copied().unwrap_or(0.0) * 1e3))
            .collect();
        let tmax: Vec<(f64, f64)> = pmt
            .trace
            .iter()
            .map(|r| (r.t, r.periods.last().copied().unwrap_or(0.0) * 1e3))
            .collect();
        chart
            .draw_series(LineSeries::new(t, BLACK.stroke_width(2)))
            .map_err(e)?
            .label("T (fast group)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
        chart
            .draw_series(LineSeries::new(tmax, BLACK.mix(0.4).stroke_width(2)))
            .map_err(e)?
            .label("T_max (slowest group)")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4).stroke_width(2))
            });
        let n = pmt.trace.first().map_or(0, |r| r.srtt.len());
        for i in 0..n {
            let c = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = pmt.trace.iter().map(|r| (r.t, r.srtt[i] * 1e3)).collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(1)))
                .map_err(e)?
                .label(format!("srtt rx{i}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
    }
    let mut chart_bottom = ChartBuilder::on(&bottom);
    chart_bottom
        .caption(
            "kernel TCP Reno: congestion window (TCP_INFO)",
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60);
    match runs.iter().find(|(p, _)| *p == "tcp-reno") {
        Some((_, tcp)) if tcp.cwnd.iter().any(|c| !c.is_empty()) => {
            let t_end = tcp
                .cwnd
                .iter()
                .flat_map(|c| c.last().map(|p| p.0))
                .fold(1.0, f64::max);
            let c_max = tcp
                .cwnd
                .iter()
                .flat_map(|c| c.iter().map(|p| p.1))
                .max()
                .unwrap_or(1)
                .max(1);
            let mut chart = chart_bottom
                .build_cartesian_2d(0.0..t_end, 0u32..c_max + c_max / 10 + 1)
                .map_err(e)?;
            chart
                .configure_mesh()
                .x_desc("seconds")
                .y_desc("cwnd (segments)")
                .draw()
                .map_err(e)?;
            for (i, c) in tcp.cwnd.iter().enumerate() {
                let col = PALETTE[i % PALETTE.len()];
                chart
                    .draw_series(LineSeries::new(c.iter().copied(), col.stroke_width(2)))
                    .map_err(e)?
                    .label(format!("cwnd rx{i}"))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        _ => {
            bottom
                .draw(&Text::new(
                    "TCP baseline not run",
                    (400, 200),
                    ("sans-serif", 20),
                ))
                .map_err(e)?;
        }
    }
    root.present().map_err(e)?;
    Ok(())
}
