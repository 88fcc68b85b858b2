//! Parallel WRITE_IQ verified by the node's checksum, with per-packet
//! acknowledged writes as the fallback for nodes whose checksum stays wrong.

use super::{NodeFailure, TransportError, WarpHost};
use crate::checksum::WriteChecksum;
use crate::node::BUFFER_SAMPLES;
use crate::udp::SegmentBatch;
use crate::wire::{
    self, Message, RfBuffer, SampleHeader, CMD_WRITE_IQ, FLAG_ROBUST, SAMPLE_FLAG_RESET_CHECKSUM,
};
use radiohost_iq::WarpWord;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Whole-buffer attempts per node before falling back to acknowledged packets.
const WHOLE_WRITE_ATTEMPTS: u32 = 2;
const MAX_TIMEOUT: Duration = Duration::from_secs(1);

/// A run of packets closed by one acknowledged packet.
struct Unit {
    slot: usize,
    /// Packet indices (within the node's samples) this unit sends.
    first: usize,
    last: usize,
    expected: u32,
    attempts: u32,
    per_packet_fallback: bool,
    done: bool,
}

pub(super) fn write_nodes(
    host: &mut WarpHost,
    nodes: &[usize],
    buffer: RfBuffer,
    start: u32,
    samples: &[&[WarpWord]],
) -> Result<(), TransportError> {
    let mut batch = std::mem::take(&mut host.write_batch);
    let result = write_units(host, nodes, buffer, start, samples, &mut batch);
    host.write_batch = batch;
    result
}

