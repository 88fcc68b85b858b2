//! Radios in UHD's Python vocabulary: ``Radio`` (a backend), ``get_rx_stream`` /
//! ``get_tx_stream``, ``StreamCMD``, ``recv(buffer, metadata)``,
//! ``send(buffer, metadata)``, ``recv_async_msg``. Buffers are numpy complex64
//! arrays, (channels, samples) or (samples,) for one channel, filled and read in
//! place (no copies); the GIL is released while a call waits.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use num_complex::Complex32;
use numpy::prelude::*;
use numpy::{PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use radiohost_radio::chdr::{ChdrConfig, ChdrRadio};
use radiohost_radio::conformance::Guarded;
use radiohost_radio::emulated::EmulatedRadio;
use radiohost_radio::sigmf::SigMfRadio;
use radiohost_radio::warp::{WarpConfig, WarpRadio};
use radiohost_radio::zeromq::{ZmqConfig, ZmqItem, ZmqLayout, ZmqPattern, ZmqRadio};
use radiohost_radio::{
    AsyncEvent, Radio as RadioTrait, RxErrorCode, RxMetadata as Rx, RxStreamer as RxTrait,
    StreamArgs, StreamCmd as Cmd, StreamMode as Mode, Time, TxMetadata as Tx,
    TxStreamer as TxTrait,
};
use radiohost_warp::emulator::{Emulator, EmulatorConfig};
use radiohost_warp::Addressing;

use crate::convert::{c_slice, c_slice_mut, to_py};
use crate::errors::{self, value};

fn lock<T: ?Sized>(m: &Mutex<Box<T>>) -> MutexGuard<'_, Box<T>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn timeout(seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        value(format!(
            "timeout {seconds} s: give a non-negative number of seconds"
        ))
    })
}

/// How RX streaming starts or stops (UHD ``uhd.types.StreamMode``).
#[pyclass(eq, eq_int, from_py_object, module = "radiohost")]
#[derive(Clone, Copy, PartialEq)]
#[allow(non_camel_case_types)]
pub enum StreamMode {
    /// Stream until a ``stop_cont`` command.
    start_cont,
    /// Stop a continuous stream.
    stop_cont,
    /// Deliver ``num_samps`` samples per channel, then end the burst.
    num_done,
}

/// A stream command (UHD ``uhd.types.StreamCMD``): a mode, ``num_samps`` for
/// ``num_done``, and either ``stream_now`` or a sample-clock ``time_ns``.
#[pyclass(module = "radiohost", get_all, set_all)]
#[derive(Clone)]
pub struct StreamCMD {
    pub mode: StreamMode,
    pub num_samps: u64,
    pub stream_now: bool,
    pub time_ns: Option<u64>,
}

#[pymethods]
impl StreamCMD {
    #[new]
    #[pyo3(signature = (mode, num_samps=0, *, time_ns=None))]
    fn new(mode: StreamMode, num_samps: u64, time_ns: Option<u64>) -> Self {
        StreamCMD {
            mode,
            num_samps,
            stream_now: time_ns.is_none(),
            time_ns,
        }
    }
}

impl StreamCMD {
    fn to_cmd(&self) -> PyResult<Cmd> {
        let mode = match self.mode {
            StreamMode::start_cont => Mode::StartContinuous,
            StreamMode::stop_cont => Mode::Stop,
            StreamMode::num_done => Mode::NumSampsAndDone(self.num_samps),
        };
        match (self.stream_now, self.time_ns) {
            (true, _) => Ok(Cmd::now(mode)),
            (false, Some(t)) => Ok(Cmd::at(mode, Time::from_ns(t))),
            (false, None) => Err(value("stream_now is False but no time_ns is set")),
        }
    }
}

/// What came with received samples (UHD ``uhd.types.RXMetadata``): ``time_ns`` of
/// the first sample, start/end of burst, and ``error_code``: "none", "timeout",
/// "late_command", "overflow", "dropped" or "bad_packet".
#[pyclass(module = "radiohost", get_all)]
#[derive(Clone, Default)]
pub struct RXMetadata {
    pub time_ns: Option<u64>,
    pub start_of_burst: bool,
    pub end_of_burst: bool,
    pub error_code: &'static str,
}

