//! The destination's timing check, sans-IO. For every burst it is told when
//! each relay's copy should arrive; copies are reported with their arrival
//! tick; once the caller's watermark (all copies that arrived before it have
//! been reported) passes a burst's deadline, the burst is classified:
//!
//! - a copy is **on time** if `|arrival - intended| <= tolerance`, **late** if
//!   after that, **early** if before, **missing** if not seen by the deadline
//!   (`intended + deadline`; a copy arriving after it is missing too);
//! - the burst (**combined**) is on time if every copy is, missing if any copy
//!   is missing, and late otherwise (all arrived, some off time).
//!
//! Everything is counted: duplicates, copies for bursts already classified
//! (stale), copies for bursts never announced (unknown), and bursts the
//! bounded in-flight table had no room for (overflow).

use std::collections::VecDeque;

use crate::MAX_RELAYS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClassifierConfig {
    pub relays: usize,
    pub tolerance_ticks: u64,
    /// A copy must arrive within this many ticks after its intended time.
    pub deadline_ticks: u64,
    /// Bursts awaiting classification at once (bounded table).
    pub capacity: usize,
}

/// The verdict on one relay's copy. Offsets are `arrival - intended` in ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CopyOutcome {
    OnTime {
        offset: i64,
    },
    Late {
        offset: i64,
    },
    Early {
        offset: i64,
    },
    /// Not seen by the deadline; `arrived_offset` if it came after it.
    Missing {
        arrived_offset: Option<i64>,
    },
}

impl CopyOutcome {
    pub fn is_on_time(&self) -> bool {
        matches!(self, CopyOutcome::OnTime { .. })
    }

