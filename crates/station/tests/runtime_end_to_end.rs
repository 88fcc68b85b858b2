//! End-to-end runs on real CPU executors: radio unit -> fronthaul -> ingest ->
//! scheduler + devices -> decoded frames checked against the generator's truth.

use std::path::Path;

use radiohost_phy::FrameConfig;
use radiohost_station::policy::{make_policy, PolicyParams, POLICY_NAMES};
use radiohost_station::ru::TransportKind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::Duration;

use radiohost_station::costs::{CostSource, DeviceProfile, OpcodeCost};
use radiohost_station::dag::FrameDag;
use radiohost_station::engine::InstrError;
use radiohost_station::isa::{DeviceId, DeviceKind, Instr, Nanos, Opcode};
use radiohost_station::kernels::{execute, Scratch};
use radiohost_station::runtime::{
    now_ns, run_station, CompletionSink, DeviceAction, DeviceChange, DeviceSpec, Executor,
    ExecutorEnv, ExecutorFactory, Job, Refused, StationError, StationSetup, SubmitError,
};

fn config(name: &str) -> FrameConfig {
    FrameConfig::load(Path::new(&format!(
        "{}/../phy/configs/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap()
}

/// Two devices of one worker each; a deadline so loose that only a broken engine
/// misses it on a busy machine.
fn setup(frames: u64) -> StationSetup {
    let cfg = config("8x2");
    let mut s = StationSetup::new(&cfg, "8x2", 4, 4, DeviceSpec::split(2, 1, &[])).unwrap();
    s.frames = frames;
    s.frame_period_ns = 3_000_000;
    s.deadline_ns = 2_000_000_000;
    s.verify_downlink = true;
    s
}

#[test]
fn every_policy_decodes_every_frame_to_the_truth() {
    let s = setup(12);
    for name in POLICY_NAMES {
        let policy = make_policy(name, &s.ctx.shape, &PolicyParams::default()).unwrap();
        let r = run_station(&s, policy).unwrap();
        assert_eq!(r.frames, 12, "{name}: every frame accounted for: {r:?}");
        assert_eq!(r.completed, 12, "{name}: {r:?}");
        assert_eq!(
            r.decoded_ok, 12,
            "{name}: uplink bits and downlink users must match the truth: {r:?}"
        );
        assert!(r.stages.iter().any(|s| s.opcode == "decode"), "{name}");
        // The frame log: one record per frame, each decided after its own arrival
        // (decided counts from the first frame's), the frames a period apart. The
        // radio sends at absolute times, so a frame that left late (a cold start,
        // a busy machine) shortens its gap and the next frames catch up: the
        // median gap still shows the pacing; a burst would have gaps near zero.
        let ids: Vec<u64> = r.records.iter().map(|x| x.frame).collect();
        assert_eq!(ids, (0..12).collect::<Vec<_>>(), "{name}");
        assert!(
            r.records.iter().all(|x| x.decided_ns >= x.latency_ns),
            "{name}"
        );
        let first = &r.records[0];
        assert_eq!(
            first.decided_ns, first.latency_ns,
            "{name}: frame 0 came first"
        );
        let arrivals: Vec<u64> = r
            .records
            .iter()
            .map(|x| x.decided_ns - x.latency_ns)
            .collect();
        let mut gaps: Vec<u64> = arrivals
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        gaps.sort_unstable();
        assert!(
            gaps[gaps.len() / 2] >= s.frame_period_ns / 2,
            "{name}: frames arrived at {arrivals:?} ns (period {})",
            s.frame_period_ns
        );
        assert_eq!(
            (r.deadline_ns, r.missed_early),
            (s.deadline_ns, 0),
            "{name}"
        );
    }
}

#[test]
fn udp_fronthaul_with_two_radio_units() {
    let mut s = setup(6);
    s.transport = TransportKind::Udp;
    s.rus = 2;
    s.verify_downlink = false;
    let policy = make_policy("lroc", &s.ctx.shape, &PolicyParams::default()).unwrap();
    let r = run_station(&s, policy).unwrap();
    assert_eq!(r.frames, 12, "{r:?}");
    // Loopback UDP may drop under load; what arrives whole must decode right.
    assert_eq!(r.completed + r.missed + r.failed + r.rejected, 12);
    assert_eq!(r.decode_errors, 0, "{r:?}");
    assert!(r.completed > 0, "{r:?}");
}

#[test]
fn removing_a_device_mid_run_leaves_no_frame_unaccounted() {
    let mut s = setup(16);
    s.verify_downlink = false;
    s.frame_period_ns = 1_000_000;
    s.changes = vec![DeviceChange {
        at_frame: 5,
        action: DeviceAction::Remove(1),
    }];
    for name in ["lroc", "frame"] {
        let policy = make_policy(name, &s.ctx.shape, &PolicyParams::default()).unwrap();
        let r = run_station(&s, policy).unwrap();
        assert_eq!(r.frames, 16, "{name}: {r:?}");
        assert_eq!(r.device_removals, 1);
        assert_eq!(r.failed + r.rejected, 0, "{name}: {r:?}");
        assert_eq!(
            r.completed, 16,
            "{name}: in-flight work must complete elsewhere: {r:?}"
        );
        assert_eq!(r.decoded_ok, 16, "{name}: {r:?}");
    }
}

#[test]
fn adding_a_device_mid_run_is_used() {
    let cfg = config("8x2");
    let mut s = StationSetup::new(&cfg, "8x2", 2, 2, DeviceSpec::split(1, 1, &[])).unwrap();
    s.frames = 10;
    s.frame_period_ns = 1_000_000;
    s.deadline_ns = 2_000_000_000;
    s.changes = vec![DeviceChange {
        at_frame: 2,
        action: DeviceAction::Add(DeviceSpec::cpu(1, vec![])),
    }];
    let policy = make_policy("task", &s.ctx.shape, &PolicyParams::default()).unwrap();
    let r = run_station(&s, policy).unwrap();
    assert_eq!((r.frames, r.completed, r.decoded_ok), (10, 10, 10), "{r:?}");
    assert_eq!(r.device_instrs.len(), 2);
    assert!(
        r.device_instrs[1] > 0,
        "the added device ran nothing: {r:?}"
    );
}

/// A CPU device that reports itself lost after taking `fail_after` jobs (as a GPU
/// does on a CUDA error), through the same executor trait a GPU implements.
#[derive(Debug)]
struct Flaky {
    fail_after: usize,
}

struct FlakyExecutor {
    inner: Box<dyn Executor>,
    sink: CompletionSink,
    taken: AtomicUsize,
    failed: AtomicBool,
    fail_after: usize,
}

impl ExecutorFactory for Flaky {
    fn name(&self) -> String {
        "flaky:0".into()
    }

    fn start(&self, id: DeviceId, env: ExecutorEnv) -> Result<Box<dyn Executor>, StationError> {
        let sink = env.sink.clone();
        Ok(Box::new(FlakyExecutor {
            inner: DeviceSpec::cpu(1, vec![]).start(id, env)?,
            sink,
            taken: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            fail_after: self.fail_after,
        }))
    }
}

impl Executor for FlakyExecutor {
    fn profile(&self) -> &DeviceProfile {
        self.inner.profile()
    }

    fn submit(&self, job: Job, low_priority: bool, after: Option<Instr>) -> Result<(), Refused> {
        if self.taken.fetch_add(1, Ordering::Relaxed) >= self.fail_after {
            if !self.failed.swap(true, Ordering::Relaxed) {
                self.inner.remove();
                // From the device's side, as a GPU thread would: `submit` runs on the
                // scheduler thread, which must not wait on its own inbox.
                let sink = self.sink.clone();
                std::thread::spawn(move || {
                    sink.failed(Arc::new(std::io::Error::other("injected device fault")))
                });
            }
            return Err(Refused {
                reason: SubmitError::Removed,
                job,
            });
        }
        self.inner.submit(job, low_priority, after)
    }

    fn remove(&self) -> usize {
        self.inner.remove()
    }

    fn shutdown(self: Box<Self>) {
        self.inner.shutdown();
    }
}

#[test]
fn a_failing_executor_leaves_and_every_frame_is_accounted_for() {
    let cfg = config("8x2");
    let devices = vec![
        DeviceSpec::cpu(1, vec![]),
        DeviceSpec::External(Arc::new(Flaky { fail_after: 40 })),
    ];
    let mut s = StationSetup::new(&cfg, "8x2", 2, 2, devices).unwrap();
    s.frames = 16;
    s.frame_period_ns = 1_000_000;
    s.deadline_ns = 2_000_000_000;
    for name in ["lroc", "task"] {
        let policy = make_policy(name, &s.ctx.shape, &PolicyParams::default()).unwrap();
        let r = run_station(&s, policy).unwrap();
        assert_eq!(r.frames, 16, "{name}: {r:?}");
        assert_eq!(
            r.completed + r.missed + r.rejected + r.failed,
            16,
            "{name}: every frame ends one way: {r:?}"
        );
        assert_eq!(r.device_removals, 1, "{name}: {r:?}");
        assert!(
            r.notes.iter().any(|n| n.contains("injected device fault")),
            "{name}: {r:?}"
        );
        // With a deadline this loose the remaining device finishes everything.
        assert_eq!((r.completed, r.decoded_ok), (16, 16), "{name}: {r:?}");
        assert_eq!(r.device_costs.len(), 2);
    }
}

#[test]
fn a_removed_device_rejoins_and_takes_work_again() {
    let mut s = setup(24);
    s.verify_downlink = false;
    s.frame_period_ns = 1_000_000;
    s.changes = vec![
        DeviceChange {
            at_frame: 4,
            action: DeviceAction::Remove(1),
        },
        DeviceChange {
            at_frame: 8,
            action: DeviceAction::Rejoin(1),
        },
    ];
    let policy = make_policy("task", &s.ctx.shape, &PolicyParams::default()).unwrap();
    let r = run_station(&s, policy).unwrap();
    assert_eq!((r.frames, r.completed, r.decoded_ok), (24, 24, 24), "{r:?}");
    assert_eq!(r.device_removals, 1);
    assert_eq!(r.device_instrs.len(), 3, "rejoined under a new id: {r:?}");
    assert!(
        r.device_instrs[2] > 0,
        "the rejoined device ran nothing: {r:?}"
    );
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("device 1 rejoined as device 2")));
}

/// A device that behaves like a GPU executor without one: the scheduler places
/// frames on it whole (`DeviceKind::Gpu`), it runs its jobs one at a time in order
/// from a bounded queue on its own thread (through the CPU kernels on the host frame
/// slot, so frames still decode to the truth), it is charged its own cost table, and
/// it can report itself lost after taking `fail_after` jobs.
#[derive(Debug)]
struct WholeFrame {
    latency_ns: Nanos,
    fail_after: Option<usize>,
}

struct WholeFrameExecutor {
    profile: DeviceProfile,
    tx: Option<SyncSender<Job>>,
    removed: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl ExecutorFactory for WholeFrame {
    fn name(&self) -> String {
        "whole:0".into()
    }

    fn start(&self, id: DeviceId, env: ExecutorEnv) -> Result<Box<dyn Executor>, StationError> {
        let cost = OpcodeCost {
            need: 1,
            latency_ns: self.latency_ns,
        };
        let profile = DeviceProfile {
            kind: DeviceKind::Gpu,
            units: 8,
            memory_bytes: 1 << 30,
            costs: [cost; Opcode::ALL.len()],
            source: CostSource::Calibrated,
        };
        let (tx, rx) = sync_channel::<Job>(env.queue_capacity.max(1));
        let removed = Arc::new(AtomicBool::new(false));
        let mut scratch = Scratch::new(&env.ctx).map_err(|source| StationError::Scratch {
            device: id,
            worker: 0,
            source,
        })?;
        let (ctx, sink, gone, fail_after) = (
            env.ctx.clone(),
            env.sink.clone(),
            removed.clone(),
            self.fail_after,
        );
        let worker = std::thread::spawn(move || {
            for (taken, job) in rx.into_iter().enumerate() {
                if gone.load(Ordering::Acquire) {
                    continue; // dropped: the scheduler re-planned it
                }
                if fail_after.is_some_and(|n| taken >= n) {
                    gone.store(true, Ordering::Release);
                    sink.failed(Arc::new(std::io::Error::other(
                        "injected whole-frame device loss",
                    )));
                    return;
                }
                let started = now_ns();
                let result = execute(&ctx, &job.slot, job.instr, &mut scratch)
                    .map_err(|e| InstrError::Kernel(Arc::new(e)));
                let instr = job.instr;
                drop(job);
                if !sink.completed(instr, started, now_ns(), result) {
                    return;
                }
            }
        });
        Ok(Box::new(WholeFrameExecutor {
            profile,
            tx: Some(tx),
            removed,
            worker: Some(worker),
        }))
    }
}

impl Executor for WholeFrameExecutor {
    fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    fn submit(&self, job: Job, _low: bool, _after: Option<Instr>) -> Result<(), Refused> {
        let refused = |reason, job| Err(Refused { reason, job });
        let Some(tx) = self
            .tx
            .as_ref()
            .filter(|_| !self.removed.load(Ordering::Acquire))
        else {
            return refused(SubmitError::Removed, job);
        };
        tx.try_send(job).or_else(|e| match e {
            TrySendError::Full(job) => refused(SubmitError::Full, job),
            TrySendError::Disconnected(job) => refused(SubmitError::Removed, job),
        })
    }

    fn remove(&self) -> usize {
        self.removed.store(true, Ordering::Release);
        0
    }

    fn shutdown(mut self: Box<Self>) {
        self.removed.store(true, Ordering::Release);
        self.tx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// A mixed pool (one CPU worker and a whole-frame device) with a loose deadline.
fn mixed_setup(frames: u64, whole: WholeFrame) -> StationSetup {
    let cfg = config("8x2");
    let devices = vec![
        DeviceSpec::cpu(1, vec![]),
        DeviceSpec::External(Arc::new(whole)),
    ];
    let mut s = StationSetup::new(&cfg, "8x2", 2, 2, devices).unwrap();
    s.frames = frames;
    s.frame_period_ns = 1_000_000;
    s.deadline_ns = 2_000_000_000;
    s
}

/// Run on a thread and fail the test (instead of hanging it) past `limit`.
fn bounded<T: Send + 'static>(limit: Duration, run: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(run()));
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the run did not finish within {limit:?}: it hangs"))
}

/// Costs the CPU device is modelled at, so the whole-frame device is a close rival.
fn cpu_like_latency(s: &StationSetup) -> Nanos {
    let m = radiohost_station::sim::CostModel::default();
    let p = DeviceProfile::modelled(DeviceKind::Cpu, 1, &m, &s.ctx.shape, s.ctx.cfg.fft_size);
    p.costs.iter().map(|c| c.latency_ns).sum::<Nanos>() / Opcode::ALL.len() as Nanos
}

#[test]
fn a_mixed_pool_places_frames_whole_on_both_kinds_of_device() {
    let probe = mixed_setup(
        1,
        WholeFrame {
            latency_ns: 1,
            fail_after: None,
        },
    );
    let latency_ns = cpu_like_latency(&probe);
    for name in ["lroc", "frame"] {
        let mut s = mixed_setup(
            24,
            WholeFrame {
                latency_ns,
                fail_after: None,
            },
        );
        s.verify_downlink = true;
        // Frames faster than one device decodes them, so the placement needs both
        // (at 1 ms an 8x2 frame is done before the next arrives and one device can
        // take them all).
        s.frame_period_ns = 100_000;
        let per_frame = FrameDag::build(&s.ctx.shape).len() as u64;
        let policy = make_policy(name, &s.ctx.shape, &PolicyParams::default()).unwrap();
        let r = bounded(Duration::from_secs(120), move || {
            run_station(&s, policy).unwrap()
        });
        assert_eq!(r.frames, 24, "{name}: {r:?}");
        assert_eq!((r.completed, r.decoded_ok), (24, 24), "{name}: {r:?}");
        assert_eq!(r.device_costs.len(), 2);
        assert_eq!(
            r.device_costs[1].costs,
            CostSource::Calibrated,
            "its own table"
        );
        assert!(
            r.device_instrs[0] > 0 && r.device_instrs[1] > 0,
            "{name}: frames on both devices: {:?}",
            r.device_instrs
        );
        // Whole frames: each device ran a whole number of frames' instructions.
        assert_eq!(
            r.device_instrs[1] % per_frame,
            0,
            "{name}: {:?}",
            r.device_instrs
        );
    }
}

#[test]
fn a_whole_frame_device_that_fails_mid_frame_loses_no_frame() {
    let probe = mixed_setup(
        1,
        WholeFrame {
            latency_ns: 1,
            fail_after: None,
        },
    );
    // Cheaper than the CPU: it takes the first frame, then fails part-way through it
    // (a frame is about 80 instructions).
    let latency_ns = cpu_like_latency(&probe) / 4;
    let s = mixed_setup(
        20,
        WholeFrame {
            latency_ns,
            fail_after: Some(40),
        },
    );
    let policy = make_policy("lroc", &s.ctx.shape, &PolicyParams::default()).unwrap();
    let r = bounded(Duration::from_secs(120), move || {
        run_station(&s, policy).unwrap()
    });
    assert_eq!(r.frames, 20, "{r:?}");
    assert_eq!(
        r.completed + r.missed + r.rejected + r.failed,
        20,
        "every frame ends one way: {r:?}"
    );
    assert_eq!(r.device_removals, 1, "{r:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("injected whole-frame device loss")),
        "{r:?}"
    );
    assert_eq!(r.device_instrs[1], 40, "it ran 40 jobs, then failed: {r:?}");
    // The deadline is loose: the frames it held were re-planned on the CPU.
    assert_eq!((r.completed, r.decoded_ok), (20, 20), "{r:?}");
}

#[test]
fn a_whole_frame_device_removed_mid_run_then_rejoining_takes_frames_again() {
    let probe = mixed_setup(
        1,
        WholeFrame {
            latency_ns: 1,
            fail_after: None,
        },
    );
    let latency_ns = cpu_like_latency(&probe) / 4;
    let mut s = mixed_setup(
        30,
        WholeFrame {
            latency_ns,
            fail_after: None,
        },
    );
    s.changes = vec![
        DeviceChange {
            at_frame: 6,
            action: DeviceAction::Remove(1),
        },
        DeviceChange {
            at_frame: 15,
            action: DeviceAction::Rejoin(1),
        },
    ];
    let policy = make_policy("lroc", &s.ctx.shape, &PolicyParams::default()).unwrap();
    let r = bounded(Duration::from_secs(120), move || {
        run_station(&s, policy).unwrap()
    });
    assert_eq!(r.frames, 30, "{r:?}");
    assert_eq!(
        r.completed + r.missed + r.rejected + r.failed,
        30,
        "every frame ends one way: {r:?}"
    );
    assert_eq!(r.device_removals, 1, "{r:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("device 1 rejoined as device 2")),
        "{r:?}"
    );
    assert_eq!(r.device_instrs.len(), 3, "{r:?}");
    // (Whether it finished an instruction before leaving depends on how the loaded
    // machine bunches arrivals; the failing-device test pins a mid-frame loss.)
    assert!(
        r.device_instrs[2] > 0,
        "the rejoined device took frames: {r:?}"
    );
    assert_eq!((r.completed, r.decoded_ok), (30, 30), "{r:?}");
}
