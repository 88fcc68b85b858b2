//! A sans-IO model of one direction of a network link.
//!
//! A packet offered at `now` waits behind the packets already queued (FIFO), is
//! serialised at the link's capacity at that moment, may be lost (i.i.d. or in
//! Gilbert-Elliott bursts), and arrives one propagation delay after its last bit left.
//! A lost packet still used its airtime, as on a radio link. The queue holds at most
//! `queue_limit_bytes`; beyond that the packet is tail-dropped.
//!
//! Time is a [`Duration`] since an epoch chosen by the caller, so the same model
//! paces real sockets (epoch = an `Instant`) and simulated networks (virtual time).

use crate::units::{parse_duration, parse_probability, parse_rate, parse_size, UnitError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;
use thiserror::Error;

/// Two-state Markov burst-loss model, stepped once per packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    pub p_good_to_bad: f64,
    pub p_bad_to_good: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// Long-run loss probability of the chain.
    pub fn mean_loss(&self) -> f64 {
        let denom = self.p_good_to_bad + self.p_bad_to_good;
        if denom == 0.0 {
            return self.loss_good;
        }
        let p_bad = self.p_good_to_bad / denom;
        p_bad * self.loss_bad + (1.0 - p_bad) * self.loss_good
    }
}

/// From time `at` on, the link runs at `rate_bps`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityChange {
    pub at: Duration,
    pub rate_bps: f64,
}

/// Longest time one packet may take to serialise (a year): keeps the link's
/// clock arithmetic far from overflow whatever rate it is given.
pub const MAX_SERIALISATION: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Capacity in bit/s; `f64::INFINITY` for no serialisation delay.
    pub rate_bps: f64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Independent packet error rate, applied on top of any burst model.
    pub loss: f64,
    pub burst: Option<GilbertElliott>,
    /// Probability that a packet is held back by `reorder_delay` (so later ones pass it).
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Bytes the queue holds before tail drop; `usize::MAX` for unlimited.
    pub queue_limit_bytes: usize,
    /// Capacity changes over time, applied in order of `at`.
    pub capacity_schedule: Vec<CapacityChange>,
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            rate_bps: f64::INFINITY,
            delay: Duration::ZERO,
            loss: 0.0,
            burst: None,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            queue_limit_bytes: usize::MAX,
            capacity_schedule: Vec::new(),
            seed: 0,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum LinkConfigError {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error("link spec item {item:?}: {why}")]
    Item { item: String, why: &'static str },
}

fn item_error(item: &str, why: &'static str) -> LinkConfigError {
    LinkConfigError::Item {
        item: item.to_string(),
        why,
    }
}

