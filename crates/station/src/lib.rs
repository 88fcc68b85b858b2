//! The station: a deadline-aware massive-MIMO baseband engine.
//!
//! Baseband work is cut into [`isa::Instr`]uctions (`<frame, symbol> + opcode + part`).
//! A [`engine::Policy`] (LROC or a frame/symbol/task baseline) is a sans-IO scheduler:
//! it is told about frames, ready inputs, completions and devices, with `now` passed in,
//! and answers with [`engine::Dispatch`]es. The same policy objects are driven by the
//! real CPU executors and by the discrete-event scheduling simulator.

pub mod bench;
pub mod calibration;
pub mod costs;
pub mod dag;
pub mod engine;
pub mod isa;
pub mod kernels;
pub mod planner;
pub mod policy;
pub mod pool;
pub mod report;
pub mod ru;
pub mod runtime;
pub mod scoreboard;
pub mod setup;
pub mod shape;
pub mod sim;
pub mod sweep;
