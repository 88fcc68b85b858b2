//! Parallel READ_IQ with per-packet tracking and selective re-requests.

use super::{NodeFailure, TransportError, WarpHost};
use crate::wire::{self, Message, ReadIqRequest, RfBuffer, CMD_READ_IQ};
use radiohost_iq::WarpWord;
use std::time::{Duration, Instant};

/// Most ranges re-requested from one node per round (a pathological loss pattern
/// falls back to asking for fewer, larger ranges next round).
const MAX_RANGES_PER_ROUND: usize = 64;
/// Quiet periods never grow past this.
const MAX_TIMEOUT: Duration = Duration::from_secs(1);

struct Tracker {
    node: usize,
    received: Vec<bool>,
    missing: usize,
    done_after: Duration,
}

impl Tracker {
    /// Missing packet-index runs as half-open sample ranges relative to `start`.
    fn missing_ranges(&self, per: u32, count: u32) -> Vec<(u32, u32)> {
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for (i, got) in self.received.iter().enumerate() {
            if *got {
                continue;
            }
            let a = i as u32 * per;
            let b = (a + per).min(count);
            match ranges.last_mut() {
                Some(last) if last.1 == a => last.1 = b,
                _ => ranges.push((a, b)),
            }
        }
        if ranges.len() > MAX_RANGES_PER_ROUND {
            // Merge into one span from the first to the last gap.
            let span = (ranges[0].0, ranges[ranges.len() - 1].1);
            ranges = vec![span];
        }
        ranges
    }
}

pub(super) fn read_nodes(
    host: &mut WarpHost,
    nodes: &[usize],
    buffer: RfBuffer,
    start: u32,
    count: u32,
    out: &mut [Vec<WarpWord>],
) -> Result<(), TransportError> {
    debug_assert!(out.len() == nodes.len() && out.iter().all(|v| v.len() == count as usize));
    let end = start as u64 + count as u64;
    if end > crate::node::BUFFER_SAMPLES as u64 {
        return Err(TransportError::Invalid(format!(
            "samples {start}..{end} exceed the {}-sample buffer",
            crate::node::BUFFER_SAMPLES
        )));
    }
    if count == 0 {
        // Nothing to ask for (a node would refuse an empty READ_IQ).
        host.node_latency = vec![Duration::ZERO; nodes.len()];
        return Ok(());
    }
    let per = host.cfg.payload.samples_per_packet() as u32;
    let packets = count.div_ceil(per) as usize;
    let mut trackers: Vec<Tracker> = nodes
        .iter()
        .map(|&node| Tracker {
            node,
            received: vec![false; packets],
            missing: packets,
            done_after: Duration::ZERO,
        })
        .collect();
    let began = Instant::now();
    let op_first_seq = host.next_seq;
    for t in &trackers {
        request(host, t.node, buffer, start, (0, count), per)?;
    }

    let mut timeout = host.cfg.timeout;
    let mut tries = 1;
    let mut last_progress = Instant::now();
    while trackers.iter().any(|t| t.missing > 0) {
        let quiet_left = timeout.saturating_sub(last_progress.elapsed());
        if quiet_left.is_zero() {
            if tries > host.cfg.retries {
                return Err(failure(
                    host, &trackers, buffer, start, count, per, tries, timeout,
                ));
            }
            tries += 1;
            timeout = (timeout * 2).min(MAX_TIMEOUT);
            for t in trackers.iter().filter(|t| t.missing > 0) {
                tracing::debug!(
                    node = host.nodes[t.node].id,
                    missing = t.missing,
                    try_ = tries,
                    "READ_IQ quiet for {timeout:?}: re-requesting missing ranges"
                );
                for range in t.missing_ranges(per, count) {
                    host.stats.rerequests += 1;
                    request(host, t.node, buffer, start, range, per)?;
                }
            }
            last_progress = Instant::now();
            continue;
        }
        let issued = host.next_seq.wrapping_sub(op_first_seq);
        let mut progress = false;
        let mut refused = None;
        host.receive(quiet_left, |stats, node, d| {
            if d.transport.seq_num.wrapping_sub(op_first_seq) >= issued {
                stats.stale_replies += 1;
                return;
            }
            if let Message::Refused {
                command: CMD_READ_IQ,
                reason,
            } = d.message
            {
                refused.get_or_insert((node, reason));
                return;
            }
            let Some(slot) = trackers.iter().position(|t| t.node == node) else {
                stats.unexpected_reply += 1;
                return;
            };
            let t = &mut trackers[slot];
            match accept(
                t,
                &mut out[slot],
                &d.message,
                buffer,
                start,
                count,
                per,
                began,
            ) {
                Accepted::New => progress = true,
                Accepted::Duplicate => stats.duplicate_replies += 1,
                Accepted::NotOurs => stats.unexpected_reply += 1,
            }
        })?;
        if let Some((node, reason)) = refused {
            return Err(host.refused(node, "READ_IQ", reason));
        }
        if progress {
            last_progress = Instant::now();
        }
    }
    host.node_latency = trackers.iter().map(|t| t.done_after).collect();
    Ok(())
}

