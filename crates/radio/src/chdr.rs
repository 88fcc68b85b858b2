//! The CHDR backend: the host side of a continuously streaming RFNoC-style
//! radio (crates/chdr wire format, flow control and sequence numbers).
//!
//! One UDP socket carries everything: RX data packets from the radio (routed
//! to RX channel `c` by `rx_epids[c]`), stream status from its TX endpoints,
//! and our TX data and stream commands. A receive thread keeps the last
//! `history_packets` RX packets per channel (older ones are dropped and
//! counted as overflows) and applies stream status to flow-control credit.
//!
//! * RX: the radio streams all the time; a stream command selects what is
//!   delivered: num-samps-and-done or continuous from its time (now = the next
//!   sample to arrive), `Stop` ends it. `md.time` comes from the packet
//!   timestamps. A sequence gap is a `Dropped` event and `RxErrorCode::Dropped`;
//!   samples that left the history before being read are `Overflow`.
//! * TX: bursts are cut into packets with CHDR timestamps, sent as flow-control
//!   credit allows (INIT on first use, status every packet). A burst whose time
//!   has passed on the host's estimate of the radio clock is not sent and is
//!   reported `Late`; a SEQERR status is a `SeqError` event; once the radio has
//!   consumed every packet of a burst (played it out) it is acknowledged.
//! * Time: the radio's tick is estimated as the end of the newest RX packet
//!   plus host time since it arrived; `set_time_now` shifts the mapping
//!   between radio ticks and sample-clock time (the protocol has no time set).
//!
//! Samples are sc16 on the wire (full scale 1.0): a loopback is exact to 2^-15.

use crate::{
    check_buffers, check_channels, AsyncEvent, Cf32, Radio, RadioError, RadioInfo, RxErrorCode,
    RxMetadata, RxStreamer, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata, TxStreamer,
};
use radiohost_chdr::flow::{CreditSender, StatusAction};
use radiohost_chdr::wire::{
    write_data_packet, DataPacketSpec, Packet, StreamStatusCode, MAX_PACKET_BYTES,
};
use radiohost_iq::Ci16;
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BACKEND: &str = "chdr";
const EVENT_QUEUE: usize = 1024;

/// Where the radio is and how its streams are numbered.
#[derive(Clone, Debug)]
pub struct ChdrConfig {
    /// Local address of the host socket (the radio sends RX packets here).
    pub bind: SocketAddr,
    /// The radio's TX endpoint address (data and commands go here).
    pub radio_tx: SocketAddr,
    /// DstEPID the radio writes into RX channel `c`'s packets.
    pub rx_epids: Vec<u16>,
    /// EPID of the radio's TX channel `c`.
    pub tx_epids: Vec<u16>,
    pub host_epid: u16,
    pub rate_hz: f64,
    /// Samples per TX packet.
    pub samples_per_packet: usize,
    /// RX packets kept per channel for commands not yet read.
    pub history_packets: usize,
}

struct RxPacket {
    tick: u64,
    samples: Vec<Cf32>,
}

struct TxChannel {
    epid: u16,
    credit: CreditSender,
    seq: u16,
    /// Radio tick at which the last acknowledged-pending burst ends.
    pending_ack: Option<u64>,
}

struct State {
    rx: Vec<VecDeque<RxPacket>>,
    rx_expected_seq: Vec<Option<u16>>,
    tx: Vec<TxChannel>,
    /// End tick of the newest RX packet and when it arrived.
    newest: Option<(u64, Instant)>,
    /// Sample-clock ticks minus radio ticks (`set_time_now`).
    offset: i128,
    events: VecDeque<AsyncEvent>,
    /// RX packets lost on the way, per channel (sequence gaps).
    dropped_packets: Vec<u64>,
    /// RX packets that fell out of the history unread, over all channels.
    overflowed_packets: u64,
    events_dropped: u64,
    malformed: u64,
}