/// The write itself, sending through `batch` (kept in the host between writes).
fn write_units(
    host: &mut WarpHost,
    nodes: &[usize],
    buffer: RfBuffer,
    start: u32,
    samples: &[&[WarpWord]],
    batch: &mut SegmentBatch,
) -> Result<(), TransportError> {
    if let Some(s) = samples
        .iter()
        .find(|s| start as usize + s.len() > BUFFER_SAMPLES)
    {
        return Err(TransportError::Invalid(format!(
            "samples {start}..{} exceed the {BUFFER_SAMPLES}-sample buffer",
            start as usize + s.len()
        )));
    }
    let per = host.cfg.payload.samples_per_packet();
    let packet_start = |p: usize| start + (p * per) as u32;
    let packet_words = |slot: usize, p: usize| {
        let s = samples[slot];
        &s[p * per..((p + 1) * per).min(s.len())]
    };
    let checksum_of = |slot: usize, first: usize, last: usize| {
        let mut c = WriteChecksum::default();
        for p in first..=last {
            c.add_packet(
                packet_start(p),
                packet_words(slot, p).last().map_or(0, |w| w.i_xor_q()),
            );
        }
        c.value()
    };
    let mut units: Vec<Unit> = (0..nodes.len())
        .filter(|&slot| !samples[slot].is_empty())
        .map(|slot| {
            let last = samples[slot].len().div_ceil(per) - 1;
            Unit {
                slot,
                first: 0,
                last,
                expected: checksum_of(slot, 0, last),
                attempts: 0,
                per_packet_fallback: false,
                done: false,
            }
        })
        .collect();

    let mut timeout = host.cfg.timeout;
    let mut ack_for: HashMap<u16, usize> = HashMap::new();
    let began = Instant::now();
    let mut done_after = vec![Duration::ZERO; nodes.len()];
    // Whether each node answered anything at all (a wrong checksum is an answer).
    let mut heard = vec![false; nodes.len()];
    loop {
        // Units that exhausted their attempts fall back or fail.
        let mut failed = Vec::new();
        let mut fallback = Vec::new();
        for (u, unit) in units.iter_mut().enumerate().filter(|(_, u)| !u.done) {
            if !unit.per_packet_fallback && unit.attempts >= WHOLE_WRITE_ATTEMPTS {
                fallback.push(u);
            } else if unit.per_packet_fallback && unit.attempts > host.cfg.retries {
                failed.push(u);
            }
        }
        if !failed.is_empty() {
            return Err(write_failure(host, nodes, &units, &failed, &heard, timeout));
        }
        for u in fallback.into_iter().rev() {
            host.stats.write_fallbacks += 1;
            let why = if heard[units[u].slot] {
                "checksum still wrong"
            } else {
                "no acknowledgement"
            };
            tracing::warn!(
                node = host.nodes[nodes[units[u].slot]].id,
                "write {why} after {WHOLE_WRITE_ATTEMPTS} attempts: rewriting packet by packet"
            );
            let whole = units.swap_remove(u);
            for p in whole.first..=whole.last {
                units.push(Unit {
                    slot: whole.slot,
                    first: p,
                    last: p,
                    expected: checksum_of(whole.slot, p, p),
                    attempts: 0,
                    per_packet_fallback: true,
                    done: false,
                });
            }
        }
        if units.iter().all(|u| u.done) {
            host.node_latency = done_after;
            return Ok(());
        }

        // Send every pending unit, interleaving nodes packet by packet so all
        // node links fill at once.
        ack_for.clear();
        let op_first_seq = host.next_seq;
        let longest = units
            .iter()
            .filter(|u| !u.done)
            .map(|u| u.last - u.first)
            .max()
            .unwrap_or(0);
        let burst = host.gso_burst();
        for step in (0..=longest).step_by(burst) {
            for (u, unit) in units.iter_mut().enumerate().filter(|(_, u)| !u.done) {
                if step == 0 {
                    unit.attempts += 1;
                    if unit.attempts > 1 {
                        host.stats.write_retries += 1;
                    }
                }
                let first = unit.first + step;
                let last = (first + burst - 1).min(unit.last);
                for p in first..=last {
                    let seq = host.take_seq();
                    let closing = p == unit.last;
                    if closing {
                        ack_for.insert(seq, u);
                    }
                    let words = packet_words(unit.slot, p);
                    let header = SampleHeader {
                        buffer,
                        // Each unit restarts the node's checksum, so an acknowledgement
                        // covers exactly the unit's packets.
                        flags: if p == unit.first {
                            SAMPLE_FLAG_RESET_CHECKSUM
                        } else {
                            0
                        },
                        start: packet_start(p),
                        num_samples: words.len() as u32,
                    };
                    let t =
                        host.header(nodes[unit.slot], seq, if closing { FLAG_ROBUST } else { 0 });
                    let len = wire::SAMPLE_PACKET_OVERHEAD + 4 * words.len();
                    if !batch.fits(len) {
                        host.send_batch(nodes[unit.slot], batch)?;
                    }
                    batch.push_with(wire::MAX_DATAGRAM, |out| {
                        wire::encode_samples(out, &t, CMD_WRITE_IQ, &header, words)
                            .expect("packet sized to the frame payload")
                    });
                }
                if !batch.is_empty() {
                    host.send_batch(nodes[unit.slot], batch)?;
                }
            }
        }

        // Collect acknowledgements until all are in or the link goes quiet.
        let issued = host.next_seq.wrapping_sub(op_first_seq);
        let mut last_progress = Instant::now();
        while !ack_for.is_empty() {
            let quiet_left = timeout.saturating_sub(last_progress.elapsed());
            if quiet_left.is_zero() {
                timeout = (timeout * 2).min(MAX_TIMEOUT);
                break;
            }
            let mut progress = false;
            let mut refused = None;
            host.receive(quiet_left, |stats, node, d| {
                let seq = d.transport.seq_num;
                if seq.wrapping_sub(op_first_seq) >= issued {
                    stats.stale_replies += 1;
                    return;
                }
                let checksum = match d.message {
                    Message::WriteAck { checksum } => checksum,
                    Message::Refused {
                        command: CMD_WRITE_IQ,
                        reason,
                    } => {
                        refused.get_or_insert((node, reason));
                        return;
                    }
                    _ => {
                        stats.unexpected_reply += 1;
                        return;
                    }
                };
                match ack_for.remove(&seq) {
                    Some(u) if nodes[units[u].slot] == node => {
                        progress = true;
                        heard[units[u].slot] = true;
                        // A wrong checksum leaves the unit pending: it is resent.
                        units[u].done = checksum == units[u].expected;
                        if units[u].done {
                            done_after[units[u].slot] = began.elapsed();
                        }
                    }
                    Some(u) => {
                        ack_for.insert(seq, u);
                        stats.unexpected_reply += 1;
                    }
                    None => stats.duplicate_replies += 1,
                }
            })?;
            if let Some((node, reason)) = refused {
                return Err(host.refused(node, "WRITE_IQ", reason));
            }
            if progress {
                last_progress = Instant::now();
            }
        }
    }
}

fn write_failure(
    host: &WarpHost,
    nodes: &[usize],
    units: &[Unit],
    failed: &[usize],
    heard: &[bool],
    timeout: Duration,
) -> TransportError {
    let mut by_node: Vec<(usize, Vec<usize>, u32)> = Vec::new();
    for &u in failed {
        let unit = &units[u];
        match by_node.iter_mut().find(|(s, _, _)| *s == unit.slot) {
            Some((_, packets, tries)) => {
                packets.push(unit.first);
                *tries = (*tries).max(unit.attempts);
            }
            None => by_node.push((unit.slot, vec![unit.first], unit.attempts)),
        }
    }
    TransportError::Nodes(
        by_node
            .into_iter()
            .map(|(slot, packets, tries)| {
                let target = host.nodes[nodes[slot]];
                NodeFailure {
                    id: target.id,
                    addr: target.addr,
                    op: "WRITE_IQ",
                    tries: tries + WHOLE_WRITE_ATTEMPTS,
                    timeout,
                    what: if heard[slot] {
                        format!(
                            "{} packet(s) never acknowledged with the right checksum (first: packet {})",
                            packets.len(),
                            packets[0]
                        )
                    } else {
                        "no answer from the node: not one write was acknowledged".to_string()
                    },
                }
            })
            .collect(),
    )
}
