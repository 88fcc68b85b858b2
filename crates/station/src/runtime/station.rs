//! One station run end to end: radio units -> fronthaul -> ingest -> driver with
//! CPU devices -> report.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use radiohost_phy::FrameConfig;

use super::{
    driver_channel, frame_pool, now_ns, run_driver, DeviceChange, DeviceSpec, DriverConfig,
    StationError,
};
use crate::calibration::Calibration;
use crate::engine::Policy;
use crate::kernels::KernelContext;
use crate::pool::Exhaustion;
use crate::report::{RunMeta, RunReport};
use crate::ru::emulator::{spawn_ru, RuConfig};
use crate::ru::ingest::spawn_ingest;
use crate::ru::transport::link;
use crate::ru::wire::HEADER_LEN;
use crate::ru::{FrameBank, TransportKind};

/// Everything one run needs besides the policy.
#[derive(Clone)]
pub struct StationSetup {
    pub ctx: Arc<KernelContext>,
    pub bank: Arc<FrameBank>,
    pub config_name: String,
    pub devices: Vec<DeviceSpec>,
    pub rus: usize,
    pub frames: u64,
    pub frame_period_ns: u64,
    pub deadline_ns: u64,
    pub transport: TransportKind,
    pub changes: Vec<DeviceChange>,
    pub verify_downlink: bool,
    /// Frame slots the pool may grow to (it starts with
    /// [`StationSetup::slots_up_front`]).
    pub pool_max: usize,
    pub queue_capacity: usize,
    /// Measured costs for the devices it covers (the others are modelled).
    pub calibration: Option<Arc<Calibration>>,
    /// Tunables of the policies [`crate::setup::run_policies`] builds.
    pub policy_params: crate::policy::PolicyParams,
}

impl StationSetup {
    /// Defaults for `cfg`: 1 ms frames, 4 ms deadline, ring transport, no changes.
    ///
    /// # Errors
    /// A configuration the kernels cannot cut into `parts`, or a generator error.
    pub fn new(
        cfg: &FrameConfig,
        config_name: &str,
        parts: usize,
        bank_frames: usize,
        devices: Vec<DeviceSpec>,
    ) -> Result<Self, StationError> {
        let ctx = Arc::new(KernelContext::new(cfg, parts)?);
        let bank = Arc::new(FrameBank::generate(cfg, bank_frames)?);
        Ok(Self {
            ctx,
            bank,
            config_name: config_name.to_string(),
            devices,
            rus: 1,
            frames: 100,
            frame_period_ns: 1_000_000,
            deadline_ns: 4_000_000,
            transport: TransportKind::Ring,
            changes: Vec::new(),
            verify_downlink: false,
            pool_max: 256,
            queue_capacity: 4096,
            calibration: None,
            policy_params: crate::policy::PolicyParams::default(),
        })
    }

    /// Frame slots made (and faulted in) before the run: as many frames as can be in
    /// flight at once. A frame holds its slot from its first packet until it is
    /// decided, by its deadline at the latest, so each radio unit has at most
    /// `deadline / period + 1` frames in flight, plus one for a straggling
    /// instruction. More grow the pool on demand, up to `pool_max`.
    pub fn slots_up_front(&self) -> usize {
        let in_flight = self.deadline_ns.div_ceil(self.frame_period_ns.max(1));
        let per_ru = usize::try_from(in_flight).map_or(usize::MAX, |n| n.saturating_add(2));
        self.rus
            .saturating_mul(per_ru)
            .clamp(1, self.pool_max.max(1))
    }
}

