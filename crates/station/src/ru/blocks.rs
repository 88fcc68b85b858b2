//! The station's ingest of antenna sample blocks from any source: a
//! [`radiohost_iq::Block`] of `M` antenna ports x one frame of samples (an
//! `RxStreamer`'s output, blocks read off the emulated air, a capture) becomes a
//! frame for the same scheduler and CPU executors the fronthaul ingest feeds.
//!
//! The block path differs from the packet path ([`super::ingest`]) only in where
//! samples come from: it leases a frame slot, quantises each received symbol into
//! the slot's staging (ci16, as the fronthaul carries), and announces the frame
//! and each symbol's `input_ready` to the driver, exactly the messages the packet
//! ingest sends. Each block is scaled to the fronthaul's -15 dBFS level before
//! quantisation (a per-frame digital AGC: the station estimates CSI per frame, so
//! the gain cancels) because a generic source's level is unknown.
//!
//! [`run_blocks`] is the whole run: driver + devices, blocks in, per-frame
//! records, decoded payloads and the report out.

use std::sync::Arc;
use std::time::Duration;

use radiohost_iq::{Block, Ci16};
use radiohost_phy::generator::TARGET_RMS;

use crate::engine::Policy;
use crate::isa::FrameId;
use crate::kernels::slot::write;
use crate::kernels::{FrameSlot, KernelContext, SymbolRole};
use crate::pool::{BufferPool, Exhaustion};
use crate::report::{RunMeta, RunReport};
use crate::runtime::{
    driver_channel, frame_pool, now_ns, run_driver, DecodedPayload, DeviceSpec, DriverConfig,
    DriverMsg, DriverSender, FrameRefusal, Truth,
};

/// Counters of one block ingest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BlockIngestStats {
    /// Blocks offered.
    pub blocks: u64,
    /// Blocks handed to the scheduler as frames.
    pub frames: u64,
    /// Blocks whose shape (ports, length) is not one frame of this configuration:
    /// recorded as rejected frames.
    pub bad_shape: u64,
    /// Blocks refused because no frame slot came free in time.
    pub refused: u64,
    /// Samples that saturated ci16 after the AGC (peaks beyond ~15 dB over RMS).
    pub clipped_samples: u64,
}

/// Why a block was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlockIngestError {
    #[error("block of {ports} ports x {len} samples is not one frame of this configuration ({antennas} antennas x {frame_len} samples); read one frame per antenna port")]
    Shape {
        ports: usize,
        len: usize,
        antennas: usize,
        frame_len: usize,
    },
    #[error("no frame slot came free for frame {frame} ({source}); allow more frames in flight or decode faster")]
    NoSlot {
        frame: FrameId,
        #[source]
        source: crate::pool::PoolError,
    },
    #[error("the station's scheduler has stopped; no more frames can be taken")]
    DriverGone,
}

/// Feeds blocks to a running driver (one "radio unit" of the driver's count).
pub struct BlockIngest {
    ctx: Arc<KernelContext>,
    pool: BufferPool<FrameSlot>,
    events: DriverSender,
    ru: u16,
    stats: BlockIngestStats,
    /// Received-symbol positions: (symbol index in the frame, staging position).
    symbols: Vec<(usize, usize)>,
}

impl BlockIngest {
    /// An ingest that reports as radio unit `ru` to the driver behind `events`.
    pub fn new(
        ctx: Arc<KernelContext>,
        pool: BufferPool<FrameSlot>,
        events: DriverSender,
        ru: u16,
    ) -> Self {
        let symbols = ctx
            .shape
            .received_symbols()
            .into_iter()
            .filter_map(|s| match ctx.role(s) {
                Some(SymbolRole::Pilot { rx, .. } | SymbolRole::Uplink { rx, .. }) => Some((s, rx)),
                _ => None,
            })
            .collect();
        Self {
            ctx,
            pool,
            events,
            ru,
            stats: BlockIngestStats::default(),
            symbols,
        }
    }

    pub fn stats(&self) -> BlockIngestStats {
        self.stats
    }

