//! Placement under a simulated clock: devices finish each dispatch after their own
//! profile's latency, so where frames go and how they end does not depend on timing.

use std::collections::HashMap;

use super::*;
use crate::costs::{CostSource, OpcodeCost};

const CPU: DeviceId = 0;
const GPU: DeviceId = 1;

fn shape() -> FrameShape {
    FrameShape::new(&crate::kernels::tests::phy_config("8x2"), 2).unwrap()
}

fn profile(kind: DeviceKind, units: u32, latency_ns: Nanos) -> DeviceProfile {
    DeviceProfile {
        kind,
        units,
        memory_bytes: 0,
        costs: [OpcodeCost {
            need: 1,
            latency_ns,
        }; Opcode::ALL.len()],
        source: CostSource::Calibrated,
    }
}

/// A discrete-event loop around the placement: every dispatch completes after its
/// device's latency; frames arrive with all their inputs.
struct Sim {
    p: FramePlacement,
    now: Nanos,
    latency: HashMap<DeviceId, Nanos>,
    running: Vec<(Nanos, Dispatch)>,
    /// Per frame: the devices its instructions ran on, in dispatch order.
    ran_on: HashMap<FrameId, Vec<DeviceId>>,
    outcomes: HashMap<FrameId, FrameOutcome>,
}

impl Sim {
    fn new() -> Self {
        let policy = make_policy("lroc", &shape(), &PolicyParams::default()).unwrap();
        Self {
            p: FramePlacement::new(policy, &shape()),
            now: 1_000,
            latency: HashMap::new(),
            running: Vec::new(),
            ran_on: HashMap::new(),
            outcomes: HashMap::new(),
        }
    }

    fn add(&mut self, id: DeviceId, profile: &DeviceProfile) {
        self.latency
            .insert(id, profile.cost(Opcode::Load).latency_ns);
        self.p.add_device(self.now, id, profile);
        self.pump();
    }

    fn remove(&mut self, id: DeviceId) {
        self.latency.remove(&id);
        self.p.remove_device(self.now, id);
        self.pump();
    }

    fn arrive(&mut self, frame: FrameId, deadline_in: Nanos) {
        self.p
            .frame_arrived(self.now, frame, self.now + deadline_in);
        for s in shape().received_symbols() {
            self.p.input_ready(self.now, frame, s);
        }
        self.pump();
    }

    fn pump(&mut self) {
        while let Some(d) = self.p.poll_dispatch(self.now) {
            self.ran_on.entry(d.instr.frame).or_default().push(d.device);
            // A removed device's work never completes.
            if let Some(&lat) = self.latency.get(&d.device) {
                self.running.push((self.now + lat, d));
            }
        }
        while let Some(ev) = self.p.poll_event() {
            if let EngineEvent::FrameDone { frame, outcome, .. } = ev {
                assert!(
                    self.outcomes.insert(frame, outcome).is_none(),
                    "frame {frame} ended twice"
                );
            }
        }
    }

    /// Advance the clock by `dt`, completing what ends on the way.
    fn run_for(&mut self, dt: Nanos) {
        let until = self.now + dt;
        loop {
            self.running.sort_by_key(|r| std::cmp::Reverse(r.0));
            let next_end = self.running.last().map(|r| r.0);
            let next = [next_end, self.p.next_timeout()]
                .into_iter()
                .flatten()
                .filter(|&t| t <= until)
                .min();
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            while self.running.last().is_some_and(|r| r.0 <= self.now) {
                let (_, d) = self.running.pop().unwrap();
                if self.latency.contains_key(&d.device) {
                    self.p
                        .completed(self.now, d.instr, d.device, self.now, Ok(()));
                }
            }
            self.pump();
        }
        self.now = until;
        self.pump();
    }
}

#[test]
fn a_frame_goes_whole_to_the_device_predicted_to_finish_it_first() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 1, 20_000));
    s.add(GPU, &profile(DeviceKind::Gpu, 8, 1_000));
    s.arrive(0, 100_000_000);
    s.run_for(50_000_000);
    assert_eq!(s.outcomes[&0], FrameOutcome::Completed);
    assert!(
        s.ran_on[&0].iter().all(|&d| d == GPU),
        "the fast whole-frame device takes the frame whole: {:?}",
        s.ran_on[&0]
    );
}