impl State {
    fn event(&mut self, e: AsyncEvent) {
        if self.events.len() >= EVENT_QUEUE {
            self.events.pop_front();
            self.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn radio_now(&self, rate: f64) -> u64 {
        self.newest.map_or(0, |(tick, at)| {
            tick + Time::from(at.elapsed()).to_ticks(rate)
        })
    }

    fn to_time(&self, radio_tick: u64, rate: f64) -> Time {
        Time::from_ticks((radio_tick as i128 + self.offset).max(0) as u64, rate)
    }

    fn to_radio(&self, t: Time, rate: f64) -> u64 {
        (t.to_ticks(rate) as i128 - self.offset).max(0) as u64
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The host side of a CHDR streaming radio; see the module docs.
pub struct ChdrRadio {
    cfg: ChdrConfig,
    socket: Arc<UdpSocket>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    freq: f64,
}

impl ChdrRadio {
    /// Binds the host socket and starts receiving; the radio may start later.
    pub fn connect(cfg: ChdrConfig) -> Result<Self, RadioError> {
        if !(cfg.rate_hz.is_finite() && cfg.rate_hz > 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "sample rate {} Hz: give a positive rate",
                cfg.rate_hz
            )));
        }
        if cfg.samples_per_packet == 0
            || radiohost_chdr::wire::data_packet_len(true, 0, cfg.samples_per_packet)
                > MAX_PACKET_BYTES
        {
            return Err(RadioError::InvalidArgument(format!(
                "{} samples per packet do not fit a CHDR packet (1..=16000)",
                cfg.samples_per_packet
            )));
        }
        if cfg.rx_epids.is_empty() || cfg.history_packets == 0 {
            return Err(RadioError::InvalidArgument(
                "a CHDR radio needs at least one RX channel and a history of 1+ packets".into(),
            ));
        }
        let socket = Arc::new(UdpSocket::bind(cfg.bind)?);
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        radiohost_chdr::net::set_buffer_sizes(&socket, 8 << 20);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rx: cfg.rx_epids.iter().map(|_| VecDeque::new()).collect(),
                rx_expected_seq: vec![None; cfg.rx_epids.len()],
                tx: cfg
                    .tx_epids
                    .iter()
                    .map(|&epid| TxChannel {
                        epid,
                        credit: CreditSender::new(cfg.host_epid),
                        seq: 0,
                        pending_ack: None,
                    })
                    .collect(),
                newest: None,
                offset: 0,
                events: VecDeque::new(),
                dropped_packets: vec![0; cfg.rx_epids.len()],
                overflowed_packets: 0,
                events_dropped: 0,
                malformed: 0,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let (socket, shared, cfg) = (socket.clone(), shared.clone(), cfg.clone());
            std::thread::Builder::new()
                .name("chdr-radio-rx".into())
                .spawn(move || receive_loop(&socket, &shared, &cfg))?
        };
        Ok(ChdrRadio {
            cfg,
            socket,
            shared,
            thread: Some(thread),
            freq: 0.0,
        })
    }

    /// The host socket's address (give it to the radio as where to stream).
    pub fn local_addr(&self) -> Result<SocketAddr, RadioError> {
        Ok(self.socket.local_addr()?)
    }

    /// (RX packets lost per channel, RX packets overflowed, malformed datagrams).
    pub fn counters(&self) -> (Vec<u64>, u64, u64) {
        let s = self.shared.lock();
        (s.dropped_packets.clone(), s.overflowed_packets, s.malformed)
    }
}

