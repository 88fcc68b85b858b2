//! Credit-based flow control (sans-IO), both ends.
//!
//! The receiver owns a buffer of `capacity` packets/bytes and reports, in stream
//! status packets, how much it has *consumed* (freed) since INIT. The sender may
//! have at most `capacity` in flight: sent minus consumed. Counts wrap (40-bit
//! packets, 64-bit bytes), so all arithmetic is modular.

use crate::wire::{StreamCommand, StreamCommandOp, StreamStatus, StreamStatusCode};

const PKT_MASK: u64 = (1 << 40) - 1;

/// Sender side: decides whether the next packet may go now.
#[derive(Clone, Debug)]
pub struct CreditSender {
    src_epid: u16,
    capacity_pkts: u64,
    capacity_bytes: u64,
    sent_pkts: u64,
    sent_bytes: u64,
    consumed_pkts: u64,
    consumed_bytes: u64,
    initialised: bool,
    stalled: bool,
    counters: CreditCounters,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CreditCounters {
    /// Times the sender ran out of credit (start of each stall).
    pub stalls: u64,
    pub statuses: u64,
    /// Status packets reporting an error (anything but OKAY).
    pub error_statuses: u64,
}

/// What a stream status means for the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusAction {
    /// Credit updated; `unstalled` if this ended a stall.
    Credit { unstalled: bool },
    /// The receiver reported an error; resync with this command to recover.
    Error {
        code: StreamStatusCode,
        info: u64,
        resync: StreamCommand,
    },
}

impl CreditSender {
    pub fn new(src_epid: u16) -> Self {
        CreditSender {
            src_epid,
            capacity_pkts: 0,
            capacity_bytes: 0,
            sent_pkts: 0,
            sent_bytes: 0,
            consumed_pkts: 0,
            consumed_bytes: 0,
            initialised: false,
            stalled: false,
            counters: CreditCounters::default(),
        }
    }

    /// The INIT command that opens the stream, asking for a status every
    /// `status_period_pkts` consumed packets.
    pub fn init_command(&mut self, status_period_pkts: u64) -> StreamCommand {
        self.sent_pkts = 0;
        self.sent_bytes = 0;
        self.consumed_pkts = 0;
        self.consumed_bytes = 0;
        StreamCommand {
            src_epid: self.src_epid,
            op: StreamCommandOp::Init,
            op_data: 0,
            num_pkts: status_period_pkts & PKT_MASK,
            num_bytes: 0,
        }
    }

    pub fn is_initialised(&self) -> bool {
        self.initialised
    }

    pub fn counters(&self) -> CreditCounters {
        self.counters
    }

    pub fn in_flight_pkts(&self) -> u64 {
        self.sent_pkts.wrapping_sub(self.consumed_pkts) & PKT_MASK
    }

    pub fn in_flight_bytes(&self) -> u64 {
        self.sent_bytes.wrapping_sub(self.consumed_bytes)
    }

    /// May a packet of `bytes` go now? Records the start of a stall when not.
    pub fn can_send(&mut self, bytes: usize) -> bool {
        let ok = self.initialised
            && self.in_flight_pkts() < self.capacity_pkts
            && self.in_flight_bytes() + bytes as u64 <= self.capacity_bytes;
        if !ok && !self.stalled && self.initialised {
            self.stalled = true;
            self.counters.stalls += 1;
        }
        ok
    }

    pub fn on_sent(&mut self, bytes: usize) {
        self.sent_pkts = (self.sent_pkts + 1) & PKT_MASK;
        self.sent_bytes = self.sent_bytes.wrapping_add(bytes as u64);
    }

    pub fn is_stalled(&self) -> bool {
        self.stalled
    }

    pub fn on_status(&mut self, s: &StreamStatus) -> StatusAction {
        self.counters.statuses += 1;
        self.capacity_pkts = s.capacity_pkts as u64;
        self.capacity_bytes = s.capacity_bytes;
        self.initialised = true;
        // Counts only move forward; an old status arriving late must not add credit.
        if (s.xfer_count_pkts.wrapping_sub(self.consumed_pkts) & PKT_MASK) <= self.in_flight_pkts()
        {
            self.consumed_pkts = s.xfer_count_pkts;
            self.consumed_bytes = s.xfer_count_bytes;
        }
        if s.status != StreamStatusCode::Okay {
            self.counters.error_statuses += 1;
            // Resync the receiver's counts to ours so credit accounting restarts clean.
            let resync = StreamCommand {
                src_epid: self.src_epid,
                op: StreamCommandOp::Resync,
                op_data: 0,
                num_pkts: self.sent_pkts,
                num_bytes: self.sent_bytes,
            };
            return StatusAction::Error {
                code: s.status,
                info: s.status_info,
                resync,
            };
        }
        let unstalled = self.stalled
            && self.in_flight_pkts() < self.capacity_pkts
            && self.in_flight_bytes() < self.capacity_bytes;
        if unstalled {
            self.stalled = false;
        }
        StatusAction::Credit { unstalled }
    }
}