/// Run `policy` on `setup`'s devices against its radio units and report.
///
/// # Errors
/// A transport, device or thread that could not start, or an RU that failed.
pub fn run_station(
    setup: &StationSetup,
    policy: Box<dyn Policy>,
) -> Result<RunReport, StationError> {
    let ctx = setup.ctx.clone();
    let policy_name = policy.name().to_string();
    let pool = frame_pool(
        &ctx,
        setup.slots_up_front(),
        Exhaustion::Grow {
            max: setup.pool_max,
        },
    );
    let (tx, rx) = driver_channel();
    let dcfg = DriverConfig {
        devices: setup.devices.clone(),
        queue_capacity: setup.queue_capacity,
        deadline_ns: setup.deadline_ns,
        changes: setup.changes.clone(),
        rus: setup.rus,
        drain_timeout_ns: (setup.deadline_ns * 4).max(200_000_000),
        verify_downlink: setup.verify_downlink,
        keep_payloads: false,
        calibration: setup.calibration.clone(),
    };
    let driver = {
        let (ctx, tx) = (ctx.clone(), tx.clone());
        std::thread::Builder::new()
            .name("station-scheduler".into())
            .spawn(move || run_driver(policy, ctx, dcfg, rx, tx))
            .map_err(|source| StationError::Spawn {
                thread: "scheduler",
                source,
            })?
    };
    let max_packet = HEADER_LEN + ctx.cfg.symbol_len() * 4;
    // Up to 64 frames of packets, within 64 MiB per RU: a ring this deep only drops
    // when the ingest stalls for tens of frames.
    let per_frame = ctx.cfg.antennas * ctx.cfg.schedule.len();
    let ring_packets = (per_frame * 64).min((64 << 20) / max_packet).max(per_frame);
    let links = (0..setup.rus as u16)
        .map(|ru| {
            link(setup.transport, ring_packets, max_packet)
                .map_err(|source| StationError::Fronthaul { ru, source })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // The radio units' clock starts once the fronthaul is allocated and the devices
    // are up (allocating either takes tens of ms on a small machine): a frame due
    // before then would reach the station late by construction and start the run
    // with a backlog. Then a moment for the threads below to start.
    while !tx.is_installed() {
        if driver.is_finished() {
            return Err(driver
                .join()
                .map_err(|_| StationError::Panicked("scheduler"))?
                .err()
                .unwrap_or(StationError::Panicked("scheduler state")));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = now_ns() + 20_000_000;
    let mut rus = Vec::new();
    let mut ingests = Vec::new();
    for (ru, (ptx, prx)) in (0u16..).zip(links) {
        let finished = Arc::new(AtomicBool::new(false));
        ingests.push(spawn_ingest(
            ru,
            setup.rus as u16,
            setup.frames,
            ctx.clone(),
            setup.bank.clone(),
            pool.clone(),
            prx,
            finished.clone(),
            tx.clone(),
        ));
        let rc = RuConfig {
            frames: setup.frames,
            frame_period_ns: setup.frame_period_ns,
            start_ns: start,
        };
        rus.push(spawn_ru(
            ru,
            ctx.clone(),
            setup.bank.clone(),
            rc,
            ptx,
            finished,
        ));
    }
    drop(tx);
    let mut notes = Vec::new();
    let (mut ru_packets, mut ru_dropped, mut late) = (0, 0, 0);
    for (ru, r) in (0u16..).zip(rus) {
        match r.join() {
            Ok(Ok(s)) => {
                ru_packets += s.packets;
                ru_dropped += s.dropped;
                late += s.late_symbols;
            }
            Ok(Err(source)) => return Err(StationError::RadioUnit { ru, source }),
            Err(_) => return Err(StationError::Panicked("radio unit")),
        }
    }
    let (mut evicted, mut lost) = (0, 0);
    for i in ingests {
        if let Ok(s) = i.join() {
            if let Some(e) = &s.error {
                notes.push(format!(
                    "fronthaul receive error ended an ingest early: {e}"
                ));
            }
            evicted += s.evicted;
            lost += s.lost;
        }
    }
    let out = driver
        .join()
        .map_err(|_| StationError::Panicked("scheduler"))??;
    if ru_dropped > 0 {
        notes.push(format!(
            "{ru_dropped} of {} fronthaul packets dropped (transport full)",
            ru_packets + ru_dropped
        ));
    }
    if late > 0 {
        notes.push(format!(
            "radio units sent {late} symbols more than a frame late (sender starved of CPU)"
        ));
    }
    if lost > 0 {
        notes.push(format!(
            "{lost} frames lost in the fronthaul (no packet arrived): counted as failed"
        ));
    }
    if evicted > 0 {
        notes.push(format!(
            "{evicted} frames evicted from reassembly incomplete"
        ));
    }
    if out.ignored_completions > 0 {
        notes.push(format!(
            "{} completions from removed devices ignored",
            out.ignored_completions
        ));
    }
    notes.extend(out.notes.iter().cloned());
    let wall_ns = out
        .last_decision
        .saturating_sub(out.first_arrival.unwrap_or(start));
    let meta = RunMeta {
        policy: policy_name,
        config: setup.config_name.clone(),
        devices: setup.devices.len(),
        workers: setup.devices.iter().map(DeviceSpec::cpu_workers).sum(),
        rus: setup.rus,
        offered_fps: setup.rus as f64 * 1e9 / setup.frame_period_ns as f64,
        wall_s: wall_ns as f64 / 1e9,
        deadline_ns: setup.deadline_ns,
        pool: pool.stats(),
        bad_packets: out.bad_packets,
        rescheduled: out.rescheduled,
        device_removals: out.device_removals,
        device_instrs: out.device_instrs.clone(),
        device_costs: out.device_costs.clone(),
        scheduler_busy_ns: out.scheduler_busy_ns,
        dispatches: out.dispatches,
        late_symbols: late,
        notes,
    };
    Ok(out.report.finish(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_up_front_cover_the_frames_in_flight() {
        let cfg = crate::kernels::tests::phy_config("8x2");
        let mut s = StationSetup::new(&cfg, "8x2", 1, 1, DeviceSpec::split(1, 1, &[])).unwrap();
        // 1 ms frames, 4 ms deadline: 5 frames in flight, and a straggler.
        assert_eq!(s.slots_up_front(), 6);
        s.rus = 3;
        s.deadline_ns = 2_500_000;
        assert_eq!(s.slots_up_front(), 3 * 5);
        s.rus = 64;
        s.pool_max = 100;
        assert_eq!(s.slots_up_front(), 100);
        s.frame_period_ns = 1;
        s.deadline_ns = u64::MAX;
        assert_eq!(s.slots_up_front(), 100);
    }
}
