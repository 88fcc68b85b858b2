//! Per-frame placement over a mixed pool (`--devices cpu:2,gpu:0`).
//!
//! A GPU executor keeps a frame's intermediate data in its own memory, so it runs
//! frames whole. [`FramePlacement`] is the policy the driver runs: it places every
//! arriving frame whole on one of
//!
//! * the **CPU pool**: the chosen policy schedules the frame's instructions over
//!   every CPU device, as in a CPU-only run;
//! * one **whole-frame pool** per GPU device (`DeviceKind::Gpu` in the real-time
//!   runtime): the same policy, instantiated for that device alone.
//!
//! The frame goes where it is predicted to finish first: `now + backlog + service`,
//! from each pool's own device costs (calibrated or labelled modelled, then
//! refined by the pool's completions as the scoreboard refines its own). A
//! whole-frame device runs one instruction at a time, so its service is the sum of
//! the frame's instruction latencies; the CPU pool's is the larger of the frame's
//! critical path and its work spread over the pool's units. Backlog is the
//! estimated service still owed to the frames placed there, paid down as their
//! instructions complete. Each pool's policy has its own scoreboard, which charges
//! its devices their own costs.
//!
//! A pool that loses its last device is dissolved: its policy is dropped (its
//! devices' late completions are ignored by the driver) and each of its frames is
//! re-planned from its inputs (`frame_arrived` and the `input_ready`s seen so far
//! replayed) on the pool predicted to finish it first, or NACKed (deadline missed)
//! when no pool can finish it by its deadline. With no device left anywhere, frames
//! wait in the CPU pool for a device to join, as in a CPU-only run. A whole-frame
//! device that refuses work as removed is treated as lost at once.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;

use crate::costs::DeviceProfile;
use crate::dag::FrameDag;
use crate::engine::{Dispatch, EngineEvent, FrameOutcome, InstrError, Policy};
use crate::isa::{DeviceId, DeviceKind, FrameId, Instr, Nanos, Opcode};
use crate::policy::{make_policy, PolicyParams};
use crate::shape::FrameShape;

/// Frames a whole-frame device holds at once (a GPU executor's frame slots).
pub const WHOLE_FRAME_WINDOW: usize = 16;

/// Where a frame runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PoolId {
    Cpu,
    Whole(DeviceId),
}

/// Completions folded into a pool's latency averages between two recomputations
/// of its costs (and the weight of one completion: 1 / this).
const REFINE_WINDOW: u32 = 64;

/// One pool: a policy over its devices and the work placed on it.
struct Pool {
    policy: Box<dyn Policy>,
    devices: BTreeMap<DeviceId, DeviceProfile>,
    /// Runs frames one instruction at a time (a whole-frame device).
    serial: bool,
    /// Frames placed here at most.
    window: usize,
    frames: usize,
    /// Estimated service still owed to the frames placed here, ns.
    backlog_ns: Nanos,
    /// Per opcode, latency at full width: the largest device's profile, refined by
    /// this pool's completions.
    latency: [f64; Opcode::ALL.len()],
    need: [u32; Opcode::ALL.len()],
    units: u64,
    /// Completions folded in since the costs were last recomputed.
    samples: u32,
    /// Per opcode, what one instruction adds to this pool's busy time, ns.
    op_cost: [Nanos; Opcode::ALL.len()],
    /// Estimated time to run one frame here with nothing else, ns.
    service_ns: Nanos,
}

impl Pool {
    fn new(policy: Box<dyn Policy>, window: usize, serial: bool) -> Self {
        Self {
            policy,
            devices: BTreeMap::new(),
            serial,
            window,
            frames: 0,
            backlog_ns: 0,
            latency: [0.0; Opcode::ALL.len()],
            need: [1; Opcode::ALL.len()],
            units: 0,
            samples: 0,
            op_cost: [0; Opcode::ALL.len()],
            service_ns: 0,
        }
    }

    /// Seed the pool's costs from its devices' profiles (the largest device's
    /// stand for the pool) after a device joined or left.
    fn reseed(&mut self, dag: &FrameDag) {
        self.units = self
            .devices
            .values()
            .map(|p| u64::from(p.units.max(1)))
            .sum();
        if let Some(main) = self.devices.values().max_by_key(|p| p.units) {
            for op in Opcode::ALL {
                let c = main.cost(op);
                self.latency[op.index()] = c.latency_ns as f64;
                self.need[op.index()] = c.need.max(1);
            }
        }
        self.samples = 0;
        self.recompute(dag);
    }

