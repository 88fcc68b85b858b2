//! The emulated backend: a radio attached to the one emulated air (`testbed::air`).
//!
//! An [`EmulatedRadio`] owns a set of air TX ports and air RX ports as its channels
//! (TX channel `c` is air TX port `tx_ports[c]`, RX channel `c` air RX port
//! `rx_ports[c]`). Its sample clock is the air's clock plus an offset that
//! [`Radio::set_time_now`] sets, so radios on one air may disagree about time as real
//! radios do, while the air stays the single truth.
//!
//! * TX: each `send` schedules its samples on the air at the burst's time (`md.time`, or
//!   the air's current tick, or right after the previous packet of the same burst). A
//!   burst whose time has passed is not sent and is reported as [`AsyncEvent::Late`]; an
//!   end of burst is acknowledged with [`AsyncEvent::BurstAck`].
//! * RX: `NumSampsAndDone` and `StartContinuous` read what the air received from the
//!   command's time. A command whose time has passed is reported on the next `recv` as
//!   [`RxErrorCode::LateCommand`]. Under the air's real clock `recv` hands out samples no
//!   earlier than their time (it waits, up to the timeout); under a simulated clock it
//!   does not wait. Samples the air no longer holds are reported as an overflow.
//! * The rate is the air's: `set_rate` coerces to it, as a radio with one fixed rate does.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use radiohost_testbed::air::{Air, AirConfig, AirError};

use crate::{
    check_buffers, check_channels, AsyncEvent, Cf32, Radio, RadioError, RadioInfo, RxErrorCode,
    RxMetadata, RxStreamer, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata, TxStreamer,
};

const BACKEND: &str = "emulated";
/// Async events kept per TX streamer; older ones are dropped and counted.
const MAX_EVENTS: usize = 1024;

/// Which air ports a radio's channels are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatedPorts {
    /// RX channel `c` is air RX port `rx[c]`.
    pub rx: Vec<usize>,
    /// TX channel `c` is air TX port `tx[c]`.
    pub tx: Vec<usize>,
}

/// A radio whose antennas are ports of an [`Air`].
pub struct EmulatedRadio {
    air: Air,
    ports: EmulatedPorts,
    center_freq: f64,
    /// Radio tick minus air tick (set by `set_time_now`), shared with the streamers.
    offset: Arc<AtomicI64>,
}

fn backend_error(e: AirError) -> RadioError {
    RadioError::Backend {
        backend: BACKEND,
        message: e.to_string(),
    }
}

impl EmulatedRadio {
    /// A radio on `air` with the given ports; every port must exist on the air and the
    /// radio needs at least one RX channel.
    pub fn new(air: Air, ports: EmulatedPorts) -> Result<Self, RadioError> {
        if ports.rx.is_empty() {
            return Err(RadioError::InvalidArgument(
                "an emulated radio needs at least one RX port".into(),
            ));
        }
        for (list, available, direction) in [
            (&ports.rx, air.rx_ports(), "air RX"),
            (&ports.tx, air.tx_ports(), "air TX"),
        ] {
            if let Some(&channel) = list.iter().find(|&&p| p >= available) {
                return Err(RadioError::NoSuchChannel {
                    channel,
                    available,
                    direction,
                });
            }
        }
        Ok(EmulatedRadio {
            air,
            ports,
            center_freq: 0.0,
            offset: Arc::new(AtomicI64::new(0)),
        })
    }

    /// A radio on a fresh identity air of `channels` ports at `rate_hz` on a simulated
    /// clock: what TX channel `c` sends, RX channel `c` receives.
    pub fn loopback(rate_hz: f64, channels: usize) -> Result<Self, RadioError> {
        let air = Air::new(AirConfig::identity(rate_hz, channels)).map_err(backend_error)?;
        let all: Vec<usize> = (0..channels).collect();
        Self::new(
            air,
            EmulatedPorts {
                rx: all.clone(),
                tx: all,
            },
        )
    }

    /// The air this radio is attached to.
    pub fn air(&self) -> &Air {
        &self.air
    }

    fn clock(&self) -> RadioClock {
        RadioClock {
            air: self.air.clone(),
            offset: self.offset.clone(),
        }
    }
}

/// Conversions between the radio's sample clock and the air's.
#[derive(Clone)]
struct RadioClock {
    air: Air,
    offset: Arc<AtomicI64>,
}

impl RadioClock {
    fn rate(&self) -> f64 {
        self.air.rate_hz()
    }

    fn now_tick(&self) -> i128 {
        self.air.now_tick() as i128 + self.offset.load(Ordering::SeqCst) as i128
    }

    fn now(&self) -> Time {
        Time::from_ticks(self.now_tick().max(0) as u64, self.rate())
    }

    /// The air tick of radio time `t`; `None` when it lies before the air began.
    fn air_tick(&self, t: Time) -> Option<u64> {
        let radio = t.to_ticks(self.rate()) as i128;
        u64::try_from(radio - self.offset.load(Ordering::SeqCst) as i128).ok()
    }

