//! Where every instruction's data lives in a frame slot's device buffers: the pure
//! (GPU-free, tested) part of the executor.

use radiohost_phy::config::{PilotLayout, SymbolKind};
use radiohost_phy::FrameConfig;
use radiohost_station::isa::{Instr, Opcode};
use radiohost_station::shape::FrameShape;

use crate::GpuError;

/// Sizes and symbol slots of one frame configuration on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    pub antennas: usize,
    pub users: usize,
    pub data_num: usize,
    pub fft_size: usize,
    pub log_fft: u32,
    pub cp_len: usize,
    pub symbol_len: usize,
    pub frame_len: usize,
    pub data_start: usize,
    /// Bits per axis (Qm / 2).
    pub bits_per_axis: usize,
    /// Bits per data symbol per user.
    pub symbol_bits: usize,
    pub blocks_per_symbol: usize,
    pub tx_bits: usize,
    /// K' (payload with the 24-bit block CRC).
    pub block_bits: usize,
    /// Pilot layout as the CSI kernel takes it: 0 frequency-, 1 time-orthogonal.
    pub pilot_layout: i32,
    pub parts: usize,
    /// Data subcarriers of each part, as [`FrameShape::part_range`].
    pub part_ranges: Vec<std::ops::Range<usize>>,
    /// Users of each Decode/Encode user group, as [`FrameShape::user_range`].
    pub groups: Vec<std::ops::Range<usize>>,
    /// Schedule indices by role.
    pub pilots: Vec<usize>,
    pub uplink: Vec<usize>,
    /// Downlink symbols: the reference first (if any), then the data symbols.
    pub downlink: Vec<usize>,
    pub has_reference: bool,
    /// 32-bit words of one user's scrambling sequence for one data symbol.
    pub seq_words: usize,
}

impl FrameLayout {
    /// # Errors
    /// A configuration the kernels do not support (FFT size, user count).
    pub fn new(cfg: &FrameConfig, shape: &FrameShape) -> Result<Self, GpuError> {
        let n = cfg.fft_size;
        if !n.is_power_of_two() || !(64..=4096).contains(&n) {
            return Err(GpuError::Config(format!(
                "FFT size {n}: the GPU FFT kernel takes powers of two from 64 to 4096"
            )));
        }
        if cfg.users == 0 || cfg.users > 64 {
            return Err(GpuError::Config(format!(
                "{} users: the zero-forcing kernel handles 1 to 64 (its Gram matrices live in shared memory)",
                cfg.users
            )));
        }
        let downlink = cfg.symbols_of(SymbolKind::Downlink);
        Ok(Self {
            antennas: cfg.antennas,
            users: cfg.users,
            data_num: cfg.data_num,
            fft_size: n,
            log_fft: n.trailing_zeros(),
            cp_len: cfg.cp_len,
            symbol_len: cfg.symbol_len(),
            frame_len: cfg.frame_len(),
            data_start: cfg.data_start,
            bits_per_axis: cfg.modulation.bits_per_axis(),
            symbol_bits: cfg.symbol_bits(),
            blocks_per_symbol: cfg.blocks_per_symbol,
            tx_bits: cfg.code.tx_bits,
            block_bits: cfg.code.payload_bits,
            pilot_layout: match cfg.pilot_layout {
                PilotLayout::FrequencyOrthogonal => 0,
                PilotLayout::TimeOrthogonal => 1,
            },
            parts: shape.parts,
            part_ranges: (0..shape.parts).map(|k| shape.part_range(k)).collect(),
            groups: (0..shape.user_groups)
                .map(|g| shape.user_range(g))
                .collect(),
            pilots: shape.pilot_symbols.clone(),
            uplink: shape.uplink_symbols.clone(),
            has_reference: !downlink.is_empty(),
            downlink,
            seq_words: cfg.symbol_bits().div_ceil(32),
        })
    }

    /// Data symbols that need scrambling sequences (uplink or downlink, whichever more).
    pub fn sequence_symbols(&self) -> usize {
        self.uplink.len().max(self.downlink.len().saturating_sub(1))
    }

