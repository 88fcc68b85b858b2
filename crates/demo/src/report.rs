//! What a demo run reports: one [`StageReport`] per stage, chained by digests.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// One named counter or measurement of a stage.
#[derive(Clone, Debug, Serialize)]
pub struct Counter {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
}

/// What one stage took in, gave out, how long it took and whether its output checked out.
#[derive(Clone, Debug, Serialize)]
pub struct StageReport {
    pub name: &'static str,
    /// What came in, in words.
    pub input: String,
    /// What went out, in words.
    pub output: String,
    /// SHA-256 (hex) of what the stage consumed: equal to the previous stage's `output_digest`.
    pub input_digest: String,
    /// SHA-256 (hex) of what the stage produced.
    pub output_digest: String,
    pub counters: Vec<Counter>,
    /// Start, relative to the start of the run.
    pub start_ms: f64,
    pub wall_ms: f64,
    /// Every check of this stage held.
    pub passed: bool,
    /// Why it did not pass.
    pub failures: Vec<String>,
    /// What the stage's libraries reported that is worth reading (thread setup
    /// the kernel refused, clipping, ...).
    pub notes: Vec<String>,
}

impl StageReport {
    pub(crate) fn new(name: &'static str) -> Self {
        StageReport {
            name,
            input: String::new(),
            output: String::new(),
            input_digest: String::new(),
            output_digest: String::new(),
            counters: Vec::new(),
            start_ms: 0.0,
            wall_ms: 0.0,
            passed: true,
            failures: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(crate) fn count(&mut self, name: &'static str, value: f64, unit: &'static str) {
        self.counters.push(Counter { name, value, unit });
    }

    /// Records a check; a false `ok` fails the stage with `what`.
    pub(crate) fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.passed = false;
            self.failures.push(what());
        }
    }
}

/// One receiver's delivery of one user's payload.
#[derive(Clone, Debug, Serialize)]
pub struct Delivery {
    pub user: usize,
    pub receiver: usize,
    pub link: String,
    pub bytes: u64,
    /// Completion in virtual time, if it completed.
    pub seconds: Option<f64>,
    /// What the link's rate allows at best.
    pub floor_seconds: f64,
    /// SHA-256 of the bytes this receiver holds.
    pub sha256: String,
    /// Equal to the user's original payload digest.
    pub verified: bool,
}

/// A span of work on the timeline (`--svg`).
#[derive(Clone, Debug, Serialize)]
pub struct Span {
    pub stage: &'static str,
    /// Frame index, or `None` for work that spans the stage.
    pub frame: Option<u64>,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct DemoReport {
    pub config: crate::DemoConfig,
    pub stages: Vec<StageReport>,
    /// SHA-256 of each user's original payload (all frames, packed MSB first).
    pub user_payload_sha256: Vec<String>,
    pub deliveries: Vec<Delivery>,
    pub timeline: Vec<Span>,
    pub wall_s: f64,
    /// Every stage passed and every digest link of the chain holds.
    pub passed: bool,
}

impl DemoReport {
    /// Stage pairs whose digests do not chain (a stage's input digest differs
    /// from the previous stage's output digest).
    pub fn chain_breaks(&self) -> Vec<(&'static str, &'static str)> {
        self.stages
            .windows(2)
            .filter(|w| w[0].output_digest != w[1].input_digest)
            .map(|w| (w[0].name, w[1].name))
            .collect()
    }
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    radiohost_iq::block::hex(&Sha256::digest(bytes))
}

/// Hex SHA-256 over several byte strings, each prefixed by its length (so the
/// split between them counts).
pub fn sha256_parts<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    radiohost_iq::block::hex(&h.finalize())
}

/// Hex SHA-256 over a sequence of blocks' digests.
pub fn blocks_digest<'a>(blocks: impl IntoIterator<Item = &'a radiohost_iq::Block>) -> String {
    let mut h = Sha256::new();
    for b in blocks {
        h.update(b.digest());
    }
    radiohost_iq::block::hex(&h.finalize())
}

/// Bits (one per byte, 0 or 1) packed MSB first; a ragged tail is zero-padded.
pub fn pack_bits(bits: &[u8]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |acc, (i, &b)| acc | ((b & 1) << (7 - i)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_digests_depend_on_the_split() {
        assert_ne!(
            sha256_parts([&b"ab"[..], &b"c"[..]]),
            sha256_parts([&b"a"[..], &b"bc"[..]])
        );
    }
}
