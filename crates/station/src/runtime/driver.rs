//! The scheduler thread: feeds the policy, dispatches to devices, accounts frames.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use radiohost_iq::Ci16;
use radiohost_phy::downlink::{DownlinkInfo, DownlinkUserOutput, UserEmulator};
use radiohost_phy::generator::frame_rng;
use rustc_hash::FxHashMap;

use super::executor::{
    CompletionSink, DeviceSpec, Executor, ExecutorEnv, Job, Refused, SubmitError,
};
use super::{now_ns, DeviceAction, DeviceChange, DriverMsg, DriverSender, StationError, Truth};
use crate::calibration::Calibration;
use crate::engine::InstrError;
use crate::engine::{EngineEvent, FrameOutcome, Policy};
use crate::isa::{DeviceId, FrameId, Instr, Nanos};
use crate::kernels::slot::read;
use crate::kernels::{FrameSlot, KernelContext};
use crate::pool::Lease;
use crate::report::{DeviceCostLabel, FrameFate, FrameRecord, ReportBuilder};

/// How the driver runs.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub devices: Vec<DeviceSpec>,
    /// Jobs queued per device at most (normal + low priority).
    pub queue_capacity: usize,
    /// Frame deadline after its arrival.
    pub deadline_ns: Nanos,
    pub changes: Vec<DeviceChange>,
    /// Radio units whose `IngestDone` ends the input.
    pub rus: usize,
    /// After the input ends, frames still open this long are failed.
    pub drain_timeout_ns: Nanos,
    /// Verify each completed frame's downlink with emulated users (costly).
    pub verify_downlink: bool,
    /// Hand back every completed frame's decoded uplink payload
    /// ([`DriverOutput::payloads`]); kept for the whole run, so for bounded runs.
    pub keep_payloads: bool,
    /// Measured per-opcode costs; devices it covers are charged those, the others
    /// their modelled costs (each report says which).
    pub calibration: Option<Arc<Calibration>>,
}

/// The decoded uplink of one completed frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedPayload {
    pub frame: FrameId,
    /// Per user, the payload bits (one bit per byte, 0 or 1).
    pub bits: Vec<Vec<u8>>,
    /// Every code block's CRC passed.
    pub crc_ok: bool,
}

/// What the driver hands back.
pub struct DriverOutput {
    pub report: ReportBuilder,
    pub bad_packets: u64,
    pub rescheduled: u64,
    pub device_removals: u64,
    pub ignored_completions: u64,
    pub device_instrs: Vec<u64>,
    pub device_costs: Vec<DeviceCostLabel>,
    /// Time spent handling messages and polling the policy, on whichever thread
    /// delivered them (workers, the ingest, the scheduler thread's timers).
    pub scheduler_busy_ns: Nanos,
    /// Dispatches sent to devices, and those a device completed at once
    /// ([`Executor::complete_inline`]).
    pub dispatches: u64,
    pub notes: Vec<String>,
    /// Messages whose sender found the scheduler's inbox full and waited.
    pub inbox_full_waits: u64,
    /// Completed frames the scheduler waited to hand to the (full) truth checker.
    pub checker_full_waits: u64,
    pub first_arrival: Option<Nanos>,
    pub last_decision: Nanos,
    /// Completed frames' decoded payloads, when [`DriverConfig::keep_payloads`].
    pub payloads: Vec<DecodedPayload>,
}

struct Live {
    ru: u16,
    arrival: Nanos,
    slot: Lease<FrameSlot>,
    truth: Option<Truth>,
}

struct CheckJob {
    record: FrameRecord,
    slot: Lease<FrameSlot>,
    truth: Option<Truth>,
}

/// Completed frames queued for the truth checker at most; beyond that the
/// scheduler waits for it (counted), since each frame's record and payload must
/// be reported.
const CHECKER_QUEUE_CAPACITY: usize = 256;

/// Compare a completed frame with its truth (uplink bits and CRCs; downlink through
/// the emulated users when asked) off the scheduler thread, and keep its decoded
/// payload when asked.
type Checked = (Vec<FrameRecord>, Vec<DecodedPayload>);

