//! The simulator's cost model: kernel latency per opcode and device kind, scaled from a
//! reference shape by each opcode's work, and data-copy cost between devices.
//!
//! Kernel latency = fixed launch/dispatch cost + `ns at the reference shape` x
//! `work(shape) / work(reference)`. Work per instruction follows the instruction table
//! in [`crate::isa`]: FFTs scale with antennas x fft x log(fft), ZF with the number of
//! 16-subcarrier blocks in a part x (M K^2 + K^3), equalisation and precoding with
//! subcarriers in a part x K x (M + 128) (the 128 fitted, see [`work`]), coding with
//! data subcarriers x users per group.
//!
//! A calibration file ([`crate::calibration`], written by `radiohost station
//! calibrate`) replaces the per-opcode figures and needs of every device kind it
//! measured: median ns per instruction at full width on its shape, scaled like the
//! model to other shapes. [`CostModel::source`] says which kinds are calibrated.

use serde::Deserialize;

use crate::calibration::Calibration;
use crate::costs::CostSource;
use crate::isa::{DeviceKind, Nanos, Opcode};
use crate::shape::FrameShape;

/// Subcarriers that share one ZF matrix (Agora-style block), for ZF work.
const ZF_BLOCK: usize = 16;

/// Problem size the per-opcode figures were measured at.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(default)]
pub struct RefShape {
    pub antennas: usize,
    pub users: usize,
    pub data_num: usize,
    pub fft_size: usize,
    pub parts: usize,
    /// User groups of Decode and Encode; 0 (files from before groups): one per user.
    #[serde(default)]
    pub user_groups: usize,
}

impl RefShape {
    /// The problem size of `shape` with its FFT size.
    pub fn of(shape: &crate::shape::FrameShape, fft_size: usize) -> Self {
        Self {
            antennas: shape.antennas,
            users: shape.users,
            data_num: shape.data_num,
            fft_size,
            parts: shape.parts,
            user_groups: shape.user_groups,
        }
    }

    /// Mean users one Decode or Encode instruction handles.
    fn users_per_group(&self) -> f64 {
        self.users as f64 / self.normalised().user_groups.max(1) as f64
    }

    /// The same shape with a file's missing group count (0) filled in: one user
    /// per group, what files written before groups measured.
    pub fn normalised(self) -> Self {
        let user_groups = match self.user_groups {
            0 => self.users,
            g => g,
        };
        Self {
            user_groups,
            ..self
        }
    }
}

impl std::fmt::Display for RefShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let groups = self.normalised().user_groups;
        write!(
            f,
            "{}x{} with {} data subcarriers, FFT {}, {} part{}, {} user group{}",
            self.antennas,
            self.users,
            self.data_num,
            self.fft_size,
            self.parts,
            plural(self.parts),
            groups,
            plural(groups)
        )
    }
}

impl Default for RefShape {
    fn default() -> Self {
        Self {
            antennas: 64,
            users: 16,
            data_num: 1200,
            fft_size: 2048,
            parts: 16,
            user_groups: 16,
        }
    }
}

/// Kernel and copy cost model.
#[derive(Clone, Debug)]
pub struct CostModel {
    pub reference: RefShape,
    /// ns per instruction at the reference shape, excluding the fixed cost, [cpu, gpu].
    scaled_ns: [[f64; Opcode::ALL.len()]; 2],
    /// Fixed cost per kernel (dispatch on a CPU, launch + sync on a GPU), [cpu, gpu].
    pub fixed_ns: [f64; 2],
    /// Copy bandwidth in bytes per ns between two CPU devices / when a GPU is involved.
    pub copy_bytes_per_ns: [f64; 2],
    /// Fixed cost of one copy, same split.
    pub copy_fixed_ns: [f64; 2],
    /// Resource units per instruction at full width, [cpu, gpu].
    need: [[u32; Opcode::ALL.len()]; 2],
    /// Whether a calibration measured each kind, [cpu, gpu].
    calibrated: [bool; 2],
}

fn k(kind: DeviceKind) -> usize {
    match kind {
        DeviceKind::Cpu => 0,
        DeviceKind::Gpu => 1,
    }
}

