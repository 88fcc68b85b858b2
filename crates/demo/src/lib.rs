//! `radiohost demo` as a library: the data path of docs/ARCHITECTURE.md run end
//! to end on the virtual testbed, each stage consuming the previous stage's
//! output.
//!
//! 1. **users** — K users' payload bits and uplink waveforms (phy's generator,
//!    with truth).
//! 2. **air** — the users' radios (`radio::emulated`) transmit into one
//!    emulated air (`testbed::air`: a MIMO Rayleigh channel run by dsp's UPOLS
//!    convolver, plus noise); M antennas on emulated WARP nodes capture each
//!    frame on one trigger.
//! 3. **transport** — the WARP nodes' RX buffers come into the host over the
//!    WARPLab wire protocol, read in parallel through `radio::warp`.
//! 4. **baseband** — the station decodes every frame (LROC scheduler on CPU
//!    executors, worker threads set up by the rt layer) and the bits are checked
//!    against the truth.
//! 5. **delivery** — PMT delivers each user's decoded payload to N receivers
//!    over unequal lossy links; each receiver checks SHA-256 against the user's
//!    original payload.
//!
//! Every stage reports an input and output digest; the chain holds when each
//! stage's input digest equals the previous stage's output digest.

mod air;
mod baseband;
mod delivery;
pub mod report;
mod users;

use std::time::Instant;

use serde::Serialize;
use thiserror::Error;

pub use delivery::default_link;
pub use report::{Counter, Delivery, DemoReport, Span, StageReport};

/// What to run. [`DemoConfig::default`] is the demo's documented default.
#[derive(Clone, Debug, Serialize)]
pub struct DemoConfig {
    /// Emulated WARP v3 nodes carrying the base station's antennas.
    pub nodes: usize,
    /// RF paths (antennas) per node, 1 to 4.
    pub paths_per_node: usize,
    /// Single-antenna users.
    pub users: usize,
    /// Uplink frames.
    pub frames: u64,
    /// Per-antenna, per-subcarrier SNR of each user at the antennas, in dB.
    pub snr_db: f64,
    /// Receivers of the users' payloads, one link spec each (testbed link syntax).
    pub links: Vec<String>,
    /// Station frame deadline, from a frame's capture to its decode.
    pub deadline_ms: f64,
    /// Deadline misses tolerated before the baseband stage fails, in per cent.
    pub max_deadline_miss_pct: f64,
    /// CPU executors (worker threads) of the station.
    pub workers: usize,
    pub seed: u64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            nodes: 4,
            paths_per_node: 4,
            users: 4,
            frames: 64,
            snr_db: 25.0,
            links: (0..3).map(default_link).collect(),
            deadline_ms: 100.0,
            max_deadline_miss_pct: 0.0,
            workers: 2,
            seed: 1,
        }
    }
}

impl DemoConfig {
    /// Base-station antennas: nodes x paths.
    pub fn antennas(&self) -> usize {
        self.nodes * self.paths_per_node
    }

    fn validate(&self) -> Result<(), DemoError> {
        let bad = |m: String| Err(DemoError::Config(m));
        if self.nodes == 0 || self.nodes > 64 {
            return bad(format!("{} nodes: use 1 to 64", self.nodes));
        }
        if !(1..=4).contains(&self.paths_per_node) {
            return bad(format!(
                "{} RF paths per node: a WARP v3 node has 1 to 4",
                self.paths_per_node
            ));
        }
        if self.users == 0 || self.users > self.antennas() {
            return bad(format!(
                "{} users with {} antennas: zero-forcing needs 1 to {} users",
                self.users,
                self.antennas(),
                self.antennas()
            ));
        }
        if self.frames == 0 || self.frames > 100_000 {
            return bad(format!("{} frames: use 1 to 100000", self.frames));
        }
        if self.links.is_empty() {
            return bad("no receivers: give at least one link".into());
        }
        for l in &self.links {
            if let Err(e) = radiohost_testbed::link::LinkConfig::parse(l) {
                return bad(format!("receiver link {l:?}: {e}"));
            }
        }
        if !self.snr_db.is_finite() {
            return bad(format!("SNR {} dB is not a number", self.snr_db));
        }
        if !(self.deadline_ms.is_finite() && self.deadline_ms > 0.0) {
            return bad(format!("deadline {} ms must be positive", self.deadline_ms));
        }
        if self.workers == 0 || self.workers > 256 {
            return bad(format!("{} workers: use 1 to 256", self.workers));
        }
        Ok(())
    }
}