/// How long the truth checker sleeps when it finds its queue empty.
const CHECKER_POLL: Duration = Duration::from_millis(1);

/// The checker's next job, or `None` once the scheduler hung up. It polls instead of
/// blocking: a receiver blocked on the queue makes every send a futex wake-up, and a
/// frame's last instruction sends from a worker, on the frame path.
fn poll(rx: &Receiver<CheckJob>) -> Option<CheckJob> {
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::TryRecvError::Empty) => std::thread::sleep(CHECKER_POLL),
            Err(mpsc::TryRecvError::Disconnected) => return None,
        }
    }
}

fn spawn_checker(
    ctx: Arc<KernelContext>,
    verify_downlink: bool,
    keep_payloads: bool,
) -> (SyncSender<CheckJob>, std::thread::JoinHandle<Checked>) {
    let (tx, rx) = mpsc::sync_channel::<CheckJob>(CHECKER_QUEUE_CAPACITY);
    let h = std::thread::spawn(move || {
        let cfg = &ctx.cfg;
        let mut ues = if verify_downlink && ctx.shape.has_downlink() {
            UserEmulator::new(cfg).ok()
        } else {
            None
        };
        let mut dl_out = DownlinkUserOutput::for_config(cfg);
        let mut tx_frame = vec![Ci16::default(); cfg.antennas * cfg.frame_len()];
        let mut done = Vec::new();
        let mut payloads = Vec::new();
        while let Some(mut job) = poll(&rx) {
            let crc_ok = read(&job.slot.uplink_blocks)
                .iter()
                .flatten()
                .all(|b| b.crc_ok);
            if keep_payloads {
                payloads.push(DecodedPayload {
                    frame: job.record.frame,
                    bits: read(&job.slot.uplink_payload).clone(),
                    crc_ok,
                });
            }
            let Some(truth) = job.truth else {
                done.push(job.record);
                continue;
            };
            let up_ok = *read(&job.slot.uplink_payload) == truth.frame.uplink_payload && crc_ok;
            let dl_ok = match ues.as_mut() {
                Some(ues) => {
                    job.slot.assemble_downlink(&ctx, &mut tx_frame);
                    let info = DownlinkInfo {
                        tx_gain: ctx.tx_gain,
                        beta: 1.0,
                    };
                    let mut rng = frame_rng(cfg.seed, truth.index, 1);
                    ues.receive(
                        &tx_frame,
                        &info,
                        &truth.frame.channel,
                        &mut rng,
                        &mut dl_out,
                    )
                    .is_ok()
                        && dl_out.payload == truth.frame.downlink_payload
                        && dl_out.blocks.iter().flatten().all(|b| b.crc_ok)
                }
                None => true,
            };
            job.record.decoded_ok = Some(up_ok && dl_ok);
            if !(up_ok && dl_ok) {
                job.record.reason = Some(format!(
                    "decoded bits differ from the truth (uplink ok: {up_ok}, downlink ok: {dl_ok})"
                ));
            }
            done.push(job.record);
        }
        (done, payloads)
    });
    (tx, h)
}

/// The driver's state: the policy, the devices and the open frames. While a run is
/// on it lives behind the [`DriverSender`]'s lock, and every thread that reports to
/// the driver (a worker's completion, the ingest's arrivals) runs the policy itself
/// under that lock ([`DriverState::deliver`]): the next instruction is dispatched on
/// the reporting thread, with no wake-up of a scheduler thread in between (a
/// cross-core wake-up costs tens of microseconds on a VM, and a frame's critical
/// path crosses dozens of instructions).
pub(crate) struct DriverState {
    policy: Box<dyn Policy>,
    d: Driver,
    changes: Vec<DeviceChange>,
    deadline_ns: Nanos,
    ingest_done: usize,
    /// A device that could not start while handling a message: ends the run.
    fatal: Option<StationError>,
}

impl DriverState {
    /// Handle `msg`, then ask the policy for dispatches until it has none.
    pub(crate) fn deliver(&mut self, msg: DriverMsg) {
        let from = now_ns();
        if let Err(e) = self.handle(msg) {
            self.fatal.get_or_insert(e);
        }
        self.d.pump(&mut *self.policy);
        self.d.out.scheduler_busy_ns += now_ns() - from;
    }

