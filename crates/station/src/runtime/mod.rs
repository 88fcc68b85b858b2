//! The real-time side of the station: CPU devices (pinned worker threads) and the
//! driver, the state that owns the `Box<dyn Policy>`.
//!
//! The driver's state sits behind a lock in the [`DriverSender`] every reporting
//! thread holds: a worker reporting a completion, or the ingest reporting an
//! arrival, runs the policy itself and dispatches what became ready, so no
//! instruction waits for a scheduler thread to wake up (the scheduler thread only
//! starts the devices and wakes for the policy's timers and the end of the run).
//! The driver feeds the policy frame arrivals, `input_ready` and completions with a
//! monotonic `now`, sends its [`crate::engine::Dispatch`]es to device work queues
//! (bounded; `low_priority` goes to a second queue workers serve last; `after`
//! parks the instruction behind its running predecessor, see [`device`]), and turns
//! the policy's events into per-frame records. Every frame ends as completed (checked
//! against the truth when known), missed (deadline NACK), rejected or failed; frames
//! still open when the run drains are failed with a reason, so none vanish.
//!
//! Devices can be added and removed while running: a removed device stops taking
//! work, its queued jobs are dropped and its running ones' completions are ignored;
//! the policy reschedules them. Frame buffers are pool leases held by every job, so a
//! late write from a removed device never lands in another frame.

pub mod device;
mod driver;
pub mod error;
pub mod executor;
pub mod placement;
pub mod station;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SendError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use radiohost_phy::generator::GeneratedFrame;

use crate::engine::InstrError;
use crate::isa::{DeviceId, FrameId, Instr, Nanos};
use crate::kernels::{FrameSlot, KernelContext};
use crate::pool::{BufferPool, Lease};

pub use device::CpuSpec;
pub use driver::{run_driver, DecodedPayload, DriverConfig, DriverOutput};
pub use error::StationError;
pub use executor::{
    CompletionSink, DeviceFault, DeviceSpec, Executor, ExecutorEnv, ExecutorFactory, Job, Refused,
    SubmitError,
};
pub use placement::{FramePlacement, WHOLE_FRAME_WINDOW};
pub use station::{run_station, StationSetup};

/// Monotonic nanoseconds since the first call in this process (the driver's `now`).
pub fn now_ns() -> Nanos {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as Nanos
}

/// Why the ingest refused a frame: the typed error it met (a `PoolError`, a
/// `BlockIngestError`), kept whole for the report.
pub type FrameRefusal = Arc<dyn std::error::Error + Send + Sync>;

/// A frame's ground truth, as generated (uplink payload, downlink payload, channel)
/// and the generator index the emulated users' noise is keyed by.
#[derive(Clone, Debug)]
pub struct Truth {
    pub frame: Arc<GeneratedFrame>,
    pub index: u64,
}

/// What reaches the scheduler thread.
pub enum DriverMsg {
    /// First fronthaul packet of a frame; its buffers are leased.
    FrameArrived {
        frame: FrameId,
        ru: u16,
        at: Nanos,
        slot: Lease<FrameSlot>,
        truth: Option<Truth>,
    },
    /// The ingest could not take a frame (buffer pool exhausted, a block of the
    /// wrong shape).
    FrameRefused {
        frame: FrameId,
        ru: u16,
        reason: FrameRefusal,
    },
    /// No packet of this frame reached the station (lost in the fronthaul).
    FrameLost { frame: FrameId, ru: u16 },
    /// Every antenna of `symbol` of `frame` is in the frame's staging buffer.
    InputReady { frame: FrameId, symbol: usize },
    /// A worker finished `instr`.
    Completed {
        device: DeviceId,
        instr: Instr,
        started: Nanos,
        finished: Nanos,
        result: Result<(), InstrError>,
    },
    /// One radio unit's ingest has seen its last packet.
    IngestDone { ru: u16, bad_packets: u64 },
    /// Add a device now.
    AddDevice(DeviceSpec),
    /// Remove a device now.
    RemoveDevice(DeviceId),
    /// A device reported its own loss (a CUDA error, a dead worker): it is removed
    /// and its work re-planned.
    DeviceFailed {
        device: DeviceId,
        fault: DeviceFault,
    },
}

/// A device added or removed when a frame arrives (for runs and tests; `station run
/// --device-events` turns times into frame ids).
#[derive(Clone, Debug)]
pub struct DeviceChange {
    /// Applied when this frame id arrives.
    pub at_frame: FrameId,
    pub action: DeviceAction,
}

#[derive(Clone, Debug)]
pub enum DeviceAction {
    /// The device leaves (as if it failed): its work is re-planned.
    Remove(DeviceId),
    /// A removed device joins again, started from its spec under a new id (its old
    /// incarnation's late completions stay ignored).
    Rejoin(DeviceId),
    /// A new device joins.
    Add(DeviceSpec),
}

