//! The simulator's event loop.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use radiohost_rt::stats::LatencyHistogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;

use super::model::input_bytes;
use super::{DeviceRuns, OpcodeBreakdown, SimConfig, SimError, SimResult};
use crate::costs::DeviceProfile;
use crate::dag::FrameDag;
use crate::engine::{Dispatch, EngineEvent, FrameOutcome, Policy};
use crate::isa::{DeviceId, DeviceKind, FrameId, Instr, Nanos, Opcode};
use crate::policy::make_policy;
use crate::shape::FrameShape;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Churn(usize),
    Finish(usize),
    Arrive(FrameId),
    Input(FrameId, u16),
}

struct SimDevice {
    kind: DeviceKind,
    capacity: u32,
    in_use: u32,
    alive: bool,
    incarnation: u32,
}

struct Run {
    instr: Instr,
    device: DeviceId,
    incarnation: u32,
    started: Nanos,
    units: u32,
}

struct SimFrame {
    /// Commit time and device per instruction (`None` until committed).
    commit: Vec<Option<(Nanos, DeviceId)>>,
    input_at: Vec<Nanos>,
}

#[derive(Default, Clone, Copy)]
struct OpStats {
    count: u64,
    exec: u64,
    wait: u64,
    copy: u64,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    shape: FrameShape,
    dag: FrameDag,
    policy: Box<dyn Policy>,
    rng: ChaCha8Rng,
    now: Nanos,
    seq: u64,
    events: BinaryHeap<Reverse<(Nanos, u64, Ev)>>,
    devices: FxHashMap<DeviceId, SimDevice>,
    runs: Vec<Option<Run>>,
    free_runs: Vec<usize>,
    followers: FxHashMap<(Instr, DeviceId), Dispatch>,
    /// Normal-priority dispatches a full device took into its own work queue (LROC's
    /// lookahead); each starts when units free on that device, in order.
    device_queues: FxHashMap<DeviceId, VecDeque<Dispatch>>,
    frames: FxHashMap<FrameId, SimFrame>,
    /// What every device offers and each opcode costs on it (the simulated kernels
    /// take these latencies; the policy is told the same profile).
    profile: DeviceProfile,
    ops: [OpStats; Opcode::ALL.len()],
    hist: LatencyHistogram,
    res: SimResult,
    busy_unit_ns: u128,
    capacity_ns: u128,
    last_arrival: Nanos,
    /// Completions per (device, incarnation).
    runs_by_device: BTreeMap<(DeviceId, u32), u64>,
}

fn contract(policy: &str, what: String) -> SimError {
    SimError::Contract {
        policy: policy.to_string(),
        what,
    }
}

/// Run `policy` on `cfg` and measure it.
///
/// # Errors
/// Invalid configuration or a policy that breaks the engine contract (dispatch to an
/// unknown device, needing more units than the device has, before its inputs, ...).
pub fn simulate(policy: &str, cfg: &SimConfig) -> Result<SimResult, SimError> {
    cfg.validate()?;
    let shape = cfg.shape()?;
    let p = make_policy(policy, &shape, &cfg.params)?;
    // Every simulated device is of one kind and size: one profile, from the model
    // (calibrated when the model came from a calibration file).
    let profile = DeviceProfile::modelled(cfg.kind, cfg.units, &cfg.model, &shape, cfg.fft_size);
    let profile = DeviceProfile {
        source: cfg.model.source(cfg.kind),
        ..profile
    };
    let dag = FrameDag::build(&shape);
    let frames = cfg.frames_per_ru * u64::from(cfg.rus);
    let mut sim = Sim {
        cfg,
        dag,
        policy: p,
        rng: ChaCha8Rng::seed_from_u64(cfg.seed),
        now: 0,
        seq: 0,
        events: BinaryHeap::new(),
        devices: FxHashMap::default(),
        runs: Vec::new(),
        free_runs: Vec::new(),
        followers: FxHashMap::default(),
        device_queues: FxHashMap::default(),
        frames: FxHashMap::default(),
        profile,
        ops: [OpStats::default(); Opcode::ALL.len()],
        hist: LatencyHistogram::new(),
        res: SimResult {
            policy: policy.to_string(),
            kind: if cfg.kind == DeviceKind::Gpu {
                "gpu"
            } else {
                "cpu"
            },
            devices: cfg.devices,
            units: cfg.units,
            rus: cfg.rus,
            antennas: cfg.antennas,
            users: cfg.users,
            costs: cfg.model.source(cfg.kind),
            frames,
            completed: 0,
            missed: 0,
            rejected: 0,
            failed: 0,
            mean_ms: 0.0,
            p99_ms: 0.0,
            p9999_ms: 0.0,
            max_ms: 0.0,
            offered_fps: f64::from(cfg.rus) * 1e9 / cfg.frame_period_ns as f64,
            achieved_fps: 0.0,
            utilization: 0.0,
            rescheduled: 0,
            low_priority: 0,
            coalesced: 0,
            cross_device_copies: 0,
            device_queued: 0,
            per_opcode: Vec::new(),
            device_runs: Vec::new(),
        },
        shape,
        busy_unit_ns: 0,
        capacity_ns: 0,
        last_arrival: 0,
        runs_by_device: BTreeMap::new(),
    };
    sim.run()?;
    Ok(sim.res)
}

