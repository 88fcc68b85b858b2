//! The conformance suite every backend runs: the same checks against emulated,
//! WARP, CHDR and SigMF radios (and any future UHD or SoapySDR backend).
//!
//! A backend's test implements [`Harness`]: it opens a fresh radio, or a fresh
//! [`Loopback`] (a TX radio and how to observe what it sent on an RX radio,
//! TX channel `c` seen on RX channel `c`), and states its [`Capabilities`].
//! [`run_all`] runs every check on fresh setups and returns a
//! [`ConformanceReport`]: pass, fail (with a typed [`CheckFailure`]) or
//! skipped with the backend's stated reason. A panic inside a check is a
//! failure, not an abort. No check asserts how long anything took.

use crate::{
    AsyncEvent, Cf32, Radio, RadioError, RxErrorCode, RxMetadata, RxStreamer, StreamArgs,
    StreamCmd, StreamMode, Time, TxMetadata,
};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;
use thiserror::Error;

/// Whether a backend supports a feature; `No` says why not (printed as the
/// skip reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    Yes,
    No(String),
}

/// What a backend can do, as the checks need to know it.
#[derive(Clone, Debug)]
pub struct Capabilities {
    /// Largest `|rx - tx|` per I or Q component in a loopback (quantisation).
    pub tolerance: f32,
    /// Samples per channel of the loopback burst (at most `max_rx_burst`).
    pub burst_len: usize,
    /// How far ahead of `time_now` timed bursts and commands are scheduled,
    /// so setup finishes before the time comes. Not a timing assertion.
    pub lead: Time,
    /// Bound on any single wait (a recv, an async message).
    pub timeout: Duration,
    /// TX on one radio is observed on the loopback's RX radio.
    pub loopback: Support,
    /// `StartContinuous`/`Stop`.
    pub continuous: Support,
    /// Timed commands: a command or burst in the past is reported late.
    pub timed: Support,
    /// A TX burst (start and end of burst) produces `AsyncEvent::BurstAck`.
    pub burst_ack: Support,
}

/// A TX radio and the way to observe what it sent.
pub struct Loopback {
    pub tx: Box<dyn Radio>,
    /// Called after the burst was sent (its TX streamer still alive) with the
    /// TX radio; returns the radio to receive on (often the same one, or a
    /// reader over what the TX radio wrote).
    pub observe: ObserveFn,
}

/// See [`Loopback::observe`].
pub type ObserveFn = Box<dyn FnOnce(Box<dyn Radio>) -> Result<Box<dyn Radio>, RadioError> + Send>;

/// Opens fresh radios of one backend for the checks.
pub trait Harness {
    fn name(&self) -> String;
    fn capabilities(&self) -> Capabilities;
    /// A fresh radio with at least one RX channel.
    fn open(&self) -> Result<Box<dyn Radio>, RadioError>;
    fn loopback(&self) -> Result<Loopback, RadioError>;
}

/// Why a check failed.
#[derive(Debug, Error)]
pub enum CheckFailure {
    #[error("{step}: {source}")]
    Radio {
        step: &'static str,
        #[source]
        source: RadioError,
    },
    #[error("{step}: expected {expected}, got {got}")]
    Mismatch {
        step: &'static str,
        expected: String,
        got: String,
    },
    #[error("panicked: {0}")]
    Panicked(String),
}

/// The outcome of one check.
#[derive(Debug)]
pub enum Outcome {
    Pass,
    Fail(CheckFailure),
    Skipped(String),
}

#[derive(Debug)]
pub struct CheckResult {
    pub name: &'static str,
    pub outcome: Outcome,
}

/// Every check's outcome for one backend.
#[derive(Debug)]
pub struct ConformanceReport {
    pub backend: String,
    pub results: Vec<CheckResult>,
}

