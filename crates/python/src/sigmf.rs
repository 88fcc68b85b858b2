//! SigMF recordings to and from numpy: `cf32` as complex64, `ci16` as int16 pairs,
//! always channel-major `(channels, samples)`; metadata as plain dicts.

use std::path::PathBuf;

use num_complex::Complex32;
use numpy::ndarray::{Array2, Array3};
use numpy::prelude::*;
use numpy::PyReadonlyArrayDyn;
use pyo3::prelude::*;
use radiohost_iq::sigmf::{self, DataType, Meta, Samples};
use radiohost_iq::Ci16;

use crate::convert::{c_slice, from_py, to_py};
use crate::errors::{self, value};

/// Sample-interleaved (SigMF) to channel-major.
fn deinterleave<T: Copy + Default>(flat: &[T], channels: usize) -> Vec<T> {
    let n = flat.len() / channels;
    let mut out = vec![T::default(); flat.len()];
    for (i, frame) in flat.chunks_exact(channels).enumerate() {
        for (c, &s) in frame.iter().enumerate() {
            out[c * n + i] = s;
        }
    }
    out
}

/// Channel-major to sample-interleaved (SigMF).
fn interleave<T: Copy + Default>(rows: &[T], channels: usize) -> Vec<T> {
    let n = rows.len() / channels;
    let mut out = vec![T::default(); rows.len()];
    for c in 0..channels {
        for i in 0..n {
            out[i * channels + c] = rows[c * n + i];
        }
    }
    out
}

/// `over` into `doc`: objects field by field, anything else replaced.
fn merge(doc: &mut serde_json::Value, over: serde_json::Value) {
    match (doc, over) {
        (serde_json::Value::Object(d), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match d.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        d.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// read_sigmf(path) -> (samples, meta)
///
/// Reads a SigMF recording (base name or either file). ``samples`` is complex64
/// of shape (channels, n) for cf32 recordings and int16 of shape (channels, n, 2)
/// for ci16 ones (ci8 and big-endian types are widened to those). ``meta`` is the
/// .sigmf-meta document as a dict. The data is checked (size, SHA-512 when present).
#[pyfunction]
pub fn read_sigmf<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let rec = py.detach(|| sigmf::read(&path)).map_err(errors::sigmf)?;
    let channels = rec.meta.channels();
    let meta = to_py(py, &rec.meta)?;
    let samples = match rec.samples {
        Samples::Cf32(v) => {
            let n = v.len() / channels;
            Array2::from_shape_vec((channels, n), deinterleave(&v, channels))
                .map_err(|e| value(e.to_string()))?
                .into_pyarray(py)
                .into_any()
        }
        Samples::Ci16(v) => {
            let n = v.len() / channels;
            let flat: Vec<i16> = deinterleave(&v, channels)
                .iter()
                .flat_map(|s| [s.re, s.im])
                .collect();
            Array3::from_shape_vec((channels, n, 2), flat)
                .map_err(|e| value(e.to_string()))?
                .into_pyarray(py)
                .into_any()
        }
    };
    Ok((samples, meta))
}

/// write_sigmf(path, samples, sample_rate=None, *, frequency=None, description=None, meta=None) -> dict
///
/// Writes ``samples`` as a SigMF recording at ``path`` (base name): complex64 of
/// shape (n,) or (channels, n) as cf32_le, int16 of shape (n, 2) or
/// (channels, n, 2) as ci16_le. ``meta`` (optional) is a SigMF metadata dict whose
/// fields are kept; datatype and channel count always follow ``samples``. The
/// sample rate comes from ``sample_rate`` or else from ``meta``. Returns the
/// metadata written (with its core:sha512).
#[pyfunction]
#[pyo3(signature = (path, samples, sample_rate=None, *, frequency=None, description=None, meta=None))]
pub fn write_sigmf<'py>(
    py: Python<'py>,
    path: PathBuf,
    samples: &Bound<'py, PyAny>,
    sample_rate: Option<f64>,
    frequency: Option<f64>,
    description: Option<String>,
    meta: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let given: Option<serde_json::Value> = meta.map(|m| from_py(m, "meta")).transpose()?;
    let rate = sample_rate
        .or_else(|| {
            given
                .as_ref()?
                .get("global")?
                .get("core:sample_rate")?
                .as_f64()
        })
        .ok_or_else(|| value("give sample_rate (Hz), or a meta dict with core:sample_rate"))?;
    // The caller's fields over a complete default document.
    let base: Option<Meta> = given
        .map(|g| -> PyResult<Meta> {
            let mut doc = serde_json::to_value(Meta::new(DataType::Cf32Le, rate))
                .map_err(|e| value(e.to_string()))?;
            merge(&mut doc, g);
            serde_json::from_value(doc).map_err(|e| value(format!("meta: {e}")))
        })
        .transpose()?;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(value(format!(
            "sample_rate {rate} Hz: give a positive rate"
        )));
    }
    let prepare = |datatype: DataType, channels: usize| {
        let mut m = base.clone().unwrap_or_else(|| Meta::new(datatype, rate));
        m.global.datatype = datatype.name().to_string();
        m.global.sample_rate = Some(rate);
        m.global.sha512 = None;
        m = m.num_channels(channels);
        if let Some(f) = frequency {
            m = m.capture(0, Some(f));
        }
        if let Some(d) = &description {
            m = m.description(d.clone());
        }
        m
    };
    if let Ok(arr) = samples.extract::<PyReadonlyArrayDyn<'py, Complex32>>() {
        let channels = match arr.shape() {
            [_] => 1,
            [c, _] => *c,
            s => {
                return Err(value(format!(
                    "complex64 samples must be (n,) or (channels, n), got shape {s:?}"
                )))
            }
        };
        let rows = c_slice(&arr, "samples")?;
        let data = interleave(rows, channels.max(1));
        let m = prepare(DataType::Cf32Le, channels);
        py.detach(|| sigmf::write_cf32(&path, &m, &data))
            .map_err(errors::sigmf)?;
    } else if let Ok(arr) = samples.extract::<PyReadonlyArrayDyn<'py, i16>>() {
        let channels = match arr.shape() {
            [_, 2] => 1,
            [c, _, 2] => *c,
            s => {
                return Err(value(format!(
                    "int16 samples must be (n, 2) or (channels, n, 2) I/Q pairs, got shape {s:?}"
                )))
            }
        };
        let flat = c_slice(&arr, "samples")?;
        let pairs: Vec<Ci16> = flat
            .chunks_exact(2)
            .map(|p| Ci16::new(p[0], p[1]))
            .collect();
        let data = interleave(&pairs, channels.max(1));
        let m = prepare(DataType::Ci16Le, channels);
        py.detach(|| sigmf::write_ci16(&path, &m, &data))
            .map_err(errors::sigmf)?;
    } else {
        return Err(value(format!(
            "samples must be a numpy array of complex64 or int16, got {}",
            samples.get_type().name()?
        )));
    }
    let written = sigmf::meta_path(&sigmf::base_path(&path));
    let text = std::fs::read_to_string(&written)
        .map_err(|e| errors::SigMFError::new_err(format!("{}: {e}", written.display())))?;
    py.import("json")?.call_method1("loads", (text,))
}
