//! Stages 2 and 3, frame by frame: the users' radios transmit into the one
//! emulated air; the antennas of emulated WARP nodes capture each frame on one
//! trigger (stage 2, "air"); the host reads every node's RX buffers in parallel
//! over the WARPLab wire protocol through `radio::warp` (stage 3, "transport").

use std::time::{Duration, Instant};

use radiohost_dsp::channel::{draw_rayleigh, PowerDelayProfile};
use radiohost_iq::{Block, Cf32};
use radiohost_phy::config::FrameConfig;
use radiohost_radio::emulated::{EmulatedPorts, EmulatedRadio};
use radiohost_radio::warp::{WarpConfig, WarpRadio};
use radiohost_radio::{
    Radio, RxErrorCode, RxMetadata, StreamArgs, StreamCmd, StreamMode, Time, TxMetadata,
};
use radiohost_rt::ManualClock;
use radiohost_testbed::air::{Air, AirChannel, AirClock, AirConfig};
use radiohost_warp::emulator::{Emulator, EmulatorConfig, PortMap};
use radiohost_warp::node::NodePorts;
use radiohost_warp::{Addressing, RfBuffer};
use rand::SeedableRng;

use crate::report::{blocks_digest, Span, StageReport};
use crate::users::UsersOutput;
use crate::{DemoConfig, DemoError};

/// The channel's power-delay profile: phy's 16x4 profile (delays within the
/// cyclic prefix), each path unit mean power.
const DELAYS: [usize; 4] = [0, 4, 9, 17];
const POWERS_DB: [f32; 4] = [0.0, -2.0, -5.0, -9.0];

/// What the host captured: one block per frame (M antennas x frame length).
pub struct Captured {
    pub frames: Vec<Block>,
}

/// Noise level of the air for the demo's per-subcarrier SNR: the air states SNR
/// against unit TX power, the users transmit at `tx_gain`.
fn air_snr_db(cfg: &DemoConfig, tx_gain: f32) -> f64 {
    cfg.snr_db - 20.0 * (tx_gain as f64).log10()
}

fn make_air(
    cfg: &DemoConfig,
    fc: &FrameConfig,
    users: &UsersOutput,
) -> Result<(Air, ManualClock), DemoError> {
    let pdp = PowerDelayProfile::from_db(DELAYS.to_vec(), &POWERS_DB)
        .map_err(|e| DemoError::Config(format!("channel profile: {e}")))?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xa1_12);
    let taps = draw_rayleigh(&pdp, cfg.users, cfg.antennas(), &mut rng)?;
    let clock = ManualClock::new(0);
    let air = Air::new(AirConfig {
        rate_hz: fc.sample_rate,
        tx_ports: cfg.users,
        rx_ports: cfg.antennas(),
        channel: AirChannel::Static(taps),
        snr_db: Some(air_snr_db(cfg, users.tx_gain)),
        seed: cfg.seed,
        block: 512,
        // A few capture windows of history: a frame is captured right after it was sent.
        history: 4 * users.frame_period as usize,
        max_pending: 4 * users.frame_period as usize,
        clock: AirClock::Simulated(clock.clone()),
    })?;
    Ok((air, clock))
}

/// Node n's RF path r is antenna n * paths + r: an air RX port. The nodes do
/// not transmit (the base station only listens in the uplink).
fn antenna_ports(cfg: &DemoConfig) -> PortMap {
    let paths = cfg.paths_per_node;
    PortMap {
        nodes: (0..cfg.nodes)
            .map(|n| {
                let mut ports = NodePorts::default();
                for (r, port) in ports.rx.iter_mut().take(paths).enumerate() {
                    *port = Some(n * paths + r);
                }
                ports
            })
            .collect(),
    }
}

fn start_nodes(cfg: &DemoConfig, air: &Air) -> Result<(Emulator, WarpRadio), DemoError> {
    let paths = cfg.paths_per_node;
    let ecfg = EmulatorConfig {
        nodes: cfg.nodes as u16,
        // Ephemeral ports, so the demo runs beside a `radiohost warp emulate`.
        addressing: Addressing::LOOPBACK.with_ports(0, 0),
        air: Some((air.clone(), antenna_ports(cfg))),
        ..Default::default()
    };
    let emu = Emulator::start(ecfg).map_err(DemoError::Emulator)?;
    let radio = WarpRadio::connect(WarpConfig::for_emulator(&emu, paths)?)?;
    Ok((emu, radio))
}

