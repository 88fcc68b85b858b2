//! The machinery every policy shares: admission, the status and device tables,
//! readiness tracking, deadlines, failures, device churn and the event queue. A
//! policy differs only in its [`Strategy`]: where a ready instruction waits, in which
//! order, and which queued instruction a device with free capacity takes next.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::costs::DeviceProfile;
use crate::dag::{FrameDag, InstrIdx};
use crate::engine::{Dispatch, EngineEvent, FrameOutcome, InstrError, Policy};
use crate::isa::{DeviceId, FrameId, Instr, Nanos, Opcode};
use crate::scoreboard::{ById, DeviceTable, FrameRecord, OpcodeTable, RunEntry, Stage};
use crate::shape::FrameShape;

use super::PolicyParams;

/// A queued instruction. Queues order entries by key (smaller first), then frame and
/// instruction; the entry carries its frame's deadline so that a policy reading a
/// queue needs no frame lookup for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Queued {
    pub key: u64,
    pub frame: FrameId,
    pub idx: InstrIdx,
    pub deadline: Nanos,
}

/// What distinguishes one policy from another.
pub(crate) trait Strategy: Send {
    fn name(&self) -> &'static str;

    /// The device queue for a newly ready instruction; `None` parks it globally until
    /// a device joins.
    fn route(&mut self, core: &mut Core, frame: FrameId, idx: InstrIdx) -> Option<DeviceId>;

    /// Order key inside its queue.
    fn key(&mut self, core: &Core, frame: FrameId, idx: InstrIdx) -> u64;

    /// Choose the next dispatch (default: strict FIFO head of each device queue).
    fn pick(&mut self, core: &mut Core, _now: Nanos) -> Option<Dispatch> {
        core.pick_device_queues()
    }

    /// Called after `dispatch` is recorded (LROC coalesces here).
    fn issued(&mut self, _core: &mut Core, _now: Nanos, _dispatch: &Dispatch) {}

    /// Earliest time the strategy wants to be polled for its own reasons.
    fn wakeup(&self, _core: &Core) -> Option<Nanos> {
        None
    }
}

/// Shared policy state (the scoreboard plus queues).
pub(crate) struct Core {
    pub params: PolicyParams,
    pub dag: Arc<FrameDag>,
    pub table: OpcodeTable,
    pub devices: DeviceTable,
    pub frames: FxHashMap<FrameId, FrameRecord>,
    deadlines: BTreeSet<(Nanos, FrameId)>,
    /// Each live device's queue.
    pub device_queues: ById<BTreeSet<Queued>>,
    pub global: BTreeSet<Queued>,
    events: VecDeque<EngineEvent>,
    pending: VecDeque<Dispatch>,
    /// Calibrated critical path to the end of the frame, per instruction.
    pub cp: Vec<Nanos>,
    /// Calibrated work of each instruction in unit-nanoseconds (latency x units on
    /// the main device), refreshed with `cp`.
    pub work: Vec<Nanos>,
    /// Sum of `work` over the frame: a new frame's `work_left_ns`.
    pub frame_work_ns: Nanos,
    /// Bytes an instruction of each opcode reads from its predecessors (largest over
    /// the DAG), for the planner's copy estimate.
    pub input_bytes: [u64; Opcode::ALL.len()],
    /// Bytes the successors of an instruction of each opcode read from it.
    pub output_bytes: [u64; Opcode::ALL.len()],
    cp_observations: u64,
    spare: Vec<FrameRecord>,
    admitted: u64,
    /// Counter for FIFO keys.
    pub seq: u64,
    /// Round-robin start over device queues so no device starves the others.
    rr: usize,
}

