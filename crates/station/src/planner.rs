//! Structural analysis (MegaStation-style planner): where an instruction should run.
//!
//! 1. On the device that ran its predecessors when enough capacity is free there:
//!    its full need (full parallelism) or at least `alpha` of it (partial).
//! 2. Else on another device when the wait saved there beats the cost of copying the
//!    inputs over (fragmented parallelism): the device with free capacity (or the
//!    shortest backlog) where it is estimated to finish first.
//! 3. Else delayed: it waits in its predecessors' device's queue, ordered by slack
//!    (deadline minus critical path), where the per-device scheduler takes it as
//!    soon as capacity frees, over-commits it, or another device steals it.
//!
//! Estimates go frame, then instruction: [`estimate_frame`] bounds a whole frame on
//! the pool (critical path vs total work over total capacity); placement uses the
//! per-device planned executors' estimated ends.

use crate::dag::{FrameDag, InstrIdx};
use crate::isa::{DeviceId, DeviceKind, Nanos, Opcode};
use crate::scoreboard::{DeviceTable, FrameRecord, OpcodeTable, Stage};

/// Predecessors examined to find the data's device (bounds the cost for wide joins).
const AFFINITY_SAMPLE: usize = 16;

/// Planner tunables (a view of `PolicyParams`).
#[derive(Clone, Copy, Debug)]
pub struct PlannerParams {
    pub alpha: f64,
    /// Fixed cost of one copy between CPU devices / when a GPU is involved.
    pub copy_cost_ns: Nanos,
    pub gpu_copy_cost_ns: Nanos,
    /// Copy bandwidth in bytes per ns, same split.
    pub copy_bytes_per_ns: [f64; 2],
    /// Bytes each opcode's instruction reads from its predecessors (by [`Opcode::index`]).
    pub input_bytes: [u64; Opcode::ALL.len()],
    /// Bytes its successors read from it: moving it away from its successors' device
    /// means copying this back.
    pub output_bytes: [u64; Opcode::ALL.len()],
}

/// Why an instruction was queued where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No predecessor device (an input or encode): the device it would start soonest.
    Free,
    /// Full need free on the predecessors' device.
    Full,
    /// At least alpha of the need free on the predecessors' device.
    Partial,
    /// Moved to another device: the wait saved beats the copy of its inputs.
    Fragmented,
    /// The predecessors' device is busy but waiting there is cheaper than a copy: the
    /// instruction is delayed in that device's deadline-ordered queue.
    Delayed,
}

/// Device that ran most of `idx`'s (sampled) predecessors.
pub fn predecessor_device(dag: &FrameDag, rec: &FrameRecord, idx: InstrIdx) -> Option<DeviceId> {
    let mut best: Option<(DeviceId, usize)> = None;
    let mut counts: [(DeviceId, usize); AFFINITY_SAMPLE] = [(0, 0); AFFINITY_SAMPLE];
    let mut n = 0;
    for &p in dag.preds(idx).iter().take(AFFINITY_SAMPLE) {
        let st = &rec.status[p as usize];
        let (Stage::Committed, Some(d)) = (st.stage, st.device) else {
            continue;
        };
        let slot = match counts[..n].iter().position(|c| c.0 == d) {
            Some(s) => s,
            None => {
                counts[n] = (d, 0);
                n += 1;
                n - 1
            }
        };
        counts[slot].1 += 1;
        if best.is_none_or(|b| counts[slot].1 > b.1) {
            best = Some(counts[slot]);
        }
    }
    best.map(|b| b.0)
}

fn copy_cost(p: &PlannerParams, a: DeviceKind, b: DeviceKind, op: Opcode) -> Nanos {
    let gpu = a == DeviceKind::Gpu || b == DeviceKind::Gpu;
    let fixed = if gpu {
        p.gpu_copy_cost_ns
    } else {
        p.copy_cost_ns
    };
    let bw = p.copy_bytes_per_ns[usize::from(gpu)].max(1e-3);
    let bytes = p.input_bytes[op.index()] + p.output_bytes[op.index()];
    2 * fixed + (bytes as f64 / bw) as Nanos
}

