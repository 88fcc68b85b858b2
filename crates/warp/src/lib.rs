//! WARPLab 7.4-compatible IQ buffer transport.
//!
//! * [`wire`]: the datagram codec (transport, command and sample headers), typed and
//!   panic-free on any input.
//! * [`node`]: a sans-IO emulated WARP v3 node (four RF buffers, READ_IQ, WRITE_IQ with
//!   checksum, trigger loopback).
//! * [`emulator`]: a driver that runs many emulated nodes behind paced link models.
//! * [`host`]: the host transport: read, write and trigger many nodes at once, with
//!   gap tracking, selective re-requests, stale-reply filtering and bounded retries.
//! * [`udp`]: UDP GSO sends and GRO receives, detected per socket at run time, with
//!   the one-datagram-per-syscall path as the fallback (both ends use it).

pub mod addressing;
pub mod app;
pub mod bench;
pub mod checksum;
pub mod emulator;
pub mod host;
mod mmsg;
pub mod node;
mod sockbuf;
pub mod udp;
pub mod wire;

pub use addressing::{Addressing, FramePayload};
pub use wire::{RfBuffer, WireError};
