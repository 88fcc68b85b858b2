//! The delta sweep behind `radiohost relay run`: one relay run per delta and
//! condition (idle or loaded, normal or real-time relay hosts), each reduced
//! to a row (on time / late / missing, host timing), the counted cause of
//! every missing copy, and the smallest delta that meets a target.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use radiohost_rt::{ThreadConfig, Time};
use radiohost_testbed::LinkConfig;

use crate::air::LatePolicy;
use crate::run::{run, RunConfig, RunError, RunReport};
use crate::{Air, AirConfig, AirError, MAX_RELAYS};

/// Errors of a sweep; each says which setting to change.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0} relays is out of range (1..={MAX_RELAYS})")]
    Relays(usize),
    #[error("bursts must be at least 1")]
    Bursts,
    #[error("delta {delta:?}: {source}")]
    Delta { delta: Duration, source: AirError },
    #[error("relay run failed: {0}")]
    Run(#[from] RunError),
}

/// One condition a sweep runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Condition {
    /// Under the background load (the caller starts it).
    pub load: bool,
    /// Relay host threads set up for real time.
    pub rt: bool,
}

impl Condition {
    /// The four conditions, normal first: an RT run's mlockall outlives it.
    pub const ALL: [Condition; 4] = [
        Condition {
            load: false,
            rt: false,
        },
        Condition {
            load: true,
            rt: false,
        },
        Condition {
            load: false,
            rt: true,
        },
        Condition {
            load: true,
            rt: true,
        },
    ];

    pub fn label(&self) -> String {
        format!(
            "{} {}",
            if self.load { "loaded" } else { "idle" },
            if self.rt { "rt" } else { "normal" }
        )
    }
}

/// Everything a sweep needs but the deltas' runs themselves.
#[derive(Clone, Debug)]
pub struct SweepConfig {
    pub rate_sps: u64,
    pub burst_samples: usize,
    pub period: Duration,
    pub bursts: u64,
    pub tolerance: Duration,
    pub deadline: Duration,
    pub late_policy: LatePolicy,
    /// Every hop's link; each hop gets its own seed derived from this one's.
    pub link: LinkConfig,
    pub relays: usize,
    /// Deltas to try (empty: 200 us).
    pub deltas: Vec<Duration>,
    /// SCHED_FIFO priority of the relay hosts in real-time conditions.
    pub priority: i32,
    pub relay_cpus: Option<Vec<usize>>,
    /// Relay hosts spin on their sockets (one busy core each).
    pub busy_poll: bool,
}

impl SweepConfig {
    /// The deltas to run, in order.
    pub fn deltas(&self) -> Vec<Duration> {
        if self.deltas.is_empty() {
            vec![Duration::from_micros(200)]
        } else {
            self.deltas.clone()
        }
    }

    /// The air for `delta`.
    pub fn air(&self, delta: Duration) -> AirConfig {
        let with_seed = |k: u64| LinkConfig {
            seed: self.link.seed.wrapping_mul(1_000).wrapping_add(k),
            ..self.link.clone()
        };
        let ticks = |d: Duration| Time::from(d).to_ticks(self.rate_sps as f64);
        AirConfig {
            rate_sps: self.rate_sps,
            burst_samples: self.burst_samples,
            period_ticks: ticks(self.period),
            bursts: self.bursts,
            start_tick: 0,
            delta_ticks: ticks(delta),
            tolerance_ticks: ticks(self.tolerance),
            deadline_ticks: ticks(self.deadline),
            late_policy: self.late_policy,
            source_links: (0..self.relays as u64).map(with_seed).collect(),
            dest_links: (0..self.relays as u64)
                .map(|k| with_seed(100 + k))
                .collect(),
            tx_capacity_pkts: 256,
        }
    }

    /// Refuses impossible settings before any load or thread starts.
    pub fn validate(&self) -> Result<(), SweepError> {
        if self.relays == 0 || self.relays > MAX_RELAYS {
            return Err(SweepError::Relays(self.relays));
        }
        if self.bursts == 0 {
            return Err(SweepError::Bursts);
        }
        for delta in self.deltas() {
            Air::new(self.air(delta)).map_err(|source| SweepError::Delta { delta, source })?;
        }
        Ok(())
    }

