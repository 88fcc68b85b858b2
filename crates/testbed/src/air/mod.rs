//! The one emulated air: which TX port reaches which RX port through which channel, the
//! noise, and the one clock every emulated device (WARP node, CHDR radio, radio unit,
//! relay node) shares.
//!
//! The air is sans-IO: it has no threads or sockets. Front ends push emissions with
//! [`Air::transmit`] and pull what an RX port received with [`Air::receive`]. The air
//! processes lazily: RX output is computed, in blocks of [`AirConfig::block`] samples, up
//! to the tick a request needs (the *horizon*). Processing a block takes every TX port's
//! scheduled samples for that block, runs them through the channel (dsp's MIMO UPOLS
//! convolver for [`AirChannel::Static`] and [`AirChannel::Fading`]; a straight copy for
//! [`AirChannel::Identity`]) and adds complex white Gaussian noise per RX port.
//!
//! Consequences worth knowing:
//! * Once the horizon has passed a tick, that tick's RX output is final. An emission
//!   that starts before the horizon is *late*: its part before the horizon is dropped and
//!   counted, its part from the horizon on is still applied, and `transmit` returns
//!   [`AirError::Late`]. So every front end that emits for a tick must do so before
//!   anyone receives that tick.
//! * Each RX port keeps the last [`AirConfig::history`] samples before the horizon;
//!   older requests fail with [`AirError::TooOld`].
//! * Noise is seeded per (seed, RX port, block index), and fading is advanced once per
//!   update interval, so a run is reproducible for the same sequence of calls.
//! * In silence (nothing scheduled and the channel's memory flushed) the air jumps
//!   ahead without computing samples no request could still read.
//!
//! ```
//! use radiohost_testbed::air::{Air, AirConfig};
//! use radiohost_iq::Cf32;
//! let air = Air::new(AirConfig::identity(1e6, 1)).unwrap();
//! air.transmit(0, 100, &[Cf32::new(1.0, 0.0); 4]).unwrap();
//! let mut rx = [Cf32::new(0.0, 0.0); 6];
//! air.receive(0, 99, &mut rx).unwrap();
//! assert_eq!(rx[0], Cf32::new(0.0, 0.0));
//! assert_eq!(rx[1], Cf32::new(1.0, 0.0));
//! ```

mod world;

use std::sync::{Arc, Mutex, MutexGuard};

use radiohost_dsp::channel::FadingChannel;
use radiohost_dsp::{DspError, MimoTaps};
use radiohost_iq::{Block, BlockError, Cf32};
use radiohost_rt::{Clock, ManualClock, Time};

use world::World;

/// Most ports per side through a convolved channel (the convolver's limit).
pub const MAX_PORTS: usize = radiohost_dsp::taps::MAX_PORTS;
/// Most ports per side of an identity air (no convolver; e.g. 1024 WARP nodes of 4 paths).
pub const MAX_IDENTITY_PORTS: usize = 4096;
/// Largest processing block accepted, in samples.
pub const MAX_BLOCK: usize = 1 << 16;
/// Largest history per RX port accepted, in samples (bounds what a config can allocate).
pub const MAX_HISTORY: usize = 1 << 26;
/// Most separate emissions queued per TX port; more are dropped and counted.
pub const MAX_EMISSIONS: usize = 1 << 16;

/// How TX ports reach RX ports.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // built once per air; boxing would only burden callers
pub enum AirChannel {
    /// TX port `i` reaches RX port `i` unchanged (ports beyond the smaller side hear or
    /// reach nothing). No convolution.
    Identity,
    /// A fixed linear channel: `taps.inputs()` must equal `tx_ports` and `taps.outputs()`
    /// `rx_ports` (`path(rx, tx)` is the response from TX port `tx` to RX port `rx`).
    Static(MimoTaps),
    /// A time-varying Rayleigh channel (inputs = TX ports, outputs = RX ports). Its
    /// response is advanced once every `update_ticks` sample ticks (rounded up to a whole
    /// number of blocks) and swapped into the convolver; for the Jakes process, match its
    /// `interval_s` to `update_ticks / rate_hz`.
    Fading {
        channel: FadingChannel,
        update_ticks: u64,
    },
}

/// Where the air's time comes from.
#[derive(Debug, Clone)]
pub enum AirClock {
    /// The host's monotonic clock; tick 0 is the moment [`Air::new`] ran.
    Real,
    /// A simulated clock; the air's time is the clock's reading (tick 0 at 0 ns).
    Simulated(ManualClock),
}