    /// Run the policy (its timers: over-commitment, deadlines) with no new message.
    fn tick(&mut self) {
        let from = now_ns();
        self.d.pump(&mut *self.policy);
        self.d.out.scheduler_busy_ns += now_ns() - from;
    }

    fn handle(&mut self, msg: DriverMsg) -> Result<(), StationError> {
        let now = now_ns();
        let (d, policy) = (&mut self.d, &mut *self.policy);
        match msg {
            DriverMsg::FrameArrived {
                frame,
                ru,
                at,
                slot,
                truth,
            } => {
                d.out.first_arrival.get_or_insert(at);
                while self.changes.first().is_some_and(|c| c.at_frame <= frame) {
                    let c = self.changes.remove(0);
                    d.change(policy, now, &c.action)?;
                }
                d.frames.insert(
                    frame,
                    Live {
                        ru,
                        arrival: at,
                        slot,
                        truth,
                    },
                );
                policy.frame_arrived(now, frame, at + self.deadline_ns);
            }
            DriverMsg::FrameRefused { frame, ru, reason } => d.record(FrameRecord {
                frame,
                ru,
                fate: FrameFate::Rejected,
                latency_ns: 0,
                decided_ns: d.since_first_arrival(now),
                decoded_ok: None,
                uplink_bits: 0,
                reason: Some(reason.to_string()),
            }),
            DriverMsg::FrameLost { frame, ru } => d.record(FrameRecord {
                frame,
                ru,
                fate: FrameFate::Failed,
                latency_ns: 0,
                decided_ns: d.since_first_arrival(now),
                decoded_ok: None,
                uplink_bits: 0,
                reason: Some("lost in the fronthaul: no packet arrived".into()),
            }),
            DriverMsg::InputReady { frame, symbol } => {
                if d.frames.contains_key(&frame) {
                    policy.input_ready(now, frame, symbol);
                }
            }
            DriverMsg::Completed {
                device,
                instr,
                started,
                finished,
                result,
            } => {
                let live = d.devices.get(device as usize).is_some_and(Option::is_some);
                if live {
                    d.completed(policy, now, device, instr, (started, finished), result);
                } else {
                    d.out.ignored_completions += 1;
                }
            }
            DriverMsg::IngestDone { bad_packets, .. } => {
                self.ingest_done += 1;
                d.out.bad_packets += bad_packets;
            }
            DriverMsg::AddDevice(spec) => d.add_device(policy, &spec)?,
            DriverMsg::RemoveDevice(id) => d.change(policy, now, &DeviceAction::Remove(id))?,
            DriverMsg::DeviceFailed { device, fault } => {
                d.out
                    .notes
                    .push(format!("device {device} failed: {fault}; removing it"));
                d.change(policy, now, &DeviceAction::Remove(device))?
            }
        }
        Ok(())
    }
}

/// How long the scheduler thread sleeps at most between looks at the policy's
/// timers and the end of the input (the reporting threads do the rest).
const TICK_NS: Nanos = 2_000_000;

