//! Scheduler invariants for every policy under a simulated clock: a small independent
//! driver (not the `sim` module, so the two cross-check each other) that runs
//! dispatches for a modelled time, honours coalescing, injects failures and removes a
//! device mid-run, and checks every dispatch.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::costs::{CostSource, DeviceProfile, OpcodeCost};
use crate::dag::FrameDag;
use crate::engine::{Dispatch, EngineEvent, FrameOutcome};
use crate::isa::{DeviceKind, FrameId, Instr, Opcode};

fn shape(up: usize, down: usize, users: usize, parts: usize) -> FrameShape {
    let uplink_symbols: Vec<usize> = (1..=up).collect();
    let dl: Vec<usize> = (up + 1..=up + down).collect();
    FrameShape {
        antennas: 8,
        users,
        data_num: 64,
        pilot_symbols: vec![0],
        uplink_symbols,
        downlink_reference: dl.first().copied(),
        downlink_symbols: dl.iter().skip(1).copied().collect(),
        parts,
        zf_batch_span: 1,
        user_groups: users,
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    policy: &'static str,
    devices: u32,
    capacity: u32,
    frames: u64,
    period: Nanos,
    deadline: Nanos,
    fail_permille: u32,
    remove_at: Option<Nanos>,
    add_at: Option<Nanos>,
    seed: u64,
    params: PolicyParams,
}

struct Running {
    instr: Instr,
    device: DeviceId,
    started: Nanos,
    units: u32,
}

#[derive(Default)]
struct Report {
    done: HashMap<FrameId, FrameOutcome>,
    rescheduled: usize,
    low_priority: usize,
    coalesced: usize,
    dispatches: usize,
}

fn latency(op: Opcode) -> Nanos {
    match op {
        Opcode::Zf | Opcode::Decode => 40_000,
        Opcode::Load | Opcode::Store => 5_000,
        _ => 15_000,
    }
}

/// A CPU device of `units` workers whose opcodes cost `ns(op)`.
fn cpu(units: u32, ns: impl Fn(Opcode) -> Nanos) -> DeviceProfile {
    DeviceProfile {
        kind: DeviceKind::Cpu,
        units,
        memory_bytes: 0,
        costs: Opcode::ALL.map(|op| OpcodeCost {
            need: 1,
            latency_ns: ns(op),
        }),
        source: CostSource::Modelled,
    }
}

/// Before any completion: roughly a 16x4 frame's kernels on one core.
fn untrained(op: Opcode) -> Nanos {
    match op {
        Opcode::Load | Opcode::Store => 5_000,
        Opcode::Zf | Opcode::Decode => 50_000,
        _ => 20_000,
    }
}

/// Drive one scenario to the end, asserting the invariants on the way.
fn drive(sc: &Scenario) -> Report {
    let shape = shape(3, 2, 2, 3);
    let dag = FrameDag::build(&shape);
    let mut policy = make_policy(sc.policy, &shape, &sc.params).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(sc.seed);
    let mut now: Nanos = 0;
    let mut cap: BTreeMap<DeviceId, (u32, u32)> = BTreeMap::new(); // (capacity, in use)
    for d in 0..sc.devices {
        policy.add_device(0, d, &cpu(sc.capacity, untrained));
        cap.insert(d, (sc.capacity, 0));
    }
    // External events: (time, kind, frame, symbol); kind 0 = arrival, 1 = input.
    let mut external: BinaryHeap<Reverse<(Nanos, u8, FrameId, usize)>> = BinaryHeap::new();
    for f in 0..sc.frames {
        let t = f * sc.period;
        external.push(Reverse((t, 0, f, 0)));
        for (n, s) in shape.received_symbols().into_iter().enumerate() {
            external.push(Reverse((t + 1 + n as Nanos * sc.period / 16, 1, f, s)));
        }
    }
    let mut running: BinaryHeap<Reverse<(Nanos, u64, usize)>> = BinaryHeap::new();
    let mut slots: Vec<Option<Running>> = Vec::new();
    let mut followers: HashMap<(Instr, DeviceId), Dispatch> = HashMap::new();
    let mut committed: HashSet<Instr> = HashSet::new();
    let mut latest: HashMap<Instr, DeviceId> = HashMap::new();
    let mut report = Report::default();
    let mut removed = false;
    let mut added = false;
    let mut seq = 0u64;
    let start = |d: &Dispatch,
                 t: Nanos,
                 rng: &mut ChaCha8Rng,
                 slots: &mut Vec<Option<Running>>,
                 running: &mut BinaryHeap<Reverse<(Nanos, u64, usize)>>,
                 seq: &mut u64| {
        let slow = if d.low_priority { 2 } else { 1 };
        let lat = latency(d.instr.opcode) * slow * rng.gen_range(80..140) / 100;
        slots.push(Some(Running {
            instr: d.instr,
            device: d.device,
            started: t,
            units: d.units,
        }));
        *seq += 1;
        running.push(Reverse((t + lat, *seq, slots.len() - 1)));
    };
    for _ in 0..2_000_000 {
        // Next thing to happen.
        let t_ext = external.peek().map(|r| r.0 .0);
        let t_run = running.peek().map(|r| r.0 .0);
        let t_out = policy.next_timeout();
        let t_rm = sc.remove_at.filter(|_| !removed);
        let t_add = sc.add_at.filter(|_| !added);
        let Some(t) = [t_ext, t_run, t_out, t_rm, t_add]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        assert!(t >= now, "time went back: {t} < {now}");
        now = t;
        if t_rm == Some(now) {
            removed = true;
            policy.remove_device(now, 0);
            cap.remove(&0);
        } else if t_add == Some(now) {
            added = true;
            policy.add_device(now, 99, &cpu(sc.capacity, untrained));
            cap.insert(99, (sc.capacity, 0));
        } else if t_ext == Some(now) {
            let Reverse((_, kind, f, s)) = external.pop().unwrap();
            if kind == 0 {
                policy.frame_arrived(now, f, now + sc.deadline);
            } else {
                policy.input_ready(now, f, s);
            }
        } else if t_run == Some(now) {
            let Reverse((_, _, slot)) = running.pop().unwrap();
            let r = slots[slot].take().unwrap();
            let live = cap.contains_key(&r.device);
            let fail = rng.gen_range(0..1000) < sc.fail_permille;
            if live {
                cap.get_mut(&r.device).unwrap().1 -= r.units;
            }
            let result = if fail {
                Err(crate::engine::InstrError::Injected)
            } else {
                Ok(())
            };
            if live && !fail && latest.get(&r.instr) == Some(&r.device) {
                committed.insert(r.instr);
            }
            // Late completions from a removed device are reported too: must be ignored.
            policy.completed(now, r.instr, r.device, r.started, result);
            if let Some(f) = followers.remove(&(r.instr, r.device)) {
                if live && !fail {
                    cap.get_mut(&f.device).unwrap().1 += f.units;
                    start(&f, now, &mut rng, &mut slots, &mut running, &mut seq);
                }
            }
        }
        while let Some(d) = policy.poll_dispatch(now) {
            report.dispatches += 1;
            assert!(
                !report.done.contains_key(&d.instr.frame),
                "{} dispatched after its frame ended",
                d.instr
            );
            let (capacity, used) = *cap
                .get(&d.device)
                .unwrap_or_else(|| panic!("{} sent to dead device {}", d.instr, d.device));
            let idx = dag.index_of(&d.instr).unwrap();
            for &p in dag.preds(idx) {
                let pi = dag.instr(d.instr.frame, p);
                assert!(
                    committed.contains(&pi) || d.after == Some(pi),
                    "{} dispatched before its predecessor {} committed",
                    d.instr,
                    pi
                );
            }
            assert!(d.units > 0);
            latest.insert(d.instr, d.device);
            if d.low_priority {
                report.low_priority += 1;
            }
            match d.after {
                Some(a) => {
                    report.coalesced += 1;
                    assert_eq!(
                        latest.get(&a),
                        Some(&d.device),
                        "coalesced behind {a} on another device"
                    );
                    assert!(
                        followers.insert((a, d.device), d).is_none(),
                        "two followers behind {a}"
                    );
                }
                None => {
                    assert!(
                        d.low_priority || used + d.units <= capacity,
                        "device {} over capacity: {used} + {} > {capacity}",
                        d.device,
                        d.units
                    );
                    cap.get_mut(&d.device).unwrap().1 += d.units;
                    start(&d, now, &mut rng, &mut slots, &mut running, &mut seq);
                }
            }
        }
        while let Some(e) = policy.poll_event() {
            match e {
                EngineEvent::FrameDone { frame, outcome, .. } => {
                    assert!(
                        report.done.insert(frame, outcome).is_none(),
                        "frame {frame} done twice"
                    );
                }
                EngineEvent::Rescheduled { from, .. } => {
                    assert_eq!(from, 0, "only device 0 is removed");
                    report.rescheduled += 1;
                }
            }
        }
    }
    assert!(
        external.is_empty() && running.is_empty(),
        "scenario did not finish"
    );
    for f in 0..sc.frames {
        assert!(
            report.done.contains_key(&f),
            "frame {f} unaccounted for ({sc:?})"
        );
    }
    report
}

fn base(policy: &'static str) -> Scenario {
    Scenario {
        policy,
        devices: 2,
        capacity: 2,
        frames: 40,
        period: 1_000_000,
        deadline: 3_000_000,
        fail_permille: 0,
        remove_at: None,
        add_at: None,
        seed: 1,
        params: PolicyParams::default(),
    }
}

#[test]
fn light_load_completes_every_frame_under_every_policy() {
    for name in POLICY_NAMES {
        let r = drive(&base(name));
        assert!(
            r.done.values().all(|o| *o == FrameOutcome::Completed),
            "{name}: {:?}",
            r.done
                .values()
                .filter(|o| **o != FrameOutcome::Completed)
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn device_removed_mid_run_reschedules_and_accounts_every_frame() {
    for name in POLICY_NAMES {
        let sc = Scenario {
            period: 150_000,
            remove_at: Some(2_000_123),
            add_at: Some(4_000_000),
            ..base(name)
        };
        let r = drive(&sc);
        assert!(
            r.rescheduled > 0,
            "{name}: nothing was running on the removed device"
        );
        let completed = r
            .done
            .values()
            .filter(|o| **o == FrameOutcome::Completed)
            .count();
        assert!(completed > 0, "{name}: no frame completed");
    }
}

#[test]
fn overload_is_reported_not_hidden() {
    for name in POLICY_NAMES {
        let sc = Scenario {
            period: 20_000,
            deadline: 400_000,
            frames: 200,
            ..base(name)
        };
        let r = drive(&sc);
        let missed = r
            .done
            .values()
            .filter(|o| matches!(o, FrameOutcome::DeadlineMissed | FrameOutcome::Rejected))
            .count();
        assert!(missed > 0, "{name}: 10x overload with no miss or rejection");
    }
}

#[test]
fn failures_retry_once_then_fail_the_frame() {
    for name in POLICY_NAMES {
        let sc = Scenario {
            fail_permille: 150,
            ..base(name)
        };
        let r = drive(&sc);
        assert!(
            r.done
                .values()
                .any(|o| matches!(o, FrameOutcome::Failed(_))),
            "{name}"
        );
        assert!(
            r.done.values().any(|o| *o == FrameOutcome::Completed),
            "{name}"
        );
    }
}

#[test]
fn lroc_uses_coalescing_and_overcommit() {
    let r = drive(&base("lroc"));
    assert!(r.coalesced > 0, "no coalesced dispatch");
    // Over-commit acts on frames near their deadline, which the default work
    // shedding (factor 2) NACKs earlier in this 10x overload: at 1.0 they stay.
    let sc = Scenario {
        period: 60_000,
        deadline: 700_000,
        frames: 100,
        params: PolicyParams {
            shed_work_factor: 1.0,
            ..PolicyParams::default()
        },
        ..base("lroc")
    };
    let r = drive(&sc);
    assert!(r.low_priority > 0, "no over-commit under overload");
}

#[test]
fn admission_is_bounded() {
    let shape = shape(1, 0, 1, 1);
    let params = PolicyParams {
        max_in_flight: 2,
        ..PolicyParams::default()
    };
    let mut p = make_policy("frame", &shape, &params).unwrap();
    for f in 0..3 {
        p.frame_arrived(0, f, 1_000);
    }
    assert_eq!(
        p.poll_event(),
        Some(EngineEvent::FrameDone {
            frame: 2,
            outcome: FrameOutcome::Rejected,
            latency_ns: 0
        })
    );
    assert_eq!(p.poll_dispatch(0), None, "no device: nothing to run");
    assert_eq!(p.next_timeout(), Some(1_000));
    assert_eq!(p.poll_dispatch(1_000), None);
    let mut missed = 0;
    while let Some(e) = p.poll_event() {
        assert!(matches!(
            e,
            EngineEvent::FrameDone {
                outcome: FrameOutcome::DeadlineMissed,
                ..
            }
        ));
        missed += 1;
    }
    assert_eq!(missed, 2);
}

#[test]
fn bad_names_and_params_are_errors() {
    let s = shape(1, 0, 1, 1);
    assert!(matches!(
        make_policy("fifo", &s, &PolicyParams::default()),
        Err(PolicyError::Unknown(_))
    ));
    let bad = PolicyParams {
        alpha: 0.0,
        ..PolicyParams::default()
    };
    assert!(matches!(
        make_policy("lroc", &s, &bad),
        Err(PolicyError::Param { .. })
    ));
}

#[test]
fn frame_policy_keeps_a_frame_on_one_device() {
    let s = shape(2, 0, 2, 2);
    let mut p = make_policy("frame", &s, &PolicyParams::default()).unwrap();
    p.add_device(0, 0, &cpu(4, untrained));
    p.add_device(0, 1, &cpu(4, untrained));
    p.frame_arrived(0, 7, 1_000_000);
    for sym in s.received_symbols() {
        p.input_ready(0, 7, sym);
    }
    let mut devices = HashSet::new();
    let mut now = 0;
    let mut done = false;
    while !done {
        let mut batch = Vec::new();
        while let Some(d) = p.poll_dispatch(now) {
            devices.insert(d.device);
            batch.push(d);
        }
        assert!(!batch.is_empty(), "stalled");
        now += 10;
        for d in batch {
            p.completed(now, d.instr, d.device, now - 10, Ok(()));
        }
        while let Some(e) = p.poll_event() {
            assert!(matches!(
                e,
                EngineEvent::FrameDone {
                    outcome: FrameOutcome::Completed,
                    ..
                }
            ));
            done = true;
        }
    }
    assert_eq!(devices.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn invariants_hold_for_every_policy(
        policy in prop::sample::select(POLICY_NAMES.to_vec()),
        devices in 1u32..4,
        capacity in 1u32..4,
        period in 30_000u64..400_000,
        deadline in 200_000u64..2_000_000,
        fail_permille in 0u32..60,
        remove in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let sc = Scenario {
            policy,
            devices,
            capacity,
            frames: 30,
            period,
            deadline,
            fail_permille,
            remove_at: remove.then_some(period * 10 + 7),
            add_at: remove.then_some(period * 20),
            seed,
            params: PolicyParams::default(),
        };
        drive(&sc);
    }
}

/// LROC sheds a frame whose ready work can no longer finish in time: the NACK comes
/// before the deadline and none of its instructions is dispatched; with shedding off
/// the same frame is worked on until the deadline discards it.
#[test]
fn lroc_sheds_a_hopeless_frame_before_its_deadline() {
    let shape = shape(3, 0, 2, 2);
    for shed in [true, false] {
        let params = PolicyParams {
            shed_hopeless: shed,
            ..PolicyParams::default()
        };
        let mut p = make_policy("lroc", &shape, &params).unwrap();
        p.add_device(0, 0, &cpu(1, |_| 100_000));
        // Critical path from a Load is >= 5 instructions x 100 us; deadline 50 us.
        p.frame_arrived(0, 7, 50_000);
        for s in shape.received_symbols() {
            p.input_ready(0, 7, s);
        }
        let first = p.poll_dispatch(1_000);
        let event = p.poll_event();
        if shed {
            assert_eq!(first, None, "a hopeless frame must not be worked on");
            match event {
                Some(EngineEvent::FrameDone {
                    frame: 7,
                    outcome: FrameOutcome::DeadlineMissed,
                    latency_ns,
                }) => assert!(latency_ns < 50_000),
                other => panic!("expected an early NACK, got {other:?}"),
            }
        } else {
            assert!(first.is_some(), "without shedding the frame is worked on");
            assert_eq!(event, None);
        }
    }
}

/// LROC sheds by work: of two frames that fit one after the other only with a
/// longer deadline, the later one is NACKed at once so the earlier one keeps the
/// unit; with `shed_work_factor` 0 neither is shed.
#[test]
fn lroc_sheds_the_frame_its_predecessors_work_makes_late() {
    let shape = shape(3, 0, 2, 2);
    let work = FrameDag::build(&shape).len() as Nanos * 100_000;
    for factor in [1.0, 0.0] {
        let params = PolicyParams {
            shed_work_factor: factor,
            ..PolicyParams::default()
        };
        let mut p = make_policy("lroc", &shape, &params).unwrap();
        p.add_device(0, 0, &cpu(1, |_| 100_000));
        // Each frame alone fits its deadline; the second does not fit behind the first.
        p.frame_arrived(0, 1, work + 100_000);
        p.frame_arrived(0, 2, work + 200_000);
        for f in [1, 2] {
            for s in shape.received_symbols() {
                p.input_ready(0, f, s);
            }
        }
        let first = p
            .poll_dispatch(1_000)
            .expect("the first frame is worked on");
        assert_eq!(first.instr.frame, 1);
        let event = p.poll_event();
        if factor > 0.0 {
            match event {
                Some(EngineEvent::FrameDone {
                    frame: 2,
                    outcome: FrameOutcome::DeadlineMissed,
                    ..
                }) => {}
                other => panic!("expected frame 2 shed, got {other:?}"),
            }
        } else {
            assert_eq!(event, None, "nothing is shed with the work test off");
        }
        assert_eq!(p.poll_event(), None, "frame 1 fits and stays");
    }
}

#[test]
fn shed_work_factor_out_of_range_is_refused() {
    for bad in [-1.0, f64::NAN, 17.0] {
        let params = PolicyParams {
            shed_work_factor: bad,
            ..PolicyParams::default()
        };
        assert!(params.validate().is_err(), "{bad} accepted");
    }
}

/// LROC's lookahead: a full one-unit device gets its next ready instruction queued
/// behind the running one (no units until then); without lookahead it gets nothing
/// until a completion.
#[test]
fn lroc_lookahead_queues_behind_the_running_instruction() {
    let shape = shape(3, 0, 2, 2);
    for lookahead in [true, false] {
        // Coalescing off: it would queue the Load's successor behind it either way.
        let params = PolicyParams {
            lookahead,
            coalesce: false,
            ..PolicyParams::default()
        };
        let mut p = make_policy("lroc", &shape, &params).unwrap();
        p.add_device(0, 0, &cpu(1, latency));
        p.frame_arrived(0, 1, 10_000_000);
        for s in shape.received_symbols() {
            p.input_ready(0, 1, s);
        }
        let first = p.poll_dispatch(1_000).expect("a free unit takes work");
        assert_eq!(first.after, None);
        let second = p.poll_dispatch(1_000);
        if lookahead {
            let second = second.expect("lookahead queues the next instruction");
            assert_eq!(second.after, Some(first.instr));
            assert!(!second.low_priority);
            assert_eq!(
                p.poll_dispatch(1_000),
                None,
                "one follower per running instruction"
            );
        } else {
            assert_eq!(second, None);
        }
    }
}
