//! The scoreboard: what every policy knows about opcodes, instructions and devices.
//!
//! - [`OpcodeTable`]: resource need per device kind and latency per opcode, averaged
//!   over a calibration window (cumulative mean for the first `window` samples, then an
//!   exponential average of weight `1/window`), seeded by `Policy::calibrate`.
//! - [`FrameRecord`]: the instruction status table of one frame (ISSUE -> EXEC ->
//!   COMMIT with timestamps, remaining predecessors, retry count).
//! - [`DeviceTable`]: capacity and units in use per device, and its planned executors
//!   (running or coalesced instructions with estimated start and end).

use std::collections::{BTreeMap, HashMap};

use crate::dag::{FrameDag, InstrIdx};
use crate::isa::{DeviceId, DeviceKind, FrameId, Instr, Nanos, Opcode};

const KINDS: usize = 2;
const OPS: usize = Opcode::ALL.len();

fn kind_index(kind: DeviceKind) -> usize {
    match kind {
        DeviceKind::Cpu => 0,
        DeviceKind::Gpu => 1,
    }
}

/// Latency before any calibration (ns): rough CPU figures for a 16x4 frame; the first
/// completions or a `calibrate` call replace them.
fn default_latency(op: Opcode) -> Nanos {
    match op {
        Opcode::Load | Opcode::Store | Opcode::Modul => 5_000,
        Opcode::Zf | Opcode::Decode => 50_000,
        _ => 20_000,
    }
}

/// Resource units one instruction uses at full width: a CPU kernel is one worker
/// thread; a GPU kernel spreads over a share of the SMs that grows with its work.
fn default_need(kind: DeviceKind, op: Opcode) -> u32 {
    match kind {
        DeviceKind::Cpu => 1,
        DeviceKind::Gpu => match op {
            Opcode::Load | Opcode::Store => 4,
            Opcode::Zf | Opcode::Precode | Opcode::EqDemod => 16,
            Opcode::PilotFft | Opcode::UpFft | Opcode::Ifft => 12,
            Opcode::Decode | Opcode::Encode | Opcode::Modul => 8,
        },
    }
}

#[derive(Clone, Copy, Debug)]
struct Average {
    mean: f64,
    samples: u32,
}

/// Opcode table: need and calibrated latency per (device kind, opcode).
#[derive(Clone, Debug)]
pub struct OpcodeTable {
    latency: [[Average; OPS]; KINDS],
    need: [[u32; OPS]; KINDS],
    window: u32,
    observations: u64,
}

impl OpcodeTable {
    /// A table with default figures; `window` (>= 1) is the calibration window.
    pub fn new(window: u32) -> Self {
        let mut latency = [[Average {
            mean: 0.0,
            samples: 0,
        }; OPS]; KINDS];
        let mut need = [[1; OPS]; KINDS];
        for kind in [DeviceKind::Cpu, DeviceKind::Gpu] {
            for op in Opcode::ALL {
                latency[kind_index(kind)][op.index()].mean = default_latency(op) as f64;
                need[kind_index(kind)][op.index()] = default_need(kind, op);
            }
        }
        Self {
            latency,
            need,
            window: window.max(1),
            observations: 0,
        }
    }

    /// Calibrated latency of `op` on `kind` at full width.
    pub fn latency(&self, kind: DeviceKind, op: Opcode) -> Nanos {
        self.latency[kind_index(kind)][op.index()].mean.round() as Nanos
    }

    /// Latency of `op` on `kind` when it gets `units` of its `need`.
    pub fn latency_with(&self, kind: DeviceKind, op: Opcode, units: u32) -> Nanos {
        let need = self.need(kind, op).max(1) as u64;
        let units = u64::from(units.max(1)).min(need);
        self.latency(kind, op).saturating_mul(need) / units
    }