/// Run the driver until every radio unit's input has ended and every frame is
/// accounted for. This thread starts the devices, installs the driver's state in
/// `tx` (from then on the reporting threads run the policy, see [`DriverState`]),
/// and wakes for the policy's timers and the end of the run.
///
/// # Errors
/// A device that could not start, or a panicked truth checker.
pub fn run_driver(
    policy: Box<dyn Policy>,
    ctx: Arc<KernelContext>,
    cfg: DriverConfig,
    rx: Receiver<DriverMsg>,
    tx: DriverSender,
) -> Result<DriverOutput, StationError> {
    // Frames are placed whole on the CPU pool or on one GPU executor.
    let mut policy: Box<dyn Policy> =
        Box::new(super::placement::FramePlacement::new(policy, &ctx.shape));
    let mut d = Driver {
        devices: Vec::new(),
        frames: FxHashMap::default(),
        report: ReportBuilder::default(),
        uplink_bits: (ctx.cfg.uplink_blocks() * ctx.cfg.block_payload_bits() * ctx.cfg.users)
            as u64,
        out: DriverOutput {
            report: ReportBuilder::default(),
            bad_packets: 0,
            rescheduled: 0,
            device_removals: 0,
            ignored_completions: 0,
            device_instrs: Vec::new(),
            device_costs: Vec::new(),
            scheduler_busy_ns: 0,
            dispatches: 0,
            notes: Vec::new(),
            inbox_full_waits: 0,
            checker_full_waits: 0,
            first_arrival: None,
            last_decision: 0,
            payloads: Vec::new(),
        },
        checker: None,
        specs: Vec::new(),
        calibration: cfg.calibration.clone(),
        ctx: ctx.clone(),
        tx: tx.clone(),
        queue_capacity: cfg.queue_capacity,
        keep_payloads: cfg.keep_payloads,
    };
    let (check_tx, checker) = spawn_checker(ctx.clone(), cfg.verify_downlink, cfg.keep_payloads);
    d.checker = Some(check_tx);
    for spec in &cfg.devices {
        d.add_device(&mut *policy, spec)?;
    }
    let mut changes = cfg.changes.clone();
    changes.sort_by_key(|c| c.at_frame);
    let state = DriverState {
        policy,
        d,
        changes,
        deadline_ns: cfg.deadline_ns,
        ingest_done: 0,
        fatal: None,
    };
    tx.install(state, &rx);
    let mut drain_since: Option<Nanos> = None;
    let ended: Result<(), StationError> = loop {
        let wait = tx
            .with_state(|st| st.policy.next_timeout())
            .flatten()
            .map_or(TICK_NS, |t| t.saturating_sub(now_ns()))
            .min(TICK_NS);
        // After the install every report is delivered on its sender's thread; the
        // inbox only wakes this thread for the timers.
        let msg = match rx.recv_timeout(Duration::from_nanos(wait)) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break Ok(()),
        };
        let step = tx.with_state(|st| {
            match msg {
                Some(m) => st.deliver(m),
                None => st.tick(),
            }
            if let Some(e) = st.fatal.take() {
                return Some(Err(e));
            }
            if st.ingest_done < cfg.rus {
                return None;
            }
            let now = now_ns();
            let since = *drain_since.get_or_insert(now);
            if st.d.frames.is_empty() {
                return Some(Ok(()));
            }
            if now.saturating_sub(since) > cfg.drain_timeout_ns {
                let open: Vec<FrameId> = st.d.frames.keys().copied().collect();
                st.d.out.notes.push(format!(
                    "{} frames still open {} ms after the input ended: failed",
                    open.len(),
                    cfg.drain_timeout_ns / 1_000_000
                ));
                for f in open {
                    st.d.finish(
                        f,
                        FrameFate::Failed,
                        now,
                        Some("unfinished when the run ended".into()),
                    );
                }
                return Some(Ok(()));
            }
            None
        });
        if let Some(end) = step.flatten() {
            break end;
        }
    };
    // Reports from now on go to the inbox (closed below) and are ignored.
    let Some(DriverState { mut d, .. }) = tx.uninstall() else {
        return Err(StationError::Panicked("scheduler state"));
    };
    d.checker = None;
    // Workers blocked on a full inbox must see it closed before they are joined.
    drop(rx);
    for dev in d.devices.drain(..).flatten() {
        dev.shutdown();
    }
    ended?;
    let (checked, payloads) = checker
        .join()
        .map_err(|_| StationError::Panicked("truth checker"))?;
    d.out.inbox_full_waits = d.tx.full_waits();
    if d.out.inbox_full_waits > 0 {
        d.out.notes.push(format!(
            "scheduler inbox full ({} messages): senders waited {} times (backpressure)",
            super::DRIVER_INBOX_CAPACITY,
            d.out.inbox_full_waits
        ));
    }
    if d.out.checker_full_waits > 0 {
        d.out.notes.push(format!(
            "truth checker behind ({CHECKER_QUEUE_CAPACITY} frames queued): the scheduler waited {} times",
            d.out.checker_full_waits
        ));
    }
    for r in checked {
        d.report.frame(r);
    }
    let mut out = d.out;
    d.report.inbox_full_waits = out.inbox_full_waits;
    d.report.checker_full_waits = out.checker_full_waits;
    out.report = d.report;
    out.payloads = payloads;
    Ok(out)
}

