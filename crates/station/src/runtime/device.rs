//! A CPU device: N worker threads (pinned to given cores when allowed) sharing two
//! bounded work queues (normal and low priority) and a table of coalesced
//! instructions waiting on a running predecessor.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use radiohost_rt::{RtThread, RtThreadBuilder, ThreadConfig};

use crate::isa::{DeviceId, Instr, Nanos};
use crate::kernels::{execute, FrameSlot, KernelContext, Scratch};
use crate::pool::Lease;

use super::{now_ns, DriverMsg};

/// How one CPU device is built.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceSpec {
    /// Worker threads (the device's capacity in units).
    pub workers: usize,
    /// Cores the workers are pinned to (round robin); empty leaves affinity alone.
    pub cores: Vec<usize>,
}

impl DeviceSpec {
    /// Split `cores` into `devices` devices of `workers_per_device` workers each,
    /// cores dealt round robin (a 2-core machine split into several devices gives
    /// the fragmented parallelism the planner has to cope with).
    pub fn split(devices: usize, workers_per_device: usize, cores: &[usize]) -> Vec<DeviceSpec> {
        (0..devices)
            .map(|d| DeviceSpec {
                workers: workers_per_device,
                cores: if cores.is_empty() {
                    Vec::new()
                } else {
                    (0..workers_per_device)
                        .map(|w| cores[(d * workers_per_device + w) % cores.len()])
                        .collect()
                },
            })
            .collect()
    }
}

/// One unit of work sent to a device.
pub(crate) struct Job {
    pub instr: Instr,
    pub slot: Lease<FrameSlot>,
}

#[derive(Default)]
struct Queues {
    normal: VecDeque<Job>,
    low: VecDeque<Job>,
    /// Instructions a worker has taken and not finished.
    running: Vec<Instr>,
    /// Coalesced jobs keyed by the predecessor whose reservation they reuse.
    parked: HashMap<Instr, Vec<Job>>,
    removed: bool,
}

struct Shared {
    id: DeviceId,
    queues: Mutex<Queues>,
    work: Condvar,
    capacity: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why a job was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SubmitError {
    Full,
    Removed,
}

/// A running CPU device.
pub(crate) struct CpuDevice {
    shared: Arc<Shared>,
    workers: Vec<RtThread<()>>,
    /// What the kernel refused when pinning (reported once, then carried on).
    pub pin_problems: Vec<String>,
}

impl CpuDevice {
    pub fn start(
        id: DeviceId,
        spec: &DeviceSpec,
        queue_capacity: usize,
        ctx: Arc<KernelContext>,
        events: Sender<DriverMsg>,
    ) -> Result<Self, String> {
        let shared = Arc::new(Shared {
            id,
            queues: Mutex::new(Queues::default()),
            work: Condvar::new(),
            capacity: queue_capacity,
        });
        let mut workers = Vec::new();
        let mut pin_problems = Vec::new();
        for w in 0..spec.workers.max(1) {
            let mut cfg = ThreadConfig::default();
            if !spec.cores.is_empty() {
                cfg = cfg.pinned(vec![spec.cores[w % spec.cores.len()]]);
            }
            let scratch = Scratch::new(&ctx).map_err(|e| e.to_string())?;
            let (sh, cx, ev) = (shared.clone(), ctx.clone(), events.clone());
            let t = RtThreadBuilder::new(format!("station-d{id}w{w}"))
                .config(cfg)
                .spawn(move |_| worker_loop(&sh, &cx, scratch, &ev))
                .map_err(|e| format!("device {id} worker {w}: {e}"))?;
            pin_problems.extend(t.report().problems().map(|p| format!("device {id} worker {w}: {p:?}")));
            workers.push(t);
        }
        Ok(Self {
            shared,
            workers,
            pin_problems,
        })
    }

    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Queue `job` (at low priority, or behind the running `after`).
    pub fn submit(&self, job: Job, low_priority: bool, after: Option<Instr>) -> Result<(), (SubmitError, Job)> {
        let mut q = self.shared.lock();
        if q.removed {
            return Err((SubmitError::Removed, job));
        }
        if let Some(pred) = after {
            let pending = q.running.contains(&pred)
                || q.normal.iter().chain(q.low.iter()).any(|j| j.instr == pred);
            if pending {
                q.parked.entry(pred).or_default().push(job);
                return Ok(());
            }
            // The predecessor already finished: nothing to coalesce behind.
        }
        if q.normal.len() + q.low.len() >= self.shared.capacity {
            return Err((SubmitError::Full, job));
        }
        if low_priority {
            q.low.push_back(job);
        } else {
            q.normal.push_back(job);
        }
        drop(q);
        self.shared.work.notify_one();
        Ok(())
    }

    /// Stop taking work: queued and parked jobs are dropped (the policy reschedules
    /// them); running ones finish and their completions are ignored by the driver.
    pub fn remove(&self) -> usize {
        let mut q = self.shared.lock();
        q.removed = true;
        let dropped = q.normal.len() + q.low.len() + q.parked.values().map(Vec::len).sum::<usize>();
        q.normal.clear();
        q.low.clear();
        q.parked.clear();
        drop(q);
        self.shared.work.notify_all();
        dropped
    }