    /// Resource units `op` uses on `kind` at full width.
    pub fn need(&self, kind: DeviceKind, op: Opcode) -> u32 {
        self.need[kind_index(kind)][op.index()]
    }

    /// Override the resource need (at least one unit).
    pub fn set_need(&mut self, kind: DeviceKind, op: Opcode, units: u32) {
        self.need[kind_index(kind)][op.index()] = units.max(1);
    }

    /// Seed the latency (a calibration from a previous run or a model): it counts as a
    /// full window of samples so single noisy completions do not swamp it.
    pub fn seed(&mut self, kind: DeviceKind, op: Opcode, latency_ns: Nanos) {
        self.latency[kind_index(kind)][op.index()] = Average {
            mean: latency_ns as f64,
            samples: self.window,
        };
        self.observations += 1;
    }

    /// Fold in one measured run of `op` that had `units` of its need.
    pub fn observe(&mut self, kind: DeviceKind, op: Opcode, elapsed_ns: Nanos, units: u32) {
        let need = self.need(kind, op).max(1);
        // Normalise to full width: a kernel on half its units took about twice as long.
        let full = elapsed_ns as f64 * f64::from(units.clamp(1, need)) / f64::from(need);
        let avg = &mut self.latency[kind_index(kind)][op.index()];
        avg.samples = avg.samples.saturating_add(1);
        let weight = 1.0 / f64::from(avg.samples.min(self.window));
        avg.mean += (full - avg.mean) * weight;
        self.observations += 1;
    }

    /// Number of seeds and observations so far (callers refresh derived tables on it).
    pub fn observations(&self) -> u64 {
        self.observations
    }
}

/// Where an instruction is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Some predecessor (or, for `Load`, the input) has not committed yet.
    Waiting,
    /// All inputs committed; queued for a device.
    Ready,
    /// Dispatched to a device (ISSUE; EXEC once the driver starts it).
    Issued,
    /// Finished and its outputs are visible (COMMIT).
    Committed,
}

/// One row of the instruction status table.
#[derive(Clone, Copy, Debug)]
pub struct InstrStatus {
    pub stage: Stage,
    pub device: Option<DeviceId>,
    pub units: u32,
    pub low_priority: bool,
    pub issued_at: Nanos,
    pub exec_at: Nanos,
    pub commit_at: Nanos,
    /// Failed runs so far.
    pub failures: u8,
    /// Device the last failure happened on (a retry avoids it).
    pub avoid: Option<DeviceId>,
    /// Queue key while `Ready` (to find it in its queue).
    pub queue_key: u64,
    /// Unit-nanoseconds it adds to its device's queued work while queued.
    pub queue_cost: u64,
}

impl InstrStatus {
    const fn new() -> Self {
        Self {
            stage: Stage::Waiting,
            device: None,
            units: 0,
            low_priority: false,
            issued_at: 0,
            exec_at: 0,
            commit_at: 0,
            failures: 0,
            avoid: None,
            queue_key: 0,
            queue_cost: 0,
        }
    }
}

/// The instruction status table of one admitted frame.
#[derive(Clone, Debug)]
pub struct FrameRecord {
    pub frame: FrameId,
    pub arrival: Nanos,
    pub deadline: Nanos,
    /// Admission order (frame-level baselines serve frames in it).
    pub order: u64,
    /// Uncommitted predecessors per instruction (`Load` counts its input as one).
    pub remaining: Vec<u32>,
    pub status: Vec<InstrStatus>,
    pub committed: usize,
    /// Device the whole frame is bound to (frame-level baseline).
    pub bound: Option<DeviceId>,
}

