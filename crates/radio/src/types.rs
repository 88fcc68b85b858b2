//! The device-layer contract every backend implements.

use radiohost_iq::Cf32;
use radiohost_rt::Time;
use std::time::Duration;
use thiserror::Error;

/// What went wrong talking to a radio. Messages say what to do.
#[derive(Debug, Error)]
pub enum RadioError {
    #[error("channel {channel} does not exist: this radio has {available} {direction} channel(s)")]
    NoSuchChannel {
        channel: usize,
        available: usize,
        direction: &'static str,
    },
    #[error("{what} is not supported by the {backend} backend")]
    Unsupported { backend: &'static str, what: String },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{0} buffers given but the streamer has {1} channel(s): pass one buffer per channel")]
    BufferCount(usize, usize),
    #[error("the radio is gone: {0}")]
    Disconnected(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{backend} backend: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
}

/// Identity and shape of a radio.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RadioInfo {
    /// Backend name: "emulated", "warp", "chdr", "sigmf", ...
    pub backend: &'static str,
    /// Human description (addresses, file names, node ids).
    pub description: String,
    pub rx_channels: usize,
    pub tx_channels: usize,
    /// Largest `num_samps` one `NumSampsAndDone` may ask for (buffer-based
    /// radios such as WARP have a fixed RX buffer); `None` = unbounded.
    pub max_rx_burst: Option<u64>,
}

/// How RX streaming is started or stopped (UHD `stream_cmd_t::stream_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamMode {
    /// Stream until `Stop`.
    StartContinuous,
    /// Stop a continuous stream.
    Stop,
    /// Deliver exactly this many samples per channel, then end the burst.
    NumSampsAndDone(u64),
}

/// A stream command: a mode, now (`time: None`) or at a sample-clock time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamCmd {
    pub mode: StreamMode,
    pub time: Option<Time>,
}

impl StreamCmd {
    pub fn now(mode: StreamMode) -> Self {
        StreamCmd { mode, time: None }
    }
    pub fn at(mode: StreamMode, time: Time) -> Self {
        StreamCmd {
            mode,
            time: Some(time),
        }
    }
}

/// Which channels a streamer carries, in buffer order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamArgs {
    pub channels: Vec<usize>,
}

impl StreamArgs {
    pub fn channels(channels: impl Into<Vec<usize>>) -> Self {
        StreamArgs {
            channels: channels.into(),
        }
    }
}

/// Why a `recv` returned fewer samples than asked, as UHD reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum RxErrorCode {
    #[default]
    None,
    /// Nothing arrived within the timeout.
    Timeout,
    /// A timed command's time had already passed ("L").
    LateCommand,
    /// The host did not keep up and samples were lost ("O").
    Overflow,
    /// Packets were lost on the way ("D").
    Dropped,
    /// A packet could not be decoded.
    BadPacket,
}

/// What came with received samples (UHD `rx_metadata_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxMetadata {
    /// Sample-clock time of the first sample returned.
    pub time: Option<Time>,
    pub start_of_burst: bool,
    pub end_of_burst: bool,
    pub error: RxErrorCode,
}

/// How samples are to be sent (UHD `tx_metadata_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxMetadata {
    /// Transmit the first sample at this sample-clock time; `None` = as soon as possible.
    pub time: Option<Time>,
    pub start_of_burst: bool,
    pub end_of_burst: bool,
}

/// An asynchronous report from the radio (UHD `async_metadata_t` events and
/// the letters UHD prints for them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum AsyncEvent {
    /// A burst ended as asked.
    BurstAck { channel: usize, time: Option<Time> },
    /// TX ran out of samples mid-burst ("U").
    Underflow { channel: usize, time: Option<Time> },
    /// RX samples were lost because the host was slow ("O").
    Overflow { channel: usize, time: Option<Time> },
    /// A timed packet or command arrived after its time ("L").
    Late { channel: usize, time: Option<Time> },
    /// TX packets arrived out of sequence ("S").
    SeqError { channel: usize, time: Option<Time> },
    /// RX packets were lost on the way ("D").
    Dropped { channel: usize, time: Option<Time> },
}

impl AsyncEvent {
    /// UHD's one-letter code ('A' for a burst ack, which UHD does not print).
    pub fn code(&self) -> char {
        match self {
            AsyncEvent::BurstAck { .. } => 'A',
            AsyncEvent::Underflow { .. } => 'U',
            AsyncEvent::Overflow { .. } => 'O',
            AsyncEvent::Late { .. } => 'L',
            AsyncEvent::SeqError { .. } => 'S',
            AsyncEvent::Dropped { .. } => 'D',
        }
    }
}

/// Receives samples from some channels of a radio.
pub trait RxStreamer: Send {
    /// Channels carried, in buffer order.
    fn num_channels(&self) -> usize;
    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError>;
    /// Fills up to `buffs[c].len()` samples of every channel (all buffers the
    /// same length) and returns how many per channel. 0 with
    /// `md.error == Timeout` when nothing came within `timeout`.
    fn recv(
        &mut self,
        buffs: &mut [&mut [Cf32]],
        md: &mut RxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError>;
}

/// Sends samples to some channels of a radio.
pub trait TxStreamer: Send {
    fn num_channels(&self) -> usize;
    /// Queues `buffs[c]` (all the same length) for transmission; returns how
    /// many samples per channel were accepted.
    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError>;
    /// The next asynchronous event, waiting at most `timeout`.
    fn recv_async_msg(&mut self, timeout: Duration) -> Option<AsyncEvent>;
}

/// A radio device: channels, rate, centre frequency, time, and streamers.
pub trait Radio: Send {
    fn info(&self) -> RadioInfo;
    fn rate(&self) -> f64;
    /// Asks for a sample rate; returns the rate actually set.
    fn set_rate(&mut self, rate_hz: f64) -> Result<f64, RadioError>;
    fn center_freq(&self) -> f64;
    /// Asks for a centre frequency; returns the frequency actually tuned.
    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError>;
    /// Current sample-clock time.
    fn time_now(&self) -> Time;
    /// Sets the sample clock (UHD `set_time_now`).
    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError>;
    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError>;
    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError>;
}

/// Checks `channels` against `available`; shared by every backend.
pub fn check_channels(
    channels: &[usize],
    available: usize,
    direction: &'static str,
) -> Result<(), RadioError> {
    if channels.is_empty() {
        return Err(RadioError::InvalidArgument(format!(
            "a {direction} stream needs at least one channel"
        )));
    }
    match channels.iter().find(|&&c| c >= available) {
        Some(&channel) => Err(RadioError::NoSuchChannel {
            channel,
            available,
            direction,
        }),
        None => Ok(()),
    }
}

/// Checks a `send`/`recv` call's buffers: one per streamer channel, all the
/// same length. Returns that length; shared by every backend.
pub fn check_buffers<B: AsRef<[Cf32]>>(buffs: &[B], channels: usize) -> Result<usize, RadioError> {
    if buffs.len() != channels {
        return Err(RadioError::BufferCount(buffs.len(), channels));
    }
    let len = buffs.first().map_or(0, |b| b.as_ref().len());
    if buffs.iter().any(|b| b.as_ref().len() != len) {
        return Err(RadioError::InvalidArgument(
            "every channel's buffer must have the same length".into(),
        ));
    }
    Ok(len)
}
