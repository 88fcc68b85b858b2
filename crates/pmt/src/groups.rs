//! Receiver groups by round-trip time.
//!
//! Each group g is served one window every period T_g, so a receiver in g gets
//! W / T_g segments per second. The paper's greedy rule picks the fast group: sort the
//! RTTs tau[0..R) ascending, T_max = tau[R-1] + eps, and for j = 1..=R (j fast
//! receivers) score j / (tau[j-1] + eps) + (R - j) / T_max; the best j gives
//! T = tau[j-1] + eps. The score is the aggregate service rate (windows per second
//! summed over receivers). K groups apply the same split recursively to the slow part.

use std::time::Duration;

/// Result of one greedy split over sorted RTTs (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    /// Number of receivers in the fast group (1..=R).
    pub fast: usize,
    /// Fast-group period (seconds).
    pub t: f64,
    /// Slow-group period (seconds).
    pub t_max: f64,
    pub score: f64,
}

/// Greedy split of ascending `taus` (seconds). Panics never; returns `None` when empty.
pub fn greedy_split(taus: &[f64], eps: f64) -> Option<Split> {
    let r = taus.len();
    let t_max = *taus.last()? + eps;
    let mut best: Option<Split> = None;
    for j in 1..=r {
        let t = taus[j - 1] + eps;
        let score = j as f64 / t + (r - j) as f64 / t_max;
        // Strictly better only: on ties keep the smaller fast group (fewer timers busy).
        if best.is_none_or(|b| score > b.score + 1e-12 * b.score.abs()) {
            best = Some(Split {
                fast: j,
                t,
                t_max,
                score,
            });
        }
    }
    best
}

/// Best two-group score over every subset of receivers as the fast group (2^R), the
/// reference the greedy rule is tested against.
pub fn brute_force_score(taus: &[f64], eps: f64) -> f64 {
    let r = taus.len();
    assert!(r <= 20, "brute force is exponential");
    let t_max = taus.iter().cloned().fold(f64::NEG_INFINITY, f64::max) + eps;
    let mut best = f64::NEG_INFINITY;
    for mask in 1u32..(1 << r) {
        let fast: Vec<f64> = (0..r)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| taus[i])
            .collect();
        let t = fast.iter().cloned().fold(f64::NEG_INFINITY, f64::max) + eps;
        let n = fast.len();
        let score = n as f64 / t + (r - n) as f64 / t_max;
        best = best.max(score);
    }
    best
}

/// Group assignment for R receivers.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// Group index per receiver (in input order); 0 is the fastest group.
    pub group_of: Vec<usize>,
    /// Period per group.
    pub periods: Vec<Duration>,
}

impl Assignment {
    /// Aggregate service rate: sum over receivers of 1 / period (windows per second).
    pub fn score(&self) -> f64 {
        self.group_of
            .iter()
            .map(|&g| 1.0 / self.periods[g].as_secs_f64())
            .sum()
    }
}