#[pymethods]
impl RXMetadata {
    #[new]
    fn new() -> Self {
        RXMetadata {
            error_code: "none",
            ..Default::default()
        }
    }
    fn __repr__(&self) -> String {
        let py_bool = |b: bool| if b { "True" } else { "False" };
        format!(
            "RXMetadata(time_ns={}, start_of_burst={}, end_of_burst={}, error_code='{}')",
            self.time_ns.map_or("None".into(), |t| t.to_string()),
            py_bool(self.start_of_burst),
            py_bool(self.end_of_burst),
            self.error_code
        )
    }
}

fn error_name(e: RxErrorCode) -> &'static str {
    match e {
        RxErrorCode::None => "none",
        RxErrorCode::Timeout => "timeout",
        RxErrorCode::LateCommand => "late_command",
        RxErrorCode::Overflow => "overflow",
        RxErrorCode::Dropped => "dropped",
        RxErrorCode::BadPacket => "bad_packet",
    }
}

/// How samples are sent (UHD ``uhd.types.TXMetadata``): ``time_ns`` (None: as soon
/// as possible), start and end of burst.
#[pyclass(module = "radiohost", get_all, set_all)]
#[derive(Clone, Default)]
pub struct TXMetadata {
    pub time_ns: Option<u64>,
    pub start_of_burst: bool,
    pub end_of_burst: bool,
}

#[pymethods]
impl TXMetadata {
    #[new]
    #[pyo3(signature = (*, time_ns=None, start_of_burst=false, end_of_burst=false))]
    fn new(time_ns: Option<u64>, start_of_burst: bool, end_of_burst: bool) -> Self {
        TXMetadata {
            time_ns,
            start_of_burst,
            end_of_burst,
        }
    }
}

/// Rows of a (channels, n) or (n,) buffer.
fn shape_of(shape: &[usize]) -> PyResult<(usize, usize)> {
    match shape {
        [n] => Ok((1, *n)),
        [c, n] => Ok((*c, *n)),
        s => Err(value(format!(
            "buffers must be (samples,) or (channels, samples), got shape {s:?}"
        ))),
    }
}

/// Receives samples (from ``Radio.get_rx_stream``).
#[pyclass(frozen, module = "radiohost")]
pub struct RxStreamer {
    inner: Mutex<Box<dyn RxTrait>>,
    channels: usize,
}

#[pymethods]
impl RxStreamer {
    /// Channels carried, in buffer order.
    fn get_num_channels(&self) -> usize {
        self.channels
    }

    /// Starts, stops or asks for a burst (a ``StreamCMD``).
    fn issue_stream_cmd(&self, py: Python<'_>, cmd: &StreamCMD) -> PyResult<()> {
        let cmd = cmd.to_cmd()?;
        py.detach(|| lock(&self.inner).issue_stream_cmd(cmd))
            .map_err(errors::radio)
    }

    /// recv(buffer, metadata, timeout=0.1) -> int
    ///
    /// Fills ``buffer`` (complex64, (channels, n) or (n,)) in place with up to n
    /// samples per channel; returns how many, and sets ``metadata``. 0 with
    /// ``error_code == "timeout"`` when nothing came in time.
    #[pyo3(signature = (buffer, metadata, timeout=0.1))]
    fn recv(
        &self,
        py: Python<'_>,
        mut buffer: PyReadwriteArrayDyn<'_, Complex32>,
        metadata: &Bound<'_, RXMetadata>,
        timeout: f64,
    ) -> PyResult<usize> {
        let wait = self::timeout(timeout)?;
        let (c, n) = shape_of(buffer.shape())?;
        let flat = c_slice_mut(&mut buffer, "buffer")?;
        let mut md = Rx::default();
        let got = py
            .detach(|| {
                let mut rows: Vec<&mut [Complex32]> = if n == 0 {
                    (0..c).map(|_| <&mut [Complex32]>::default()).collect()
                } else {
                    flat.chunks_exact_mut(n).collect()
                };
                lock(&self.inner).recv(&mut rows, &mut md, wait)
            })
            .map_err(errors::radio)?;
        let mut m = metadata.borrow_mut();
        m.time_ns = md.time.map(Time::ns);
        m.start_of_burst = md.start_of_burst;
        m.end_of_burst = md.end_of_burst;
        m.error_code = error_name(md.error);
        Ok(got)
    }
}

