//! GPU kernels against the CPU phy kernels on a generated frame: FFT, CSI and ZF
//! outputs within float tolerance, LLR signs identical away from zero, decoded bits
//! identical (the CPU decoder run on the GPU's own LLRs), downlink QAM symbols equal,
//! precoded bins within tolerance, transmitted samples within one LSB. Used by the
//! GPU tests (crates/gpu/tests/gpu_vs_cpu.rs) and by `radiohost gpu selftest`.

use std::sync::Arc;

use radiohost_iq::{Cf32, Ci16};
use radiohost_ldpc::Decoder;
use radiohost_phy::coding::{decoder_config, user_c_init, TxChain};
use radiohost_phy::config::SymbolKind;
use radiohost_phy::csi::CsiEstimator;
use radiohost_phy::frontend::{FrontEnd, Synthesizer};
use radiohost_phy::generator::Generator;
use radiohost_phy::qam::Demodulator;
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::zf::{equalize, precode, zf_detector, ZfScratch};
use radiohost_phy::FrameConfig;
use radiohost_station::isa::{Instr, Opcode};
use radiohost_station::shape::FrameShape;
use serde::Serialize;

use crate::exec::{GpuExecutor, Intermediate};
use crate::{GpuDevice, GpuError};

/// One comparison: a measured error against its bound.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: String,
    pub value: f64,
    pub bound: f64,
    pub passed: bool,
}

/// All comparisons of one self-test run.
#[derive(Clone, Debug, Serialize)]
pub struct SelftestReport {
    pub device: String,
    pub config: String,
    pub checks: Vec<Check>,
}

impl SelftestReport {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

fn as_cf32(v: &[f32]) -> Vec<Cf32> {
    v.chunks_exact(2).map(|c| Cf32::new(c[0], c[1])).collect()
}

/// max |a - b| / max |b|.
fn rel_err(a: &[Cf32], b: &[Cf32]) -> f64 {
    let scale = b
        .iter()
        .map(|x| x.norm())
        .fold(0f32, f32::max)
        .max(f32::MIN_POSITIVE);
    let err = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0f32, f32::max);
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    (err / scale) as f64
}

fn check(checks: &mut Vec<Check>, name: &str, value: f64, bound: f64) {
    checks.push(Check {
        name: name.into(),
        value,
        bound,
        passed: value <= bound,
    });
}

fn run_all(ex: &GpuExecutor, instrs: &[Instr]) -> Result<(), GpuError> {
    // One stream in DAG order: dependences hold by stream order.
    for i in instrs {
        ex.launch(0, i, false, &[])?;
    }
    ex.device().synchronize()
}

/// A frame's first instructions, in dependence order: load every received symbol,
/// transform the pilots and uplink symbols, and ZF every part.
pub(crate) fn front_program(shape: &FrameShape) -> Vec<Instr> {
    let mut instrs = Vec::new();
    for s in shape.received_symbols() {
        instrs.push(Instr::new(0, s, Opcode::Load, 0));
    }
    for &s in &shape.pilot_symbols {
        instrs.push(Instr::new(0, s, Opcode::PilotFft, 0));
    }
    for &s in &shape.uplink_symbols {
        instrs.push(Instr::new(0, s, Opcode::UpFft, 0));
    }
    for p in 0..shape.parts {
        instrs.push(Instr::new(0, 0, Opcode::Zf, p));
    }
    instrs
}

/// The uplink frame's instructions in an order that respects their dependences
/// (one per symbol, part or user group, as the station issues them).
fn uplink_program(shape: &FrameShape) -> Vec<Instr> {
    let mut instrs = front_program(shape);
    for &s in &shape.uplink_symbols {
        for p in 0..shape.parts {
            instrs.push(Instr::new(0, s, Opcode::EqDemod, p));
        }
        for g in 0..shape.user_groups {
            instrs.push(Instr::new(0, s, Opcode::Decode, g));
        }
    }
    instrs.push(Instr::new(0, 0, Opcode::Store, 0));
    instrs
}

/// The downlink's instructions after its ZF: encode each data symbol per user group,
/// then precode, IFFT and store the reference and every data symbol.
fn downlink_program(shape: &FrameShape) -> Vec<Instr> {
    let mut instrs = Vec::new();
    for &s in &shape.downlink_symbols {
        for g in 0..shape.user_groups {
            instrs.push(Instr::new(0, s, Opcode::Encode, g));
        }
    }
    for &s in shape
        .downlink_reference
        .iter()
        .chain(&shape.downlink_symbols)
    {
        for p in 0..shape.parts {
            instrs.push(Instr::new(0, s, Opcode::Precode, p));
        }
        instrs.push(Instr::new(0, s, Opcode::Ifft, 0));
        instrs.push(Instr::new(0, s, Opcode::Store, 0));
    }
    instrs
}

