//! The WARP backend: a set of WARP v3 nodes as ONE multi-channel,
//! buffer-based radio, over the WARPLab host transport (`radiohost_warp::host`).
//!
//! Channel `c` is node `c / paths_per_node`, RF path (buffer A..D)
//! `c % paths_per_node`, for RX and TX alike.
//!
//! WARPLab's semantics, which this backend keeps: a node has a TX and an RX
//! buffer of 32768 samples per RF path, and one broadcast trigger starts TX
//! playout and RX capture on every node at once. So
//! * a TX burst (`send` until `end_of_burst`, at most 32768 samples) is
//!   written into the TX buffers of its channels, all nodes in parallel, and
//!   then the trigger fires at the burst's time;
//! * RX num-samps-and-done at time T fires the trigger at T (unless a TX burst
//!   already fired it at T: the RX buffers hold that capture) and then reads
//!   the RX buffers of every channel in one parallel read.
//!
//! Time is the host's monotonic clock as sample ticks since `set_time_now`
//! (the nodes' clocks are not visible over this protocol); "at T" means the
//! host waits until its clock reaches T, then triggers. A command or burst
//! whose time has passed is late: RX reports `LateCommand`, TX drops the
//! burst and reports `Late`. Continuous streaming is refused
//! (`RadioError::Unsupported`). Samples are written as Fix_16_15 and read as
//! Fix_14_13 words, so a loopback is exact to about 2^-13.
//!
//! The rate is the nodes' fixed 40 MS/s. The centre frequency snaps to the
//! nearest channel of the WARP v3 radios (MAX2829: 2.4 GHz channels 1..14,
//! 5 GHz UNII channels) and is kept on the host: this WARPLab subset carries
//! no interface commands.

use crate::{
    check_buffers, check_channels, AsyncEvent, Cf32, Radio, RadioError, RadioInfo, RxErrorCode,
    RxMetadata, RxStreamer, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata, TxStreamer,
};
use radiohost_iq::WarpWord;
use radiohost_warp::emulator::Emulator;
use radiohost_warp::host::{HostConfig, NodeTarget, TransportError, WarpHost};
use radiohost_warp::node::BUFFER_SAMPLES;
use radiohost_warp::RfBuffer;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const BACKEND: &str = "warp";
/// WARP v3's baseband sample rate.
pub const WARP_RATE_HZ: f64 = 40e6;
const EVENT_QUEUE: usize = 1024;

/// How to reach the nodes and how they form channels.
#[derive(Clone, Debug)]
pub struct WarpConfig {
    pub host: HostConfig,
    pub nodes: Vec<NodeTarget>,
    /// RF paths used per node (1..=4): channels = nodes x paths.
    pub paths_per_node: usize,
    /// Trigger bitmask broadcast for TX and RX.
    pub trigger_ids: u32,
}

impl WarpConfig {
    /// Every node of an in-process emulator, from one loopback interface, with
    /// `paths_per_node` channels each.
    pub fn for_emulator(emu: &Emulator, paths_per_node: usize) -> Result<Self, RadioError> {
        let trigger_addr = emu.trigger_addr().ok_or_else(|| {
            RadioError::InvalidArgument("the node emulator has no trigger socket".into())
        })?;
        let nodes = emu
            .node_addrs()
            .iter()
            .enumerate()
            .map(|(i, &addr)| NodeTarget {
                id: i as u16,
                addr,
                interface: 0,
            })
            .collect();
        Ok(WarpConfig {
            host: HostConfig {
                interfaces: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
                payload: emu.payload(),
                trigger_addr,
                ..Default::default()
            },
            nodes,
            paths_per_node,
            trigger_ids: 1,
        })
    }
}

fn transport(e: TransportError) -> RadioError {
    RadioError::Backend {
        backend: BACKEND,
        message: e.to_string(),
    }
}

struct Inner {
    host: WarpHost,
    paths: usize,
    trigger_ids: u32,
    freq: f64,
    /// `time_now` = `base_time` + time since `base_instant`.
    base_instant: Instant,
    base_time: Time,
    /// Tick of the last trigger fired (its capture is in the RX buffers).
    last_trigger: Option<u64>,
    events: VecDeque<AsyncEvent>,
    events_dropped: u64,
}

impl Inner {
    fn now(&self) -> Time {
        self.base_time + Time::from(self.base_instant.elapsed())
    }