impl Drop for ChdrRadio {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn receive_loop(socket: &UdpSocket, shared: &Shared, cfg: &ChdrConfig) {
    let mut buf = vec![0u8; MAX_PACKET_BYTES];
    let mut ci16 = vec![Ci16::default(); MAX_PACKET_BYTES / 4];
    let rate = cfg.rate_hz;
    while !shared.stop.load(Ordering::Relaxed) {
        let n = match socket.recv_from(&mut buf) {
            Ok((n, _)) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            // ICMP errors from an absent radio: keep listening.
            Err(_) => continue,
        };
        let mut s = shared.lock();
        match Packet::parse(&buf[..n]) {
            Ok(Packet::Data(p)) => {
                let Some(c) = cfg.rx_epids.iter().position(|&e| e == p.header.dst_epid) else {
                    s.malformed += 1;
                    continue;
                };
                let Some(tick) = p.timestamp else {
                    s.malformed += 1;
                    continue;
                };
                let len = p.num_samples().min(ci16.len());
                if p.read_samples(&mut ci16[..len]).is_err() {
                    s.malformed += 1;
                    continue;
                }
                let seq = p.header.seq_num;
                // A jump forward is a loss; a step back is a late duplicate.
                let gap = s.rx_expected_seq[c].map_or(0, |w| seq.wrapping_sub(w));
                if gap != 0 && gap < 0x8000 {
                    s.dropped_packets[c] += u64::from(gap);
                    let time = Some(s.to_time(tick, rate));
                    s.event(AsyncEvent::Dropped { channel: c, time });
                }
                s.rx_expected_seq[c] = Some(seq.wrapping_add(1));
                let ring = &mut s.rx[c];
                if ring.len() >= cfg.history_packets {
                    ring.pop_front();
                    s.overflowed_packets += 1;
                }
                s.rx[c].push_back(RxPacket {
                    tick,
                    samples: ci16[..len].iter().map(|x| x.to_cf32()).collect(),
                });
                let end = tick + len as u64;
                if s.newest.is_none_or(|(t, _)| end >= t) {
                    s.newest = Some((end, Instant::now()));
                }
            }
            Ok(Packet::Status(_, st)) => {
                let Some(c) = s.tx.iter().position(|t| t.epid == st.src_epid) else {
                    s.malformed += 1;
                    continue;
                };
                if let StatusAction::Error { code, .. } = s.tx[c].credit.on_status(&st) {
                    if code == StreamStatusCode::SeqErr {
                        let time = Some(s.to_time(s.radio_now(rate), rate));
                        s.event(AsyncEvent::SeqError { channel: c, time });
                    }
                }
            }
            _ => s.malformed += 1,
        }
        drop(s);
        shared.changed.notify_all();
    }
}

impl Radio for ChdrRadio {
    fn info(&self) -> RadioInfo {
        RadioInfo {
            backend: BACKEND,
            description: format!(
                "CHDR radio at {} ({} RX, {} TX channels)",
                self.cfg.radio_tx,
                self.cfg.rx_epids.len(),
                self.cfg.tx_epids.len()
            ),
            rx_channels: self.cfg.rx_epids.len(),
            tx_channels: self.cfg.tx_epids.len(),
            max_rx_burst: None,
        }
    }

    fn rate(&self) -> f64 {
        self.cfg.rate_hz
    }

    /// The radio's rate is fixed when it starts; this returns it.
    fn set_rate(&mut self, _rate_hz: f64) -> Result<f64, RadioError> {
        Ok(self.cfg.rate_hz)
    }

    fn center_freq(&self) -> f64 {
        self.freq
    }

    /// Kept on the host: the streaming protocol carries no tuning.
    fn set_center_freq(&mut self, freq_hz: f64) -> Result<f64, RadioError> {
        if !(freq_hz.is_finite() && freq_hz >= 0.0) {
            return Err(RadioError::InvalidArgument(format!(
                "centre frequency {freq_hz} Hz: give a finite, non-negative frequency"
            )));
        }
        self.freq = freq_hz;
        Ok(freq_hz)
    }

    fn time_now(&self) -> Time {
        let s = self.shared.lock();
        s.to_time(s.radio_now(self.cfg.rate_hz), self.cfg.rate_hz)
    }

    fn set_time_now(&mut self, time: Time) -> Result<(), RadioError> {
        let mut s = self.shared.lock();
        let now = s.radio_now(self.cfg.rate_hz);
        s.offset = time.to_ticks(self.cfg.rate_hz) as i128 - now as i128;
        Ok(())
    }

    fn rx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn RxStreamer>, RadioError> {
        check_channels(&args.channels, self.cfg.rx_epids.len(), "RX")?;
        Ok(Box::new(ChdrRx {
            shared: self.shared.clone(),
            channels: args.channels.clone(),
            rate: self.cfg.rate_hz,
            active: None,
            late: false,
        }))
    }