impl ConformanceReport {
    pub fn failures(&self) -> impl Iterator<Item = (&'static str, &CheckFailure)> {
        self.results.iter().filter_map(|r| match &r.outcome {
            Outcome::Fail(f) => Some((r.name, f)),
            _ => None,
        })
    }

    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Pass))
    }

    pub fn skipped(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.results.iter().filter_map(|r| match &r.outcome {
            Outcome::Skipped(why) => Some((r.name, why.as_str())),
            _ => None,
        })
    }

    pub fn all_ok(&self) -> bool {
        self.failures().next().is_none()
    }

    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| f(&r.outcome)).count()
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "conformance of the {} backend:", self.backend)?;
        for r in &self.results {
            match &r.outcome {
                Outcome::Pass => writeln!(f, "  pass  {}", r.name)?,
                Outcome::Fail(e) => writeln!(f, "  FAIL  {}: {e}", r.name)?,
                Outcome::Skipped(why) => writeln!(f, "  skip  {}: {why}", r.name)?,
            }
        }
        Ok(())
    }
}

type Check = fn(&dyn Harness, &Capabilities) -> Outcome;

/// Every check, by name, in the order [`run_all`] runs them.
pub const CHECKS: &[(&str, Check)] = &[
    ("info_consistent", info_consistent),
    ("bad_channel", bad_channel),
    ("buffer_count", buffer_count),
    ("zero_length", zero_length),
    ("rate_and_frequency", rate_and_frequency),
    ("num_samps_and_done_exact", num_samps_and_done_exact),
    ("tx_rx_loopback", tx_rx_loopback),
    ("burst_ack", burst_ack),
    ("continuous_start_stop", continuous_start_stop),
    ("late_command", late_command),
];

/// Runs every check against fresh setups from `harness`.
pub fn run_all(harness: &dyn Harness) -> ConformanceReport {
    let caps = harness.capabilities();
    let results = CHECKS
        .iter()
        .map(|&(name, check)| {
            let outcome =
                catch_unwind(AssertUnwindSafe(|| check(harness, &caps))).unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "non-string panic".into());
                    Outcome::Fail(CheckFailure::Panicked(msg))
                });
            CheckResult { name, outcome }
        })
        .collect();
    ConformanceReport {
        backend: harness.name(),
        results,
    }
}

/// `?` inside checks: a radio error at `step` fails the check.
fn at<T>(step: &'static str, r: Result<T, RadioError>) -> Result<T, CheckFailure> {
    r.map_err(|source| CheckFailure::Radio { step, source })
}

fn expect(
    ok: bool,
    step: &'static str,
    expected: impl fmt::Display,
    got: impl fmt::Display,
) -> Result<(), CheckFailure> {
    if ok {
        Ok(())
    } else {
        Err(CheckFailure::Mismatch {
            step,
            expected: expected.to_string(),
            got: got.to_string(),
        })
    }
}

fn outcome(r: Result<(), CheckFailure>) -> Outcome {
    match r {
        Ok(()) => Outcome::Pass,
        Err(e) => Outcome::Fail(e),
    }
}

fn skip_unless(s: &Support) -> Option<Outcome> {
    match s {
        Support::Yes => None,
        Support::No(why) => Some(Outcome::Skipped(why.clone())),
    }
}

/// A distinct test waveform per channel: a tone at a channel-specific
/// frequency, amplitude 0.4 (inside every backend's sample format).
pub fn test_burst(channel: usize, len: usize) -> Vec<Cf32> {
    let freq = (channel as f32 + 1.0) / 37.0;
    (0..len)
        .map(|n| Cf32::from_polar(0.4, std::f32::consts::TAU * freq * n as f32))
        .collect()
}

fn info_consistent(h: &dyn Harness, _: &Capabilities) -> Outcome {
    outcome((|| {
        let radio = at("open", h.open())?;
        let info = radio.info();
        expect(
            !info.backend.is_empty(),
            "backend name",
            "non-empty",
            "\"\"",
        )?;
        expect(info.rx_channels > 0, "rx_channels", "> 0", info.rx_channels)?;
        let rate = radio.rate();
        expect(rate.is_finite() && rate > 0.0, "rate", "> 0", rate)?;
        expect(
            info.max_rx_burst != Some(0),
            "max_rx_burst",
            "None or > 0",
            "Some(0)",
        )?;
        // The streamer reports the channels asked for.
        let rx = at("rx_stream", radio_rx(radio, &[0]))?;
        expect(
            rx.num_channels() == 1,
            "rx num_channels",
            1,
            rx.num_channels(),
        )
    })())
}