    fn now_tick(&self) -> u64 {
        self.now().to_ticks(WARP_RATE_HZ)
    }

    fn channels(&self) -> usize {
        self.host.nodes().len() * self.paths
    }

    /// (node index, buffer) of channel `c`.
    fn place(&self, c: usize) -> (usize, RfBuffer) {
        (c / self.paths, RfBuffer::ALL[c % self.paths])
    }

    /// Sleeps until the clock reaches `tick` (the host's notion of "at T").
    fn wait_until(&self, tick: u64) {
        loop {
            let now = self.now_tick();
            if now >= tick {
                return;
            }
            let left = Time::from_ticks(tick - now, WARP_RATE_HZ).as_duration();
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }

    fn trigger_at(&mut self, tick: u64) -> Result<(), RadioError> {
        self.wait_until(tick);
        self.host.trigger(self.trigger_ids).map_err(transport)?;
        self.last_trigger = Some(tick);
        Ok(())
    }

    fn event(&mut self, e: AsyncEvent) {
        if self.events.len() >= EVENT_QUEUE {
            self.events.pop_front();
            self.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// Channels grouped by RF buffer: (buffer, node indices, positions in `channels`).
    fn by_buffer(&self, channels: &[usize]) -> Vec<(RfBuffer, Vec<usize>, Vec<usize>)> {
        let mut groups: Vec<(RfBuffer, Vec<usize>, Vec<usize>)> = Vec::new();
        for (i, &c) in channels.iter().enumerate() {
            let (node, buf) = self.place(c);
            match groups.iter_mut().find(|g| g.0 == buf) {
                Some(g) => {
                    g.1.push(node);
                    g.2.push(i);
                }
                None => groups.push((buf, vec![node], vec![i])),
            }
        }
        groups
    }
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A set of WARP v3 nodes as one radio; see the module docs.
pub struct WarpRadio {
    inner: Arc<Mutex<Inner>>,
    description: String,
}

impl WarpRadio {
    pub fn connect(cfg: WarpConfig) -> Result<Self, RadioError> {
        if !(1..=4).contains(&cfg.paths_per_node) {
            return Err(RadioError::InvalidArgument(format!(
                "{} RF paths per node: a WARP v3 node has 1 to 4",
                cfg.paths_per_node
            )));
        }
        if cfg.nodes.is_empty() {
            return Err(RadioError::InvalidArgument(
                "a WARP radio needs at least one node".into(),
            ));
        }
        let description = format!(
            "{} WARP v3 node(s) x {} RF path(s): {}",
            cfg.nodes.len(),
            cfg.paths_per_node,
            cfg.nodes
                .iter()
                .map(|n| format!("{}@{}", n.id, n.addr))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let host = WarpHost::new(cfg.host, cfg.nodes).map_err(transport)?;
        Ok(WarpRadio {
            inner: Arc::new(Mutex::new(Inner {
                host,
                paths: cfg.paths_per_node,
                trigger_ids: cfg.trigger_ids,
                freq: nearest_channel(2.412e9),
                base_instant: Instant::now(),
                base_time: Time::ZERO,
                last_trigger: None,
                events: VecDeque::new(),
                events_dropped: 0,
            })),
            description,
        })
    }

    /// Async events dropped because nobody read them (bounded queue).
    pub fn events_dropped(&self) -> u64 {
        lock(&self.inner).events_dropped
    }
}

/// Centre frequencies (Hz) of the WARP v3 radios' channels.
fn channel_table() -> impl Iterator<Item = f64> {
    let mhz = (0..13)
        .map(|k| 2412 + 5 * k)
        .chain([2484])
        .chain((0..8).map(|k| 5180 + 20 * k))
        .chain((0..11).map(|k| 5500 + 20 * k))
        .chain((0..5).map(|k| 5745 + 20 * k));
    mhz.map(|m| m as f64 * 1e6)
}

fn nearest_channel(freq: f64) -> f64 {
    channel_table()
        .min_by(|a, b| (a - freq).abs().total_cmp(&(b - freq).abs()))
        .unwrap_or(2.412e9)
}

impl Radio for WarpRadio {
    fn info(&self) -> RadioInfo {
        let n = lock(&self.inner).channels();
        RadioInfo {
            backend: BACKEND,
            description: self.description.clone(),
            rx_channels: n,
            tx_channels: n,
            max_rx_burst: Some(BUFFER_SAMPLES as u64),
        }
    }

    fn rate(&self) -> f64 {
        WARP_RATE_HZ
    }

    /// The nodes run at 40 MS/s only.
    fn set_rate(&mut self, _rate_hz: f64) -> Result<f64, RadioError> {
        Ok(WARP_RATE_HZ)
    }

    fn center_freq(&self) -> f64 {
        lock(&self.inner).freq
    }

    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        if !freq_hz.is_finite() {
            return Err(RadioError::InvalidArgument(format!(
                "centre frequency {freq_hz} Hz: give a finite frequency"
            )));
        }
        let mut inner = lock(&self.inner);
        inner.freq = nearest_channel(freq_hz);
        Ok(inner.freq)
    }

    fn time_now(&self) -> Time {
        lock(&self.inner).now()
    }

    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        let mut inner = lock(&self.inner);
        inner.base_instant = Instant::now();
        inner.base_time = time;
        inner.last_trigger = None;
        Ok(())
    }

    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        check_channels(&args.channels, self.info().rx_channels, "RX")?;
        Ok(Box::new(WarpRx {
            inner: self.inner.clone(),
            channels: args.channels.clone(),
            pending: None,
            capture: Vec::new(),
            delivered: 0,
            capture_tick: 0,
        }))
    }

    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError> {
        check_channels(&args.channels, self.info().tx_channels, "TX")?;
        Ok(Box::new(WarpTx {
            inner: self.inner.clone(),
            channels: args.channels.clone(),
            staged: vec![Vec::new(); args.channels.len()],
            burst_time: None,
        }))
    }
}

/// Trigger + parallel read per num-samps-and-done command.
struct WarpRx {
    inner: Arc<Mutex<Inner>>,
    channels: Vec<usize>,
    /// A command not yet captured: (samples, time).
    pending: Option<(u64, Option<Time>)>,
    /// The capture being delivered, per channel.
    capture: Vec<Vec<Cf32>>,
    delivered: usize,
    capture_tick: u64,
}

impl WarpRx {
    /// Fires (or reuses) the trigger and reads every channel. `Ok(false)`: the
    /// command's time is further away than `timeout`.
    fn capture(
        &mut self,
        n: u64,
        time: Option<Time>,
        md: &mut RxMetadata,
        timeout: Duration,
    ) -> Result<bool, RadioError> {
        let mut inner = lock(&self.inner);
        let now = inner.now_tick();
        let tick = time.map_or(now, |t| t.to_ticks(WARP_RATE_HZ));
        let reuse = time.is_some() && inner.last_trigger == Some(tick);
        if !reuse {
            if tick < now && time.is_some() {
                md.error = RxErrorCode::LateCommand;
                md.time = time;
                return Ok(true);
            }
            if Time::from_ticks(tick - now, WARP_RATE_HZ).as_duration() > timeout {
                return Ok(false);
            }
            inner.trigger_at(tick)?;
        }
        // The nodes capture n samples after the trigger; read once they exist.
        inner.wait_until(tick + n);
        let mut capture = vec![Vec::new(); self.channels.len()];
        for (buffer, nodes, positions) in inner.by_buffer(&self.channels) {
            let words = inner
                .host
                .read_iq(&nodes, buffer, 0, n as u32)
                .map_err(transport)?;
            for (w, &i) in words.iter().zip(&positions) {
                capture[i] = w.iter().map(|x| x.to_cf32_fix14()).collect();
            }
        }
        self.capture = capture;
        self.delivered = 0;
        self.capture_tick = tick;
        Ok(true)
    }
}

impl RxStreamer for WarpRx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError> {
        match cmd.mode {
            StreamMode::StartContinuous => Err(RadioError::Unsupported {
                backend: BACKEND,
                what: "continuous streaming (a WARP node captures one 32768-sample buffer per trigger; use NumSampsAndDone)".into(),
            }),
            StreamMode::Stop => {
                self.pending = None;
                self.capture.clear();
                Ok(())
            }
            StreamMode::NumSampsAndDone(n) if n > BUFFER_SAMPLES as u64 => {
                Err(RadioError::InvalidArgument(format!(
                    "{n} samples asked for but a WARP RX buffer holds {BUFFER_SAMPLES}; split the capture"
                )))
            }
            StreamMode::NumSampsAndDone(n) => {
                self.pending = Some((n, cmd.time));
                self.capture.clear();
                Ok(())
            }
        }
    }

    fn recv(
        &mut self,
        buffs: &mut [&mut [Cf32]],
        md: &mut RxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError> {
        let len = check_buffers(buffs, self.channels.len())?;
        *md = RxMetadata::default();
        let want = len;
        if want == 0 {
            return Ok(0);
        }
        if self.capture.is_empty() {
            let Some((n, time)) = self.pending else {
                md.error = RxErrorCode::Timeout;
                return Ok(0);
            };
            if !self.capture(n, time, md, timeout)? {
                md.error = RxErrorCode::Timeout;
                return Ok(0);
            }
            self.pending = None;
            if md.error != RxErrorCode::None {
                return Ok(0);
            }
        }
        let total = self.capture[0].len();
        let k = want.min(total - self.delivered);
        for (b, c) in buffs.iter_mut().zip(&self.capture) {
            b[..k].copy_from_slice(&c[self.delivered..self.delivered + k]);
        }
        md.time = Some(Time::from_ticks(
            self.capture_tick + self.delivered as u64,
            WARP_RATE_HZ,
        ));
        md.start_of_burst = self.delivered == 0;
        self.delivered += k;
        md.end_of_burst = self.delivered == total;
        if md.end_of_burst {
            self.capture.clear();
        }
        Ok(k)
    }
}

/// Stages a burst, then parallel write + trigger at its time.
struct WarpTx {
    inner: Arc<Mutex<Inner>>,
    channels: Vec<usize>,
    staged: Vec<Vec<Cf32>>,
    burst_time: Option<Time>,
}

impl WarpTx {
    fn transmit(&mut self) -> Result<(), RadioError> {
        let mut inner = lock(&self.inner);
        let now = inner.now_tick();
        let tick = self.burst_time.map_or(now, |t| t.to_ticks(WARP_RATE_HZ));
        if tick < now {
            for &channel in &self.channels {
                inner.event(AsyncEvent::Late {
                    channel,
                    time: self.burst_time,
                });
            }
            return Ok(());
        }
        for (buffer, nodes, positions) in inner.by_buffer(&self.channels) {
            let words: Vec<Vec<WarpWord>> = positions
                .iter()
                .map(|&i| {
                    self.staged[i]
                        .iter()
                        .map(|&x| WarpWord::from_cf32_fix16(x))
                        .collect()
                })
                .collect();
            let refs: Vec<&[WarpWord]> = words.iter().map(|w| w.as_slice()).collect();
            inner
                .host
                .write_iq(&nodes, buffer, 0, &refs)
                .map_err(transport)?;
        }
        inner.trigger_at(tick)?;
        let time = Some(Time::from_ticks(tick, WARP_RATE_HZ));
        for &channel in &self.channels {
            inner.event(AsyncEvent::BurstAck { channel, time });
        }
        Ok(())
    }
}

impl TxStreamer for WarpTx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    /// Stages samples; at `end_of_burst` writes them and triggers at the
    /// burst's time (blocking until then).
    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        _timeout: Duration,
    ) -> Result<usize, RadioError> {
        let n = check_buffers(buffs, self.channels.len())?;
        if md.start_of_burst || self.staged[0].is_empty() {
            self.staged.iter_mut().for_each(Vec::clear);
            self.burst_time = md.time;
        }
        if self.staged[0].len() + n > BUFFER_SAMPLES {
            self.staged.iter_mut().for_each(Vec::clear);
            return Err(RadioError::InvalidArgument(format!(
                "a WARP burst holds at most {BUFFER_SAMPLES} samples per channel; the burst was discarded"
            )));
        }
        for (s, b) in self.staged.iter_mut().zip(buffs) {
            s.extend_from_slice(b);
        }
        if md.end_of_burst && !self.staged[0].is_empty() {
            let r = self.transmit();
            self.staged.iter_mut().for_each(Vec::clear);
            r?;
        }
        Ok(n)
    }

    fn recv_async_msg(&mut self, timeout: Duration) -> Option<AsyncEvent> {
        // Events are produced by `send` on this thread: none arrive later.
        let _ = timeout;
        lock(&self.inner).events.pop_front()
    }
}
