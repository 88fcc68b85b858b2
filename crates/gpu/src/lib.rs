//! GPU executors for the station: every baseband opcode as CUDA kernels compiled at run
//! time by NVRTC, launched through cudarc (libcuda and libnvrtc are opened at run time,
//! so this crate builds and its non-GPU tests run on machines without CUDA).
//!
//! * [`kernels`]: the CUDA C sources and the constants they share with phy/ldpc;
//! * [`nvrtc`]: finding NVRTC (toolkit or PyPI) and compiling to PTX + CUBIN;
//! * [`ldpc_graph`]: radiohost-ldpc's base graphs lifted for the kernels;
//! * [`occupancy`]: resource tuple -> CTAs per SM -> SMs needed (pure Rust);
//! * [`describe`]: the launch geometry of every opcode for a frame shape (`sm_need`);
//! * [`device`]: [`GpuDevice`] (context, priority streams, modules, attributes);
//! * [`exec`]: per-frame device buffers allocated once and per-opcode `launch`.

pub mod describe;
pub mod device;
pub mod error;
pub mod exec;
pub mod kernels;
pub mod layout;
pub mod ldpc_graph;
pub mod nvrtc;
pub mod occupancy;
pub mod selftest;

pub use device::{probe_driver, GpuDevice};
pub use error::GpuError;
pub use exec::GpuExecutor;
