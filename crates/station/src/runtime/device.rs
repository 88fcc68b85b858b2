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