struct Driver {
    devices: Vec<Option<Box<dyn Executor>>>,
    /// What each device id was started from (a rejoin restarts it).
    specs: Vec<DeviceSpec>,
    calibration: Option<Arc<Calibration>>,
    frames: FxHashMap<FrameId, Live>,
    report: ReportBuilder,
    uplink_bits: u64,
    out: DriverOutput,
    checker: Option<SyncSender<CheckJob>>,
    ctx: Arc<KernelContext>,
    tx: DriverSender,
    queue_capacity: usize,
    keep_payloads: bool,
}

impl Driver {
    fn add_device(
        &mut self,
        policy: &mut dyn Policy,
        spec: &DeviceSpec,
    ) -> Result<(), StationError> {
        let id = self.devices.len() as DeviceId;
        let name = spec.name();
        let env = ExecutorEnv {
            ctx: self.ctx.clone(),
            queue_capacity: self.queue_capacity,
            sink: CompletionSink::new(id, self.tx.clone()),
            calibrated: self.calibration.as_ref().and_then(|c| c.profile_for(&name)),
        };
        let dev = spec.start(id, env)?;
        self.out.notes.extend(dev.notes());
        let profile = dev.profile();
        policy.add_device(now_ns(), id, profile);
        self.out.device_costs.push(DeviceCostLabel {
            device: id,
            name,
            units: profile.units,
            costs: profile.source,
        });
        self.devices.push(Some(dev));
        self.specs.push(spec.clone());
        self.out.device_instrs.push(0);
        Ok(())
    }

    fn change(
        &mut self,
        policy: &mut dyn Policy,
        now: Nanos,
        action: &DeviceAction,
    ) -> Result<(), StationError> {
        match action {
            DeviceAction::Add(spec) => self.add_device(policy, spec),
            DeviceAction::Rejoin(old) => {
                let Some(spec) = self.specs.get(*old as usize).cloned() else {
                    self.out
                        .notes
                        .push(format!("rejoin device {old}: no such device (ignored)"));
                    return Ok(());
                };
                if self.devices[*old as usize].is_some() {
                    self.out
                        .notes
                        .push(format!("rejoin device {old}: it never left (ignored)"));
                    return Ok(());
                }
                self.add_device(policy, &spec)?;
                self.out.notes.push(format!(
                    "device {old} rejoined as device {}",
                    self.devices.len() - 1
                ));
                Ok(())
            }
            DeviceAction::Remove(id) => {
                match self.devices.get_mut(*id as usize).and_then(Option::take) {
                    Some(dev) => {
                        let dropped = dev.remove();
                        self.out.device_removals += 1;
                        self.out.notes.push(format!("device {id} removed ({dropped} queued instructions dropped for rescheduling)"));
                        policy.remove_device(now, *id);
                        // Its workers finish their current instruction and exit; the
                        // join happens off this thread so scheduling goes on.
                        std::thread::spawn(move || dev.shutdown());
                    }
                    None => self
                        .out
                        .notes
                        .push(format!("remove device {id}: no such device (ignored)")),
                }
                Ok(())
            }
        }
    }

