//! Baseband kernels and whole frames: QAM, OFDM, zero forcing, and uplink frames
//! generated with their ground truth, decoded, and evaluated.

use std::path::PathBuf;

use num_complex::Complex32;
use numpy::ndarray::{Array1, Array2, Array3};
use numpy::prelude::*;
use numpy::{
    PyArray1, PyArray2, PyArray3, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3,
    PyReadonlyArrayDyn,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use radiohost_iq::{Cf32, Ci16};
use radiohost_phy::evaluate::{evaluate as run_evaluate, Direction};
use radiohost_phy::generator::Generator;
use radiohost_phy::ofdm::{add_cp, remove_cp, OfdmFft};
use radiohost_phy::qam::{Demodulator, Modulation, Modulator};
use radiohost_phy::uplink::{UplinkOutput, UplinkPipeline};
use radiohost_phy::zf::{equalize, zf_detector, ZfScratch};
use radiohost_phy::FrameConfig as Config;

use crate::convert::{c_slice, to_py};
use crate::errors::{self, value};
use crate::interrupt::Interrupt;

fn modulation(name: &str) -> PyResult<Modulation> {
    Modulation::from_name(name).ok_or_else(|| {
        value(format!(
            "modulation {name:?}: use one of QPSK, 16QAM, 64QAM, 256QAM"
        ))
    })
}

fn array2<T: numpy::Element>(
    py: Python<'_>,
    shape: (usize, usize),
    v: Vec<T>,
) -> PyResult<Bound<'_, PyArray2<T>>> {
    Ok(Array2::from_shape_vec(shape, v)
        .map_err(|e| value(e.to_string()))?
        .into_pyarray(py))
}

/// qam_modulate(bits, modulation) -> complex64 symbols
///
/// Gray-mapped NR constellation ("QPSK", "16QAM", "64QAM", "256QAM") with unit
/// average energy; ``bits`` (uint8 0/1) must be a multiple of the bits per symbol.
#[pyfunction]
pub fn qam_modulate<'py>(
    py: Python<'py>,
    bits: PyReadonlyArray1<'py, u8>,
    modulation: &str,
) -> PyResult<Bound<'py, PyArray1<Complex32>>> {
    let m = self::modulation(modulation)?;
    let bits = c_slice(&bits, "bits")?;
    let q = m.bits_per_symbol();
    if bits.len() % q != 0 {
        return Err(value(format!(
            "{} bits is not a multiple of {q} ({modulation} carries {q} bits per symbol)",
            bits.len()
        )));
    }
    if let Some(b) = bits.iter().find(|&&b| b > 1) {
        return Err(value(format!("bits must be 0 or 1, found {b}")));
    }
    let mut out = vec![Cf32::default(); bits.len() / q];
    Modulator::new(m).modulate(bits, &mut out);
    Ok(Array1::from(out).into_pyarray(py))
}

/// qam_demodulate(symbols, noise_var, modulation) -> float32 LLRs
///
/// Max-log soft demodulation; ``noise_var`` is a float (all symbols) or one
/// float32 per symbol. LLRs are ln P(0)/P(1), bits per symbol per symbol.
#[pyfunction]
pub fn qam_demodulate<'py>(
    py: Python<'py>,
    symbols: PyReadonlyArray1<'py, Complex32>,
    noise_var: &Bound<'py, PyAny>,
    modulation: &str,
) -> PyResult<Bound<'py, PyArray1<f32>>> {
    let m = self::modulation(modulation)?;
    let symbols = c_slice(&symbols, "symbols")?;
    let nv: Vec<f32> = if let Ok(v) = noise_var.extract::<f64>() {
        vec![v as f32; symbols.len()]
    } else {
        let a: PyReadonlyArray1<f32> = noise_var.extract()?;
        c_slice(&a, "noise_var")?.to_vec()
    };
    if nv.len() != symbols.len() {
        return Err(value(format!(
            "noise_var has {} values for {} symbols",
            nv.len(),
            symbols.len()
        )));
    }
    if let Some(v) = nv.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(value(format!(
            "noise_var must be positive and finite, found {v}"
        )));
    }
    let mut llr = vec![0f32; symbols.len() * m.bits_per_symbol()];
    Demodulator::new(m).demodulate(symbols, &nv, &mut llr);
    Ok(Array1::from(llr).into_pyarray(py))
}

