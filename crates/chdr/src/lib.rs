//! CHDR streaming for radiohost: the RFNoC CHDR wire codec (64-bit width),
//! sans-IO cores for sequence tracking, credit-based flow control and an
//! emulated radio's sample clock, plus the drivers that own sockets: the host
//! streamer (RX -> process -> TX per packet) and the emulated streaming radio.
//!
//! Module map: `wire` (formats), `seq`, `flow`, `rx`, `tx` (sans-IO cores),
//! `process` (what runs between RX and TX), `net` (batched UDP syscalls, kernel
//! timestamps, pinning), `streamer`, `radio` (drivers), `emulate` (a radio on
//! its own), `totals` (counters summed over streams and ports). Latency
//! statistics are `radiohost_rt::stats`.

pub mod bench;
pub mod emulate;
pub mod flow;
pub mod live;
pub mod live_channel;
pub mod net;
pub mod process;
pub mod radio;
pub mod rx;
pub mod seq;
pub mod session;
pub mod streamer;
pub mod totals;
pub mod tx;
pub mod verify;
pub mod wire;