/// Everything the air is made of.
#[derive(Debug, Clone)]
pub struct AirConfig {
    /// Sample rate of every port, in Hz.
    pub rate_hz: f64,
    /// Number of TX ports (1 to [`MAX_PORTS`], or [`MAX_IDENTITY_PORTS`] for identity).
    pub tx_ports: usize,
    /// Number of RX ports (1 to [`MAX_PORTS`], or [`MAX_IDENTITY_PORTS`] for identity).
    pub rx_ports: usize,
    /// The channel from TX ports to RX ports.
    pub channel: AirChannel,
    /// AWGN per RX port, as SNR in dB against unit average power per TX port
    /// (noise variance `10^(-snr/10)`); `None` is noiseless.
    pub snr_db: Option<f64>,
    /// Seed of the noise (the fading channel carries its own seed).
    pub seed: u64,
    /// UPOLS block in samples: the air advances in whole blocks.
    pub block: usize,
    /// RX output kept per port, in samples (at least one block); also the longest single
    /// receive.
    pub history: usize,
    /// TX samples that may wait ahead of the horizon per TX port; beyond it, dropped.
    pub max_pending: usize,
    /// The one clock.
    pub clock: AirClock,
}

impl AirConfig {
    /// An identity, noiseless air on a simulated clock starting at 0 with `ports` TX and
    /// RX ports, 256-sample blocks, 1 Mi samples of history and 4 Mi pending per port.
    pub fn identity(rate_hz: f64, ports: usize) -> Self {
        Self {
            rate_hz,
            tx_ports: ports,
            rx_ports: ports,
            channel: AirChannel::Identity,
            snr_db: None,
            seed: 0,
            block: 256,
            history: 1 << 20,
            max_pending: 1 << 22,
            clock: AirClock::Simulated(ManualClock::new(0)),
        }
    }
}

/// Why the air refused a configuration or a request.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AirError {
    #[error("sample rate {0} Hz is not a positive finite number; give the rate in Hz, e.g. 1e6")]
    Rate(f64),
    #[error("{tx} TX and {rx} RX ports: each side needs 1 to {max} for this channel")]
    Ports { tx: usize, rx: usize, max: usize },
    #[error("block of {0} samples is out of range; use 1 to {MAX_BLOCK}")]
    Block(usize),
    #[error("history of {history} samples must be at least one block ({block}) and at most {MAX_HISTORY}")]
    History { history: usize, block: usize },
    #[error("SNR {0} dB is not finite; give a number or no SNR for a noiseless air")]
    Snr(f64),
    #[error("channel is {inputs}x{outputs} (TX x RX) but the air has {tx} TX and {rx} RX ports; make them match")]
    ChannelShape {
        inputs: usize,
        outputs: usize,
        tx: usize,
        rx: usize,
    },
    #[error("fading update interval must be at least 1 tick")]
    UpdateInterval,
    #[error("channel: {0}")]
    Dsp(#[from] DspError),
    #[error("{kind} port {port} does not exist; this air has {ports} {kind} ports")]
    NoSuchPort {
        kind: PortKind,
        port: usize,
        ports: usize,
    },
    #[error("emission at tick {start} is late: the air has already processed up to tick {horizon}; {dropped} samples before it were dropped (transmit earlier, or receive later)")]
    Late {
        start: u64,
        horizon: u64,
        dropped: usize,
    },
    #[error("TX port {port} queue is full: {dropped} samples dropped; receive (or advance the air) before scheduling more, or raise max_pending")]
    Overflow { port: usize, dropped: usize },
    #[error("samples from tick {start} are gone: this air keeps RX samples from tick {oldest} on; receive sooner or raise history")]
    TooOld { start: u64, oldest: u64 },
    #[error("request of {len} samples is longer than the history of {history}; receive in smaller pieces")]
    TooLong { len: usize, history: usize },
    #[error("tick range starting at {start} with {len} samples overflows the sample clock")]
    Range { start: u64, len: usize },
    #[error("block: {0}")]
    IqBlock(#[from] BlockError),
}

/// Which side a port is on (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    Tx,
    Rx,
}

impl std::fmt::Display for PortKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PortKind::Tx => "TX",
            PortKind::Rx => "RX",
        })
    }
}

/// What the air has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct AirStats {
    /// Ticks whose RX output was computed (per port).
    pub samples_processed: u64,
    /// Ticks jumped over in silence without computing them.
    pub samples_skipped: u64,
    /// Emissions accepted (wholly or partly).
    pub emissions: u64,
    /// Emissions that started before the horizon.
    pub late_emissions: u64,
    /// Samples of late emissions dropped because they fell before the horizon.
    pub late_samples: u64,
    /// TX samples dropped because a port's queue was full.
    pub dropped_samples: u64,
    /// Receive requests for samples older than the history.
    pub too_old_requests: u64,
    /// Fading responses swapped in.
    pub channel_updates: u64,
}

/// A handle to the one shared air; clones share the same world.
#[derive(Clone)]
pub struct Air {
    world: Arc<Mutex<World>>,
    rate_hz: f64,
    tx_ports: usize,
    rx_ports: usize,
    history: usize,
    block: usize,
    clock: AirClockState,
}

