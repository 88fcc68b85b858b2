//! Frame-level baseline (LuMaMi-like): each frame is bound to one device, the one with
//! the fewest frames in flight when its first instruction becomes ready, and runs
//! there in arrival order, then DAG order. No data moves between devices, but a
//! frame can use only one device's parallelism.

use super::core::{Core, Strategy};
use crate::dag::InstrIdx;
use crate::isa::{DeviceId, FrameId};

pub(crate) struct FrameLevel;

impl Strategy for FrameLevel {
    fn name(&self) -> &'static str {
        "frame"
    }

    fn route(&mut self, core: &mut Core, frame: FrameId, idx: InstrIdx) -> Option<DeviceId> {
        let rec = core.frames.get(&frame)?;
        let avoid = rec.status[idx as usize].avoid;
        let bound = rec.bound.filter(|&d| core.devices.contains(d));
        let device = match bound {
            Some(d) => d,
            None => {
                let d = least_loaded(core)?;
                core.frames.get_mut(&frame)?.bound = Some(d);
                d
            }
        };
        if Some(device) == avoid {
            // A retry runs elsewhere; the rest of the frame stays where it is.
            let ids: Vec<DeviceId> = core.devices.ids().collect();
            let pos = ids.iter().position(|&d| d == device).unwrap_or(0);
            return super::pick_avoiding(&ids, pos, avoid);
        }
        Some(device)
    }

    fn key(&mut self, core: &Core, frame: FrameId, idx: InstrIdx) -> u64 {
        let order = core.frames.get(&frame).map_or(0, |r| r.order);
        (order << 32) | u64::from(idx)
    }
}

/// The device with the fewest frames bound to it (ties: lowest id).
fn least_loaded(core: &Core) -> Option<DeviceId> {
    core.devices.ids().min_by_key(|&d| {
        let bound = core.frames.values().filter(|r| r.bound == Some(d)).count();
        (bound, d)
    })
}