/// ofdm_modulate(freq, cp_len) -> complex64 (symbols, fft_size + cp_len)
///
/// Inverse FFT of each row of ``freq`` (symbols, fft_size), scaled by
/// 1/sqrt(fft_size) (unit-energy subcarriers give unit energy in time), with the
/// cyclic prefix in front. Bins in FFT order (DC at 0).
#[pyfunction]
pub fn ofdm_modulate<'py>(
    py: Python<'py>,
    freq: PyReadonlyArray2<'py, Complex32>,
    cp_len: usize,
) -> PyResult<Bound<'py, PyArray2<Complex32>>> {
    let (s, n) = (freq.shape()[0], freq.shape()[1]);
    if n == 0 || cp_len > n {
        return Err(value(format!(
            "fft_size {n} with cp_len {cp_len}: need 0 <= cp_len <= fft_size and fft_size > 0"
        )));
    }
    let mut body = c_slice(&freq, "freq")?.to_vec();
    let out = py.detach(|| {
        OfdmFft::new(n).inverse_batch(&mut body);
        let gain = 1.0 / (n as f32).sqrt();
        let mut out = vec![Cf32::default(); s * (n + cp_len)];
        for (b, o) in body.chunks_exact(n).zip(out.chunks_exact_mut(n + cp_len)) {
            add_cp(b, cp_len, gain, o);
        }
        out
    });
    array2(py, (s, n + cp_len), out)
}

/// ofdm_demodulate(time, cp_len) -> complex64 (symbols, fft_size)
///
/// Drops the cyclic prefix of each row and takes the FFT scaled by
/// 1/sqrt(fft_size): the inverse of ``ofdm_modulate``.
#[pyfunction]
pub fn ofdm_demodulate<'py>(
    py: Python<'py>,
    time: PyReadonlyArray2<'py, Complex32>,
    cp_len: usize,
) -> PyResult<Bound<'py, PyArray2<Complex32>>> {
    let (s, len) = (time.shape()[0], time.shape()[1]);
    if len <= cp_len {
        return Err(value(format!(
            "rows of {len} samples cannot hold a {cp_len}-sample cyclic prefix and a symbol"
        )));
    }
    let n = len - cp_len;
    let input = c_slice(&time, "time")?;
    let out = py.detach(|| {
        let mut out = vec![Cf32::default(); s * n];
        for (t, o) in input.chunks_exact(len).zip(out.chunks_exact_mut(n)) {
            remove_cp(t, cp_len, o);
        }
        OfdmFft::new(n).forward_batch(&mut out);
        let gain = 1.0 / (n as f32).sqrt();
        out.iter_mut().for_each(|v| *v *= gain);
        out
    });
    array2(py, (s, n), out)
}

