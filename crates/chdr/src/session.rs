//! Streaming sessions: the emulated radio (in-process, on loopback) and the
//! host streamer with a processor between RX and TX; the same streamer against
//! an external radio; and the pipeline latency probe the rt layer's `probe
//! --mode pipeline` runs (a streamer thread under a given thread setup).

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use radiohost_iq::sigmf::{self, DataType, Meta, SigMfError};
use radiohost_rt::probe::ProbeRun;
use radiohost_rt::{RtThreadBuilder, ThreadConfig};

use crate::net::{pin_current_thread, set_fifo_priority};
use crate::process::{PacketProcessor, Passthrough};
use crate::radio::{run_radio_on, RadioConfig, RadioError, RadioReport, RadioSockets};
use crate::streamer::{
    run_streamer_ready, PollMode, StreamerConfig, StreamerError, StreamerReport,
};
use crate::tx::TxPolicy;

/// EPIDs of the emulated radio's endpoints (RX streams land on the host at
/// `HOST_RX_EPID + port`; TX endpoints are `RADIO_TX_EPID + port`).
pub const HOST_RX_EPID: u16 = 0x0100;
pub const RADIO_TX_EPID: u16 = 0x0200;
pub const HOST_TX_EPID: u16 = 0x0300;

/// Errors of a session. Each names the part that failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("invalid session: {0}")]
    Config(&'static str),
    #[error("loopback socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("emulated radio failed: {0}")]
    Radio(#[from] RadioError),
    #[error("host streamer failed: {0}")]
    Streamer(#[from] StreamerError),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    #[error("starting the streamer thread: {0}")]
    Spawn(#[from] radiohost_rt::SpawnError),
    #[error("writing {path}: {source}")]
    Sigmf { path: PathBuf, source: SigMfError },
    #[error("pipeline mode needs an interval between 16 and 1900 us (one CHDR packet of that many samples at 1 Msps), got {0} us")]
    PipelineInterval(u128),
}

/// One streaming session's settings.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SessionConfig {
    pub inputs: usize,
    pub outputs: usize,
    pub rate_sps: f64,
    pub samples_per_packet: usize,
    pub packets: u64,
    /// RX timestamp -> TX timestamp budget.
    pub offset: Duration,
    pub poll: PollMode,
    pub cpu: Option<usize>,
    pub radio_cpu: Option<usize>,
    pub radio_spin: bool,
    /// SCHED_FIFO priority for the streamer and radio threads.
    pub rt_priority: Option<i32>,
    pub batch: usize,
    pub policy: TxPolicy,
    pub capacity_pkts: u32,
    pub subscribers: Vec<SocketAddr>,
    /// Keep what the radio transmitted (for verification).
    pub record: bool,
}

impl SessionConfig {
    /// Defaults for `inputs` x `outputs` ports: blocking receive, zero-fill,
    /// 32-datagram batches, recording on.
    pub fn new(inputs: usize, outputs: usize, rate_sps: f64, samples_per_packet: usize) -> Self {
        SessionConfig {
            inputs,
            outputs,
            rate_sps,
            samples_per_packet,
            packets: 5000,
            offset: Duration::from_millis(2),
            poll: PollMode::Blocking,
            cpu: None,
            radio_cpu: None,
            radio_spin: false,
            rt_priority: None,
            batch: 32,
            policy: TxPolicy::ZeroFill,
            capacity_pkts: 1024,
            subscribers: Vec::new(),
            record: true,
        }
    }

    pub fn offset_ticks(&self) -> u64 {
        (self.offset.as_secs_f64() * self.rate_sps).round() as u64
    }

    /// Refuses settings the wire format or the streamer cannot carry.
    pub fn check(&self) -> Result<(), SessionError> {
        if !(self.rate_sps > 0.0 && self.rate_sps.is_finite()) {
            return Err(SessionError::Config("the sample rate must be positive"));
        }
        if !(1..=16000).contains(&self.samples_per_packet) {
            return Err(SessionError::Config(
                "samples per packet must be 1..=16000 (CHDR length is 16 bits)",
            ));
        }
        if self.inputs == 0 || self.outputs == 0 {
            return Err(SessionError::Config(
                "need at least one input and one output port",
            ));
        }
        if self.packets == 0 || self.batch == 0 || self.capacity_pkts == 0 {
            return Err(SessionError::Config(
                "packets, batch and capacity must each be at least 1",
            ));
        }
        Ok(())
    }

    /// The streamer's configuration for this session.
    pub fn streamer_config(&self, bind: SocketAddr, radio_tx: SocketAddr) -> StreamerConfig {
        let mut c = StreamerConfig::new(bind, radio_tx, self.samples_per_packet);
        c.rx_epids = (0..self.inputs as u16).map(|p| HOST_RX_EPID + p).collect();
        c.tx_epids = (0..self.outputs as u16)
            .map(|p| RADIO_TX_EPID + p)
            .collect();
        c.host_epid = HOST_TX_EPID;
        c.tx_offset_ticks = self.offset_ticks();
        c.poll = self.poll;
        c.cpu = self.cpu;
        c.rt_priority = self.rt_priority;
        c.batch = self.batch;
        c.subscribers = self.subscribers.clone();
        c.pending_capacity = 1024;
        c.status_period = (self.capacity_pkts as u64 / 4).max(1);
        c
    }
}

/// How long [`run_session`] waits for the streamer thread to get ready before
/// starting the radio anyway (the run then reports what went wrong).
const STREAMER_START_TIMEOUT: Duration = Duration::from_secs(5);

/// What a session did: both sides' reports and the wall time.
#[derive(serde::Serialize)]
pub struct SessionReport {
    pub streamer: StreamerReport,
    pub radio: RadioReport,
    pub wall_s: f64,
}

/// Runs the emulated radio and the streamer on loopback until the radio's
/// packets are through.
pub fn run_session<P: PacketProcessor + 'static>(
    o: &SessionConfig,
    proc: P,
) -> Result<SessionReport, SessionError> {
    o.check()?;
    let host = UdpSocket::bind("127.0.0.1:0")?;
    let host_addr = host.local_addr()?;
    let loopback: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let radio_cfg = RadioConfig {
        host: host_addr,
        rx_bind: loopback,
        tx_bind: loopback,
        rx_dst_epids: (0..o.inputs as u16).map(|p| HOST_RX_EPID + p).collect(),
        tx_epids: (0..o.outputs as u16).map(|p| RADIO_TX_EPID + p).collect(),
        rate_sps: o.rate_sps,
        samples_per_packet: o.samples_per_packet,
        packets: o.packets,
        start_delay: Duration::from_millis(30),
        tx_capacity_pkts: o.capacity_pkts,
        policy: o.policy,
        linger: o.offset * 2 + Duration::from_millis(100),
        record: o.record,
        spin: o.radio_spin,
    };
    let sockets = RadioSockets::bind(&radio_cfg)?;
    let mut cfg = o.streamer_config(host_addr, sockets.tx.local_addr()?);
    cfg.stop_after_frames = Some(o.packets);
    cfg.idle_timeout = Duration::from_millis(300) + o.offset;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_streamer = stop.clone();
    let start = Instant::now();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let streamer = thread::Builder::new()
        .name("chdr-streamer".into())
        .spawn(move || {
            run_streamer_ready(host, cfg, proc, &stop_streamer, move || {
                let _ = ready_tx.send(());
            })
        })?;
    // The radio's clock starts when its thread does: start it only once the
    // streamer is listening, or its first packets are late before any work.
    // (Err: the streamer ended before it was ready; its join says why.)
    let _ = ready_rx.recv_timeout(STREAMER_START_TIMEOUT);
    let (radio_cpu, rt_priority) = (o.radio_cpu, o.rt_priority);
    let stop_radio = stop.clone();
    let radio = thread::Builder::new()
        .name("chdr-radio".into())
        .spawn(move || {
            if let Some(cpu) = radio_cpu {
                if let Err(e) = pin_current_thread(cpu) {
                    tracing::warn!(
                        "pinning the emulated radio to CPU {cpu} refused: {e}; running unpinned"
                    );
                }
            }
            if let Some(prio) = rt_priority {
                if let Err(e) = set_fifo_priority(prio) {
                    tracing::warn!("SCHED_FIFO {prio} for the emulated radio refused: {e}");
                }
            }
            run_radio_on(sockets, radio_cfg, &stop_radio)
        })?;
    let radio = radio
        .join()
        .map_err(|_| SessionError::Panicked("emulated radio"))?;
    stop.store(true, Ordering::Relaxed);
    let streamer = streamer
        .join()
        .map_err(|_| SessionError::Panicked("streamer"))?;
    Ok(SessionReport {
        streamer: streamer?,
        radio: radio?,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// Runs the streamer against an external radio: bound at `bind` (where the
/// radio sends RX packets), sending TX to `radio_tx`; stops `idle` after the
/// stream goes quiet or when `stop` is set.
pub fn run_external<P: PacketProcessor>(
    o: &SessionConfig,
    bind: SocketAddr,
    radio_tx: SocketAddr,
    idle: Duration,
    proc: P,
    stop: &AtomicBool,
) -> Result<StreamerReport, SessionError> {
    o.check()?;
    let mut cfg = o.streamer_config(bind, radio_tx);
    cfg.idle_timeout = idle;
    Ok(crate::streamer::run_streamer(cfg, proc, stop)?)
}

/// Writes what each TX port transmitted as a SigMF ci16 recording
/// (`<base>-txN.sigmf-meta/-data`); returns the base names written.
pub fn write_tx_recordings(
    radio: &RadioReport,
    base: &Path,
    rate_sps: f64,
) -> Result<Vec<PathBuf>, SessionError> {
    let mut written = Vec::new();
    for (p, rec) in radio.recordings.iter().enumerate() {
        let path = PathBuf::from(format!("{}-tx{p}", base.display()));
        let mut meta = Meta::new(DataType::Ci16Le, rate_sps).description(format!(
            "radiohost chdr emulate: TX port {p} as transmitted"
        ));
        // One capture from the file's first sample; its sample-clock tick goes in
        // core:global_index (core:sample_start is a file index).
        meta.captures[0].global_index = rec.origin;
        sigmf::write_ci16(&path, &meta, &rec.samples).map_err(|source| SessionError::Sigmf {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Sample rate of the pipeline probe's radio: 1 Msps, so one sample per us and
/// a packet of `interval` samples arrives every interval.
const PIPELINE_RATE_SPS: f64 = 1e6;

/// Pipeline latency probe: one CHDR packet per `interval` from an emulated
/// radio through a pass-through streamer (its thread set up by `thread`) and
/// back, on loopback, for `duration`. Latency = kernel RX timestamp to the
/// return of the `sendmmsg` carrying the packet's TX copy.
pub fn probe_pipeline(
    thread: &ThreadConfig,
    interval: Duration,
    duration: Duration,
) -> Result<ProbeRun, SessionError> {
    let spp = interval.as_micros();
    if !(16..=1900).contains(&spp) {
        return Err(SessionError::PipelineInterval(spp));
    }
    let spp = spp as usize;
    let packets = (duration.as_nanos() / interval.as_nanos()).max(1) as u64;
    let mut o = SessionConfig::new(1, 1, PIPELINE_RATE_SPS, spp);
    // TX timestamp = RX timestamp + 2 ms: ample, so late packets mean a stall.
    o.offset = Duration::from_millis(2);
    o.packets = packets;
    o.capacity_pkts = 64;
    o.record = false;
    let host = UdpSocket::bind("127.0.0.1:0")?;
    let host_addr = host.local_addr()?;
    let loopback: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let radio_cfg = RadioConfig {
        host: host_addr,
        rx_bind: loopback,
        tx_bind: loopback,
        rx_dst_epids: vec![HOST_RX_EPID],
        tx_epids: vec![RADIO_TX_EPID],
        rate_sps: PIPELINE_RATE_SPS,
        samples_per_packet: spp,
        packets,
        start_delay: Duration::from_millis(50),
        tx_capacity_pkts: o.capacity_pkts,
        policy: TxPolicy::ZeroFill,
        linger: Duration::from_millis(100),
        record: false,
        spin: false,
    };
    let sockets = RadioSockets::bind(&radio_cfg)?;
    let mut scfg = o.streamer_config(host_addr, sockets.tx.local_addr()?);
    scfg.pending_capacity = 64;
    scfg.status_period = 4;
    scfg.stop_after_frames = Some(packets);
    scfg.idle_timeout = Duration::from_millis(500);
    // Pinning comes from `thread`, applied to the streamer thread itself.
    scfg.cpu = None;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_streamer = stop.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let streamer = RtThreadBuilder::new("rt-probe-streamer")
        .config(thread.clone())
        .spawn(move |_| {
            let ready = move || {
                let _ = ready_tx.send(());
            };
            run_streamer_ready(host, scfg, Passthrough { ports: 1 }, &stop_streamer, ready)
        })?;
    let report = streamer.report().clone();
    let _ = ready_rx.recv_timeout(STREAMER_START_TIMEOUT);
    let stop_radio = stop.clone();
    let radio = thread::Builder::new()
        .name("rt-probe-radio".into())
        .spawn(move || run_radio_on(sockets, radio_cfg, &stop_radio))?;
    let radio = radio
        .join()
        .map_err(|_| SessionError::Panicked("emulated radio"));
    stop.store(true, Ordering::Relaxed);
    let streamed = streamer
        .join()
        .map_err(|_| SessionError::Panicked("streamer"))??;
    radio??;
    let histogram = streamed.rx_to_tx_hist;
    let missed = packets.saturating_sub(histogram.len());
    Ok(ProbeRun {
        histogram,
        report,
        missed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_refuse_what_the_wire_cannot_carry() {
        let mut o = SessionConfig::new(1, 1, 1e6, 16001);
        assert!(matches!(o.check(), Err(SessionError::Config(_))));
        o.samples_per_packet = 64;
        assert!(o.check().is_ok());
        o.rate_sps = f64::NAN;
        assert!(o.check().is_err());
        let err = probe_pipeline(
            &ThreadConfig::default(),
            Duration::from_micros(5),
            Duration::from_millis(10),
        )
        .unwrap_err();
        assert!(err.to_string().contains("between 16 and 1900"), "{err}");
    }

    /// A short pass-through session on loopback: every packet is accounted
    /// for and the TX recording equals the RX test signal.
    #[test]
    fn passthrough_session_transmits_what_it_received() {
        let mut o = SessionConfig::new(1, 1, 1e6, 256);
        o.packets = 40;
        o.offset = Duration::from_millis(100);
        let r = run_session(&o, Passthrough { ports: 1 }).unwrap();
        assert_eq!(r.radio.rx_packets, 40);
        let taps = radiohost_dsp::spec::identity_taps(1).unwrap();
        let v = crate::verify::verify(&r.radio, &taps, o.offset_ticks(), 40 * 256, 1, 0);
        assert!(v.passed(), "{v:?}");

        // The recording's one capture starts at file index 0; its sample-clock
        // tick is core:global_index, and the file verifies on reading.
        let dir = std::env::temp_dir().join(format!("radiohost-chdr-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let written = write_tx_recordings(&r.radio, &dir.join("out"), o.rate_sps).unwrap();
        let rec = sigmf::read(&written[0]).unwrap();
        let origin = r.radio.recordings[0].origin;
        assert!(origin.is_some_and(|t| t > 0));
        assert_eq!(rec.meta.captures.len(), 1);
        assert_eq!(rec.meta.captures[0].sample_start, 0);
        assert_eq!(rec.meta.captures[0].global_index, origin);
        assert_eq!(rec.samples.len(), r.radio.recordings[0].samples.len());
        std::fs::remove_dir_all(dir).ok();
    }
}