    /// Per-opcode cost and one frame's service from the latencies: a whole-frame
    /// device runs instructions one after another; the CPU pool spreads a frame's
    /// work over all its units but cannot beat the frame's critical path.
    fn recompute(&mut self, dag: &FrameDag) {
        if self.devices.is_empty() {
            self.op_cost = [0; Opcode::ALL.len()];
            self.service_ns = 0;
            return;
        }
        let counts = dag.opcode_counts();
        let mut work: Nanos = 0;
        for op in Opcode::ALL {
            let i = op.index();
            let lat = self.latency[i].max(0.0) as Nanos;
            self.op_cost[i] = if self.serial {
                lat
            } else {
                lat.saturating_mul(u64::from(self.need[i])) / self.units.max(1)
            };
            work = work.saturating_add(self.op_cost[i].saturating_mul(counts[i] as u64));
        }
        self.service_ns = if self.serial {
            work
        } else {
            let latency = &self.latency;
            let cp = dag
                .critical_path_to_end(|op| latency[op.index()].max(0.0) as Nanos)
                .into_iter()
                .max()
                .unwrap_or(0);
            work.max(cp)
        };
    }

    /// Fold in one instruction's measured run time.
    fn observe(&mut self, dag: &FrameDag, op: Opcode, elapsed_ns: Nanos) {
        let avg = &mut self.latency[op.index()];
        *avg += (elapsed_ns as f64 - *avg) / f64::from(REFINE_WINDOW);
        self.samples += 1;
        if self.samples >= REFINE_WINDOW {
            self.samples = 0;
            self.recompute(dag);
        }
    }

    /// When a frame placed now would finish here.
    fn predicted_finish(&self, now: Nanos) -> Nanos {
        now.saturating_add(self.backlog_ns)
            .saturating_add(self.service_ns)
    }

    fn open(&self) -> bool {
        !self.devices.is_empty() && self.frames < self.window
    }
}

/// What placement remembers of a frame until it ends.
struct Placed {
    pool: PoolId,
    deadline: Nanos,
    /// Symbols whose input arrived (replayed when the frame is re-planned).
    inputs: Vec<usize>,
    /// Estimated service still owed to it, ns.
    left_ns: Nanos,
}

/// The driver's policy: frames placed whole on the CPU pool or on one whole-frame
/// device, each pool scheduled by its own instance of the chosen policy.
pub struct FramePlacement {
    name: &'static str,
    shape: FrameShape,
    dag: FrameDag,
    cpu: Pool,
    whole: BTreeMap<DeviceId, Pool>,
    frames: FxHashMap<FrameId, Placed>,
    events: VecDeque<EngineEvent>,
    /// Round-robin start over the pools in `poll_dispatch`.
    rr: usize,
    /// Frames moved to another pool after theirs lost its device.
    replanned: u64,
    /// Frames NACKed because no pool could finish them in time after a loss.
    nacked: u64,
}

impl FramePlacement {
    /// Place frames between `cpu_policy` (which schedules the CPU pool) and one
    /// instance of the same policy per GPU device, for frames of `shape`.
    pub fn new(cpu_policy: Box<dyn Policy>, shape: &FrameShape) -> Self {
        let window = PolicyParams::default().max_in_flight;
        Self {
            name: cpu_policy.name(),
            shape: shape.clone(),
            dag: FrameDag::build(shape),
            cpu: Pool::new(cpu_policy, window, false),
            whole: BTreeMap::new(),
            frames: FxHashMap::default(),
            events: VecDeque::new(),
            rr: 0,
            replanned: 0,
            nacked: 0,
        }
    }

    /// Frames re-planned on another pool after theirs lost its last device.
    pub fn replanned(&self) -> u64 {
        self.replanned
    }

    /// Frames NACKed after a loss because no pool could finish them in time.
    pub fn nacked(&self) -> u64 {
        self.nacked
    }

    /// A fresh policy for a new pool: the chosen policy with default parameters,
    /// holding at most `window` frames. None when the policy has no public name.
    fn new_policy(&self, window: usize) -> Option<Box<dyn Policy>> {
        let params = PolicyParams {
            max_in_flight: window,
            ..PolicyParams::default()
        };
        make_policy(self.name, &self.shape, &params).ok()
    }

    fn pool_mut(&mut self, id: PoolId) -> Option<&mut Pool> {
        match id {
            PoolId::Cpu => Some(&mut self.cpu),
            PoolId::Whole(d) => self.whole.get_mut(&d),
        }
    }