/// Run the comparisons for `cfg` (cut into `parts` subcarrier parts) on `dev`.
///
/// # Errors
/// Any CUDA, configuration or CPU-reference error (not a failed comparison: those
/// are in the report).
pub fn run(
    dev: Arc<GpuDevice>,
    cfg: &FrameConfig,
    name: &str,
    parts: usize,
) -> Result<SelftestReport, GpuError> {
    let shape = FrameShape::new(cfg, parts).map_err(|e| GpuError::Config(e.to_string()))?;
    let mut ex = GpuExecutor::new(dev.clone(), cfg, &shape, 1)?;
    let frame = Generator::new(cfg)
        .frame(0)
        .map_err(|e| GpuError::Config(format!("generator: {e}")))?;
    ex.set_input(0, &frame.samples)?;
    let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
    run_all(&ex, &uplink_program(&shape))?;

    ex.uplink_results(0)?.check_zf()?;
    let mut checks = Vec::new();
    // FFT: CPU front end on the same samples.
    let mut front = FrontEnd::new(cfg);
    let pilots = cfg.symbols_of(SymbolKind::Pilot);
    let mut pilot_cpu = vec![Cf32::default(); pilots.len() * m * d];
    let mut up_cpu = vec![Cf32::default(); shape.uplink_symbols.len() * m * d];
    for a in 0..m {
        let f = &frame.samples[a * cfg.frame_len()..(a + 1) * cfg.frame_len()];
        front.antenna(f, &pilots, &mut pilot_cpu, a * d, m * d);
        front.antenna(f, &shape.uplink_symbols, &mut up_cpu, a * d, m * d);
    }
    let pilot_gpu = as_cf32(&ex.read_back(0, Intermediate::PilotFreq)?);
    check(
        &mut checks,
        "fft: pilot symbols (max rel err)",
        rel_err(&pilot_gpu, &pilot_cpu),
        1e-4,
    );
    let up_gpu = as_cf32(&ex.read_back(0, Intermediate::UplinkFreq)?);
    check(
        &mut checks,
        "fft: uplink symbols (max rel err)",
        rel_err(&up_gpu, &up_cpu),
        1e-4,
    );
    // CSI and ZF from the GPU's own FFT output (isolates each kernel).
    let mut csi_cpu = vec![Cf32::default(); d * k * m];
    CsiEstimator::new(cfg.pilot_layout, m, k, d).estimate(&pilot_gpu, pilots.len(), &mut csi_cpu);
    let csi_gpu = as_cf32(&ex.read_back(0, Intermediate::Csi)?);
    check(
        &mut checks,
        "csi (max rel err)",
        rel_err(&csi_gpu, &csi_cpu),
        1e-4,
    );
    let mut w_cpu = vec![Cf32::default(); d * k * m];
    let mut ng_cpu = vec![0f32; d * k];
    let mut scratch = ZfScratch::with_antennas(m, k);
    for i in 0..d {
        let mk = m * k;
        zf_detector(
            &csi_gpu[i * mk..(i + 1) * mk],
            m,
            k,
            &mut scratch,
            &mut w_cpu[i * mk..(i + 1) * mk],
            &mut ng_cpu[i * k..(i + 1) * k],
        )
        .map_err(|e| GpuError::Config(format!("CPU zero-forcing at subcarrier {i}: {e}")))?;
    }
    let w_gpu = as_cf32(&ex.read_back(0, Intermediate::Detector)?);
    check(
        &mut checks,
        "zf detector (max rel err)",
        rel_err(&w_gpu, &w_cpu),
        1e-3,
    );
    let ng_gpu = ex.read_back(0, Intermediate::NoiseGain)?;
    let ng_err = ng_gpu
        .iter()
        .zip(&ng_cpu)
        .map(|(a, b)| ((a - b).abs() / b.abs().max(f32::MIN_POSITIVE)) as f64)
        .fold(0.0, f64::max);
    check(&mut checks, "zf noise gain (max rel err)", ng_err, 1e-3);
    // LLRs: CPU equalise + demodulate + descramble with the GPU's detector and noise.
    let noise = ex.read_back(0, Intermediate::Noise)?[0];
    let llr_gpu = ex.read_back(0, Intermediate::Llr)?;
    let demod = Demodulator::new(cfg.modulation);
    let sb = cfg.symbol_bits();
    let used = cfg.blocks_per_symbol * cfg.code.tx_bits;
    let (mut mismatches, mut compared) = (0usize, 0usize);
    let mut y = vec![Cf32::default(); m];
    let mut x = vec![Cf32::default(); k];
    let mut eq = vec![Cf32::default(); k * d];
    let mut nv = vec![0f32; k * d];
    let mut llr_cpu = vec![0f32; sb];
    for u in 0..shape.uplink_symbols.len() {
        for i in 0..d {
            for (a, ya) in y.iter_mut().enumerate() {
                *ya = up_gpu[(u * m + a) * d + i];
            }
            equalize(&w_gpu[i * m * k..(i + 1) * m * k], &y, &mut x);
            for kk in 0..k {
                eq[kk * d + i] = x[kk];
                nv[kk * d + i] = noise * ng_gpu[i * k + kk];
            }
        }
        for kk in 0..k {
            demod.demodulate(
                &eq[kk * d..(kk + 1) * d],
                &nv[kk * d..(kk + 1) * d],
                &mut llr_cpu,
            );
            GoldSequence::new_at(user_c_init(cfg, kk), u * sb)
                .descramble_llrs(&mut llr_cpu[..used]);
            let g = &llr_gpu[(u * k + kk) * sb..(u * k + kk + 1) * sb];
            for (a, b) in g.iter().zip(&llr_cpu) {
                if b.abs() > 1.0 {
                    compared += 1;
                    mismatches += usize::from((a < &0.0) != (b < &0.0));
                }
            }
        }
    }
    check(
        &mut checks,
        &format!("llr sign mismatches where |llr| > 1 (of {compared})"),
        mismatches as f64,
        0.0,
    );
    // Decoding: the CPU decoder on the GPU's LLRs must give the same bits and counts.
    let results = ex.uplink_results(0)?;
    let kp = cfg.code.payload_bits;
    let mut dec = Decoder::try_new(cfg.code, decoder_config(cfg.decoder_iter))
        .map_err(|e| GpuError::Config(e.to_string()))?;
    let mut out = vec![0u8; kp];
    let (mut bit_diff, mut iter_diff, mut truth_errors) = (0usize, 0usize, 0usize);
    let pb = cfg.block_payload_bits();
    for u in 0..shape.uplink_symbols.len() {
        for kk in 0..k {
            for b in 0..cfg.blocks_per_symbol {
                let llr = &llr_gpu[(u * k + kk) * sb + b * cfg.code.tx_bits..][..cfg.code.tx_bits];
                let o = dec
                    .decode(llr, &mut out)
                    .map_err(|e| GpuError::Config(e.to_string()))?;
                let blk = (u * k + kk) * cfg.blocks_per_symbol + b;
                let g = &results.bits[blk * kp..(blk + 1) * kp];
                bit_diff += g.iter().zip(&out).filter(|(a, b)| a != b).count();
                let st = results.status[blk];
                iter_diff += usize::from(
                    (st & 0xffff) as usize != o.iterations || ((st >> 16) & 1 == 1) != o.parity_ok,
                );
                let truth = &frame.uplink_payload[kk][(u * cfg.blocks_per_symbol + b) * pb..][..pb];
                truth_errors += g[..pb].iter().zip(truth).filter(|(a, b)| a != b).count();
            }
        }
    }
    check(
        &mut checks,
        "decoded bits differing from the CPU decoder",
        bit_diff as f64,
        0.0,
    );
    check(
        &mut checks,
        "blocks whose iterations/parity differ from the CPU decoder",
        iter_diff as f64,
        0.0,
    );
    // Reported, not bounded: depends on the configured SNR, not on the GPU.
    checks.push(Check {
        name: "bit errors against the generated payload (information only)".into(),
        value: truth_errors as f64,
        bound: f64::INFINITY,
        passed: true,
    });
    if shape.has_downlink() {
        downlink(
            &mut ex,
            cfg,
            &shape,
            &frame.downlink_payload,
            &w_gpu,
            &mut checks,
        )?;
    }
    Ok(SelftestReport {
        device: format!("{:?}", dev),
        config: name.to_string(),
        checks,
    })
}

