//! The station's [`Executor`] on a CUDA GPU: `--devices gpu:K`.
//!
//! One thread per GPU takes jobs from a bounded queue and runs each instruction on
//! the device in the order the policy dispatched it (the policy only dispatches an
//! instruction whose predecessors committed), waiting for its completion event:
//!
//! * `Load` copies the symbol from the frame slot's host staging buffer into the GPU
//!   frame slot's pinned buffer, then to the device;
//! * compute opcodes run their NVRTC kernels on the GPU frame slot;
//! * the uplink `Store` brings the decoded bits back into the host frame slot, and
//!   each downlink `Store` its symbol's transmitted samples, so the station checks
//!   both against the truth exactly as it does a CPU device's.
//!
//! A frame's intermediate data stays on the GPU that ran its `Load`s, so a GPU
//! executor runs whole frames: the station places each frame whole on one GPU or on
//! the CPU devices (`radiohost_station::runtime::placement`), at most
//! [`GPU_FRAME_SLOTS`] at once on a GPU. A frame keeps its GPU frame slot while it
//! lives; a slot is reused once its frame has ended everywhere (no one else holds
//! the frame's host buffers). Costs: the SMs each opcode
//! needs come from this device's occupancy table ([`GpuDevice::sm_need`], what `gpu
//! describe` prints); latencies from a calibration of this GPU when one is given,
//! else from the cost model, labelled modelled.
//!
//! A CUDA error that loses the device is reported through
//! [`CompletionSink::failed`]: the station removes the GPU and accounts for its
//! frames.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use radiohost_iq::Ci16;
use radiohost_station::costs::{DeviceProfile, OpcodeCost};
use radiohost_station::engine::InstrError;
use radiohost_station::isa::{DeviceId, DeviceKind, FrameId, Instr, Nanos, Opcode};
use radiohost_station::kernels::slot::{read, write};
use radiohost_station::kernels::{FrameSlot, KernelContext};
use radiohost_station::pool::Lease;
use radiohost_station::runtime::{
    now_ns, CompletionSink, Executor, ExecutorEnv, ExecutorFactory, Job, Refused, StationError,
    SubmitError,
};
use radiohost_station::sim::CostModel;

use crate::describe::ExecutorTable;
use crate::device::probe_driver;
use crate::{GpuDevice, GpuError, GpuExecutor};

/// Frames a GPU executor holds at once: as many as the station places on one
/// whole-frame device.
pub const GPU_FRAME_SLOTS: usize = radiohost_station::runtime::WHOLE_FRAME_WINDOW;

/// Starts the GPU executor of one CUDA device.
#[derive(Debug)]
pub struct GpuExecutorFactory {
    ordinal: usize,
}

impl GpuExecutorFactory {
    /// Check that a CUDA driver is present and has GPU `ordinal`.
    ///
    /// # Errors
    /// No driver, or fewer GPUs than `ordinal + 1`.
    pub fn probe(ordinal: usize) -> Result<Self, GpuError> {
        let info = probe_driver()?;
        if ordinal >= info.devices.len() {
            return Err(GpuError::Config(format!(
                "GPU {ordinal} does not exist: the driver lists {} GPU(s)",
                info.devices.len()
            )));
        }
        Ok(Self { ordinal })
    }
}

/// The costs the scoreboard charges on `dev`: its occupancy table's SMs per opcode,
/// latencies from `calibrated` (this GPU measured) or the cost model.
pub fn gpu_profile(
    dev: &GpuDevice,
    ctx: &KernelContext,
    calibrated: Option<&DeviceProfile>,
) -> Result<DeviceProfile, GpuError> {
    let table = dev.executor_table(&ctx.cfg, &ctx.shape)?;
    Ok(profile_from_table(&table, dev.sm_budget(), ctx, calibrated))
}

