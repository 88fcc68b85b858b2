//! Latency statistics on an HDR histogram (ns, 3 significant digits).
//!
//! Definitions, used everywhere in radiohost:
//! - quantile q of n samples = the smallest recorded value v such that at least
//!   `ceil(q * n)` samples are <= v (computed in integers, so P99.9 of 10 000
//!   samples is exactly the 9 990th smallest);
//! - **jitter** = width `b - a` of the *shortest* value interval `[a, b]` that
//!   holds at least `ceil(0.999 * n)` samples (for n < 1000 that is all of
//!   them: max - min). Latency distributions have a hard floor and a long tail,
//!   so the shortest interval starts near the minimum; this is the "width of
//!   the interval holding 99.9% of samples" of the study radiohost follows.
//!
//! The same definitions give P90. Negative samples (early wake-ups, skew between
//! two clocks) are recorded as 0 and counted.
//!
//! Values below 2048 ns are exact; above, a value may read up to 0.1 % high
//! (HDR bucket resolution), identically for every statistic.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency tracked (60 s); larger samples are clamped and counted.
pub const MAX_TRACKED_NS: u64 = 60_000_000_000;

/// A latency histogram in ns. Recording never allocates.
#[derive(Clone, Debug)]
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

/// Statistics of one run, in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// 50th percentile.
    pub median_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
    /// Width of the shortest interval holding 99.9 % of samples.
    pub jitter_ns: u64,
    /// Lower end of that interval.
    pub jitter_lo_ns: u64,
    /// Upper end of that interval.
    pub jitter_hi_ns: u64,
    /// Samples above [`MAX_TRACKED_NS`], recorded as that value.
    pub clamped: u64,
    /// Negative samples given to [`LatencyHistogram::record_signed`] (early
    /// wake-ups, clock skew between two clocks), recorded as 0.
    pub negative: u64,
}

impl Summary {
    /// ns to µs as f64, for tables and JSON.
    pub fn us(ns: u64) -> f64 {
        ns as f64 / 1000.0
    }
}