impl Core {
    pub fn new(shape: &FrameShape, params: PolicyParams) -> Self {
        let dag = Arc::new(FrameDag::build(shape));
        let table = OpcodeTable::new(params.calibration_window);
        // The shape does not carry the FFT size; the next power of two above the data
        // subcarriers is what every configuration uses, close enough for an estimate.
        let fft = shape.data_num.next_power_of_two();
        let mut input_bytes = [0u64; Opcode::ALL.len()];
        let mut output_bytes = [0u64; Opcode::ALL.len()];
        for i in dag.topo_order() {
            let op = dag.opcode(i);
            let bytes: u64 = dag
                .preds(i)
                .iter()
                .map(|&p| crate::sim::model::input_bytes(dag.opcode(p), op, shape, fft))
                .sum();
            input_bytes[op.index()] = input_bytes[op.index()].max(bytes);
            let out: u64 = dag
                .succs(i)
                .iter()
                .map(|&s| crate::sim::model::input_bytes(op, dag.opcode(s), shape, fft))
                .sum();
            output_bytes[op.index()] = output_bytes[op.index()].max(out);
        }
        let mut core = Self {
            params,
            dag,
            table,
            devices: DeviceTable::default(),
            frames: FxHashMap::default(),
            deadlines: BTreeSet::new(),
            device_queues: ById::default(),
            global: BTreeSet::new(),
            events: VecDeque::new(),
            pending: VecDeque::new(),
            cp: Vec::new(),
            work: Vec::new(),
            frame_work_ns: 0,
            input_bytes,
            output_bytes,
            cp_observations: u64::MAX,
            spare: Vec::new(),
            admitted: 0,
            seq: 0,
            rr: 0,
        };
        core.refresh_cp();
        core
    }

    /// Recompute the critical paths when calibration moved (every window of samples).
    fn refresh_cp(&mut self) {
        let obs = self.table.observations();
        let window = u64::from(self.params.calibration_window);
        if self.cp_observations != u64::MAX && obs < self.cp_observations.saturating_add(window) {
            return;
        }
        self.cp_observations = obs;
        // With no device yet, the table's neutral guess for unknown devices.
        let main = self.devices.main_device().unwrap_or(DeviceId::MAX);
        let table = &self.table;
        self.cp = self.dag.critical_path_to_end(|op| table.latency(main, op));
        self.work = (0..self.dag.len() as InstrIdx)
            .map(|i| {
                let op = self.dag.opcode(i);
                table.latency(main, op) * u64::from(table.need(main, op).max(1))
            })
            .collect();
        self.frame_work_ns = self.work.iter().sum();
    }

