//! JSON-shaped values to and from Python objects, through Python's own `json`,
//! so metadata and reports come out as plain dicts.

use numpy::ndarray::Dimension;
use numpy::prelude::*;
use numpy::{Element, PyReadonlyArray, PyReadwriteArray};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::errors::value;

/// A serialisable value as a Python object (dicts, lists, numbers, strings).
pub fn to_py<'py>(py: Python<'py>, v: &impl Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(v).map_err(|e| value(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// A Python object (dict, list...) read as `T`, with serde's message on mismatch.
pub fn from_py<T: DeserializeOwned>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    let text: String = obj
        .py()
        .import("json")?
        .call_method1("dumps", (obj,))?
        .extract()?;
    serde_json::from_str(&text).map_err(|e| {
        // The text is our own json.dumps of the object: its line and column say nothing.
        let msg = e.to_string();
        let msg = msg.rfind(" at line ").map_or(msg.as_str(), |i| &msg[..i]);
        value(format!("{what}: {msg}"))
    })
}

fn not_c_order(what: &str) -> PyErr {
    value(format!(
        "{what} must be C-contiguous (numpy.ascontiguousarray)"
    ))
}

/// The array's elements in index (C) order, borrowed. numpy's `as_slice` also
/// accepts a Fortran-ordered array, whose memory is not in the order the
/// bindings read rows in, so C order is checked first.
pub fn c_slice<'a, T: Element, D: Dimension>(
    a: &'a PyReadonlyArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a [T]> {
    if !a.is_c_contiguous() {
        return Err(not_c_order(what));
    }
    a.as_slice().map_err(|_| not_c_order(what))
}

/// [`c_slice`] for an array the binding writes into.
pub fn c_slice_mut<'a, T: Element, D: Dimension>(
    a: &'a mut PyReadwriteArray<'_, T, D>,
    what: &str,
) -> PyResult<&'a mut [T]> {
    if !a.is_c_contiguous() {
        return Err(not_c_order(what));
    }
    a.as_slice_mut().map_err(|_| not_c_order(what))
}
