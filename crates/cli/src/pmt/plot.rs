//! SVG plots for `radiohost pmt compare`.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::SeriesLabelPosition;
use radiohost_pmt::sim::RunOutcome;

use crate::plot::{color, write_panels, Axis, LineChart, Series};

/// Bytes delivered in order versus time, per protocol and receiver (first run).
pub fn bytes_vs_time(path: &Path, runs: &[(&'static str, RunOutcome)], links: &str) -> Result<()> {
    let receivers = || runs.iter().flat_map(|(_, o)| o.receivers.iter());
    let t_max = receivers()
        .flat_map(|r| r.timeline.last().map(|p| p.0))
        .fold(1.0, f64::max);
    let kb_max = receivers().map(|r| r.bytes).max().unwrap_or(1).max(1) as f64 / 1e3;
    let mut chart = LineChart::new(
        format!("bytes delivered vs time ({links})"),
        Axis::linear("seconds", 0.0..t_max * 1.02),
        Axis::linear("kB delivered in order", 0.0..kb_max * 1.05),
    );
    chart.legend = SeriesLabelPosition::LowerRight;
    for (pi, (proto, out)) in runs.iter().enumerate() {
        // The first protocol boldest, the baselines fainter.
        let (width, opacity) = [(3, 1.0), (2, 0.6), (1, 0.35)][pi.min(2)];
        for (ri, r) in out.receivers.iter().enumerate() {
            // A step plot: in-order bytes stay flat across a hole until it is repaired.
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(2 * r.timeline.len());
            for &(t, b) in &r.timeline {
                if let Some(&(_, prev)) = pts.last() {
                    pts.push((t, prev));
                }
                pts.push((t, b as f64 / 1e3));
            }
            let s = Series::new(format!("{proto} rx{ri}"), pts, color(ri));
            chart.push(s.width(width).opacity(opacity).markers(0));
        }
    }
    chart.write(path, (1000, 600))
}

/// PMT's group periods (T, T_max) and per-receiver smoothed RTT, above TCP Reno's
/// congestion window per receiver (first run).
pub fn groups_vs_cwnd(path: &Path, runs: &[(&'static str, RunOutcome)]) -> Result<()> {
    let mut panels = Vec::new();
    if let Some((_, pmt)) = runs.iter().find(|(p, _)| *p == "pmt") {
        let tr = &pmt.trace;
        let t_end = tr.last().map_or(1.0, |r| r.t).max(1.0);
        let y_max = tr
            .iter()
            .flat_map(|r| r.periods.iter().chain(r.srtt.iter()))
            .fold(0.01f64, |m, &v| m.max(v))
            * 1e3;
        let mut chart = LineChart::new(
            "PMT: group periods T, T_max and smoothed RTT",
            Axis::linear("seconds", 0.0..t_end),
            Axis::linear("ms", 0.0..y_max * 1.1),
        );
        let period = |last: bool| -> Vec<(f64, f64)> {
            let pick = |p: &[f64]| if last { p.last() } else { p.first() }.copied();
            tr.iter()
                .map(|r| (r.t, pick(&r.periods).unwrap_or(0.0) * 1e3))
                .collect()
        };
        let black = color(7);
        chart.push(Series::new("T (fast group)", period(false), black).markers(0));
        let tmax = Series::new("T_max (slowest group)", period(true), black);
        chart.push(tmax.opacity(0.4).markers(0));
        for i in 0..tr.first().map_or(0, |r| r.srtt.len()) {
            let pts = tr.iter().map(|r| (r.t, r.srtt[i] * 1e3)).collect();
            chart.push(
                Series::new(format!("srtt rx{i}"), pts, color(i))
                    .width(1)
                    .markers(0),
            );
        }
        panels.push(chart);
    }
    let cwnd = runs
        .iter()
        .find(|(p, _)| *p == "tcp-reno")
        .map(|(_, tcp)| &tcp.cwnd)
        .filter(|c| c.iter().any(|c| !c.is_empty()));
    let points = || cwnd.into_iter().flatten().flatten();
    let t_end = points().map(|p| p.0).fold(1.0, f64::max);
    let c_max = points().map(|p| p.1).max().unwrap_or(1).max(1) as f64;
    let title = match cwnd {
        Some(_) => "kernel TCP Reno: congestion window (TCP_INFO)",
        None => "kernel TCP Reno: congestion window (TCP baseline not run)",
    };
    let mut chart = LineChart::new(
        title,
        Axis::linear("seconds", 0.0..t_end),
        Axis::linear("cwnd (segments)", 0.0..c_max * 1.1 + 1.0),
    );
    for (i, c) in cwnd.into_iter().flatten().enumerate() {
        let pts = c.iter().map(|&(t, w)| (t, f64::from(w))).collect();
        chart.push(Series::new(format!("cwnd rx{i}"), pts, color(i)).markers(0));
    }
    panels.push(chart);
    write_panels(path, (1000, 800), None, &panels)
}