    /// Hand `block` (one frame: antenna ports x `frame_len` samples) to the
    /// scheduler as frame `frame`, with its truth when known (completed frames are
    /// then checked against it). A refused block is also recorded as a rejected
    /// frame, so it is counted in the report.
    ///
    /// # Errors
    /// A block of the wrong shape, no free frame slot, or a stopped driver.
    pub fn push(
        &mut self,
        frame: FrameId,
        block: &Block,
        truth: Option<Truth>,
    ) -> Result<(), BlockIngestError> {
        self.stats.blocks += 1;
        let cfg = &self.ctx.cfg;
        let (m_n, fl, sl) = (cfg.antennas, cfg.frame_len(), cfg.symbol_len());
        if block.ports() != m_n || block.len() != fl {
            self.stats.bad_shape += 1;
            let e = BlockIngestError::Shape {
                ports: block.ports(),
                len: block.len(),
                antennas: m_n,
                frame_len: fl,
            };
            self.refuse(frame, Arc::new(e.clone()))?;
            return Err(e);
        }
        let slot = match self.pool.acquire() {
            Ok(slot) => slot,
            Err(e) => {
                self.stats.refused += 1;
                self.refuse(frame, Arc::new(e.clone()))?;
                return Err(BlockIngestError::NoSlot { frame, source: e });
            }
        };
        let power: f64 = block
            .as_slice()
            .iter()
            .map(|s| f64::from(s.norm_sqr()))
            .sum::<f64>()
            / block.as_slice().len().max(1) as f64;
        let gain = if power > 0.0 && power.is_finite() {
            TARGET_RMS / power.sqrt() as f32
        } else {
            1.0
        };
        for &(sym, rx) in &self.symbols {
            let mut staged = write(&slot.staging[rx]);
            let staging = staged.copied_mut();
            for m in 0..m_n {
                let src = &block.port(m)[sym * sl..(sym + 1) * sl];
                for (o, s) in staging[m * sl..(m + 1) * sl].iter_mut().zip(src) {
                    let v = s * gain;
                    self.stats.clipped_samples += u64::from(v.re.abs() >= 1.0 || v.im.abs() >= 1.0);
                    *o = Ci16::from_cf32(v);
                }
            }
        }
        if let Some(truth) = &truth {
            write(&slot.downlink_payload).clone_from_slice(&truth.frame.downlink_payload);
        }
        let arrived = DriverMsg::FrameArrived {
            frame,
            ru: self.ru,
            at: now_ns(),
            slot,
            truth,
        };
        self.events
            .send(arrived)
            .map_err(|_| BlockIngestError::DriverGone)?;
        for &(symbol, _) in &self.symbols {
            self.events
                .send(DriverMsg::InputReady { frame, symbol })
                .map_err(|_| BlockIngestError::DriverGone)?;
        }
        self.stats.frames += 1;
        Ok(())
    }

    fn refuse(&self, frame: FrameId, reason: FrameRefusal) -> Result<(), BlockIngestError> {
        self.events
            .send(DriverMsg::FrameRefused {
                frame,
                ru: self.ru,
                reason,
            })
            .map_err(|_| BlockIngestError::DriverGone)
    }

    /// Tell the driver this source has ended.
    pub fn finish(self) {
        let _ = self.events.send(DriverMsg::IngestDone {
            ru: self.ru,
            bad_packets: self.stats.bad_shape,
        });
    }
}

/// One frame of antenna samples with its id and, when known, its truth.
pub struct BlockFrame {
    pub frame: FrameId,
    pub block: Block,
    pub truth: Option<Truth>,
}

/// How a block run is set up.
#[derive(Clone, Debug)]
pub struct BlockRunConfig {
    /// Named in the report.
    pub config_name: String,
    pub devices: Vec<DeviceSpec>,
    /// Frame deadline after its block was handed in.
    pub deadline_ns: u64,
    /// Jobs queued per device at most.
    pub queue_capacity: usize,
    /// Frames decoded at once at most: a block waits for a free frame slot, so a
    /// source faster than the station is slowed down instead of overrunning it.
    pub max_in_flight: usize,
    /// How long a block waits for a slot before it is refused.
    pub slot_wait: Duration,
    /// Verify the downlink of frames with a truth through emulated users (costly).
    pub verify_downlink: bool,
}

impl BlockRunConfig {
    /// `devices`, a 4 ms deadline, 4 frames in flight, 10 s slot wait.
    pub fn new(config_name: &str, devices: Vec<DeviceSpec>) -> Self {
        Self {
            config_name: config_name.to_string(),
            devices,
            deadline_ns: 4_000_000,
            queue_capacity: 4096,
            max_in_flight: 4,
            slot_wait: Duration::from_secs(10),
            verify_downlink: false,
        }
    }
}

/// What a block run produced.
#[derive(Debug)]
pub struct BlockRunReport {
    pub report: RunReport,
    /// Decoded uplink payload of every completed frame, by frame id.
    pub payloads: Vec<DecodedPayload>,
    pub ingest: BlockIngestStats,
}

