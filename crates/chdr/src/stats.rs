//! Latency histograms (HDR, nanosecond resolution) and their summaries.

use hdrhistogram::Histogram;

/// Largest latency recorded: 10 s. Larger values are clamped (and counted).
pub const MAX_LATENCY_NS: u64 = 10_000_000_000;

/// An HDR histogram of nanoseconds with 3 significant digits.
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    clamped: u64,
    negative: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        LatencyHistogram {
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
                .expect("static bounds are valid"),
            clamped: 0,
            negative: 0,
        }
    }

    /// Record a signed interval; negative ones (clock skew) are counted, not recorded.
    pub fn record(&mut self, ns: i64) {
        if ns < 0 {
            self.negative += 1;
            return;
        }
        let v = (ns as u64).clamp(1, MAX_LATENCY_NS);
        if v != ns as u64 && ns != 0 {
            self.clamped += 1;
        }
        self.hist.saturating_record(v);
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.hist.add(&other.hist);
        self.clamped += other.clamped;
        self.negative += other.negative;
    }

    pub fn summary(&self) -> LatencySummary {
        let h = &self.hist;
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        LatencySummary {
            count: h.len(),
            min_ns: if h.is_empty() { 0 } else { h.min() },
            median_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: if h.is_empty() { 0 } else { h.max() },
            mean_ns: if h.is_empty() { 0.0 } else { h.mean() },
            clamped: self.clamped,
            negative: self.negative,
        }
    }

    /// (bucket upper bound ns, count) pairs on a log scale, for plotting.
    pub fn log_buckets(&self) -> Vec<(u64, u64)> {
        if self.hist.is_empty() {
            return Vec::new();
        }
        self.hist
            .iter_log(self.hist.min().max(1), 1.25)
            .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
            .collect()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: u64,
    pub median_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    /// Values above the histogram's 10 s bound.
    pub clamped: u64,
    /// Negative intervals (clock skew), not recorded.
    pub negative: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reflects_recorded_values() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000 {
            h.record(v * 1000);
        }
        h.record(-5);
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.negative, 1);
        assert!(
            (499_000..=501_000).contains(&s.median_ns),
            "{}",
            s.median_ns
        );
        assert!(s.max_ns >= 999_000);
        let buckets = h.log_buckets();
        assert_eq!(buckets.iter().map(|b| b.1).sum::<u64>(), 1000);
    }
}
