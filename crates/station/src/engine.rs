//! The sans-IO contract between a scheduling policy and whatever drives it.
//!
//! A driver (the real CPU executors in `runtime`, or the discrete-event `sim`) owns the
//! clock, the devices and the data. It tells the policy what happened, with `now`
//! passed in, and asks it what to run next. The policy owns the per-frame DAGs, the
//! scoreboard and the queues; it never sleeps, spawns or reads a clock, so every policy
//! runs identically under the simulated clock in tests.
//!
//! Call order per driver turn: feed events (`frame_arrived`, `input_ready`,
//! `completed`, device changes), then call `poll_dispatch(now)` until it returns `None`
//! and drain `poll_event()`; sleep until the earliest of `next_timeout()` and the next
//! external event.

use std::sync::Arc;

use crate::costs::DeviceProfile;
use crate::isa::{DeviceId, FrameId, Instr, Nanos};
use crate::kernels::KernelError;

/// Why a dispatched instruction did not complete. The policy retries it elsewhere
/// or, past its retry budget, fails the frame with this text as the reason.
#[derive(Clone, Debug, thiserror::Error)]
pub enum InstrError {
    #[error("kernel error: {0}")]
    Kernel(#[source] Arc<KernelError>),
    #[error("its frame is no longer live")]
    FrameGone,
    #[error("device {device} work queue is full ({capacity} jobs); raise the queue capacity or add devices")]
    QueueFull { device: DeviceId, capacity: usize },
    #[error("device {0} was removed")]
    DeviceRemoved(DeviceId),
    #[error("device {0} does not exist")]
    NoDevice(DeviceId),
    /// An executor outside this crate (a GPU) could not run it.
    #[error("executor error: {0}")]
    Executor(#[source] crate::runtime::DeviceFault),
    /// A fault injected by a test or the simulator.
    #[error("injected fault")]
    Injected,
}

/// An instruction placed on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub instr: Instr,
    pub device: DeviceId,
    /// Resource units reserved on the device (cores or SMs) while it runs.
    pub units: u32,
    /// Over-committed beyond the device's free capacity: run at low priority.
    pub low_priority: bool,
    /// Coalesced behind this running instruction on the same device (its DAG
    /// predecessor, or for LROC's lookahead any instruction running there): start it
    /// on that one's reservation as soon as it completes. If the predecessor
    /// fails (or its device is removed), the driver drops this instruction without
    /// running or reporting it: the policy has already put it back in its queues.
    pub after: Option<Instr>,
}

/// How a frame left the station. Every admitted frame ends in exactly one of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameOutcome {
    /// All instructions committed before the deadline.
    Completed,
    /// Past its deadline: discarded and NACKed (its remaining instructions dropped).
    DeadlineMissed,
    /// Refused at admission because the bounded frame window was full (overload).
    Rejected,
    /// An instruction failed (e.g. a kernel error) and could not be retried.
    Failed(String),
}

/// Something the driver must report (and count).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineEvent {
    FrameDone {
        frame: FrameId,
        outcome: FrameOutcome,
        /// `now` at the moment the outcome was decided, minus the frame's arrival.
        latency_ns: Nanos,
    },
    /// An instruction the policy dropped after `device` was removed and moved elsewhere.
    Rescheduled { instr: Instr, from: DeviceId },
}

/// A scheduling policy (LROC or a baseline) as a sans-IO state machine.
pub trait Policy: Send {
    /// `"lroc"`, `"frame"`, `"symbol"` or `"task"`.
    fn name(&self) -> &'static str;

    /// A device joins the pool: its resource units and what each opcode costs on it
    /// (the scoreboard charges these, then refines the latencies from completions).
    fn add_device(&mut self, now: Nanos, device: DeviceId, profile: &DeviceProfile);

    /// A device leaves the pool (removed or failed). Its running and planned
    /// instructions are rescheduled elsewhere; their late completions from `device`
    /// must be ignored by the policy if the driver still reports them.
    fn remove_device(&mut self, now: Nanos, device: DeviceId);

    /// A new frame is admitted (or rejected: see [`FrameOutcome::Rejected`]); its DAG is
    /// built and its `Load` instructions wait for `input_ready`.
    fn frame_arrived(&mut self, now: Nanos, frame: FrameId, deadline: Nanos);

    /// The fronthaul samples of `symbol` of `frame` are in host memory.
    fn input_ready(&mut self, now: Nanos, frame: FrameId, symbol: usize);

    /// `instr` finished on `device`, having started at `started` (the policy's
    /// calibration uses `now - started`). `Err` says why it did not run.
    fn completed(
        &mut self,
        now: Nanos,
        instr: Instr,
        device: DeviceId,
        started: Nanos,
        result: Result<(), InstrError>,
    );

    /// The next instruction to start now, if any.
    fn poll_dispatch(&mut self, now: Nanos) -> Option<Dispatch>;

    /// The next event to report, if any.
    fn poll_event(&mut self) -> Option<EngineEvent>;

    /// When the policy next needs `poll_dispatch` called even if nothing else happens
    /// (a deadline to enforce, a delayed instruction to release).
    fn next_timeout(&self) -> Option<Nanos>;
}
