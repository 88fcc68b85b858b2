//! A CPU device: N worker threads (pinned to given cores when allowed) sharing two
//! bounded work queues (normal and low priority) and a table of coalesced
//! instructions waiting on a running predecessor.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use radiohost_rt::{RtThread, RtThreadBuilder, ThreadConfig};
use rustc_hash::FxHashMap;

use crate::isa::{DeviceId, Instr, Nanos};
use crate::kernels::{execute, ordering_only, KernelContext, Scratch};

use super::executor::{CompletionSink, Executor, ExecutorEnv, Job, Refused, SubmitError};
use super::{now_ns, StationError};
use crate::costs::DeviceProfile;
use crate::engine::InstrError;
use crate::isa::DeviceKind;
use crate::sim::CostModel;

/// How one CPU device is built.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CpuSpec {
    /// Worker threads (the device's capacity in units).
    pub workers: usize,
    /// Cores the workers are pinned to (round robin); empty leaves affinity alone.
    pub cores: Vec<usize>,
    /// An idle worker polls its queue for up to [`WORKER_SPIN_NS`] before it sleeps:
    /// for workers with cores of their own (see `setup::cpu_specs`), where it saves
    /// the futex wake-up a sleeping worker costs the dispatching thread and the time
    /// the worker takes to get back on its core.
    pub spin: bool,
}

/// How long an idle spinning worker polls before it sleeps: half the built-in 1 ms
/// frame period. On the Zen 3 VM, 16x4 on one worker made 1962 of 2000 frames in
/// deadline on average without spinning, 1988 with 300 us and 1995 with 1 ms
/// (docs/BENCHMARKS.md, session 31).
pub const WORKER_SPIN_NS: Nanos = 500_000;

#[derive(Default)]
struct Queues {
    normal: VecDeque<Job>,
    low: VecDeque<Job>,
    /// Instructions a worker has taken and not finished.
    running: Vec<Instr>,
    /// Coalesced jobs keyed by the predecessor whose reservation they reuse.
    parked: FxHashMap<Instr, Vec<Job>>,
    /// Jobs in `parked`, all keys together.
    parked_jobs: usize,
    /// Workers waiting on `work` (a push notifies only when one is: a futex wake
    /// is a system call, and most pushes come from a worker that is itself busy).
    idle: usize,
    removed: bool,
}

struct Shared {
    id: DeviceId,
    queues: Mutex<Queues>,
    work: Condvar,
    capacity: usize,
    /// Jobs a worker could take now (normal + low), written under the lock, read by
    /// spinning workers without it.
    takeable: AtomicUsize,
    /// How long an idle worker polls `takeable` before it waits on `work` (0: at once).
    spin_ns: Nanos,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish how many jobs `q` holds for the taking; called under the lock after
    /// every change to `q.normal` or `q.low`.
    fn publish_takeable(&self, q: &Queues) {
        self.takeable
            .store(q.normal.len() + q.low.len(), Ordering::Release);
    }
}

/// A running CPU device.
pub(crate) struct CpuDevice {
    shared: Arc<Shared>,
    ctx: Arc<KernelContext>,
    profile: DeviceProfile,
    workers: Vec<RtThread<()>>,
    /// What the kernel refused when pinning (reported once, then carried on).
    pub pin_problems: Vec<String>,
    /// What each worker runs with, as the rt layer read it back after setup.
    pub thread_setup: Vec<String>,
}

