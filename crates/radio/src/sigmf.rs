//! The SigMF file backend: RX replays a recording, TX writes one.
//!
//! RX channels are the recording's channels. Sample `i` of capture segment
//! `c` has sample-clock tick `c.global_index + (i - c.sample_start)`
//! (`core:global_index` is SigMF's "index in the original stream"; without it
//! the tick is `sample_start + i`), at the recording's rate. The radio's
//! clock is the replay position: `time_now` is the tick of the next unread
//! sample and `set_time_now` seeks. A timed command starts at the first sample
//! at or after its time. Num-samps-and-done and continuous stream until the
//! count or the end of the file; the last samples carry `end_of_burst`, then
//! `recv` times out. The whole recording is read into memory on open.
//!
//! TX appends every burst to a `cf32_le` recording: a burst whose time does
//! not continue the previous one starts a new capture segment with its tick
//! as `core:global_index`; a burst timed before what was already written is
//! dropped and reported `Late`; every end of burst is acknowledged. The data
//! goes to `<name>.sigmf-data.tmp` as it comes and is hashed; [`SigMfRadio::finish`]
//! (or dropping the radio, which cannot report errors) renames it into place
//! and writes the metadata with `core:sha512`.

use crate::{
    check_buffers, check_channels, AsyncEvent, Cf32, Radio, RadioError, RadioInfo, RxErrorCode,
    RxMetadata, RxStreamer, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata, TxStreamer,
};
use radiohost_iq::sigmf::{self, Capture, DataType, Meta};
use sha2::{Digest, Sha512};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const BACKEND: &str = "sigmf";
/// Async events kept for `recv_async_msg`; older ones are dropped and counted.
const EVENT_QUEUE: usize = 1024;

fn backend_err(e: impl std::fmt::Display) -> RadioError {
    RadioError::Backend {
        backend: BACKEND,
        message: e.to_string(),
    }
}

/// A recording in memory: per channel samples plus the tick of each segment.
struct Replay {
    channels: Vec<Vec<Cf32>>,
    /// (first data index, tick of that sample), sorted by data index.
    segments: Vec<(u64, u64)>,
    rate: f64,
    freq: f64,
}

impl Replay {
    fn open(path: &Path) -> Result<Self, RadioError> {
        let rec = sigmf::read(path).map_err(backend_err)?;
        let rate = rec.meta.global.sample_rate.unwrap_or(0.0);
        if !(rate.is_finite() && rate > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "{}: the recording has no positive core:sample_rate; add one to its .sigmf-meta",
                path.display()
            )));
        }
        let n = rec.meta.channels();
        let channels: Vec<Vec<Cf32>> = (0..n).map(|c| rec.channel_cf32(c)).collect();
        let mut segments: Vec<(u64, u64)> = rec
            .meta
            .captures
            .iter()
            .map(|c| (c.sample_start, c.global_index.unwrap_or(c.sample_start)))
            .collect();
        segments.sort_unstable();
        if segments.first().is_none_or(|s| s.0 != 0) {
            segments.insert(0, (0, 0));
        }
        let freq = rec
            .meta
            .captures
            .first()
            .and_then(|c| c.frequency)
            .unwrap_or(0.0);
        Ok(Replay {
            channels,
            segments,
            rate,
            freq,
        })
    }

    fn len(&self) -> u64 {
        self.channels.first().map_or(0, |c| c.len() as u64)
    }

    /// Segment index holding data index `i`.
    fn segment_of(&self, i: u64) -> usize {
        self.segments
            .partition_point(|s| s.0 <= i)
            .saturating_sub(1)
    }

    fn tick_of(&self, i: u64) -> u64 {
        let (start, tick) = self.segments[self.segment_of(i)];
        tick.saturating_add(i - start)
    }

    /// Data index of the first sample at or after `tick` (`len()` if none).
    fn index_at(&self, tick: u64) -> u64 {
        for (k, &(start, seg_tick)) in self.segments.iter().enumerate() {
            let end = self.segments.get(k + 1).map_or(self.len(), |s| s.0);
            if start >= end {
                continue;
            }
            let last = seg_tick.saturating_add(end - start - 1);
            if tick <= last {
                return start + tick.saturating_sub(seg_tick);
            }
        }
        self.len()
    }

    /// Samples from `i` before the next segment starts (ticks stay contiguous).
    fn contiguous_from(&self, i: u64) -> u64 {
        let k = self.segment_of(i);
        self.segments.get(k + 1).map_or(self.len(), |s| s.0) - i
    }
}