impl Default for CostModel {
    /// Figures at 64x16, 1200 data subcarriers, fft 2048, 16 parts, 16 user groups. CPU:
    /// fitted to `station calibrate` of the four built-in configurations on one Zen 3
    /// core (AVX2, 2026-11-30; see `cpu_model_tracks_the_recorded_calibrations`), where
    /// the run starts from them when it has no calibration: decode and encode were 6-27x
    /// the kernels' cost before, so the work test shed the second frame of every such
    /// run. GPU: of the order published for massive-MIMO kernels on datacenter GPUs.
    /// Calibrate for real use.
    fn default() -> Self {
        let mut scaled_ns = [[0.0; Opcode::ALL.len()]; 2];
        let mut need = [[1; Opcode::ALL.len()]; 2];
        for op in Opcode::ALL {
            need[1][op.index()] = modelled_gpu_need(op);
            let (cpu, gpu) = match op {
                // A CPU load is bookkeeping: the fixed cost alone.
                Opcode::Load => (0.0, 1_000.0),
                Opcode::PilotFft | Opcode::UpFft | Opcode::Ifft => (300_000.0, 8_000.0),
                Opcode::Zf => (60_000.0, 500.0),
                Opcode::EqDemod | Opcode::Precode => (12_500.0, 1_000.0),
                Opcode::Decode => (10_700.0, 4_000.0),
                Opcode::Encode => (7_800.0, 2_500.0),
                Opcode::Store => (5_000.0, 1_000.0),
            };
            scaled_ns[0][op.index()] = cpu;
            scaled_ns[1][op.index()] = gpu;
        }
        Self {
            reference: RefShape::default(),
            scaled_ns,
            fixed_ns: [1_000.0, 5_000.0],
            copy_bytes_per_ns: [50.0, 25.0],
            copy_fixed_ns: [500.0, 5_000.0],
            need,
            calibrated: [false; 2],
        }
    }
}

/// SMs per instruction on a GPU when no GPU executor measured them: what `radiohost
/// gpu describe --mimo 64x16 --parts 16` computes for an H100 from the kernels' ptxas
/// resources (NVRTC 12.9), copies counted as one unit. A GPU executor's own
/// [`crate::costs::DeviceProfile`] (its occupancy table) replaces these.
fn modelled_gpu_need(op: Opcode) -> u32 {
    match op {
        Opcode::Load | Opcode::Store => 1,
        Opcode::PilotFft | Opcode::UpFft | Opcode::Ifft => 8,
        Opcode::Zf => 13,
        Opcode::Precode => 3,
        Opcode::EqDemod | Opcode::Decode | Opcode::Encode => 1,
    }
}

impl CostModel {
    /// The default model with the figures of `cal`: for each kind it measured (its
    /// first device of that kind), every measured opcode's median latency and need at
    /// the calibration's shape. A measured latency is whole, so it includes the fixed
    /// cost.
    pub fn from_calibration(cal: &Calibration) -> Self {
        let mut model = Self {
            reference: cal.shape,
            ..Self::default()
        };
        for kind in [DeviceKind::Cpu, DeviceKind::Gpu] {
            let Some(dev) = cal.of_kind(kind) else {
                continue;
            };
            for op in Opcode::ALL {
                if let Some(s) = dev.opcodes.get(op.name()) {
                    model.scaled_ns[k(kind)][op.index()] =
                        (s.median_ns as f64 - model.fixed_ns[k(kind)]).max(0.0);
                    model.need[k(kind)][op.index()] = s.need.max(1);
                }
            }
            model.calibrated[k(kind)] = true;
        }
        model
    }

    /// Whether `kind`'s figures were measured (a calibration) or modelled.
    pub fn source(&self, kind: DeviceKind) -> CostSource {
        if self.calibrated[k(kind)] {
            CostSource::Calibrated
        } else {
            CostSource::Modelled
        }
    }

    /// Latency of one `op` instruction at full width on `kind` for `shape`.
    pub fn latency(
        &self,
        kind: DeviceKind,
        op: Opcode,
        shape: &FrameShape,
        fft_size: usize,
    ) -> Nanos {
        let ratio = work(op, &RefShape::of(shape, fft_size)) / work(op, &self.reference);
        (self.fixed_ns[k(kind)] + self.scaled_ns[k(kind)][op.index()] * ratio).round() as Nanos
    }

    /// Resource units one `op` instruction reserves on `kind` at full width.
    pub fn need(&self, kind: DeviceKind, op: Opcode) -> u32 {
        self.need[k(kind)][op.index()]
    }

    /// Set the units `op` reserves on `kind` (at least one).
    pub fn set_need(&mut self, kind: DeviceKind, op: Opcode, units: u32) {
        self.need[k(kind)][op.index()] = units.max(1);
    }

    /// Cost of copying `bytes` from a `from` device to a `to` device.
    pub fn copy_ns(&self, from: DeviceKind, to: DeviceKind, bytes: u64) -> Nanos {
        let i = usize::from(from == DeviceKind::Gpu || to == DeviceKind::Gpu);
        (self.copy_fixed_ns[i] + bytes as f64 / self.copy_bytes_per_ns[i]).round() as Nanos
    }
}

fn per_part(data_num: usize, parts: usize) -> f64 {
    data_num as f64 / parts.max(1) as f64
}

/// See [`work`]'s `EqDemod` arm.
const EQ_USER_ANTENNAS: f64 = 128.0;

