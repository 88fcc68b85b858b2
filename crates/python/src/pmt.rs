//! PMT from Python: ``pmt_send`` delivers one object to several receivers at once
//! and ``PmtReceiver`` receives one, through the same library calls `radiohost pmt
//! send|recv` make (``radiohost_pmt::app::send_to``, ``udp::recv_object_on``).
//! Reports are the CLI's ``--json`` reports as dicts; the GIL is released while a
//! transfer runs, so a receiver and a sender can run in two Python threads.

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use radiohost_pmt::app::{parse_destination, send_to};
use radiohost_pmt::udp::{recv_object_on, Destination, DriverError};
use radiohost_pmt::wire::MAX_SEGMENT;
use radiohost_pmt::{ReceiverConfig, SenderConfig};
use radiohost_testbed::units::{parse_duration, parse_positive_duration};

use crate::convert::to_py;
use crate::errors::{self, value};
use crate::interrupt::Interrupt;

/// Shortest pre-shared key accepted (`radiohost pmt --psk-file` has the same rule).
const MIN_PSK: usize = 16;

fn psk(key: Option<&[u8]>) -> PyResult<Option<Vec<u8>>> {
    match key {
        Some(k) if k.len() < MIN_PSK => Err(value(format!(
            "psk is {} bytes; use at least {MIN_PSK} random bytes",
            k.len()
        ))),
        other => Ok(other.map(<[u8]>::to_vec)),
    }
}

/// A duration with its unit (``"15s"``, ``"250ms"``) through the units parser.
pub fn duration(what: &str, text: &str, positive: bool) -> PyResult<Duration> {
    let parsed = if positive {
        parse_positive_duration(text)
    } else {
        parse_duration(text)
    };
    parsed.map_err(|e| value(format!("{what}: {}", errors::message(&e))))
}

/// `lo..=hi` or a `ValueError` naming the argument and its range.
pub fn in_range<T: PartialOrd + std::fmt::Display>(what: &str, v: T, lo: T, hi: T) -> PyResult<T> {
    if v < lo || v > hi {
        return Err(value(format!("{what} {v}: must be from {lo} to {hi}")));
    }
    Ok(v)
}

/// pmt_send(data, to, *, session=1, window=8, groups=2, segment=1400,
/// fail_timeout="15s", psk=None) -> dict
///
/// Send ``data`` (bytes) to every receiver in ``to`` at once over UDP, one unicast
/// flow each, each served at the pace of its RTT group. ``to``: addresses
/// ``"IP:PORT"`` or ``"IP:PORT@LOCAL"`` (LOCAL the local address to send from).
/// ``window`` W (segments per round, 1-1024), ``groups`` K (1-16), ``segment``
/// payload bytes per segment (1-9000), ``fail_timeout`` a duration with its unit
/// after which a silent receiver is declared failed, ``psk`` a key of at least 16
/// bytes (every packet then carries an HMAC-SHA256 tag).
///
/// Returns `radiohost pmt send --json`'s report: ``receivers`` (per receiver
/// ``receiver``, ``bytes``, ``intact``, ``failed``, ``seconds``) and ``stats``
/// (the sender's counters). Raises ``PmtError`` when a receiver did not get the
/// object intact, or the transfer could not run.
#[pyfunction]
#[pyo3(signature = (data, to, *, session=1, window=8, groups=2, segment=1400, fail_timeout="15s", psk=None))]
#[allow(clippy::too_many_arguments)]
pub fn pmt_send<'py>(
    py: Python<'py>,
    data: &[u8],
    to: Vec<String>,
    session: u32,
    window: u16,
    groups: u8,
    segment: u16,
    fail_timeout: &str,
    psk: Option<&[u8]>,
) -> PyResult<Bound<'py, PyAny>> {
    if to.is_empty() {
        return Err(value("to: give at least one receiver address"));
    }
    let dests = to
        .iter()
        .map(|t| parse_destination(t).map_err(errors::pmt))
        .collect::<PyResult<Vec<Destination>>>()?;
    let cfg = SenderConfig {
        session,
        segment_size: in_range("segment", segment, 1, MAX_SEGMENT as u16)?,
        window: in_range("window", window, 1, 1024)?,
        groups: usize::from(in_range("groups", groups, 1, 16)?),
        fail_timeout: duration("fail_timeout", fail_timeout, true)?,
        psk: self::psk(psk)?,
        ..Default::default()
    };
    let object: Arc<[u8]> = Arc::from(data);
    // While acknowledgements come in, a pending KeyboardInterrupt stops the transfer.
    let interrupt = Interrupt::default();
    let sent = py.detach(|| send_to(cfg, object, &dests, interrupt.flag(), |_| interrupt.poll()));
    interrupt.raise()?;
    let summary = sent.map_err(errors::pmt)?;
    let bad = summary.not_intact();
    if bad > 0 {
        return Err(errors::PmtError::new_err(format!(
            "{bad} of {} receivers did not get the object intact",
            dests.len()
        )));
    }
    to_py(py, &summary)
}

