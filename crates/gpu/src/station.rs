//! The station's [`Executor`] on a CUDA GPU: `--devices gpu:K`.
//!
//! One thread per GPU takes jobs from a bounded queue and runs each instruction on
//! the device in the order the policy dispatched it (the policy only dispatches an
//! instruction whose predecessors committed), waiting for its completion event:
//!
//! * `Load` copies the symbol from the frame slot's host staging buffer into the GPU
//!   frame slot's pinned buffer, then to the device;
//! * compute opcodes run their NVRTC kernels on the GPU frame slot;
//! * the uplink `Store` brings the decoded bits back into the host frame slot, so the
//!   station checks them against the truth exactly as it does a CPU device's.
//!
//! A frame's intermediate data stays on the GPU that ran its `Load`s, so a GPU
//! executor runs whole frames: the station refuses a pool that mixes a GPU with
//! other devices (see `radiohost station run --devices`). Costs: the SMs each opcode
//! needs come from this device's occupancy table ([`GpuDevice::sm_need`], what `gpu
//! describe` prints); latencies from a calibration of this GPU when one is given,
//! else from the cost model, labelled modelled.
//!
//! A CUDA error that loses the device is reported through
//! [`CompletionSink::failed`]: the station removes the GPU and accounts for its
//! frames.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use radiohost_station::costs::{DeviceProfile, OpcodeCost};
use radiohost_station::engine::InstrError;
use radiohost_station::isa::{DeviceId, DeviceKind, FrameId, Instr, Opcode};
use radiohost_station::kernels::slot::{read, write};
use radiohost_station::kernels::KernelContext;
use radiohost_station::runtime::{
    now_ns, CompletionSink, Executor, ExecutorEnv, ExecutorFactory, Job, Refused, StationError,
    SubmitError,
};
use radiohost_station::sim::CostModel;

use crate::device::probe_driver;
use crate::{GpuDevice, GpuError, GpuExecutor};

/// Frames a GPU executor holds at once (slot = frame id modulo this).
pub const GPU_FRAME_SLOTS: usize = 16;

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
    let units = dev.sm_budget();
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
        let need = dev.sm_need(op, &ctx.cfg, &ctx.shape)?.max(1);
        let latency_ns = p.cost(op).latency_ns;
        p = p.with_cost(op, OpcodeCost { need, latency_ns });
    }
    Ok(p)
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
    let mut slots: HashMap<FrameId, usize> = HashMap::new();
    for job in rx {
        if removed.load(Ordering::Acquire) {
            // Dropped: the policy has re-planned it.
            continue;
        }
        let slot = (job.instr.frame % GPU_FRAME_SLOTS as u64) as usize;
        slots.insert(job.instr.frame, slot);
        let started = now_ns();
        let result = run_one(&mut exec, dev, ctx, &job, slot);
        let finished = now_ns();
        let instr = job.instr;
        drop(job);
        match result {
            Ok(()) => {
                if !sink.completed(instr, started, finished, Ok(())) {
                    return;
                }
            }
            Err(e) if e.is_device_lost() => {
                removed.store(true, Ordering::Release);
                sink.failed(Arc::new(e));
                return;
            }
            Err(e) => {
                let err = InstrError::Executor(Arc::new(e));
                if !sink.completed(instr, started, finished, Err(err)) {
                    return;
                }
            }
        }
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
            exec.set_input_symbol(slot, sym, &read(&job.slot.staging[rx]))?;
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

    #[test]
    fn the_executor_is_send() {
        fn send<T: Send>() {}
        send::<GpuStationExecutor>();
        send::<GpuExecutorFactory>();
    }
}