/// Sends samples (from ``Radio.get_tx_stream``).
#[pyclass(frozen, module = "radiohost")]
pub struct TxStreamer {
    inner: Mutex<Box<dyn TxTrait>>,
    channels: usize,
}

fn event_dict<'py>(py: Python<'py>, e: AsyncEvent) -> PyResult<Bound<'py, PyDict>> {
    let (name, channel, time) = match e {
        AsyncEvent::BurstAck { channel, time } => ("burst_ack", channel, time),
        AsyncEvent::Underflow { channel, time } => ("underflow", channel, time),
        AsyncEvent::Overflow { channel, time } => ("overflow", channel, time),
        AsyncEvent::Late { channel, time } => ("late", channel, time),
        AsyncEvent::SeqError { channel, time } => ("seq_error", channel, time),
        AsyncEvent::Dropped { channel, time } => ("dropped", channel, time),
    };
    let d = PyDict::new(py);
    d.set_item("event", name)?;
    d.set_item("code", e.code().to_string())?;
    d.set_item("channel", channel)?;
    d.set_item("time_ns", time.map(Time::ns))?;
    Ok(d)
}

#[pymethods]
impl TxStreamer {
    fn get_num_channels(&self) -> usize {
        self.channels
    }

    /// send(buffer, metadata, timeout=0.1) -> int
    ///
    /// Queues ``buffer`` (complex64, (channels, n) or (n,)) for transmission as
    /// ``metadata`` (a ``TXMetadata``) says; returns samples per channel accepted.
    #[pyo3(signature = (buffer, metadata, timeout=0.1))]
    fn send(
        &self,
        py: Python<'_>,
        buffer: PyReadonlyArrayDyn<'_, Complex32>,
        metadata: &TXMetadata,
        timeout: f64,
    ) -> PyResult<usize> {
        let wait = self::timeout(timeout)?;
        let (c, n) = shape_of(buffer.shape())?;
        let flat = c_slice(&buffer, "buffer")?;
        let md = Tx {
            time: metadata.time_ns.map(Time::from_ns),
            start_of_burst: metadata.start_of_burst,
            end_of_burst: metadata.end_of_burst,
        };
        py.detach(|| {
            let rows: Vec<&[Complex32]> = if n == 0 {
                vec![&[][..]; c]
            } else {
                flat.chunks_exact(n).collect()
            };
            lock(&self.inner).send(&rows, &md, wait)
        })
        .map_err(errors::radio)
    }

    /// recv_async_msg(timeout=0.1) -> dict or None
    ///
    /// The next asynchronous event: ``event`` ("burst_ack", "underflow", "late",
    /// "seq_error", ...), UHD's one-letter ``code``, ``channel`` and ``time_ns``.
    #[pyo3(signature = (timeout=0.1))]
    fn recv_async_msg<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let wait = self::timeout(timeout)?;
        let event = py.detach(|| lock(&self.inner).recv_async_msg(wait));
        event.map(|e| event_dict(py, e)).transpose()
    }
}

/// A radio: one backend's channels, rate, centre frequency and sample clock.
/// Open one with ``Radio.emulated``, ``Radio.sigmf``, ``Radio.warp_emulated``,
/// ``Radio.chdr`` or ``Radio.zeromq``.
#[pyclass(frozen, module = "radiohost")]
pub struct Radio {
    /// `None` once closed.
    inner: Mutex<Option<Box<dyn RadioTrait>>>,
}

impl Radio {
    fn wrap(r: impl RadioTrait + 'static) -> Self {
        Radio {
            inner: Mutex::new(Some(Box::new(r))),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut dyn RadioTrait) -> R) -> PyResult<R> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(r) => Ok(f(r.as_mut())),
            None => Err(errors::RadioError::new_err("the radio is closed")),
        }
    }
}

fn parse_addr(text: &str, what: &str) -> PyResult<std::net::SocketAddr> {
    text.parse().map_err(|e| {
        value(format!(
            "{what} {text:?}: {e} (write host:port, e.g. 127.0.0.1:5000)"
        ))
    })
}

#[pymethods]
impl Radio {
    /// An emulated radio on its own identity air of ``channels`` ports at ``rate``
    /// (Hz) on a simulated clock: what TX channel c sends, RX channel c receives.
    #[staticmethod]
    #[pyo3(signature = (rate, channels=1))]
    fn emulated(rate: f64, channels: usize) -> PyResult<Self> {
        Ok(Self::wrap(
            EmulatedRadio::loopback(rate, channels).map_err(errors::radio)?,
        ))
    }