/// Relative work of one instruction of shape `s` (any consistent unit).
fn work(op: Opcode, s: &RefShape) -> f64 {
    let (data_num, parts) = (s.data_num, s.parts);
    let (m, kf, fftf) = (s.antennas as f64, s.users as f64, s.fft_size as f64);
    let fft_work = m * fftf * fftf.log2().max(1.0);
    let w = match op {
        Opcode::Load => m * fftf,
        Opcode::PilotFft | Opcode::UpFft | Opcode::Ifft => fft_work,
        Opcode::Zf => {
            let blocks = (per_part(data_num, parts) / ZF_BLOCK as f64)
                .ceil()
                .max(1.0);
            blocks * (m * kf * kf + kf * kf * kf)
        }
        // Per subcarrier and user: M multiply-adds, plus the demodulation and
        // per-subcarrier steps, which cost about what 128 more antennas would (fitted to
        // the calibrations of `cpu_model_tracks_the_recorded_calibrations`).
        Opcode::EqDemod | Opcode::Precode => {
            per_part(data_num, parts) * kf * (m + EQ_USER_ANTENNAS)
        }
        Opcode::Decode | Opcode::Encode => data_num as f64 * s.users_per_group(),
        Opcode::Store => data_num as f64 * kf.max(m / 4.0),
    };
    w.max(1.0)
}

