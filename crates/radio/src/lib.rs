//! radiohost's device layer, in UHD's vocabulary.
//!
//! A [`Radio`] has RX and TX channels, a sample rate, a centre frequency and a
//! time (the sample clock, as [`Time`]). [`Radio::rx_stream`] and
//! [`Radio::tx_stream`] give streamers; RX is started and stopped by
//! [`StreamCmd`]s (continuous, num-samps-and-done, stop; now or at a time);
//! each `recv`/`send` carries [`RxMetadata`]/[`TxMetadata`] (time spec, start
//! and end of burst); problems arrive as [`AsyncEvent`]s with UHD's one-letter
//! codes (U underflow, O overflow, L late, S sequence error, D dropped).
//!
//! Backends, one module each, all passing the same [`conformance`] suite:
//! [`emulated`] (attached to `testbed::air`), [`warp`] (a set of WARP nodes as
//! one buffer-based multi-channel radio), [`chdr`] (continuous CHDR streaming)
//! [`sigmf`] (RX from a recording, TX into one) and [`zeromq`] (gr-zeromq
//! streams: GNU Radio flowgraphs and pyzmq peers). docs/ARCHITECTURE.md says
//! how a UHD or SoapySDR backend is added.

pub mod chdr;
pub mod conformance;
pub mod emulated;
pub mod sigmf;
mod types;
pub mod warp;
pub mod zeromq;

pub use radiohost_iq::Cf32;
pub use radiohost_rt::Time;
pub use types::*;