/// A PMT receiver bound to a UDP address (``"IP:PORT"``; port 0 picks a free
/// one, read back from ``address``). ``receive()`` takes one object.
#[pyclass(module = "radiohost")]
pub struct PmtReceiver {
    sock: Mutex<Option<UdpSocket>>,
    addr: SocketAddr,
}

#[pymethods]
impl PmtReceiver {
    #[new]
    #[pyo3(signature = (listen="0.0.0.0:0"))]
    fn new(listen: &str) -> PyResult<Self> {
        let at: SocketAddr = listen
            .trim()
            .parse()
            .map_err(|_| value(format!("listen {listen:?}: expected IP:PORT")))?;
        let bind = |source| errors::pmt(DriverError::Bind { addr: at, source });
        let sock = UdpSocket::bind(at).map_err(bind)?;
        let addr = sock.local_addr().map_err(bind)?;
        Ok(PmtReceiver {
            sock: Mutex::new(Some(sock)),
            addr,
        })
    }

    /// The bound address as ``(host, port)``.
    #[getter]
    fn address(&self) -> (String, u16) {
        (self.addr.ip().to_string(), self.addr.port())
    }

    /// receive(*, sender=None, session=None, buffer=1024, linger="2s", idle="30s",
    /// psk=None) -> (bytes, dict)
    ///
    /// Receive one object and check its SHA-256. ``sender``: accept only this
    /// ``"IP:PORT"`` (default: the first valid sender heard); ``session``: accept
    /// only this session; ``buffer``: reassembly window in segments (1-65536);
    /// ``linger``: keep answering this long after completion so a lost final ACK is
    /// repaired; ``idle``: give up after this long without any packet (durations
    /// with their units). Returns the object and `radiohost pmt recv --json`'s
    /// report (``bytes``, ``from``, ``intact``, ``seconds`` = first datagram to
    /// verified object, ``listened_seconds``, ``stats``). Raises ``PmtError`` when
    /// no sender was heard or the object failed its SHA-256 check. A receiver
    /// takes one object: a second call raises ``PmtError``.
    #[pyo3(signature = (*, sender=None, session=None, buffer=1024, linger="2s", idle="30s", psk=None))]
    #[allow(clippy::too_many_arguments)]
    fn receive<'py>(
        &self,
        py: Python<'py>,
        sender: Option<&str>,
        session: Option<u32>,
        buffer: u32,
        linger: &str,
        idle: &str,
        psk: Option<&[u8]>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyAny>)> {
        let sender = sender
            .map(|s| {
                s.trim()
                    .parse::<SocketAddr>()
                    .map_err(|_| value(format!("sender {s:?}: expected IP:PORT")))
            })
            .transpose()?;
        let cfg = ReceiverConfig {
            sender,
            session,
            buffer_segments: in_range("buffer", buffer, 1, 65_536)?,
            psk: self::psk(psk)?,
            ..Default::default()
        };
        let linger = duration("linger", linger, false)?;
        let idle = duration("idle", idle, true)?;
        let sock = self
            .sock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                errors::PmtError::new_err(
                    "this receiver already took its object: make a new PmtReceiver",
                )
            })?;
        // While packets come in, a pending KeyboardInterrupt stops the transfer
        // (`idle` bounds the wait when none do).
        let interrupt = Interrupt::default();
        let received = py.detach(|| {
            let mut data = Vec::new();
            recv_object_on(cfg, sock, &mut data, linger, idle, interrupt.flag(), |_| {
                interrupt.poll()
            })
            .map(|r| (data, r))
        });
        interrupt.raise()?;
        let (data, report) = received.map_err(errors::pmt)?;
        if !report.intact {
            return Err(errors::PmtError::new_err(
                "the object failed its SHA-256 check; nothing was kept",
            ));
        }
        Ok((PyBytes::new(py, &data), to_py(py, &report)?))
    }

    fn __repr__(&self) -> String {
        format!("PmtReceiver(listen={:?})", self.addr.to_string())
    }
}