fn downlink(
    ex: &mut GpuExecutor,
    cfg: &FrameConfig,
    shape: &FrameShape,
    payload: &[Vec<u8>],
    w_gpu: &[Cf32],
    checks: &mut Vec<Check>,
) -> Result<(), GpuError> {
    let (m, k, d) = (cfg.antennas, cfg.users, cfg.data_num);
    let (beta, tx_gain) = (0.8f32, 0.25f32);
    ex.set_downlink_gains(beta, tx_gain);
    let blocks = cfg.blocks_per_symbol;
    let pb = cfg.block_payload_bits();
    let reference = shape
        .downlink_reference
        .expect("downlink has a reference symbol");
    for j in 0..shape.downlink_symbols.len() {
        for (u, p) in payload.iter().enumerate() {
            ex.set_downlink_payload(0, j, u, &p[j * blocks * pb..(j + 1) * blocks * pb])?;
        }
    }
    run_all(ex, &downlink_program(shape))?;
    let qam_gpu = as_cf32(&ex.read_back(0, Intermediate::DownlinkQam)?);
    let ant_gpu = as_cf32(&ex.read_back(0, Intermediate::DownlinkAntenna)?);
    let tx_gpu = ex.tx_samples(0)?.to_vec();
    let mut tx = TxChain::new(cfg);
    let mut synth = Synthesizer::new(cfg);
    let (mut qam_err, mut pre_err, mut lsb_err) = (0f64, 0f64, 0i32);
    let mut qam = vec![Cf32::default(); d];
    let mut s = vec![Cf32::default(); k];
    let mut xm = vec![Cf32::default(); m];
    let mut time = vec![Cf32::default(); cfg.symbol_len()];
    let dl_all: Vec<usize> = std::iter::once(reference)
        .chain(shape.downlink_symbols.iter().copied())
        .collect();
    for j in 0..shape.downlink_symbols.len() {
        for (u, p) in payload.iter().enumerate() {
            tx.symbol(
                &p[j * blocks * pb..(j + 1) * blocks * pb],
                user_c_init(cfg, u),
                j,
                &mut qam,
            )
            .map_err(|e| GpuError::Config(e.to_string()))?;
            let g = &qam_gpu[((j + 1) * k + u) * d..][..d];
            qam_err = qam_err.max(rel_err(g, &qam));
        }
    }
    check(checks, "downlink qam symbols (max rel err)", qam_err, 1e-6);
    for (jj, &sym) in dl_all.iter().enumerate() {
        let mut ant_cpu = vec![Cf32::default(); m * d];
        for i in 0..d {
            for (u, su) in s.iter_mut().enumerate() {
                *su = qam_gpu[(jj * k + u) * d + i];
            }
            precode(&w_gpu[i * m * k..(i + 1) * m * k], &s, beta, &mut xm);
            for a in 0..m {
                ant_cpu[a * d + i] = xm[a];
            }
        }
        let g = &ant_gpu[jj * m * d..(jj + 1) * m * d];
        pre_err = pre_err.max(rel_err(g, &ant_cpu));
        for a in 0..m {
            synth.symbol(&g[a * d..(a + 1) * d], tx_gain, &mut time);
            let off = a * cfg.frame_len() + sym * cfg.symbol_len();
            for (t, c) in time.iter().enumerate() {
                let q = Ci16::from_cf32(*c);
                let gi = &tx_gpu[2 * (off + t)..2 * (off + t) + 2];
                lsb_err = lsb_err
                    .max((gi[0] as i32 - q.re as i32).abs())
                    .max((gi[1] as i32 - q.im as i32).abs());
            }
        }
    }
    check(checks, "precoded bins (max rel err)", pre_err, 1e-4);
    check(
        checks,
        "transmitted int16 samples (max |diff| in LSB)",
        lsb_err as f64,
        1.0,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::FrameLayout;

    /// Every instruction the self-test launches names data of the executor's layout
    /// (a program drawn per user rather than per user group once failed on the GPU).
    #[test]
    fn programs_fit_the_executor_layout() {
        for (name, parts) in [("8x2", 1), ("16x4", 1), ("64x16", 8), ("64x16_downlink", 4)] {
            let cfg = FrameConfig::load(std::path::Path::new(&format!(
                "{}/../phy/configs/{name}.json",
                env!("CARGO_MANIFEST_DIR")
            )))
            .unwrap();
            let shape = FrameShape::new(&cfg, parts).unwrap();
            let layout = FrameLayout::new(&cfg, &shape).unwrap();
            // As `run`: the uplink program always (a downlink frame's pilots and ZF
            // too), then the downlink's where the frame has one.
            let mut programs = vec![uplink_program(&shape)];
            if shape.has_downlink() {
                programs.push(downlink_program(&shape));
            }
            for instr in programs.iter().flatten() {
                assert!(layout.check(instr).is_ok(), "{name}: {instr}");
            }
            let decodes = programs
                .iter()
                .flatten()
                .filter(|i| matches!(i.opcode, Opcode::Decode | Opcode::Encode))
                .count();
            let data_symbols = shape.uplink_symbols.len() + shape.downlink_symbols.len();
            assert_eq!(decodes, data_symbols * shape.user_groups, "{name}");
        }
    }
}
