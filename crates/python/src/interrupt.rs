//! Ctrl-C for long library calls run with the GIL released: their progress
//! callbacks (called between steps) take the GIL for a moment to see whether a
//! signal is pending; a KeyboardInterrupt raises the library's stop flag, and the
//! binding raises it once the call has returned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;

#[derive(Default)]
pub struct Interrupt {
    stop: AtomicBool,
    pending: Mutex<Option<PyErr>>,
}

impl Interrupt {
    /// The flag to hand the library call as its `stop`.
    pub fn flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// From a progress callback, without the GIL: run Python's signal handlers and
    /// stop the call when one raised.
    pub fn check(&self) {
        if let Err(e) = Python::attach(|py| py.check_signals()) {
            *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// The exception a signal handler raised during the call, if any.
    pub fn raise(self) -> PyResult<()> {
        match self.pending.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