/// Receives one num-samps-and-done burst of `len` samples on every channel.
fn recv_burst(
    rx: &mut dyn radiohost_radio::RxStreamer,
    ports: usize,
    len: usize,
) -> Result<Vec<Vec<Cf32>>, DemoError> {
    let mut bufs = vec![vec![Cf32::default(); len]; ports];
    let mut got = 0;
    while got < len {
        let mut md = RxMetadata::default();
        let mut slices: Vec<&mut [Cf32]> = bufs.iter_mut().map(|b| &mut b[got..]).collect();
        let n = rx.recv(&mut slices, &mut md, Duration::from_secs(5))?;
        if md.error != RxErrorCode::None || n == 0 {
            return Err(DemoError::ShortCapture {
                got,
                want: len,
                error: md.error,
            });
        }
        got += n;
        if md.end_of_burst {
            break;
        }
    }
    if got != len {
        return Err(DemoError::ShortCapture {
            got,
            want: len,
            error: RxErrorCode::None,
        });
    }
    Ok(bufs)
}

/// What each node holds in its RX buffers for the last capture, as the host
/// must receive it (Fix_14_13 words turned into samples).
fn node_buffers(
    emu: &Emulator,
    paths: usize,
    len: usize,
    rate: f64,
    tick: u64,
) -> Result<Block, DemoError> {
    let ports = emu.with_nodes(|nodes| {
        nodes
            .iter_mut()
            .flat_map(|n| {
                RfBuffer::ALL[..paths]
                    .iter()
                    .map(|&b| {
                        n.rx_buffer(b)[..len]
                            .iter()
                            .map(|w| w.to_cf32_fix14())
                            .collect()
                    })
                    .collect::<Vec<Vec<Cf32>>>()
            })
            .collect::<Vec<_>>()
    });
    Ok(Block::from_ports(ports, rate, tick)?)
}