impl LinkConfig {
    /// Parse a compact link spec: comma-separated items, e.g.
    /// `"1Mbit,1%,delay=10ms"` or `"250kbit,20%,ge=0.01/0.3/0.8,queue=64KiB"`.
    ///
    /// Items: a rate ("1G", "250kbit"), a loss ("20%" or "loss=0.2"), `delay=`,
    /// `ge=p_good_to_bad/p_bad_to_good/loss_bad[/loss_good]`, `reorder=P/DELAY`,
    /// `dup=P`, `queue=SIZE`, `seed=N`, `at=TIME:RATE` (capacity change; repeatable).
    pub fn parse(spec: &str) -> Result<Self, LinkConfigError> {
        let mut cfg = LinkConfig::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
                None if item.ends_with('%') => ("loss".to_string(), item),
                None => ("rate".to_string(), item),
            };
            match key.as_str() {
                "rate" => cfg.rate_bps = parse_rate(value)?,
                "loss" | "per" => cfg.loss = parse_probability(value)?,
                "delay" => cfg.delay = parse_duration(value)?,
                "queue" => cfg.queue_limit_bytes = parse_size(value)?,
                "dup" | "duplicate" => cfg.duplicate = parse_probability(value)?,
                "seed" => {
                    cfg.seed = value
                        .parse()
                        .map_err(|_| item_error(item, "seed must be an unsigned integer"))?
                }
                "reorder" => {
                    let (p, d) = value
                        .split_once('/')
                        .ok_or_else(|| item_error(item, "expected reorder=P/DELAY"))?;
                    cfg.reorder = parse_probability(p)?;
                    cfg.reorder_delay = parse_duration(d)?;
                }
                "ge" => {
                    let parts: Vec<&str> = value.split('/').collect();
                    if !(3..=4).contains(&parts.len()) {
                        return Err(item_error(
                            item,
                            "expected ge=p_good_to_bad/p_bad_to_good/loss_bad[/loss_good]",
                        ));
                    }
                    let p = parse_probability;
                    cfg.burst = Some(GilbertElliott {
                        p_good_to_bad: p(parts[0])?,
                        p_bad_to_good: p(parts[1])?,
                        loss_bad: p(parts[2])?,
                        loss_good: parts.get(3).map(|s| p(s)).transpose()?.unwrap_or(0.0),
                    });
                }
                "at" => {
                    let (t, r) = value
                        .split_once(':')
                        .ok_or_else(|| item_error(item, "expected at=TIME:RATE"))?;
                    cfg.capacity_schedule.push(CapacityChange {
                        at: parse_duration(t)?,
                        rate_bps: parse_rate(r)?,
                    });
                }
                _ => {
                    return Err(item_error(
                        item,
                        "unknown item (rate, loss, delay, ge, reorder, dup, queue, seed, at)",
                    ))
                }
            }
        }
        cfg.capacity_schedule.sort_by_key(|c| c.at);
        Ok(cfg)
    }

    /// Expected fraction of packets delivered (ignoring queue drops).
    pub fn delivery_ratio(&self) -> f64 {
        let burst = self.burst.map_or(0.0, |b| b.mean_loss());
        (1.0 - self.loss) * (1.0 - burst)
    }
}

/// Why a packet did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Independent random loss.
    Loss,
    /// Lost in a Gilbert-Elliott burst.
    Burst,
    /// The queue was full (tail drop).
    QueueFull,
}

/// What happens to an offered packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Dropped(DropReason),
    Deliver {
        at: Duration,
        duplicate_at: Option<Duration>,
    },
}

/// Counters of everything the link did; nothing is dropped without a count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub offered: u64,
    pub offered_bytes: u64,
    pub delivered: u64,
    pub dropped_loss: u64,
    pub dropped_burst: u64,
    pub dropped_queue: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

impl LinkStats {
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_burst + self.dropped_queue
    }
}

/// One direction of an emulated link.
#[derive(Debug)]
pub struct Link {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    /// When the transmitter finishes the last queued packet.
    busy_until: Duration,
    in_bad_state: bool,
    stats: LinkStats,
}