impl CpuDevice {
    /// Start `spec`'s workers as device `id`. Its costs are `env.calibrated` when a
    /// calibration of this device is known, else the cost model's (labelled so).
    pub fn start(id: DeviceId, spec: &CpuSpec, env: ExecutorEnv) -> Result<Self, StationError> {
        let ExecutorEnv {
            ctx,
            queue_capacity,
            sink: events,
            calibrated,
        } = env;
        let width = spec.workers.max(1);
        let profile = match calibrated {
            Some(p) => DeviceProfile {
                units: width as u32,
                ..p
            },
            None => DeviceProfile::modelled(
                DeviceKind::Cpu,
                width as u32,
                &CostModel::default(),
                &ctx.shape,
                ctx.cfg.fft_size,
            ),
        };
        let shared = Arc::new(Shared {
            id,
            queues: Mutex::new(Queues::default()),
            work: Condvar::new(),
            capacity: queue_capacity,
            takeable: AtomicUsize::new(0),
            spin_ns: if spec.spin { WORKER_SPIN_NS } else { 0 },
        });
        let mut workers = Vec::new();
        let mut pin_problems = Vec::new();
        let mut thread_setup = Vec::new();
        for w in 0..width {
            let mut cfg = ThreadConfig::default();
            if !spec.cores.is_empty() {
                cfg = cfg.pinned(vec![spec.cores[w % spec.cores.len()]]);
            }
            let scratch = Scratch::new(&ctx).map_err(|source| StationError::Scratch {
                device: id,
                worker: w,
                source,
            })?;
            let (sh, cx, ev) = (shared.clone(), ctx.clone(), events.clone());
            let t = RtThreadBuilder::new(format!("station-d{id}w{w}"))
                .config(cfg)
                .spawn(move |_| worker_loop(&sh, &cx, scratch, &ev))
                .map_err(|source| StationError::Worker {
                    device: id,
                    worker: w,
                    source,
                })?;
            thread_setup.push(format!("w{w} {}", t.report().summary()));
            pin_problems.extend(
                t.report()
                    .problems()
                    .map(|p| format!("device {id} worker {w}: {p:?}")),
            );
            workers.push(t);
        }
        Ok(Self {
            shared,
            ctx,
            profile,
            workers,
            pin_problems,
            thread_setup,
        })
    }

    /// Queue `job` (at low priority, or behind the running `after`).
    fn queue(&self, job: Job, low_priority: bool, after: Option<Instr>) -> Result<(), Refused> {
        let mut q = self.shared.lock();
        if q.removed {
            return Err(Refused {
                reason: SubmitError::Removed,
                job,
            });
        }
        // Parked jobs count against the bound too: every job the device holds does.
        if q.normal.len() + q.low.len() + q.parked_jobs >= self.shared.capacity {
            return Err(Refused {
                reason: SubmitError::Full,
                job,
            });
        }
        if let Some(pred) = after {
            let pending = q.running.contains(&pred)
                || q.normal.iter().chain(q.low.iter()).any(|j| j.instr == pred);
            if pending {
                q.parked.entry(pred).or_default().push(job);
                q.parked_jobs += 1;
                return Ok(());
            }
            // The predecessor already finished: nothing to coalesce behind.
        }
        if low_priority {
            q.low.push_back(job);
        } else {
            q.normal.push_back(job);
        }
        self.shared.publish_takeable(&q);
        let wake = q.idle > 0;
        drop(q);
        if wake {
            self.shared.work.notify_one();
        }
        Ok(())
    }

    /// Stop taking work: queued and parked jobs are dropped (the policy reschedules
    /// them); running ones finish and their completions are ignored by the driver.
    fn stop(&self) -> usize {
        let mut q = self.shared.lock();
        q.removed = true;
        let dropped = q.normal.len() + q.low.len() + q.parked.values().map(Vec::len).sum::<usize>();
        q.normal.clear();
        q.low.clear();
        self.shared.publish_takeable(&q);
        q.parked.clear();
        q.parked_jobs = 0;
        drop(q);
        self.shared.work.notify_all();
        dropped
    }

    fn join(self) {
        self.stop();
        for w in self.workers {
            let _ = w.join();
        }
    }
}

impl Executor for CpuDevice {
    fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    fn submit(&self, job: Job, low_priority: bool, after: Option<Instr>) -> Result<(), Refused> {
        self.queue(job, low_priority, after)
    }

    fn complete_inline(&self, job: &Job) -> Option<Result<(), InstrError>> {
        ordering_only(&self.ctx, job.instr)
            .map(|verdict| verdict.map_err(|e| InstrError::Kernel(Arc::new(e))))
    }

