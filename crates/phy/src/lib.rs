//! Massive-MIMO baseband kernels and reference pipelines.
//!
//! Kernels (each usable on its own, allocation-free once constructed):
//! [`ofdm`] (batched FFT/IFFT, cyclic prefix), [`fft`] (power-of-two FFTs of 16
//! antennas at once, the front end's), [`csi`] (pilots, channel estimation),
//! [`zf`] (zero-forcing detector, per-subcarrier equalisation and precoding),
//! [`group_product`] (equalisation and precoding of a whole ZF group as one matrix
//! product), [`qam`] (modulation and max-log soft demodulation), [`scramble`] (NR
//! Gold sequence), [`crc`] (NR CRCs). [`simd`] picks the instruction set at run time.
//! LDPC comes from `radiohost-ldpc`.
//!
//! Around them: [`config`] (frame configuration files), [`generator`] (seeded data
//! generator with ground truth), [`uplink`] and [`downlink`] (reference pipelines
//! running a whole frame on one thread; the downlink is checked by emulated users),
//! and [`recording`] (SigMF export of generated frames).

pub mod bench;
pub mod channel;
pub mod coding;
pub mod config;
pub mod crc;
pub mod csi;
pub mod downlink;
pub mod evaluate;
pub mod fft;
pub mod frontend;
pub mod generator;
pub mod group_product;
pub mod ofdm;
pub mod qam;
pub mod recording;
pub mod scramble;
pub mod simd;
pub mod soft;
pub mod uplink;
pub mod zf;

pub use config::{ConfigError, FrameConfig};

/// Errors of the pipelines and generator.
#[derive(Debug, thiserror::Error)]
pub enum PhyError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("LDPC: {0}")]
    Ldpc(#[from] radiohost_ldpc::LdpcError),
    #[error("subcarrier {subcarrier}: {source}")]
    Zf {
        subcarrier: usize,
        source: zf::ZfError,
    },
    #[error("frame buffer has {got} samples but the configuration needs {expected} (antennas x frame length)")]
    SampleCount { expected: usize, got: usize },
    #[error("payload must be {users} users x {bits_per_user} bits")]
    PayloadSize { users: usize, bits_per_user: usize },
    #[error("channel realisation is {got:?} (antennas, users, subcarriers) but the configuration needs {expected:?}")]
    ChannelShape {
        expected: (usize, usize, usize),
        got: (usize, usize, usize),
    },
    #[error("{what} does not decode bit-exact against the generator's truth ({bit_errors} bit errors, {crc_failures} CRC failures): refusing to time it")]
    NotBitExact {
        what: &'static str,
        bit_errors: u64,
        crc_failures: u64,
    },
    #[error("recording: {0}")]
    Recording(String),
}