impl Link {
    pub fn new(cfg: LinkConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        Self {
            cfg,
            rng,
            busy_until: Duration::ZERO,
            in_bad_state: false,
            stats: LinkStats::default(),
        }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Capacity at time `t`, following the schedule.
    pub fn rate_at(&self, t: Duration) -> f64 {
        self.cfg
            .capacity_schedule
            .iter()
            .take_while(|c| c.at <= t)
            .last()
            .map_or(self.cfg.rate_bps, |c| c.rate_bps)
    }

    /// Time to serialise `bytes` at `rate` bit/s, at most [`MAX_SERIALISATION`]
    /// (a rate parsed from user input is at least 1 bit/s, but the model must not
    /// panic on any rate it is given).
    fn serialisation(bytes: usize, rate: f64) -> Duration {
        if rate.is_infinite() {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(bytes as f64 * 8.0 / rate)
                .unwrap_or(MAX_SERIALISATION)
                .min(MAX_SERIALISATION)
        }
    }

    /// Bytes still waiting to be serialised at `now`.
    pub fn backlog_bytes(&self, now: Duration) -> usize {
        let rate = self.rate_at(now);
        if rate.is_infinite() || self.busy_until <= now {
            return 0;
        }
        ((self.busy_until - now).as_secs_f64() * rate / 8.0) as usize
    }

    /// When the transmitter will be idle, if nothing more is offered.
    pub fn busy_until(&self) -> Duration {
        self.busy_until
    }

    /// A packet of `bytes` enters the link at `now`. Calls must come with
    /// non-decreasing `now` (the model is FIFO).
    pub fn offer(&mut self, now: Duration, bytes: usize) -> Fate {
        self.stats.offered += 1;
        self.stats.offered_bytes += bytes as u64;
        if self.backlog_bytes(now).saturating_add(bytes) > self.cfg.queue_limit_bytes {
            self.stats.dropped_queue += 1;
            return Fate::Dropped(DropReason::QueueFull);
        }
        let start = self.busy_until.max(now);
        let sent = start.saturating_add(Self::serialisation(bytes, self.rate_at(start)));
        self.busy_until = sent;

        if let Some(ge) = self.cfg.burst {
            let flip = if self.in_bad_state {
                ge.p_bad_to_good
            } else {
                ge.p_good_to_bad
            };
            if self.rng.gen_bool(flip) {
                self.in_bad_state = !self.in_bad_state;
            }
            let p = if self.in_bad_state {
                ge.loss_bad
            } else {
                ge.loss_good
            };
            if self.rng.gen_bool(p) {
                self.stats.dropped_burst += 1;
                return Fate::Dropped(DropReason::Burst);
            }
        }
        if self.cfg.loss > 0.0 && self.rng.gen_bool(self.cfg.loss) {
            self.stats.dropped_loss += 1;
            return Fate::Dropped(DropReason::Loss);
        }

        let mut at = sent + self.cfg.delay;
        if self.cfg.reorder > 0.0 && self.rng.gen_bool(self.cfg.reorder) {
            self.stats.reordered += 1;
            at += self.cfg.reorder_delay;
        }
        let duplicate_at = if self.cfg.duplicate > 0.0 && self.rng.gen_bool(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            Some(at + Self::serialisation(bytes, self.rate_at(start)))
        } else {
            None
        };
        self.stats.delivered += 1;
        Fate::Deliver { at, duplicate_at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn serialises_back_to_back_then_adds_delay() {
        let mut link = Link::new(LinkConfig {
            rate_bps: 8e6, // 1 byte per microsecond
            delay: ms(10),
            ..Default::default()
        });
        let a = link.offer(Duration::ZERO, 1000);
        let b = link.offer(Duration::ZERO, 1000);
        assert_eq!(
            a,
            Fate::Deliver {
                at: ms(11),
                duplicate_at: None
            }
        );
        assert_eq!(
            b,
            Fate::Deliver {
                at: ms(12),
                duplicate_at: None
            }
        );
        // An idle link starts at `now`.
        let c = link.offer(ms(100), 1000);
        assert_eq!(
            c,
            Fate::Deliver {
                at: ms(111),
                duplicate_at: None
            }
        );
    }

    #[test]
    fn queue_limit_tail_drops_and_counts() {
        let mut link = Link::new(LinkConfig {
            rate_bps: 8e6,
            queue_limit_bytes: 2500,
            ..Default::default()
        });
        assert!(matches!(
            link.offer(Duration::ZERO, 1000),
            Fate::Deliver { .. }
        ));
        assert!(matches!(
            link.offer(Duration::ZERO, 1000),
            Fate::Deliver { .. }
        ));
        assert_eq!(
            link.offer(Duration::ZERO, 1000),
            Fate::Dropped(DropReason::QueueFull)
        );
        // After 1 ms one packet has left: room again.
        assert!(matches!(link.offer(ms(1), 1000), Fate::Deliver { .. }));
        assert_eq!(link.stats().dropped_queue, 1);
        assert_eq!(link.stats().delivered, 3);
    }

    #[test]
    fn loss_rate_matches_configuration_and_is_seeded() {
        let cfg = LinkConfig {
            loss: 0.2,
            seed: 7,
            ..Default::default()
        };
        let run = |cfg: &LinkConfig| {
            let mut link = Link::new(cfg.clone());
            (0..20_000)
                .map(|_| matches!(link.offer(Duration::ZERO, 100), Fate::Dropped(_)))
                .collect::<Vec<_>>()
        };
        let a = run(&cfg);
        assert_eq!(a, run(&cfg), "same seed, same losses");
        let lost = a.iter().filter(|l| **l).count() as f64 / a.len() as f64;
        assert!((lost - 0.2).abs() < 0.015, "loss {lost}");
    }

    #[test]
    fn gilbert_elliott_loses_in_bursts_at_its_mean_rate() {
        let ge = GilbertElliott {
            p_good_to_bad: 0.02,
            p_bad_to_good: 0.2,
            loss_good: 0.0,
            loss_bad: 0.9,
        };
        let mut link = Link::new(LinkConfig {
            burst: Some(ge),
            seed: 3,
            ..Default::default()
        });
        let losses: Vec<bool> = (0..50_000)
            .map(|_| matches!(link.offer(Duration::ZERO, 100), Fate::Dropped(_)))
            .collect();
        let rate = losses.iter().filter(|l| **l).count() as f64 / losses.len() as f64;
        assert!(
            (rate - ge.mean_loss()).abs() < 0.02,
            "{rate} vs {}",
            ge.mean_loss()
        );
        // Bursty: P(loss | previous lost) far above the mean.
        let pairs = losses.windows(2).filter(|w| w[0]).count() as f64;
        let both = losses.windows(2).filter(|w| w[0] && w[1]).count() as f64;
        assert!(both / pairs > 3.0 * rate);
    }

    #[test]
    fn capacity_schedule_changes_serialisation() {
        let cfg = LinkConfig::parse("8Mbit,at=1s:4Mbit").unwrap();
        let mut link = Link::new(cfg);
        let at = |f| match f {
            Fate::Deliver { at, .. } => at,
            _ => panic!("dropped"),
        };
        assert_eq!(at(link.offer(Duration::ZERO, 1000)), ms(1));
        assert_eq!(
            at(link.offer(Duration::from_secs(2), 1000)),
            Duration::from_secs(2) + ms(2)
        );
    }

    #[test]
    fn reorder_and_duplicate_are_counted() {
        let mut link = Link::new(LinkConfig::parse("reorder=50%/5ms,dup=50%,seed=1").unwrap());
        let mut reordered = 0;
        for i in 0..1000u64 {
            if let Fate::Deliver { at, duplicate_at } = link.offer(Duration::from_micros(i), 10) {
                if at > Duration::from_micros(i) {
                    reordered += 1;
                }
                if let Some(d) = duplicate_at {
                    assert!(d >= at);
                }
            }
        }
        assert_eq!(reordered as u64, link.stats().reordered);
        assert!(link.stats().reordered > 400 && link.stats().duplicated > 400);
    }

    #[test]
    fn spec_errors_name_the_item() {
        let e = LinkConfig::parse("1Mbit,150%").unwrap_err().to_string();
        assert!(e.contains("150%"), "{e}");
        let e = LinkConfig::parse("1Mbit,wobble=3").unwrap_err().to_string();
        assert!(e.contains("wobble"), "{e}");
        let cfg = LinkConfig::parse("250kbit,20%,delay=10ms,queue=64KiB").unwrap();
        assert_eq!(cfg.rate_bps, 250e3);
        assert_eq!(cfg.loss, 0.2);
        assert_eq!(cfg.delay, ms(10));
        assert_eq!(cfg.queue_limit_bytes, 65536);
    }

    /// Fuzzing found `15e-27bit` (1.5e-26 bit/s) parsing and then panicking in
    /// the first offer: rates below 1 bit/s are refused, and the model saturates
    /// whatever rate it is given.
    #[test]
    fn absurd_rates_are_refused_or_saturate_without_panicking() {
        let e = LinkConfig::parse("15e-27bit").unwrap_err().to_string();
        assert!(e.contains("below 1 bit/s"), "{e}");
        let mut cfg = LinkConfig::parse("1bit").unwrap();
        cfg.rate_bps = 1.5e-26;
        let mut link = Link::new(cfg);
        let _ = link.offer(Duration::ZERO, 1500);
        let _ = link.offer(Duration::ZERO, 1500);
        assert!(link.busy_until() >= MAX_SERIALISATION);
    }
}