/// Messages the scheduler thread's inbox holds. Every message is a frame event or
/// an instruction completion that the policy must see, so none is dropped: a
/// sender finding the inbox full waits (backpressure on the ingest and the
/// workers), and the wait is counted in [`DriverOutput::inbox_full_waits`]. The
/// ingest then falls behind the fronthaul, whose bounded ring drops and counts.
pub const DRIVER_INBOX_CAPACITY: usize = 8192;

/// The sending side of the driver: while [`run_driver`] runs, [`DriverSender::send`]
/// delivers each message on the calling thread, under a lock, to the driver's state
/// (the policy runs there and dispatches at once); before the driver starts (and
/// for users of the bare channel, such as the calibration) messages go to its
/// bounded inbox.
#[derive(Clone)]
pub struct DriverSender {
    tx: SyncSender<DriverMsg>,
    full_waits: Arc<AtomicU64>,
    state: Arc<Mutex<Option<driver::DriverState>>>,
}

impl DriverSender {
    /// Deliver `msg` to the running driver, or queue it, waiting while the inbox
    /// is full.
    ///
    /// # Errors
    /// The scheduler is gone; the message comes back.
    pub fn send(&self, msg: DriverMsg) -> Result<(), SendError<DriverMsg>> {
        let mut state = self.lock_state();
        if let Some(st) = state.as_mut() {
            st.deliver(msg);
            return Ok(());
        }
        // Queued under the lock, so a message queued before the driver installs its
        // state is handled before any later message delivered directly.
        match self.tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(msg)) => {
                drop(state);
                self.full_waits.fetch_add(1, Ordering::Relaxed);
                self.tx.send(msg)
            }
            Err(TrySendError::Disconnected(msg)) => Err(SendError(msg)),
        }
    }

    /// Whether the driver has installed its state (its devices are up).
    pub fn is_installed(&self) -> bool {
        self.lock_state().is_some()
    }

    /// Sends that found the inbox full and had to wait, over every clone.
    pub fn full_waits(&self) -> u64 {
        self.full_waits.load(Ordering::Relaxed)
    }

    fn lock_state(&self) -> MutexGuard<'_, Option<driver::DriverState>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Make `state` the receiver of every later send, after handling what the
    /// inbox already holds.
    fn install(&self, mut state: driver::DriverState, inbox: &Receiver<DriverMsg>) {
        let mut slot = self.lock_state();
        while let Ok(msg) = inbox.try_recv() {
            state.deliver(msg);
        }
        *slot = Some(state);
    }

    /// Take the driver's state back; later sends go to the inbox.
    fn uninstall(&self) -> Option<driver::DriverState> {
        self.lock_state().take()
    }

    /// Run `f` on the installed state (None when there is none).
    fn with_state<R>(&self, f: impl FnOnce(&mut driver::DriverState) -> R) -> Option<R> {
        self.lock_state().as_mut().map(f)
    }
}

/// The driver's bounded inbox ([`DRIVER_INBOX_CAPACITY`] messages) and its sender.
pub fn driver_channel() -> (DriverSender, Receiver<DriverMsg>) {
    let (tx, rx) = mpsc::sync_channel(DRIVER_INBOX_CAPACITY);
    let tx = DriverSender {
        tx,
        full_waits: Arc::new(AtomicU64::new(0)),
        state: Arc::new(Mutex::new(None)),
    };
    (tx, rx)
}

/// Pool of frame slots for `ctx`.
pub fn frame_pool(
    ctx: &Arc<KernelContext>,
    initial: usize,
    exhaustion: crate::pool::Exhaustion,
) -> BufferPool<FrameSlot> {
    let c = ctx.clone();
    BufferPool::new("frame slots", initial, exhaustion, move || {
        FrameSlot::new(&c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_inbox_makes_senders_wait_and_counts_it() {
        let (tx, rx) = driver_channel();
        for symbol in 0..DRIVER_INBOX_CAPACITY {
            tx.send(DriverMsg::InputReady { frame: 0, symbol }).unwrap();
        }
        assert_eq!(tx.full_waits(), 0);
        let late = tx.clone();
        let sender = std::thread::spawn(move || {
            late.send(DriverMsg::InputReady {
                frame: 1,
                symbol: 0,
            })
        });
        // The counter moves before the sender blocks; then make room for it.
        while tx.full_waits() == 0 {
            std::thread::yield_now();
        }
        assert!(matches!(
            rx.recv().unwrap(),
            DriverMsg::InputReady {
                frame: 0,
                symbol: 0
            }
        ));
        sender.join().unwrap().unwrap();
        assert_eq!(tx.full_waits(), 1);
        // Nothing was dropped: every message, the late one last, is still there.
        let rest: Vec<_> = rx.try_iter().collect();
        assert_eq!(rest.len(), DRIVER_INBOX_CAPACITY);
        assert!(matches!(
            rest.last(),
            Some(DriverMsg::InputReady { frame: 1, .. })
        ));
        drop(rx);
        assert!(tx
            .send(DriverMsg::InputReady {
                frame: 2,
                symbol: 0
            })
            .is_err());
    }
}