/// Fewest units an instruction needing `need` may start on (partial parallelism).
pub fn min_units(alpha: f64, need: u32) -> u32 {
    ((alpha * f64::from(need)).ceil() as u32).clamp(1, need.max(1))
}

/// Cost the planner assumes for moving `op`'s inputs between two devices.
pub fn transfer_cost(
    p: &PlannerParams,
    devices: &DeviceTable,
    from: DeviceId,
    to: DeviceId,
    op: Opcode,
) -> Nanos {
    match (devices.get(from), devices.get(to)) {
        (Some(a), Some(b)) => copy_cost(p, a.kind, b.kind, op),
        _ => 0,
    }
}

/// Choose the device queue for a ready `op` whose inputs live on `home`, never
/// `avoid` (a device that just failed it) while another exists.
///
/// 1. `home` when at least `alpha` of the need is free there (full/partial);
/// 2. else the device with the most free capacity and nothing queued, when the wait
///    saved (home's backlog) beats the copy of the inputs (fragmented);
/// 3. else delayed in home's slack-ordered queue. Without a home (inputs, encodes) the
///    least loaded device.
///
/// Only devices that are idle *now* attract moved work: when every radio unit's
/// symbols land at once, routing on estimated backlogs alone would shuffle work
/// between equally loaded devices and pay copies for nothing.
pub fn choose_device(
    params: &PlannerParams,
    table: &OpcodeTable,
    devices: &DeviceTable,
    op: Opcode,
    home: Option<DeviceId>,
    avoid: Option<DeviceId>,
) -> Option<(DeviceId, Reason)> {
    let avoid = avoid.filter(|_| devices.len() > 1);
    let home = home.filter(|&h| devices.contains(h) && Some(h) != avoid);
    let fits = |d: DeviceId| -> Option<(u32, u32)> {
        let dev = devices.get(d)?;
        let need = table.need(dev.kind, op).min(dev.capacity);
        (need > 0 && Some(d) != avoid).then_some((need, dev.free()))
    };
    // Most free units, then least queued and running work.
    let least_loaded = |idle_only: bool| {
        devices
            .iter()
            .filter(|&(d, dev)| {
                Some(d) != home
                    && fits(d).is_some_and(|(need, free)| {
                        !idle_only || free >= min_units(params.alpha, need)
                    })
                    && (!idle_only || dev.queued_unit_ns == 0)
            })
            .min_by_key(|&(d, dev)| {
                (
                    std::cmp::Reverse(dev.free()),
                    dev.queued_unit_ns + dev.running_unit_ns,
                    d,
                )
            })
            .map(|(d, _)| d)
    };
    let Some(h) = home else {
        return least_loaded(false).map(|d| (d, Reason::Free));
    };
    let (need, free) = fits(h)?;
    if free >= need {
        return Some((h, Reason::Full));
    }
    if free >= min_units(params.alpha, need) {
        return Some((h, Reason::Partial));
    }
    if let Some(d) = least_loaded(true) {
        let hd = devices.get(h)?;
        let td = devices.get(d)?;
        let units = td.free().min(table.need(td.kind, op).min(td.capacity));
        let wait_home = hd.backlog_ns(min_units(params.alpha, need));
        let there =
            table.latency_with(td.kind, op, units) + transfer_cost(params, devices, h, d, op);
        if wait_home + table.latency_with(hd.kind, op, need) > there {
            return Some((d, Reason::Fragmented));
        }
    }
    Some((h, Reason::Delayed))
}

/// Frame-level estimate on the current pool: the longer of the critical path and the
/// total work spread over every unit (what a frame needs with no contention).
pub fn estimate_frame(dag: &FrameDag, table: &OpcodeTable, devices: &DeviceTable) -> Nanos {
    let kind = devices.main_kind();
    let cp = dag
        .critical_path_to_end(|op| table.latency(kind, op))
        .into_iter()
        .max()
        .unwrap_or(0);
    let capacity: u64 = devices.iter().map(|(_, d)| u64::from(d.capacity)).sum();
    let work: u64 = dag
        .topo_order()
        .map(|i| {
            let op = dag.opcode(i);
            table.latency(kind, op) * u64::from(table.need(kind, op))
        })
        .sum();
    cp.max(work / capacity.max(1))
}