    /// Remove and wait for the workers to exit.
    pub fn shutdown(self) {
        self.remove();
        for w in self.workers {
            let _ = w.join();
        }
    }
}

fn worker_loop(sh: &Shared, ctx: &KernelContext, mut scratch: Scratch, events: &Sender<DriverMsg>) {
    let mut next: Option<Job> = None;
    loop {
        let job = match next.take() {
            Some(j) => j,
            None => {
                let mut q = sh.lock();
                loop {
                    if q.removed {
                        return;
                    }
                    if let Some(j) = q.normal.pop_front().or_else(|| q.low.pop_front()) {
                        q.running.push(j.instr);
                        break j;
                    }
                    q = sh.work.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            }
        };
        let started: Nanos = now_ns();
        let result = execute(ctx, &job.slot, job.instr, &mut scratch).map_err(|e| e.to_string());
        let finished = now_ns();
        let instr = job.instr;
        // Release the frame's buffers before reporting, so a finished frame's slot can
        // return to the pool as soon as the driver drops its own lease.
        drop(job);
        {
            let mut q = sh.lock();
            q.running.retain(|i| *i != instr);
            // Coalescing: run what waited on this instruction's reservation right
            // away on this worker, without a round trip through the scheduler.
            let mut requeued = false;
            if let Some(mut waiting) = q.parked.remove(&instr) {
                if !q.removed && !waiting.is_empty() {
                    let first = waiting.remove(0);
                    q.running.push(first.instr);
                    requeued = !waiting.is_empty();
                    for j in waiting.into_iter().rev() {
                        q.normal.push_front(j);
                    }
                    next = Some(first);
                }
            }
            drop(q);
            if requeued {
                sh.work.notify_all();
            }
        }
        let msg = DriverMsg::Completed {
            device: sh.id,
            instr,
            started,
            finished,
            result,
        };
        if events.send(msg).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::isa::Opcode;
    use crate::pool::{BufferPool, Exhaustion};

    fn setup(workers: usize) -> (CpuDevice, BufferPool<FrameSlot>, Arc<KernelContext>, mpsc::Receiver<DriverMsg>) {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let ctx = Arc::new(KernelContext::new(&cfg, 1).unwrap());
        let c = ctx.clone();
        let pool = BufferPool::new("t", 1, Exhaustion::Grow { max: 4 }, move || FrameSlot::new(&c));
        let (tx, rx) = mpsc::channel();
        let dev = CpuDevice::start(0, &DeviceSpec { workers, cores: vec![] }, 16, ctx.clone(), tx).unwrap();
        (dev, pool, ctx, rx)
    }

    fn completions(rx: &mpsc::Receiver<DriverMsg>, n: usize) -> Vec<(Instr, Nanos, Nanos)> {
        (0..n)
            .map(|_| match rx.recv_timeout(Duration::from_secs(20)).unwrap() {
                DriverMsg::Completed { instr, started, finished, result, .. } => {
                    assert!(result.is_ok(), "{result:?}");
                    (instr, started, finished)
                }
                _ => panic!("unexpected message"),
            })
            .collect()
    }

    #[test]
    fn coalesced_instruction_waits_for_its_predecessor_even_with_a_free_worker() {
        let (dev, pool, ctx, rx) = setup(2);
        let slot = pool.acquire().unwrap();
        let u = ctx.shape.uplink_symbols[0];
        // Decoding all-zero LLRs runs every iteration: a slow predecessor.
        let pred = Instr::new(0, u, Opcode::Decode, 0);
        let succ = Instr::new(0, u, Opcode::Decode, 1);
        dev.submit(Job { instr: pred, slot: slot.clone() }, false, None).map_err(|e| e.0).unwrap();
        dev.submit(Job { instr: succ, slot: slot.clone() }, false, Some(pred)).map_err(|e| e.0).unwrap();
        let done = completions(&rx, 2);
        assert_eq!(done[0].0, pred);
        assert_eq!(done[1].0, succ);
        assert!(done[1].1 >= done[0].2, "the coalesced instruction started before its predecessor ended");
        dev.shutdown();
    }

    #[test]
    fn low_priority_runs_after_normal_work() {
        let (dev, pool, ctx, rx) = setup(1);
        let slot = pool.acquire().unwrap();
        let u = ctx.shape.uplink_symbols[0];
        let blocker = Instr::new(0, u, Opcode::Decode, 0);
        let low = Instr::new(0, u, Opcode::Decode, 1);
        let normal = Instr::new(0, ctx.shape.pilot_symbols[0], Opcode::Load, 0);
        dev.submit(Job { instr: blocker, slot: slot.clone() }, false, None).map_err(|e| e.0).unwrap();
        // Wait until the worker has taken the blocker, so both of the next are queued.
        while dev.shared.lock().running.is_empty() {
            std::thread::yield_now();
        }
        dev.submit(Job { instr: low, slot: slot.clone() }, true, None).map_err(|e| e.0).unwrap();
        dev.submit(Job { instr: normal, slot: slot.clone() }, false, None).map_err(|e| e.0).unwrap();
        let order: Vec<Instr> = completions(&rx, 3).into_iter().map(|c| c.0).collect();
        assert_eq!(order, vec![blocker, normal, low]);
        dev.shutdown();
    }

    #[test]
    fn a_removed_device_drops_its_queue_and_refuses_work() {
        let (dev, pool, ctx, _rx) = setup(1);
        let slot = pool.acquire().unwrap();
        let u = ctx.shape.uplink_symbols[0];
        for user in 0..2 {
            let _ = dev.submit(Job { instr: Instr::new(0, u, Opcode::Decode, user), slot: slot.clone() }, false, None);
        }
        dev.remove();
        let err = dev.submit(Job { instr: Instr::new(0, u, Opcode::Load, 0), slot: slot.clone() }, false, None);
        assert!(matches!(err, Err((SubmitError::Removed, _))));
        dev.shutdown();
        // Every job's lease was released: only ours is left on the slot.
        drop(slot);
        assert_eq!(pool.stats().free, pool.stats().slots);
    }
}
