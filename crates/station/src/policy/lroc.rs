//! LROC (MegaStation-style): Least-slack first, Reordering, Over-commitment,
//! Coalescing, as a per-device pipeline scheduler over queues filled by the
//! [`crate::planner`].
//!
//! - Placement: when an instruction becomes ready the planner puts it in a device's
//!   queue (its predecessors' device, or another one when the wait saved beats the
//!   copy). Each queue is ordered by latest start time = frame deadline - calibrated
//!   critical path from the instruction to the end of the frame: least slack first.
//! - Reordering: among the first queued instructions whose latest start is within
//!   `reorder_band_ns` of the head's, a device with free units issues the one using
//!   the fewest resource units (fills fragments a wide instruction could not use).
//! - Stealing: an idle device takes the most urgent head of a busy device's queue when
//!   that device's backlog exceeds the copy cost (fragmented parallelism).
//! - Over-commitment: a queued instruction whose slack fell below
//!   `overcommit_slack_ns` (but that can still make its deadline) on a full device
//!   runs there at low priority, up to `overcommit_ratio` of its capacity.
//! - Coalescing: when an instruction is issued, its most urgent successor whose only
//!   missing input is that instruction is issued behind it on the same reservation.
//! - Lookahead: a device whose units are all reserved takes its most urgent queued
//!   instruction behind the running one that ends first (one per running
//!   instruction), so its workers go from one instruction to the next without
//!   waiting for the scheduler thread.
//! - Shedding: a frame whose most urgent queued instruction can no longer finish by
//!   the deadline is NACKed at once rather than run late (`shed_hopeless`); so is a
//!   frame whose work left, behind the work of every frame due before it, cannot be
//!   done by its deadline on all the units (`shed_work_factor`).

use super::core::{Core, Queued, Strategy};
use crate::dag::InstrIdx;
use crate::engine::{Dispatch, FrameOutcome};
use crate::isa::{DeviceId, FrameId, Nanos};
use crate::planner::{self, PlannerParams};
use crate::scoreboard::Stage;

/// A frame is hopeless when `now + SHED_CP_FRACTION x critical path > deadline` for one
/// of its ready instructions (the calibrated path is an average, hence the margin).
const SHED_CP_FRACTION: f64 = 0.8;

/// Queued instructions a device examines for reordering.
const REORDER_SCAN: usize = 8;

#[derive(Default)]
pub(crate) struct Lroc {
    last_now: Nanos,
    rr: usize,
    ids: Vec<DeviceId>,
    /// [`crate::scoreboard::DeviceTable::changes`] when `ids` was read.
    ids_read_at: u64,
    /// Frames the work test sheds (kept to reuse its storage).
    overloaded: Vec<FrameId>,
}

fn planner_params(core: &Core) -> PlannerParams {
    PlannerParams {
        alpha: core.params.alpha,
        copy_cost_ns: core.params.copy_cost_ns,
        gpu_copy_cost_ns: core.params.gpu_copy_cost_ns,
        copy_bytes_per_ns: [
            core.params.copy_bytes_per_ns,
            core.params.gpu_copy_bytes_per_ns,
        ],
        input_bytes: core.input_bytes,
        output_bytes: core.output_bytes,
    }
}

/// Latest start time: the frame's deadline minus the calibrated critical path from
/// the instruction to the end of the frame.
fn latest_start(core: &Core, frame: FrameId, idx: InstrIdx) -> Nanos {
    let deadline = core.frames.get(&frame).map_or(0, |r| r.deadline);
    deadline.saturating_sub(core.cp[idx as usize])
}

/// [`latest_start`] of a queued instruction (its entry carries the deadline).
fn queued_latest_start(core: &Core, q: &Queued) -> Nanos {
    q.deadline.saturating_sub(core.cp[q.idx as usize])
}

fn window_end(core: &Core) -> Nanos {
    core.earliest_deadline()
        .map_or(Nanos::MAX, |d| d.saturating_add(core.params.window_ns))
}