#[allow(clippy::too_many_arguments)]
pub fn run(
    cfg: &DemoConfig,
    fc: &FrameConfig,
    users: &UsersOutput,
    air_rep: &mut StageReport,
    transport_rep: &mut StageReport,
    timeline: &mut Vec<Span>,
    t0: Instant,
) -> Result<Captured, DemoError> {
    let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1e3;
    let frame_len = fc.frame_len();
    let rate = fc.sample_rate;
    let (air, clock) = make_air(cfg, fc, users)?;
    let mut users_radio = EmulatedRadio::new(
        air.clone(),
        EmulatedPorts {
            rx: vec![0],
            tx: (0..cfg.users).collect(),
        },
    )?;
    let mut user_tx =
        users_radio.tx_stream(&StreamArgs::channels((0..cfg.users).collect::<Vec<_>>()))?;
    let (emu, mut bs_radio) = start_nodes(cfg, &air)?;
    let antennas = cfg.antennas();
    let mut rx = bs_radio.rx_stream(&StreamArgs::channels((0..antennas).collect::<Vec<_>>()))?;

    let mut sent = Vec::with_capacity(users.frames.len());
    let mut at_nodes = Vec::with_capacity(users.frames.len());
    let mut captured = Vec::with_capacity(users.frames.len());
    let mut bursts_acked = 0u64;
    for (f, block) in users.frames.iter().enumerate() {
        let t_air = Instant::now();
        let tick = block.start_tick;
        let md = TxMetadata {
            time: Some(Time::from_ticks(tick, rate)),
            start_of_burst: true,
            end_of_burst: true,
        };
        let n = user_tx.send(&block.port_slices(), &md, Duration::from_secs(1))?;
        if n != block.len() {
            return Err(DemoError::ShortSend {
                frame: f,
                took: n,
                want: block.len(),
            });
        }
        while let Some(e) = user_tx.recv_async_msg(Duration::ZERO) {
            if e.code() == 'A' {
                bursts_acked += 1;
            } else {
                air_rep.check(false, || {
                    format!("users' radio reported '{}' at frame {f}", e.code())
                });
            }
        }
        sent.push(block.clone());
        // The nodes' trigger fires at the frame's first tick: the air's clock is there.
        clock.set_ns(air.time_of(tick).ns());
        let t_transport = Instant::now();
        rx.issue_stream_cmd(StreamCmd::now(StreamMode::NumSampsAndDone(
            frame_len as u64,
        )))?;
        let ports = recv_burst(rx.as_mut(), antennas, frame_len)?;
        let host_block = Block::from_ports(ports, rate, tick)?;
        let done = Instant::now();
        let nodes = node_buffers(&emu, cfg.paths_per_node, frame_len, rate, tick)?;
        at_nodes.push(nodes);
        captured.push(host_block);
        timeline.push(Span {
            stage: "air",
            frame: Some(f as u64),
            start_ms: ms(t_air),
            end_ms: ms(t_transport),
        });
        timeline.push(Span {
            stage: "transport",
            frame: Some(f as u64),
            start_ms: ms(t_transport),
            end_ms: ms(done),
        });
    }
    let air_stats = air.stats();
    let emu_stats = emu.stats();

    air_rep.input = format!(
        "{} user bursts through the users' radios (radio::emulated)",
        sent.len()
    );
    air_rep.input_digest = blocks_digest(&sent);
    air_rep.output = format!(
        "{} frames x {} antennas in the RX buffers of {} WARP nodes ({} RF paths each), {} x {} Rayleigh channel, {:.1} dB SNR",
        at_nodes.len(),
        antennas,
        cfg.nodes,
        cfg.paths_per_node,
        antennas,
        cfg.users,
        cfg.snr_db
    );
    air_rep.output_digest = blocks_digest(&at_nodes);
    air_rep.count("bursts_acked", bursts_acked as f64, "burst");
    air_rep.count("late_emissions", air_stats.late_emissions as f64, "");
    air_rep.count(
        "dropped_samples",
        air_stats.dropped_samples as f64,
        "sample",
    );
    air_rep.count(
        "samples_processed",
        air_stats.samples_processed as f64,
        "sample",
    );
    // One burst ack per channel (user) and burst, as UHD reports them.
    let bursts_sent = (sent.len() * cfg.users) as u64;
    air_rep.check(bursts_acked == bursts_sent, || {
        format!("{bursts_acked} of {bursts_sent} user bursts acknowledged by the users' radios")
    });
    air_rep.check(
        air_stats.late_emissions == 0 && air_stats.dropped_samples == 0,
        || {
            format!(
                "the air dropped samples: {} late emissions, {} samples dropped",
                air_stats.late_emissions, air_stats.dropped_samples
            )
        },
    );
    let peak = at_nodes
        .iter()
        .flat_map(|b| b.as_slice())
        .map(|s| s.re.abs().max(s.im.abs()))
        .fold(0.0f32, f32::max);
    air_rep.count("peak_amplitude", peak as f64, "full scale");
    air_rep.check(peak < 1.0, || {
        format!("the antennas clipped: peak {peak:.3} of full scale")
    });

    transport_rep.input = format!("{} frames in the WARP nodes' RX buffers", at_nodes.len());
    transport_rep.input_digest = air_rep.output_digest.clone();
    transport_rep.output = format!(
        "{} frames x {} antennas x {} samples in host memory (parallel reads, WARPLab 7.4 wire format)",
        captured.len(),
        antennas,
        frame_len
    );
    transport_rep.output_digest = blocks_digest(&captured);
    let mismatched = captured
        .iter()
        .zip(&at_nodes)
        .filter(|(h, n)| h != n)
        .count();
    transport_rep.check(mismatched == 0, || {
        format!("{mismatched} frames reached the host different from the nodes' buffers")
    });
    let n = emu_stats.nodes.len().max(1) as f64;
    transport_rep.count("nodes", emu_stats.nodes.len() as f64, "");
    transport_rep.count(
        "triggers_per_node",
        emu_stats.nodes.iter().map(|c| c.triggers).sum::<u64>() as f64 / n,
        "",
    );
    transport_rep.count(
        "node_drops",
        emu_stats.nodes.iter().map(|c| c.dropped()).sum::<u64>() as f64,
        "packet",
    );
    transport_rep.count(
        "bytes",
        (captured.len() * antennas * frame_len * 4) as f64,
        "B",
    );
    drop(rx);
    emu.stop().map_err(DemoError::Emulator)?;
    Ok(Captured { frames: captured })
}