/// The profile of a GPU with `units` SMs whose occupancy table is `table`: each
/// opcode needs the SMs the table says (at least 1, at most `units`); latencies
/// from `calibrated`, else the cost model's (labelled modelled).
fn profile_from_table(
    table: &ExecutorTable,
    units: u32,
    ctx: &KernelContext,
    calibrated: Option<&DeviceProfile>,
) -> DeviceProfile {
    let base = match calibrated {
        Some(p) => p.clone(),
        None => DeviceProfile::modelled(
            DeviceKind::Gpu,
            units,
            &CostModel::default(),
            &ctx.shape,
            ctx.cfg.fft_size,
        ),
    };
    let mut p = DeviceProfile { units, ..base };
    for op in Opcode::ALL {
        let need = table.sm_need(op).clamp(1, units.max(1));
        let latency_ns = p.cost(op).latency_ns;
        p = p.with_cost(op, OpcodeCost { need, latency_ns });
    }
    p
}

impl ExecutorFactory for GpuExecutorFactory {
    fn name(&self) -> String {
        format!("gpu:{}", self.ordinal)
    }

    fn start(&self, id: DeviceId, env: ExecutorEnv) -> Result<Box<dyn Executor>, StationError> {
        let fail = |e: GpuError| StationError::Executor {
            device: id,
            name: self.name(),
            source: Arc::new(e),
        };
        let dev = Arc::new(GpuDevice::open(self.ordinal, None).map_err(fail)?);
        let profile = gpu_profile(&dev, &env.ctx, env.calibrated.as_ref()).map_err(fail)?;
        let exec = GpuExecutor::new(dev.clone(), &env.ctx.cfg, &env.ctx.shape, GPU_FRAME_SLOTS)
            .map_err(fail)?;
        let (tx, rx) = mpsc::sync_channel::<Job>(env.queue_capacity.max(1));
        let removed = Arc::new(AtomicBool::new(false));
        let worker = {
            let (ctx, sink, removed) = (env.ctx.clone(), env.sink.clone(), removed.clone());
            std::thread::Builder::new()
                .name(format!("station-gpu{}", self.ordinal))
                .spawn(move || gpu_loop(exec, &dev, &ctx, &rx, &sink, &removed))
                .map_err(|source| StationError::Spawn {
                    thread: "GPU executor",
                    source,
                })?
        };
        Ok(Box::new(GpuStationExecutor {
            profile,
            tx: Some(tx),
            removed,
            worker: Some(worker),
        }))
    }
}

