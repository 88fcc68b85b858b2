//! Typed errors of the GPU executors. A station driver asks [`GpuError::is_device_lost`]
//! to decide whether to remove the device from the scoreboard and reschedule its
//! uncommitted instructions elsewhere.

use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;

/// Everything that can go wrong on the GPU side.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no CUDA driver found: {0}")]
    NoDriver(String),
    #[error("NVRTC unavailable: {0}")]
    NoNvrtc(#[from] crate::nvrtc::NvrtcLoadError),
    #[error("NVRTC failed on module `{module}` for {arch}: {message}")]
    Compile {
        module: &'static str,
        arch: String,
        message: String,
    },
    #[error("CUDA error on GPU {ordinal} during {during}: {name} (code {code}){}", if *.lost { "; the device is lost: remove it and reschedule its work" } else { "" })]
    Cuda {
        ordinal: usize,
        during: String,
        code: u32,
        name: String,
        lost: bool,
    },
    #[error("GPU {ordinal} has no device of that ordinal ({count} found)")]
    NoSuchDevice { ordinal: usize, count: usize },
    #[error("GPU {ordinal} has {sms} SMs; an SM budget of {budget} is not possible")]
    SmBudget {
        ordinal: usize,
        sms: u32,
        budget: u32,
    },
    #[error("unsupported configuration for the GPU kernels: {0}")]
    Config(String),
    #[error("instruction {0} does not belong to this frame shape (symbol or part out of range)")]
    BadInstr(String),
    #[error("zero-forcing failed at subcarrier {subcarrier}: user {user}'s channel is linearly dependent on the others (Gram matrix not positive definite)")]
    Zf { subcarrier: usize, user: usize },
    #[error(transparent)]
    Graph(#[from] crate::ldpc_graph::GraphError),
    #[error(transparent)]
    Occupancy(#[from] crate::occupancy::OccupancyError),
}

/// CUDA errors after which the context (and so the device, for this process) is
/// unusable: sticky kernel faults, hardware faults and a vanished device.
fn is_fatal(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUDA_ERROR_NO_DEVICE
            | CUDA_ERROR_DEVICE_UNAVAILABLE
            | CUDA_ERROR_DEINITIALIZED
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUDA_ERROR_SYSTEM_NOT_READY
            | CUDA_ERROR_UNKNOWN
    )
}

impl GpuError {
    /// A CUDA driver error during `during` on GPU `ordinal`.
    pub fn cuda(ordinal: usize, during: impl Into<String>, e: DriverError) -> Self {
        // The enum's own name: asking the driver (cuGetErrorName) needs libcuda.
        let name = format!("{:?}", e.0);
        GpuError::Cuda {
            ordinal,
            during: during.into(),
            code: e.0 as u32,
            name,
            lost: is_fatal(e.0),
        }
    }

    /// Whether the device must be removed from the pool (its context is unusable).
    pub fn is_device_lost(&self) -> bool {
        matches!(
            self,
            GpuError::Cuda { lost: true, .. } | GpuError::NoDriver(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_faults_mean_device_lost() {
        let lost = GpuError::cuda(
            0,
            "ldpc_decode",
            DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        );
        assert!(lost.is_device_lost());
        let text = lost.to_string();
        assert!(
            text.contains("GPU 0") && text.contains("ldpc_decode") && text.contains("700"),
            "{text}"
        );
        let oom = GpuError::cuda(1, "alloc", DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert!(!oom.is_device_lost());
        assert!(GpuError::NoDriver("x".into()).is_device_lost());
        assert!(!GpuError::Zf {
            subcarrier: 3,
            user: 1
        }
        .is_device_lost());
    }
}
