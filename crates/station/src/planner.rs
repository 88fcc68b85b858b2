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
        let need = table.need(d, op).min(dev.capacity);
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
        let units = td.free().min(table.need(d, op).min(td.capacity));
        let wait_home = hd.backlog_ns(min_units(params.alpha, need));
        let there = table.latency_with(d, op, units) + transfer_cost(params, devices, h, d, op);
        if wait_home + table.latency_with(h, op, need) > there {
            return Some((d, Reason::Fragmented));
        }
    }
    Some((h, Reason::Delayed))
}

/// Frame-level estimate on the current pool: the longer of the critical path and the
/// total work spread over every unit (what a frame needs with no contention).
pub fn estimate_frame(dag: &FrameDag, table: &OpcodeTable, devices: &DeviceTable) -> Nanos {
    let main = devices.main_device().unwrap_or(DeviceId::MAX);
    let cp = dag
        .critical_path_to_end(|op| table.latency(main, op))
        .into_iter()
        .max()
        .unwrap_or(0);
    let capacity: u64 = devices.iter().map(|(_, d)| u64::from(d.capacity)).sum();
    let work: u64 = dag
        .topo_order()
        .map(|i| {
            let op = dag.opcode(i);
            table.latency(main, op) * u64::from(table.need(main, op))
        })
        .sum();
    cp.max(work / capacity.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::Instr;
    use crate::scoreboard::RunEntry;

    fn params(copy_ns: Nanos) -> PlannerParams {
        PlannerParams {
            alpha: 0.5,
            copy_cost_ns: copy_ns,
            gpu_copy_cost_ns: copy_ns,
            copy_bytes_per_ns: [50.0, 25.0],
            input_bytes: [0; Opcode::ALL.len()],
            output_bytes: [0; Opcode::ALL.len()],
        }
    }

    /// Two GPUs of 32 SMs; ZF needs 16 SMs and 10 us, a copy 4 SMs.
    fn pool(used0: u32, queued0: u64) -> (OpcodeTable, DeviceTable) {
        let cost = |need, latency_ns| crate::costs::OpcodeCost { need, latency_ns };
        let gpu = crate::costs::DeviceProfile {
            kind: DeviceKind::Gpu,
            units: 32,
            memory_bytes: 0,
            costs: [cost(8, 20_000); Opcode::ALL.len()],
            source: crate::costs::CostSource::Modelled,
        }
        .with_cost(Opcode::Zf, cost(16, 10_000))
        .with_cost(Opcode::Load, cost(4, 5_000));
        let mut table = OpcodeTable::new(1);
        table.register(0, &gpu);
        table.register(1, &gpu);
        let mut devices = DeviceTable::default();
        devices.add(0, DeviceKind::Gpu, 32);
        devices.add(1, DeviceKind::Gpu, 32);
        let d0 = devices.get_mut(0).unwrap();
        d0.in_use = used0;
        d0.queued_unit_ns = queued0;
        d0.running_unit_ns = u64::from(used0) * 10_000;
        d0.running.insert(
            Instr::new(0, 0, Opcode::Zf, 9),
            RunEntry {
                idx: 0,
                units: used0,
                low_priority: false,
                after: None,
                follower: None,
                est_start: 0,
                est_end: 10_000,
            },
        );
        (table, devices)
    }

    #[test]
    fn home_full_partial_then_moved_or_delayed() {
        let choose = |used, queued, copy, avoid| {
            let (t, d) = pool(used, queued);
            choose_device(&params(copy), &t, &d, Opcode::Zf, Some(0), avoid)
        };
        assert_eq!(choose(0, 0, 1_000, None), Some((0, Reason::Full)));
        assert_eq!(choose(20, 0, 1_000, None), Some((0, Reason::Partial)));
        // Home full with a long queue: the idle device is worth a cheap copy...
        assert_eq!(
            choose(32, 3_200_000, 1_000, None),
            Some((1, Reason::Fragmented))
        );
        // ...but not an expensive one.
        assert_eq!(
            choose(32, 3_200_000, 10_000_000, None),
            Some((0, Reason::Delayed))
        );
        // A retry avoids the device that failed it even when home has room.
        assert_eq!(choose(0, 0, 1_000, Some(0)), Some((1, Reason::Free)));
        // No home: the least loaded device.
        let (t, d) = pool(8, 0);
        assert_eq!(
            choose_device(&params(0), &t, &d, Opcode::Load, None, None),
            Some((1, Reason::Free))
        );
        assert_eq!(
            choose_device(
                &params(0),
                &t,
                &DeviceTable::default(),
                Opcode::Load,
                None,
                None
            ),
            None
        );
    }

    #[test]
    fn frame_estimate_is_bounded_by_path_and_work() {
        let shape = crate::shape::FrameShape {
            antennas: 8,
            users: 2,
            data_num: 64,
            pilot_symbols: vec![0],
            uplink_symbols: vec![1, 2],
            downlink_reference: None,
            downlink_symbols: vec![],
            parts: 2,
            zf_batch_span: 1,
            user_groups: 2,
        };
        let dag = FrameDag::build(&shape);
        let (t, d) = pool(0, 0);
        let cp = dag
            .critical_path_to_end(|op| t.latency(0, op))
            .into_iter()
            .max()
            .unwrap();
        let est = estimate_frame(&dag, &t, &d);
        assert!(est >= cp);
        let mut small = DeviceTable::default();
        small.add(0, DeviceKind::Gpu, 1);
        assert!(
            estimate_frame(&dag, &t, &small) > est,
            "one unit must take longer"
        );
    }
}