    /// The offset of a copy that arrived by the deadline.
    pub fn offset(&self) -> Option<i64> {
        match *self {
            CopyOutcome::OnTime { offset }
            | CopyOutcome::Late { offset }
            | CopyOutcome::Early { offset } => Some(offset),
            CopyOutcome::Missing { .. } => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Combined {
    OnTime,
    Late,
    Missing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstOutcome {
    pub burst: u64,
    relays: usize,
    copies: [CopyOutcome; MAX_RELAYS],
    pub combined: Combined,
}

impl BurstOutcome {
    pub fn copies(&self) -> &[CopyOutcome] {
        &self.copies[..self.relays]
    }
}

/// Counts of everything the classifier saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub bursts: u64,
    pub on_time: u64,
    pub late: u64,
    pub missing: u64,
    /// Bursts where at least one copy was on time (diversity still delivers).
    pub any_on_time: u64,
    pub per_relay: Vec<RelayTally>,
    pub duplicates: u64,
    /// Copies for bursts already classified.
    pub stale: u64,
    /// Copies for bursts never announced, or from a relay index out of range.
    pub unknown: u64,
    /// Bursts announced while the table was full: classified missing at once.
    pub overflow: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RelayTally {
    pub on_time: u64,
    pub late: u64,
    pub early: u64,
    pub missing: u64,
    /// Missing because they arrived after the deadline (before the burst was
    /// classified).
    pub after_deadline: u64,
    /// Copies that arrived after their burst was classified (already missing).
    pub stale: u64,
}

impl Tally {
    /// Fraction of bursts whose every copy was on time (0 with no bursts).
    pub fn on_time_fraction(&self) -> f64 {
        if self.bursts == 0 {
            0.0
        } else {
            self.on_time as f64 / self.bursts as f64
        }
    }
}

/// What happened to a reported copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyReceipt {
    Recorded,
    Duplicate,
    Stale,
    Unknown,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    burst: u64,
    intended: [u64; MAX_RELAYS],
    arrival: [Option<u64>; MAX_RELAYS],
    deadline: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyError {
    #[error("{0} relays configured; 1..={MAX_RELAYS} supported")]
    Relays(usize),
    #[error("burst {burst} announced after burst {last}: bursts must be announced in order")]
    OutOfOrder { burst: u64, last: u64 },
    #[error("{got} intended times given for {relays} relays")]
    IntendedCount { got: usize, relays: usize },
}

pub struct Classifier {
    cfg: ClassifierConfig,
    pending: VecDeque<Pending>,
    /// Highest burst announced.
    last: Option<u64>,
    tally: Tally,
}

impl Classifier {
    pub fn new(cfg: ClassifierConfig) -> Result<Self, ClassifyError> {
        if cfg.relays == 0 || cfg.relays > MAX_RELAYS {
            return Err(ClassifyError::Relays(cfg.relays));
        }
        Ok(Classifier {
            pending: VecDeque::with_capacity(cfg.capacity.max(1)),
            last: None,
            tally: Tally {
                per_relay: vec![RelayTally::default(); cfg.relays],
                ..Tally::default()
            },
            cfg,
        })
    }

    pub fn config(&self) -> ClassifierConfig {
        self.cfg
    }

    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Bursts announced and not yet classified.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The earliest deadline still open.
    pub fn next_deadline(&self) -> Option<u64> {
        self.pending.iter().map(|p| p.deadline).min()
    }

    /// Announce burst `burst` with each relay's intended arrival tick. Bursts
    /// are announced in increasing order. With the table full the burst is
    /// classified missing at once (and counted as overflow), and returned.
    pub fn expect(
        &mut self,
        burst: u64,
        intended: &[u64],
    ) -> Result<Option<BurstOutcome>, ClassifyError> {
        if intended.len() != self.cfg.relays {
            return Err(ClassifyError::IntendedCount {
                got: intended.len(),
                relays: self.cfg.relays,
            });
        }
        if let Some(last) = self.last.filter(|&l| burst <= l) {
            return Err(ClassifyError::OutOfOrder { burst, last });
        }
        self.last = Some(burst);
        let mut p = Pending {
            burst,
            intended: [0; MAX_RELAYS],
            arrival: [None; MAX_RELAYS],
            deadline: 0,
        };
        p.intended[..intended.len()].copy_from_slice(intended);
        p.deadline = intended
            .iter()
            .map(|&t| t.saturating_add(self.cfg.deadline_ticks))
            .max()
            .unwrap_or(0);
        if self.pending.len() >= self.cfg.capacity.max(1) {
            self.tally.overflow += 1;
            return Ok(Some(self.classify(&p)));
        }
        self.pending.push_back(p);
        Ok(None)
    }

    /// Relay `relay`'s copy of `burst` arrived at tick `arrival`.
    pub fn on_copy(&mut self, burst: u64, relay: usize, arrival: u64) -> CopyReceipt {
        if relay >= self.cfg.relays {
            self.tally.unknown += 1;
            return CopyReceipt::Unknown;
        }
        match self.pending.iter_mut().find(|p| p.burst == burst) {
            Some(p) if p.arrival[relay].is_some() => {
                self.tally.duplicates += 1;
                CopyReceipt::Duplicate
            }
            Some(p) => {
                p.arrival[relay] = Some(arrival);
                CopyReceipt::Recorded
            }
            None if self.last.is_some_and(|l| burst <= l) => {
                self.tally.stale += 1;
                self.tally.per_relay[relay].stale += 1;
                CopyReceipt::Stale
            }
            None => {
                self.tally.unknown += 1;
                CopyReceipt::Unknown
            }
        }
    }

    /// Classify the oldest burst whose deadline is before `watermark`: the
    /// caller promises every copy arriving before `watermark` was reported.
    pub fn poll(&mut self, watermark: u64) -> Option<BurstOutcome> {
        // Deadlines are not monotone across bursts when link delays differ,
        // so any expired burst may go first; classify in announcement order
        // among the expired ones.
        let i = self.pending.iter().position(|p| p.deadline < watermark)?;
        let p = self.pending.remove(i).expect("index from position");
        Some(self.classify(&p))
    }

    /// Classify everything still open (end of run): unseen copies are missing.
    pub fn drain(&mut self) -> Option<BurstOutcome> {
        let p = self.pending.pop_front()?;
        Some(self.classify(&p))
    }

    fn classify(&mut self, p: &Pending) -> BurstOutcome {
        let tol = self.cfg.tolerance_ticks as i64;
        let mut copies = [CopyOutcome::Missing {
            arrived_offset: None,
        }; MAX_RELAYS];
        for (r, copy) in copies.iter_mut().enumerate().take(self.cfg.relays) {
            let t = &mut self.tally.per_relay[r];
            *copy = match p.arrival[r] {
                None => {
                    t.missing += 1;
                    CopyOutcome::Missing {
                        arrived_offset: None,
                    }
                }
                Some(a) => {
                    let offset = a.wrapping_sub(p.intended[r]) as i64;
                    if a > p.intended[r].saturating_add(self.cfg.deadline_ticks) {
                        t.missing += 1;
                        t.after_deadline += 1;
                        CopyOutcome::Missing {
                            arrived_offset: Some(offset),
                        }
                    } else if offset.abs() <= tol {
                        t.on_time += 1;
                        CopyOutcome::OnTime { offset }
                    } else if offset > 0 {
                        t.late += 1;
                        CopyOutcome::Late { offset }
                    } else {
                        t.early += 1;
                        CopyOutcome::Early { offset }
                    }
                }
            };
        }
        let used = &copies[..self.cfg.relays];
        let combined = if used.iter().all(|c| c.is_on_time()) {
            Combined::OnTime
        } else if used
            .iter()
            .any(|c| matches!(c, CopyOutcome::Missing { .. }))
        {
            Combined::Missing
        } else {
            Combined::Late
        };
        self.tally.bursts += 1;
        match combined {
            Combined::OnTime => self.tally.on_time += 1,
            Combined::Late => self.tally.late += 1,
            Combined::Missing => self.tally.missing += 1,
        }
        self.tally.any_on_time += used.iter().any(|c| c.is_on_time()) as u64;
        BurstOutcome {
            burst: p.burst,
            relays: self.cfg.relays,
            copies,
            combined,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classifier() -> Classifier {
        Classifier::new(ClassifierConfig {
            relays: 2,
            tolerance_ticks: 10,
            deadline_ticks: 100,
            capacity: 4,
        })
        .unwrap()
    }

    #[test]
    fn boundaries_are_exact() {
        let mut c = classifier();
        let cases: [(u64, u64, CopyOutcome, CopyOutcome, Combined); 5] = [
            // relay 0 arrival, relay 1 arrival (intended 1000 and 1005)
            (
                1010,
                995,
                CopyOutcome::OnTime { offset: 10 },
                CopyOutcome::OnTime { offset: -10 },
                Combined::OnTime,
            ),
            (
                1011,
                1005,
                CopyOutcome::Late { offset: 11 },
                CopyOutcome::OnTime { offset: 0 },
                Combined::Late,
            ),
            (
                989,
                1005,
                CopyOutcome::Early { offset: -11 },
                CopyOutcome::OnTime { offset: 0 },
                Combined::Late,
            ),
            (
                1100,
                1106,
                CopyOutcome::Late { offset: 100 },
                CopyOutcome::Missing {
                    arrived_offset: Some(101),
                },
                Combined::Missing,
            ),
            (
                1000,
                u64::MAX,
                CopyOutcome::OnTime { offset: 0 },
                CopyOutcome::Missing {
                    arrived_offset: None,
                },
                Combined::Missing,
            ),
        ];
        for (b, (a0, a1, o0, o1, comb)) in cases.into_iter().enumerate() {
            let b = b as u64;
            assert_eq!(c.expect(b, &[1000, 1005]).unwrap(), None);
            assert_eq!(c.on_copy(b, 0, a0), CopyReceipt::Recorded);
            if a1 != u64::MAX {
                assert_eq!(c.on_copy(b, 1, a1), CopyReceipt::Recorded);
            }
            // Deadline 1105: not yet at watermark 1105, classified at 1106.
            assert_eq!(c.poll(1105), None);
            let out = c.poll(1106).unwrap();
            assert_eq!(out.burst, b);
            assert_eq!(out.copies(), &[o0, o1]);
            assert_eq!(out.combined, comb);
        }
        let t = c.tally();
        assert_eq!((t.bursts, t.on_time, t.late, t.missing), (5, 1, 2, 2));
        assert_eq!(t.any_on_time, 4);
        assert_eq!(t.per_relay[1].after_deadline, 1);
        assert_eq!(t.per_relay[0].early, 1);
    }

    #[test]
    fn nothing_vanishes() {
        let mut c = classifier();
        for b in 10..16 {
            let r = c.expect(b, &[b * 100, b * 100]).unwrap();
            // Capacity 4: bursts 14 and 15 are classified missing at once.
            assert_eq!(r.is_some(), b >= 14);
        }
        assert_eq!(c.on_copy(10, 0, 1000), CopyReceipt::Recorded);
        assert_eq!(c.on_copy(10, 0, 1001), CopyReceipt::Duplicate);
        assert_eq!(c.on_copy(10, 2, 1000), CopyReceipt::Unknown);
        assert_eq!(c.on_copy(99, 0, 1000), CopyReceipt::Unknown);
        assert_eq!(
            c.expect(12, &[0, 0]),
            Err(ClassifyError::OutOfOrder {
                burst: 12,
                last: 15
            })
        );
        let first = c.poll(u64::MAX).unwrap();
        assert_eq!(first.burst, 10);
        assert_eq!(c.on_copy(10, 1, 1000), CopyReceipt::Stale);
        let mut n = 1;
        while c.drain().is_some() {
            n += 1;
        }
        assert_eq!(n, 4);
        let t = c.tally();
        assert_eq!(t.bursts, 6);
        assert_eq!(t.missing, 6);
        assert_eq!((t.duplicates, t.unknown, t.stale, t.overflow), (1, 2, 1, 2));
        assert_eq!(t.per_relay[0].missing + t.per_relay[0].on_time, 6);
    }
}