/// A running GPU executor.
pub struct GpuStationExecutor {
    profile: DeviceProfile,
    tx: Option<SyncSender<Job>>,
    removed: Arc<AtomicBool>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Executor for GpuStationExecutor {
    fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    fn submit(&self, job: Job, _low_priority: bool, _after: Option<Instr>) -> Result<(), Refused> {
        // One in-order queue: low priority and coalescing change nothing here.
        let Some(tx) = self
            .tx
            .as_ref()
            .filter(|_| !self.removed.load(Ordering::Acquire))
        else {
            return Err(Refused {
                reason: SubmitError::Removed,
                job,
            });
        };
        tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(job) => Refused {
                reason: SubmitError::Full,
                job,
            },
            TrySendError::Disconnected(job) => Refused {
                reason: SubmitError::Removed,
                job,
            },
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

fn gpu_loop(
    mut exec: GpuExecutor,
    dev: &GpuDevice,
    ctx: &KernelContext,
    rx: &Receiver<Job>,
    sink: &CompletionSink,
    removed: &AtomicBool,
) {
    let mut slots = SlotRing::new(GPU_FRAME_SLOTS);
    for job in rx {
        if removed.load(Ordering::Acquire) {
            // Dropped: the policy has re-planned it.
            continue;
        }
        let started = now_ns();
        let result = slots
            .assign(job.instr.frame, &job.slot)
            .and_then(|slot| run_one(&mut exec, dev, ctx, &job, slot));
        let finished = now_ns();
        let instr = job.instr;
        drop(job);
        if report(sink, removed, instr, started, finished, result) == Next::Stop {
            return;
        }
    }
}

/// Whether the executor thread goes on after a report.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Go,
    Stop,
}

/// Report one instruction's outcome: done, failed (the policy retries it), or the
/// device lost (it stops taking work and reports itself failed; the station removes
/// it and re-plans its frames). Stop also when the scheduler is gone.
fn report(
    sink: &CompletionSink,
    removed: &AtomicBool,
    instr: Instr,
    started: Nanos,
    finished: Nanos,
    result: Result<(), GpuError>,
) -> Next {
    let delivered = match result {
        Ok(()) => sink.completed(instr, started, finished, Ok(())),
        Err(e) if e.is_device_lost() => {
            removed.store(true, Ordering::Release);
            sink.failed(Arc::new(e));
            return Next::Stop;
        }
        Err(e) => sink.completed(
            instr,
            started,
            finished,
            Err(InstrError::Executor(Arc::new(e))),
        ),
    };
    if delivered {
        Next::Go
    } else {
        Next::Stop
    }
}

/// Run one instruction on the GPU and wait for it.
fn run_one(
    exec: &mut GpuExecutor,
    dev: &GpuDevice,
    ctx: &KernelContext,
    job: &Job,
    slot: usize,
) -> Result<(), GpuError> {
    let instr = job.instr;
    let sym = usize::from(instr.symbol);
    match instr.opcode {
        Opcode::Load => {
            let rx = ctx
                .shape
                .received_symbols()
                .iter()
                .position(|&s| s == sym)
                .ok_or_else(|| GpuError::Config(format!("{instr}: not a received symbol")))?;
            let staged = read(&job.slot.staging[rx]);
            let (samples, at) = staged.view();
            exec.set_input_symbol(slot, sym, samples, at)?;
        }
        Opcode::Encode if instr.part == 0 => {
            // The frame's downlink payload, staged once per symbol before its encoders.
            let payload = read(&job.slot.downlink_payload);
            let d = ctx
                .shape
                .downlink_symbols
                .iter()
                .position(|&s| s == sym)
                .ok_or_else(|| GpuError::Config(format!("{instr}: not a downlink symbol")))?;
            let per_symbol = ctx.cfg.blocks_per_symbol * ctx.cfg.block_payload_bits();
            for (user, bits) in payload.iter().enumerate() {
                exec.set_downlink_payload(slot, d, user, &bits[d * per_symbol..][..per_symbol])?;
            }
        }
        _ => {}
    }
    let done = exec.launch(slot, &instr, false, &[])?;
    dev.wait_event(&done)?;
    if is_uplink_store(ctx, &instr) {
        copy_uplink_back(exec, ctx, job, slot)?;
    } else if instr.opcode == Opcode::Store {
        if let Some(pos) = exec.layout().downlink_slot(sym) {
            let mut out = write(&job.slot.tx_out[pos]);
            downlink_symbol_to_host(exec.tx_samples(slot)?, &ctx.cfg, sym, &mut out[..])?;
        }
    }
    Ok(())
}

/// Which GPU frame slot each live frame uses. A frame keeps its slot until it has
/// ended: the ring holds a handle on each frame's host buffers, and a slot whose
/// handle no one else holds (the driver, the checker and every job have let go)
/// belongs to a finished frame and is free again.
struct SlotRing {
    slots: Vec<Option<(FrameId, Lease<FrameSlot>)>>,
}

impl SlotRing {
    fn new(n: usize) -> Self {
        Self {
            slots: (0..n).map(|_| None).collect(),
        }
    }

    /// The slot of `frame`, taking a free one on its first instruction.
    fn assign(&mut self, frame: FrameId, host: &Lease<FrameSlot>) -> Result<usize, GpuError> {
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|(f, _)| *f == frame))
        {
            return Ok(i);
        }
        // Only the ring's handle left: that frame ended everywhere else.
        let free = self.slots.iter().position(|s| match s {
            None => true,
            Some((_, lease)) => lease.holders() == 1,
        });
        let i = free.ok_or_else(|| {
            GpuError::Config(format!(
                "frame {frame}: all {} GPU frame slots hold live frames",
                self.slots.len()
            ))
        })?;
        self.slots[i] = Some((frame, host.clone()));
        Ok(i)
    }
}

