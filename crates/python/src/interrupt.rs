//! Ctrl-C for long library calls run with the GIL released: their progress
//! callbacks (called between steps) take the GIL for a moment to see whether a
//! signal is pending; a KeyboardInterrupt raises the library's stop flag, and the
//! binding raises it once the call has returned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// How often [`Interrupt::poll`] looks at signals (callbacks that run per packet
/// would otherwise take the GIL thousands of times a second).
const POLL_EVERY: Duration = Duration::from_millis(100);

pub struct Interrupt {
    stop: AtomicBool,
    pending: Mutex<Option<PyErr>>,
    last_poll: Mutex<Instant>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt {
            stop: AtomicBool::new(false),
            pending: Mutex::new(None),
            last_poll: Mutex::new(Instant::now()),
        }
    }
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

    /// [`check`](Self::check) at most every 100 ms, for callbacks called often.
    pub fn poll(&self) {
        let mut last = self.last_poll.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= POLL_EVERY {
            *last = Instant::now();
            drop(last);
            self.check();
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