    /// The radio time of air tick `tick`.
    fn radio_time(&self, tick: u64) -> Time {
        let radio = tick as i128 + self.offset.load(Ordering::SeqCst) as i128;
        Time::from_ticks(radio.clamp(0, u64::MAX as i128) as u64, self.rate())
    }

    fn is_past(&self, t: Time) -> bool {
        (t.to_ticks(self.rate()) as i128) < self.now_tick()
    }
}

impl Radio for EmulatedRadio {
    fn info(&self) -> RadioInfo {
        RadioInfo {
            backend: BACKEND,
            description: format!(
                "emulated radio on air RX ports {:?}, TX ports {:?}",
                self.ports.rx, self.ports.tx
            ),
            rx_channels: self.ports.rx.len(),
            tx_channels: self.ports.tx.len(),
            max_rx_burst: None,
        }
    }

    fn rate(&self) -> f64 {
        self.air.rate_hz()
    }

    fn set_rate(&mut self, rate_hz: f64) -> Result<f64, RadioError> {
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "sample rate {rate_hz} Hz is not a positive number"
            )));
        }
        // The air has one rate for every port; a radio with a fixed rate coerces.
        Ok(self.air.rate_hz())
    }

    fn center_freq(&self) -> f64 {
        self.center_freq
    }

    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        if !freq_hz.is_finite() {
            return Err(RadioError::InvalidArgument(format!(
                "centre frequency {freq_hz} Hz is not a number"
            )));
        }
        self.center_freq = freq_hz;
        Ok(freq_hz)
    }

    fn time_now(&self) -> Time {
        self.clock().now()
    }

    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        let want = time.to_ticks(self.rate()) as i128;
        let offset = want - self.air.now_tick() as i128;
        let offset = i64::try_from(offset).map_err(|_| {
            RadioError::InvalidArgument(format!("time {time} is too far from the air's time"))
        })?;
        self.offset.store(offset, Ordering::SeqCst);
        Ok(())
    }

    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        check_channels(&args.channels, self.ports.rx.len(), "RX")?;
        Ok(Box::new(EmulatedRx {
            clock: self.clock(),
            ports: args.channels.iter().map(|&c| self.ports.rx[c]).collect(),
            mode: RxMode::Idle,
            late: false,
        }))
    }

    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError> {
        check_channels(&args.channels, self.ports.tx.len(), "TX")?;
        Ok(Box::new(EmulatedTx {
            clock: self.clock(),
            channels: args.channels.clone(),
            ports: args.channels.iter().map(|&c| self.ports.tx[c]).collect(),
            next: None,
            burst_late: false,
            events: VecDeque::new(),
            dropped_events: 0,
        }))
    }
}

#[derive(Clone, Copy, Debug)]
enum RxMode {
    Idle,
    /// `remaining` samples from air tick `next`.
    Burst {
        next: u64,
        remaining: u64,
        first: bool,
    },
    Continuous {
        next: u64,
        first: bool,
    },
}

struct EmulatedRx {
    clock: RadioClock,
    ports: Vec<usize>,
    mode: RxMode,
    /// The last command's time had passed; reported on the next recv.
    late: bool,
}

impl EmulatedRx {
    /// Waits (real clock only) until samples up to air tick `end` exist, or the
    /// deadline; returns how many of the `n` samples from `start` may be handed out.
    fn available(&self, start: u64, n: usize, timeout: Duration) -> usize {
        let air = &self.clock.air;
        if !air.is_real_time() {
            return n;
        }
        let end = start + n as u64;
        let deadline = Instant::now() + timeout;
        loop {
            let now = air.now_tick();
            if now >= end {
                return n;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return now.saturating_sub(start) as usize;
            }
            let wait = air.time_of(end).saturating_sub(air.now()).as_duration();
            std::thread::sleep(wait.min(left));
        }
    }
}

impl RxStreamer for EmulatedRx {
    fn num_channels(&self) -> usize {
        self.ports.len()
    }

    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError> {
        if cmd.mode == StreamMode::Stop {
            self.mode = RxMode::Idle;
            return Ok(());
        }
        let start = match cmd.time {
            None => Some(self.clock.air.now_tick()),
            Some(t) if self.clock.is_past(t) => None,
            Some(t) => self.clock.air_tick(t),
        };
        let Some(next) = start else {
            self.late = true;
            self.mode = RxMode::Idle;
            return Ok(());
        };
        self.late = false;
        self.mode = match cmd.mode {
            StreamMode::NumSampsAndDone(0) | StreamMode::Stop => RxMode::Idle,
            StreamMode::NumSampsAndDone(n) => RxMode::Burst {
                next,
                remaining: n,
                first: true,
            },
            StreamMode::StartContinuous => RxMode::Continuous { next, first: true },
        };
        Ok(())
    }