    fn tx_stream(&mut self, args: &StreamArgs) -> Result<Box<dyn TxStreamer>, RadioError> {
        check_channels(&args.channels, self.cfg.tx_epids.len(), "TX")?;
        Ok(Box::new(ChdrTx {
            shared: self.shared.clone(),
            socket: self.socket.clone(),
            cfg: self.cfg.clone(),
            channels: args.channels.clone(),
            next_tick: None,
            packet: vec![0u8; MAX_PACKET_BYTES],
            ci16: vec![Ci16::default(); self.cfg.samples_per_packet],
        }))
    }
}

/// What an RX command asked for.
struct Active {
    /// Radio tick of the next sample to deliver.
    next: u64,
    remaining: u64,
    start_of_burst: bool,
}

struct ChdrRx {
    shared: Arc<Shared>,
    channels: Vec<usize>,
    rate: f64,
    active: Option<Active>,
    late: bool,
}

impl RxStreamer for ChdrRx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn issue_stream_cmd(&mut self, cmd: StreamCmd) -> Result<(), RadioError> {
        let s = self.shared.lock();
        let now = s.radio_now(self.rate);
        let remaining = match cmd.mode {
            StreamMode::Stop => {
                self.active = None;
                return Ok(());
            }
            StreamMode::StartContinuous => u64::MAX,
            StreamMode::NumSampsAndDone(n) => n,
        };
        let start = match cmd.time {
            Some(t) => {
                let tick = s.to_radio(t, self.rate);
                // The history may still hold it, but UHD semantics: the time has passed.
                if s.to_time(now, self.rate) > t {
                    self.late = true;
                    self.active = None;
                    return Ok(());
                }
                tick
            }
            None => s.newest.map_or(0, |(end, _)| end),
        };
        self.late = false;
        self.active = Some(Active {
            next: start,
            remaining,
            start_of_burst: true,
        });
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
        if std::mem::take(&mut self.late) {
            md.error = RxErrorCode::LateCommand;
            return Ok(0);
        }
        let want = len as u64;
        if want == 0 {
            return Ok(0);
        }
        let Some(active) = self.active.as_mut() else {
            md.error = RxErrorCode::Timeout;
            return Ok(0);
        };
        let deadline = Instant::now() + timeout;
        let mut s = self.shared.lock();
        loop {
            // Which packet of each channel holds `next`?
            let mut found = Vec::with_capacity(self.channels.len());
            for &c in &self.channels {
                let ring = &s.rx[c];
                if let Some(first) = ring.front().filter(|p| p.tick > active.next) {
                    // Left the history before it was read.
                    md.error = RxErrorCode::Overflow;
                    active.next = first.tick;
                    return Ok(0);
                }
                let hit = ring.iter().position(|p| {
                    p.tick <= active.next && active.next < p.tick + p.samples.len() as u64
                });
                if hit.is_none() {
                    if let Some(p) = ring.iter().find(|p| p.tick > active.next) {
                        md.error = RxErrorCode::Dropped;
                        active.next = p.tick;
                        return Ok(0);
                    }
                }
                found.push(hit);
            }
            if found.iter().all(Option::is_some) {
                let mut k = want.min(active.remaining);
                for (&c, i) in self.channels.iter().zip(&found) {
                    let p = &s.rx[c][i.unwrap_or(0)];
                    k = k.min(p.tick + p.samples.len() as u64 - active.next);
                }
                for ((buf, &c), i) in buffs.iter_mut().zip(&self.channels).zip(&found) {
                    let p = &s.rx[c][i.unwrap_or(0)];
                    let off = (active.next - p.tick) as usize;
                    buf[..k as usize].copy_from_slice(&p.samples[off..off + k as usize]);
                }
                md.time = Some(s.to_time(active.next, self.rate));
                md.start_of_burst = std::mem::take(&mut active.start_of_burst);
                active.next += k;
                if active.remaining != u64::MAX {
                    active.remaining -= k;
                }
                md.end_of_burst = active.remaining == 0;
                if md.end_of_burst {
                    self.active = None;
                }
                return Ok(k as usize);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                md.error = RxErrorCode::Timeout;
                return Ok(0);
            }
            s = self
                .shared
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

struct ChdrTx {
    shared: Arc<Shared>,
    socket: Arc<UdpSocket>,
    cfg: ChdrConfig,
    channels: Vec<usize>,
    /// Radio tick after the last sample sent, within a burst.
    next_tick: Option<u64>,
    packet: Vec<u8>,
    ci16: Vec<Ci16>,
}

impl ChdrTx {
    /// Sends INIT to every channel not yet initialised and waits for its status.
    fn init(&mut self, deadline: Instant) -> Result<bool, RadioError> {
        let mut s = self.shared.lock();
        for &c in &self.channels {
            if s.tx[c].credit.is_initialised() {
                continue;
            }
            let cmd = s.tx[c].credit.init_command(1);
            let seq = s.tx[c].seq;
            s.tx[c].seq = seq.wrapping_add(1);
            let n = cmd
                .write(&mut self.packet, seq, s.tx[c].epid)
                .map_err(|e| backend(e.to_string()))?;
            self.socket.send_to(&self.packet[..n], self.cfg.radio_tx)?;
        }
        while self
            .channels
            .iter()
            .any(|&c| !s.tx[c].credit.is_initialised())
        {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            s = self
                .shared
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(true)
    }
}

fn backend(message: String) -> RadioError {
    RadioError::Backend {
        backend: BACKEND,
        message,
    }
}

impl TxStreamer for ChdrTx {
    fn num_channels(&self) -> usize {
        self.channels.len()
    }

    fn send(
        &mut self,
        buffs: &[&[Cf32]],
        md: &TxMetadata,
        timeout: Duration,
    ) -> Result<usize, RadioError> {
        let n = check_buffers(buffs, self.channels.len())?;
        if n == 0 && !md.end_of_burst {
            return Ok(0);
        }
        let rate = self.cfg.rate_hz;
        if md.start_of_burst || md.time.is_some() {
            let s = self.shared.lock();
            self.next_tick = match md.time {
                Some(t) => {
                    let tick = s.to_radio(t, rate);
                    if s.to_time(s.radio_now(rate), rate) > t {
                        drop(s);
                        let mut s = self.shared.lock();
                        for &channel in &self.channels {
                            s.event(AsyncEvent::Late {
                                channel,
                                time: Some(t),
                            });
                        }
                        self.next_tick = None;
                        return Ok(n);
                    }
                    Some(tick)
                }
                None => None,
            };
        }
        let deadline = Instant::now() + timeout;
        if !self.init(deadline)? {
            return Ok(0);
        }
        let spp = self.cfg.samples_per_packet;
        let mut sent = 0;
        while sent < n || (n == 0 && sent == 0) {
            let k = spp.min(n - sent);
            let last = sent + k == n;
            let mut s = self.shared.lock();
            for (i, &c) in self.channels.iter().enumerate() {
                for (o, x) in self.ci16[..k].iter_mut().zip(&buffs[i][sent..sent + k]) {
                    *o = Ci16::from_cf32(*x);
                }
                let len = radiohost_chdr::wire::data_packet_len(self.next_tick.is_some(), 0, k);
                while !s.tx[c].credit.can_send(len) {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(sent);
                    }
                    s = self
                        .shared
                        .changed
                        .wait_timeout(s, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                let ch = &mut s.tx[c];
                let spec = DataPacketSpec {
                    seq_num: ch.seq,
                    dst_epid: ch.epid,
                    timestamp: self.next_tick,
                    eob: last && md.end_of_burst,
                    ..Default::default()
                };
                let len = write_data_packet(&mut self.packet, &spec, &[], &self.ci16[..k])
                    .map_err(|e| backend(e.to_string()))?;
                self.socket
                    .send_to(&self.packet[..len], self.cfg.radio_tx)?;
                ch.seq = ch.seq.wrapping_add(1);
                ch.credit.on_sent(len);
                if spec.eob {
                    ch.pending_ack = Some(self.next_tick.map_or(0, |t| t + k as u64));
                }
            }
            self.next_tick = self.next_tick.map(|t| t + k as u64);
            sent += k;
            if n == 0 {
                break;
            }
        }
        if md.end_of_burst {
            self.next_tick = None;
        }
        Ok(n)
    }

    fn recv_async_msg(&mut self, timeout: Duration) -> Option<AsyncEvent> {
        let deadline = Instant::now() + timeout;
        let rate = self.cfg.rate_hz;
        let mut s = self.shared.lock();
        loop {
            if let Some(e) = s.events.pop_front() {
                return Some(e);
            }
            // A burst is acknowledged once the radio consumed all of it.
            for c in 0..s.tx.len() {
                if s.tx[c].credit.in_flight_pkts() == 0 {
                    if let Some(end) = s.tx[c].pending_ack.take() {
                        let time = Some(s.to_time(end, rate));
                        s.event(AsyncEvent::BurstAck { channel: c, time });
                    }
                }
            }
            if !s.events.is_empty() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self
                .shared
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}
