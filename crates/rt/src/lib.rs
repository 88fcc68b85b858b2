//! radiohost's real-time execution layer.
//!
//! - [`ThreadConfig`]: policy, priority, CPU set, memory locking and stack
//!   prefault for a time-critical thread; [`ThreadConfig::apply`] reports per
//!   step what the kernel granted (read back) or why it refused and how to fix
//!   it. [`spawn_configured`] / [`RtThreadBuilder`] start a thread that
//!   configures itself first.
//! - [`audit`]: what on this machine silently hurts latency (RT throttling,
//!   missing CPU isolation, deep C-states, governors, limits, capabilities).
//! - [`time`]: [`Time`], the one time type (host and sample clock, in ns).
//! - [`clock`]: monotonic/TAI ns clocks, absolute-deadline sleep, a [`Clock`]
//!   trait with a manual clock for simulations.
//! - [`stats`]: HDR latency histogram with min/median/P99/P99.9/max/jitter.
//! - [`probe`]: latency probes (timer wake-up, UDP ping-pong) and [`load`], a
//!   bounded background load shaped like a parallel kernel build; [`process`]
//!   runs the load and the UDP echo as child processes.
//! - [`cyclictest`]: runs Debian's cyclictest and parses its samples, the
//!   baseline the timer probe is compared against.
//!
//! Setting up a time-critical thread (what the streamer and schedulers do):
//!
//! ```no_run
//! use radiohost_rt::{RtThreadBuilder, ThreadConfig};
//!
//! let t = RtThreadBuilder::new("streamer")
//!     .config(ThreadConfig::realtime(80).pinned(vec![1]))
//!     .spawn(|report| {
//!         // ... the time-critical loop; `report` says what it runs with ...
//!         report.fully_applied()
//!     })?;
//! // Known before the body runs: log refusals with their fixes.
//! for p in t.report().problems() {
//!     eprintln!("{}: {:?}", p.step, p.outcome);
//! }
//! let _ = t.join();
//! # Ok::<(), radiohost_rt::SpawnError>(())
//! ```
//!
//! Linux only.

mod apply_steps;
pub mod audit;
pub mod clock;
pub mod config;
pub mod cpulist;
pub mod cyclictest;
pub mod load;
pub mod pmqos;
pub mod probe;
pub mod process;
pub mod spawn;
pub mod stats;
pub mod sys;
pub mod time;
pub mod versus;

pub use clock::{monotonic_ns, tai_ns, Clock, ClockId, ManualClock, MonotonicClock, TaiClock};
pub use config::{ApplyReport, ConfigError, Observed, Outcome, Policy, Step, ThreadConfig};
pub use spawn::{spawn_configured, JoinError, RtThread, RtThreadBuilder, SpawnError};
pub use stats::{LatencyHistogram, Summary};
pub use time::Time;
