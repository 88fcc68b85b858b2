//! 5G NR LDPC in batches: one codeword per row of a numpy array, the GIL released
//! while the batch runs.

use numpy::ndarray::{Array1, Array2};
use numpy::prelude::*;
use numpy::{PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use radiohost_ldpc::files::{CodeSpec, FileError};
use radiohost_ldpc::{
    BatchDecoder, DecodeOutcome, Decoder, DecoderConfig, Encoder, LdpcError, MinSum, RateMatch,
};

use crate::convert::{c_slice, c_slice_mut};
use crate::errors::{self, value};

fn spec_error(e: FileError) -> PyErr {
    match e {
        FileError::Code(e) => errors::ldpc(e),
        other => errors::LdpcError::new_err(errors::message(&other)),
    }
}

/// A 5G NR LDPC code (TS 38.212): base graph 1 or 2, lifting size ``zc`` (any of
/// the 51), payload bits K' (default K), the rate-matched length E given as
/// ``tx_bits`` or ``rate`` (default 1/3 for BG1, 1/5 for BG2; E beyond the
/// circular buffer repeats bits) and redundancy version ``rv`` 0..3.
#[pyclass(frozen, module = "radiohost")]
pub struct LdpcCode {
    rm: RateMatch,
    bg: u8,
}

#[pymethods]
impl LdpcCode {
    #[new]
    #[pyo3(signature = (base_graph, zc, *, payload_bits=None, tx_bits=None, rate=None, rv=0))]
    fn new(
        base_graph: u8,
        zc: usize,
        payload_bits: Option<usize>,
        tx_bits: Option<usize>,
        rate: Option<f64>,
        rv: u8,
    ) -> PyResult<Self> {
        if tx_bits.is_some() && rate.is_some() {
            return Err(value("give tx_bits or rate, not both"));
        }
        let spec = CodeSpec {
            bg: base_graph,
            zc,
            rate,
            tx_bits,
            payload_bits,
            rv,
        };
        Ok(LdpcCode {
            rm: spec.rate_match().map_err(spec_error)?,
            bg: base_graph,
        })
    }

    /// Base graph, 1 or 2.
    #[getter]
    fn base_graph(&self) -> u8 {
        self.bg
    }
    /// Lifting size Zc.
    #[getter]
    fn zc(&self) -> usize {
        self.rm.code_params().zc
    }
    /// Payload bits K' per codeword.
    #[getter]
    fn payload_bits(&self) -> usize {
        self.rm.code_params().payload_bits
    }
    /// Rate-matched bits E per codeword.
    #[getter]
    fn tx_bits(&self) -> usize {
        self.rm.tx_bits()
    }
    /// Redundancy version.
    #[getter]
    fn rv(&self) -> u8 {
        self.rm.rv()
    }
    /// Code rate K'/E.
    #[getter]
    fn rate(&self) -> f64 {
        self.rm.rate()
    }
    /// Start of bit selection in the circular buffer (k0).
    #[getter]
    fn k0(&self) -> usize {
        self.rm.k0()
    }

    /// encode(bits) -> coded
    ///
    /// ``bits``: uint8 0/1 of shape (codewords, payload_bits). Returns uint8 of shape
    /// (codewords, tx_bits): the rate-matched codewords.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        bits: PyReadonlyArray2<'py, u8>,
    ) -> PyResult<Bound<'py, PyArray2<u8>>> {
        let (rows, k) = (bits.shape()[0], bits.shape()[1]);
        let p = self.rm.code_params();
        if k != p.payload_bits {
            return Err(value(format!(
                "bits has {k} columns but the code carries {} payload bits per codeword",
                p.payload_bits
            )));
        }
        let input = c_slice(&bits, "bits")?;
        if let Some(b) = input.iter().find(|&&b| b > 1) {
            return Err(value(format!("bits must be 0 or 1, found {b}")));
        }
        let e = self.rm.tx_bits();
        let rm = &self.rm;
        let out = py
            .detach(|| -> Result<Vec<u8>, radiohost_ldpc::LdpcError> {
                let mut enc = Encoder::new(p);
                let mut full = vec![0u8; p.bg.cols() * p.zc];
                let mut out = vec![0u8; rows * e];
                for (payload, coded) in input.chunks_exact(k).zip(out.chunks_exact_mut(e)) {
                    enc.encode_full(payload, &mut full)?;
                    rm.select(&full, coded)?;
                }
                Ok(out)
            })
            .map_err(errors::ldpc)?;
        Ok(Array2::from_shape_vec((rows, e), out)
            .map_err(|e| value(e.to_string()))?
            .into_pyarray(py))
    }

    /// decode(llr, *, max_iterations=10, early_termination=True, normalization=0.75)
    /// -> (bits, iterations, parity_ok)
    ///
    /// ``llr``: float32 of shape (codewords, tx_bits), ln P(0)/P(1) (positive means
    /// bit 0). Layered normalized min-sum on the best SIMD kernel of this CPU; where
    /// Zc is not a multiple of 64, rows are decoded several at a time, lanes
    /// interleaved (8 at Zc=72), each with the result it gets alone. Returns uint8 bits (codewords, payload_bits), int32 iterations (codewords,)
    /// and bool parity_ok (codewords,). ``out``: a C-contiguous uint8 array of shape
    /// (codewords, payload_bits) the bits are written into and returned as; reusing
    /// one across batches spares a fresh array's first-touch page faults (about 2
    /// per codeword at Zc=384).
    #[pyo3(signature = (llr, *, max_iterations=10, early_termination=true, normalization=0.75, out=None))]
    #[allow(clippy::type_complexity)]
    fn decode<'py>(
        &self,
        py: Python<'py>,
        llr: PyReadonlyArray2<'py, f32>,
        max_iterations: usize,
        early_termination: bool,
        normalization: f32,
        out: Option<Bound<'py, PyArray2<u8>>>,
    ) -> PyResult<(
        Bound<'py, PyArray2<u8>>,
        Bound<'py, PyArray1<i32>>,
        Bound<'py, PyArray1<bool>>,
    )> {
        let (rows, e) = (llr.shape()[0], llr.shape()[1]);
        if e != self.rm.tx_bits() {
            return Err(value(format!(
                "llr has {e} columns but the code sends {} bits per codeword",
                self.rm.tx_bits()
            )));
        }
        if max_iterations == 0 {
            return Err(value("max_iterations must be at least 1"));
        }
        let input = c_slice(&llr, "llr")?;
        let p = self.rm.code_params();
        let cfg = DecoderConfig {
            max_iterations,
            min_sum: MinSum::Normalized(normalization),
            early_termination,
            ..DecoderConfig::default()
        };
        let rm = &self.rm;
        let kp = p.payload_bits;
        let bits = match out {
            Some(a) if a.shape() == [rows, kp] => a,
            Some(a) => {
                return Err(value(format!(
                    "out has shape {:?}, the batch decodes into ({rows}, {kp})",
                    a.shape()
                )))
            }
            None => PyArray2::zeros(py, (rows, kp), false),
        };
        let (iters, ok) = {
            let mut view = bits
                .try_readwrite()
                .map_err(|e| value(format!("out: {e}")))?;
            let bits_out = c_slice_mut(&mut view, "out")?;
            py.detach(|| -> Result<_, radiohost_ldpc::LdpcError> {
                let mut dec = Decoder::try_new(p, cfg)?;
                // Lifting sizes that are not multiples of 64 decode whole batches of
                // rows at once (the same results, row for row); the rest one by one.
                let mut batch = BatchDecoder::try_new(p, cfg)?;
                let nb = batch.blocks();
                let batched = if nb > 1 { rows / nb * nb } else { 0 };
                let tx = p.tx_bits;
                let mut combined = vec![0f32; nb * tx];
                let mut iters = Vec::with_capacity(rows);
                let mut ok = Vec::with_capacity(rows);
                // RV 0 without repetition selects codeword bits 0..E in order: the
                // rows are the decoder's input as they are (no de-rate-matching copy).
                let direct = rm.rv() == 0 && tx == e;
                let mut outcomes = vec![
                    DecodeOutcome {
                        iterations: 0,
                        parity_ok: false
                    };
                    nb
                ];
                let (whole_in, rest_in) = input.split_at(batched * e);
                let (whole_out, rest_out) = bits_out.split_at_mut(batched * kp);
                for (ls, os) in whole_in
                    .chunks_exact(nb * e)
                    .zip(whole_out.chunks_exact_mut(nb * kp))
                {
                    let mut views: [&[f32]; 64] = [&[]; 64];
                    if direct {
                        for (v, l) in views.iter_mut().zip(ls.chunks_exact(e)) {
                            *v = l;
                        }
                    } else {
                        for (c, l) in combined.chunks_exact_mut(tx).zip(ls.chunks_exact(e)) {
                            rm.combine(l, c)?;
                        }
                        for (v, c) in views.iter_mut().zip(combined.chunks_exact(tx)) {
                            *v = c;
                        }
                    }
                    // A NaN's index within its row, as the one-by-one path reports it.
                    batch
                        .decode(&views[..nb], os, &mut outcomes)
                        .map_err(|err| match err {
                            LdpcError::NanLlr { index } => LdpcError::NanLlr { index: index % tx },
                            other => other,
                        })?;
                    for r in &outcomes {
                        iters.push(r.iterations as i32);
                        ok.push(r.parity_ok);
                    }
                }
                let combined = &mut combined[..tx];
                for (l, o) in rest_in.chunks_exact(e).zip(rest_out.chunks_exact_mut(kp)) {
                    let r = if direct {
                        dec.decode(l, o)?
                    } else {
                        rm.combine(l, combined)?;
                        dec.decode(combined, o)?
                    };
                    iters.push(r.iterations as i32);
                    ok.push(r.parity_ok);
                }
                Ok((iters, ok))
            })
            .map_err(errors::ldpc)?
        };
        Ok((
            bits,
            Array1::from(iters).into_pyarray(py),
            Array1::from(ok).into_pyarray(py),
        ))
    }

    fn __repr__(&self) -> String {
        let p = self.rm.code_params();
        format!(
            "LdpcCode(base_graph={}, zc={}, payload_bits={}, tx_bits={}, rv={})",
            self.bg,
            p.zc,
            p.payload_bits,
            self.rm.tx_bits(),
            self.rm.rv()
        )
    }
}

/// The 51 lifting sizes Zc of TS 38.212 Table 5.3.2-1.
#[pyfunction]
pub fn lifting_sizes() -> Vec<usize> {
    radiohost_ldpc::LIFTING_SIZES.to_vec()
}