    /// The open pool predicted to finish a new frame first (CPU first on ties).
    fn best_pool(&self, now: Nanos) -> Option<(PoolId, Nanos)> {
        let cpu = self
            .cpu
            .open()
            .then(|| (PoolId::Cpu, self.cpu.predicted_finish(now)));
        let whole = self
            .whole
            .iter()
            .filter(|(_, p)| p.open())
            .map(|(&d, p)| (PoolId::Whole(d), p.predicted_finish(now)));
        cpu.into_iter().chain(whole).min_by_key(|&(_, t)| t)
    }

    /// Place `frame` on `pool` and replay its inputs there.
    fn place(
        &mut self,
        now: Nanos,
        frame: FrameId,
        pool: PoolId,
        deadline: Nanos,
        inputs: &[usize],
    ) {
        let Some(p) = self.pool_mut(pool) else {
            return;
        };
        let left_ns = p.service_ns;
        p.frames += 1;
        p.backlog_ns = p.backlog_ns.saturating_add(left_ns);
        p.policy.frame_arrived(now, frame, deadline);
        for &s in inputs {
            p.policy.input_ready(now, frame, s);
        }
        self.frames.insert(
            frame,
            Placed {
                pool,
                deadline,
                inputs: inputs.to_vec(),
                left_ns,
            },
        );
    }

    /// A frame ended (any outcome): release what its pool owed it.
    fn ended(&mut self, frame: FrameId) {
        let Some(f) = self.frames.remove(&frame) else {
            return;
        };
        if let Some(p) = self.pool_mut(f.pool) {
            p.frames = p.frames.saturating_sub(1);
            p.backlog_ns = p.backlog_ns.saturating_sub(f.left_ns);
        }
    }

    /// Take `pool`'s events into ours, releasing ended frames.
    fn drain_events(&mut self, pool: PoolId) {
        while let Some(ev) = self.pool_mut(pool).and_then(|p| p.policy.poll_event()) {
            if let EngineEvent::FrameDone { frame, .. } = ev {
                self.ended(frame);
            }
            self.events.push_back(ev);
        }
    }

    /// Drop a pool's policy and re-plan its frames elsewhere (or NACK them).
    fn dissolve(&mut self, now: Nanos, pool: PoolId) {
        // The CPU pool is replaced by an empty one (it is dissolved only when it has
        // no device left); without a fresh policy its frames stay where they are.
        let fresh_cpu = match pool {
            PoolId::Cpu => match self.new_policy(self.cpu.window) {
                Some(p) => Some(p),
                None => return,
            },
            PoolId::Whole(_) => None,
        };
        self.drain_events(pool);
        let mut moved: Vec<(FrameId, Nanos, Vec<usize>)> = self
            .frames
            .iter()
            .filter(|(_, f)| f.pool == pool)
            .map(|(&id, f)| (id, f.deadline, f.inputs.clone()))
            .collect();
        moved.sort_unstable_by_key(|m| m.0);
        for (frame, ..) in &moved {
            self.ended(*frame);
        }
        match (pool, fresh_cpu) {
            (PoolId::Whole(d), _) => {
                self.whole.remove(&d);
            }
            (PoolId::Cpu, Some(fresh)) => self.cpu = Pool::new(fresh, self.cpu.window, false),
            (PoolId::Cpu, None) => {}
        }
        for (frame, deadline, inputs) in moved {
            match self.best_pool(now) {
                Some((target, finish)) if finish <= deadline => {
                    self.replanned += 1;
                    self.place(now, frame, target, deadline, &inputs);
                }
                Some(_) => {
                    self.nacked += 1;
                    self.events.push_back(EngineEvent::FrameDone {
                        frame,
                        outcome: FrameOutcome::DeadlineMissed,
                        latency_ns: 0,
                    });
                }
                // No device anywhere: wait in the CPU pool for one to join.
                None => self.place(now, frame, PoolId::Cpu, deadline, &inputs),
            }
        }
    }

    /// With whole-frame devices present and no CPU device, frames waiting in the CPU
    /// pool move to them.
    fn rehome_cpu_frames(&mut self, now: Nanos) {
        let orphaned = self.cpu.devices.is_empty()
            && self.whole.values().any(|p| !p.devices.is_empty())
            && self.frames.values().any(|f| f.pool == PoolId::Cpu);
        if orphaned {
            self.dissolve(now, PoolId::Cpu);
        }
    }
}