impl Lroc {
    /// Discard frames whose most urgent queued instruction can no longer finish in
    /// time (see `PolicyParams::shed_hopeless`). Queues are ordered by latest start, so
    /// only heads need checking.
    fn shed_hopeless(&mut self, core: &mut Core, now: Nanos) {
        loop {
            let hopeless = self.ids.iter().find_map(|d| {
                let q = core.device_queues.get(*d)?.first()?;
                let cp = core.cp[q.idx as usize] as f64 * SHED_CP_FRACTION;
                (now as f64 + cp > q.deadline as f64).then_some(q.frame)
            });
            match hopeless {
                Some(frame) => core.finish(now, frame, FrameOutcome::DeadlineMissed),
                None => break,
            }
        }
        self.shed_overloaded(core, now);
    }

    /// Discard the frames that cannot finish in time behind the frames due before
    /// them: in deadline order, frame k ends at the earliest when the work left of
    /// frames 1..=k (times `shed_work_factor`) is spread over every unit. A shed frame's
    /// work is not counted against the frames behind it. The most urgent frame is never
    /// shed by this test (the critical-path test covers it): some frame always runs, so
    /// the calibration keeps learning and an over-estimate cannot shed every frame.
    fn shed_overloaded(&mut self, core: &mut Core, now: Nanos) {
        let factor = core.params.shed_work_factor;
        let units: u64 = core
            .devices
            .iter()
            .map(|(_, d)| u64::from(d.capacity))
            .sum();
        if factor <= 0.0 || units == 0 {
            return;
        }
        let mut ahead = 0.0f64; // unit-ns of the frames kept so far
        for (deadline, frame) in core.frames_by_deadline() {
            let Some(rec) = core.frames.get(&frame) else {
                continue;
            };
            let work = rec.work_left_ns as f64 * factor;
            let ends = now as f64 + (ahead + work) / units as f64;
            if ahead > 0.0 && ends > deadline as f64 {
                self.overloaded.push(frame);
            } else {
                ahead += work;
            }
        }
        for frame in self.overloaded.drain(..) {
            core.finish(now, frame, FrameOutcome::DeadlineMissed);
        }
    }

    /// A device with free units takes from its own queue, reordering by resource use.
    fn own_queue(&self, core: &Core, d: DeviceId) -> Option<Dispatch> {
        let dev = core.devices.get(d)?;
        let free = dev.free();
        if free == 0 {
            return None; // every instruction needs at least one unit (`min_units`)
        }
        let q = core.device_queues.get(d)?;
        let band_end =
            queued_latest_start(core, q.first()?).saturating_add(core.params.reorder_band_ns);
        let mut best: Option<(u32, u32, FrameId, InstrIdx)> = None; // (need, units, ..)
        for e in q.iter().take(REORDER_SCAN) {
            if queued_latest_start(core, e) > band_end {
                break;
            }
            let (frame, idx) = (e.frame, e.idx);
            let need = core.table.need(d, core.dag.opcode(idx)).min(dev.capacity);
            let units = if free >= need {
                need
            } else if free >= planner::min_units(core.params.alpha, need) {
                free
            } else {
                continue;
            };
            if best.is_none_or(|b| need < b.0) {
                best = Some((need, units, frame, idx));
            }
        }
        let (_, units, frame, idx) = best?;
        Some(Dispatch {
            instr: core.dag.instr(frame, idx),
            device: d,
            units,
            low_priority: false,
            after: None,
        })
    }

