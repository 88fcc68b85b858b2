//! Radio units over the emulated air, the fronthaul that carries their samples to
//! the station, and the station's ingest of sample blocks from any radio.
//!
//! - [`wire`]: the fronthaul packet (a typed header — RU, frame, symbol, antenna,
//!   sample count — and ci16 payload) with a never-panicking parser.
//! - [`transport`]: loopback UDP or an in-process bounded ring of packet buffers.
//! - [`emulator`]: RUs sending frames received over the emulated air ([`air`],
//!   captured once into a bank) at the frame rate, one packet per antenna and
//!   received symbol, paced symbol by symbol.
//! - [`ingest`]: the station's receiving side: reassembles symbols into leased frame
//!   buffers and reports frame arrivals and `input_ready` to the driver.
//! - [`air`]: K users' uplink over the one emulated air (`testbed::air`) to the
//!   station's antennas: the source of the frames radio units send.
//! - [`blocks`]: the station's ingest of antenna sample blocks from any source (a
//!   radio's RX stream, the emulated air, a capture), and [`blocks::run_blocks`],
//!   a whole decode run over blocks.
//! - [`stream`]: one frame at a time from any radio's RX stream, as a block.

pub mod air;
pub mod blocks;
pub mod emulator;
pub mod ingest;
pub mod stream;
pub mod transport;
pub mod wire;

pub use blocks::{
    pack_bits, run_blocks, BlockFrame, BlockIngest, BlockIngestError, BlockRunConfig,
    BlockRunError, BlockRunReport,
};
pub use emulator::{FrameBank, RuConfig};
pub use transport::TransportKind;
pub use wire::{FronthaulHeader, WireError};