/// Why a run could not be carried out (a run that completes but whose checks
/// fail is not an error: its report says `passed: false`).
#[derive(Debug, Error)]
pub enum DemoError {
    #[error("invalid demo configuration: {0}")]
    Config(String),
    #[error("the built-in frame configuration does not parse: {0}")]
    BuiltInConfig(#[from] serde_json::Error),
    #[error(transparent)]
    Phy(#[from] radiohost_phy::PhyError),
    #[error(transparent)]
    PhyConfig(#[from] radiohost_phy::config::ConfigError),
    #[error(transparent)]
    Block(#[from] radiohost_iq::BlockError),
    #[error("emulated air: {0}")]
    Air(#[from] radiohost_testbed::air::AirError),
    #[error("radio: {0}")]
    Radio(#[from] radiohost_radio::RadioError),
    #[error("the WARP nodes delivered {got} of {want} samples of a capture (receive error: {error:?}); see the emulator's counters with --log radiohost_warp=debug")]
    ShortCapture {
        got: usize,
        want: usize,
        error: radiohost_radio::RxErrorCode,
    },
    #[error("the users' radios accepted {took} of {want} samples of frame {frame}")]
    ShortSend {
        frame: usize,
        took: usize,
        want: usize,
    },
    #[error("WARP node emulator: {0}")]
    Emulator(#[source] std::io::Error),
    #[error("station: {0}")]
    StationKernel(#[from] radiohost_station::kernels::KernelError),
    #[error("station: {0}")]
    StationPolicy(#[from] radiohost_station::policy::PolicyError),
    #[error(transparent)]
    StationRun(#[from] radiohost_station::ru::blocks::BlockRunError),
    #[error("PMT: {0}")]
    Pmt(#[from] radiohost_pmt::sender::SenderError),
    #[error("dsp: {0}")]
    Dsp(#[from] radiohost_dsp::DspError),
}

/// Runs the whole data path. `on_stage` is called as each stage finishes (for
/// progress output); the returned report holds everything.
pub fn run(
    cfg: &DemoConfig,
    on_stage: &mut dyn FnMut(&StageReport),
) -> Result<DemoReport, DemoError> {
    cfg.validate()?;
    let t0 = Instant::now();
    let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1e3;
    let mut stages = Vec::new();
    let mut timeline = Vec::new();
    let fc = users::frame_config(cfg)?;

    let mut rep = StageReport::new("users");
    let start = Instant::now();
    let users = users::run(cfg, &fc, &mut rep)?;
    finish(&mut rep, start, ms(start), &mut timeline);
    on_stage(&rep);
    stages.push(rep);

    let mut air_rep = StageReport::new("air");
    let mut transport_rep = StageReport::new("transport");
    let start = Instant::now();
    let captured = air::run(
        cfg,
        &fc,
        &users,
        &mut air_rep,
        &mut transport_rep,
        &mut timeline,
        t0,
    )?;
    air_rep.start_ms = ms(start);
    transport_rep.start_ms = ms(start);
    let wall = start.elapsed().as_secs_f64() * 1e3;
    air_rep.wall_ms = wall;
    transport_rep.wall_ms = wall;
    on_stage(&air_rep);
    on_stage(&transport_rep);
    stages.push(air_rep);
    stages.push(transport_rep);

    let mut rep = StageReport::new("baseband");
    let start = Instant::now();
    let decoded = baseband::run(cfg, &fc, &captured, &users, &mut rep, &mut timeline, t0)?;
    finish(&mut rep, start, ms(start), &mut timeline);
    on_stage(&rep);
    stages.push(rep);

    let originals: Vec<Vec<u8>> = (0..cfg.users)
        .map(|u| users.user_payload_bytes(u))
        .collect();
    let mut rep = StageReport::new("delivery");
    let start = Instant::now();
    let delivered = delivery::run(&decoded, &originals, &cfg.links, cfg.seed, &mut rep)?;
    finish(&mut rep, start, ms(start), &mut timeline);
    let payload_digest = report::sha256_parts(originals.iter().map(Vec::as_slice));
    rep.check(rep.output_digest == payload_digest, || {
        "what the receivers hold does not hash to the users' payload digest".into()
    });
    on_stage(&rep);
    stages.push(rep);

    let mut out = DemoReport {
        config: cfg.clone(),
        stages,
        user_payload_sha256: originals.iter().map(|o| report::sha256_hex(o)).collect(),
        deliveries: delivered.deliveries,
        timeline,
        wall_s: t0.elapsed().as_secs_f64(),
        passed: false,
    };
    out.passed = out.stages.iter().all(|s| s.passed) && out.chain_breaks().is_empty();
    Ok(out)
}

fn finish(rep: &mut StageReport, start: Instant, start_ms: f64, timeline: &mut Vec<Span>) {
    rep.start_ms = start_ms;
    rep.wall_ms = start.elapsed().as_secs_f64() * 1e3;
    timeline.push(Span {
        stage: rep.name,
        frame: None,
        start_ms,
        end_ms: start_ms + rep.wall_ms,
    });
}
