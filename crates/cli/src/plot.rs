//! One line-chart helper for every SVG plot of the binary: a command turns its
//! report into series of points; this draws axes, lines, markers and legend.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use radiohost_rt::LatencyHistogram;

/// Colours of successive series (colour-blind friendly, as matplotlib's).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(0, 0, 0),
];

/// The `i`-th colour of the shared palette.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One axis: its label, range and scale.
pub struct Axis {
    pub desc: String,
    pub range: Range<f64>,
    pub log: bool,
}

impl Axis {
    pub fn linear(desc: impl Into<String>, range: Range<f64>) -> Axis {
        Axis {
            desc: desc.into(),
            range,
            log: false,
        }
    }

    pub fn log(desc: impl Into<String>, range: Range<f64>) -> Axis {
        Axis {
            log: true,
            ..Axis::linear(desc, range)
        }
    }
}

/// One line: points in drawing order, a legend entry unless `label` is None.
pub struct Series {
    pub label: Option<String>,
    pub points: Vec<(f64, f64)>,
    pub color: RGBColor,
    pub opacity: f64,
    pub width: u32,
    /// Radius of a dot at every point; 0 draws none.
    pub markers: u32,
}

impl Series {
    /// A 2-px line in `color` with dots of radius 3.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>, color: RGBColor) -> Series {
        Series {
            label: Some(label.into()),
            points,
            color,
            opacity: 1.0,
            width: 2,
            markers: 3,
        }
    }

    pub fn width(mut self, width: u32) -> Series {
        self.width = width;
        self
    }

    pub fn markers(mut self, radius: u32) -> Series {
        self.markers = radius;
        self
    }

    pub fn opacity(mut self, opacity: f64) -> Series {
        self.opacity = opacity;
        self
    }

    pub fn unlabelled(mut self) -> Series {
        self.label = None;
        self
    }
}

/// A chart: title, axes, series and where the legend goes.
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub legend: SeriesLabelPosition,
}

impl LineChart {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> LineChart {
        LineChart {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            legend: SeriesLabelPosition::UpperLeft,
        }
    }

    pub fn push(&mut self, s: Series) {
        self.series.push(s);
    }

    /// Writes this chart alone as an SVG of `size` pixels.
    pub fn write(&self, path: &Path, size: (u32, u32)) -> Result<()> {
        write_panels(path, size, None, std::slice::from_ref(self))
    }
}

/// Writes `charts` stacked vertically in one SVG, under an optional title.
pub fn write_panels(
    path: &Path,
    size: (u32, u32),
    title: Option<&str>,
    charts: &[LineChart],
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("plotting {}: {e}", path.display());
    let mut root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    if let Some(t) = title {
        root = root.titled(t, ("sans-serif", 20)).map_err(|e| err(&e))?;
    }
    for (area, chart) in root
        .split_evenly((charts.len().max(1), 1))
        .iter()
        .zip(charts)
    {
        draw(area, chart).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

fn draw(area: &DrawingArea<SVGBackend<'_>, Shift>, c: &LineChart) -> DrawResult {
    let (x, y) = (c.x.range.clone(), c.y.range.clone());
    // plotters gives log and linear axes different types: one body, four instances.
    macro_rules! body {
        ($x:expr, $y:expr) => {{
            let mut chart = ChartBuilder::on(area)
                .caption(&c.title, ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(65)
                .build_cartesian_2d($x, $y)?;
            chart
                .configure_mesh()
                .x_desc(c.x.desc.as_str())
                .y_desc(c.y.desc.as_str())
                .draw()?;
            for s in &c.series {
                let style = s.color.mix(s.opacity).stroke_width(s.width);
                let line = chart.draw_series(LineSeries::new(s.points.iter().copied(), style))?;
                if let Some(label) = &s.label {
                    line.label(label.as_str())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                }
                if s.markers > 0 {
                    let dot = s.color.mix(s.opacity).filled();
                    let r = s.markers as i32;
                    chart.draw_series(s.points.iter().map(|&p| Circle::new(p, r, dot)))?;
                }
            }
            if c.series.iter().any(|s| s.label.is_some()) {
                chart
                    .configure_series_labels()
                    .position(c.legend.clone())
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()?;
            }
            Ok(())
        }};
    }
    match (c.x.log, c.y.log) {
        (false, false) => body!(x, y),
        (true, false) => body!(x.log_scale(), y),
        (false, true) => body!(x, y.log_scale()),
        (true, true) => body!(x.log_scale(), y.log_scale()),
    }
}

/// Latency histograms on log-log axes (µs against samples per bucket, 20
/// buckets per decade): the body (µs) and the tail (ms) stay readable together.
pub fn latency_histograms(title: &str, hists: &[(String, &LatencyHistogram)]) -> LineChart {
    let ratio = 10f64.powf(1.0 / 20.0);
    let mut lo = f64::INFINITY;
    let (mut hi, mut top) = (1.0f64, 10.0f64);
    let mut series = Vec::new();
    for (i, (label, h)) in hists.iter().enumerate() {
        // Lines do not bridge empty buckets: one segment per run of non-empty ones.
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (ns, count) in h.log_buckets(ratio) {
            if count == 0 {
                segments.push(Vec::new());
                continue;
            }
            let us = ns as f64 / 1e3;
            (lo, hi, top) = (lo.min(us), hi.max(us), top.max(count as f64));
            segments
                .last_mut()
                .into_iter()
                .for_each(|s| s.push((us, count as f64)));
        }
        for (k, seg) in segments.into_iter().filter(|s| !s.is_empty()).enumerate() {
            let s = Series::new(label.clone(), seg, color(i)).markers(2);
            series.push(if k == 0 { s } else { s.unlabelled() });
        }
    }
    // Whole decades around the data.
    let lo = if lo.is_finite() {
        10f64.powf(lo.max(0.01).log10().floor())
    } else {
        1.0
    };
    let hi = 10f64.powf(hi.max(lo * 10.0).log10().ceil());
    let mut chart = LineChart::new(
        title,
        Axis::log("latency (us, log)", lo..hi),
        Axis::log(
            "samples per bucket (20 buckets/decade, log)",
            0.8..top * 2.0,
        ),
    );
    chart.series = series;
    chart.legend = SeriesLabelPosition::UpperRight;
    chart
}
