//! Task-level baseline (BigStation-like): opcode classes are statically mapped to
//! device groups (FFTs, ZF, equalise/precode, coding) and each group serves FIFO.
//! Every stage boundary is a data shuffle, and a group's load does not move to idle
//! devices of another group.

use super::core::{Core, Strategy};
use crate::dag::InstrIdx;
use crate::isa::{DeviceId, FrameId, Opcode};

pub(crate) struct TaskLevel;

const CLASSES: usize = 4;

fn class(op: Opcode) -> usize {
    match op {
        Opcode::Load | Opcode::PilotFft | Opcode::UpFft | Opcode::Ifft => 0,
        Opcode::Zf => 1,
        Opcode::EqDemod | Opcode::Precode => 2,
        Opcode::Decode | Opcode::Encode | Opcode::Store => 3,
    }
}

impl Strategy for TaskLevel {
    fn name(&self) -> &'static str {
        "task"
    }

    fn route(&mut self, core: &mut Core, frame: FrameId, idx: InstrIdx) -> Option<DeviceId> {
        let avoid = core.frames.get(&frame)?.status[idx as usize].avoid;
        let instr = core.dag.instr(frame, idx);
        let ids: Vec<DeviceId> = core.devices.ids().collect();
        let n = ids.len();
        let c = class(instr.opcode);
        // With fewer devices than classes, classes share devices; with more, each
        // class owns a contiguous group and spreads its instructions inside it.
        let group: &[DeviceId] = if n >= CLASSES {
            &ids[c * n / CLASSES..(c + 1) * n / CLASSES]
        } else if n > 0 {
            &ids[c % n..c % n + 1]
        } else {
            &[]
        };
        let spread = usize::from(instr.symbol) * 31 + usize::from(instr.part);
        let first = super::pick_avoiding(group, spread, avoid)?;
        if Some(first) == avoid && n > 1 {
            // Single-device group: a retry leaves the group.
            let pos = ids.iter().position(|&d| d == first).unwrap_or(0);
            return super::pick_avoiding(&ids, pos, avoid);
        }
        Some(first)
    }

    fn key(&mut self, core: &Core, _frame: FrameId, _idx: InstrIdx) -> u64 {
        core.seq
    }
}
