//! Radio units sending frames received over the emulated air at the frame rate.
//!
//! A frame is what the station's antennas received from the users through the one
//! emulated air ([`super::air::UplinkAir`]): users' waveforms, MIMO channel and
//! noise, read off the air's RX ports, quantised to ci16. Pushing a massive-MIMO
//! frame through the air costs more than a frame period on a small machine, so the
//! frames are captured once into a [`FrameBank`] and the radio units cycle through
//! it at the frame rate, packetised over the fronthaul.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use radiohost_phy::generator::GeneratedFrame;
use radiohost_phy::FrameConfig;

use super::air::{UplinkAir, UplinkAirError};
use super::transport::{PacketTx, SharedSamples};
use super::wire::{FronthaulHeader, HEADER_LEN};
use crate::kernels::KernelContext;
use crate::runtime::{now_ns, Truth};

/// Frames received over the air once and replayed: RUs cycle through the bank.
pub struct FrameBank {
    pub frames: Vec<Arc<GeneratedFrame>>,
}

impl FrameBank {
    /// Frames `0..n` (at least one) of `cfg` as the antennas received them over a
    /// fresh emulated air ([`UplinkAir`]), with their truth.
    ///
    /// # Errors
    /// An air the configuration does not fit, or a generator error.
    pub fn generate(cfg: &FrameConfig, n: usize) -> Result<Self, UplinkAirError> {
        let mut air = UplinkAir::new(cfg)?;
        let frames = (0..n.max(1) as u64)
            .map(|f| air.generated_frame(f).map(Arc::new))
            .collect::<Result<_, _>>()?;
        Ok(Self { frames })
    }

    /// The bank entry RU `ru` sends as its frame `ru_frame`, with its truth.
    pub fn truth(&self, ru: u16, ru_frame: u64) -> Truth {
        let index = (ru_frame + u64::from(ru)) % self.frames.len() as u64;
        Truth {
            frame: self.frames[index as usize].clone(),
            index,
        }
    }
}

/// Air time of one frame (14 symbols of an NR-like 1 ms subframe) when the frame
/// period is longer.
pub const FRAME_AIR_NS: u64 = 1_000_000;

/// How a radio unit sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuConfig {
    pub frames: u64,
    pub frame_period_ns: u64,
    /// When (on [`now_ns`]) frame 0 starts.
    pub start_ns: u64,
}

/// What a radio unit did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuStats {
    pub packets: u64,
    pub dropped: u64,
    /// Symbols sent more than a frame's air time after their due time (the sender
    /// fell behind its clock, e.g. starved of CPU).
    pub late_symbols: u64,
}

/// Start radio unit `ru`: for each frame, each received (pilot and uplink) symbol at
/// its time in the frame, one packet per antenna. Sets `finished` when done.
pub fn spawn_ru(
    ru: u16,
    ctx: Arc<KernelContext>,
    bank: Arc<FrameBank>,
    cfg: RuConfig,
    mut tx: Box<dyn PacketTx>,
    finished: Arc<AtomicBool>,
) -> std::thread::JoinHandle<std::io::Result<RuStats>> {
    spawn_named(format!("station-ru{ru}"), move || {
        let c = &ctx.cfg;
        let (fl, sl, nsym) = (c.frame_len(), c.symbol_len(), c.schedule.len() as u64);
        let symbols = ctx.shape.received_symbols();
        let mut pkt = vec![0u8; HEADER_LEN + sl * 4];
        let mut stats = RuStats::default();
        let result = (|| {
            for f in 0..cfg.frames {
                let frame = bank.truth(ru, f).frame;
                let t_frame = cfg.start_ns + f * cfg.frame_period_ns;
                for &s in &symbols {
                    // A symbol is on the air until its end; send it then. A frame
                    // lasts at most FRAME_AIR_NS; a longer period (lower offered
                    // load) leaves a gap before the next frame instead of
                    // stretching the symbols.
                    let air = cfg.frame_period_ns.min(FRAME_AIR_NS);
                    let due = t_frame + (s as u64 + 1) * air / nsym;
                    let now = now_ns();
                    if due > now {
                        std::thread::sleep(Duration::from_nanos(due - now));
                    } else if now - due > air {
                        stats.late_symbols += 1;
                    }
                    for m in 0..c.antennas {
                        let start = m * fl + s * sl;
                        let samples = SharedSamples::new(frame.clone(), start..start + sl)
                            .ok_or_else(|| {
                                std::io::Error::new(
                                    std::io::ErrorKind::InvalidInput,
                                    "a generated frame shorter than its configuration",
                                )
                            })?;
                        let h = FronthaulHeader {
                            ru,
                            frame: f,
                            symbol: s as u16,
                            antenna: m as u16,
                            samples: sl as u16,
                        };
                        if tx.send_samples(&mut pkt, &h, samples)? {
                            stats.packets += 1;
                        } else {
                            stats.dropped += 1;
                        }
                    }
                }
            }
            Ok(())
        })();
        finished.store(true, Ordering::Release);
        result.map(|()| stats)
    })
}

/// Spawn `body` on a thread called `name` (names show in `perf` and `top -H`).
pub(crate) fn spawn_named<T: Send + 'static>(
    name: String,
    body: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name)
        .spawn(body)
        .expect("the OS refused to start a station thread")
}