/// The TX side: an open data file, its hash and the capture list.
struct Recorder {
    base: PathBuf,
    tmp: PathBuf,
    file: Option<BufWriter<File>>,
    hash: Sha512,
    channels: usize,
    written: u64,
    /// Tick after the last sample written.
    next_tick: u64,
    captures: Vec<(u64, u64)>,
    events: VecDeque<AsyncEvent>,
    events_dropped: u64,
}

impl Recorder {
    fn create(path: &Path, channels: usize) -> Result<Self, RadioError> {
        if channels == 0 {
            return Err(RadioError::InvalidArgument(
                "a SigMF output needs at least one channel".into(),
            ));
        }
        let base = sigmf::base_path(path);
        let mut tmp = sigmf::data_path(&base).into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = BufWriter::new(File::create(&tmp)?);
        Ok(Recorder {
            base,
            tmp,
            file: Some(file),
            hash: Sha512::new(),
            channels,
            written: 0,
            next_tick: 0,
            captures: Vec::new(),
            events: VecDeque::new(),
            events_dropped: 0,
        })
    }

    fn event(&mut self, e: AsyncEvent) {
        if self.events.len() >= EVENT_QUEUE {
            self.events.pop_front();
            self.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn append(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        rate: f64,
    ) -> Result<usize, RadioError> {
        let Some(file) = self.file.as_mut() else {
            return Err(RadioError::InvalidArgument(
                "the SigMF output was already finished; open a new radio to record again".into(),
            ));
        };
        let n = buffs.first().map_or(0, |b| b.len());
        if buffs.iter().any(|b| b.len() != n) {
            return Err(RadioError::InvalidArgument(
                "every channel's buffer must have the same length".into(),
            ));
        }
        let tick = md.time.map(|t| t.to_ticks(rate));
        if let Some(t) = tick.filter(|&t| t < self.next_tick && !self.captures.is_empty()) {
            self.event(AsyncEvent::Late {
                channel: 0,
                time: Some(Time::from_ticks(t, rate)),
            });
            return Ok(n);
        }
        if n > 0 {
            let start = tick.unwrap_or(self.next_tick);
            if self.captures.is_empty() || start != self.next_tick {
                self.captures.push((self.written, start));
            }
            let mut bytes = Vec::with_capacity(n * self.channels * 8);
            for i in 0..n {
                for b in buffs {
                    bytes.extend_from_slice(&b[i].re.to_le_bytes());
                    bytes.extend_from_slice(&b[i].im.to_le_bytes());
                }
            }
            file.write_all(&bytes)?;
            self.hash.update(&bytes);
            self.written += n as u64;
            self.next_tick = start + n as u64;
        }
        if md.end_of_burst {
            for channel in 0..self.channels {
                self.event(AsyncEvent::BurstAck {
                    channel,
                    time: Some(Time::from_ticks(self.next_tick, rate)),
                });
            }
        }
        Ok(n)
    }

    /// Renames the data into place and writes the metadata; idempotent.
    fn finish(&mut self, rate: f64, freq: f64) -> Result<(), RadioError> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&self.tmp, sigmf::data_path(&self.base))?;
        let mut meta = Meta::new(DataType::Cf32Le, rate).num_channels(self.channels);
        meta.captures = if self.captures.is_empty() {
            vec![Capture::default()]
        } else {
            self.captures
                .iter()
                .map(|&(start, tick)| Capture {
                    sample_start: start,
                    global_index: Some(tick),
                    ..Default::default()
                })
                .collect()
        };
        if freq > 0.0 {
            meta.captures[0].frequency = Some(freq);
        }
        let digest = std::mem::take(&mut self.hash).finalize();
        meta.global.sha512 = Some(digest.iter().map(|b| format!("{b:02x}")).collect());
        let json = serde_json::to_vec_pretty(&meta).map_err(backend_err)?;
        std::fs::write(sigmf::meta_path(&self.base), json)?;
        Ok(())
    }
}

