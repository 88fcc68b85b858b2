//! Counters summed over a run's streams and ports, as the chdr commands report them.

use std::fmt;

use serde::Serialize;

use crate::radio::RadioReport;
use crate::streamer::StreamerReport;
use crate::tx::TxCounters;

/// The streamer's RX sequence and flow-control counters summed over its streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StreamTotals {
    /// Packets missing from the RX sequence.
    pub gaps: u64,
    /// Packets held back and put in order.
    pub reordered: u64,
    /// Packets arriving after their place had passed.
    pub stale: u64,
    /// Times a TX stream ran out of flow-control credit.
    pub stalls: u64,
}

impl StreamerReport {
    /// Sequence and flow-control counters summed over every stream.
    pub fn totals(&self) -> StreamTotals {
        StreamTotals {
            gaps: self.reorder.iter().map(|r| r.missing).sum(),
            reordered: self.reorder.iter().map(|r| r.held).sum(),
            stale: self.reorder.iter().map(|r| r.stale).sum(),
            stalls: self.credit.iter().map(|c| c.stalls).sum(),
        }
    }
}

impl RadioReport {
    /// Every TX port's counters summed.
    pub fn tx_totals(&self) -> TxCounters {
        self.tx
            .iter()
            .fold(TxCounters::default(), |a, t| TxCounters {
                packets: a.packets + t.packets,
                samples_played: a.samples_played + t.samples_played,
                zeros_played: a.zeros_played + t.zeros_played,
                underruns: a.underruns + t.underruns,
                late_packets: a.late_packets + t.late_packets,
                late_samples_dropped: a.late_samples_dropped + t.late_samples_dropped,
                seq_errors: a.seq_errors + t.seq_errors,
                overflows: a.overflows + t.overflows,
                overlaps: a.overlaps + t.overlaps,
                dropped_awaiting_resync: a.dropped_awaiting_resync + t.dropped_awaiting_resync,
                malformed: a.malformed + t.malformed,
                commands: a.commands + t.commands,
            })
    }
}

/// TX event counts in UHD's letters: `U=underruns L=late S=sequence O=overflows`.
pub struct EventCounts<'a>(pub &'a TxCounters);

impl fmt::Display for EventCounts<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        write!(
            f,
            "U={} L={} S={} O={}",
            t.underruns, t.late_packets, t.seq_errors, t.overflows
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_counts_read_as_uhd_letters() {
        let t = TxCounters {
            underruns: 1,
            late_packets: 2,
            seq_errors: 3,
            overflows: 4,
            ..Default::default()
        };
        assert_eq!(EventCounts(&t).to_string(), "U=1 L=2 S=3 O=4");
    }
}