/// Receiver side: counts consumption and says when a status is due.
#[derive(Clone, Debug)]
pub struct CreditReceiver {
    epid: u16,
    capacity_pkts: u32,
    capacity_bytes: u64,
    consumed_pkts: u64,
    consumed_bytes: u64,
    period_pkts: u64,
    since_status: u64,
    /// The sender's EPID learned from INIT: statuses are addressed to it.
    pub peer_epid: u16,
}

impl CreditReceiver {
    pub fn new(epid: u16, capacity_pkts: u32, capacity_bytes: u64) -> Self {
        CreditReceiver {
            epid,
            capacity_pkts,
            capacity_bytes,
            consumed_pkts: 0,
            consumed_bytes: 0,
            period_pkts: 1,
            since_status: 0,
            peer_epid: 0,
        }
    }

    pub fn capacity_pkts(&self) -> u32 {
        self.capacity_pkts
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    pub fn status(&self, code: StreamStatusCode, info: u64) -> StreamStatus {
        StreamStatus {
            src_epid: self.epid,
            status: code,
            capacity_bytes: self.capacity_bytes,
            capacity_pkts: self.capacity_pkts,
            xfer_count_pkts: self.consumed_pkts & PKT_MASK,
            xfer_count_bytes: self.consumed_bytes,
            buff_info: 0,
            status_info: info & ((1 << 48) - 1),
        }
    }

    /// Handle a stream command; every command is answered with a status.
    pub fn on_command(&mut self, c: &StreamCommand) -> StreamStatus {
        self.peer_epid = c.src_epid;
        match c.op {
            StreamCommandOp::Init => {
                self.consumed_pkts = 0;
                self.consumed_bytes = 0;
                self.period_pkts = c.num_pkts.max(1);
                self.since_status = 0;
            }
            StreamCommandOp::Resync => {
                self.consumed_pkts = c.num_pkts;
                self.consumed_bytes = c.num_bytes;
                self.since_status = 0;
            }
            StreamCommandOp::Ping => {}
        }
        self.status(StreamStatusCode::Okay, 0)
    }

    /// A packet of `bytes` left the buffer. Returns a status when one is due.
    pub fn on_consumed(&mut self, bytes: usize) -> Option<StreamStatus> {
        self.consumed_pkts = (self.consumed_pkts + 1) & PKT_MASK;
        self.consumed_bytes = self.consumed_bytes.wrapping_add(bytes as u64);
        self.since_status += 1;
        if self.since_status >= self.period_pkts {
            self.since_status = 0;
            return Some(self.status(StreamStatusCode::Okay, 0));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sender_stalls_at_capacity_and_resumes_on_status() {
        let mut rx = CreditReceiver::new(2, 4, 1 << 20);
        let mut tx = CreditSender::new(1);
        let init = tx.init_command(2);
        assert!(!tx.can_send(100), "no credit before the first status");
        let st = rx.on_command(&init);
        assert_eq!(tx.on_status(&st), StatusAction::Credit { unstalled: false });
        for _ in 0..4 {
            assert!(tx.can_send(100));
            tx.on_sent(100);
        }
        assert!(!tx.can_send(100));
        assert!(!tx.can_send(100));
        assert_eq!(
            tx.counters().stalls,
            1,
            "one stall, however often it is polled"
        );
        assert!(rx.on_consumed(100).is_none());
        let st = rx.on_consumed(100).expect("status every 2 packets");
        assert_eq!(tx.on_status(&st), StatusAction::Credit { unstalled: true });
        assert_eq!(tx.in_flight_pkts(), 2);
        assert!(tx.can_send(100));
    }

    #[test]
    fn byte_capacity_limits_too_and_stale_status_adds_no_credit() {
        let mut rx = CreditReceiver::new(2, 100, 250);
        let mut tx = CreditSender::new(1);
        let init = tx.init_command(1);
        tx.on_status(&rx.on_command(&init));
        tx.on_sent(100);
        tx.on_sent(100);
        assert!(!tx.can_send(100));
        let s1 = rx.on_consumed(100).unwrap();
        let s2 = rx.on_consumed(100).unwrap();
        tx.on_status(&s2);
        assert_eq!(tx.in_flight_pkts(), 0);
        tx.on_status(&s1); // reordered older status
        assert_eq!(tx.in_flight_pkts(), 0);
    }

    #[test]
    fn error_status_yields_resync_that_realigns_counts() {
        let mut rx = CreditReceiver::new(2, 8, 1 << 20);
        let mut tx = CreditSender::new(1);
        let init = tx.init_command(1);
        tx.on_status(&rx.on_command(&init));
        tx.on_sent(10);
        tx.on_sent(10);
        tx.on_sent(10);
        let err = rx.status(StreamStatusCode::SeqErr, 7);
        let StatusAction::Error { code, info, resync } = tx.on_status(&err) else {
            panic!()
        };
        assert_eq!((code, info), (StreamStatusCode::SeqErr, 7));
        let st = rx.on_command(&resync);
        assert_eq!(st.xfer_count_pkts, 3);
        tx.on_status(&st);
        assert_eq!(tx.in_flight_pkts(), 0);
    }
}