    fn remove(&self) -> usize {
        self.stop()
    }

    fn shutdown(self: Box<Self>) {
        (*self).join();
    }

    fn notes(&self) -> Vec<String> {
        let spin = match self.shared.spin_ns {
            0 => String::new(),
            ns => format!("; idle workers spin {} us before they sleep", ns / 1000),
        };
        let mut notes = vec![format!(
            "device {} threads (rt layer): {}{spin}",
            self.shared.id,
            self.thread_setup.join(", ")
        )];
        notes.extend(self.pin_problems.iter().take(1).cloned());
        notes
    }
}

/// Poll for a takeable job until `until`.
fn spin_until_takeable(sh: &Shared, until: Nanos) {
    while sh.takeable.load(Ordering::Acquire) == 0 && now_ns() < until {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

fn worker_loop(sh: &Shared, ctx: &KernelContext, mut scratch: Scratch, events: &CompletionSink) {
    let mut next: Option<Job> = None;
    loop {
        let job = match next.take() {
            Some(j) => j,
            None => {
                let mut q = sh.lock();
                // When this worker stops spinning for work (set when it first finds none).
                let mut spin_until: Option<Nanos> = None;
                loop {
                    if q.removed {
                        return;
                    }
                    if let Some(j) = q.normal.pop_front().or_else(|| q.low.pop_front()) {
                        q.running.push(j.instr);
                        sh.publish_takeable(&q);
                        break j;
                    }
                    let until = *spin_until.get_or_insert_with(|| now_ns() + sh.spin_ns);
                    if now_ns() < until {
                        // Not counted idle while spinning, so a push does not notify. A
                        // job another worker took first sends it back to spinning.
                        drop(q);
                        spin_until_takeable(sh, until);
                        q = sh.lock();
                        continue;
                    }
                    q.idle += 1;
                    q = sh.work.wait(q).unwrap_or_else(|e| e.into_inner());
                    q.idle -= 1;
                }
            }
        };
        let started: Nanos = now_ns();
        let result = execute(ctx, &job.slot, job.instr, &mut scratch)
            .map_err(|e| InstrError::Kernel(Arc::new(e)));
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
                q.parked_jobs -= waiting.len();
                if !q.removed && !waiting.is_empty() {
                    let first = waiting.remove(0);
                    q.running.push(first.instr);
                    requeued = !waiting.is_empty();
                    for j in waiting.into_iter().rev() {
                        q.normal.push_front(j);
                    }
                    sh.publish_takeable(&q);
                    next = Some(first);
                }
            }
            let wake = requeued && q.idle > 0;
            drop(q);
            if wake {
                sh.work.notify_all();
            }
        }
        if !events.completed(instr, started, finished, result) {
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
    use crate::kernels::FrameSlot;
    use crate::pool::{BufferPool, Exhaustion};
    use crate::runtime::DriverMsg;

    struct Rig {
        dev: CpuDevice,
        pool: BufferPool<FrameSlot>,
        ctx: Arc<KernelContext>,
        rx: mpsc::Receiver<DriverMsg>,
        tx: CompletionSink,
    }

    /// A device whose workers are started by the test ([`Rig::start`]), so queue
    /// contents can be arranged first and the outcome does not depend on timing.
    fn rig() -> Rig {
        rig_spinning(0)
    }

    /// [`rig`] whose idle workers spin `spin_ns` before they sleep.
    fn rig_spinning(spin_ns: Nanos) -> Rig {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let ctx = Arc::new(KernelContext::new(&cfg, 1).unwrap());
        let c = ctx.clone();
        let pool = BufferPool::new("t", 1, Exhaustion::Grow { max: 4 }, move || {
            FrameSlot::new(&c)
        });
        let (tx, rx) = crate::runtime::driver_channel();
        let tx = CompletionSink::new(0, tx);
        let shared = Arc::new(Shared {
            id: 0,
            queues: Mutex::new(Queues::default()),
            work: Condvar::new(),
            capacity: 16,
            takeable: AtomicUsize::new(0),
            spin_ns,
        });
        let profile = DeviceProfile::modelled(
            DeviceKind::Cpu,
            1,
            &CostModel::default(),
            &ctx.shape,
            ctx.cfg.fft_size,
        );
        let dev = CpuDevice {
            shared,
            ctx: ctx.clone(),
            profile,
            workers: Vec::new(),
            pin_problems: Vec::new(),
            thread_setup: Vec::new(),
        };
        Rig {
            dev,
            pool,
            ctx,
            rx,
            tx,
        }
    }

    impl Rig {
        fn start(&mut self, workers: usize) {
            for _ in 0..workers {
                let (sh, cx, ev) = (self.dev.shared.clone(), self.ctx.clone(), self.tx.clone());
                let scratch = Scratch::new(&cx).unwrap();
                let t = RtThreadBuilder::new("test-worker")
                    .spawn(move |_| worker_loop(&sh, &cx, scratch, &ev))
                    .unwrap();
                self.dev.workers.push(t);
            }
        }

        fn submit(&self, instr: Instr, low: bool, after: Option<Instr>) {
            let slot = self.pool.acquire().unwrap();
            self.dev.queue(Job { instr, slot }, low, after).unwrap();
        }

        fn completions(&self, n: usize) -> Vec<(Instr, Nanos, Nanos)> {
            (0..n)
                .map(
                    |_| match self.rx.recv_timeout(Duration::from_secs(20)).unwrap() {
                        DriverMsg::Completed {
                            instr,
                            started,
                            finished,
                            result,
                            ..
                        } => {
                            assert!(result.is_ok(), "{result:?}");
                            (instr, started, finished)
                        }
                        _ => panic!("unexpected message"),
                    },
                )
                .collect()
        }
    }

    #[test]
    fn coalesced_instruction_waits_for_its_predecessor_even_with_a_free_worker() {
        let mut r = rig();
        let u = r.ctx.shape.uplink_symbols[0];
        let pred = Instr::new(0, u, Opcode::Decode, 0);
        let succ = Instr::new(0, r.ctx.shape.uplink_symbols[1], Opcode::Decode, 0);
        r.submit(pred, false, None);
        r.submit(succ, false, Some(pred));
        assert_eq!(
            r.dev.shared.lock().parked.len(),
            1,
            "parked behind the queued predecessor"
        );
        r.start(2);
        let done = r.completions(2);
        assert_eq!(done[0].0, pred);
        assert_eq!(done[1].0, succ);
        assert!(
            done[1].1 >= done[0].2,
            "the coalesced instruction started before its predecessor ended"
        );
        r.dev.join();
    }

    #[test]
    fn a_spinning_worker_takes_jobs_while_it_spins_and_after_it_slept() {
        let mut r = rig_spinning(2_000_000);
        r.start(1);
        let decode = |f| Instr::new(f, r.ctx.shape.uplink_symbols[0], Opcode::Decode, 0);
        // While it spins (just started, or just done), then once its spin ran out.
        for (f, pause_ms) in [(0, 0), (1, 0), (2, 20), (3, 0)] {
            std::thread::sleep(Duration::from_millis(pause_ms));
            r.submit(decode(f), false, None);
            assert_eq!(r.completions(1)[0].0, decode(f));
        }
        assert_eq!(r.dev.shared.takeable.load(Ordering::Acquire), 0);
        r.dev.join();
    }

    #[test]
    fn coalescing_behind_a_finished_instruction_just_queues() {
        let mut r = rig();
        let u = r.ctx.shape.uplink_symbols[0];
        let gone = Instr::new(0, u, Opcode::Decode, 0);
        r.submit(
            Instr::new(0, r.ctx.shape.uplink_symbols[1], Opcode::Decode, 0),
            false,
            Some(gone),
        );
        assert!(r.dev.shared.lock().parked.is_empty());
        r.start(1);
        assert_eq!(r.completions(1).len(), 1);
        r.dev.join();
    }

    #[test]
    fn low_priority_runs_after_normal_work() {
        let mut r = rig();
        let low = Instr::new(0, r.ctx.shape.uplink_symbols[1], Opcode::Decode, 0);
        let normal = Instr::new(0, r.ctx.shape.pilot_symbols[0], Opcode::Load, 0);
        r.submit(low, true, None);
        r.submit(normal, false, None);
        r.start(1);
        let order: Vec<Instr> = r.completions(2).into_iter().map(|c| c.0).collect();
        assert_eq!(order, vec![normal, low]);
        r.dev.join();
    }

    #[test]
    fn load_completes_inline_and_kernels_are_queued() {
        let r = rig();
        let slot = r.pool.acquire().unwrap();
        let job = |instr| Job {
            instr,
            slot: slot.clone(),
        };
        let u = r.ctx.shape.uplink_symbols[0];
        let load = job(Instr::new(0, u, Opcode::Load, 0));
        assert!(matches!(r.dev.complete_inline(&load), Some(Ok(()))));
        let bad = job(Instr::new(0, u, Opcode::Load, 3));
        assert!(matches!(
            r.dev.complete_inline(&bad),
            Some(Err(InstrError::Kernel(_)))
        ));
        assert!(r
            .dev
            .complete_inline(&job(Instr::new(0, u, Opcode::UpFft, 0)))
            .is_none());
        drop((load, bad));
        r.dev.join();
    }

    #[test]
    fn queues_are_bounded_and_a_removed_device_refuses_work() {
        let r = rig();
        let u = r.ctx.shape.uplink_symbols[0];
        let slot = r.pool.acquire().unwrap();
        for i in 0..16 {
            r.dev
                .queue(
                    Job {
                        instr: Instr::new(i, u, Opcode::Load, 0),
                        slot: slot.clone(),
                    },
                    false,
                    None,
                )
                .unwrap();
        }
        let full = r.dev.queue(
            Job {
                instr: Instr::new(99, u, Opcode::Load, 0),
                slot: slot.clone(),
            },
            false,
            None,
        );
        assert!(matches!(
            full,
            Err(Refused {
                reason: SubmitError::Full,
                ..
            })
        ));
        assert_eq!(r.dev.stop(), 16);
        let err = r.dev.queue(
            Job {
                instr: Instr::new(0, u, Opcode::Load, 0),
                slot: slot.clone(),
            },
            false,
            None,
        );
        assert!(matches!(
            err,
            Err(Refused {
                reason: SubmitError::Removed,
                ..
            })
        ));
        r.dev.join();
        // Every dropped job released its lease (the refused ones came back to us).
        drop((full, err, slot));
        let s = r.pool.stats();
        assert_eq!(s.free, s.slots);
    }

    #[test]
    fn coalesced_jobs_count_against_the_queue_bound() {
        let r = rig();
        let u = r.ctx.shape.uplink_symbols[0];
        let slot = r.pool.acquire().unwrap();
        let job = |i: usize| Job {
            instr: Instr::new(0, u, Opcode::Decode, i),
            slot: slot.clone(),
        };
        let pred = Instr::new(0, u, Opcode::Decode, 0);
        r.dev.queue(job(0), false, None).unwrap();
        // 15 more fit (1 queued + 15 parked = the capacity of 16), the next does not.
        for i in 1..16 {
            r.dev.queue(job(i), false, Some(pred)).unwrap();
        }
        assert_eq!(r.dev.shared.lock().parked_jobs, 15);
        let full = r.dev.queue(job(16), false, Some(pred));
        assert!(matches!(
            full,
            Err(Refused {
                reason: SubmitError::Full,
                ..
            })
        ));
        assert_eq!(r.dev.stop(), 16);
        assert_eq!(r.dev.shared.lock().parked_jobs, 0);
        drop(full);
        r.dev.join();
    }
}