#[derive(Clone)]
enum AirClockState {
    Real { origin_ns: u64 },
    Simulated(ManualClock),
}

impl std::fmt::Debug for Air {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Air")
            .field("rate_hz", &self.rate_hz)
            .field("tx_ports", &self.tx_ports)
            .field("rx_ports", &self.rx_ports)
            .field("horizon", &self.horizon())
            .finish()
    }
}

impl Air {
    /// Builds the air; validates every field.
    pub fn new(cfg: AirConfig) -> Result<Air, AirError> {
        let (rate_hz, tx_ports, rx_ports) = (cfg.rate_hz, cfg.tx_ports, cfg.rx_ports);
        let (history, block) = (cfg.history, cfg.block);
        let clock = match &cfg.clock {
            AirClock::Real => AirClockState::Real {
                origin_ns: radiohost_rt::monotonic_ns(),
            },
            AirClock::Simulated(c) => AirClockState::Simulated(c.clone()),
        };
        let world = World::new(cfg)?;
        Ok(Air {
            world: Arc::new(Mutex::new(world)),
            rate_hz,
            tx_ports,
            rx_ports,
            history,
            block,
            clock,
        })
    }

    fn lock(&self) -> MutexGuard<'_, World> {
        // A panic elsewhere cannot leave the world half-updated in a way that matters
        // more than losing the air, so keep going with the data as it is.
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sample rate of every port, in Hz.
    pub fn rate_hz(&self) -> f64 {
        self.rate_hz
    }

    /// Number of TX ports.
    pub fn tx_ports(&self) -> usize {
        self.tx_ports
    }

    /// Number of RX ports.
    pub fn rx_ports(&self) -> usize {
        self.rx_ports
    }

    /// The processing block: the horizon is always a multiple of it.
    pub fn block(&self) -> usize {
        self.block
    }

    /// RX samples kept per port (also the longest single receive).
    pub fn history(&self) -> usize {
        self.history
    }

    /// The air's time now (see [`AirClock`]).
    pub fn now(&self) -> Time {
        match &self.clock {
            AirClockState::Real { origin_ns } => {
                Time::from_ns(radiohost_rt::monotonic_ns().saturating_sub(*origin_ns))
            }
            AirClockState::Simulated(c) => c.now(),
        }
    }

    /// The sample-clock tick now (nearest tick of [`Self::now`]).
    pub fn now_tick(&self) -> u64 {
        self.now().to_ticks(self.rate_hz)
    }

    /// The time of sample-clock tick `tick`.
    pub fn time_of(&self, tick: u64) -> Time {
        Time::from_ticks(tick, self.rate_hz)
    }

    /// The simulated clock, when the air runs on one (front ends may advance it).
    pub fn simulated_clock(&self) -> Option<ManualClock> {
        match &self.clock {
            AirClockState::Simulated(c) => Some(c.clone()),
            AirClockState::Real { .. } => None,
        }
    }

    /// True when the air runs on the host's clock.
    pub fn is_real_time(&self) -> bool {
        matches!(self.clock, AirClockState::Real { .. })
    }

    /// Schedules `samples` on TX port `port` from sample-clock tick `start`; overlapping
    /// emissions add. A part before the horizon is late: dropped, counted, and the call
    /// returns [`AirError::Late`] after applying the rest. A part beyond the port's
    /// pending bound is dropped and counted ([`AirError::Overflow`]).
    pub fn transmit(&self, port: usize, start: u64, samples: &[Cf32]) -> Result<(), AirError> {
        self.lock().transmit(port, start, samples)
    }

    /// What RX port `port` received over `[start, start + out.len())`; processes the air
    /// up to that range's end if not yet done.
    pub fn receive(&self, port: usize, start: u64, out: &mut [Cf32]) -> Result<(), AirError> {
        self.lock().receive(&[port], start, &mut [out])
    }

    /// What `ports` received over `[start, start + len)`, as one block (port `i` of the
    /// block is air RX port `ports[i]`).
    pub fn receive_block(
        &self,
        ports: &[usize],
        start: u64,
        len: usize,
    ) -> Result<Block, AirError> {
        let mut world = self.lock();
        world.check_request(ports, start, len)?;
        let mut block = Block::zeros(ports.len(), len, self.rate_hz, start)?;
        let mut outs = block.port_slices_mut();
        world.receive(ports, start, &mut outs)?;
        Ok(block)
    }

    /// Processes the air up to `tick` (rounded up to a whole block).
    pub fn advance_to(&self, tick: u64) -> Result<(), AirError> {
        self.lock().advance_to(tick)
    }

    /// The tick up to which RX output is final.
    pub fn horizon(&self) -> u64 {
        self.lock().horizon()
    }

    /// Counters so far.
    pub fn stats(&self) -> AirStats {
        self.lock().stats()
    }
}

#[cfg(test)]
mod tests;