impl LatencyHistogram {
    /// An empty histogram covering 1 ns .. 60 s.
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3)
            .expect("constant bounds 1..60e9 with 3 digits are valid");
        LatencyHistogram {
            hist,
            clamped: 0,
            negative: 0,
        }
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        let v = if ns > MAX_TRACKED_NS {
            self.clamped += 1;
            MAX_TRACKED_NS
        } else {
            ns
        };
        // Cannot fail: v is within the bounds and auto-resize is off.
        let _ = self.hist.record(v);
    }

    /// Records `count` samples of one latency (e.g. when importing another
    /// histogram's buckets).
    pub fn record_n(&mut self, ns: u64, count: u64) {
        let v = if ns > MAX_TRACKED_NS {
            self.clamped += count;
            MAX_TRACKED_NS
        } else {
            ns
        };
        let _ = self.hist.record_n(v, count);
    }

    /// Records a signed latency; a negative one (an early wake-up, or skew
    /// between the clocks that stamped both ends) is recorded as 0 and counted.
    pub fn record_signed(&mut self, ns: i64) {
        if ns < 0 {
            self.negative += 1;
        }
        self.record(ns.max(0) as u64);
    }

    /// Adds all samples of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.hist.add(&other.hist);
        self.clamped += other.clamped;
        self.negative += other.negative;
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Distinct recorded bucket values (ns, highest equivalent) and counts,
    /// ascending: the histogram for plotting.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect()
    }

    /// Arithmetic mean of the samples (at bucket resolution), ns; 0 when empty.
    pub fn mean_ns(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.mean()
        }
    }

    /// Cumulative distribution `(value ns, fraction of samples <= value)` at
    /// log-spaced points ([`Self::log_buckets`] with `ratio`), for plots; the
    /// last point's fraction is 1.
    pub fn cdf(&self, ratio: f64) -> Vec<(u64, f64)> {
        let n = self.hist.len().max(1) as f64;
        let mut seen = 0u64;
        self.log_buckets(ratio)
            .into_iter()
            .map(|(v, c)| {
                seen += c;
                (v, seen as f64 / n)
            })
            .collect()
    }

    /// Counts per log-spaced bucket, `(bucket upper bound ns, count)`, each
    /// bound `ratio` times the previous, from the smallest sample up: the
    /// histogram for plotting on a log axis. Empty when nothing was recorded.
    pub fn log_buckets(&self, ratio: f64) -> Vec<(u64, u64)> {
        if self.hist.is_empty() || ratio.is_nan() || ratio <= 1.0 {
            return Vec::new();
        }
        self.hist
            .iter_log(self.hist.min().max(1), ratio)
            .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
            .collect()
    }

    /// Quantile `num/den` per the module definition; 0 for an empty histogram.
    pub fn quantile(&self, num: u64, den: u64) -> u64 {
        let n = self.hist.len();
        if n == 0 || den == 0 {
            return 0;
        }
        let rank = (n as u128 * num.min(den) as u128)
            .div_ceil(den as u128)
            .max(1) as u64;
        let mut seen = 0u64;
        for v in self.hist.iter_recorded() {
            seen += v.count_at_value();
            if seen >= rank {
                return v.value_iterated_to();
            }
        }
        self.hist.max()
    }

    /// Shortest interval `(lo, hi)` holding at least `ceil(num/den * n)` samples.
    pub fn shortest_interval(&self, num: u64, den: u64) -> (u64, u64) {
        let b = self.buckets();
        let n = self.hist.len();
        if b.is_empty() || den == 0 {
            return (0, 0);
        }
        let need = (n as u128 * num.min(den) as u128)
            .div_ceil(den as u128)
            .max(1) as u64;
        let (mut best, mut j, mut in_window) = ((b[0].0, b[b.len() - 1].0), 0usize, 0u64);
        for i in 0..b.len() {
            while in_window < need && j < b.len() {
                in_window += b[j].1;
                j += 1;
            }
            if in_window < need {
                break;
            }
            let (lo, hi) = (b[i].0, b[j - 1].0);
            if hi - lo < best.1 - best.0 {
                best = (lo, hi);
            }
            in_window -= b[i].1;
        }
        best
    }

    /// All statistics at once.
    pub fn summary(&self) -> Summary {
        let (jitter_lo_ns, jitter_hi_ns) = self.shortest_interval(999, 1000);
        let empty = self.hist.is_empty();
        Summary {
            samples: self.hist.len(),
            min_ns: if empty { 0 } else { self.quantile(0, 1) },
            median_ns: self.quantile(1, 2),
            p90_ns: self.quantile(9, 10),
            p99_ns: self.quantile(99, 100),
            p999_ns: self.quantile(999, 1000),
            max_ns: if empty { 0 } else { self.quantile(1, 1) },
            jitter_ns: jitter_hi_ns - jitter_lo_ns,
            jitter_lo_ns,
            jitter_hi_ns,
            clamped: self.clamped,
            negative: self.negative,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_synthetic_set() {
        // 9 990 samples spread evenly over 100..=109 ns and 10 outliers at
        // 1500..=1509 ns: every statistic is known by hand.
        let mut h = LatencyHistogram::new();
        for i in 0..9990u64 {
            h.record(100 + i % 10);
        }
        for i in 0..10u64 {
            h.record(1500 + i);
        }
        let s = h.summary();
        assert_eq!(s.samples, 10_000);
        assert_eq!(s.min_ns, 100);
        assert_eq!(s.median_ns, 105); // 5000th smallest: 100..=104 hold only 4995
        assert_eq!(s.p99_ns, 109); // 9900th
        assert_eq!(s.p999_ns, 109); // 9990th
        assert_eq!(s.max_ns, 1509);
        assert_eq!((s.jitter_lo_ns, s.jitter_hi_ns), (100, 109));
        assert_eq!(s.jitter_ns, 9);
        // With one more outlier 9 991 samples are needed, so the shortest
        // interval must reach the outliers.
        h.record(1500);
        let s = h.summary();
        assert_eq!(s.samples, 10_001);
        assert_eq!(s.jitter_lo_ns, 100);
        assert_eq!(s.jitter_hi_ns, 1500);
    }

    #[test]
    fn small_and_empty_sets() {
        let h = LatencyHistogram::new();
        let s = h.summary();
        assert_eq!((s.samples, s.min_ns, s.max_ns, s.jitter_ns), (0, 0, 0, 0));
        let mut h = LatencyHistogram::new();
        for v in [5, 1, 9] {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!((s.min_ns, s.median_ns, s.max_ns, s.jitter_ns), (1, 5, 9, 8));
        h.record(MAX_TRACKED_NS + 1);
        h.record_signed(-5);
        let s = h.summary();
        assert_eq!((s.clamped, s.min_ns, s.negative), (1, 0, 1));
        h.record_n(7, 3);
        h.record_n(MAX_TRACKED_NS * 2, 2);
        let s = h.summary();
        assert_eq!((s.samples, s.clamped), (10, 3));
    }

    #[test]
    fn large_values_within_bucket_resolution() {
        let mut h = LatencyHistogram::new();
        for us in 1..=1000u64 {
            h.record(us * 1000);
        }
        let s = h.summary();
        let close = |got: u64, want: u64| got >= want && got <= want + want / 1000 + 1;
        assert!(close(s.median_ns, 500_000), "{}", s.median_ns);
        assert!(close(s.p90_ns, 900_000), "{}", s.p90_ns);
        assert!(close(s.p99_ns, 990_000), "{}", s.p99_ns);
        assert!((h.mean_ns() - 500_500.0).abs() < 600.0, "{}", h.mean_ns());
        let cdf = h.cdf(1.1);
        assert_eq!(cdf.last().map(|p| p.1), Some(1.0));
        assert!(cdf.windows(2).all(|w| w[0].1 <= w[1].1));
        let log = h.log_buckets(1.25);
        assert_eq!(log.iter().map(|b| b.1).sum::<u64>(), 1000);
        assert!(log.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(close(s.max_ns, 1_000_000), "{}", s.max_ns);
    }

    fn brute(mut v: Vec<u64>) -> (u64, u64, u64, u64, u64) {
        v.sort_unstable();
        let n = v.len() as u64;
        let at = |num: u64, den: u64| v[((n * num).div_ceil(den).max(1) - 1) as usize];
        let need = (n * 999).div_ceil(1000).max(1) as usize;
        let jitter = (0..=v.len() - need)
            .map(|i| v[i + need - 1] - v[i])
            .min()
            .unwrap_or(0);
        (at(1, 2), at(9, 10), at(99, 100), at(999, 1000), jitter)
    }

    proptest! {
        #[test]
        fn matches_brute_force_on_exact_values(v in proptest::collection::vec(0u64..2048, 1..3000)) {
            let mut h = LatencyHistogram::new();
            for &x in &v { h.record(x); }
            let s = h.summary();
            let (med, p90, p99, p999, jitter) = brute(v.clone());
            prop_assert_eq!(s.median_ns, med);
            prop_assert_eq!(s.p90_ns, p90);
            prop_assert_eq!(s.p99_ns, p99);
            prop_assert_eq!(s.p999_ns, p999);
            prop_assert_eq!(s.jitter_ns, jitter);
            prop_assert_eq!(s.min_ns, *v.iter().min().unwrap());
            prop_assert_eq!(s.max_ns, *v.iter().max().unwrap());
        }
    }
}