    pub fn pilot_slot(&self, symbol: usize) -> Option<usize> {
        self.pilots.iter().position(|&s| s == symbol)
    }

    pub fn uplink_slot(&self, symbol: usize) -> Option<usize> {
        self.uplink.iter().position(|&s| s == symbol)
    }

    /// Index among the downlink symbols (0 = reference).
    pub fn downlink_slot(&self, symbol: usize) -> Option<usize> {
        self.downlink.iter().position(|&s| s == symbol)
    }

    /// Data-subcarrier range of part `k` (in `0..parts`), as [`FrameShape::part_range`].
    pub fn part(&self, k: usize) -> std::ops::Range<usize> {
        self.part_ranges[k].clone()
    }

    /// Check that `instr` names data of this layout; returns the slot it uses
    /// (pilot, uplink or downlink index; 0 for Load/Store/Zf).
    ///
    /// # Errors
    /// [`GpuError::BadInstr`] for a symbol, part or user group out of range.
    pub fn check(&self, instr: &Instr) -> Result<usize, GpuError> {
        let s = instr.symbol as usize;
        let p = instr.part as usize;
        let bad = || GpuError::BadInstr(instr.to_string());
        let group_ok = p < self.groups.len();
        let part_ok = p < self.parts;
        let ok = match instr.opcode {
            Opcode::Load => (s * self.symbol_len < self.frame_len).then_some(0),
            Opcode::PilotFft => self.pilot_slot(s),
            Opcode::UpFft => self.uplink_slot(s),
            Opcode::Zf => part_ok.then_some(0),
            Opcode::EqDemod => self.uplink_slot(s).filter(|_| part_ok),
            Opcode::Decode => self.uplink_slot(s).filter(|_| group_ok),
            Opcode::Encode => self.downlink_slot(s).filter(|&j| j > 0 && group_ok),
            Opcode::Precode => self.downlink_slot(s).filter(|_| part_ok),
            Opcode::Ifft => self.downlink_slot(s),
            Opcode::Store => Some(self.downlink_slot(s).unwrap_or(0)),
        };
        ok.ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(name: &str, parts: usize) -> FrameLayout {
        let cfg = FrameConfig::load(std::path::Path::new(&format!(
            "{}/../phy/configs/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        )))
        .unwrap();
        FrameLayout::new(&cfg, &FrameShape::new(&cfg, parts).unwrap()).unwrap()
    }

    #[test]
    fn instructions_are_checked_against_the_layout() {
        let l = layout("64x16", 4);
        assert_eq!(l.log_fft, 11);
        // 16 users in 2 groups of eight (a batch of Zc = 72 blocks each).
        assert_eq!(l.groups.len(), 2);
        assert_eq!([l.groups[0].clone(), l.groups[1].clone()], [0..8, 8..16]);
        let up = l.uplink[2];
        assert_eq!(l.check(&Instr::new(0, up, Opcode::UpFft, 0)).unwrap(), 2);
        assert_eq!(l.check(&Instr::new(0, up, Opcode::Decode, 1)).unwrap(), 2);
        assert!(l.check(&Instr::new(0, up, Opcode::Decode, 2)).is_err());
        assert!(l.check(&Instr::new(0, up, Opcode::EqDemod, 4)).is_err());
        assert!(l
            .check(&Instr::new(0, l.pilots[0], Opcode::UpFft, 0))
            .is_err());
        assert!(l.check(&Instr::new(0, 99, Opcode::Load, 0)).is_err());
        assert!(l.check(&Instr::new(0, up, Opcode::Encode, 0)).is_err());
        let dl = layout("64x16_downlink", 2);
        assert!(dl.has_reference);
        let reference = dl.downlink[0];
        assert!(dl
            .check(&Instr::new(0, reference, Opcode::Encode, 0))
            .is_err());
        assert_eq!(
            dl.check(&Instr::new(0, reference, Opcode::Precode, 1))
                .unwrap(),
            0
        );
        assert_eq!(
            dl.check(&Instr::new(0, dl.downlink[1], Opcode::Encode, 0))
                .unwrap(),
            1
        );
    }
}