impl FrameRecord {
    /// A record for `frame` with every instruction waiting, reusing `spare`'s storage.
    pub fn reset(
        spare: Option<FrameRecord>,
        dag: &FrameDag,
        frame: FrameId,
        arrival: Nanos,
        deadline: Nanos,
        order: u64,
    ) -> Self {
        let mut rec = spare.unwrap_or_else(|| FrameRecord {
            frame,
            arrival,
            deadline,
            order,
            remaining: Vec::with_capacity(dag.len()),
            status: Vec::with_capacity(dag.len()),
            committed: 0,
            bound: None,
        });
        rec.frame = frame;
        rec.arrival = arrival;
        rec.deadline = deadline;
        rec.order = order;
        rec.committed = 0;
        rec.bound = None;
        rec.remaining.clear();
        rec.status.clear();
        for i in dag.topo_order() {
            let inputs = dag.preds(i).len() + usize::from(dag.opcode(i) == Opcode::Load);
            rec.remaining.push(inputs as u32);
            rec.status.push(InstrStatus::new());
        }
        rec
    }

    /// Whether every instruction has committed.
    pub fn is_complete(&self) -> bool {
        self.committed == self.status.len()
    }
}

/// A planned executor: an instruction running (or coalesced to run) on a device.
#[derive(Clone, Copy, Debug)]
pub struct RunEntry {
    pub idx: InstrIdx,
    pub units: u32,
    pub low_priority: bool,
    /// Coalesced behind this running instruction; holds no units until it completes.
    pub after: Option<Instr>,
    /// The coalesced instruction waiting on this one, if any.
    pub follower: Option<Instr>,
    pub est_start: Nanos,
    pub est_end: Nanos,
}

/// One executor device.
#[derive(Clone, Debug)]
pub struct DeviceEntry {
    pub kind: DeviceKind,
    pub capacity: u32,
    /// Units reserved by running instructions (over-committed ones included).
    pub in_use: u32,
    pub running: HashMap<Instr, RunEntry>,
    /// Estimated work (unit-ns at full width) waiting in this device's queue.
    pub queued_unit_ns: u64,
    /// Estimated work (unit-ns) of the instructions running on it.
    pub running_unit_ns: u64,
    /// Instructions completed on this device (for reports and tests).
    pub completed: u64,
}

impl DeviceEntry {
    /// Units free now (zero when over-committed).
    pub fn free(&self) -> u32 {
        self.capacity.saturating_sub(self.in_use)
    }

    /// Estimated wait before new work that needs `units` starts here: none when they
    /// are free, else the queued work and half the running work (on average half
    /// done) spread over the capacity. O(1), for placement at every readiness.
    pub fn backlog_ns(&self, units: u32) -> Nanos {
        if self.free() >= units {
            return 0;
        }
        let cap = u64::from(self.capacity.max(1));
        (self.queued_unit_ns + self.running_unit_ns / 2) / cap
    }

    /// Estimated time at which `units` will be free, from the running instructions'
    /// estimated ends (an overrun one is assumed to end now).
    pub fn free_at(&self, now: Nanos, units: u32) -> Nanos {
        if self.free() >= units {
            return now;
        }
        let mut ends: Vec<(Nanos, u32)> = self
            .running
            .values()
            .filter(|r| r.after.is_none())
            .map(|r| (r.est_end.max(now), r.units))
            .collect();
        ends.sort_unstable();
        let mut free = i64::from(self.capacity) - i64::from(self.in_use);
        for (end, u) in ends {
            free += i64::from(u);
            if free >= i64::from(units) {
                return end;
            }
        }
        Nanos::MAX
    }
}

/// The per-device table.
#[derive(Clone, Debug, Default)]
pub struct DeviceTable {
    devices: BTreeMap<DeviceId, DeviceEntry>,
}

impl DeviceTable {
    pub fn add(&mut self, id: DeviceId, kind: DeviceKind, capacity: u32) {
        self.devices.insert(
            id,
            DeviceEntry {
                kind,
                capacity,
                in_use: 0,
                running: HashMap::new(),
                queued_unit_ns: 0,
                running_unit_ns: 0,
                completed: 0,
            },
        );
    }

    pub fn remove(&mut self, id: DeviceId) -> Option<DeviceEntry> {
        self.devices.remove(&id)
    }

