//! The ZeroMQ backend: a radio whose channels are gr-zeromq streams, so GNU Radio
//! flowgraphs (`zeromq.pub_sink`/`push_sink` into radiohost, `sub_source`/
//! `pull_source` out of it), pyzmq scripts and radiohost talk to each other.
//!
//! Wire format, as gr-zeromq's stream blocks send it with `pass_tags=False`: each
//! message's last frame is raw items (a leading key frame, when the sink has a
//! key, is skipped); items are `gr_complex` (two little-endian f32) or short pairs
//! (two little-endian i16, full scale 32767). Channels are one endpoint each, or
//! one endpoint carrying `channels` items interleaved (as `blocks.interleave`
//! makes them). RX sockets are SUB or PULL (connecting to the flowgraph's bound
//! sink by default), TX sockets PUB or PUSH (bound for the flowgraph's source).
//!
//! Time: the streams carry no timestamps, so the sample clock is the sample
//! count. RX sample `k` (counted from `open`) is at tick `k`; TX keeps its own
//! count of samples put on the wire, and a timed burst is preceded by zeros up to
//! its tick (a burst whose tick has passed is reported late and not sent), as a
//! radio transmits nothing between bursts. [`Radio::set_time_now`] offsets both.
//! The last [`HISTORY`] samples per RX channel are kept, so a command may start
//! in the recent past; older starts are late. PUB drops messages while nobody is
//! subscribed (ZeroMQ's rule); PUSH waits for a peer up to the send timeout.

pub mod zmtp;

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use radiohost_iq::Ci16;

use crate::{
    check_buffers, check_channels, AsyncEvent, Cf32, Radio, RadioError, RadioInfo, RxErrorCode,
    RxMetadata, RxStreamer, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata, TxStreamer,
};
use zmtp::{OnMessage, Socket, SocketType};

const BACKEND: &str = "zeromq";
/// RX samples kept per channel for commands that start in the past.
pub const HISTORY: usize = 1 << 20;
/// Most zeros put before a timed burst (about 16 s at 1 MS/s).
pub const MAX_GAP: u64 = 1 << 24;
/// Items per TX message (gr-zeromq sources accept any size).
const TX_CHUNK: usize = 1 << 14;
const MAX_EVENTS: usize = 1024;

/// Which ZeroMQ socket pair carries the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZmqPattern {
    /// RX SUB, TX PUB.
    PubSub,
    /// RX PULL, TX PUSH.
    PushPull,
}

/// The item on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZmqItem {
    /// GNU Radio `gr_complex`: two little-endian f32, 8 bytes.
    GrComplex,
    /// Two little-endian i16 (I, Q), 4 bytes, full scale 32767.
    ShortPair,
}

impl ZmqItem {
    fn bytes(self) -> usize {
        match self {
            ZmqItem::GrComplex => 8,
            ZmqItem::ShortPair => 4,
        }
    }

    fn decode(self, b: &[u8]) -> Cf32 {
        match self {
            ZmqItem::GrComplex => Cf32::new(
                f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                f32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            ),
            ZmqItem::ShortPair => Ci16::new(
                i16::from_le_bytes([b[0], b[1]]),
                i16::from_le_bytes([b[2], b[3]]),
            )
            .to_cf32(),
        }
    }

    fn encode(self, s: Cf32, out: &mut Vec<u8>) {
        match self {
            ZmqItem::GrComplex => {
                out.extend_from_slice(&s.re.to_le_bytes());
                out.extend_from_slice(&s.im.to_le_bytes());
            }
            ZmqItem::ShortPair => {
                let q = Ci16::from_cf32(s);
                out.extend_from_slice(&q.re.to_le_bytes());
                out.extend_from_slice(&q.im.to_le_bytes());
            }
        }
    }
}

/// How channels map onto endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZmqLayout {
    /// Channel `c` is endpoint `c`.
    PerChannel,
    /// One endpoint per direction carries `channels` items interleaved.
    Interleaved { channels: usize },
}

/// A ZeroMQ radio's endpoints and wire format.
#[derive(Clone, Debug)]
pub struct ZmqConfig {
    /// RX endpoints (`tcp://host:port`).
    pub rx: Vec<String>,
    /// TX endpoints.
    pub tx: Vec<String>,
    pub pattern: ZmqPattern,
    pub item: ZmqItem,
    pub layout: ZmqLayout,
    /// Nominal sample rate (the streams have none of their own).
    pub rate_hz: f64,
    /// RX sockets bind instead of connecting (gr-zeromq sinks bind by default).
    pub rx_bind: bool,
    /// TX sockets bind (gr-zeromq sources connect by default).
    pub tx_bind: bool,
}