/// Why a block run failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum BlockRunError {
    #[error("could not start the station's scheduler thread: {0}")]
    Spawn(#[from] std::io::Error),
    #[error("the station's scheduler failed: {0}")]
    Driver(#[from] crate::runtime::StationError),
    #[error("the station's scheduler thread panicked; see its message above")]
    Panicked,
}

/// Pack payload bits (one bit per byte, MSB first; a last partial byte is padded
/// with zeros) into bytes: what the users' payload is as bytes.
pub fn pack_bits(bits: &[u8]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |acc, (i, &b)| acc | ((b & 1) << (7 - i)))
        })
        .collect()
}

impl DecodedPayload {
    /// Per user, the decoded payload as bytes ([`pack_bits`]).
    pub fn user_bytes(&self) -> Vec<Vec<u8>> {
        self.bits.iter().map(|b| pack_bits(b)).collect()
    }
}

/// Decode `frames` on `cfg.devices` under `policy`: each block is handed in as
/// soon as a frame slot is free (at most `max_in_flight` frames at once), and the
/// run ends when the source ends and every frame is decided.
///
/// # Errors
/// The scheduler could not start or failed. Blocks that are refused are recorded
/// in the report, not returned as errors.
pub fn run_blocks<I>(
    ctx: Arc<KernelContext>,
    cfg: &BlockRunConfig,
    policy: Box<dyn Policy>,
    frames: I,
) -> Result<BlockRunReport, BlockRunError>
where
    I: IntoIterator<Item = BlockFrame>,
{
    let policy_name = policy.name().to_string();
    let pool = frame_pool(
        &ctx,
        cfg.max_in_flight.max(1),
        Exhaustion::Block {
            timeout: cfg.slot_wait,
        },
    );
    let (tx, rx) = driver_channel();
    let dcfg = DriverConfig {
        devices: cfg.devices.clone(),
        queue_capacity: cfg.queue_capacity,
        deadline_ns: cfg.deadline_ns,
        changes: Vec::new(),
        rus: 1,
        drain_timeout_ns: (cfg.deadline_ns * 4).max(200_000_000),
        verify_downlink: cfg.verify_downlink,
        keep_payloads: true,
        calibration: None,
    };
    let driver = {
        let (ctx, tx) = (ctx.clone(), tx.clone());
        std::thread::Builder::new()
            .name("station-scheduler".into())
            .spawn(move || run_driver(policy, ctx, dcfg, rx, tx))?
    };
    let mut ingest = BlockIngest::new(ctx, pool.clone(), tx, 0);
    let started = now_ns();
    for f in frames {
        match ingest.push(f.frame, &f.block, f.truth) {
            Ok(()) | Err(BlockIngestError::Shape { .. } | BlockIngestError::NoSlot { .. }) => {}
            Err(BlockIngestError::DriverGone) => break,
        }
    }
    let stats = ingest.stats();
    ingest.finish();
    let out = driver.join().map_err(|_| BlockRunError::Panicked)??;
    let mut notes = out.notes.clone();
    if stats.bad_shape > 0 {
        notes.push(format!(
            "{} blocks were not one frame of this configuration: rejected",
            stats.bad_shape
        ));
    }
    if stats.clipped_samples > 0 {
        notes.push(format!(
            "{} samples clipped at ci16 after the AGC",
            stats.clipped_samples
        ));
    }
    let wall_ns = out
        .last_decision
        .saturating_sub(out.first_arrival.unwrap_or(started));
    let meta = RunMeta {
        policy: policy_name,
        config: cfg.config_name.clone(),
        devices: cfg.devices.len(),
        workers: cfg.devices.iter().map(DeviceSpec::cpu_workers).sum(),
        rus: 1,
        offered_fps: 0.0,
        wall_s: wall_ns as f64 / 1e9,
        deadline_ns: cfg.deadline_ns,
        pool: pool.stats(),
        bad_packets: out.bad_packets,
        rescheduled: out.rescheduled,
        device_removals: out.device_removals,
        device_instrs: out.device_instrs.clone(),
        device_costs: out.device_costs.clone(),
        scheduler_busy_ns: out.scheduler_busy_ns,
        dispatches: out.dispatches,
        late_symbols: 0, // no radio-unit emulator: blocks come from the source
        notes,
    };
    let mut payloads = out.payloads;
    payloads.sort_by_key(|p| p.frame);
    Ok(BlockRunReport {
        report: out.report.finish(meta),
        payloads,
        ingest: stats,
    })
}
