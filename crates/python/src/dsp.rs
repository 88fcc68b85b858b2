//! Channel emulation: the UPOLS MIMO convolver (uniformly partitioned
//! overlap-save, the engine of `radiohost chanemu`) and channel models.

use num_complex::Complex32;
use numpy::ndarray::{Array2, Array3};
use numpy::prelude::*;
use numpy::{PyArray2, PyArray3, PyReadonlyArray3, PyReadonlyArrayDyn};
use pyo3::prelude::*;
use radiohost_dsp::channel::{draw_rayleigh, FadingChannel, FadingProcess, PowerDelayProfile};
use radiohost_dsp::{MimoConvolver, MimoTaps, SwapMode};
use radiohost_iq::Cf32;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::convert::c_slice;
use crate::errors::{self, value};

/// (outputs, inputs, length) complex64 as impulse responses h[n][m].
fn taps_from(taps: &PyReadonlyArray3<'_, Complex32>) -> PyResult<MimoTaps> {
    let (n, m, l) = (taps.shape()[0], taps.shape()[1], taps.shape()[2]);
    let flat = c_slice(taps, "taps")?;
    let paths: Vec<Vec<Cf32>> = flat.chunks_exact(l.max(1)).map(<[Cf32]>::to_vec).collect();
    if l == 0 {
        return Err(value("taps have length 0: give at least one tap per path"));
    }
    MimoTaps::from_paths(m, n, paths).map_err(errors::dsp)
}

fn taps_to<'py>(py: Python<'py>, t: &MimoTaps) -> PyResult<Bound<'py, PyArray3<Complex32>>> {
    let (n, m, l) = (t.outputs(), t.inputs(), t.max_len());
    let mut flat = vec![Cf32::default(); n * m * l];
    for o in 0..n {
        for i in 0..m {
            let p = t.path(o, i);
            flat[(o * m + i) * l..][..p.len()].copy_from_slice(p);
        }
    }
    Ok(Array3::from_shape_vec((n, m, l), flat)
        .map_err(|e| value(e.to_string()))?
        .into_pyarray(py))
}

/// A streaming M-input, N-output convolver: ``y[n] = sum_m h[n][m] * x[m]``,
/// block by block, with responses swapped glitch-free while it runs.
///
/// ``Convolver(taps, block=256)``: ``taps`` complex64 (outputs, inputs, length).
#[pyclass(module = "radiohost")]
pub struct Convolver {
    inner: std::sync::Mutex<MimoConvolver>,
}

#[pymethods]
impl Convolver {
    #[new]
    #[pyo3(signature = (taps, block=256))]
    fn new(taps: PyReadonlyArray3<'_, Complex32>, block: usize) -> PyResult<Self> {
        let t = taps_from(&taps)?;
        Ok(Convolver {
            inner: std::sync::Mutex::new(MimoConvolver::new(block, &t).map_err(errors::dsp)?),
        })
    }

    #[getter]
    fn inputs(&self) -> usize {
        self.lock().inputs()
    }
    #[getter]
    fn outputs(&self) -> usize {
        self.lock().outputs()
    }
    /// Samples per block: ``process`` takes whole blocks.
    #[getter]
    fn block(&self) -> usize {
        self.lock().block()
    }
    /// Whether a response swap is still in progress.
    #[getter]
    fn swapping(&self) -> bool {
        self.lock().is_swapping()
    }