/// zf_detector(h) -> (w, noise_gain)
///
/// Zero-forcing detectors of ``h`` (subcarriers, antennas, users):
/// ``w`` (subcarriers, users, antennas) = (H^H H)^-1 H^H per subcarrier and
/// ``noise_gain`` (subcarriers, users) = diag((H^H H)^-1). A rank-deficient
/// subcarrier raises PhyError.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn zf_detector_batch<'py>(
    py: Python<'py>,
    h: PyReadonlyArray3<'py, Complex32>,
) -> PyResult<(Bound<'py, PyArray3<Complex32>>, Bound<'py, PyArray2<f32>>)> {
    let (d, m, k) = (h.shape()[0], h.shape()[1], h.shape()[2]);
    if k == 0 || m < k {
        return Err(value(format!(
            "h is {m} antennas x {k} users: zero forcing needs antennas >= users >= 1"
        )));
    }
    let input = c_slice(&h, "h")?;
    let (w, ng) = py
        .detach(|| -> Result<_, (usize, radiohost_phy::zf::ZfError)> {
            let mut scratch = ZfScratch::with_antennas(m, k);
            let mut col = vec![Cf32::default(); m * k];
            let mut w = vec![Cf32::default(); d * k * m];
            let mut ng = vec![0f32; d * k];
            for i in 0..d {
                let hi = &input[i * m * k..(i + 1) * m * k];
                // numpy rows are antennas; the kernel wants column-major (users outer).
                for a in 0..m {
                    for u in 0..k {
                        col[u * m + a] = hi[a * k + u];
                    }
                }
                zf_detector(
                    &col,
                    m,
                    k,
                    &mut scratch,
                    &mut w[i * k * m..(i + 1) * k * m],
                    &mut ng[i * k..(i + 1) * k],
                )
                .map_err(|e| (i, e))?;
            }
            Ok((w, ng))
        })
        .map_err(|(i, e)| errors::PhyError::new_err(format!("subcarrier {i}: {e}")))?;
    Ok((
        Array3::from_shape_vec((d, k, m), w)
            .map_err(|e| value(e.to_string()))?
            .into_pyarray(py),
        array2(py, (d, k), ng)?,
    ))
}

/// zf_equalize(w, y) -> x
///
/// Applies detectors ``w`` (subcarriers, users, antennas) to received ``y``
/// (subcarriers, antennas): ``x`` (subcarriers, users).
#[pyfunction]
pub fn zf_equalize<'py>(
    py: Python<'py>,
    w: PyReadonlyArray3<'py, Complex32>,
    y: PyReadonlyArray2<'py, Complex32>,
) -> PyResult<Bound<'py, PyArray2<Complex32>>> {
    let (d, k, m) = (w.shape()[0], w.shape()[1], w.shape()[2]);
    if y.shape() != [d, m] {
        return Err(value(format!(
            "y has shape {:?} but w needs ({d}, {m})",
            y.shape()
        )));
    }
    let (w, y) = (c_slice(&w, "w")?, c_slice(&y, "y")?);
    let mut x = vec![Cf32::default(); d * k];
    for i in 0..d {
        equalize(
            &w[i * k * m..(i + 1) * k * m],
            &y[i * m..(i + 1) * m],
            &mut x[i * k..(i + 1) * k],
        );
    }
    array2(py, (d, k), x)
}

/// A validated frame configuration (the JSON files of crates/phy/configs).
///
/// ``FrameConfig(config)`` takes a dict with the file's fields;
/// ``FrameConfig.load(path)`` reads a file.
#[pyclass(frozen, module = "radiohost")]
pub struct FrameConfig {
    pub cfg: Config,
}

#[pymethods]
impl FrameConfig {
    #[new]
    fn new(config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let text: String = config
            .py()
            .import("json")?
            .call_method1("dumps", (config,))?
            .extract()?;
        Ok(FrameConfig {
            cfg: Config::from_json(&text).map_err(errors::phy)?,
        })
    }

