//! The virtual testbed: emulated links and the plumbing to put them between real
//! sockets.
//!
//! * [`air`]: the one emulated air (channel, noise, one clock) every emulated device
//!   is a front end over.
//! * [`link`]: a sans-IO link model (capacity, propagation delay, random and bursty
//!   loss, reordering, duplication, queue limit, capacity schedule), seeded.
//! * [`relay`]: a UDP relay that applies a link model in each direction.
//! * [`pacing`]: sleeping until an absolute time with microsecond accuracy, for
//!   drivers that emit packets at the times a link model says.

pub mod air;
pub mod link;
pub mod pacing;
pub mod relay;
pub mod simnet;
pub mod units;

pub use link::{
    CapacityChange, DropReason, Fate, GilbertElliott, Link, LinkConfig, LinkConfigError, LinkStats,
};
