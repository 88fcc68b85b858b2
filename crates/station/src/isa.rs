//! The station's instruction set: what one schedulable piece of baseband work is.
//!
//! Granularity (shared by the DAG builder, the kernels, the executors and the simulator):
//!
//! | opcode | `symbol` | `part` | reads | writes |
//! |---|---|---|---|---|
//! | `Load` | frame symbol index | 0 | RU fronthaul samples of that symbol, all antennas | time-domain buffer |
//! | `PilotFft` | pilot symbol | 0 | time-domain pilot symbol | per-antenna CSI contribution, noise energy |
//! | `UpFft` | uplink symbol | 0 | time-domain data symbol | frequency-domain data, all antennas |
//! | `Zf` | 0 | subcarrier part `k` | CSI of all pilot symbols, bins of part `k` | detector / precoder of part `k` |
//! | `EqDemod` | uplink symbol | subcarrier part `k` | FFT output + ZF part `k` | LLRs of part `k`, all users |
//! | `Decode` | uplink symbol | user group `g` | LLRs of that symbol and the group's users (all parts) | payload bits + CRC verdicts |
//! | `Encode` | downlink symbol | user group `g` | payload bits | QAM symbols of the group's users (CRC, LDPC, scrambling, mapping) |
//! | `Precode` | downlink symbol | subcarrier part `k` | QAM symbols of all users + ZF part `k` | antenna-domain bins of part `k` |
//! | `Ifft` | downlink symbol | 0 | precoded bins of all parts | time-domain symbol, all antennas |
//! | `Store` | symbol (downlink) or 0 (uplink) | 0 | decoded bits / time-domain symbol | host output / RU fronthaul |
//!
//! `symbol` is always the index in the frame schedule (`FrameConfig::schedule`), so an
//! instruction names its data unambiguously. Subcarrier parts and user groups are cut
//! by `FrameShape::part_range` and `FrameShape::user_range`.

use std::fmt;

/// Frame sequence number (monotonic per station run).
pub type FrameId = u64;

/// Time in nanoseconds on the clock the driver uses (real monotonic or simulated):
/// the count inside a `radiohost_rt::Time`. The scheduler's tables and the
/// simulator's event heap keep it as a plain integer.
pub type Nanos = u64;

/// Index of an executor device in the pool.
pub type DeviceId = u32;

/// The largest device id: the scheduler's tables are indexed by id, and a pool holds
/// at most 1024 devices (the simulator's limit; a station runs a handful).
pub const MAX_DEVICE_ID: DeviceId = 1023;

/// What an instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Opcode {
    Load,
    PilotFft,
    UpFft,
    Zf,
    EqDemod,
    Decode,
    Encode,
    Precode,
    Ifft,
    Store,
}

impl Opcode {
    /// Every opcode, in pipeline order (tables and reports iterate this).
    pub const ALL: [Opcode; 10] = [
        Opcode::Load,
        Opcode::PilotFft,
        Opcode::UpFft,
        Opcode::Zf,
        Opcode::EqDemod,
        Opcode::Decode,
        Opcode::Encode,
        Opcode::Precode,
        Opcode::Ifft,
        Opcode::Store,
    ];

    /// Position in [`Opcode::ALL`] (for per-opcode arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Short lower-case name used in tables, JSON and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Load => "load",
            Opcode::PilotFft => "pilot_fft",
            Opcode::UpFft => "up_fft",
            Opcode::Zf => "zf",
            Opcode::EqDemod => "eq_demod",
            Opcode::Decode => "decode",
            Opcode::Encode => "encode",
            Opcode::Precode => "precode",
            Opcode::Ifft => "ifft",
            Opcode::Store => "store",
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One schedulable instruction: `<frame, symbol> + opcode + part` (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Instr {
    pub frame: FrameId,
    pub symbol: u16,
    pub opcode: Opcode,
    pub part: u16,
}

impl Instr {
    pub fn new(frame: FrameId, symbol: usize, opcode: Opcode, part: usize) -> Self {
        Self {
            frame,
            symbol: symbol as u16,
            opcode,
            part: part as u16,
        }
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<{}, {}> {}[{}]",
            self.frame, self.symbol, self.opcode, self.part
        )
    }
}

/// Kind of executor device; resource units are cores for CPUs and SMs for GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Cpu,
    Gpu,
}