struct Shared {
    replay: Option<Arc<Replay>>,
    /// RX replay position (data index of the next sample).
    position: u64,
    recorder: Option<Recorder>,
    rate: f64,
    freq: f64,
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while holding the lock leaves plain data; keep using it.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// A radio over SigMF files: RX from `input`, TX into `output`.
pub struct SigMfRadio {
    shared: Arc<Mutex<Shared>>,
    description: String,
}

impl SigMfRadio {
    /// RX from the recording at `input` (base name or either file), TX (when
    /// `output` is given) into a new `cf32_le` recording of `tx_channels`
    /// channels at `output`. Without an input the rate is `rate_hz`.
    pub fn new(
        input: Option<&Path>,
        output: Option<(&Path, usize)>,
        rate_hz: f64,
    ) -> Result<Self, RadioError> {
        let replay = input.map(Replay::open).transpose()?.map(Arc::new);
        let rate = replay.as_ref().map_or(rate_hz, |r| r.rate);
        if !(rate.is_finite() && rate > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "sample rate {rate} Hz: give a positive rate"
            )));
        }
        let recorder = output.map(|(p, ch)| Recorder::create(p, ch)).transpose()?;
        let description = format!(
            "SigMF rx={} tx={}",
            input.map_or("-".into(), |p| p.display().to_string()),
            output.map_or("-".into(), |(p, _)| p.display().to_string())
        );
        Ok(SigMfRadio {
            shared: Arc::new(Mutex::new(Shared {
                freq: replay.as_ref().map_or(0.0, |r| r.freq),
                replay,
                position: 0,
                recorder,
                rate,
            })),
            description,
        })
    }

    /// A reader of the recording at `path`.
    pub fn open(path: &Path) -> Result<Self, RadioError> {
        Self::new(Some(path), None, 0.0)
    }

    /// A writer of a new recording at `path`.
    pub fn create(path: &Path, channels: usize, rate_hz: f64) -> Result<Self, RadioError> {
        Self::new(None, Some((path, channels)), rate_hz)
    }

    /// Writes the TX recording's data and metadata (with its SHA-512). Later
    /// sends fail. Dropping the radio does the same but cannot report errors.
    pub fn finish(&mut self) -> Result<(), RadioError> {
        let mut s = lock(&self.shared);
        let (rate, freq) = (s.rate, s.freq);
        match s.recorder.as_mut() {
            Some(r) => r.finish(rate, freq),
            None => Ok(()),
        }
    }
}

impl Drop for SigMfRadio {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            tracing::warn!("SigMF output not finalised: {e}");
        }
    }
}

impl Radio for SigMfRadio {
    fn info(&self) -> RadioInfo {
        let s = lock(&self.shared);
        RadioInfo {
            backend: BACKEND,
            description: self.description.clone(),
            rx_channels: s.replay.as_ref().map_or(0, |r| r.channels.len()),
            tx_channels: s.recorder.as_ref().map_or(0, |r| r.channels),
            max_rx_burst: None,
        }
    }

    fn rate(&self) -> f64 {
        lock(&self.shared).rate
    }

    /// A recording has one rate; an output-only radio takes any positive
    /// rate until the first sample is written.
    fn set_rate(&mut self, rate_hz: f64) -> Result<f64, RadioError> {
        let mut s = lock(&self.shared);
        let fixed = s.replay.is_some() || s.recorder.as_ref().is_some_and(|r| r.written > 0);
        if !fixed && rate_hz.is_finite() && rate_hz > 0.0 {
            s.rate = rate_hz;
        }
        Ok(s.rate)
    }

    fn center_freq(&self) -> f64 {
        lock(&self.shared).freq
    }

    /// The recording's frequency when replaying; otherwise recorded as given.
    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        let mut s = lock(&self.shared);
        if s.replay.is_none() && freq_hz.is_finite() && freq_hz >= 0.0 {
            s.freq = freq_hz;
        }
        Ok(s.freq)
    }

    fn time_now(&self) -> Time {
        let s = lock(&self.shared);
        let tick = match (&s.replay, &s.recorder) {
            (Some(r), _) if s.position < r.len() => r.tick_of(s.position),
            (Some(r), _) => r.tick_of(r.len().saturating_sub(1)) + u64::from(r.len() > 0),
            (None, Some(rec)) => rec.next_tick,
            (None, None) => 0,
        };
        Time::from_ticks(tick, s.rate)
    }

    /// Seeks the replay to the first sample at or after `time`; an
    /// output-only radio continues its next burst from `time`.
    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        let mut s = lock(&self.shared);
        let tick = time.to_ticks(s.rate);
        if let Some(r) = s.replay.clone() {
            s.position = r.index_at(tick);
        } else if let Some(rec) = s.recorder.as_mut() {
            if rec.written == 0 || tick >= rec.next_tick {
                rec.next_tick = tick;
            }
        }
        Ok(())
    }

    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        let available = self.info().rx_channels;
        check_channels(&args.channels, available, "RX")?;
        Ok(Box::new(SigMfRx {
            shared: self.shared.clone(),
            channels: args.channels.clone(),
            remaining: None,
            start_of_burst: false,
        }))
    }

    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError> {
        let available = self.info().tx_channels;
        check_channels(&args.channels, available, "TX")?;
        Ok(Box::new(SigMfTx {
            shared: self.shared.clone(),
            channels: args.channels.clone(),
        }))
    }
}