/// Bytes a `succ` instruction reads from one `pred` instruction (what must cross when
/// they run on different devices): a per-part consumer reads only its part.
pub fn input_bytes(pred: Opcode, succ: Opcode, shape: &FrameShape, fft_size: usize) -> u64 {
    let (m, k, n) = (
        shape.antennas as u64,
        shape.users as u64,
        shape.data_num as u64,
    );
    let part = n.div_ceil(shape.parts.max(1) as u64);
    let group = k.div_ceil(shape.user_groups.max(1) as u64);
    match (pred, succ) {
        (Opcode::Load, _) | (Opcode::Ifft, _) => m * fft_size as u64 * 4,
        // CSI or frequency-domain data of the consumer's part, all antennas.
        (Opcode::PilotFft | Opcode::UpFft, _) => m * part * 8,
        (Opcode::Zf, _) => part.div_ceil(ZF_BLOCK as u64) * m * k * 8,
        // A group's LLRs (4 bits per subcarrier at 16-QAM, one byte each) of a part.
        (Opcode::EqDemod, _) => group * part * 4,
        (Opcode::Decode, _) => group * n / 2,
        // A group's QAM symbols of the consumer's part.
        (Opcode::Encode, _) => group * part * 8,
        (Opcode::Precode, _) => part * m * 8,
        (Opcode::Store, _) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: usize, k: usize) -> FrameShape {
        FrameShape {
            antennas: m,
            users: k,
            data_num: 1200,
            pilot_symbols: vec![0],
            uplink_symbols: vec![1],
            downlink_reference: None,
            downlink_symbols: vec![],
            parts: 16,
            zf_batch_span: 1,
            user_groups: k,
        }
    }

    #[test]
    fn reference_shape_reproduces_the_table_and_scales_up() {
        let m = CostModel::default();
        let base = m.latency(DeviceKind::Gpu, Opcode::Zf, &shape(64, 16), 2048);
        assert_eq!(base, 5_500);
        let big = m.latency(DeviceKind::Gpu, Opcode::Zf, &shape(256, 128), 2048);
        assert!(big > 20 * base, "{big} vs {base}");
        // Decoding one user's symbol does not grow with the antenna count.
        assert_eq!(
            m.latency(DeviceKind::Gpu, Opcode::Decode, &shape(64, 16), 2048),
            m.latency(DeviceKind::Gpu, Opcode::Decode, &shape(256, 16), 2048)
        );
    }

    #[test]
    fn a_user_group_costs_its_users() {
        let m = CostModel::default();
        let fixed = m.fixed_ns[k(DeviceKind::Cpu)];
        let grouped = |user_groups: usize| FrameShape {
            zf_batch_span: 1,
            user_groups,
            ..shape(64, 16)
        };
        let scaled = |groups: usize| {
            m.latency(DeviceKind::Cpu, Opcode::Decode, &grouped(groups), 2048) as f64 - fixed
        };
        assert!((scaled(4) / scaled(16) - 4.0).abs() < 1e-3);
        let input =
            |groups: usize| input_bytes(Opcode::Encode, Opcode::Precode, &grouped(groups), 2048);
        assert_eq!(input(4), 4 * input(16));
    }

    #[test]
    fn a_calibration_replaces_the_figures_of_the_kinds_it_measured() {
        let text = r#"{"format": "radiohost-station-calibration/2", "config": "16x4", "frames": 1, "loadavg": "",
            "shape": {"antennas": 16, "users": 4, "data_num": 300, "fft_size": 512, "parts": 4},
            "devices": [{"name": "cpu:1", "kind": "cpu", "units": 1, "memory_bytes": 0,
              "opcodes": {"zf": {"need": 1, "samples": 3, "min_ns": 1, "median_ns": 11000, "p90_ns": 1, "p99_ns": 1, "max_ns": 1, "mean_ns": 1}}}]}"#;
        let m = CostModel::from_calibration(&Calibration::from_json(text, "t").unwrap());
        let s = FrameShape {
            antennas: 16,
            users: 4,
            data_num: 300,
            parts: 4,
            ..shape(16, 4)
        };
        assert_eq!(m.latency(DeviceKind::Cpu, Opcode::Zf, &s, 512), 11_000);
        assert_eq!(m.source(DeviceKind::Cpu), CostSource::Calibrated);
        assert_eq!(m.source(DeviceKind::Gpu), CostSource::Modelled);
        assert_eq!(
            CostModel::default().source(DeviceKind::Cpu),
            CostSource::Modelled
        );
    }

    /// `station calibrate --config C --frames 30` medians (us per instruction, one
    /// pinned worker, one part) on the Zen 3 VM (AVX2, 2026-11-30), the figures the
    /// CPU model is fitted to.
    const RECORDED_US: [(&str, &[(&str, f64)]); 4] = [
        (
            "8x2",
            &[
                ("load", 0.2),
                ("pilot_fft", 15.5),
                ("up_fft", 12.9),
                ("zf", 23.4),
                ("eq_demod", 7.4),
                ("decode", 11.7),
                ("encode", 7.9),
                ("precode", 6.0),
                ("ifft", 9.2),
                ("store", 0.2),
            ],
        ),
        (
            "16x4",
            &[
                ("load", 0.2),
                ("pilot_fft", 48.3),
                ("up_fft", 46.2),
                ("zf", 76.8),
                ("eq_demod", 20.9),
                ("decode", 24.8),
                ("encode", 17.3),
                ("precode", 18.2),
                ("ifft", 35.5),
                ("store", 0.2),
            ],
        ),
        (
            "32x8",
            &[
                ("load", 0.2),
                ("pilot_fft", 152.1),
                ("up_fft", 158.2),
                ("zf", 267.5),
                ("eq_demod", 76.1),
                ("decode", 22.8),
                ("encode", 18.6),
                ("precode", 75.7),
                ("ifft", 123.9),
                ("store", 0.2),
            ],
        ),
        (
            "64x16",
            &[
                ("load", 0.1),
                ("pilot_fft", 335.6),
                ("up_fft", 308.5),
                ("zf", 839.7),
                ("eq_demod", 188.2),
                ("decode", 22.4),
                ("store", 37.2),
            ],
        ),
    ];

    /// A run without a calibration starts from this model, and its work test sheds
    /// frames on it: a whole frame must come out near what the kernels cost, and every
    /// opcode that is a tenth of the frame within 3x (ZF of the small configurations
    /// is below: its work formula counts the solve, and there the channel estimate
    /// dominates).
    #[test]
    fn cpu_model_tracks_the_recorded_calibrations() {
        let m = CostModel::default();
        for (name, medians) in RECORDED_US {
            let (cfg, _) = crate::setup::load_config(std::path::Path::new(name)).unwrap();
            let shape = FrameShape::new(&cfg, 1).unwrap();
            let counts = crate::dag::FrameDag::build(&shape).opcode_counts();
            let (mut measured, mut modelled) = (0.0, 0.0);
            let mut per_op = Vec::new();
            for op in Opcode::ALL {
                let n = counts[op.index()] as f64;
                if n == 0.0 {
                    continue;
                }
                let us = medians.iter().find(|(o, _)| *o == op.name()).unwrap().1;
                let model_us = m.latency(DeviceKind::Cpu, op, &shape, cfg.fft_size) as f64 / 1e3;
                measured += n * us;
                modelled += n * model_us;
                per_op.push((op, n * us, model_us / us));
            }
            let whole = modelled / measured;
            assert!(
                (0.67..1.5).contains(&whole),
                "{name}: model/measured frame {whole:.2}"
            );
            for (op, share, ratio) in per_op {
                if share > 0.1 * measured && !(op == Opcode::Zf && shape.antennas < 32) {
                    assert!(
                        (0.33..3.0).contains(&ratio),
                        "{name} {op:?}: model/measured {ratio:.2}"
                    );
                }
            }
        }
    }

    #[test]
    fn copies_cost_more_across_pcie() {
        let m = CostModel::default();
        assert!(
            m.copy_ns(DeviceKind::Cpu, DeviceKind::Cpu, 1 << 20)
                < m.copy_ns(DeviceKind::Cpu, DeviceKind::Gpu, 1 << 20)
        );
        assert!(m.copy_ns(DeviceKind::Cpu, DeviceKind::Cpu, 0) > 0);
    }
}
