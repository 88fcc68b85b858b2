//! Scheduling policies: LROC (MegaStation-style) and the frame-, symbol- and
//! task-level baselines, all behind [`crate::engine::Policy`].
//!
//! They share one core (admission, deadlines, failures, device churn, scoreboard) and
//! differ in where a ready instruction waits and in which order it is issued:
//!
//! | policy | placement | order |
//! |---|---|---|
//! | `frame` (LuMaMi-like) | the whole frame on one device | frame arrival, then DAG order |
//! | `symbol` (Hydra-like) | by symbol (ZF by subcarrier part) over the devices | FIFO |
//! | `task` (BigStation-like) | opcode classes statically mapped to device groups | FIFO |
//! | `lroc` | planner: predecessor's device, else most free when worth the copy, else delayed | least slack, reordered by resource use, over-commit, coalescing, lookahead |

mod core;
mod frame;
mod lroc;
mod symbol;
mod task;

use crate::engine::Policy;
use crate::isa::{DeviceId, Nanos};
use crate::shape::FrameShape;

/// Names accepted by [`make_policy`].
pub const POLICY_NAMES: [&str; 4] = ["lroc", "frame", "symbol", "task"];

/// Errors building a policy.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolicyError {
    #[error("unknown policy `{0}`: choose one of lroc, frame, symbol, task")]
    Unknown(String),
    #[error("policy parameter {name} = {value} is invalid: {why}")]
    Param {
        name: &'static str,
        value: String,
        why: &'static str,
    },
}

/// Tunables shared by the policies (LROC uses all of them, baselines the first few).
/// Read with unknown fields refused, so that a misspelt name is an error, not a
/// default.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyParams {
    /// Admitted frames in flight at most; more arrivals are `Rejected` (bounded queue).
    pub max_in_flight: usize,
    /// Failed runs retried (on another device when there is one) before `Failed`.
    pub retries: u8,
    /// Samples in the latency calibration window of the opcode table.
    pub calibration_window: u32,
    /// Planning window: frames whose deadline is within this of the earliest deadline
    /// may be over-committed and coalesced (two 1 ms frames by default).
    pub window_ns: Nanos,
    /// Partial parallelism: a device with at least `alpha` x need free units takes the
    /// instruction on fewer units (0 < alpha <= 1).
    pub alpha: f64,
    /// Fixed cost of moving an instruction's inputs between two CPU devices of one
    /// host (small, not zero: the data leaves one core's caches for another's).
    pub copy_cost_ns: Nanos,
    /// Fixed cost of a copy when either device is a GPU (launch + sync of a PCIe or
    /// peer copy).
    pub gpu_copy_cost_ns: Nanos,
    /// Copy bandwidth between CPU devices, bytes per ns (= GB/s).
    pub copy_bytes_per_ns: f64,
    /// Copy bandwidth when a GPU is involved, bytes per ns.
    pub gpu_copy_bytes_per_ns: f64,
    /// LROC may over-commit a delayed instruction at low priority.
    pub overcommit: bool,
    /// Over-commit at most this fraction of a device's capacity.
    pub overcommit_ratio: f64,
    /// A delayed instruction is over-committed once its slack falls below this.
    pub overcommit_slack_ns: Nanos,
    /// LROC may coalesce a successor behind its running predecessor.
    pub coalesce: bool,
    /// Ready instructions whose latest start is within this of the most urgent one's
    /// are reordered by least resource use.
    pub reorder_band_ns: Nanos,
    /// LROC queue order: pure per-instruction least slack (false, the default), or
    /// frames by deadline then critical path first inside a frame (true), which stops
    /// frames with equal deadlines (synchronised radio units) from interleaving.
    pub frame_major_slack: bool,
    /// LROC discards a frame as soon as a ready instruction of it can no longer finish
    /// in time (now + 0.8 x its calibrated critical path to the end > deadline)
    /// instead of running it late: under overload this saves the capacity for frames
    /// that can still make it (no domino effect). Counted as a deadline miss (NACK).
    pub shed_hopeless: bool,
    /// With `shed_hopeless`, LROC also sheds by work: open frames are taken in
    /// deadline order, each finishing when its calibrated work left and that of every
    /// earlier frame, times this factor, is done on all units at once; a frame that
    /// would finish after its deadline is NACKed (its work is saved for the frames
    /// behind it, which an earliest-deadline-first order would otherwise make late one
    /// after the other). The factor covers what the calibration does not (scheduling,
    /// wake-ups, the fronthaul threads, units idle on dependencies); 0 turns this
    /// test off. 2 by default: on 2 cores a 16x4 run spends about 1.8x its kernels'
    /// time in all, and shedding at 1.0 let a backlog form that raised the
    /// scheduler's cost per instruction and never drained (docs/BENCHMARKS.md,
    /// session 13).
    pub shed_work_factor: f64,
    /// LROC queues a full device's most urgent ready instruction behind one of its
    /// running instructions (on that reservation, as coalescing does, but for any
    /// instruction): the worker that finishes one starts the next at once instead of
    /// idling through a round trip to the scheduler thread (a wake-up each way).
    pub lookahead: bool,
}

