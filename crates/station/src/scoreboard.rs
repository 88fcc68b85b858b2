//! The scoreboard: what every policy knows about opcodes, instructions and devices.
//!
//! - [`OpcodeTable`]: per device, resource need and latency per opcode, seeded from
//!   the device's [`DeviceProfile`] (calibrated on that device, or modelled) when it
//!   joins, then averaged over a calibration window of its own completions
//!   (cumulative mean for the first `window` samples, then an exponential average of
//!   weight `1/window`); a calibrated seed counts as a full window of samples, a
//!   modelled one as one sample.
//! - [`FrameRecord`]: the instruction status table of one frame (ISSUE -> EXEC ->
//!   COMMIT with timestamps, remaining predecessors, retry count).
//! - [`DeviceTable`]: capacity and units in use per device, and its planned executors
//!   (running or coalesced instructions with estimated start and end).

use rustc_hash::FxHashMap;

use crate::costs::{CostSource, DeviceProfile};
use crate::dag::{FrameDag, InstrIdx};
use crate::isa::{DeviceId, DeviceKind, FrameId, Instr, Nanos, Opcode, MAX_DEVICE_ID};

const OPS: usize = Opcode::ALL.len();

/// Values kept by device id, in a vector indexed by id: ids are small (at most
/// [`MAX_DEVICE_ID`]) and the policy looks devices up dozens of times per dispatch.
#[derive(Clone, Debug)]
pub struct ById<T>(Vec<Option<T>>);

impl<T> Default for ById<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T> ById<T> {
    pub fn get(&self, id: DeviceId) -> Option<&T> {
        self.0.get(id as usize)?.as_ref()
    }

    pub fn get_mut(&mut self, id: DeviceId) -> Option<&mut T> {
        self.0.get_mut(id as usize)?.as_mut()
    }

    /// Keep `value` for `id`, handing back what it replaces.
    ///
    /// # Panics
    /// If `id` is past [`MAX_DEVICE_ID`] (a caller bug: inputs are checked first).
    pub fn insert(&mut self, id: DeviceId, value: T) -> Option<T> {
        assert!(
            id <= MAX_DEVICE_ID,
            "device id {id} is past the largest, {MAX_DEVICE_ID}"
        );
        let i = id as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i].replace(value)
    }

    pub fn remove(&mut self, id: DeviceId) -> Option<T> {
        self.0.get_mut(id as usize)?.take()
    }

    /// Every kept value with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (DeviceId, &T)> {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(id, v)| Some((id as DeviceId, v.as_ref()?)))
    }
}

/// Latency of an opcode on a device the table has no profile for (ns); only seen
/// while a device is being removed or before any joined.
const UNKNOWN_LATENCY_NS: Nanos = 20_000;

#[derive(Clone, Copy, Debug)]
struct Average {
    mean: f64,
    samples: u32,
}

/// One device's row: need and running latency average per opcode.
#[derive(Clone, Copy, Debug)]
struct CostRow {
    latency: [Average; OPS],
    need: [u32; OPS],
}

/// Opcode table: need and calibrated latency per (device, opcode).
#[derive(Clone, Debug)]
pub struct OpcodeTable {
    rows: ById<CostRow>,
    window: u32,
    observations: u64,
}

impl OpcodeTable {
    /// An empty table; `window` (>= 1) is the calibration window.
    pub fn new(window: u32) -> Self {
        Self {
            rows: ById::default(),
            window: window.max(1),
            observations: 0,
        }
    }

    fn row(&self, device: DeviceId) -> Option<&CostRow> {
        self.rows.get(device)
    }

    /// Seed `device`'s row from its profile (replacing any earlier incarnation's). A
    /// calibrated latency counts as a full window of samples, so single noisy
    /// completions do not swamp a measurement; a modelled one as a single sample, so
    /// the device's own completions replace the model within a few frames. (A model
    /// once put a 16x4 frame at 2.8 ms of work on the 2-core VM, against 1.3 ms
    /// measured in the run; as a full window it took about 60 frames to wear off,
    /// and until then LROC's work test shed frames on that estimate.)
    pub fn register(&mut self, device: DeviceId, profile: &DeviceProfile) {
        let row = CostRow {
            latency: profile.costs.map(|c| Average {
                mean: c.latency_ns as f64,
                samples: match profile.source {
                    CostSource::Calibrated => self.window,
                    CostSource::Modelled => 1,
                },
            }),
            need: profile.costs.map(|c| c.need.clamp(1, profile.units.max(1))),
        };
        self.rows.insert(device, row);
        self.observations += 1;
    }