    /// The run for `delta` under condition `c`.
    pub fn run_config(&self, delta: Duration, c: Condition) -> RunConfig {
        let mut relay_thread = if c.rt {
            ThreadConfig::realtime(self.priority)
        } else {
            ThreadConfig::default()
        };
        relay_thread.cpus = self.relay_cpus.clone();
        RunConfig {
            air: self.air(delta),
            relay_thread,
            air_thread: air_thread_config(),
            lead: Duration::from_millis(50),
            busy_poll: self.busy_poll,
        }
    }

    /// Upper bound on one condition's wall time (every delta's run).
    pub fn condition_bound(&self) -> Duration {
        let per_run = Duration::from_secs_f64(self.period.as_secs_f64() * self.bursts as f64);
        (per_run + Duration::from_secs(1)) * self.deltas().len() as u32
    }
}

/// The emulated radios stand for hardware, which host load does not slow:
/// they run SCHED_FIFO when the kernel allows it, in every condition, without
/// mlockall (process-wide: it would change the normal runs).
pub fn air_thread_config() -> ThreadConfig {
    ThreadConfig {
        lock_memory: false,
        ..ThreadConfig::realtime(90)
    }
}

/// One measured point: a delta under one condition.
#[derive(serde::Serialize)]
pub struct SweepRow {
    pub delta_us: f64,
    pub load: bool,
    pub rt: bool,
    pub relay_setup: String,
    pub air_setup: String,
    pub bursts: u64,
    pub on_time: u64,
    pub late: u64,
    pub missing: u64,
    pub on_time_fraction: f64,
    pub any_on_time: u64,
    pub report: RunReport,
}

impl SweepRow {
    pub fn condition(&self) -> Condition {
        Condition {
            load: self.load,
            rt: self.rt,
        }
    }

    /// The slowest relay host's RX->TX (median, P99.9, max) in ns: a burst
    /// needs every copy on time.
    pub fn slowest_host(&self) -> (u64, u64, u64) {
        self.report.hosts.iter().fold((0, 0, 0), |(a, b, c), h| {
            let s = h.rx_to_tx;
            (a.max(s.median_ns), b.max(s.p999_ns), c.max(s.max_ns))
        })
    }
}

impl SweepRow {
    /// What went wrong in this run, one line each: per relay its late copies
    /// and the counted cause of every missing one; copies still in flight at
    /// the end; an overrun of the time bound. Empty when nothing did.
    pub fn notes(&self) -> Vec<String> {
        let (rep, c) = (&self.report, self.condition().label());
        let at = format!("{c} delta {:.0}us", self.delta_us);
        let mut lines = Vec::new();
        for i in 0..rep.air.relays.len() {
            let (late, missing, causes, unaccounted) = missing_causes(rep, i);
            if late == 0 && missing == 0 {
                continue;
            }
            let mut l = format!("{at} relay {i}: late {late}, missing {missing}");
            let named: Vec<String> = causes
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            if !named.is_empty() {
                l.push_str(&format!(" ({})", named.join(", ")));
            }
            if unaccounted != 0 {
                l.push_str(&format!(" [{unaccounted} without a counted cause]"));
            }
            lines.push(l);
        }
        if rep.air.in_flight_copies > 0 {
            lines.push(format!(
                "{at}: {} copies were still on their way when the run ended",
                rep.air.in_flight_copies
            ));
        }
        if rep.stopped_early {
            lines.push(format!(
                "{at}: the run overran its time bound; open bursts were counted missing"
            ));
        }
        lines
    }
}

/// Runs one delta under condition `c` (the caller provides the load);
/// `progress` counts bursts as they are classified.
pub fn measure(
    cfg: &SweepConfig,
    delta: Duration,
    c: Condition,
    progress: Arc<AtomicU64>,
) -> Result<SweepRow, SweepError> {
    let report = run(cfg.run_config(delta, c), progress)?;
    let t = &report.air.tally;
    let relay_setup = report
        .hosts
        .first()
        .map(|h| h.setup.summary())
        .unwrap_or_default();
    Ok(SweepRow {
        delta_us: delta.as_secs_f64() * 1e6,
        load: c.load,
        rt: c.rt,
        relay_setup,
        air_setup: report.air_setup.summary(),
        bursts: t.bursts,
        on_time: t.on_time,
        late: t.late,
        missing: t.missing,
        on_time_fraction: t.on_time_fraction(),
        any_on_time: t.any_on_time,
        report,
    })
}

