//! What one executor device offers and what each opcode costs on it: the one source
//! of truth the scoreboard charges ([`crate::scoreboard::OpcodeTable`] is seeded from
//! a device's [`DeviceProfile`] when the device joins).
//!
//! A profile is either **calibrated** (each opcode run on that device, see
//! [`crate::calibration`]) or **modelled** ([`crate::sim::CostModel`] scaled to the
//! frame shape, a fallback); every report says which.

use serde::{Deserialize, Serialize};

use crate::isa::{DeviceKind, Nanos, Opcode};
use crate::shape::FrameShape;
use crate::sim::CostModel;

/// Where a device's per-opcode costs came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostSource {
    /// Measured on the device by running every opcode on it.
    Calibrated,
    /// From the cost model (not measured on this device).
    Modelled,
}

impl CostSource {
    pub fn name(self) -> &'static str {
        match self {
            CostSource::Calibrated => "calibrated",
            CostSource::Modelled => "modelled",
        }
    }
}

impl std::fmt::Display for CostSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One opcode on one device: resource units it reserves at full width (cores or
/// SMs, at least 1) and its latency at full width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpcodeCost {
    pub need: u32,
    pub latency_ns: Nanos,
}

/// What a device offers and what every opcode costs on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceProfile {
    pub kind: DeviceKind,
    /// Resource units: worker cores of a CPU device, SMs of a GPU.
    pub units: u32,
    /// Device memory in bytes (0 when it shares host memory).
    pub memory_bytes: u64,
    /// Per opcode, in [`Opcode::ALL`] order.
    pub costs: [OpcodeCost; Opcode::ALL.len()],
    pub source: CostSource,
}

impl DeviceProfile {
    /// Costs from `model` for `shape` (labelled modelled).
    pub fn modelled(
        kind: DeviceKind,
        units: u32,
        model: &CostModel,
        shape: &FrameShape,
        fft_size: usize,
    ) -> Self {
        let costs = Opcode::ALL.map(|op| OpcodeCost {
            need: model.need(kind, op).clamp(1, units.max(1)),
            latency_ns: model.latency(kind, op, shape, fft_size),
        });
        Self {
            kind,
            units,
            memory_bytes: 0,
            costs,
            source: CostSource::Modelled,
        }
    }

    pub fn cost(&self, op: Opcode) -> OpcodeCost {
        self.costs[op.index()]
    }

    /// The same device with `op`'s cost replaced (a calibration of one opcode).
    pub fn with_cost(mut self, op: Opcode, cost: OpcodeCost) -> Self {
        self.costs[op.index()] = OpcodeCost {
            need: cost.need.max(1),
            latency_ns: cost.latency_ns,
        };
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modelled_profile_is_labelled_and_needs_fit_the_device() {
        let cfg = crate::kernels::tests::phy_config("16x4");
        let shape = FrameShape::new(&cfg, 4).unwrap();
        let m = CostModel::default();
        let gpu = DeviceProfile::modelled(DeviceKind::Gpu, 4, &m, &shape, cfg.fft_size);
        assert_eq!(gpu.source, CostSource::Modelled);
        assert!(gpu.costs.iter().all(|c| (1..=4).contains(&c.need)));
        let cpu = DeviceProfile::modelled(DeviceKind::Cpu, 2, &m, &shape, cfg.fft_size);
        assert!(cpu.costs.iter().all(|c| c.need == 1 && c.latency_ns > 0));
        let one = cpu.clone().with_cost(
            Opcode::Zf,
            OpcodeCost {
                need: 0,
                latency_ns: 7,
            },
        );
        assert_eq!(one.cost(Opcode::Zf).need, 1);
        assert_eq!(one.cost(Opcode::Zf).latency_ns, 7);
    }
}