/// Copy downlink symbol `sym`'s transmitted samples out of the GPU's host-side frame
/// buffer (int16 pairs, antenna-major, `frame_len` samples per antenna) into the
/// host frame slot's `Store` output (`[antenna][sample]`, one symbol with CP), the
/// layout `FrameSlot::assemble_downlink` reads.
fn downlink_symbol_to_host(
    tx: &[i16],
    cfg: &radiohost_phy::FrameConfig,
    sym: usize,
    out: &mut [Ci16],
) -> Result<(), GpuError> {
    let (fl, sl) = (cfg.frame_len(), cfg.symbol_len());
    if tx.len() < 2 * cfg.antennas * fl || out.len() < cfg.antennas * sl || (sym + 1) * sl > fl {
        return Err(GpuError::Config(format!(
            "downlink symbol {sym}: {} transmitted samples or {} output samples do not fit {} antennas x {fl}",
            tx.len() / 2,
            out.len(),
            cfg.antennas
        )));
    }
    for m in 0..cfg.antennas {
        let src = &tx[2 * (m * fl + sym * sl)..][..2 * sl];
        for (o, iq) in out[m * sl..][..sl].iter_mut().zip(src.chunks_exact(2)) {
            *o = Ci16::new(iq[0], iq[1]);
        }
    }
    Ok(())
}

/// The uplink results' `Store` (symbol 0), as the station's frame program names it.
fn is_uplink_store(ctx: &KernelContext, instr: &Instr) -> bool {
    instr.opcode == Opcode::Store
        && instr.symbol == 0
        && !ctx.shape.uplink_symbols.is_empty()
        && !ctx.shape.downlink_symbols.contains(&0)
}