impl Default for PolicyParams {
    fn default() -> Self {
        Self {
            max_in_flight: 64,
            retries: 1,
            calibration_window: 64,
            window_ns: 2_000_000,
            alpha: 0.5,
            copy_cost_ns: 1_000,
            gpu_copy_cost_ns: 10_000,
            copy_bytes_per_ns: 50.0,
            gpu_copy_bytes_per_ns: 25.0,
            overcommit: true,
            overcommit_ratio: 0.5,
            overcommit_slack_ns: 100_000,
            coalesce: true,
            reorder_band_ns: 20_000,
            frame_major_slack: false,
            shed_hopeless: true,
            shed_work_factor: 2.0,
            lookahead: true,
        }
    }
}

impl PolicyParams {
    /// Check ranges.
    ///
    /// # Errors
    /// The first parameter out of range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |name, value: String, why| Err(PolicyError::Param { name, value, why });
        if self.max_in_flight == 0 {
            return bad("max_in_flight", "0".into(), "at least one frame must fit");
        }
        if self.calibration_window == 0 {
            return bad(
                "calibration_window",
                "0".into(),
                "needs at least one sample",
            );
        }
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return bad("alpha", self.alpha.to_string(), "must be in (0, 1]");
        }
        if !(self.overcommit_ratio >= 0.0 && self.overcommit_ratio <= 4.0) {
            return bad(
                "overcommit_ratio",
                self.overcommit_ratio.to_string(),
                "must be in [0, 4]",
            );
        }
        if !(self.shed_work_factor >= 0.0 && self.shed_work_factor <= 16.0) {
            return bad(
                "shed_work_factor",
                self.shed_work_factor.to_string(),
                "must be in [0, 16] (0: off)",
            );
        }
        Ok(())
    }
}

/// Build the policy called `name` for frames of `shape`.
///
/// # Errors
/// Unknown name or invalid parameters.
pub fn make_policy(
    name: &str,
    shape: &FrameShape,
    params: &PolicyParams,
) -> Result<Box<dyn Policy>, PolicyError> {
    params.validate()?;
    let core = self::core::Core::new(shape, params.clone());
    Ok(match name {
        "frame" => Box::new(self::core::Engine {
            core,
            strat: frame::FrameLevel,
        }),
        "symbol" => Box::new(self::core::Engine {
            core,
            strat: symbol::SymbolLevel,
        }),
        "task" => Box::new(self::core::Engine {
            core,
            strat: task::TaskLevel,
        }),
        "lroc" => Box::new(self::core::Engine {
            core,
            strat: lroc::Lroc::default(),
        }),
        other => return Err(PolicyError::Unknown(other.to_string())),
    })
}

/// Pick `ids[choice % len]`, stepping past `avoid` when another device exists.
pub(crate) fn pick_avoiding(
    ids: &[DeviceId],
    choice: usize,
    avoid: Option<DeviceId>,
) -> Option<DeviceId> {
    if ids.is_empty() {
        return None;
    }
    let first = ids[choice % ids.len()];
    if Some(first) == avoid && ids.len() > 1 {
        return Some(ids[(choice + 1) % ids.len()]);
    }
    Some(first)
}

#[cfg(test)]
mod tests;