impl ZmqConfig {
    fn channels(&self, endpoints: usize, direction: &str) -> Result<usize, RadioError> {
        match self.layout {
            ZmqLayout::PerChannel => Ok(endpoints),
            ZmqLayout::Interleaved { channels } => match endpoints {
                0 => Ok(0),
                1 if channels > 0 => Ok(channels),
                1 => Err(RadioError::InvalidArgument(
                    "an interleaved layout needs at least 1 channel".into(),
                )),
                n => Err(RadioError::InvalidArgument(format!(
                    "an interleaved layout carries every channel on one endpoint, but {n} {direction} endpoints were given"
                ))),
            },
        }
    }
}

/// Received samples of every RX channel: the recent history and where it starts.
struct RxState {
    /// Per channel: samples from tick `start[c]`.
    channels: Vec<VecDeque<Cf32>>,
    start: Vec<u64>,
    /// Per endpoint, the channel the next interleaved item belongs to.
    phase: Vec<usize>,
    /// Bytes of an item split across messages, per endpoint.
    partial: Vec<Vec<u8>>,
}

impl RxState {
    /// Ticks received on every channel (the sample clock).
    fn arrived(&self) -> u64 {
        self.channels
            .iter()
            .zip(&self.start)
            .map(|(c, &s)| s + c.len() as u64)
            .min()
            .unwrap_or(0)
    }

    /// Oldest tick still held on every channel.
    fn oldest(&self) -> u64 {
        self.start.iter().copied().max().unwrap_or(0)
    }

    fn push(&mut self, channel: usize, s: Cf32) {
        let c = &mut self.channels[channel];
        if c.len() == HISTORY {
            c.pop_front();
            self.start[channel] += 1;
        }
        c.push_back(s);
    }
}

struct RxShared {
    state: Mutex<RxState>,
    arrived: Condvar,
}

impl RxShared {
    fn lock(&self) -> MutexGuard<'_, RxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one message from endpoint `ep` (channel `ep`, or all interleaved).
    fn on_message(&self, ep: usize, item: ZmqItem, interleaved: bool, mut frames: Vec<Vec<u8>>) {
        let Some(data) = frames.pop() else { return };
        let mut st = self.lock();
        let mut bytes = std::mem::take(&mut st.partial[ep]);
        bytes.extend_from_slice(&data);
        let size = item.bytes();
        let whole = bytes.len() / size * size;
        let channels = st.channels.len();
        for b in bytes[..whole].chunks_exact(size) {
            let s = item.decode(b);
            if interleaved {
                let c = st.phase[ep];
                st.push(c, s);
                st.phase[ep] = (c + 1) % channels;
            } else {
                st.push(ep, s);
            }
        }
        st.partial[ep] = bytes[whole..].to_vec();
        drop(st);
        self.arrived.notify_all();
    }
}

/// The TX side: samples put on the wire so far, and the sockets.
struct TxShared {
    sockets: Vec<Socket>,
    item: ZmqItem,
    interleaved: bool,
    channels: usize,
    /// Ticks sent per channel (all channels advance together).
    sent: Mutex<u64>,
}

struct Clock {
    rate: f64,
    freq: f64,
    /// Radio tick minus stream tick.
    offset: i128,
}