    /// Reads and validates a configuration file.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        Ok(FrameConfig {
            cfg: Config::load(&path).map_err(errors::phy)?,
        })
    }

    /// The configuration's fields as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.cfg.file)
    }

    #[getter]
    fn antennas(&self) -> usize {
        self.cfg.antennas
    }
    #[getter]
    fn users(&self) -> usize {
        self.cfg.users
    }
    #[getter]
    fn fft_size(&self) -> usize {
        self.cfg.fft_size
    }
    #[getter]
    fn cp_len(&self) -> usize {
        self.cfg.cp_len
    }
    /// Samples per antenna per frame.
    #[getter]
    fn frame_len(&self) -> usize {
        self.cfg.frame_len()
    }
    #[getter]
    fn sample_rate(&self) -> f64 {
        self.cfg.sample_rate
    }
    #[getter]
    fn modulation(&self) -> &'static str {
        self.cfg.modulation.name()
    }
    /// Payload bits of one code block.
    #[getter]
    fn block_payload_bits(&self) -> usize {
        self.cfg.block_payload_bits()
    }
    #[getter]
    fn uplink_blocks(&self) -> usize {
        self.cfg.uplink_blocks()
    }
    #[getter]
    fn downlink_blocks(&self) -> usize {
        self.cfg.downlink_blocks()
    }
}

fn payload_array(py: Python<'_>, payload: Vec<Vec<u8>>) -> PyResult<Bound<'_, PyArray2<u8>>> {
    let rows = payload.len();
    let cols = payload.first().map_or(0, Vec::len);
    array2(py, (rows, cols), payload.into_iter().flatten().collect())
}

/// generate_uplink_frame(config, frame=0) -> dict
///
/// One seeded uplink frame after the configured channel and noise, with its truth:
/// ``samples`` int16 (antennas, frame_len, 2) as the base station receives them,
/// ``uplink_payload`` uint8 (users, bits), ``downlink_payload`` uint8 (users, bits),
/// ``noise_var`` and ``rx_gain``. The same (config seed, frame) gives the same frame.
#[pyfunction]
#[pyo3(signature = (config, frame=0))]
pub fn generate_uplink_frame<'py>(
    py: Python<'py>,
    config: &FrameConfig,
    frame: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = &config.cfg;
    let g = py
        .detach(|| Generator::new(cfg).frame(frame))
        .map_err(errors::phy)?;
    let (m, len) = (cfg.antennas, cfg.frame_len());
    let flat: Vec<i16> = g.samples.iter().flat_map(|s| [s.re, s.im]).collect();
    let d = PyDict::new(py);
    d.set_item(
        "samples",
        Array3::from_shape_vec((m, len, 2), flat)
            .map_err(|e| value(e.to_string()))?
            .into_pyarray(py),
    )?;
    d.set_item("uplink_payload", payload_array(py, g.uplink_payload)?)?;
    d.set_item("downlink_payload", payload_array(py, g.downlink_payload)?)?;
    d.set_item("noise_var", g.noise_var)?;
    d.set_item("rx_gain", g.rx_gain)?;
    Ok(d)
}

/// The reference uplink receiver of one configuration (channel estimation, zero
/// forcing, demodulation, LDPC decoding, CRC), planned once.
#[pyclass(module = "radiohost")]
pub struct UplinkDecoder {
    cfg: Config,
    pipeline: std::sync::Mutex<UplinkPipeline>,
}

#[pymethods]
impl UplinkDecoder {
    #[new]
    fn new(config: &FrameConfig) -> PyResult<Self> {
        Ok(UplinkDecoder {
            pipeline: std::sync::Mutex::new(UplinkPipeline::new(&config.cfg).map_err(errors::phy)?),
            cfg: config.cfg.clone(),
        })
    }

