//! Python exceptions for the library crates' typed errors. Each keeps the library's
//! message (with its `source` chain), so Python users read what the CLI prints.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    radiohost,
    RadiohostError,
    PyException,
    "Base class of every radiohost error."
);
create_exception!(
    radiohost,
    SigMFError,
    RadiohostError,
    "A SigMF recording could not be read or written."
);
create_exception!(
    radiohost,
    LdpcError,
    RadiohostError,
    "Invalid LDPC code parameters or buffers."
);
create_exception!(
    radiohost,
    PhyError,
    RadiohostError,
    "A baseband (phy) operation failed."
);
create_exception!(
    radiohost,
    RadioError,
    RadiohostError,
    "A radio backend reported an error."
);
create_exception!(
    radiohost,
    DspError,
    RadiohostError,
    "A channel-emulation (dsp) operation failed."
);

create_exception!(
    radiohost,
    PmtError,
    RadiohostError,
    "A PMT transfer could not run or did not deliver the object intact."
);
create_exception!(
    radiohost,
    StationError,
    RadiohostError,
    "A station run or simulation could not be set up or failed."
);

/// The error's message followed by each `source` not already part of it.
pub fn message(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

pub fn sigmf(e: radiohost_iq::sigmf::SigMfError) -> PyErr {
    SigMFError::new_err(message(&e))
}

pub fn ldpc(e: radiohost_ldpc::LdpcError) -> PyErr {
    LdpcError::new_err(message(&e))
}

pub fn phy(e: impl std::error::Error) -> PyErr {
    PhyError::new_err(message(&e))
}

pub fn radio(e: radiohost_radio::RadioError) -> PyErr {
    RadioError::new_err(message(&e))
}

pub fn dsp(e: impl std::error::Error) -> PyErr {
    DspError::new_err(message(&e))
}

pub fn pmt(e: impl std::error::Error) -> PyErr {
    PmtError::new_err(message(&e))
}

pub fn station(e: impl std::error::Error) -> PyErr {
    StationError::new_err(message(&e))
}

/// A `ValueError` for arguments that do not fit (shapes, names, ranges).
pub fn value(text: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(text.into())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RadiohostError", py.get_type::<RadiohostError>())?;
    m.add("SigMFError", py.get_type::<SigMFError>())?;
    m.add("LdpcError", py.get_type::<LdpcError>())?;
    m.add("PhyError", py.get_type::<PhyError>())?;
    m.add("RadioError", py.get_type::<RadioError>())?;
    m.add("DspError", py.get_type::<DspError>())?;
    m.add("PmtError", py.get_type::<PmtError>())?;
    m.add("StationError", py.get_type::<StationError>())?;
    Ok(())
}