fn radio_rx(mut radio: Box<dyn Radio>, ch: &[usize]) -> Result<Box<dyn RxStreamer>, RadioError> {
    radio.rx_stream(&StreamArgs::channels(ch))
}

fn bad_channel(h: &dyn Harness, _: &Capabilities) -> Outcome {
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let info = radio.info();
        let rx = radio.rx_stream(&StreamArgs::channels([info.rx_channels]));
        expect(
            matches!(rx, Err(RadioError::NoSuchChannel { .. })),
            "rx_stream(channel = rx_channels)",
            "Err(NoSuchChannel)",
            describe(&rx),
        )?;
        let tx = radio.tx_stream(&StreamArgs::channels([info.tx_channels]));
        expect(
            matches!(tx, Err(RadioError::NoSuchChannel { .. })),
            "tx_stream(channel = tx_channels)",
            "Err(NoSuchChannel)",
            describe(&tx),
        )
    })())
}

fn describe<T>(r: &Result<T, RadioError>) -> String {
    match r {
        Ok(_) => "Ok".into(),
        Err(e) => format!("Err({e})"),
    }
}

fn buffer_count(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let info = radio.info();
        let mut rx = at("rx_stream", radio.rx_stream(&StreamArgs::channels([0])))?;
        let (mut a, mut b) = (vec![Cf32::default(); 8], vec![Cf32::default(); 8]);
        let mut md = RxMetadata::default();
        let r = rx.recv(&mut [&mut a, &mut b], &mut md, caps.timeout);
        expect(
            matches!(r, Err(RadioError::BufferCount(2, 1))),
            "recv with 2 buffers on 1 channel",
            "Err(BufferCount(2, 1))",
            describe(&r),
        )?;
        if info.tx_channels > 0 {
            let mut tx = at("tx_stream", radio.tx_stream(&StreamArgs::channels([0])))?;
            let r = tx.send(&[&a, &b], &TxMetadata::default(), caps.timeout);
            expect(
                matches!(r, Err(RadioError::BufferCount(2, 1))),
                "send with 2 buffers on 1 channel",
                "Err(BufferCount(2, 1))",
                describe(&r),
            )?;
        }
        Ok(())
    })())
}

fn zero_length(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let info = radio.info();
        let mut rx = at("rx_stream", radio.rx_stream(&StreamArgs::channels([0])))?;
        let mut md = RxMetadata::default();
        let n = at(
            "recv into an empty buffer",
            rx.recv(
                &mut [&mut []],
                &mut md,
                caps.timeout.min(Duration::from_millis(50)),
            ),
        )?;
        expect(n == 0, "recv into an empty buffer", 0, n)?;
        if info.tx_channels > 0 {
            let mut tx = at("tx_stream", radio.tx_stream(&StreamArgs::channels([0])))?;
            let n = at(
                "send of no samples",
                tx.send(&[&[]], &TxMetadata::default(), caps.timeout),
            )?;
            expect(n == 0, "send of no samples", 0, n)?;
        }
        Ok(())
    })())
}

fn rate_and_frequency(h: &dyn Harness, _: &Capabilities) -> Outcome {
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let rate = radio.rate();
        let set = at("set_rate(current rate)", radio.set_rate(rate))?;
        expect(set == rate, "set_rate(current rate)", rate, set)?;
        let set = at("set_rate(half rate)", radio.set_rate(rate / 2.0))?;
        expect(
            set > 0.0 && radio.rate() == set,
            "rate() after set_rate",
            set,
            radio.rate(),
        )?;
        let f = at("set_center_freq(2.45 GHz)", radio.set_center_freq(2.45e9))?;
        expect(
            f.is_finite() && radio.center_freq() == f,
            "center_freq() after set_center_freq",
            f,
            radio.center_freq(),
        )
    })())
}