impl Sim<'_> {
    fn push(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    fn total_capacity(&self) -> u64 {
        self.devices
            .values()
            .filter(|d| d.alive)
            .map(|d| u64::from(d.capacity))
            .sum()
    }

    /// Advance the clock, integrating the pool's capacity over the elapsed time.
    fn advance(&mut self, t: Nanos) {
        self.capacity_ns += u128::from(t - self.now) * u128::from(self.total_capacity());
        self.now = t;
    }

    fn run(&mut self) -> Result<(), SimError> {
        let cfg = self.cfg;
        for d in 0..cfg.devices {
            self.devices.insert(
                d,
                SimDevice {
                    kind: cfg.kind,
                    capacity: cfg.units,
                    in_use: 0,
                    alive: true,
                    incarnation: 0,
                },
            );
            self.policy.add_device(0, d, &self.profile);
        }
        let symbols = cfg.schedule.chars().count().max(1) as u64;
        let symbol_ns = cfg.frame_period_ns / symbols;
        for n in 0..cfg.frames_per_ru {
            for r in 0..u64::from(cfg.rus) {
                let frame = n * u64::from(cfg.rus) + r;
                let start = n * cfg.frame_period_ns;
                // A frame arrives with its first symbol; each symbol lands at its end.
                self.push(start + symbol_ns, Ev::Arrive(frame));
                for s in self.shape.received_symbols() {
                    self.push(
                        start + (s as u64 + 1) * symbol_ns,
                        Ev::Input(frame, s as u16),
                    );
                }
            }
        }
        for (i, c) in cfg.churn.iter().enumerate() {
            self.push(c.at_ns, Ev::Churn(i));
        }
        let mut stalls = 0;
        let mut done = 0u64;
        loop {
            let t_ev = self.events.peek().map(|r| r.0 .0);
            let t_out = self.policy.next_timeout();
            let t = match (t_ev, t_out) {
                (Some(a), Some(b)) => a.min(b.max(self.now)),
                (Some(a), None) => a,
                (None, Some(b)) if done < self.res.frames => b.max(self.now),
                _ => break,
            };
            if t == self.now && t_ev != Some(t) {
                stalls += 1;
                if stalls > 1_000 {
                    return Err(contract(
                        self.policy.name(),
                        format!("asks to be polled again at {t} ns without making progress"),
                    ));
                }
            } else {
                stalls = 0;
            }
            self.advance(t);
            if t_ev == Some(t) {
                let Reverse((_, _, ev)) = self.events.pop().expect("peeked");
                self.handle(ev)?;
            }
            self.dispatch_all()?;
            while let Some(e) = self.policy.poll_event() {
                match e {
                    EngineEvent::FrameDone {
                        frame,
                        outcome,
                        latency_ns,
                    } => {
                        done += 1;
                        self.frames.remove(&frame);
                        match outcome {
                            FrameOutcome::Completed => self.res.completed += 1,
                            FrameOutcome::DeadlineMissed => self.res.missed += 1,
                            FrameOutcome::Rejected => self.res.rejected += 1,
                            FrameOutcome::Failed(_) => self.res.failed += 1,
                        }
                        if outcome != FrameOutcome::Rejected {
                            self.hist.record(latency_ns);
                        }
                    }
                    EngineEvent::Rescheduled { .. } => self.res.rescheduled += 1,
                }
            }
        }
        if done != self.res.frames {
            return Err(contract(
                self.policy.name(),
                format!(
                    "{} of {} frames never got a FrameDone",
                    self.res.frames - done,
                    self.res.frames
                ),
            ));
        }
        self.finish_stats();
        Ok(())
    }

    fn handle(&mut self, ev: Ev) -> Result<(), SimError> {
        match ev {
            Ev::Arrive(frame) => {
                self.last_arrival = self.now;
                self.frames.insert(
                    frame,
                    SimFrame {
                        commit: vec![None; self.dag.len()],
                        input_at: vec![0; self.cfg.schedule.len()],
                    },
                );
                self.policy
                    .frame_arrived(self.now, frame, self.now + self.cfg.deadline_ns);
            }
            Ev::Input(frame, s) => {
                if let Some(f) = self.frames.get_mut(&frame) {
                    f.input_at[usize::from(s)] = self.now;
                }
                self.policy.input_ready(self.now, frame, usize::from(s));
            }
            Ev::Churn(i) => {
                let c = self.cfg.churn[i];
                if c.add {
                    // A removal already moved the incarnation on (its runs' finishes no
                    // longer match), so the device joins again as that one.
                    let inc = self.devices.get(&c.device).map_or(0, |d| d.incarnation);
                    if self.devices.get(&c.device).is_some_and(|d| d.alive) {
                        return Ok(()); // already there
                    }
                    self.devices.insert(
                        c.device,
                        SimDevice {
                            kind: self.cfg.kind,
                            capacity: self.cfg.units,
                            in_use: 0,
                            alive: true,
                            incarnation: inc,
                        },
                    );
                    self.policy.add_device(self.now, c.device, &self.profile);
                } else if let Some(d) = self.devices.get_mut(&c.device) {
                    if d.alive {
                        // Runs on it are lost: their Finish events no longer match.
                        d.alive = false;
                        d.incarnation += 1;
                        d.in_use = 0;
                        self.followers.retain(|(_, dev), _| *dev != c.device);
                        self.device_queues.remove(&c.device);
                        self.policy.remove_device(self.now, c.device);
                    }
                }
            }
            Ev::Finish(slot) => {
                let run = self.runs[slot].take().expect("finish of an empty slot");
                self.free_runs.push(slot);
                let Some(dev) = self.devices.get_mut(&run.device) else {
                    return Ok(());
                };
                if !dev.alive || dev.incarnation != run.incarnation {
                    return Ok(()); // the device went away under it
                }
                dev.in_use -= run.units;
                *self
                    .runs_by_device
                    .entry((run.device, run.incarnation))
                    .or_default() += 1;
                self.busy_unit_ns += u128::from(self.now - run.started) * u128::from(run.units);
                if let (Some(f), Some(idx)) = (
                    self.frames.get_mut(&run.instr.frame),
                    self.dag.index_of(&run.instr),
                ) {
                    f.commit[idx as usize] = Some((self.now, run.device));
                }
                self.policy
                    .completed(self.now, run.instr, run.device, run.started, Ok(()));
                if let Some(next) = self.followers.remove(&(run.instr, run.device)) {
                    self.start(&next)?;
                }
                self.start_queued(run.device)?;
            }
        }
        Ok(())
    }

    fn dispatch_all(&mut self) -> Result<(), SimError> {
        while let Some(d) = self.policy.poll_dispatch(self.now) {
            let Some(dev) = self.devices.get(&d.device).filter(|x| x.alive) else {
                return Err(contract(
                    self.policy.name(),
                    format!(
                        "{} dispatched to device {}, which is not in the pool",
                        d.instr, d.device
                    ),
                ));
            };
            if d.units == 0 {
                return Err(contract(
                    self.policy.name(),
                    format!("{} dispatched with 0 units", d.instr),
                ));
            }
            if d.low_priority {
                self.res.low_priority += 1;
            }
            match d.after {
                Some(pred) => {
                    self.res.coalesced += 1;
                    self.followers.insert((pred, d.device), d);
                }
                None => {
                    if d.units > dev.capacity {
                        return Err(contract(
                            self.policy.name(),
                            format!(
                                "{} needs {} units, more than device {} has ({})",
                                d.instr, d.units, d.device, dev.capacity
                            ),
                        ));
                    }
                    let queue = self.device_queues.entry(d.device).or_default();
                    if !d.low_priority && (dev.in_use + d.units > dev.capacity || !queue.is_empty())
                    {
                        // A full device queues it and starts it when units free.
                        self.res.device_queued += 1;
                        queue.push_back(d);
                    } else {
                        self.start(&d)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Start what `device` queued while full, in order, while its units allow.
    fn start_queued(&mut self, device: DeviceId) -> Result<(), SimError> {
        loop {
            let Some(dev) = self.devices.get(&device).filter(|d| d.alive) else {
                return Ok(());
            };
            let free = dev.capacity.saturating_sub(dev.in_use);
            let Some(queue) = self.device_queues.get_mut(&device) else {
                return Ok(());
            };
            match queue.front() {
                Some(d) if d.units <= free => {
                    let d = queue.pop_front().expect("front exists");
                    self.start(&d)?;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Start `d` now: copy inputs from other devices, then run the kernel.
    fn start(&mut self, d: &Dispatch) -> Result<(), SimError> {
        let Some(idx) = self.dag.index_of(&d.instr) else {
            return Err(contract(
                self.policy.name(),
                format!("{} is not in the frame DAG", d.instr),
            ));
        };
        let dev = self.devices.get(&d.device).expect("checked by caller");
        let kind = dev.kind;
        let over = (dev.in_use + d.units).saturating_sub(dev.capacity);
        let op = d.instr.opcode;
        // Inputs: when they were ready, and what must cross from other devices.
        let mut ready_at = 0;
        let mut copy_ns = 0;
        if let Some(f) = self.frames.get(&d.instr.frame) {
            if op == Opcode::Load {
                ready_at = f.input_at[usize::from(d.instr.symbol)];
            }
            let mut by_source: Vec<(DeviceId, DeviceKind, u64)> = Vec::new();
            for &p in self.dag.preds(idx) {
                let Some((at, src)) = f.commit[p as usize] else {
                    continue;
                };
                ready_at = ready_at.max(at);
                if src == d.device {
                    continue;
                }
                let bytes = input_bytes(self.dag.opcode(p), op, &self.shape, self.cfg.fft_size);
                let src_kind = self.devices.get(&src).map_or(kind, |s| s.kind);
                match by_source.iter_mut().find(|e| e.0 == src) {
                    Some(e) => e.2 += bytes,
                    None => by_source.push((src, src_kind, bytes)),
                }
            }
            for (_, src_kind, bytes) in by_source {
                copy_ns += self.cfg.model.copy_ns(src_kind, kind, bytes);
                self.res.cross_device_copies += 1;
            }
        }
        let cost = self.profile.cost(op);
        let need = u64::from(cost.need.max(1));
        let units = u64::from(d.units).min(need);
        let mut kernel = cost.latency_ns * need / units.max(1);
        let j = self.cfg.jitter;
        let mut factor = if j > 0.0 {
            self.rng.gen_range(1.0 - j..1.0 + j)
        } else {
            1.0
        };
        if self.rng.gen_range(0..1000) == 0 {
            factor *= 3.0;
        }
        if d.low_priority && over > 0 {
            // Shares the device with full-priority work: slowed by the over-commit.
            let cap = f64::from(self.devices[&d.device].capacity.max(1));
            factor *= 1.0 + f64::from(over) / cap;
        }
        kernel = (kernel as f64 * factor).round() as Nanos;
        let st = &mut self.ops[op.index()];
        st.count += 1;
        st.exec += kernel;
        st.copy += copy_ns;
        st.wait += self.now.saturating_sub(ready_at);
        let dev = self.devices.get_mut(&d.device).expect("checked by caller");
        dev.in_use += d.units;
        let run = Run {
            instr: d.instr,
            device: d.device,
            incarnation: dev.incarnation,
            started: self.now,
            units: d.units,
        };
        let slot = match self.free_runs.pop() {
            Some(s) => {
                self.runs[s] = Some(run);
                s
            }
            None => {
                self.runs.push(Some(run));
                self.runs.len() - 1
            }
        };
        self.push(self.now + copy_ns + kernel.max(1), Ev::Finish(slot));
        Ok(())
    }

    fn finish_stats(&mut self) {
        let ms = |ns: u64| ns as f64 / 1e6;
        if !self.hist.is_empty() {
            self.res.mean_ms = self.hist.mean_ns() / 1e6;
            self.res.p99_ms = ms(self.hist.quantile(99, 100));
            self.res.p9999_ms = ms(self.hist.quantile(9999, 10_000));
            self.res.max_ms = ms(self.hist.quantile(1, 1));
        }
        let span = self.last_arrival.max(1) as f64 / 1e9 + self.cfg.frame_period_ns as f64 / 1e9;
        self.res.achieved_fps = self.res.completed as f64 / span;
        self.res.utilization = if self.capacity_ns > 0 {
            self.busy_unit_ns as f64 / self.capacity_ns as f64
        } else {
            0.0
        };
        self.res.device_runs = self
            .runs_by_device
            .iter()
            .map(|(&(device, incarnation), &completed)| DeviceRuns {
                device,
                incarnation,
                completed,
            })
            .collect();
        self.res.per_opcode = Opcode::ALL
            .into_iter()
            .filter(|op| self.ops[op.index()].count > 0)
            .map(|op| {
                let s = self.ops[op.index()];
                let per = |v: u64| v as f64 / s.count as f64 / 1e3;
                OpcodeBreakdown {
                    opcode: op.name(),
                    count: s.count,
                    mean_exec_us: per(s.exec),
                    mean_wait_us: per(s.wait),
                    mean_copy_us: per(s.copy),
                }
            })
            .collect();
    }
}