/// Relay `i`'s copies: how many its radio sent late, how many were missing,
/// the counted cause of each missing one, and how many had none (should be 0;
/// link duplicates can make it negative).
pub fn missing_causes(rep: &RunReport, i: usize) -> (u64, u64, Vec<(&'static str, u64)>, i64) {
    let x = &rep.air.relays[i];
    let pr = &rep.air.tally.per_relay[i];
    let h = &rep.hosts[i].counters;
    let offered = rep.air.bursts_sent - x.stage1_lost + x.stage1_duplicated;
    let causes = vec![
        ("stage-1 lost on link", x.stage1_lost),
        (
            "stage-1 not received by host",
            offered.saturating_sub(h.received),
        ),
        ("refused by host", h.malformed + h.too_old),
        (
            "host->radio datagram lost",
            h.scheduled.saturating_sub(x.tx.packets + x.malformed),
        ),
        ("radio dropped late", x.tx.late_packets),
        (
            "radio overlap (late copy hit the next burst)",
            x.tx.overlaps + x.tx.overflows + x.tx.dropped_awaiting_resync + x.tx.malformed,
        ),
        ("copy lost on link", x.copy_lost),
        ("after deadline", pr.after_deadline + pr.stale),
        ("corrupt", x.corrupt),
    ];
    let named: u64 = causes.iter().map(|c| c.1).sum();
    (
        pr.late,
        pr.missing,
        causes,
        pr.missing as i64 - named as i64,
    )
}

/// The smallest delta (us) under `c` with at least `target_pct` % of bursts on time.
pub fn recommended_delta(rows: &[SweepRow], c: Condition, target_pct: f64) -> Option<f64> {
    rows.iter()
        .filter(|r| r.condition() == c && 100.0 * r.on_time_fraction >= target_pct)
        .map(|r| r.delta_us)
        .min_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> SweepConfig {
        SweepConfig {
            rate_sps: 10_000_000,
            burst_samples: 200,
            period: Duration::from_micros(500),
            bursts: 10,
            tolerance: Duration::from_micros(1),
            deadline: Duration::from_millis(2),
            late_policy: LatePolicy::Send,
            link: LinkConfig::parse("delay=5us").unwrap(),
            relays: 2,
            deltas: vec![Duration::from_micros(50), Duration::from_micros(100)],
            priority: 80,
            relay_cpus: None,
            busy_poll: false,
        }
    }

    #[test]
    fn air_follows_the_settings_and_hops_get_their_own_seeds() {
        let c = config();
        let air = c.air(Duration::from_micros(100));
        assert_eq!(air.tolerance_ticks, 10);
        assert_eq!(air.period_ticks, 5_000);
        assert_eq!(air.delta_ticks, 1_000);
        assert_ne!(air.source_links[0].seed, air.dest_links[0].seed);
        assert_ne!(air.source_links[0].seed, air.source_links[1].seed);
        assert!(c.validate().is_ok());
        assert!(matches!(
            SweepConfig {
                relays: 9,
                ..config()
            }
            .validate(),
            Err(SweepError::Relays(9))
        ));
        assert_eq!(
            SweepConfig {
                deltas: vec![],
                ..config()
            }
            .deltas(),
            vec![Duration::from_micros(200)]
        );
        // Normal conditions first: an RT run's mlockall would outlive it.
        assert!(!Condition::ALL[0].rt && !Condition::ALL[1].rt && Condition::ALL[3].rt);
    }

    #[test]
    fn short_run_accounts_for_every_burst() {
        let c = config();
        let row = measure(
            &c,
            Duration::from_micros(400),
            Condition::ALL[0],
            Arc::new(AtomicU64::new(0)),
        )
        .unwrap();
        // Checks the accounting only; no timing is asserted.
        assert_eq!(row.bursts, 10);
        assert_eq!(row.on_time + row.late + row.missing, row.bursts);
    }
}