    /// Calibrated latency of `op` on `device` at full width.
    pub fn latency(&self, device: DeviceId, op: Opcode) -> Nanos {
        self.row(device).map_or(UNKNOWN_LATENCY_NS, |r| {
            r.latency[op.index()].mean.round() as Nanos
        })
    }

    /// Latency of `op` on `device` when it gets `units` of its `need`.
    pub fn latency_with(&self, device: DeviceId, op: Opcode, units: u32) -> Nanos {
        let need = self.need(device, op).max(1) as u64;
        let units = u64::from(units.max(1)).min(need);
        self.latency(device, op).saturating_mul(need) / units
    }

    /// Resource units `op` uses on `device` at full width.
    pub fn need(&self, device: DeviceId, op: Opcode) -> u32 {
        self.row(device).map_or(1, |r| r.need[op.index()])
    }

    /// Fold in one measured run of `op` on `device` that had `units` of its need.
    pub fn observe(&mut self, device: DeviceId, op: Opcode, elapsed_ns: Nanos, units: u32) {
        let window = self.window;
        let need = self.need(device, op).max(1);
        let Some(row) = self.rows.get_mut(device) else {
            return;
        };
        // Normalise to full width: a kernel on half its units took about twice as long.
        let full = elapsed_ns as f64 * f64::from(units.clamp(1, need)) / f64::from(need);
        let avg = &mut row.latency[op.index()];
        avg.samples = avg.samples.saturating_add(1);
        let weight = 1.0 / f64::from(avg.samples.min(window));
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
    /// Calibrated unit-nanoseconds of its instructions not yet committed (the
    /// policy's estimate of the work the frame still needs).
    pub work_left_ns: Nanos,
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
            work_left_ns: 0,
        });
        rec.frame = frame;
        rec.arrival = arrival;
        rec.deadline = deadline;
        rec.order = order;
        rec.committed = 0;
        rec.bound = None;
        rec.work_left_ns = 0;
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
    /// Keyed with a fast hash: looked up on every dispatch and completion.
    pub running: FxHashMap<Instr, RunEntry>,
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
    devices: ById<DeviceEntry>,
    /// Live devices (kept: counting them is a walk over every id).
    live: usize,
    /// Devices added and removed so far (see [`DeviceTable::changes`]).
    changes: u64,
}

impl DeviceTable {
    /// Add device `id` (replacing a live one of that id).
    ///
    /// # Panics
    /// If `id` is past [`MAX_DEVICE_ID`] (a caller bug: inputs are checked first).
    pub fn add(&mut self, id: DeviceId, kind: DeviceKind, capacity: u32) {
        let entry = DeviceEntry {
            kind,
            capacity,
            in_use: 0,
            running: FxHashMap::default(),
            queued_unit_ns: 0,
            running_unit_ns: 0,
            completed: 0,
        };
        if self.devices.insert(id, entry).is_none() {
            self.live += 1;
        }
        self.changes += 1;
    }

    pub fn remove(&mut self, id: DeviceId) -> Option<DeviceEntry> {
        let old = self.devices.remove(id);
        if old.is_some() {
            self.live -= 1;
            self.changes += 1;
        }
        old
    }