enum Accepted {
    New,
    Duplicate,
    NotOurs,
}

#[allow(clippy::too_many_arguments)]
fn accept(
    t: &mut Tracker,
    samples: &mut [WarpWord],
    m: &Message<'_>,
    buffer: RfBuffer,
    start: u32,
    count: u32,
    per: u32,
    began: Instant,
) -> Accepted {
    let Message::Samples {
        command: CMD_READ_IQ,
        header,
        words,
    } = m
    else {
        return Accepted::NotOurs;
    };
    if header.buffer != buffer || header.start < start || header.start - start >= count {
        return Accepted::NotOurs;
    }
    let offset = header.start - start;
    if !offset.is_multiple_of(per) || words.len() as u32 != per.min(count - offset) {
        return Accepted::NotOurs;
    }
    let index = (offset / per) as usize;
    if t.received[index] {
        return Accepted::Duplicate;
    }
    let at = offset as usize;
    words.copy_to(&mut samples[at..at + words.len()]);
    t.received[index] = true;
    t.missing -= 1;
    if t.missing == 0 {
        t.done_after = began.elapsed();
    }
    Accepted::New
}

fn request(
    host: &mut WarpHost,
    node: usize,
    buffer: RfBuffer,
    start: u32,
    (a, b): (u32, u32),
    per: u32,
) -> Result<(), TransportError> {
    let seq = host.take_seq();
    let req = ReadIqRequest {
        buffers: buffer.mask() as u32,
        start: start + a,
        num_samples: b - a,
        bytes_per_packet: per * 4,
        num_packets: (b - a).div_ceil(per),
    };
    let mut buf = [0u8; 64];
    let n = wire::encode_read_request(&mut buf, &host.header(node, seq, 0), &req)
        .expect("read request fits");
    host.send(node, &buf[..n])
}

#[allow(clippy::too_many_arguments)]
fn failure(
    host: &WarpHost,
    trackers: &[Tracker],
    buffer: RfBuffer,
    start: u32,
    count: u32,
    per: u32,
    tries: u32,
    timeout: Duration,
) -> TransportError {
    let failures = trackers
        .iter()
        .filter(|t| t.missing > 0)
        .map(|t| {
            let ranges: Vec<String> = t
                .missing_ranges(per, count)
                .iter()
                .take(4)
                .map(|(a, b)| format!("{}..{}", start + a, start + b))
                .collect();
            let target = host.nodes[t.node];
            NodeFailure {
                id: target.id,
                addr: target.addr,
                op: "READ_IQ",
                tries,
                timeout,
                what: format!(
                    "{} of {} packets of RF{:?} missing (samples {}{})",
                    t.missing,
                    t.received.len(),
                    buffer,
                    ranges.join(", "),
                    if t.missing_ranges(per, count).len() > 4 {
                        ", ..."
                    } else {
                        ""
                    }
                ),
            }
        })
        .collect();
    TransportError::Nodes(failures)
}
