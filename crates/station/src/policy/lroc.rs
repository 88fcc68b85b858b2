//! LROC (MegaStation-style): Least-slack first, Reordering, Over-commitment,
//! Coalescing, over one global ready queue planned by [`crate::planner`].
//!
//! - Queue key = latest start time = frame deadline - calibrated critical path from the
//!   instruction to the end of the frame; the smallest key has the least slack.
//! - Reordering: among placeable instructions whose key is within `reorder_band_ns` of
//!   the most urgent one, issue the one using the fewest resource units first (fills
//!   fragments of capacity that a wide instruction could not use).
//! - Over-commitment: when nothing can be placed, an in-window instruction whose slack
//!   fell below `overcommit_slack_ns` (but that can still make its deadline) runs at
//!   low priority on the least over-committed device, up to `overcommit_ratio`.
//! - Coalescing: when an instruction is issued, its most urgent successor whose only
//!   missing input is that instruction is issued behind it on the same reservation.

use super::core::{Core, Strategy};
use crate::dag::InstrIdx;
use crate::engine::Dispatch;
use crate::isa::{DeviceId, FrameId, Nanos, Opcode};
use crate::planner::{self, Placement, PlannerParams};
use crate::scoreboard::Stage;

#[derive(Default)]
pub(crate) struct Lroc {
    last_now: Nanos,
}

impl Lroc {
    fn planner_params(core: &Core) -> PlannerParams {
        PlannerParams {
            alpha: core.params.alpha,
            copy_cost_ns: core.params.copy_cost_ns,
            gpu_copy_cost_ns: core.params.gpu_copy_cost_ns,
        }
    }

    fn window_end(core: &Core) -> Nanos {
        core.earliest_deadline()
            .map_or(Nanos::MAX, |d| d.saturating_add(core.params.window_ns))
    }

    fn overcommit(&self, core: &Core, now: Nanos) -> Option<Dispatch> {
        let window_end = Self::window_end(core);
        let threshold = now.saturating_add(core.params.overcommit_slack_ns);
        for &(key, frame, idx) in core.global.iter().take(core.params.lookahead) {
            if key > threshold {
                break; // sorted by latest start: the rest have more slack
            }
            let Some(rec) = core.frames.get(&frame) else {
                continue;
            };
            if key < now || rec.deadline > window_end {
                continue; // cannot make its deadline anyway, or outside the window
            }
            let op = core.dag.opcode(idx);
            let avoid = rec.status[idx as usize]
                .avoid
                .filter(|_| core.devices.len() > 1);
            let mut best: Option<(f64, DeviceId, u32)> = None;
            for (d, dev) in core.devices.iter() {
                let units = core.table.need(dev.kind, op).min(dev.capacity);
                if units == 0 || Some(d) == avoid {
                    continue;
                }
                let limit = f64::from(dev.capacity) * (1.0 + core.params.overcommit_ratio);
                let load = f64::from(dev.in_use + units);
                if load <= limit && best.is_none_or(|b| load / f64::from(dev.capacity) < b.0) {
                    best = Some((load / f64::from(dev.capacity), d, units));
                }
            }
            if let Some((_, device, units)) = best {
                return Some(Dispatch {
                    instr: core.dag.instr(frame, idx),
                    device,
                    units,
                    low_priority: true,
                    after: None,
                });
            }
        }
        None
    }
}

impl Strategy for Lroc {
    fn name(&self) -> &'static str {
        "lroc"
    }

    fn uses_device_queues(&self) -> bool {
        false
    }

    fn route(&mut self, _core: &mut Core, _frame: FrameId, _idx: InstrIdx) -> Option<DeviceId> {
        None
    }

    fn key(&mut self, core: &Core, frame: FrameId, idx: InstrIdx) -> u64 {
        let deadline = core.frames.get(&frame).map_or(0, |r| r.deadline);
        deadline.saturating_sub(core.cp[idx as usize])
    }

    fn pick_global(&mut self, core: &mut Core, now: Nanos) -> Option<Dispatch> {
        self.last_now = now;
        let params = Self::planner_params(core);
        let &(head, _, _) = core.global.first()?;
        let band_end = head.saturating_add(core.params.reorder_band_ns);
        // Nothing fits anywhere: skip planning, only over-commit may help.
        let kind = core.devices.main_kind();
        let min_need = Opcode::ALL
            .into_iter()
            .map(|op| core.table.need(kind, op))
            .min()
            .unwrap_or(1);
        let most_free = core.devices.iter().map(|(_, d)| d.free()).max().unwrap_or(0);
        let placeable = f64::from(most_free) >= (core.params.alpha * f64::from(min_need)).ceil();
        // (units, key, frame, idx, device)
        let mut best: Option<(u32, u64, FrameId, InstrIdx, DeviceId)> = None;
        let scan = if placeable { core.params.lookahead } else { 0 };
        for &(key, frame, idx) in core.global.iter().take(scan) {
            if best.is_some_and(|b| key > band_end || b.0 <= min_need) {
                break; // out of the reorder band, or nothing can use fewer units
            }
            let Some(rec) = core.frames.get(&frame) else {
                continue;
            };
            if let Placement::Place { device, units, .. } = planner::place(
                &params,
                &core.table,
                &core.devices,
                &core.dag,
                rec,
                idx,
                now,
            ) {
                if best.is_none_or(|b| units < b.0) {
                    best = Some((units, key, frame, idx, device));
                }
            }
        }
        if let Some((units, _, frame, idx, device)) = best {
            return Some(Dispatch {
                instr: core.dag.instr(frame, idx),
                device,
                units,
                low_priority: false,
                after: None,
            });
        }
        if core.params.overcommit {
            return self.overcommit(core, now);
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
        if rec.deadline > Self::window_end(core) {
            return;
        }
        let Some(kind) = core.devices.get(d.device).map(|dev| dev.kind) else {
            return;
        };
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
        // When the next delayed instruction's slack falls below the over-commit bar.
        let thr = core.params.overcommit_slack_ns;
        let from = self.last_now.saturating_add(thr).saturating_add(1);
        core.global
            .range((from, 0, 0)..)
            .next()
            .map(|&(key, _, _)| key - thr)
    }
}
