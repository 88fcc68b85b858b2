//! The relay host's logic, sans-IO: a stage-1 burst packet in (with the time
//! the host got it), the timed-TX packet for its radio out, stamped
//! `RX timestamp + delta`. It owns no socket and reads no clock, so tests
//! drive it with simulated time and the real driver with kernel timestamps.

use radiohost_chdr::wire::WireError;
use radiohost_iq::Ci16;

use crate::tag::{relay_packet_len, write_relay_packet, RelayPacket, RelayTag, TagError, TagKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SchedulerConfig {
    /// This relay's index (written into its copies' tags).
    pub relay: u8,
    /// Retransmit this many ticks after the burst's RX timestamp.
    pub delta_ticks: u64,
    /// The radio TX endpoint the copies are addressed to.
    pub tx_epid: u16,
    /// Largest burst in samples (scratch buffer size).
    pub max_samples: usize,
}

/// A copy scheduled for timed TX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    pub burst: u64,
    pub rx_ts: u64,
    pub tx_ts: u64,
    /// `tx_ts - now` when it was scheduled; negative: the host is already late
    /// (the copy is still handed to the radio, which decides).
    pub margin_ticks: i64,
    /// Bytes of the TX packet written to `out`.
    pub len: usize,
}

/// Why a datagram produced no TX packet. Each case has a counter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("not a relay burst: {0}")]
    Malformed(#[from] TagError),
    #[error("expected a stage-1 burst, got a {0:?} packet")]
    WrongKind(TagKind),
    #[error("burst {0} was already relayed (duplicate delivery)")]
    Duplicate(u64),
    #[error("burst {0} is older than the replay window: dropped")]
    TooOld(u64),
    #[error("burst of {samples} samples exceeds the configured maximum {max}")]
    TooLong { samples: usize, max: usize },
    #[error("RX timestamp {rx_ts} + delta {delta} overflows the tick counter")]
    TimeOverflow { rx_ts: u64, delta: u64 },
    #[error("encoding the TX packet failed: {0}")]
    Encode(WireError),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SchedulerCounters {
    pub received: u64,
    pub scheduled: u64,
    /// Scheduled with a negative margin (already past the TX time).
    pub late_at_host: u64,
    pub duplicates: u64,
    pub too_old: u64,
    pub malformed: u64,
}

/// Bursts remembered for duplicate detection (a sliding bitmap window).
const REPLAY_WINDOW: u64 = 64;

pub struct RelayScheduler {
    cfg: SchedulerConfig,
    seq: u16,
    /// Highest burst relayed and a bitmap of the `REPLAY_WINDOW` before it.
    highest: Option<u64>,
    seen: u64,
    scratch: Vec<Ci16>,
    counters: SchedulerCounters,
}

impl RelayScheduler {
    pub fn new(cfg: SchedulerConfig) -> Self {
        RelayScheduler {
            scratch: vec![Ci16::default(); cfg.max_samples],
            cfg,
            seq: 0,
            highest: None,
            seen: 0,
            counters: SchedulerCounters::default(),
        }
    }

    pub fn config(&self) -> SchedulerConfig {
        self.cfg
    }

    pub fn counters(&self) -> SchedulerCounters {
        self.counters
    }

    /// Bytes `out` needs for a burst of `samples`.
    pub fn out_len(samples: usize) -> usize {
        relay_packet_len(samples)
    }

    /// Handle one stage-1 datagram the host received at tick `now`; on success
    /// the timed-TX packet is in `out[..len]`.
    pub fn on_stage1(
        &mut self,
        datagram: &[u8],
        now: u64,
        out: &mut [u8],
    ) -> Result<Scheduled, ScheduleError> {
        self.counters.received += 1;
        let r = self.schedule(datagram, now, out);
        match &r {
            Ok(s) => {
                self.counters.scheduled += 1;
                self.counters.late_at_host += (s.margin_ticks < 0) as u64;
            }
            Err(ScheduleError::Duplicate(_)) => self.counters.duplicates += 1,
            Err(ScheduleError::TooOld(_)) => self.counters.too_old += 1,
            Err(_) => self.counters.malformed += 1,
        }
        r
    }

    fn schedule(
        &mut self,
        datagram: &[u8],
        now: u64,
        out: &mut [u8],
    ) -> Result<Scheduled, ScheduleError> {
        let p = RelayPacket::parse(datagram)?;
        if p.tag.kind != TagKind::Stage1 {
            return Err(ScheduleError::WrongKind(p.tag.kind));
        }
        let n = p.data.num_samples();
        if n > self.cfg.max_samples {
            return Err(ScheduleError::TooLong {
                samples: n,
                max: self.cfg.max_samples,
            });
        }
        let rx_ts = p.timestamp;
        let tx_ts = rx_ts
            .checked_add(self.cfg.delta_ticks)
            .ok_or(ScheduleError::TimeOverflow {
                rx_ts,
                delta: self.cfg.delta_ticks,
            })?;
        self.check_replay(p.tag.burst)?;
        p.data
            .read_samples(&mut self.scratch)
            .expect("scratch holds max_samples, checked above");
        let tag = RelayTag {
            kind: TagKind::RelayCopy,
            relay: self.cfg.relay,
            burst: p.tag.burst,
            source_ts: p.tag.source_ts,
            rx_ts,
        };
        let len = write_relay_packet(
            out,
            self.seq,
            self.cfg.tx_epid,
            tx_ts,
            &tag,
            &self.scratch[..n],
        )
        .map_err(ScheduleError::Encode)?;
        self.mark_seen(p.tag.burst);
        self.seq = self.seq.wrapping_add(1);
        Ok(Scheduled {
            burst: p.tag.burst,
            rx_ts,
            tx_ts,
            margin_ticks: tx_ts.wrapping_sub(now) as i64,
            len,
        })
    }

    fn check_replay(&self, burst: u64) -> Result<(), ScheduleError> {
        let Some(h) = self.highest else { return Ok(()) };
        if burst > h {
            return Ok(());
        }
        let back = h - burst;
        if back >= REPLAY_WINDOW {
            return Err(ScheduleError::TooOld(burst));
        }
        if self.seen & (1 << back) != 0 {
            return Err(ScheduleError::Duplicate(burst));
        }
        Ok(())
    }

    fn mark_seen(&mut self, burst: u64) {
        match self.highest {
            Some(h) if burst <= h => self.seen |= 1 << (h - burst),
            Some(h) => {
                let shift = burst - h;
                self.seen = if shift >= REPLAY_WINDOW {
                    1
                } else {
                    (self.seen << shift) | 1
                };
                self.highest = Some(burst);
            }
            None => {
                self.seen = 1;
                self.highest = Some(burst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::write_relay_packet;

    fn stage1(burst: u64, rx_ts: u64, n: usize) -> Vec<u8> {
        let tag = RelayTag {
            kind: TagKind::Stage1,
            relay: 0,
            burst,
            source_ts: rx_ts - 5,
            rx_ts: 0,
        };
        let samples: Vec<Ci16> = (0..n).map(|i| Ci16::new(i as i16, 3)).collect();
        let mut buf = vec![0u8; relay_packet_len(n)];
        let len = write_relay_packet(&mut buf, 0, 0x100, rx_ts, &tag, &samples).unwrap();
        buf.truncate(len);
        buf
    }

    fn sched() -> RelayScheduler {
        RelayScheduler::new(SchedulerConfig {
            relay: 1,
            delta_ticks: 2000,
            tx_epid: 0x201,
            max_samples: 16,
        })
    }

    #[test]
    fn copy_is_stamped_rx_plus_delta_with_the_same_samples() {
        let mut s = sched();
        let mut out = vec![0u8; RelayScheduler::out_len(16)];
        let r = s
            .on_stage1(&stage1(4, 10_000, 8), 10_500, &mut out)
            .unwrap();
        assert_eq!(
            (r.burst, r.rx_ts, r.tx_ts, r.margin_ticks),
            (4, 10_000, 12_000, 1500)
        );
        let p = RelayPacket::parse(&out[..r.len]).unwrap();
        assert_eq!(p.timestamp, 12_000);
        assert_eq!(p.data.header.dst_epid, 0x201);
        assert_eq!(
            p.tag,
            RelayTag {
                kind: TagKind::RelayCopy,
                relay: 1,
                burst: 4,
                source_ts: 9_995,
                rx_ts: 10_000
            }
        );
        let mut samples = vec![Ci16::default(); 8];
        p.data.read_samples(&mut samples).unwrap();
        assert_eq!(samples[7], Ci16::new(7, 3));
        // Past the TX time: still scheduled, counted as late at the host.
        let r = s
            .on_stage1(&stage1(5, 11_000, 8), 13_001, &mut out)
            .unwrap();
        assert_eq!(r.margin_ticks, -1);
        assert_eq!(s.counters().late_at_host, 1);
        assert_eq!(
            RelayPacket::parse(&out[..r.len])
                .unwrap()
                .data
                .header
                .seq_num,
            1
        );
    }

    #[test]
    fn duplicates_old_bursts_and_junk_are_refused_and_counted() {
        let mut s = sched();
        let mut out = vec![0u8; RelayScheduler::out_len(16)];
        s.on_stage1(&stage1(100, 1000, 4), 0, &mut out).unwrap();
        s.on_stage1(&stage1(98, 900, 4), 0, &mut out).unwrap(); // reordered: fine
        assert_eq!(
            s.on_stage1(&stage1(98, 900, 4), 0, &mut out),
            Err(ScheduleError::Duplicate(98))
        );
        assert_eq!(
            s.on_stage1(&stage1(100, 1000, 4), 0, &mut out),
            Err(ScheduleError::Duplicate(100))
        );
        assert_eq!(
            s.on_stage1(&stage1(30, 500, 4), 0, &mut out),
            Err(ScheduleError::TooOld(30))
        );
        s.on_stage1(&stage1(500, 5000, 4), 0, &mut out).unwrap(); // window jumps
        assert_eq!(
            s.on_stage1(&stage1(500, 5000, 4), 0, &mut out),
            Err(ScheduleError::Duplicate(500))
        );
        assert!(matches!(
            s.on_stage1(&stage1(501, 5000, 17), 0, &mut out),
            Err(ScheduleError::TooLong { samples: 17, .. })
        ));
        assert!(matches!(
            s.on_stage1(&[1, 2, 3], 0, &mut out),
            Err(ScheduleError::Malformed(_))
        ));
        assert!(matches!(
            s.on_stage1(&stage1(502, u64::MAX - 10, 4), 0, &mut out),
            Err(ScheduleError::TimeOverflow { .. })
        ));
        let c = s.counters();
        assert_eq!(
            (
                c.received,
                c.scheduled,
                c.duplicates,
                c.too_old,
                c.malformed
            ),
            (10, 3, 3, 1, 3)
        );
        // Only scheduled copies used sequence numbers: the radio sees no gap.
        let r = s.on_stage1(&stage1(503, 6000, 4), 0, &mut out).unwrap();
        assert_eq!(
            RelayPacket::parse(&out[..r.len])
                .unwrap()
                .data
                .header
                .seq_num,
            3
        );
    }
}