/// Replays channels of the recording.
struct SigMfRx {
    shared: Arc<Mutex<Shared>>,
    channels: Vec<usize>,
    /// Samples still to deliver: `None` idle, `Some(u64::MAX)` continuous.
    remaining: Option<u64>,
    start_of_burst: bool,
}

impl RxStreamer for SigMfRx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError> {
        let mut s = lock(&self.shared);
        if let (Some(t), Some(r)) = (cmd.time, s.replay.clone()) {
            s.position = r.index_at(t.to_ticks(s.rate));
        }
        self.remaining = match cmd.mode {
            StreamMode::StartContinuous => Some(u64::MAX),
            StreamMode::NumSampsAndDone(n) => Some(n),
            StreamMode::Stop => None,
        };
        self.start_of_burst = self.remaining.is_some();
        Ok(())
    }

    /// Returns at once: a file has nothing more to wait for.
    fn recv(
        &mut self,
        buffs: &mut [&mut [Cf32]],
        md: &mut RxMetadata,
        _timeout: Duration,
    ) -> Result<usize, RadioError> {
        let len = check_buffers(buffs, self.channels.len())?;
        *md = RxMetadata::default();
        let want = len as u64;
        if want == 0 {
            return Ok(0);
        }
        let mut s = lock(&self.shared);
        let Some(replay) = s.replay.clone() else {
            md.error = RxErrorCode::Timeout;
            return Ok(0);
        };
        let Some(remaining) = self.remaining.filter(|&r| r > 0) else {
            md.error = RxErrorCode::Timeout;
            return Ok(0);
        };
        let pos = s.position;
        if pos >= replay.len() {
            self.remaining = None;
            md.error = RxErrorCode::Timeout;
            return Ok(0);
        }
        let n = want.min(remaining).min(replay.contiguous_from(pos));
        for (buf, &c) in buffs.iter_mut().zip(&self.channels) {
            let src = &replay.channels[c][pos as usize..(pos + n) as usize];
            buf[..n as usize].copy_from_slice(src);
        }
        s.position = pos + n;
        md.time = Some(Time::from_ticks(replay.tick_of(pos), s.rate));
        md.start_of_burst = std::mem::take(&mut self.start_of_burst);
        let left = if remaining == u64::MAX {
            remaining
        } else {
            remaining - n
        };
        md.end_of_burst = left == 0 || s.position >= replay.len();
        self.remaining = (!md.end_of_burst).then_some(left);
        Ok(n as usize)
    }
}

/// Appends bursts to the output recording.
struct SigMfTx {
    shared: Arc<Mutex<Shared>>,
    channels: Vec<usize>,
}

impl TxStreamer for SigMfTx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        _timeout: Duration,
    ) -> Result<usize, RadioError> {
        let n = check_buffers(buffs, self.channels.len())?;
        let mut s = lock(&self.shared);
        let rate = s.rate;
        let Some(rec) = s.recorder.as_mut() else {
            return Err(RadioError::Disconnected(
                "the SigMF output is closed".into(),
            ));
        };
        // Channels not in this streamer are written as zeros.
        let zeros = vec![Cf32::default(); n];
        let mut full: Vec<&[Cf32]> = vec![&zeros; rec.channels];
        for (b, &c) in buffs.iter().zip(&self.channels) {
            full[c] = b;
        }
        rec.append(&full, md, rate)
    }

    fn recv_async_msg(&mut self, timeout: Duration) -> Option<AsyncEvent> {
        // Events are queued by `send` itself: none can arrive later, so no wait.
        let _ = timeout;
        lock(&self.shared)
            .recorder
            .as_mut()
            .and_then(|r| r.events.pop_front())
    }
}
