//! JSON-shaped values to and from Python objects, through Python's own `json`,
//! so metadata and reports come out as plain dicts.

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
    serde_json::from_str(&text).map_err(|e| value(format!("{what}: {e}")))
}