    pub fn get(&self, id: DeviceId) -> Option<&DeviceEntry> {
        self.devices.get(&id)
    }

    pub fn get_mut(&mut self, id: DeviceId) -> Option<&mut DeviceEntry> {
        self.devices.get_mut(&id)
    }

    pub fn contains(&self, id: DeviceId) -> bool {
        self.devices.contains_key(&id)
    }

    /// Live devices in id order.
    pub fn iter(&self) -> impl Iterator<Item = (DeviceId, &DeviceEntry)> {
        self.devices.iter().map(|(&id, d)| (id, d))
    }

    pub fn ids(&self) -> impl Iterator<Item = DeviceId> + '_ {
        self.devices.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Kind most of the capacity belongs to (the slack estimate's reference).
    pub fn main_kind(&self) -> DeviceKind {
        let gpu: u64 = self
            .devices
            .values()
            .filter(|d| d.kind == DeviceKind::Gpu)
            .map(|d| u64::from(d.capacity))
            .sum();
        let cpu: u64 = self
            .devices
            .values()
            .filter(|d| d.kind == DeviceKind::Cpu)
            .map(|d| u64::from(d.capacity))
            .sum();
        if gpu > cpu {
            DeviceKind::Gpu
        } else {
            DeviceKind::Cpu
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_window_averages_then_forgets() {
        let mut t = OpcodeTable::new(4);
        for _ in 0..4 {
            t.observe(DeviceKind::Cpu, Opcode::Zf, 100, 1);
        }
        // The cumulative mean over the first window replaces the default completely.
        assert_eq!(t.latency(DeviceKind::Cpu, Opcode::Zf), 100);
        t.observe(DeviceKind::Cpu, Opcode::Zf, 500, 1);
        assert_eq!(t.latency(DeviceKind::Cpu, Opcode::Zf), 200);
        t.seed(DeviceKind::Cpu, Opcode::Zf, 1_000);
        assert_eq!(t.latency(DeviceKind::Cpu, Opcode::Zf), 1_000);
        t.observe(DeviceKind::Cpu, Opcode::Zf, 0, 1);
        assert_eq!(t.latency(DeviceKind::Cpu, Opcode::Zf), 750);
    }

    #[test]
    fn partial_width_scales_latency() {
        let mut t = OpcodeTable::new(1);
        t.set_need(DeviceKind::Gpu, Opcode::Zf, 16);
        t.seed(DeviceKind::Gpu, Opcode::Zf, 1_000);
        assert_eq!(t.latency_with(DeviceKind::Gpu, Opcode::Zf, 8), 2_000);
        assert_eq!(t.latency_with(DeviceKind::Gpu, Opcode::Zf, 64), 1_000);
        // A run on 8 of 16 units that took 2000 ns is 1000 ns at full width.
        t.observe(DeviceKind::Gpu, Opcode::Zf, 2_000, 8);
        assert_eq!(t.latency(DeviceKind::Gpu, Opcode::Zf), 1_000);
    }

    #[test]
    fn free_at_walks_estimated_ends() {
        let mut table = DeviceTable::default();
        table.add(3, DeviceKind::Cpu, 2);
        let d = table.get_mut(3).unwrap();
        for (n, end) in [(0u16, 50), (1, 20)] {
            d.running.insert(
                Instr::new(0, 0, Opcode::Load, n as usize),
                RunEntry {
                    idx: 0,
                    units: 1,
                    low_priority: false,
                    after: None,
                    follower: None,
                    est_start: 0,
                    est_end: end,
                },
            );
            d.in_use += 1;
        }
        assert_eq!(d.free_at(10, 1), 20);
        assert_eq!(d.free_at(10, 2), 50);
        assert_eq!(d.free_at(10, 3), Nanos::MAX);
        assert_eq!(d.free_at(30, 1), 30);
    }
}
