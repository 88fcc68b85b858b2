//! GPU executors for the station: every baseband opcode as CUDA kernels compiled at run
//! time by NVRTC, launched through cudarc (libcuda and libnvrtc are opened at run time,
//! so this crate builds and its non-GPU tests run on machines without CUDA).
//!
//! * [`kernels`]: the CUDA C sources and the constants they share with phy/ldpc;
//! * [`nvrtc`]: finding NVRTC (toolkit or PyPI) and compiling to PTX + CUBIN;
//! * [`nvrtc_lib`]: NVRTC's functions, looked up in the library [`nvrtc`] opened;
//! * [`ldpc_graph`]: radiohost-ldpc's base graphs lifted for the kernels;
//! * [`occupancy`]: resource tuple -> CTAs per SM -> SMs needed (pure Rust);
//! * [`describe`]: the launch geometry of every opcode for a frame shape (`sm_need`);
//! * [`device`]: [`GpuDevice`] (context, priority streams, modules, attributes);
//! * [`layout`]: where each instruction's data lives in a frame slot (GPU-free);
//! * [`exec`]: per-frame device buffers allocated once and per-opcode `launch`;
//! * [`selftest`]: GPU kernels against the CPU phy kernels on a generated frame;
//! * [`status`]: is a CUDA driver present, is NVRTC found (`radiohost gpu info`).
//!
//! How a station executor wraps it: open one [`GpuDevice`] per GPU (or
//! [`GpuDevice::split`] one GPU by SM budget) and register each with the policy as a
//! `DeviceKind::Gpu` of capacity [`GpuDevice::sm_budget`]; charge each dispatch
//! [`GpuDevice::sm_need`]; keep one [`GpuExecutor`] per device with a ring of frame
//! slots; on a `Dispatch`, call [`GpuExecutor::launch`] with `low_priority` set from
//! the dispatch and the completion events of the instruction's DAG predecessors
//! (`wait_for`), and poll or wait on the returned event to report `completed`. A
//! [`GpuError::is_device_lost`] error means `remove_device` (the policy reschedules).

pub mod bench;
pub mod describe;
pub mod device;
pub mod error;
pub mod exec;
#[cfg(test)]
mod kernel_mirror;
pub mod kernels;
pub mod layout;
pub mod ldpc_graph;
pub mod nvrtc;
pub mod nvrtc_lib;
pub mod occupancy;
pub mod selftest;
pub mod station;
pub mod status;

pub use device::{probe_driver, GpuDevice};
pub use error::GpuError;
pub use exec::GpuExecutor;

#[cfg(test)]
mod tests {
    /// A station runtime moves devices and executors into executor threads.
    #[test]
    fn executors_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::GpuDevice>();
        send_sync::<crate::GpuExecutor>();
        send_sync::<crate::GpuError>();
    }
}
