//! Whole streaming runs with their output check: pass-through and live
//! channel emulation, against the in-process emulated radio (verified sample
//! by sample) or an external radio (latency and counters only).

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use radiohost_dsp::channel::FadingError;
use radiohost_dsp::spec::{
    build_channel, identity_taps, response_schedule, Channel, ChannelSpec, ChannelSpecError,
};
use radiohost_dsp::{DspError, MimoTaps};

use crate::live_channel::{ChannelProcessor, LiveChannelError};
use crate::process::{PacketProcessor, Passthrough};
use crate::radio::RadioReport;
use crate::session::{run_external, run_session, SessionConfig, SessionError};
use crate::streamer::StreamerReport;
use crate::tx::TxPolicy;
use crate::verify::{verify_schedule, Verification};

/// Errors of a streaming run.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Channel(#[from] LiveChannelError),
    #[error("channel: {0}")]
    Spec(#[from] ChannelSpecError),
    #[error("channel: {0}")]
    Fading(#[from] FadingError),
    #[error("channel: {0}")]
    Dsp(#[from] DspError),
    #[error("ports must be 1..=16, got {0}")]
    Ports(usize),
}

/// Where the radio is and whether to check what it transmitted.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RunConfig {
    pub session: SessionConfig,
    /// External radio: (streamer bind address, radio TX address). `None`: the
    /// in-process emulated radio on loopback.
    pub external: Option<(SocketAddr, SocketAddr)>,
    /// Check the transmitted samples (in-process radio, zero-fill policy only).
    pub verify: bool,
}

/// What the transmitted samples should be.
pub enum Expected {
    /// A static channel: direct convolution with these taps.
    Static(MimoTaps),
    /// A time-varying channel: input sample t filtered wholly by
    /// `schedule[t / samples_per_response]`.
    Varying {
        schedule: Vec<MimoTaps>,
        samples_per_response: usize,
    },
}

/// A streaming run's report.
#[derive(serde::Serialize)]
pub struct RunReport {
    pub what: String,
    /// The channel, in words (pass-through: identity).
    pub channel: String,
    pub config: RunConfig,
    pub streamer: StreamerReport,
    /// The in-process radio's report (`None` with an external radio).
    pub radio: Option<RadioReport>,
    /// What the output was checked against, in words.
    pub check: Option<String>,
    pub verification: Option<Verification>,
    /// Whether the streamer kept up with the radio's sample clock (in-process
    /// radio only: an external radio reports no TX events).
    pub keep_up: Option<KeepUp>,
    pub wall_s: f64,
}

impl RunReport {
    /// False only when a check ran and failed.
    pub fn passed(&self) -> bool {
        self.verification.as_ref().is_none_or(Verification::passed)
    }
}

/// Did the host keep up with the radio's sample clock? Every TX packet must
/// reach the radio before its time (RX time + offset) and none may be dropped
/// on the way; if not, why: the processing itself needs more than the machine
/// has (CPU-bound), or the threads waited for a CPU longer than the offset
/// allows (scheduling).
#[derive(Clone, Debug, serde::Serialize)]
pub struct KeepUp {
    pub kept_up: bool,
    /// TX packets that reached the radio after their time (whole or in part).
    pub late_packets: u64,
    /// TX packets the streamer dropped (queue full while stalled, send failed).
    pub dropped_packets: u64,
    /// RX frames never processed before the run ended.
    pub unprocessed_frames: u64,
    /// Time in the packet processor over the stream's duration: the share of
    /// one core the processing alone needs at this rate.
    pub processing_load: f64,
    pub offset_us: f64,
    /// Worst RX timestamp -> TX arrival at the radio.
    pub worst_end_to_end_us: f64,
    /// One line: what went wrong and what to change (`None` when it kept up).
    pub reason: Option<String>,
}

/// Processing load above which the run is called CPU-bound (the streamer's
/// other work — sockets, packing — needs the rest).
const CPU_BOUND_LOAD: f64 = 0.7;

impl KeepUp {
    pub fn assess(s: &SessionConfig, streamer: &StreamerReport, radio: &RadioReport) -> KeepUp {
        let c = &streamer.counters;
        let tx = radio.tx_totals();
        let stream_ns = s.packets as f64 * s.samples_per_packet as f64 / s.rate_sps * 1e9;
        let processing_load = c.process_ns as f64 / stream_ns.max(1.0);
        let late_packets = tx.late_packets;
        let dropped_packets = c.host_queue_drops + c.send_drops;
        let unprocessed_frames = s.packets.saturating_sub(c.frames);
        let offset_us = s.offset.as_secs_f64() * 1e6;
        let worst_end_to_end_us = radio.end_to_end.max_ns as f64 / 1e3;
        let kept_up = late_packets == 0 && dropped_packets == 0 && unprocessed_frames == 0;
        let reason = (!kept_up).then(|| {
            let what = format!(
                "{late_packets} TX packets reached the radio after their time, {dropped_packets} \
                 were dropped and {unprocessed_frames} of {} frames were never processed",
                s.packets
            );
            let per_packet_us = c.process_ns as f64 / c.frames.max(1) as f64 / 1e3;
            let packet_us = s.samples_per_packet as f64 / s.rate_sps * 1e6;
            if processing_load > CPU_BOUND_LOAD {
                format!(
                    "the host did not keep up with the radio ({what}): processing alone takes \
                     {per_packet_us:.1} us per {packet_us:.1} us packet ({:.0}% of a core), more \
                     than this machine can give in real time; lower --rate, shorten the response \
                     or raise --block",
                    processing_load * 100.0
                )
            } else {
                let waited = if radio.end_to_end.samples > 0 {
                    format!("up to {:.1} ms end to end", worst_end_to_end_us / 1e3)
                } else {
                    "so long that none reached the radio in time to be timed".to_string()
                };
                // Already real-time: the stall came from below the scheduler (the
                // hypervisor, interrupts), so only a larger budget helps.
                let advice = match s.rt_priority {
                    Some(_) => "(the threads ran at SCHED_FIFO, so the stall came from below \
                                the scheduler: hypervisor or interrupts); raise --offset"
                        .to_string(),
                    None => "(other processes time-slice the streamer and radio threads); run \
                             with --rt-priority 50 (root or CAP_SYS_NICE), raise --offset or \
                             lower --rate"
                        .to_string(),
                };
                format!(
                    "the host did not keep up with the radio ({what}): processing takes only \
                     {:.0}% of a core ({per_packet_us:.1} us per {packet_us:.1} us packet), but \
                     packets waited for a CPU {waited}, against the --offset budget of {:.1} ms \
                     {advice}",
                    processing_load * 100.0,
                    offset_us / 1e3
                )
            }
        });
        KeepUp {
            kept_up,
            late_packets,
            dropped_packets,
            unprocessed_frames,
            processing_load,
            offset_us,
            worst_end_to_end_us,
            reason,
        }
    }
}

/// External runs stop this long after the radio goes quiet.
const EXTERNAL_IDLE: Duration = Duration::from_secs(2);

/// Runs `proc` between RX and TX and checks the output against `expected`.
pub fn run_stream<P: PacketProcessor + 'static>(
    what: &str,
    channel: String,
    cfg: &RunConfig,
    expected: &Expected,
    proc: P,
    stop: &AtomicBool,
) -> Result<RunReport, LiveError> {
    let s = &cfg.session;
    if let Some((bind, radio_tx)) = cfg.external {
        let started = std::time::Instant::now();
        let streamer = run_external(s, bind, radio_tx, EXTERNAL_IDLE, proc, stop)?;
        return Ok(RunReport {
            what: what.into(),
            channel,
            config: cfg.clone(),
            streamer,
            radio: None,
            check: None,
            verification: None,
            keep_up: None,
            wall_s: started.elapsed().as_secs_f64(),
        });
    }
    let result = run_session(s, proc)?;
    let checked = cfg.verify && s.policy == TxPolicy::ZeroFill;
    let (check, verification) = if checked {
        let (schedule, per, check) = match expected {
            Expected::Static(taps) => (
                std::slice::from_ref(taps),
                usize::MAX,
                "output vs direct convolution with the static channel".to_string(),
            ),
            Expected::Varying {
                schedule,
                samples_per_response,
            } => (
                schedule.as_slice(),
                *samples_per_response,
                format!(
                    "output vs direct convolution with the {} responses switched every {} input \
                     samples (each block filtered wholly by one response)",
                    schedule.len(),
                    samples_per_response
                ),
            ),
        };
        // A prime stride reaches every position in a packet at a fraction of the cost.
        let stride = if schedule[0].max_len() > 1 { 61 } else { 1 };
        let input_len = s.packets as usize * s.samples_per_packet;
        let v = verify_schedule(
            &result.radio,
            schedule,
            per,
            s.offset_ticks(),
            input_len,
            stride,
            2,
        );
        (Some(check), Some(v))
    } else {
        (None, None)
    };
    let keep_up = KeepUp::assess(s, &result.streamer, &result.radio);
    Ok(RunReport {
        what: what.into(),
        channel,
        config: cfg.clone(),
        streamer: result.streamer,
        radio: Some(result.radio),
        check,
        verification,
        keep_up: Some(keep_up),
        wall_s: result.wall_s,
    })
}