/// A radio over gr-zeromq streams; see the module docs.
pub struct ZmqRadio {
    cfg: ZmqConfig,
    rx_sockets: Vec<Socket>,
    rx: Arc<RxShared>,
    tx: Arc<TxShared>,
    clock: Arc<Mutex<Clock>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn io_error(endpoint: &str, e: std::io::Error) -> RadioError {
    RadioError::Backend {
        backend: BACKEND,
        message: format!("{endpoint}: {e}"),
    }
}

impl ZmqRadio {
    /// Opens every endpoint (binding or connecting in the background).
    pub fn open(cfg: ZmqConfig) -> Result<Self, RadioError> {
        if !(cfg.rate_hz.is_finite() && cfg.rate_hz > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "sample rate {} Hz: give a positive rate",
                cfg.rate_hz
            )));
        }
        if cfg.rx.is_empty() && cfg.tx.is_empty() {
            return Err(RadioError::InvalidArgument(
                "give at least one RX or TX endpoint".into(),
            ));
        }
        let rx_channels = cfg.channels(cfg.rx.len(), "RX")?;
        let tx_channels = cfg.channels(cfg.tx.len(), "TX")?;
        let interleaved = matches!(cfg.layout, ZmqLayout::Interleaved { .. });
        let (rx_type, tx_type) = match cfg.pattern {
            ZmqPattern::PubSub => (SocketType::Sub, SocketType::Pub),
            ZmqPattern::PushPull => (SocketType::Pull, SocketType::Push),
        };
        let rx = Arc::new(RxShared {
            state: Mutex::new(RxState {
                channels: vec![VecDeque::new(); rx_channels],
                start: vec![0; rx_channels],
                phase: vec![0; cfg.rx.len()],
                partial: vec![Vec::new(); cfg.rx.len()],
            }),
            arrived: Condvar::new(),
        });
        let mut tx_sockets = Vec::new();
        for ep in &cfg.tx {
            tx_sockets.push(
                Socket::open(tx_type, ep, cfg.tx_bind, b"", None).map_err(|e| io_error(ep, e))?,
            );
        }
        let mut rx_sockets = Vec::new();
        for (i, ep) in cfg.rx.iter().enumerate() {
            let shared = rx.clone();
            let item = cfg.item;
            let on: OnMessage = Arc::new(move |m| shared.on_message(i, item, interleaved, m));
            rx_sockets.push(
                Socket::open(rx_type, ep, cfg.rx_bind, b"", Some(on))
                    .map_err(|e| io_error(ep, e))?,
            );
        }
        Ok(ZmqRadio {
            tx: Arc::new(TxShared {
                sockets: tx_sockets,
                item: cfg.item,
                interleaved,
                channels: tx_channels,
                sent: Mutex::new(0),
            }),
            rx_sockets,
            rx,
            clock: Arc::new(Mutex::new(Clock {
                rate: cfg.rate_hz,
                freq: 0.0,
                offset: 0,
            })),
            cfg,
        })
    }

    /// Waits until every endpoint has a peer (a PUB: a subscriber), so nothing
    /// sent is dropped for want of one. Fails naming the endpoints still alone.
    pub fn wait_connected(&self, timeout: Duration) -> Result<(), RadioError> {
        let deadline = Instant::now() + timeout;
        let alone: Vec<&str> = self
            .rx_sockets
            .iter()
            .chain(&self.tx.sockets)
            .filter(|s| !s.wait_ready(deadline.saturating_duration_since(Instant::now())))
            .map(|s| s.endpoint())
            .collect();
        if alone.is_empty() {
            Ok(())
        } else {
            Err(RadioError::Disconnected(format!(
                "no ZeroMQ peer on {} within {timeout:?}",
                alone.join(", ")
            )))
        }
    }

    /// Where bound TX sockets listen (the port, when `:0` was asked).
    pub fn tx_local_addrs(&self) -> Vec<Option<std::net::SocketAddr>> {
        self.tx.sockets.iter().map(Socket::local_addr).collect()
    }

    /// Where bound RX sockets listen.
    pub fn rx_local_addrs(&self) -> Vec<Option<std::net::SocketAddr>> {
        self.rx_sockets.iter().map(Socket::local_addr).collect()
    }
}

impl Radio for ZmqRadio {
    fn info(&self) -> RadioInfo {
        RadioInfo {
            backend: BACKEND,
            description: format!(
                "ZeroMQ {:?} {:?} {:?} rx=[{}] tx=[{}]",
                self.cfg.pattern,
                self.cfg.item,
                self.cfg.layout,
                self.cfg.rx.join(", "),
                self.cfg.tx.join(", ")
            ),
            rx_channels: lock(&self.rx.state).channels.len(),
            tx_channels: self.tx.channels,
            max_rx_burst: None,
        }
    }

    fn rate(&self) -> f64 {
        lock(&self.clock).rate
    }