/// Receives until `want` samples per channel, end of burst, an error code or
/// `max_calls` recv calls. Returns the samples, the first metadata and the last.
fn recv_burst(
    rx: &mut dyn RxStreamer,
    want: usize,
    timeout: Duration,
) -> Result<(Vec<Vec<Cf32>>, RxMetadata, RxMetadata), CheckFailure> {
    let ch = rx.num_channels();
    let mut out = vec![Vec::with_capacity(want); ch];
    let mut chunk = vec![vec![Cf32::default(); 4096]; ch];
    let (mut first, mut last) = (None, RxMetadata::default());
    for _ in 0..10_000 {
        let mut md = RxMetadata::default();
        let mut bufs: Vec<&mut [Cf32]> = chunk.iter_mut().map(|c| c.as_mut_slice()).collect();
        let n = at("recv", rx.recv(&mut bufs, &mut md, timeout))?;
        if n > 0 && first.is_none() {
            first = Some(md);
        }
        for (o, c) in out.iter_mut().zip(&chunk) {
            o.extend_from_slice(&c[..n]);
        }
        last = md;
        if md.end_of_burst || md.error != RxErrorCode::None || out[0].len() >= want {
            break;
        }
    }
    Ok((out, first.unwrap_or(last), last))
}

fn num_samps_and_done_exact(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let want = radio
            .info()
            .max_rx_burst
            .map_or(1000, |m| m.min(1000) as usize);
        let mut rx = at("rx_stream", radio.rx_stream(&StreamArgs::channels([0])))?;
        at(
            "issue NumSampsAndDone now",
            rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(want as u64))),
        )?;
        // Ask for more than was commanded: exactly `want` must come.
        let (got, _, last) = recv_burst(rx.as_mut(), 2 * want, caps.timeout)?;
        expect(
            got[0].len() == want,
            "samples delivered",
            want,
            got[0].len(),
        )?;
        expect(
            last.end_of_burst,
            "end_of_burst on the last recv",
            true,
            false,
        )?;
        let mut md = RxMetadata::default();
        let mut buf = vec![Cf32::default(); 16];
        let n = at(
            "recv after the burst",
            rx.recv(
                &mut [&mut buf],
                &mut md,
                caps.timeout.min(Duration::from_millis(100)),
            ),
        )?;
        expect(
            n == 0 && md.error == RxErrorCode::Timeout,
            "recv after the burst",
            "0 samples, Timeout",
            format!("{n} samples, {:?}", md.error),
        )
    })())
}

/// A TX streamer (kept alive for its async events), the burst time T and
/// the samples sent per channel.
type SentBurst = (Box<dyn crate::TxStreamer>, Time, Vec<Vec<Cf32>>);

/// Sends one timed burst on `channels` channels.
fn send_burst(
    tx_radio: &mut dyn Radio,
    caps: &Capabilities,
    channels: usize,
) -> Result<SentBurst, CheckFailure> {
    let rate = tx_radio.rate();
    let list: Vec<usize> = (0..channels).collect();
    let mut tx = at("tx_stream", tx_radio.tx_stream(&StreamArgs::channels(list)))?;
    // On a tick, so the RX time can be compared exactly.
    let t = Time::from_ticks((tx_radio.time_now() + caps.lead).to_ticks(rate), rate);
    let bursts: Vec<Vec<Cf32>> = (0..channels)
        .map(|c| test_burst(c, caps.burst_len))
        .collect();
    let mut sent = 0;
    while sent < caps.burst_len {
        let md = TxMetadata {
            time: (sent == 0).then_some(t),
            start_of_burst: sent == 0,
            end_of_burst: true,
        };
        let refs: Vec<&[Cf32]> = bursts.iter().map(|b| &b[sent..]).collect();
        let n = at("send burst", tx.send(&refs, &md, caps.timeout))?;
        expect(n > 0, "samples accepted by send", "> 0", 0)?;
        sent += n;
    }
    Ok((tx, t, bursts))
}