/// Pass-through of `ports` streams (RX port p -> TX port p), checked against identity.
pub fn passthrough(cfg: &RunConfig, stop: &AtomicBool) -> Result<RunReport, LiveError> {
    let ports = cfg.session.inputs;
    if !(1..=16).contains(&ports) || cfg.session.outputs != ports {
        return Err(LiveError::Ports(ports));
    }
    let taps = identity_taps(ports)?;
    let what = format!("{ports}x{ports} identity");
    run_stream(
        "pass-through",
        what,
        cfg,
        &Expected::Static(taps),
        Passthrough { ports },
        stop,
    )
}

/// Live channel emulation: every packet through `spec`'s channel in `block`-sample
/// UPOLS blocks. The channel's shape sets the session's ports.
pub fn chanemu(
    cfg: &RunConfig,
    spec: &ChannelSpec,
    block: usize,
    stop: &AtomicBool,
) -> Result<RunReport, LiveError> {
    let mut cfg = cfg.clone();
    let s = &mut cfg.session;
    let (channel, what) = build_channel(spec, block, Some(s.rate_sps))?;
    match channel {
        Channel::Static(taps) => {
            (s.inputs, s.outputs) = (taps.inputs(), taps.outputs());
            let proc = ChannelProcessor::new(&taps, block, s.samples_per_packet)?;
            let expected = Expected::Static(taps);
            run_stream("channel emulation", what, &cfg, &expected, proc, stop)
        }
        Channel::Fading {
            channel,
            update_blocks,
        } => {
            let replay = (*channel).clone();
            let proc =
                ChannelProcessor::fading(*channel, update_blocks, block, s.samples_per_packet)?;
            (s.inputs, s.outputs) = (proc.inputs(), proc.outputs());
            // The expected output replays the same (seeded) model: response r
            // filters the input blocks r*U .. (r+1)*U. Built in full only when checked.
            let checked = cfg.verify && cfg.external.is_none();
            let blocks = (s.packets as usize * s.samples_per_packet).div_ceil(block);
            let updates = if checked {
                blocks.div_ceil(update_blocks).max(1)
            } else {
                1
            };
            let expected = Expected::Varying {
                schedule: response_schedule(replay, updates)?,
                samples_per_response: update_blocks * block,
            };
            run_stream("channel emulation", what, &cfg, &expected, proc, stop)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_dsp::spec::ChannelModel;

    /// A short 2x2 Rayleigh run on loopback: the transmitted samples equal the
    /// direct convolution of the captured input.
    #[test]
    fn live_rayleigh_channel_output_is_verified() {
        let mut session = SessionConfig::new(1, 1, 1e6, 256);
        session.packets = 40;
        session.offset = Duration::from_millis(100);
        let cfg = RunConfig {
            session,
            external: None,
            verify: true,
        };
        let spec = ChannelSpec {
            taps_file: None,
            model: ChannelModel::Rayleigh,
            ports: Some((2, 2)),
            default_ports: (2, 2),
            model_taps: 64,
            spacing: 1,
            decay_db_per_tap: 0.5,
            seed: 7,
            doppler_hz: 10.0,
            update_blocks: 64,
            sinusoids: 16,
        };
        let r = chanemu(&cfg, &spec, 128, &AtomicBool::new(false)).unwrap();
        assert_eq!((r.config.session.inputs, r.config.session.outputs), (2, 2));
        let v = r.verification.as_ref().expect("checked");
        assert!(v.passed() && v.checked > 0, "{v:?}");
    }
}
