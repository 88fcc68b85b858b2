//! Cooperative relaying on the virtual testbed: a source's burst reaches two
//! (or more) relays, each relay schedules its retransmission at an absolute
//! time (its RX timestamp + delta) through timed TX, and the destination
//! classifies every relay copy as on time, late, early or missing.
//!
//! Module map:
//! - [`tag`]: the burst tag carried in CHDR metadata (typed parser, never panics);
//! - [`schedule`]: the relay host's scheduling logic, sans-IO (time passed in);
//! - [`classify`]: the destination's per-burst classification, sans-IO;
//! - [`air`]: the emulated hardware as a sans-IO core: source radio, emulated
//!   links (testbed), the source -> relay paths on the one emulated air
//!   (`testbed::air`), relay radios (chdr timed-TX core) and destination radio;
//! - [`sim`]: the whole network in virtual time with a host-latency model, for
//!   deterministic tests;
//! - [`run`]: the real-time driver: the air on one thread, each relay host on
//!   its own configured (rt) thread, talking CHDR over loopback UDP.

pub mod air;
pub mod classify;
pub mod run;
pub mod schedule;
pub mod sim;
pub mod sweep;
pub mod tag;

pub use air::{Air, AirConfig, AirError, AirReport, LatePolicy};
pub use classify::{BurstOutcome, Classifier, ClassifierConfig, Combined, CopyOutcome, Tally};
pub use schedule::{RelayScheduler, ScheduleError, Scheduled, SchedulerConfig};
pub use tag::{RelayPacket, RelayTag, TagError, TagKind};

/// Most relays one run supports (per-burst state is a fixed array).
pub const MAX_RELAYS: usize = 8;
