//! Symbol-level baseline (Hydra-like): work is partitioned by symbol across the
//! devices (`symbol mod n`; ZF by subcarrier part), served FIFO. Parallel across
//! symbols, but every cross-symbol dependence (ZF -> equalisation, decode -> store)
//! moves data, and a device gets its symbols whatever its load.

use super::core::{Core, Strategy};
use crate::dag::InstrIdx;
use crate::isa::{DeviceId, FrameId, Opcode};

pub(crate) struct SymbolLevel;

impl Strategy for SymbolLevel {
    fn name(&self) -> &'static str {
        "symbol"
    }

    fn route(&mut self, core: &mut Core, frame: FrameId, idx: InstrIdx) -> Option<DeviceId> {
        let avoid = core.frames.get(&frame)?.status[idx as usize].avoid;
        let instr = core.dag.instr(frame, idx);
        let slot = match instr.opcode {
            Opcode::Zf => usize::from(instr.part),
            _ => usize::from(instr.symbol),
        };
        let ids: Vec<DeviceId> = core.devices.ids().collect();
        super::pick_avoiding(&ids, slot, avoid)
    }

    fn key(&mut self, core: &Core, _frame: FrameId, _idx: InstrIdx) -> u64 {
        core.seq
    }
}
