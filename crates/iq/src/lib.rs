//! Sample types and formats shared by every radiohost crate.
//!
//! * [`Cf32`]: complex `f32`, the processing format (GNU Radio / UHD "fc32").
//! * [`Ci16`]: complex `i16`, what radios put on the wire ("sc16"); [`Ci16Buf`]
//!   holds them from a cache-line boundary.
//! * [`WarpWord`]: the 32-bit WARPLab sample word (I in bits 31..16, Q in 15..0),
//!   in its two fixed-point flavours, Fix_16_15 (writes) and Fix_14_13 (reads).
//! * [`Block`]: timestamped multi-port samples, the unit every stage passes.
//! * [`sigmf`]: SigMF 1.2 recordings (`.sigmf-meta` + `.sigmf-data`).

pub mod aligned;
pub mod block;
pub mod sample;
pub mod sigmf;
pub mod warp_word;

pub use aligned::Ci16Buf;
pub use block::{Block, BlockError};
pub use sample::{cf32_to_ci16, ci16_to_cf32, Cf32, Ci16};
pub use warp_word::{WarpWord, FIX14_SCALE, FIX16_SCALE};