    /// process(x) -> y
    ///
    /// ``x``: complex64 (inputs, k * block), or (k * block,) with one input.
    /// Returns ``y`` complex64 (outputs, k * block). State carries over between
    /// calls: consecutive calls equal one call on the joined input.
    fn process<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArrayDyn<'py, Complex32>,
    ) -> PyResult<Bound<'py, PyArray2<Complex32>>> {
        let (m, len) = match x.shape() {
            [l] => (1, *l),
            [m, l] => (*m, *l),
            s => {
                return Err(value(format!(
                    "x must be (samples,) or (inputs, samples), got shape {s:?}"
                )))
            }
        };
        // Slices and views are welcome: one contiguous copy when the array is not.
        let owned;
        let flat = match c_slice(&x, "x") {
            Ok(f) => f,
            Err(_) => {
                owned = x.as_array().iter().copied().collect::<Vec<_>>();
                &owned
            }
        };
        let mut conv = self.lock();
        let (b, n) = (conv.block(), conv.outputs());
        if m != conv.inputs() {
            return Err(value(format!(
                "x has {m} input(s) but the convolver has {}",
                conv.inputs()
            )));
        }
        if len % b != 0 {
            return Err(value(format!(
                "{len} samples is not a whole number of {b}-sample blocks"
            )));
        }
        let mut y = vec![Cf32::default(); n * len];
        let conv: &mut MimoConvolver = &mut conv;
        py.detach(|| -> Result<(), radiohost_dsp::DspError> {
            let mut xin = vec![Cf32::default(); m * b];
            let mut yout = vec![Cf32::default(); n * b];
            for k in 0..len / b {
                for i in 0..m {
                    xin[i * b..(i + 1) * b].copy_from_slice(&flat[i * len + k * b..][..b]);
                }
                {
                    let ins: Vec<&[Cf32]> = xin.chunks_exact(b).collect();
                    let mut outs: Vec<&mut [Cf32]> = yout.chunks_exact_mut(b).collect();
                    conv.process_block(&ins, &mut outs)?;
                }
                for o in 0..n {
                    y[o * len + k * b..][..b].copy_from_slice(&yout[o * b..(o + 1) * b]);
                }
            }
            Ok(())
        })
        .map_err(errors::dsp)?;
        Ok(Array2::from_shape_vec((n, len), y)
            .map_err(|e| value(e.to_string()))?
            .into_pyarray(py))
    }

    /// swap(taps, mode="staggered", blocks=4)
    ///
    /// Switches to new responses (same inputs and outputs, length within the
    /// planned one). "staggered": exact, input blocks before the swap see the old
    /// response and later ones the new; "crossfade": a linear ramp over ``blocks``.
    #[pyo3(signature = (taps, mode="staggered", blocks=4))]
    fn swap(
        &self,
        taps: PyReadonlyArray3<'_, Complex32>,
        mode: &str,
        blocks: usize,
    ) -> PyResult<()> {
        let mode = match mode {
            "staggered" => SwapMode::Staggered,
            "crossfade" => SwapMode::Crossfade { blocks },
            o => {
                return Err(value(format!(
                    "mode {o:?}: use \"staggered\" or \"crossfade\""
                )))
            }
        };
        let t = taps_from(&taps)?;
        self.lock().swap_responses(&t, mode).map_err(errors::dsp)
    }

    /// Clears the filter state (as if no input had been processed).
    fn reset(&self) {
        self.lock().reset();
    }
}

impl Convolver {
    fn lock(&self) -> std::sync::MutexGuard<'_, MimoConvolver> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn pdp(delays: Vec<usize>, powers_db: Vec<f32>) -> PyResult<PowerDelayProfile> {
    PowerDelayProfile::from_db(delays, &powers_db).map_err(errors::dsp)
}

/// rayleigh_taps(inputs, outputs, delays, powers_db, seed=0) -> complex64 (outputs, inputs, length)
///
/// One draw of an MxN channel whose every path has independent Rayleigh taps at
/// ``delays`` (samples) with ``powers_db`` (normalised to unit mean path power).
#[pyfunction]
#[pyo3(signature = (inputs, outputs, delays, powers_db, seed=0))]
pub fn rayleigh_taps<'py>(
    py: Python<'py>,
    inputs: usize,
    outputs: usize,
    delays: Vec<usize>,
    powers_db: Vec<f32>,
    seed: u64,
) -> PyResult<Bound<'py, PyArray3<Complex32>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let t =
        draw_rayleigh(&pdp(delays, powers_db)?, inputs, outputs, &mut rng).map_err(errors::dsp)?;
    taps_to(py, &t)
}

/// A time-varying channel: every tap of every path fades as a Jakes (Clarke)
/// process with ``doppler_hz``, sampled every ``interval_s``.
/// ``response()`` gives the current taps, ``advance()`` moves one interval.
#[pyclass(module = "radiohost")]
pub struct FadingModel {
    inner: std::sync::Mutex<FadingChannel>,
}

#[pymethods]
impl FadingModel {
    #[new]
    #[pyo3(signature = (inputs, outputs, delays, powers_db, doppler_hz, interval_s, *, sinusoids=16, seed=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        inputs: usize,
        outputs: usize,
        delays: Vec<usize>,
        powers_db: Vec<f32>,
        doppler_hz: f64,
        interval_s: f64,
        sinusoids: usize,
        seed: u64,
    ) -> PyResult<Self> {
        let process = FadingProcess::Jakes {
            doppler_hz,
            interval_s,
            sinusoids,
        };
        let ch = FadingChannel::new(pdp(delays, powers_db)?, inputs, outputs, process, seed)
            .map_err(errors::dsp)?;
        Ok(FadingModel {
            inner: std::sync::Mutex::new(ch),
        })
    }

    /// The current impulse responses, complex64 (outputs, inputs, length).
    fn response<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray3<Complex32>>> {
        let ch = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = ch.make_response();
        ch.write_response(&mut t).map_err(errors::dsp)?;
        taps_to(py, &t)
    }

    /// Moves the channel one update interval forward.
    fn advance(&self) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .advance();
    }
}