    /// A radio over SigMF files: RX replays the recording ``input``; TX writes a
    /// cf32_le recording of ``tx_channels`` channels at ``output`` (``close`` the
    /// radio, or use it as a context manager, to finish it). Without an input the rate is ``rate``.
    #[staticmethod]
    #[pyo3(signature = (input=None, output=None, *, tx_channels=1, rate=None))]
    fn sigmf(
        input: Option<PathBuf>,
        output: Option<PathBuf>,
        tx_channels: usize,
        rate: Option<f64>,
    ) -> PyResult<Self> {
        if input.is_none() && output.is_none() {
            return Err(value(
                "give input (a recording to replay), output (a recording to write), or both",
            ));
        }
        if input.is_none() && rate.is_none() {
            return Err(value("without an input recording, give the rate (Hz)"));
        }
        let r = SigMfRadio::new(
            input.as_deref(),
            output.as_deref().map(|p| (p, tx_channels)),
            rate.unwrap_or(0.0),
        )
        .map_err(errors::radio)?;
        Ok(Self::wrap(r))
    }

    /// WARP v3 nodes: ``nodes`` emulated nodes started in this process on
    /// 127.0.0.1 ephemeral ports, ``paths_per_node`` RF paths each (channels =
    /// nodes x paths); buffer-based (num_done bursts), TX looped back to RX.
    #[staticmethod]
    #[pyo3(signature = (nodes=1, paths_per_node=1))]
    fn warp_emulated(nodes: u16, paths_per_node: usize) -> PyResult<Self> {
        let emu = Emulator::start(EmulatorConfig {
            nodes,
            addressing: Addressing::LOOPBACK.with_ports(0, 0),
            ..Default::default()
        })
        .map_err(|e| errors::RadioError::new_err(errors::message(&e)))?;
        let radio = WarpRadio::connect(
            WarpConfig::for_emulator(&emu, paths_per_node).map_err(errors::radio)?,
        )
        .map_err(errors::radio)?;
        Ok(Self::wrap(Guarded {
            radio: Box::new(radio),
            guard: emu,
        }))
    }

    /// A CHDR streaming radio (RFNoC-style over UDP) at ``radio_tx`` ("host:port"),
    /// RX channel c arriving with DstEPID ``rx_epids[c]``, TX channel c sent to
    /// ``tx_epids[c]``; the host socket binds ``bind``.
    #[staticmethod]
    #[pyo3(signature = (radio_tx, rx_epids, tx_epids, rate, *, bind="0.0.0.0:0", host_epid=1, samples_per_packet=200, history_packets=256))]
    #[allow(clippy::too_many_arguments)]
    fn chdr(
        radio_tx: &str,
        rx_epids: Vec<u16>,
        tx_epids: Vec<u16>,
        rate: f64,
        bind: &str,
        host_epid: u16,
        samples_per_packet: usize,
        history_packets: usize,
    ) -> PyResult<Self> {
        let r = ChdrRadio::connect(ChdrConfig {
            bind: parse_addr(bind, "bind")?,
            radio_tx: parse_addr(radio_tx, "radio_tx")?,
            rx_epids,
            tx_epids,
            host_epid,
            rate_hz: rate,
            samples_per_packet,
            history_packets,
        })
        .map_err(errors::radio)?;
        Ok(Self::wrap(r))
    }