fn tx_rx_loopback(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    if let Some(s) = skip_unless(&caps.loopback) {
        return s;
    }
    outcome((|| {
        let lb = at("open loopback", h.loopback())?;
        let mut tx_radio = lb.tx;
        let tx_ch = tx_radio.info().tx_channels;
        let (tx, t, bursts) = send_burst(tx_radio.as_mut(), caps, tx_ch)?;
        let mut rx_radio = at("observe", (lb.observe)(tx_radio))?;
        let n = tx_ch.min(rx_radio.info().rx_channels);
        let list: Vec<usize> = (0..n).collect();
        let mut rx = at("rx_stream", rx_radio.rx_stream(&StreamArgs::channels(list)))?;
        at(
            "issue NumSampsAndDone at T",
            rx.issue_stream_cmd(StreamCmd::at(
                StreamMode::NumSampsAndDone(caps.burst_len as u64),
                t,
            )),
        )?;
        let (got, first, last) = recv_burst(rx.as_mut(), caps.burst_len, caps.timeout)?;
        drop(tx);
        expect(
            got[0].len() == caps.burst_len,
            "samples received",
            caps.burst_len,
            got[0].len(),
        )?;
        let rate = rx_radio.rate();
        let got_t = first.time.map(|x| x.to_ticks(rate));
        expect(
            got_t == Some(t.to_ticks(rate)),
            "md.time of the first sample (ticks)",
            t.to_ticks(rate),
            format!("{got_t:?}"),
        )?;
        expect(
            last.end_of_burst,
            "end_of_burst on the last recv",
            true,
            false,
        )?;
        for (c, (g, s)) in got.iter().zip(&bursts).enumerate() {
            let worst = g
                .iter()
                .zip(s)
                .map(|(a, b)| (a.re - b.re).abs().max((a.im - b.im).abs()))
                .fold(0.0f32, f32::max);
            expect(
                worst <= caps.tolerance,
                if c == 0 {
                    "largest error on channel 0"
                } else {
                    "largest error on a channel > 0"
                },
                format!("<= {}", caps.tolerance),
                worst,
            )?;
        }
        Ok(())
    })())
}

fn burst_ack(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    if let Some(s) = skip_unless(&caps.burst_ack) {
        return s;
    }
    outcome((|| {
        let lb = at("open loopback", h.loopback())?;
        let mut tx_radio = lb.tx;
        let (mut tx, t, _) = send_burst(tx_radio.as_mut(), caps, 1)?;
        let mut seen = Vec::new();
        for _ in 0..100 {
            match tx.recv_async_msg(caps.timeout) {
                Some(AsyncEvent::BurstAck { channel: 0, time }) => {
                    return expect(
                        time.is_none_or(|x| x >= t),
                        "burst ack time",
                        format!(">= {t}"),
                        format!("{time:?}"),
                    );
                }
                Some(e) => seen.push(e.code()),
                None => break,
            }
        }
        expect(
            false,
            "async events after a burst",
            "BurstAck on channel 0",
            format!("{seen:?}"),
        )
    })())
}

fn continuous_start_stop(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    if let Support::No(why) = &caps.continuous {
        // An unsupported mode must be refused with a typed error, not ignored.
        let r = h.open().and_then(|mut radio| {
            let mut rx = radio.rx_stream(&StreamArgs::channels([0]))?;
            rx.issue_stream_cmd(StreamCmd::now(StreamMode::StartContinuous))
        });
        return match r {
            Err(RadioError::Unsupported { .. }) => Outcome::Skipped(why.clone()),
            other => Outcome::Fail(CheckFailure::Mismatch {
                step: "StartContinuous on a backend without it",
                expected: "Err(Unsupported)".into(),
                got: describe(&other),
            }),
        };
    }
    outcome((|| {
        let mut radio = at("open", h.open())?;
        let rate = radio.rate();
        let mut rx = at("rx_stream", radio.rx_stream(&StreamArgs::channels([0])))?;
        at(
            "issue StartContinuous",
            rx.issue_stream_cmd(StreamCmd::now(StreamMode::StartContinuous)),
        )?;
        let mut buf = vec![Cf32::default(); 256];
        let mut next: Option<u64> = None;
        let mut total = 0;
        for _ in 0..1000 {
            let mut md = RxMetadata::default();
            let n = at("recv", rx.recv(&mut [&mut buf], &mut md, caps.timeout))?;
            expect(
                md.error == RxErrorCode::None,
                "recv while streaming",
                "no error",
                format!("{:?}", md.error),
            )?;
            if let (Some(want), Some(t)) = (next, md.time) {
                expect(
                    t.to_ticks(rate) == want,
                    "contiguous md.time while streaming",
                    want,
                    t.to_ticks(rate),
                )?;
            }
            next = md.time.map(|t| t.to_ticks(rate) + n as u64);
            total += n;
            if total >= 1024 || md.end_of_burst {
                break;
            }
        }
        expect(total > 0, "samples while streaming", "> 0", total)?;
        at(
            "issue Stop",
            rx.issue_stream_cmd(StreamCmd::now(StreamMode::Stop)),
        )?;
        // After a stop, what was in flight drains and then nothing comes.
        for _ in 0..10_000 {
            let mut md = RxMetadata::default();
            let n = at(
                "recv after Stop",
                rx.recv(
                    &mut [&mut buf],
                    &mut md,
                    caps.timeout.min(Duration::from_millis(100)),
                ),
            )?;
            if n == 0 && md.error == RxErrorCode::Timeout {
                return Ok(());
            }
        }
        expect(false, "recv after Stop", "eventually Timeout", "samples")
    })())
}