/// Decoded bits and block verdicts into the host frame slot (CPU layout: per user,
/// uplink symbols' payload bits one after the other).
fn copy_uplink_back(
    exec: &GpuExecutor,
    ctx: &KernelContext,
    job: &Job,
    slot: usize,
) -> Result<(), GpuError> {
    let cfg = &ctx.cfg;
    let res = exec.uplink_results(slot)?;
    let (blocks, pb) = (cfg.blocks_per_symbol, cfg.block_payload_bits());
    let kbits = res.bits.len() / res.status.len().max(1);
    let mut payload = write(&job.slot.uplink_payload);
    let mut verdicts = write(&job.slot.uplink_blocks);
    for u in 0..ctx.shape.uplink_symbols.len() {
        for user in 0..cfg.users {
            for b in 0..blocks {
                let i = (u * cfg.users + user) * blocks + b;
                let st = res
                    .block(i)
                    .ok_or_else(|| GpuError::Config(format!("decoded block {i} missing")))?;
                let bits = &res.bits[i * kbits..][..pb];
                payload[user][(u * blocks + b) * pb..][..pb].copy_from_slice(bits);
                verdicts[user][u * blocks + b] = radiohost_phy::coding::BlockResult {
                    crc_ok: st.crc_ok,
                    iterations: st.iterations,
                };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_station::costs::CostSource;

    /// Without a driver the factory says why, and `--devices gpu:K` fails with it.
    #[test]
    fn probing_without_a_driver_says_why() {
        match GpuExecutorFactory::probe(0) {
            Ok(f) => eprintln!("CUDA driver present: {} can be started", f.name()),
            Err(e) => {
                let text = e.to_string();
                assert!(text.starts_with("no CUDA driver found"), "{text}");
                eprintln!("SKIPPED: no CUDA driver ({text})");
            }
        }
        if let Ok(info) = probe_driver() {
            let n = info.devices.len();
            let e = GpuExecutorFactory::probe(n).unwrap_err().to_string();
            assert!(e.contains("does not exist"), "{e}");
        }
    }

    fn context(name: &str) -> Arc<KernelContext> {
        let path = format!("{}/../phy/configs/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let cfg = radiohost_phy::FrameConfig::load(std::path::Path::new(&path)).unwrap();
        Arc::new(KernelContext::new(&cfg, 2).unwrap())
    }

    /// The GPU's transmitted frame copied back symbol by symbol is exactly what the
    /// station's checker assembles and sends to the emulated users.
    #[test]
    fn downlink_copy_back_rebuilds_the_transmitted_frame() {
        let ctx = context("8x2");
        let cfg = &ctx.cfg;
        let (m, fl) = (cfg.antennas, cfg.frame_len());
        // The GPU's host buffer: every sample distinct, downlink symbols or not.
        let tx: Vec<i16> = (0..2 * m * fl)
            .map(|i| (i % 30_011) as i16 - 15_000)
            .collect();
        let slot = FrameSlot::new(&ctx);
        let dl: Vec<usize> = ctx
            .shape
            .downlink_reference
            .iter()
            .chain(&ctx.shape.downlink_symbols)
            .copied()
            .collect();
        assert!(!dl.is_empty(), "8x2 has downlink symbols");
        let layout = crate::layout::FrameLayout::new(cfg, &ctx.shape).unwrap();
        for &sym in &dl {
            let pos = layout.downlink_slot(sym).unwrap();
            downlink_symbol_to_host(&tx, cfg, sym, &mut write(&slot.tx_out[pos])[..]).unwrap();
        }
        let mut frame = vec![Ci16::default(); m * fl];
        slot.assemble_downlink(&ctx, &mut frame);
        let sl = cfg.symbol_len();
        for a in 0..m {
            for t in 0..fl {
                let want = if dl.contains(&(t / sl)) {
                    let i = 2 * (a * fl + t);
                    Ci16::new(tx[i], tx[i + 1])
                } else {
                    Ci16::default()
                };
                assert_eq!(frame[a * fl + t], want, "antenna {a} sample {t}");
            }
        }
        // A buffer of the wrong size is refused, not read past.
        let err = downlink_symbol_to_host(&tx[..10], cfg, dl[0], &mut write(&slot.tx_out[0])[..]);
        assert!(err.unwrap_err().to_string().contains("do not fit"));
    }

    #[test]
    fn a_frame_keeps_its_gpu_slot_until_it_ends_everywhere() {
        let ctx = context("8x2");
        let pool = radiohost_station::runtime::frame_pool(
            &ctx,
            4,
            radiohost_station::pool::Exhaustion::Grow { max: 8 },
        );
        let mut ring = SlotRing::new(2);
        let (a, b, c) = (
            pool.acquire().unwrap(),
            pool.acquire().unwrap(),
            pool.acquire().unwrap(),
        );
        let sa = ring.assign(10, &a).unwrap();
        let sb = ring.assign(11, &b).unwrap();
        assert_ne!(sa, sb);
        assert_eq!(ring.assign(10, &a).unwrap(), sa, "same frame, same slot");
        // Both frames live (the driver holds their buffers): no slot for a third.
        let err = ring.assign(12, &c).unwrap_err().to_string();
        assert!(
            err.contains("all 2 GPU frame slots hold live frames"),
            "{err}"
        );
        // Frame 10 ends: its slot goes to the next frame.
        drop(a);
        assert_eq!(ring.assign(12, &c).unwrap(), sa);
        assert_eq!(ring.assign(11, &b).unwrap(), sb);
    }

    fn h100_table(ctx: &KernelContext) -> ExecutorTable {
        let resources = crate::kernels::all_kernels()
            .map(|k| {
                let r = crate::describe::KernelResources {
                    registers: 64,
                    static_smem: 128,
                    max_threads: 1024,
                };
                (k, r)
            })
            .collect();
        let spec = crate::occupancy::GpuSpec::h100();
        ExecutorTable::new(&spec, &ctx.cfg, &ctx.shape, &resources).unwrap()
    }

    /// The scoreboard charges the occupancy table's SMs (what `gpu describe` prints)
    /// and a calibration's latencies, never the calibration's needs.
    #[test]
    fn the_cost_table_takes_sms_from_occupancy_and_latency_from_calibration() {
        let ctx = context("16x4");
        let table = h100_table(&ctx);
        let modelled = profile_from_table(&table, 132, &ctx, None);
        assert_eq!((modelled.kind, modelled.units), (DeviceKind::Gpu, 132));
        assert_eq!(modelled.source, CostSource::Modelled);
        for op in Opcode::ALL {
            assert_eq!(modelled.cost(op).need, table.sm_need(op).max(1), "{op}");
            assert!(modelled.cost(op).latency_ns > 0, "{op}");
        }
        let measured = modelled.clone().with_cost(
            Opcode::Zf,
            OpcodeCost {
                need: 99,
                latency_ns: 12_345,
            },
        );
        let measured = DeviceProfile {
            source: CostSource::Calibrated,
            ..measured
        };
        let p = profile_from_table(&table, 132, &ctx, Some(&measured));
        assert_eq!(p.source, CostSource::Calibrated);
        assert_eq!(p.cost(Opcode::Zf).latency_ns, 12_345);
        assert_eq!(p.cost(Opcode::Zf).need, table.sm_need(Opcode::Zf).max(1));
        // A GPU split to an 8-SM budget is never charged more than it has.
        let small = profile_from_table(&table, 8, &ctx, None);
        assert!(small.costs.iter().all(|c| (1..=8).contains(&c.need)));
        assert!(Opcode::ALL.iter().any(|&op| table.sm_need(op) > 8));
    }

    /// Done, failed (retried by the policy) and device lost (the executor stops and
    /// reports itself failed) reach the scheduler as such.
    #[test]
    fn failures_are_reported_as_instruction_errors_or_device_loss() {
        use cudarc::driver::sys::CUresult;
        use cudarc::driver::DriverError;
        use radiohost_station::runtime::{driver_channel, DriverMsg};
        let (tx, rx) = driver_channel();
        let sink = CompletionSink::new(3, tx);
        let removed = AtomicBool::new(false);
        let instr = Instr::new(7, 2, Opcode::Zf, 1);
        assert_eq!(report(&sink, &removed, instr, 1, 2, Ok(())), Next::Go);
        let bad = GpuError::Zf {
            subcarrier: 3,
            user: 1,
        };
        assert_eq!(report(&sink, &removed, instr, 1, 2, Err(bad)), Next::Go);
        let lost = GpuError::cuda(0, "zf", DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert_eq!(report(&sink, &removed, instr, 1, 2, Err(lost)), Next::Stop);
        assert!(
            removed.load(Ordering::Acquire),
            "a lost device takes no more work"
        );
        let msgs: Vec<DriverMsg> = rx.try_iter().collect();
        assert!(matches!(
            &msgs[..],
            [
                DriverMsg::Completed {
                    result: Ok(()),
                    device: 3,
                    ..
                },
                DriverMsg::Completed {
                    result: Err(InstrError::Executor(_)),
                    ..
                },
                DriverMsg::DeviceFailed { device: 3, .. },
            ]
        ));
        // The scheduler gone: the thread stops.
        drop(rx);
        assert_eq!(report(&sink, &removed, instr, 1, 2, Ok(())), Next::Stop);
    }

    #[test]
    fn the_executor_is_send() {
        fn send<T: Send>() {}
        send::<GpuStationExecutor>();
        send::<GpuExecutorFactory>();
    }
}