    /// A ZeroMQ radio speaking gr-zeromq's wire format: RX from ``rx`` endpoints
    /// (SUB or PULL, connecting to a flowgraph's pub_sink/push_sink), TX to ``tx``
    /// endpoints (PUB or PUSH, bound for a flowgraph's sub_source/pull_source).
    /// ``pattern``: "pubsub" or "pushpull"; ``item``: "gr_complex" (complex64) or
    /// "short" (int16 I/Q pairs, full scale 32767); ``layout``: "per_channel"
    /// (one endpoint per channel) or "interleaved" (one endpoint carrying
    /// ``channels`` interleaved items). ``wait`` > 0: wait that many seconds for a
    /// peer on every endpoint (a PUB: a subscriber), else raise RadioError.
    #[staticmethod]
    #[pyo3(signature = (rate, *, rx=Vec::new(), tx=Vec::new(), pattern="pubsub", item="gr_complex", layout="per_channel", channels=1, rx_bind=false, tx_bind=true, wait=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn zeromq(
        py: Python<'_>,
        rate: f64,
        rx: Vec<String>,
        tx: Vec<String>,
        pattern: &str,
        item: &str,
        layout: &str,
        channels: usize,
        rx_bind: bool,
        tx_bind: bool,
        wait: f64,
    ) -> PyResult<Self> {
        let pattern = match pattern {
            "pubsub" => ZmqPattern::PubSub,
            "pushpull" => ZmqPattern::PushPull,
            o => {
                return Err(value(format!(
                    "pattern {o:?}: use \"pubsub\" or \"pushpull\""
                )))
            }
        };
        let item = match item {
            "gr_complex" | "complex64" => ZmqItem::GrComplex,
            "short" | "int16" => ZmqItem::ShortPair,
            o => {
                return Err(value(format!(
                    "item {o:?}: use \"gr_complex\" or \"short\""
                )))
            }
        };
        let layout = match layout {
            "per_channel" => ZmqLayout::PerChannel,
            "interleaved" => ZmqLayout::Interleaved { channels },
            o => {
                return Err(value(format!(
                    "layout {o:?}: use \"per_channel\" or \"interleaved\""
                )))
            }
        };
        let cfg = ZmqConfig {
            rx,
            tx,
            pattern,
            item,
            layout,
            rate_hz: rate,
            rx_bind,
            tx_bind,
        };
        let wait = self::timeout(wait)?;
        let r = py
            .detach(|| {
                let r = ZmqRadio::open(cfg)?;
                if !wait.is_zero() {
                    r.wait_connected(wait)?;
                }
                Ok(r)
            })
            .map_err(errors::radio)?;
        Ok(Self::wrap(r))
    }

    /// Backend, description, channel counts and largest RX burst, as a dict.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.with(|r| r.info())?)
    }

    fn get_rate(&self) -> PyResult<f64> {
        self.with(|r| r.rate())
    }
    /// Asks for a sample rate (Hz); returns the rate set.
    fn set_rate(&self, rate: f64) -> PyResult<f64> {
        self.with(|r| r.set_rate(rate))?.map_err(errors::radio)
    }
    fn get_center_freq(&self) -> PyResult<f64> {
        self.with(|r| r.center_freq())
    }
    /// Tunes (Hz); returns the frequency tuned.
    fn set_center_freq(&self, freq: f64) -> PyResult<f64> {
        self.with(|r| r.set_center_freq(freq))?
            .map_err(errors::radio)
    }
    /// The sample clock now, in ns.
    fn get_time_now(&self) -> PyResult<u64> {
        self.with(|r| r.time_now().ns())
    }
    /// Sets the sample clock (ns).
    fn set_time_now(&self, time_ns: u64) -> PyResult<()> {
        self.with(|r| r.set_time_now(Time::from_ns(time_ns)))?
            .map_err(errors::radio)
    }

    /// An RX streamer over ``channels`` (a list of channel numbers).
    #[pyo3(signature = (channels=vec![0]))]
    fn get_rx_stream(&self, channels: Vec<usize>) -> PyResult<RxStreamer> {
        let n = channels.len();
        let s = self
            .with(|r| r.rx_stream(&StreamArgs::channels(channels)))?
            .map_err(errors::radio)?;
        Ok(RxStreamer {
            inner: Mutex::new(s),
            channels: n,
        })
    }

    /// A TX streamer over ``channels``.
    #[pyo3(signature = (channels=vec![0]))]
    fn get_tx_stream(&self, channels: Vec<usize>) -> PyResult<TxStreamer> {
        let n = channels.len();
        let s = self
            .with(|r| r.tx_stream(&StreamArgs::channels(channels)))?
            .map_err(errors::radio)?;
        Ok(TxStreamer {
            inner: Mutex::new(s),
            channels: n,
        })
    }

    /// Closes the backend (a SigMF TX recording is finished: data and metadata
    /// written); later calls raise RadioError. Streamers already made keep working
    /// as far as their backend allows.
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.detach(|| drop(taken));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, py: Python<'_>, _t: Py<PyAny>, _v: Py<PyAny>, _tb: Py<PyAny>) {
        self.close(py);
    }
}