#[test]
fn backlog_spills_frames_to_the_cpu_pool_and_each_stays_on_one_pool() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 2, 10_000));
    s.add(GPU, &profile(DeviceKind::Gpu, 8, 5_000));
    for f in 0..8 {
        s.arrive(f, 1_000_000_000);
    }
    s.run_for(900_000_000);
    assert_eq!(s.outcomes.len(), 8);
    assert!(s.outcomes.values().all(|o| *o == FrameOutcome::Completed));
    let on = |dev| {
        s.ran_on
            .values()
            .filter(|d| d.iter().all(|&x| x == dev))
            .count()
    };
    assert_eq!(
        on(CPU) + on(GPU),
        8,
        "a frame never mixes pools: {:?}",
        s.ran_on
    );
    assert!(
        on(CPU) > 0 && on(GPU) > 0,
        "both pools used: {:?}",
        s.ran_on
    );
}

#[test]
fn a_whole_frame_device_leaving_replans_its_frames_and_its_rejoin_is_used() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 1, 20_000));
    s.add(GPU, &profile(DeviceKind::Gpu, 8, 1_000));
    s.arrive(0, 100_000_000);
    s.arrive(1, 100_000_000);
    // Part-way through frame 0 on the GPU.
    s.run_for(5_000);
    assert!(s.ran_on[&0].contains(&GPU));
    s.remove(GPU);
    assert!(s.p.replanned() >= 1, "frames in flight moved");
    s.run_for(90_000_000);
    for f in [0, 1] {
        assert_eq!(s.outcomes[&f], FrameOutcome::Completed, "frame {f}");
        assert_eq!(
            s.ran_on[&f].last(),
            Some(&CPU),
            "frame {f} finished on the CPU"
        );
    }
    // The GPU comes back under a new id and takes frames again.
    s.add(2, &profile(DeviceKind::Gpu, 8, 1_000));
    s.arrive(2, 100_000_000);
    s.run_for(50_000_000);
    assert_eq!(s.outcomes[&2], FrameOutcome::Completed);
    assert!(s.ran_on[&2].iter().all(|&d| d == 2), "{:?}", s.ran_on[&2]);
}

#[test]
fn frames_no_pool_can_finish_in_time_are_nacked() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 1, 1_000_000));
    s.add(GPU, &profile(DeviceKind::Gpu, 8, 1_000));
    s.arrive(0, 2_000_000);
    s.run_for(2_000);
    s.remove(GPU);
    assert_eq!(s.p.nacked(), 1);
    assert_eq!(s.outcomes[&0], FrameOutcome::DeadlineMissed);
}

#[test]
fn with_no_cpu_device_waiting_frames_move_to_a_joining_whole_frame_device() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 1, 10_000));
    s.remove(CPU);
    s.arrive(0, 100_000_000);
    s.run_for(1_000_000);
    assert!(s.outcomes.is_empty(), "waits for a device");
    s.add(GPU, &profile(DeviceKind::Gpu, 8, 1_000));
    s.run_for(50_000_000);
    assert_eq!(s.outcomes[&0], FrameOutcome::Completed);
    assert!(s.ran_on[&0].iter().all(|&d| d == GPU));
}

#[test]
fn a_cpu_only_pool_behaves_as_its_policy() {
    let mut s = Sim::new();
    s.add(CPU, &profile(DeviceKind::Cpu, 2, 10_000));
    s.add(2, &profile(DeviceKind::Cpu, 1, 10_000));
    for f in 0..4 {
        s.arrive(f, 1_000_000_000);
    }
    s.run_for(900_000_000);
    assert_eq!(s.outcomes.len(), 4);
    assert!(s.outcomes.values().all(|o| *o == FrameOutcome::Completed));
    assert_eq!(s.p.name(), "lroc");
    assert_eq!(s.p.replanned() + s.p.nacked(), 0);
}
