//! End-to-end runs on real CPU executors: radio unit -> fronthaul -> ingest ->
//! scheduler + devices -> decoded frames checked against the generator's truth.

use std::path::Path;

use radiohost_phy::FrameConfig;
use radiohost_station::policy::{make_policy, PolicyParams, POLICY_NAMES};
use radiohost_station::ru::TransportKind;
use radiohost_station::runtime::{
    run_station, DeviceAction, DeviceChange, DeviceSpec, StationSetup,
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
        action: DeviceAction::Add(DeviceSpec {
            workers: 1,
            cores: vec![],
        }),
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