    /// Ask the policy for dispatches until it has none, then take its events.
    /// Handling an event does not call the policy, so there is nothing to poll for
    /// after them: a second round only asked the policy again (16x4 at 2 ms frames:
    /// 2.8 -> 1.95 polls and 2.5 -> 1.9 us of pump per delivered message).
    fn pump(&mut self, policy: &mut dyn Policy) {
        while let Some(disp) = policy.poll_dispatch(now_ns()) {
            let Some(live) = self.frames.get(&disp.instr.frame) else {
                policy.completed(
                    now_ns(),
                    disp.instr,
                    disp.device,
                    now_ns(),
                    Err(InstrError::FrameGone),
                );
                continue;
            };
            let job = Job {
                instr: disp.instr,
                slot: live.slot.clone(),
            };
            let dev = self
                .devices
                .get(disp.device as usize)
                .and_then(Option::as_ref);
            if let Some(verdict) = dev.and_then(|dev| dev.complete_inline(&job)) {
                self.out.dispatches += 1;
                let now = now_ns();
                self.completed(policy, now, disp.device, disp.instr, (now, now), verdict);
                continue;
            }
            let err = match dev {
                Some(dev) => match dev.submit(job, disp.low_priority, disp.after) {
                    Ok(()) => {
                        self.out.dispatches += 1;
                        None
                    }
                    Err(Refused {
                        reason: SubmitError::Full,
                        ..
                    }) => Some(InstrError::QueueFull {
                        device: disp.device,
                        capacity: self.queue_capacity,
                    }),
                    Err(Refused {
                        reason: SubmitError::Removed,
                        ..
                    }) => Some(InstrError::DeviceRemoved(disp.device)),
                },
                None => Some(InstrError::NoDevice(disp.device)),
            };
            if let Some(e) = err {
                let now = now_ns();
                policy.completed(now, disp.instr, disp.device, now, Err(e));
            }
        }
        while let Some(ev) = policy.poll_event() {
            match ev {
                EngineEvent::FrameDone { frame, outcome, .. } => {
                    let (fate, reason) = match outcome {
                        FrameOutcome::Completed => (FrameFate::Completed, None),
                        FrameOutcome::DeadlineMissed => (
                            FrameFate::Missed,
                            Some("deadline missed (NACK)".to_string()),
                        ),
                        FrameOutcome::Rejected => (
                            FrameFate::Rejected,
                            Some("frame window full (overload)".to_string()),
                        ),
                        FrameOutcome::Failed(why) => (FrameFate::Failed, Some(why)),
                    };
                    self.finish(frame, fate, now_ns(), reason);
                }
                EngineEvent::Rescheduled { .. } => self.out.rescheduled += 1,
            }
        }
    }

    /// Account a live device's completion of `instr` (run from `ran.0` to `ran.1`)
    /// and hand it to the policy.
    fn completed(
        &mut self,
        policy: &mut dyn Policy,
        now: Nanos,
        device: DeviceId,
        instr: Instr,
        ran: (Nanos, Nanos),
        result: Result<(), InstrError>,
    ) {
        self.out.device_instrs[device as usize] += 1;
        self.report.stage(instr.opcode, ran.1.saturating_sub(ran.0));
        policy.completed(now, instr, device, ran.0, result);
    }

    /// `now` after the run's first fronthaul packet (0 before it), for frame records.
    fn since_first_arrival(&self, now: Nanos) -> Nanos {
        now.saturating_sub(self.out.first_arrival.unwrap_or(now))
    }

    fn record(&mut self, r: FrameRecord) {
        self.out.last_decision = self.out.last_decision.max(now_ns());
        self.report.frame(r);
    }

    /// Close a frame: completed frames with a truth go to the checker.
    fn finish(&mut self, frame: FrameId, fate: FrameFate, now: Nanos, reason: Option<String>) {
        let Some(live) = self.frames.remove(&frame) else {
            return;
        };
        let record = FrameRecord {
            frame,
            ru: live.ru,
            fate,
            latency_ns: now.saturating_sub(live.arrival),
            decided_ns: self.since_first_arrival(now),
            decoded_ok: None,
            uplink_bits: if fate == FrameFate::Completed {
                self.uplink_bits
            } else {
                0
            },
            reason,
        };
        self.out.last_decision = self.out.last_decision.max(now);
        let check_it = live.truth.is_some() || self.keep_payloads;
        match (fate, live.truth, &self.checker) {
            (FrameFate::Completed, truth, Some(check)) if check_it => {
                let job = CheckJob {
                    record,
                    slot: live.slot,
                    truth,
                };
                let unsent = match check.try_send(job) {
                    Ok(()) => None,
                    Err(TrySendError::Full(job)) => {
                        self.out.checker_full_waits += 1;
                        check.send(job).err().map(|e| e.0)
                    }
                    Err(TrySendError::Disconnected(job)) => Some(job),
                };
                if let Some(job) = unsent {
                    self.report.frame(job.record);
                }
            }
            _ => self.report.frame(record),
        }
    }
}