    /// An idle device steals the most urgent waiting head of a backlogged device.
    fn steal(&self, core: &Core, thief: DeviceId) -> Option<Dispatch> {
        let dev = core.devices.get(thief)?;
        let params = planner_params(core);
        let mut best: Option<(u64, FrameId, InstrIdx, u32)> = None;
        for &victim in &self.ids {
            if victim == thief {
                continue;
            }
            let (Some(v), Some(q)) = (core.devices.get(victim), core.device_queues.get(victim))
            else {
                continue;
            };
            let Some(&Queued {
                key, frame, idx, ..
            }) = q.first()
            else {
                continue;
            };
            let op = core.dag.opcode(idx);
            let vneed = core.table.need(victim, op).min(v.capacity);
            let min_v = planner::min_units(core.params.alpha, vneed);
            if v.free() >= min_v {
                continue; // the victim can start it itself
            }
            let avoid = core
                .frames
                .get(&frame)
                .and_then(|r| r.status[idx as usize].avoid);
            if avoid == Some(thief) {
                continue;
            }
            let need = core.table.need(thief, op).min(dev.capacity);
            if need == 0 || dev.free() < planner::min_units(core.params.alpha, need) {
                continue;
            }
            if v.backlog_ns(min_v)
                <= planner::transfer_cost(&params, &core.devices, victim, thief, op)
            {
                continue; // waiting there is cheaper than moving the data
            }
            if best.is_none_or(|b| key < b.0) {
                best = Some((key, frame, idx, need.min(dev.free())));
            }
        }
        let (_, frame, idx, units) = best?;
        Some(Dispatch {
            instr: core.dag.instr(frame, idx),
            device: thief,
            units,
            low_priority: false,
            after: None,
        })
    }

    /// A device with every unit reserved takes its queue head behind the running
    /// instruction that ends first and has no follower yet (holding no units until
    /// then, as a coalesced successor).
    fn lookahead(&self, core: &Core, d: DeviceId) -> Option<Dispatch> {
        let dev = core.devices.get(d)?;
        if !core.params.lookahead || dev.free() > 0 {
            return None; // free units take work through `own_queue`
        }
        let &Queued { frame, idx, .. } = core.device_queues.get(d)?.first()?;
        if core.frames.get(&frame)?.status[idx as usize].avoid == Some(d) {
            return None;
        }
        let need = core.table.need(d, core.dag.opcode(idx)).min(dev.capacity);
        if need == 0 {
            return None;
        }
        let (&pred, _) = dev
            .running
            .iter()
            .filter(|(_, r)| r.after.is_none() && r.follower.is_none() && r.units >= need)
            .min_by_key(|(i, r)| (r.est_end, **i))?;
        Some(Dispatch {
            instr: core.dag.instr(frame, idx),
            device: d,
            units: need,
            low_priority: false,
            after: Some(pred),
        })
    }

    /// A full device runs a critical queued instruction at low priority.
    fn overcommit(&self, core: &Core, now: Nanos, d: DeviceId) -> Option<Dispatch> {
        let dev = core.devices.get(d)?;
        let head = core.device_queues.get(d)?.first()?;
        let (frame, idx) = (head.frame, head.idx);
        let key = queued_latest_start(core, head);
        if key > now.saturating_add(core.params.overcommit_slack_ns)
            || key < now
            || head.deadline > window_end(core)
        {
            return None; // not critical yet, hopeless anyway, or outside the window
        }
        let units = core.table.need(d, core.dag.opcode(idx)).min(dev.capacity);
        let limit = f64::from(dev.capacity) * (1.0 + core.params.overcommit_ratio);
        if units == 0 || f64::from(dev.in_use + units) > limit {
            return None;
        }
        Some(Dispatch {
            instr: core.dag.instr(frame, idx),
            device: d,
            units,
            low_priority: true,
            after: None,
        })
    }
}