impl Policy for FramePlacement {
    fn name(&self) -> &'static str {
        self.name
    }

    fn add_device(&mut self, now: Nanos, device: DeviceId, profile: &DeviceProfile) {
        if self.whole.contains_key(&device) || self.cpu.devices.contains_key(&device) {
            self.remove_device(now, device);
        }
        let whole_pool = (profile.kind == DeviceKind::Gpu)
            .then(|| self.new_policy(WHOLE_FRAME_WINDOW))
            .flatten();
        match whole_pool {
            Some(policy) => {
                let mut pool = Pool::new(policy, WHOLE_FRAME_WINDOW, true);
                pool.policy.add_device(now, device, profile);
                pool.devices.insert(device, profile.clone());
                pool.reseed(&self.dag);
                self.whole.insert(device, pool);
                self.rehome_cpu_frames(now);
            }
            None => {
                self.cpu.policy.add_device(now, device, profile);
                self.cpu.devices.insert(device, profile.clone());
                self.cpu.reseed(&self.dag);
            }
        }
    }

    fn remove_device(&mut self, now: Nanos, device: DeviceId) {
        if self.whole.contains_key(&device) {
            self.dissolve(now, PoolId::Whole(device));
        } else if self.cpu.devices.remove(&device).is_some() {
            self.cpu.policy.remove_device(now, device);
            self.cpu.reseed(&self.dag);
            self.rehome_cpu_frames(now);
        }
    }

    fn frame_arrived(&mut self, now: Nanos, frame: FrameId, deadline: Nanos) {
        if self.frames.contains_key(&frame) {
            return;
        }
        let pool = self.best_pool(now).map_or(PoolId::Cpu, |(p, _)| p);
        self.place(now, frame, pool, deadline, &[]);
    }

    fn input_ready(&mut self, now: Nanos, frame: FrameId, symbol: usize) {
        let Some(f) = self.frames.get_mut(&frame) else {
            return;
        };
        f.inputs.push(symbol);
        let pool = f.pool;
        if let Some(p) = self.pool_mut(pool) {
            p.policy.input_ready(now, frame, symbol);
        }
    }

    fn completed(
        &mut self,
        now: Nanos,
        instr: Instr,
        device: DeviceId,
        started: Nanos,
        result: Result<(), InstrError>,
    ) {
        if let Err(InstrError::DeviceRemoved(d) | InstrError::NoDevice(d)) = &result {
            // A whole-frame device refusing work is on its way out (its own loss
            // report follows): re-plan its frames now rather than let its policy
            // retry on the one device it has and fail them.
            if self.whole.contains_key(d) {
                self.dissolve(now, PoolId::Whole(*d));
                return;
            }
        }
        let choosing = !self.whole.is_empty();
        let (pool, p) = match self.whole.get_mut(&device) {
            Some(p) => (PoolId::Whole(device), p),
            None => (PoolId::Cpu, &mut self.cpu),
        };
        // Pay down the frame's estimate (only placement reads it, so only with a
        // choice to make) when a live device of its pool finished its instruction.
        let pay = result.is_ok() && choosing && p.devices.contains_key(&device);
        if let Some(f) = self
            .frames
            .get_mut(&instr.frame)
            .filter(|f| pay && f.pool == pool)
        {
            let paid = p.op_cost[instr.opcode.index()].min(f.left_ns);
            f.left_ns -= paid;
            p.backlog_ns = p.backlog_ns.saturating_sub(paid);
        }
        if pay {
            p.observe(&self.dag, instr.opcode, now.saturating_sub(started));
        }
        p.policy.completed(now, instr, device, started, result);
    }

    fn poll_dispatch(&mut self, now: Nanos) -> Option<Dispatch> {
        if self.whole.is_empty() {
            return self.cpu.policy.poll_dispatch(now);
        }
        let n = self.whole.len() + 1;
        let ids: Vec<DeviceId> = self.whole.keys().copied().collect();
        for k in 0..n {
            let i = (self.rr + k) % n;
            let pool = if i == 0 {
                &mut self.cpu
            } else {
                self.whole.get_mut(&ids[i - 1])?
            };
            if let Some(d) = pool.policy.poll_dispatch(now) {
                self.rr = (i + 1) % n;
                return Some(d);
            }
        }
        None
    }

    fn poll_event(&mut self) -> Option<EngineEvent> {
        if let Some(ev) = self.events.pop_front() {
            return Some(ev);
        }
        self.drain_events(PoolId::Cpu);
        let ids: Vec<DeviceId> = self.whole.keys().copied().collect();
        for d in ids {
            self.drain_events(PoolId::Whole(d));
        }
        self.events.pop_front()
    }

    fn next_timeout(&self) -> Option<Nanos> {
        std::iter::once(&self.cpu)
            .chain(self.whole.values())
            .filter_map(|p| p.policy.next_timeout())
            .min()
    }
}

#[cfg(test)]
mod tests;
