//! End-to-end runs on real CPU executors: radio unit -> fronthaul -> ingest ->
//! scheduler + devices -> decoded frames checked against the generator's truth.

use std::path::Path;

use radiohost_phy::FrameConfig;
use radiohost_station::policy::{make_policy, PolicyParams, POLICY_NAMES};
use radiohost_station::ru::TransportKind;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use radiohost_station::costs::DeviceProfile;
use radiohost_station::isa::{DeviceId, Instr};
use radiohost_station::runtime::{
    run_station, CompletionSink, DeviceAction, DeviceChange, DeviceSpec, Executor, ExecutorEnv,
    ExecutorFactory, Job, Refused, StationError, StationSetup, SubmitError,
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