    /// Open frames, earliest deadline first.
    pub fn frames_by_deadline(&self) -> impl Iterator<Item = (Nanos, FrameId)> + '_ {
        self.deadlines.iter().copied()
    }

    /// Units `op` takes on `device` at full width (never more than its capacity).
    pub fn units_for(&self, device: DeviceId, op: Opcode) -> u32 {
        self.devices
            .get(device)
            .map_or(0, |d| self.table.need(device, op).min(d.capacity))
    }

    /// Make a waiting instruction ready and queue it where the strategy says.
    pub fn make_ready<S: Strategy + ?Sized>(
        &mut self,
        strat: &mut S,
        frame: FrameId,
        idx: InstrIdx,
    ) {
        let device = strat.route(self, frame, idx);
        let key = strat.key(self, frame, idx);
        self.seq += 1;
        let Some(rec) = self.frames.get_mut(&frame) else {
            return;
        };
        let entry = Queued {
            key,
            frame,
            idx,
            deadline: rec.deadline,
        };
        let st = &mut rec.status[idx as usize];
        st.stage = Stage::Ready;
        st.queue_key = key;
        st.device = device;
        match device.and_then(|d| self.device_queues.get_mut(d)) {
            Some(q) => {
                q.insert(entry);
                let d = device.expect("queue exists");
                let op = self.dag.opcode(idx);
                if let Some(dev) = self.devices.get_mut(d) {
                    let need = self.table.need(d, op);
                    st.queue_cost = self.table.latency(d, op) * u64::from(need);
                    dev.queued_unit_ns += st.queue_cost;
                }
            }
            None => {
                st.device = None;
                self.global.insert(entry);
            }
        }
    }

    /// Take a ready instruction out of whichever queue holds it.
    fn unqueue(&mut self, frame: FrameId, idx: InstrIdx) {
        let Some(rec) = self.frames.get(&frame) else {
            return;
        };
        let st = rec.status[idx as usize];
        if st.stage != Stage::Ready {
            return;
        }
        let key = Queued {
            key: st.queue_key,
            frame,
            idx,
            deadline: rec.deadline,
        };
        let in_device = st
            .device
            .and_then(|d| self.device_queues.get_mut(d))
            .is_some_and(|q| q.remove(&key));
        if in_device {
            if let Some(dev) = st.device.and_then(|d| self.devices.get_mut(d)) {
                dev.queued_unit_ns = dev.queued_unit_ns.saturating_sub(st.queue_cost);
            }
        } else {
            self.global.remove(&key);
        }
    }

    /// Record `d` as issued: status table, device reservation, estimated times.
    pub fn issue(&mut self, now: Nanos, d: &Dispatch) {
        let idx = match self.dag.index_of(&d.instr) {
            Some(i) => i,
            None => return,
        };
        self.unqueue(d.instr.frame, idx);
        let Some(dev) = self.devices.get_mut(d.device) else {
            return;
        };
        let lat = self.table.latency_with(d.device, d.instr.opcode, d.units);
        let start = match d.after.and_then(|a| dev.running.get(&a)) {
            Some(pred) => pred.est_end.max(now),
            None => now,
        };
        dev.running_unit_ns += lat * u64::from(d.units);
        if d.after.is_none() {
            dev.in_use += d.units;
        } else if let Some(pred) = d.after.and_then(|a| dev.running.get_mut(&a)) {
            pred.follower = Some(d.instr);
        }
        dev.running.insert(
            d.instr,
            RunEntry {
                idx,
                units: d.units,
                low_priority: d.low_priority,
                after: d.after,
                follower: None,
                est_start: start,
                est_end: start.saturating_add(lat),
            },
        );
        if let Some(rec) = self.frames.get_mut(&d.instr.frame) {
            let st = &mut rec.status[idx as usize];
            st.stage = Stage::Issued;
            st.device = Some(d.device);
            st.units = d.units;
            st.low_priority = d.low_priority;
            st.issued_at = now;
        }
    }

    /// Queue a coalesced dispatch to hand out on the next poll.
    pub fn push_pending(&mut self, d: Dispatch) {
        self.pending.push_back(d);
    }

    /// Head of a device queue when it fits: strict FIFO per device (baselines).
    pub fn pick_device_queues(&mut self) -> Option<Dispatch> {
        let ids: Vec<DeviceId> = self.device_queues.iter().map(|(d, _)| d).collect();
        let n = ids.len();
        for k in 0..n {
            let device = ids[(self.rr + k) % n];
            let Some(&Queued { frame, idx, .. }) =
                self.device_queues.get(device).and_then(|q| q.first())
            else {
                continue;
            };
            let units = self.units_for(device, self.dag.opcode(idx));
            let free = self.devices.get(device).map_or(0, |d| d.free());
            if units > 0 && free >= units {
                self.rr = (self.rr + k + 1) % n;
                return Some(Dispatch {
                    instr: self.dag.instr(frame, idx),
                    device,
                    units,
                    low_priority: false,
                    after: None,
                });
            }
        }
        None
    }

    /// End a frame: one `FrameDone`, its queued instructions dropped. Instructions
    /// still running finish on their devices and only release units then.
    pub(crate) fn finish(&mut self, now: Nanos, frame: FrameId, outcome: FrameOutcome) {
        let Some(rec) = self.frames.get(&frame) else {
            return;
        };
        let ready: Vec<InstrIdx> = (0..rec.status.len() as InstrIdx)
            .filter(|&i| rec.status[i as usize].stage == Stage::Ready)
            .collect();
        for i in ready {
            self.unqueue(frame, i);
        }
        let Some(rec) = self.frames.remove(&frame) else {
            return;
        };
        self.deadlines.remove(&(rec.deadline, frame));
        self.events.push_back(EngineEvent::FrameDone {
            frame,
            outcome,
            latency_ns: now.saturating_sub(rec.arrival),
        });
        self.spare.push(rec);
    }

    fn expire(&mut self, now: Nanos) {
        while let Some(&(deadline, frame)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.finish(now, frame, FrameOutcome::DeadlineMissed);
        }
    }

    /// Earliest in-flight deadline.
    pub fn earliest_deadline(&self) -> Option<Nanos> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    fn commit<S: Strategy + ?Sized>(
        &mut self,
        strat: &mut S,
        now: Nanos,
        frame: FrameId,
        idx: InstrIdx,
        started: Nanos,
    ) {
        let dag = Arc::clone(&self.dag);
        let Some(rec) = self.frames.get_mut(&frame) else {
            return;
        };
        let st = &mut rec.status[idx as usize];
        st.stage = Stage::Committed;
        st.exec_at = started;
        st.commit_at = now;
        rec.committed += 1;
        let done = self.work.get(idx as usize).copied().unwrap_or(0);
        rec.work_left_ns = rec.work_left_ns.saturating_sub(done);
        let mut newly_ready = Vec::new();
        for &s in dag.succs(idx) {
            let r = &mut rec.remaining[s as usize];
            *r = r.saturating_sub(1);
            if *r == 0 && rec.status[s as usize].stage == Stage::Waiting {
                newly_ready.push(s);
            }
        }
        if rec.is_complete() {
            self.finish(now, frame, FrameOutcome::Completed);
            return;
        }
        for s in newly_ready {
            self.make_ready(strat, frame, s);
        }
    }

    /// Put an instruction that lost its device back: ready if its inputs are all
    /// committed, waiting otherwise (a coalesced one whose predecessor also moved).
    fn requeue<S: Strategy + ?Sized>(&mut self, strat: &mut S, frame: FrameId, idx: InstrIdx) {
        let Some(rec) = self.frames.get_mut(&frame) else {
            return;
        };
        let st = &mut rec.status[idx as usize];
        st.device = None;
        st.stage = Stage::Waiting;
        if rec.remaining[idx as usize] == 0 {
            self.make_ready(strat, frame, idx);
        }
    }
}

