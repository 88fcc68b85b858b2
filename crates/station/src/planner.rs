//! Structural analysis (MegaStation-style planner): where an instruction should run.
//!
//! 1. On the device that ran its predecessors when enough capacity is free there:
//!    its full need (full parallelism) or at least `alpha` of it (partial).
//! 2. Else on the device with the most free capacity, when the wait saved on the
//!    predecessors' device beats the cost of copying the inputs over (fragmented).
//! 3. Else delayed: it stays in the deadline-ordered queue until capacity frees.
//!
//! Estimates go frame, then instruction: [`estimate_frame`] bounds a whole frame on
//! the pool (critical path vs total work over total capacity); placement uses the
//! per-device planned executors' estimated ends.

use crate::dag::{FrameDag, InstrIdx};
use crate::isa::{DeviceId, DeviceKind, Nanos};
use crate::scoreboard::{DeviceTable, FrameRecord, OpcodeTable, Stage};

/// Predecessors examined to find the data's device (bounds the cost for wide joins).
const AFFINITY_SAMPLE: usize = 16;

/// Planner tunables (a view of `PolicyParams`).
#[derive(Clone, Copy, Debug)]
pub struct PlannerParams {
    pub alpha: f64,
    pub copy_cost_ns: Nanos,
    pub gpu_copy_cost_ns: Nanos,
}

/// Why an instruction was placed where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No predecessor device (an input or encode): anywhere with room.
    Free,
    /// Full need free on the predecessors' device.
    Full,
    /// At least alpha of the need free on the predecessors' device.
    Partial,
    /// Moved to the device with most free capacity; the copy is worth the wait saved.
    Fragmented,
}

/// A planning decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Place {
        device: DeviceId,
        units: u32,
        reason: Reason,
    },
    Delay,
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

fn copy_cost(p: &PlannerParams, a: DeviceKind, b: DeviceKind) -> Nanos {
    if a == DeviceKind::Gpu || b == DeviceKind::Gpu {
        p.gpu_copy_cost_ns
    } else {
        p.copy_cost_ns
    }
}

fn min_units(alpha: f64, need: u32) -> u32 {
    ((alpha * f64::from(need)).ceil() as u32).clamp(1, need.max(1))
}

/// Decide where instruction `idx` of the frame in `rec` runs now, if anywhere.
/// `avoid` excludes a device that just failed it (when another exists).
#[allow(clippy::too_many_arguments)]
pub fn place(
    params: &PlannerParams,
    table: &OpcodeTable,
    devices: &DeviceTable,
    dag: &FrameDag,
    rec: &FrameRecord,
    idx: InstrIdx,
    now: Nanos,
) -> Placement {
    let op = dag.opcode(idx);
    let avoid = rec.status[idx as usize].avoid.filter(|_| devices.len() > 1);
    let fits = |d: DeviceId| -> Option<(u32, u32)> {
        let dev = devices.get(d)?;
        let need = table.need(dev.kind, op).min(dev.capacity);
        if need == 0 || Some(d) == avoid {
            return None;
        }
        Some((need, dev.free()))
    };
    let home =
        predecessor_device(dag, rec, idx).filter(|&d| devices.contains(d) && Some(d) != avoid);
    if let Some(h) = home {
        if let Some((need, free)) = fits(h) {
            if free >= need {
                return Placement::Place {
                    device: h,
                    units: need,
                    reason: Reason::Full,
                };
            }
            if free >= min_units(params.alpha, need) {
                return Placement::Place {
                    device: h,
                    units: free,
                    reason: Reason::Partial,
                };
            }
        }
    }
    // The device with the most free capacity relative to what this instruction needs.
    let mut best: Option<(DeviceId, u32, u32)> = None;
    for (d, _) in devices.iter() {
        if Some(d) == home {
            continue;
        }
        if let Some((need, free)) = fits(d) {
            if free >= min_units(params.alpha, need) && best.is_none_or(|b| free > b.2) {
                best = Some((d, need, free));
            }
        }
    }
    let Some((device, need, free)) = best else {
        return Placement::Delay;
    };
    let units = need.min(free);
    let Some(h) = home else {
        return Placement::Place {
            device,
            units,
            reason: Reason::Free,
        };
    };
    let (Some(hd), Some(td)) = (devices.get(h), devices.get(device)) else {
        return Placement::Delay;
    };
    let hneed = table.need(hd.kind, op).min(hd.capacity);
    let wait_home = hd
        .free_at(now, min_units(params.alpha, hneed))
        .saturating_sub(now);
    let run_home = table.latency_with(hd.kind, op, hneed);
    let run_there = table.latency_with(td.kind, op, units) + copy_cost(params, hd.kind, td.kind);
    if wait_home.saturating_add(run_home) > run_there {
        Placement::Place {
            device,
            units,
            reason: Reason::Fragmented,
        }
    } else {
        Placement::Delay
    }
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