/// Split receivers with RTTs `taus` into at most `k` groups. `k == 1` serves
/// everyone every T_max; `k == 2` is the paper's greedy split. For `k > 2` the split is
/// applied recursively: each step splits, with the same greedy rule, whichever
/// existing group gains the most aggregate service rate, until `k` groups exist or no
/// split helps. (Splitting only the slow remainder would never separate receivers the
/// first split put together in the fast group.)
pub fn assign(taus: &[Duration], k: usize, eps: Duration) -> Assignment {
    let r = taus.len();
    let mut order: Vec<usize> = (0..r).collect();
    order.sort_by(|&a, &b| taus[a].cmp(&taus[b]).then(a.cmp(&b)));
    let sorted: Vec<f64> = order.iter().map(|&i| taus[i].as_secs_f64()).collect();
    let eps_s = eps.as_secs_f64();
    // Groups as ranges [start, end) of the sorted RTTs.
    let mut ranges: Vec<(usize, usize)> = if r == 0 { Vec::new() } else { vec![(0, r)] };
    while ranges.len() < k.max(1) {
        let mut best: Option<(usize, usize, f64)> = None; // (range index, fast count, gain)
        for (gi, &(s, e)) in ranges.iter().enumerate() {
            let part = &sorted[s..e];
            let Some(split) = greedy_split(part, eps_s) else {
                continue;
            };
            let before = part.len() as f64 / (part[part.len() - 1] + eps_s);
            let gain = split.score - before;
            if split.fast < part.len() && gain > 1e-12 * before && best.is_none_or(|b| gain > b.2) {
                best = Some((gi, split.fast, gain));
            }
        }
        let Some((gi, fast, _)) = best else { break };
        let (s, e) = ranges[gi];
        ranges[gi] = (s, s + fast);
        ranges.insert(gi + 1, (s + fast, e));
    }
    let mut group_of = vec![0; r];
    let mut periods = Vec::with_capacity(ranges.len());
    for (g, &(s, e)) in ranges.iter().enumerate() {
        for &i in &order[s..e] {
            group_of[i] = g;
        }
        periods.push(Duration::from_secs_f64(sorted[e - 1] + eps_s));
    }
    Assignment { group_of, periods }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn greedy_matches_brute_force(mut taus in proptest::collection::vec(0.001f64..5.0, 1..12),
                                      eps in 0.0f64..0.05) {
            taus.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let g = greedy_split(&taus, eps).unwrap();
            let b = brute_force_score(&taus, eps);
            prop_assert!((g.score - b).abs() <= 1e-9 * b, "greedy {} brute {}", g.score, b);
        }

        #[test]
        fn greedy_matches_dense_t_sweep(mut taus in proptest::collection::vec(0.01f64..2.0, 1..8)) {
            // Any T between RTTs is dominated by the next RTT + eps: sweep T finely.
            taus.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let eps = 0.002;
            let r = taus.len();
            let t_max = taus[r - 1] + eps;
            let g = greedy_split(&taus, eps).unwrap();
            let mut t = eps;
            while t <= t_max {
                let n = taus.iter().filter(|&&x| x + eps <= t + 1e-12).count();
                let score = n as f64 / t + (r - n) as f64 / t_max;
                prop_assert!(score <= g.score * (1.0 + 1e-9));
                t += 0.0005;
            }
        }

        #[test]
        fn more_groups_never_score_less(taus in proptest::collection::vec(1u64..2000, 1..10)) {
            let taus: Vec<Duration> = taus.into_iter().map(Duration::from_millis).collect();
            let eps = Duration::from_millis(2);
            let mut last = 0.0;
            for k in 1..=taus.len() {
                let a = assign(&taus, k, eps);
                prop_assert!(a.periods.len() <= k);
                // every receiver's period covers its RTT
                for (i, &g) in a.group_of.iter().enumerate() {
                    prop_assert!(a.periods[g] >= taus[i]);
                }
                prop_assert!(a.score() >= last * (1.0 - 1e-9));
                last = a.score();
            }
        }
    }

    #[test]
    fn two_unequal_receivers_split() {
        let taus = [Duration::from_millis(95), Duration::from_millis(380)];
        let a = assign(&taus, 2, Duration::from_millis(2));
        assert_eq!(a.group_of, vec![0, 1]);
        assert_eq!(a.periods[0], Duration::from_millis(97));
        assert_eq!(a.periods[1], Duration::from_millis(382));
        // Nearly equal receivers stay together: splitting gains almost nothing.
        let taus = [Duration::from_millis(100), Duration::from_millis(101)];
        let a = assign(&taus, 2, Duration::from_millis(2));
        assert_eq!(
            a.periods.len(),
            2,
            "two groups because 100 < 101 strictly helps"
        );
        let one = assign(&taus, 1, Duration::from_millis(2));
        assert_eq!(one.group_of, vec![0, 0]);
    }
}