    fn recv(
        &mut self,
        buffs: &mut [&mut [Cf32]],
        md: &mut RxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError> {
        *md = RxMetadata::default();
        let len = check_buffers(buffs, self.ports.len())?;
        if std::mem::take(&mut self.late) {
            md.error = RxErrorCode::LateCommand;
            return Ok(0);
        }
        if len == 0 {
            return Ok(0);
        }
        let (next, limit, first) = match self.mode {
            RxMode::Idle => {
                md.error = RxErrorCode::Timeout;
                return Ok(0);
            }
            RxMode::Burst {
                next,
                remaining,
                first,
            } => (next, remaining, first),
            RxMode::Continuous { next, first } => (next, u64::MAX, first),
        };
        let want = (len as u64).min(limit).min(self.clock.air.history() as u64) as usize;
        let n = self.available(next, want, timeout);
        if n == 0 {
            md.error = RxErrorCode::Timeout;
            return Ok(0);
        }
        for (buf, &port) in buffs.iter_mut().zip(&self.ports) {
            match self.clock.air.receive(port, next, &mut buf[..n]) {
                Ok(()) => {}
                Err(AirError::TooOld { oldest, .. }) => {
                    // The host fell behind the air: skip to what is still there.
                    md.error = RxErrorCode::Overflow;
                    self.skip_to(oldest);
                    return Ok(0);
                }
                Err(e) => return Err(backend_error(e)),
            }
        }
        md.time = Some(self.clock.radio_time(next));
        md.start_of_burst = first;
        let next = next + n as u64;
        self.mode = match self.mode {
            RxMode::Burst { remaining, .. } if remaining <= n as u64 => {
                md.end_of_burst = true;
                RxMode::Idle
            }
            RxMode::Burst { remaining, .. } => RxMode::Burst {
                next,
                remaining: remaining - n as u64,
                first: false,
            },
            RxMode::Continuous { .. } => RxMode::Continuous { next, first: false },
            RxMode::Idle => RxMode::Idle,
        };
        Ok(n)
    }
}

impl EmulatedRx {
    fn skip_to(&mut self, tick: u64) {
        let horizon = self.clock.air.horizon().max(tick);
        self.mode = match self.mode {
            RxMode::Burst {
                next, remaining, ..
            } => RxMode::Burst {
                next: horizon,
                remaining: remaining.saturating_sub(horizon.saturating_sub(next)),
                first: false,
            },
            RxMode::Continuous { .. } => RxMode::Continuous {
                next: horizon,
                first: false,
            },
            RxMode::Idle => RxMode::Idle,
        };
    }
}

struct EmulatedTx {
    clock: RadioClock,
    /// Radio channel numbers (for events), in buffer order.
    channels: Vec<usize>,
    /// Air TX ports, in buffer order.
    ports: Vec<usize>,
    /// Air tick right after the last packet of the current burst.
    next: Option<u64>,
    /// The current burst was late and is being discarded.
    burst_late: bool,
    events: VecDeque<AsyncEvent>,
    dropped_events: u64,
}

impl EmulatedTx {
    fn push_event(&mut self, event: AsyncEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.dropped_events += 1;
        }
        self.events.push_back(event);
    }

    fn report_late(&mut self, time: Option<Time>) {
        for i in 0..self.channels.len() {
            let channel = self.channels[i];
            self.push_event(AsyncEvent::Late { channel, time });
        }
    }
}

impl TxStreamer for EmulatedTx {
    fn num_channels(&self) -> usize {
        self.ports.len()
    }

    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        _timeout: Duration,
    ) -> Result<usize, RadioError> {
        let len = check_buffers(buffs, self.ports.len())?;
        if len == 0 && !md.end_of_burst {
            return Ok(0);
        }
        let air = self.clock.air.clone();
        let continuing = self
            .next
            .filter(|_| !md.start_of_burst && md.time.is_none());
        let start = match (md.time, continuing) {
            (Some(t), _) if self.clock.is_past(t) => None,
            (Some(t), _) => self.clock.air_tick(t),
            (None, Some(next)) => Some(next),
            // As soon as possible: the air's present, or later if the air has already
            // been processed beyond it.
            (None, None) if self.burst_late && !md.start_of_burst => None,
            (None, None) => Some(air.now_tick().max(air.horizon())),
        };
        let Some(start) = start else {
            if md.start_of_burst || md.time.is_some() || !self.burst_late {
                self.report_late(md.time);
            }
            self.burst_late = !md.end_of_burst;
            self.next = None;
            return Ok(len);
        };
        self.burst_late = false;
        let mut late = false;
        for (buf, &port) in buffs.iter().zip(&self.ports) {
            match air.transmit(port, start, buf) {
                Ok(()) => {}
                Err(AirError::Late { .. }) => late = true,
                Err(e) => return Err(backend_error(e)),
            }
        }
        let end = start + len as u64;
        if late {
            self.report_late(Some(self.clock.radio_time(start)));
        }
        if md.end_of_burst {
            self.next = None;
            let time = Some(self.clock.radio_time(end));
            for i in 0..self.channels.len() {
                let channel = self.channels[i];
                self.push_event(AsyncEvent::BurstAck { channel, time });
            }
        } else {
            self.next = Some(end);
        }
        Ok(len)
    }

    fn recv_async_msg(&mut self, _timeout: Duration) -> Option<AsyncEvent> {
        // Events are produced by `send` itself, so waiting could not bring a new one.
        self.events.pop_front()
    }
}