    fn set_rate(&mut self, rate_hz: f64) -> Result<f64, RadioError> {
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "sample rate {rate_hz} Hz: give a positive rate"
            )));
        }
        lock(&self.clock).rate = rate_hz;
        Ok(rate_hz)
    }

    fn center_freq(&self) -> f64 {
        lock(&self.clock).freq
    }

    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        if !freq_hz.is_finite() {
            return Err(RadioError::InvalidArgument(format!(
                "centre frequency {freq_hz} Hz is not a number"
            )));
        }
        lock(&self.clock).freq = freq_hz;
        Ok(freq_hz)
    }

    fn time_now(&self) -> Time {
        let stream = if self.rx_sockets.is_empty() {
            *lock(&self.tx.sent)
        } else {
            self.rx.lock().arrived()
        };
        let c = lock(&self.clock);
        Time::from_ticks((stream as i128 + c.offset).max(0) as u64, c.rate)
    }

    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        let stream = if self.rx_sockets.is_empty() {
            *lock(&self.tx.sent)
        } else {
            self.rx.lock().arrived()
        };
        let mut c = lock(&self.clock);
        c.offset = time.to_ticks(c.rate) as i128 - stream as i128;
        Ok(())
    }

    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        let available = self.rx.lock().channels.len();
        check_channels(&args.channels, available, "RX")?;
        Ok(Box::new(ZmqRx {
            rx: self.rx.clone(),
            clock: self.clock.clone(),
            channels: args.channels.clone(),
            state: RxMode::Idle,
        }))
    }

    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError> {
        check_channels(&args.channels, self.tx.channels, "TX")?;
        Ok(Box::new(ZmqTx {
            tx: self.tx.clone(),
            clock: self.clock.clone(),
            channels: args.channels.clone(),
            events: VecDeque::new(),
            skipping: false,
        }))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxMode {
    Idle,
    /// The last command started before the history: report it on the next recv.
    Late,
    /// Deliver from stream tick `next`; `left` samples (None: until Stop).
    Streaming {
        next: u64,
        left: Option<u64>,
        first: bool,
    },
}

struct ZmqRx {
    rx: Arc<RxShared>,
    clock: Arc<Mutex<Clock>>,
    channels: Vec<usize>,
    state: RxMode,
}

impl RxStreamer for ZmqRx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError> {
        let left = match cmd.mode {
            StreamMode::Stop => {
                self.state = RxMode::Idle;
                return Ok(());
            }
            StreamMode::StartContinuous => None,
            StreamMode::NumSampsAndDone(n) => Some(n),
        };
        let st = self.rx.lock();
        let start = match cmd.time {
            None => st.arrived(),
            Some(t) => {
                let c = lock(&self.clock);
                let tick = t.to_ticks(c.rate) as i128 - c.offset;
                if tick < st.oldest() as i128 {
                    self.state = RxMode::Late;
                    return Ok(());
                }
                tick as u64
            }
        };
        self.state = RxMode::Streaming {
            next: start,
            left,
            first: true,
        };
        Ok(())
    }

    fn recv(
        &mut self,
        buffs: &mut [&mut [Cf32]],
        md: &mut RxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError> {
        let len = check_buffers(buffs, self.channels.len())?;
        *md = RxMetadata::default();
        let deadline = Instant::now() + timeout;
        let RxMode::Streaming { next, left, first } = self.state else {
            if self.state == RxMode::Late {
                self.state = RxMode::Idle;
                md.error = RxErrorCode::LateCommand;
                return Ok(0);
            }
            if len > 0 {
                std::thread::sleep(timeout);
                md.error = RxErrorCode::Timeout;
            }
            return Ok(0);
        };
        if len == 0 || left == Some(0) {
            return Ok(0);
        }
        let mut st = self.rx.lock();
        loop {
            if next < st.oldest() {
                // The host fell more than HISTORY samples behind: skip to what is held.
                self.state = RxMode::Streaming {
                    next: st.oldest(),
                    left,
                    first,
                };
                md.error = RxErrorCode::Overflow;
                return Ok(0);
            }
            if st.arrived() > next {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                md.error = RxErrorCode::Timeout;
                return Ok(0);
            }
            st = self
                .rx
                .arrived
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let mut n = ((st.arrived() - next) as usize).min(len);
        if let Some(l) = left {
            n = n.min(l as usize);
        }
        for (buf, &c) in buffs.iter_mut().zip(&self.channels) {
            let from = (next - st.start[c]) as usize;
            for (o, s) in buf[..n]
                .iter_mut()
                .zip(st.channels[c].range(from..from + n))
            {
                *o = *s;
            }
        }
        drop(st);
        let c = lock(&self.clock);
        md.time = Some(Time::from_ticks(
            (next as i128 + c.offset).max(0) as u64,
            c.rate,
        ));
        md.start_of_burst = first;
        let left = left.map(|l| l - n as u64);
        md.end_of_burst = left == Some(0);
        self.state = if md.end_of_burst {
            RxMode::Idle
        } else {
            RxMode::Streaming {
                next: next + n as u64,
                left,
                first: false,
            }
        };
        Ok(n)
    }
}

struct ZmqTx {
    tx: Arc<TxShared>,
    clock: Arc<Mutex<Clock>>,
    channels: Vec<usize>,
    events: VecDeque<AsyncEvent>,
    /// Rest of a burst whose start was late: not sent.
    skipping: bool,
}

impl ZmqTx {
    fn event(&mut self, e: AsyncEvent) {
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Puts `count` samples per TX channel on the wire (`None`: zeros).
    fn put(&self, rows: Option<&[Vec<Cf32>]>, count: usize, timeout: Duration) -> bool {
        let tx = &self.tx;
        let mut msg = Vec::new();
        let mut done = 0;
        while done < count {
            let n = (count - done).min(TX_CHUNK);
            let sample = |c: usize, i: usize| rows.map_or(Cf32::default(), |r| r[c][done + i]);
            if tx.interleaved {
                msg.clear();
                for i in 0..n {
                    for c in 0..tx.channels {
                        tx.item.encode(sample(c, i), &mut msg);
                    }
                }
                if !tx.sockets[0].send(&[&msg], timeout) {
                    return false;
                }
            } else {
                for (c, socket) in tx.sockets.iter().enumerate() {
                    msg.clear();
                    for i in 0..n {
                        tx.item.encode(sample(c, i), &mut msg);
                    }
                    if !socket.send(&[&msg], timeout) {
                        return false;
                    }
                }
            }
            done += n;
        }
        true
    }
}

impl TxStreamer for ZmqTx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError> {
        let len = check_buffers(buffs, self.channels.len())?;
        if len == 0 && !md.end_of_burst {
            return Ok(0);
        }
        let (rate, offset) = {
            let c = lock(&self.clock);
            (c.rate, c.offset)
        };
        let tx = self.tx.clone();
        let mut sent = lock(&tx.sent);
        let radio_time = |tick: u64| Time::from_ticks((tick as i128 + offset).max(0) as u64, rate);
        if let Some(t) = md.time {
            let target = t.to_ticks(rate) as i128 - offset;
            self.skipping = target < *sent as i128;
            if self.skipping {
                for channel in self.channels.clone() {
                    self.event(AsyncEvent::Late {
                        channel,
                        time: Some(t),
                    });
                }
            } else {
                let gap = (target - *sent as i128) as u64;
                if gap > MAX_GAP {
                    return Err(RadioError::InvalidArgument(format!(
                        "a burst {gap} samples after the last one: a ZeroMQ stream has no clock, so radiohost would have to send {gap} zeros (at most {MAX_GAP}); send sooner or set_time_now"
                    )));
                }
                if !self.put(None, gap as usize, timeout) {
                    return Ok(0);
                }
                *sent += gap;
            }
        }
        if self.skipping {
            if md.end_of_burst {
                self.skipping = false;
            }
            return Ok(len);
        }
        // Every TX channel goes on the wire; channels this streamer does not carry
        // send zeros, keeping the streams aligned.
        let mut rows = vec![vec![Cf32::default(); len]; tx.channels];
        for (b, &c) in buffs.iter().zip(&self.channels) {
            rows[c].copy_from_slice(b);
        }
        if !self.put(Some(&rows), len, timeout) {
            return Ok(0);
        }
        *sent += len as u64;
        let end = *sent;
        drop(sent);
        if md.end_of_burst {
            for channel in self.channels.clone() {
                self.event(AsyncEvent::BurstAck {
                    channel,
                    time: Some(radio_time(end)),
                });
            }
        }
        Ok(len)
    }

    fn recv_async_msg(&mut self, timeout: Duration) -> Option<AsyncEvent> {
        if self.events.is_empty() && !timeout.is_zero() {
            // Events come from send on this thread; nothing else can arrive.
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
        }
        self.events.pop_front()
    }
}