    /// decode(samples) -> dict
    ///
    /// ``samples``: one frame, int16 (antennas, frame_len, 2) or complex64
    /// (antennas, frame_len) with full scale 1.0 (quantised to int16 as a radio
    /// would). Returns ``payload`` uint8 (users, bits), ``crc_ok`` bool and
    /// ``iterations`` int32 (users, blocks), and the measured ``noise_var``.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        samples: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (m, len) = (self.cfg.antennas, self.cfg.frame_len());
        let frame: Vec<Ci16> = if let Ok(a) = samples.extract::<PyReadonlyArrayDyn<'py, i16>>() {
            if a.shape() != [m, len, 2] {
                return Err(value(format!(
                    "int16 samples have shape {:?}; this configuration needs ({m}, {len}, 2)",
                    a.shape()
                )));
            }
            c_slice(&a, "samples")?
                .chunks_exact(2)
                .map(|p| Ci16::new(p[0], p[1]))
                .collect()
        } else if let Ok(a) = samples.extract::<PyReadonlyArrayDyn<'py, Complex32>>() {
            if a.shape() != [m, len] {
                return Err(value(format!(
                    "complex64 samples have shape {:?}; this configuration needs ({m}, {len})",
                    a.shape()
                )));
            }
            c_slice(&a, "samples")?
                .iter()
                .map(|&s| Ci16::from_cf32(s))
                .collect()
        } else {
            return Err(value(
                "samples must be a numpy array of int16 pairs or complex64",
            ));
        };
        let mut out = UplinkOutput::for_config(&self.cfg);
        let pipeline = &self.pipeline;
        py.detach(|| {
            let mut p = pipeline.lock().unwrap_or_else(|p| p.into_inner());
            p.process_frame(&frame, &mut out)
        })
        .map_err(errors::phy)?;
        let users = self.cfg.users;
        let blocks = self.cfg.uplink_blocks();
        let crc: Vec<bool> = out.blocks.iter().flatten().map(|b| b.crc_ok).collect();
        let iters: Vec<i32> = out
            .blocks
            .iter()
            .flatten()
            .map(|b| b.iterations as i32)
            .collect();
        let d = PyDict::new(py);
        d.set_item("payload", payload_array(py, out.payload)?)?;
        d.set_item("crc_ok", array2(py, (users, blocks), crc)?)?;
        d.set_item("iterations", array2(py, (users, blocks), iters)?)?;
        d.set_item("noise_var", out.noise_var)?;
        Ok(d)
    }
}

/// evaluate(config, direction="uplink", frames=1) -> dict
///
/// Generates ``frames`` frames, runs them through the uplink pipeline or the
/// downlink (precoded by the base station, decoded by emulated users) and counts
/// bit and block errors against the truth: the report of ``radiohost phy eval``.
#[pyfunction]
#[pyo3(signature = (config, direction="uplink", frames=1))]
pub fn evaluate<'py>(
    py: Python<'py>,
    config: &FrameConfig,
    direction: &str,
    frames: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let dir = match direction {
        "uplink" => Direction::Uplink,
        "downlink" => Direction::Downlink,
        other => {
            return Err(value(format!(
                "direction {other:?}: use \"uplink\" or \"downlink\""
            )))
        }
    };
    let cfg = &config.cfg;
    let report = py
        .detach(|| run_evaluate(cfg, "python", dir, frames, |_| {}))
        .map_err(errors::phy)?;
    to_py(py, &report)
}

/// phy_bench(seconds=0.5) -> dict
///
/// `radiohost phy bench --json` on this thread: every baseband kernel and a whole
/// 64x16 uplink and downlink frame timed for about ``seconds`` each, beside its
/// physical floor (``peak``, ``copy_bandwidth``, ``rows``: ``name``, ``value``,
/// ``unit``, ``floor``...). Row ``ldpc_decode_bg1_z384_r1/3_5it`` is the Rust LDPC
/// decode benchmark ``examples/python/ldpc_throughput.py`` compares against.
#[pyfunction]
#[pyo3(signature = (seconds=0.5))]
pub fn phy_bench(py: Python<'_>, seconds: f64) -> PyResult<Bound<'_, PyAny>> {
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(value(format!(
            "seconds {seconds}: give a positive number of seconds per kernel"
        )));
    }
    // Between kernels, a pending KeyboardInterrupt stops the benchmark and is raised.
    let interrupt = Interrupt::default();
    let report =
        py.detach(|| radiohost_phy::bench::run(seconds, interrupt.flag(), |_| interrupt.check()));
    interrupt.raise()?;
    to_py(py, &report.map_err(errors::phy)?)
}
