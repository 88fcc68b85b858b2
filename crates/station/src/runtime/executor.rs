//! The executor contract: what the scheduler thread needs from any device that runs
//! station instructions (a CPU worker pool here, a CUDA GPU in `radiohost-gpu`).
//!
//! The trait lives in `station` and `gpu` depends on `station` (not the other way
//! round), so the station builds without CUDA and the GPU crate plugs in through an
//! [`ExecutorFactory`] inside a [`DeviceSpec::External`].
//!
//! An executor offers a [`DeviceProfile`] (its resources and each opcode's cost on
//! it), takes jobs through [`Executor::submit`] into a bounded queue (refusing when
//! full or removed, handing the job back), reports every job it ran through its
//! [`CompletionSink`], and reports its own loss with [`CompletionSink::failed`]: the
//! driver then removes it and the policy re-plans its work.

use std::fmt;
use std::sync::Arc;

use crate::costs::DeviceProfile;
use crate::engine::InstrError;
use crate::isa::{DeviceId, Instr, Nanos};
use crate::kernels::{FrameSlot, KernelContext};
use crate::pool::Lease;

use super::device::CpuSpec;
use super::{DriverMsg, DriverSender, StationError};

/// One unit of work sent to a device: an instruction and the frame buffers it reads
/// and writes (held until the job is dropped, so a late write from a removed device
/// never lands in another frame).
pub struct Job {
    pub instr: Instr,
    pub slot: Lease<FrameSlot>,
}

/// Why a job was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("the work queue is full")]
    Full,
    #[error("the device was removed")]
    Removed,
}

/// A refused job, handed back with the reason.
pub struct Refused {
    pub reason: SubmitError,
    pub job: Job,
}

impl fmt::Debug for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Refused({:?}, {})", self.reason, self.job.instr)
    }
}

/// Why an executor left the pool on its own.
pub type DeviceFault = Arc<dyn std::error::Error + Send + Sync>;

/// Where an executor reports completions and its own failure.
#[derive(Clone)]
pub struct CompletionSink {
    device: DeviceId,
    tx: DriverSender,
}

impl CompletionSink {
    pub fn new(device: DeviceId, tx: DriverSender) -> Self {
        Self { device, tx }
    }

    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Report `instr` as finished; false when the scheduler is gone (stop working).
    pub fn completed(
        &self,
        instr: Instr,
        started: Nanos,
        finished: Nanos,
        result: Result<(), InstrError>,
    ) -> bool {
        self.tx
            .send(DriverMsg::Completed {
                device: self.device,
                instr,
                started,
                finished,
                result,
            })
            .is_ok()
    }

    /// Report the device as lost (it will be removed and its work re-planned). Call
    /// it from the executor's own threads, never from inside [`Executor::submit`]
    /// (that runs on the scheduler thread, which would wait on its own full inbox).
    pub fn failed(&self, fault: DeviceFault) -> bool {
        self.tx
            .send(DriverMsg::DeviceFailed {
                device: self.device,
                fault,
            })
            .is_ok()
    }
}

/// A running device.
pub trait Executor: Send {
    /// What it offers and what each opcode costs on it.
    fn profile(&self) -> &DeviceProfile;

    /// Queue `job` (at low priority, or behind the running `after` on this device).
    ///
    /// # Errors
    /// The queue is full or the device was removed; the job comes back.
    fn submit(&self, job: Job, low_priority: bool, after: Option<Instr>) -> Result<(), Refused>;

    /// The verdict on `job` when this device has nothing to run for it (a CPU's
    /// `Load` and downlink `Store` only order the DAG): the driver then completes it
    /// at once, on its own thread, instead of a [`Executor::submit`] and a
    /// completion round trip that cost more than the instruction. `None` (the
    /// default): submit it.
    fn complete_inline(&self, _job: &Job) -> Option<Result<(), InstrError>> {
        None
    }

    /// Stop taking work and drop what is queued (the policy re-plans it); running
    /// instructions may still report, and the driver ignores them. Returns the number
    /// of jobs dropped.
    fn remove(&self) -> usize;

    /// Remove and wait for the device's threads to exit.
    fn shutdown(self: Box<Self>);

    /// Lines for the run report (thread setup, pinning problems).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What a device is started with.
pub struct ExecutorEnv {
    pub ctx: Arc<KernelContext>,
    /// Jobs queued at most (normal + low priority).
    pub queue_capacity: usize,
    pub sink: CompletionSink,
    /// Calibrated costs for this device, when a calibration is known; otherwise the
    /// executor measures or models its own (and labels them).
    pub calibrated: Option<DeviceProfile>,
}

/// Starts a device of a kind the station crate does not know (a GPU).
pub trait ExecutorFactory: Send + Sync + fmt::Debug {
    /// Its name in `--devices` syntax (e.g. `gpu:0`).
    fn name(&self) -> String;

    /// Start the device as `id`.
    ///
    /// # Errors
    /// The device cannot be opened or its buffers allocated.
    fn start(&self, id: DeviceId, env: ExecutorEnv) -> Result<Box<dyn Executor>, StationError>;
}

/// How one device is built.
#[derive(Clone, Debug)]
pub enum DeviceSpec {
    /// Worker threads on this machine's cores.
    Cpu(CpuSpec),
    /// A device another crate provides (a CUDA GPU).
    External(Arc<dyn ExecutorFactory>),
}

impl DeviceSpec {
    /// A CPU device of `workers` threads pinned round robin to `cores` (none: no pinning).
    pub fn cpu(workers: usize, cores: Vec<usize>) -> Self {
        DeviceSpec::Cpu(CpuSpec {
            workers,
            cores,
            spin: false,
        })
    }

    /// Split `cores` into `devices` CPU devices of `workers_per_device` workers each,
    /// cores dealt round robin (a 2-core machine split into several devices gives the
    /// fragmented parallelism the planner has to cope with).
    pub fn split(devices: usize, workers_per_device: usize, cores: &[usize]) -> Vec<DeviceSpec> {
        (0..devices)
            .map(|d| {
                let pinned = if cores.is_empty() {
                    Vec::new()
                } else {
                    (0..workers_per_device)
                        .map(|w| cores[(d * workers_per_device + w) % cores.len()])
                        .collect()
                };
                DeviceSpec::cpu(workers_per_device, pinned)
            })
            .collect()
    }

    /// Its name in `--devices` syntax: `cpu:N` (N workers) or the factory's.
    pub fn name(&self) -> String {
        match self {
            DeviceSpec::Cpu(c) => format!("cpu:{}", c.workers),
            DeviceSpec::External(f) => f.name(),
        }
    }

    /// CPU worker threads it takes from this machine (0 for an external device).
    pub fn cpu_workers(&self) -> usize {
        match self {
            DeviceSpec::Cpu(c) => c.workers,
            DeviceSpec::External(_) => 0,
        }
    }

    /// Start it as device `id`.
    ///
    /// # Errors
    /// Threads, scratch memory or the external device could not be set up.
    pub fn start(&self, id: DeviceId, env: ExecutorEnv) -> Result<Box<dyn Executor>, StationError> {
        match self {
            DeviceSpec::Cpu(c) => Ok(Box::new(super::device::CpuDevice::start(id, c, env)?)),
            DeviceSpec::External(f) => f.start(id, env),
        }
    }
}