/// A policy = shared core + strategy.
pub(crate) struct Engine<S: Strategy> {
    pub core: Core,
    pub strat: S,
}

impl<S: Strategy> Policy for Engine<S> {
    fn name(&self) -> &'static str {
        self.strat.name()
    }

    fn add_device(&mut self, _now: Nanos, device: DeviceId, profile: &DeviceProfile) {
        if self.core.devices.contains(device) {
            // Re-adding a live device: treat as removal of the old incarnation first.
            self.remove_device(_now, device);
        }
        self.core.devices.add(device, profile.kind, profile.units);
        self.core.table.register(device, profile);
        self.core.device_queues.insert(device, BTreeSet::new());
        self.core.cp_observations = u64::MAX;
        self.core.refresh_cp();
        let parked: Vec<Queued> = std::mem::take(&mut self.core.global).into_iter().collect();
        for Queued { frame, idx, .. } in parked {
            if let Some(rec) = self.core.frames.get_mut(&frame) {
                rec.status[idx as usize].stage = Stage::Waiting;
            }
            self.core.make_ready(&mut self.strat, frame, idx);
        }
    }

    fn remove_device(&mut self, _now: Nanos, device: DeviceId) {
        let Some(entry) = self.core.devices.remove(device) else {
            return;
        };
        let queued = self.core.device_queues.remove(device).unwrap_or_default();
        self.core.pending.retain(|p| p.device != device);
        let mut running: Vec<(Instr, RunEntry)> = entry.running.into_iter().collect();
        running.sort_unstable_by_key(|(i, _)| *i);
        for rec in self.core.frames.values_mut() {
            if rec.bound == Some(device) {
                rec.bound = None;
            }
        }
        for (instr, run) in running {
            let moved = self.core.frames.get(&instr.frame).is_some_and(|rec| {
                let st = rec.status[run.idx as usize];
                st.stage == Stage::Issued && st.device == Some(device)
            });
            if moved {
                self.core.events.push_back(EngineEvent::Rescheduled {
                    instr,
                    from: device,
                });
                self.core.requeue(&mut self.strat, instr.frame, run.idx);
            }
        }
        for Queued { frame, idx, .. } in queued {
            self.core.requeue(&mut self.strat, frame, idx);
        }
        self.core.cp_observations = u64::MAX;
        self.core.refresh_cp();
    }

    fn frame_arrived(&mut self, now: Nanos, frame: FrameId, deadline: Nanos) {
        if self.core.frames.contains_key(&frame) {
            return;
        }
        if self.core.frames.len() >= self.core.params.max_in_flight {
            self.core.events.push_back(EngineEvent::FrameDone {
                frame,
                outcome: FrameOutcome::Rejected,
                latency_ns: 0,
            });
            return;
        }
        let spare = self.core.spare.pop();
        let order = self.core.admitted;
        self.core.admitted += 1;
        let mut rec = FrameRecord::reset(spare, &self.core.dag, frame, now, deadline, order);
        rec.work_left_ns = self.core.frame_work_ns;
        let free: Vec<InstrIdx> = (0..rec.remaining.len() as InstrIdx)
            .filter(|&i| rec.remaining[i as usize] == 0)
            .collect();
        self.core.frames.insert(frame, rec);
        self.core.deadlines.insert((deadline, frame));
        for i in free {
            self.core.make_ready(&mut self.strat, frame, i);
        }
    }

    fn input_ready(&mut self, _now: Nanos, frame: FrameId, symbol: usize) {
        let Some(idx) = self.core.dag.load_of_symbol(symbol) else {
            return;
        };
        let Some(rec) = self.core.frames.get_mut(&frame) else {
            return;
        };
        let r = &mut rec.remaining[idx as usize];
        if *r == 0 || rec.status[idx as usize].stage != Stage::Waiting {
            return; // duplicate notification
        }
        *r -= 1;
        if *r == 0 {
            self.core.make_ready(&mut self.strat, frame, idx);
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
        let core = &mut self.core;
        let Some(dev) = core.devices.get_mut(device) else {
            return; // late completion from a removed device
        };
        let Some(entry) = dev.running.remove(&instr) else {
            return;
        };
        if entry.after.is_none() {
            dev.in_use = dev.in_use.saturating_sub(entry.units);
        }
        let planned = entry.est_end.saturating_sub(entry.est_start) * u64::from(entry.units);
        dev.running_unit_ns = dev.running_unit_ns.saturating_sub(planned);
        dev.completed += 1;
        let mut orphan = None;
        if let Some(f) = entry.follower {
            if let Some(fe) = dev.running.get_mut(&f) {
                if result.is_ok() {
                    // The coalesced successor takes over the reservation and starts now.
                    fe.after = None;
                    fe.est_end = now + fe.est_end.saturating_sub(fe.est_start);
                    fe.est_start = now;
                    dev.in_use += fe.units;
                } else {
                    let fe = dev.running.remove(&f);
                    if let Some(fe) = &fe {
                        let planned = fe.est_end.saturating_sub(fe.est_start) * u64::from(fe.units);
                        dev.running_unit_ns = dev.running_unit_ns.saturating_sub(planned);
                    }
                    orphan = fe.map(|e| (f.frame, e.idx));
                }
            }
        }
        if result.is_ok() {
            core.table.observe(
                device,
                instr.opcode,
                now.saturating_sub(started),
                entry.units,
            );
        }
        if let Some((frame, idx)) = orphan {
            // The driver should drop a coalesced instruction whose predecessor failed;
            // if it ran it anyway, its stale completion must not match a new dispatch,
            // so the re-run goes to another device when there is one.
            if let Some(rec) = core.frames.get_mut(&frame) {
                rec.status[idx as usize].avoid = Some(device);
            }
            core.requeue(&mut self.strat, frame, idx);
        }
        let idx = entry.idx;
        let valid = core.frames.get(&instr.frame).is_some_and(|rec| {
            let st = rec.status[idx as usize];
            st.stage == Stage::Issued && st.device == Some(device)
        });
        if !valid {
            return; // frame already ended, or a stale run
        }
        match result {
            Ok(()) => core.commit(&mut self.strat, now, instr.frame, idx, started),
            Err(err) => {
                let rec = core.frames.get_mut(&instr.frame).expect("checked above");
                let st = &mut rec.status[idx as usize];
                st.failures = st.failures.saturating_add(1);
                if st.failures > core.params.retries {
                    let why = format!("{instr} failed on device {device}: {err}");
                    core.finish(now, instr.frame, FrameOutcome::Failed(why));
                } else {
                    st.avoid = Some(device);
                    core.requeue(&mut self.strat, instr.frame, idx);
                }
            }
        }
    }

    fn poll_dispatch(&mut self, now: Nanos) -> Option<Dispatch> {
        // Coalesced dispatches already hold reservations: always hand them out.
        if let Some(d) = self.core.pending.pop_front() {
            return Some(d);
        }
        self.core.expire(now);
        self.core.refresh_cp();
        let d = self.strat.pick(&mut self.core, now)?;
        self.core.issue(now, &d);
        self.strat.issued(&mut self.core, now, &d);
        Some(d)
    }

    fn poll_event(&mut self) -> Option<EngineEvent> {
        self.core.events.pop_front()
    }

    fn next_timeout(&self) -> Option<Nanos> {
        match (self.core.earliest_deadline(), self.strat.wakeup(&self.core)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
