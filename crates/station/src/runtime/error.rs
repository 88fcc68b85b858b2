//! Errors of the real-time station: setting a run up, starting its threads and
//! devices, and the radio units that feed it.

use std::io;

use crate::isa::DeviceId;
use crate::kernels::KernelError;
use crate::ru::air::UplinkAirError;

/// Why a station run could not be set up or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum StationError {
    #[error("the kernels cannot run this configuration: {0}; choose a configuration and a --parts count that divides its subcarriers")]
    Kernels(#[source] KernelError),
    #[error("could not generate the radio units' frames: {0}")]
    Frames(#[from] UplinkAirError),
    #[error("could not start the {thread} thread: {source}; raise the process thread limit (ulimit -u) or free memory")]
    Spawn {
        thread: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("device {device} worker {worker} could not start: {source}")]
    Worker {
        device: DeviceId,
        worker: usize,
        #[source]
        source: radiohost_rt::SpawnError,
    },
    #[error("device {device} worker {worker} has no scratch memory: {source}")]
    Scratch {
        device: DeviceId,
        worker: usize,
        #[source]
        source: KernelError,
    },
    #[error("fronthaul for radio unit {ru} could not open: {source}; use the ring transport if UDP sockets are refused")]
    Fronthaul {
        ru: u16,
        #[source]
        source: io::Error,
    },
    #[error("radio unit {ru} failed: {source}")]
    RadioUnit {
        ru: u16,
        #[source]
        source: io::Error,
    },
    #[error("device {device} ({name}) could not start: {source}")]
    Executor {
        device: DeviceId,
        name: String,
        #[source]
        source: super::DeviceFault,
    },
    #[error("the {0} thread panicked: a bug; rerun with RUST_BACKTRACE=1 and report it")]
    Panicked(&'static str),
}

impl From<KernelError> for StationError {
    fn from(e: KernelError) -> Self {
        StationError::Kernels(e)
    }
}