    /// Devices added and removed so far: the live ids are the same while this is.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    pub fn get(&self, id: DeviceId) -> Option<&DeviceEntry> {
        self.devices.get(id)
    }

    pub fn get_mut(&mut self, id: DeviceId) -> Option<&mut DeviceEntry> {
        self.devices.get_mut(id)
    }

    pub fn contains(&self, id: DeviceId) -> bool {
        self.get(id).is_some()
    }

    /// Live devices in id order.
    pub fn iter(&self) -> impl Iterator<Item = (DeviceId, &DeviceEntry)> {
        self.devices.iter()
    }

    pub fn ids(&self) -> impl Iterator<Item = DeviceId> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The device whose costs stand for the pool in slack estimates: the largest
    /// device of the kind most of the capacity belongs to (lowest id on ties).
    pub fn main_device(&self) -> Option<DeviceId> {
        let total = |k: DeviceKind| -> u64 {
            self.iter()
                .map(|(_, d)| d)
                .filter(|d| d.kind == k)
                .map(|d| u64::from(d.capacity))
                .sum()
        };
        let kind = if total(DeviceKind::Gpu) > total(DeviceKind::Cpu) {
            DeviceKind::Gpu
        } else {
            DeviceKind::Cpu
        };
        self.iter()
            .filter(|(_, d)| d.kind == kind)
            .max_by_key(|(id, d)| (d.capacity, std::cmp::Reverse(*id)))
            .map(|(id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(kind: DeviceKind, units: u32, need: u32, ns: Nanos) -> DeviceProfile {
        let cost = crate::costs::OpcodeCost {
            need,
            latency_ns: ns,
        };
        DeviceProfile {
            kind,
            units,
            memory_bytes: 0,
            costs: [cost; OPS],
            source: crate::costs::CostSource::Calibrated,
        }
    }

    #[test]
    fn calibration_window_averages_then_forgets() {
        let mut t = OpcodeTable::new(4);
        t.register(0, &profile(DeviceKind::Cpu, 1, 1, 1_000));
        assert_eq!(t.latency(0, Opcode::Zf), 1_000);
        for _ in 0..4 {
            t.observe(0, Opcode::Zf, 100, 1);
        }
        // A full window of samples has mostly replaced the seed.
        assert!(
            t.latency(0, Opcode::Zf) < 400,
            "{}",
            t.latency(0, Opcode::Zf)
        );
        // Re-registering (a new incarnation) starts from its profile again.
        t.register(0, &profile(DeviceKind::Cpu, 1, 1, 1_000));
        assert_eq!(t.latency(0, Opcode::Zf), 1_000);
        t.observe(0, Opcode::Zf, 0, 1);
        assert_eq!(t.latency(0, Opcode::Zf), 750);
    }

    #[test]
    fn a_modelled_seed_gives_way_to_measurements_at_once() {
        let mut t = OpcodeTable::new(64);
        let modelled = DeviceProfile {
            source: CostSource::Modelled,
            ..profile(DeviceKind::Cpu, 1, 1, 2_000)
        };
        t.register(0, &modelled);
        t.register(1, &profile(DeviceKind::Cpu, 1, 1, 2_000));
        for d in [0, 1] {
            for _ in 0..3 {
                t.observe(d, Opcode::Zf, 1_000, 1);
            }
        }
        // The model is one sample among four; a calibration is 64 among 67.
        assert_eq!(t.latency(0, Opcode::Zf), 1_250);
        assert!(
            t.latency(1, Opcode::Zf) > 1_900,
            "{}",
            t.latency(1, Opcode::Zf)
        );
    }

    #[test]
    fn each_device_is_charged_its_own_costs() {
        let mut t = OpcodeTable::new(1);
        t.register(0, &profile(DeviceKind::Gpu, 132, 16, 1_000));
        t.register(1, &profile(DeviceKind::Gpu, 8, 16, 5_000));
        assert_eq!(t.need(0, Opcode::Zf), 16);
        // Never more than the device has.
        assert_eq!(t.need(1, Opcode::Zf), 8);
        assert_eq!(t.latency(1, Opcode::Zf), 5_000);
        assert_eq!(t.latency_with(0, Opcode::Zf, 8), 2_000);
        assert_eq!(t.latency_with(0, Opcode::Zf, 64), 1_000);
        // A run on 8 of 16 units that took 2000 ns is 1000 ns at full width.
        t.observe(0, Opcode::Zf, 2_000, 8);
        assert_eq!(t.latency(0, Opcode::Zf), 1_000);
        assert_eq!(t.latency(1, Opcode::Zf), 5_000, "device 1 untouched");
        // Unknown devices get a neutral guess and are never charged more than 1 unit.
        assert_eq!(t.need(9, Opcode::Zf), 1);
        t.observe(9, Opcode::Zf, 1, 1);
    }

    #[test]
    fn main_device_is_the_largest_of_the_main_kind() {
        let mut d = DeviceTable::default();
        assert_eq!(d.main_device(), None);
        d.add(0, DeviceKind::Cpu, 2);
        d.add(1, DeviceKind::Gpu, 132);
        d.add(2, DeviceKind::Gpu, 66);
        assert_eq!(d.main_device(), Some(1));
    }

    #[test]
    fn the_device_table_keeps_ids_in_order_and_counts_changes() {
        let mut d = DeviceTable::default();
        d.add(3, DeviceKind::Cpu, 1);
        d.add(0, DeviceKind::Cpu, 2);
        assert_eq!(d.ids().collect::<Vec<_>>(), [0, 3]);
        assert_eq!((d.len(), d.changes()), (2, 2));
        assert!(d.get(1).is_none() && d.get(99).is_none() && !d.contains(2));
        // Re-adding a live id replaces it: still two devices.
        d.add(3, DeviceKind::Gpu, 8);
        assert_eq!((d.len(), d.get(3).map(|e| e.capacity)), (2, Some(8)));
        assert_eq!(d.remove(3).map(|e| e.kind), Some(DeviceKind::Gpu));
        // Removing what is not there changes nothing.
        let before = d.changes();
        assert!(d.remove(3).is_none() && d.remove(500).is_none());
        assert_eq!((d.len(), d.changes()), (1, before));
        assert_eq!(d.ids().collect::<Vec<_>>(), [0]);
        d.remove(0);
        assert!(d.is_empty() && d.ids().next().is_none());
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