impl Strategy for Lroc {
    fn name(&self) -> &'static str {
        "lroc"
    }

    fn route(&mut self, core: &mut Core, frame: FrameId, idx: InstrIdx) -> Option<DeviceId> {
        let rec = core.frames.get(&frame)?;
        let avoid = rec.status[idx as usize].avoid;
        // Inputs and encodes (no predecessor) go to the least loaded device; the rest
        // follow their data unless the planner finds the move worth its copies.
        let home = planner::predecessor_device(&core.dag, rec, idx);
        let op = core.dag.opcode(idx);
        planner::choose_device(
            &planner_params(core),
            &core.table,
            &core.devices,
            op,
            home,
            avoid,
        )
        .map(|(d, _)| d)
    }

    fn key(&mut self, core: &Core, frame: FrameId, idx: InstrIdx) -> u64 {
        let lst = latest_start(core, frame, idx);
        if core.params.frame_major_slack {
            // Frames by deadline (then admission), critical path first inside a frame.
            let rec = core.frames.get(&frame);
            let (deadline, order) = rec.map_or((0, 0), |r| (r.deadline, r.order));
            let cp_us = (core.cp[idx as usize] / 1_000).min(0xFFF);
            ((deadline / 1_000) << 28) | ((order & 0xFFFF) << 12) | (0xFFF - cp_us)
        } else {
            lst
        }
    }

    fn pick(&mut self, core: &mut Core, now: Nanos) -> Option<Dispatch> {
        self.last_now = now;
        if self.ids_read_at != core.devices.changes() {
            self.ids.clear();
            self.ids.extend(core.devices.ids());
            self.ids_read_at = core.devices.changes();
        }
        let n = self.ids.len();
        if n == 0 {
            return None;
        }
        if core.params.shed_hopeless && !core.params.frame_major_slack {
            self.shed_hopeless(core, now);
        }
        let start = self.rr % n;
        // Device k of this round, from `start` around (k < n: no division per step).
        let order = |k: usize| {
            self.ids[if start + k < n {
                start + k
            } else {
                start + k - n
            }]
        };
        for k in 0..n {
            if let Some(d) = self.own_queue(core, order(k)) {
                self.rr = start + k + 1;
                return Some(d);
            }
        }
        for k in 0..n {
            let thief = order(k);
            if core.device_queues.get(thief).is_some_and(|q| q.is_empty()) {
                if let Some(d) = self.steal(core, thief) {
                    self.rr = start + k + 1;
                    return Some(d);
                }
            }
        }
        if core.params.overcommit {
            for k in 0..n {
                if let Some(d) = self.overcommit(core, now, order(k)) {
                    self.rr = start + k + 1;
                    return Some(d);
                }
            }
        }
        for k in 0..n {
            if let Some(d) = self.lookahead(core, order(k)) {
                self.rr = start + k + 1;
                return Some(d);
            }
        }
        None
    }

    fn issued(&mut self, core: &mut Core, now: Nanos, d: &Dispatch) {
        if !core.params.coalesce || d.low_priority || d.after.is_some() {
            return;
        }
        let Some(idx) = core.dag.index_of(&d.instr) else {
            return;
        };
        let Some(rec) = core.frames.get(&d.instr.frame) else {
            return;
        };
        if rec.deadline > window_end(core) {
            return;
        }
        if !core.devices.contains(d.device) {
            return;
        }
        let kind = d.device;
        // The most urgent successor waiting only on this instruction, fitting its units.
        let follower = core
            .dag
            .succs(idx)
            .iter()
            .copied()
            .filter(|&s| {
                rec.remaining[s as usize] == 1
                    && rec.status[s as usize].stage == Stage::Waiting
                    && rec.status[s as usize].avoid != Some(d.device)
                    && core.table.need(kind, core.dag.opcode(s)) <= d.units
            })
            .max_by_key(|&s| (core.cp[s as usize], std::cmp::Reverse(s)));
        let Some(s) = follower else {
            return;
        };
        let units = core.table.need(kind, core.dag.opcode(s));
        let f = Dispatch {
            instr: core.dag.instr(d.instr.frame, s),
            device: d.device,
            units,
            low_priority: false,
            after: Some(d.instr),
        };
        core.issue(now, &f);
        core.push_pending(f);
    }

    fn wakeup(&self, core: &Core) -> Option<Nanos> {
        if !core.params.overcommit {
            return None;
        }
        // When the next queued head's slack falls below the over-commit bar.
        let thr = core.params.overcommit_slack_ns;
        core.device_queues
            .iter()
            .filter_map(|(_, q)| q.first())
            .map(|q| queued_latest_start(core, q).saturating_sub(thr))
            .filter(|&t| t > self.last_now)
            .min()
    }
}