fn late_command(h: &dyn Harness, caps: &Capabilities) -> Outcome {
    if let Some(s) = skip_unless(&caps.timed) {
        return s;
    }
    outcome((|| {
        let mut radio = at("open", h.open())?;
        at(
            "set_time_now(10 s)",
            radio.set_time_now(Time::from_secs(10)),
        )?;
        let past = Time::from_secs(1);
        let mut rx = at("rx_stream", radio.rx_stream(&StreamArgs::channels([0])))?;
        let issued = rx.issue_stream_cmd(StreamCmd::at(StreamMode::NumSampsAndDone(100), past));
        let mut md = RxMetadata::default();
        let mut buf = vec![Cf32::default(); 100];
        let got = match issued {
            Ok(()) => {
                at("recv", rx.recv(&mut [&mut buf], &mut md, caps.timeout))?;
                md.error
            }
            Err(e) => {
                return Err(CheckFailure::Radio {
                    step: "issue a command in the past (must be accepted and reported on recv)",
                    source: e,
                })
            }
        };
        expect(
            got == RxErrorCode::LateCommand,
            "recv after a command in the past",
            "LateCommand",
            format!("{got:?}"),
        )?;
        if radio.info().tx_channels == 0 {
            return Ok(());
        }
        let mut tx = at("tx_stream", radio.tx_stream(&StreamArgs::channels([0])))?;
        let burst = test_burst(0, 64);
        let md = TxMetadata {
            time: Some(past),
            start_of_burst: true,
            end_of_burst: true,
        };
        at(
            "send a burst in the past",
            tx.send(&[&burst], &md, caps.timeout),
        )?;
        let mut seen = Vec::new();
        for _ in 0..100 {
            match tx.recv_async_msg(caps.timeout) {
                Some(AsyncEvent::Late { .. }) => return Ok(()),
                Some(e) => seen.push(e.code()),
                None => break,
            }
        }
        expect(
            false,
            "async events after a burst in the past",
            "Late",
            format!("{seen:?}"),
        )
    })())
}

/// A radio that keeps `guard` (an emulator, a temp dir) alive as long as it
/// lives: what a harness returns when the radio needs something running.
pub struct Guarded<G: Send> {
    pub radio: Box<dyn Radio>,
    pub guard: G,
}

impl<G: Send> Radio for Guarded<G> {
    fn info(&self) -> crate::RadioInfo {
        self.radio.info()
    }
    fn rate(&self) -> f64 {
        self.radio.rate()
    }
    fn set_rate(&mut self, rate_hz: f64) -> Result<f64, RadioError> {
        self.radio.set_rate(rate_hz)
    }
    fn center_freq(&self) -> f64 {
        self.radio.center_freq()
    }
    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        self.radio.set_center_freq(freq_hz)
    }
    fn time_now(&self) -> Time {
        self.radio.time_now()
    }
    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        self.radio.set_time_now(time)
    }
    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        self.radio.rx_stream(args)
    }
    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn crate::TxStreamer>, RadioError> {
        self.radio.tx_stream(args)
    }
}
