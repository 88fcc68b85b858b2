//! What `radiohost pmt send|recv|compare` run around the drivers: receiver address
//! lists, pre-shared keys, receiving into a file that is kept only when its SHA-256
//! matches, and the comparison of PMT with its baselines over the same emulated links.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use radiohost_testbed::link::{CapacityChange, LinkConfig, LinkConfigError};
use radiohost_testbed::units::{parse_duration, parse_rate, UnitError};
use serde::Serialize;
use thiserror::Error;

use crate::sender::{SenderError, SenderStats};
use crate::sim::{floor_seconds, run_multicast, run_pmt, RunOutcome};
use crate::udp::{self, Destination, DriverError, Progress, RecvReport};
use crate::{ReceiverConfig, SenderConfig};

/// Why a PMT command could not run.
#[derive(Debug, Error)]
pub enum AppError {
    #[error("receiver {0:?} is not an IP:PORT address (optionally @LOCAL)")]
    Receiver(String),
    #[error("local address {0:?} is not an IP or IP:PORT")]
    Local(String),
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pre-shared key {path} is {len} bytes; use at least 16 random bytes")]
    ShortKey { path: PathBuf, len: usize },
    #[error("link spec {spec:?}: {source}")]
    Link {
        spec: String,
        source: LinkConfigError,
    },
    #[error("links: {0}")]
    Links(&'static str),
    #[error("capacity schedule names link {index}, but there are {links} links")]
    ScheduleLink { index: usize, links: usize },
    #[error("capacity change {0:?}: expected [LINK:]TIME=RATE, e.g. 0:10s=700kbit")]
    Change(String),
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error("{0} must be at least 1")]
    AtLeastOne(&'static str),
    #[error("--tcp-runs {0}: TCP runs in real time and varies run to run; give at least 5 runs (or --no-tcp)")]
    TcpRuns(u64),
    #[error(transparent)]
    Sender(#[from] SenderError),
    #[error(transparent)]
    Driver(#[from] DriverError),
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> AppError {
    let path = path.to_path_buf();
    move |source| AppError::Io { op, path, source }
}

/// `ADDR` or `ADDR@LOCAL`, LOCAL the local address (IP or IP:PORT) to send from.
pub fn parse_destination(s: &str) -> Result<Destination, AppError> {
    let (to, local) = match s.split_once('@') {
        Some((t, l)) => (t, Some(l.trim())),
        None => (s, None),
    };
    let to = to
        .trim()
        .parse()
        .map_err(|_| AppError::Receiver(s.to_string()))?;
    let local = local
        .map(|l| {
            l.parse::<SocketAddr>()
                .or_else(|_| l.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
                .map_err(|_| AppError::Local(l.to_string()))
        })
        .transpose()?;
    Ok(Destination { to, local })
}

/// Read a pre-shared key (at least 16 bytes).
pub fn read_psk(path: &Path) -> Result<Vec<u8>, AppError> {
    let key = std::fs::read(path).map_err(io("read pre-shared key", path))?;
    if key.len() < 16 {
        return Err(AppError::ShortKey {
            path: path.into(),
            len: key.len(),
        });
    }
    Ok(key)
}

/// One receiver's line of `pmt send`'s report (fields in JSON key order).
#[derive(Clone, Debug, Serialize)]
pub struct ReceiverOutcome {
    pub bytes: u64,
    /// The receiver went silent for the fail timeout.
    pub failed: bool,
    /// Done and its SHA-256 matched.
    pub intact: bool,
    pub receiver: SocketAddr,
    /// Time until it was done; `None` when it failed.
    pub seconds: Option<f64>,
}

impl ReceiverOutcome {
    /// `intact`, `CORRUPT` (done, SHA-256 mismatch) or `FAILED`.
    pub fn result(&self) -> &'static str {
        match (self.intact, self.failed) {
            (true, _) => "intact",
            (false, false) => "CORRUPT",
            (false, true) => "FAILED",
        }
    }
}

/// What `pmt send` reports: every receiver's outcome and the sender's counters.
#[derive(Clone, Debug, Serialize)]
pub struct SendSummary {
    pub receivers: Vec<ReceiverOutcome>,
    pub stats: SenderStats,
}

impl SendSummary {
    /// Receivers that did not get the object intact.
    pub fn not_intact(&self) -> usize {
        self.receivers.iter().filter(|r| !r.intact).count()
    }
}

/// Send `object` to every destination at once (one unicast flow each, paced per RTT
/// group) until all are done or failed, or `stop` is set.
pub fn send_to(
    cfg: SenderConfig,
    object: Arc<[u8]>,
    dests: &[Destination],
    stop: &AtomicBool,
    progress: impl FnMut(Progress),
) -> Result<SendSummary, AppError> {
    let bytes = object.len() as u64;
    let report = udp::send_object(cfg, object, dests, stop, progress)?;
    let receivers = dests
        .iter()
        .enumerate()
        .map(|(i, d)| ReceiverOutcome {
            bytes,
            failed: report.outcome[i].is_none(),
            intact: report.outcome[i] == Some(true),
            receiver: d.to,
            seconds: report.done_after[i].map(|t| t.as_secs_f64()),
        })
        .collect();
    Ok(SendSummary {
        receivers,
        stats: report.stats,
    })
}

/// Receive one object on `listen` into `out`: written as `out.part` and renamed once
/// the SHA-256 matches, removed otherwise. The report says whether it was kept.
pub fn recv_to_file(
    cfg: ReceiverConfig,
    listen: SocketAddr,
    out: &Path,
    linger: Duration,
    idle: Duration,
    stop: &AtomicBool,
    progress: impl FnMut(Progress),
) -> Result<RecvReport, AppError> {
    let part = out.with_extension("part");
    let file = std::fs::File::create(&part).map_err(io("create", &part))?;
    let mut sink = std::io::BufWriter::new(file);
    let report = udp::recv_object(cfg, listen, &mut sink, linger, idle, stop, progress);
    let flushed = std::io::Write::flush(&mut sink);
    drop(sink);
    match (report, flushed) {
        (Ok(r), Ok(())) if r.intact => {
            std::fs::rename(&part, out).map_err(io("rename to", out))?;
            Ok(r)
        }
        (Ok(r), Ok(())) => {
            let _ = std::fs::remove_file(&part);
            Ok(r)
        }
        (Ok(_), Err(e)) => {
            let _ = std::fs::remove_file(&part);
            Err(io("write", &part)(e))
        }
        (Err(e), _) => {
            let _ = std::fs::remove_file(&part);
            Err(e.into())
        }
    }
}

/// `;`-separated link specs (testbed syntax), each with a finite rate, and optional
/// capacity changes `[LINK:]TIME=RATE,...` (`;` between links, LINK the receiver
/// index, default 0), e.g. `0:10s=700kbit,20s=500kbit`.
pub fn parse_links(links: &str, schedule: Option<&str>) -> Result<Vec<LinkConfig>, AppError> {
    let mut out = links
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            LinkConfig::parse(s).map_err(|source| AppError::Link {
                spec: s.into(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if out.is_empty() {
        return Err(AppError::Links(
            "give at least one link spec, e.g. \"1Mbit,1%;250kbit,20%\"",
        ));
    }
    if out.iter().any(|l| !l.rate_bps.is_finite()) {
        return Err(AppError::Links(
            "every link needs a finite rate (e.g. \"1Mbit\") so its floor is defined",
        ));
    }
    for part in schedule
        .unwrap_or("")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (index, changes) = match part.split_once(':') {
            Some((i, rest)) if !i.contains('=') => (
                i.trim()
                    .parse::<usize>()
                    .map_err(|_| AppError::Change(part.into()))?,
                rest,
            ),
            _ => (0, part),
        };
        let n = out.len();
        let link = out
            .get_mut(index)
            .ok_or(AppError::ScheduleLink { index, links: n })?;
        for c in changes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (t, r) = c
                .split_once('=')
                .ok_or_else(|| AppError::Change(c.into()))?;
            link.capacity_schedule.push(CapacityChange {
                at: parse_duration(t)?,
                rate_bps: parse_rate(r)?,
            });
        }
        link.capacity_schedule.sort_by_key(|c| c.at);
    }
    Ok(out)
}

/// PMT against slowest-receiver multicast (both simulated, virtual time) and kernel
/// TCP Reno (real time through TUN devices) over the same links.
#[derive(Clone, Debug)]
pub struct CompareConfig {
    pub size: usize,
    /// Object size of the TCP runs (real time: smaller keeps runs short).
    pub tcp_size: usize,
    pub links: Vec<LinkConfig>,
    /// Runs of PMT and multicast, seeds `seed..seed + runs`.
    pub runs: u64,
    /// Runs of kernel TCP, seeds `seed..seed + tcp_runs`; at least [`MIN_TCP_RUNS`]
    /// (real-time runs vary run to run, so one run says little).
    pub tcp_runs: u64,
    pub seed: u64,
    pub tcp: bool,
    /// A run still going at this multiple of its floor is stopped, unfinished.
    pub limit_factor: f64,
    pub window: u16,
    pub groups: usize,
}

/// Fewest TCP runs a comparison accepts: enough for a median and a spread.
pub const MIN_TCP_RUNS: u64 = 5;

/// Which clock a row's seconds were measured on.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Simulated network: seconds of virtual time, independent of the host's speed.
    #[serde(rename = "virtual-time")]
    Virtual,
    /// Kernel sockets through TUN devices: wall-clock seconds on this host.
    #[serde(rename = "real-time")]
    Real,
}

impl Clock {
    /// `virtual-time` or `real-time`.
    pub fn label(self) -> &'static str {
        match self {
            Clock::Virtual => "virtual-time",
            Clock::Real => "real-time",
        }
    }

    fn of(protocol: &str) -> Self {
        if protocol == "tcp-reno" {
            Clock::Real
        } else {
            Clock::Virtual
        }
    }
}

/// One protocol, receiver and run.
#[derive(Serialize, Clone, Debug)]
pub struct Row {
    pub protocol: &'static str,
    /// `virtual-time` (simulated network) or `real-time` (kernel TCP through TUN).
    pub clock: Clock,
    pub receiver: usize,
    pub run: u64,
    pub bytes: u64,
    /// Completion time; null when unfinished (stopped at limit_factor x floor).
    pub seconds: Option<f64>,
    pub floor_seconds: f64,
    pub intact: bool,
}

/// Per protocol and receiver over the runs.
#[derive(Serialize, Clone, Debug)]
pub struct Summary {
    pub protocol: &'static str,
    pub clock: Clock,
    pub receiver: usize,
    pub bytes: usize,
    /// Median seconds (infinite counts unfinished runs).
    pub median_s: f64,
    /// Fastest run's seconds (infinite when no run finished).
    pub min_s: f64,
    /// Slowest run's seconds; infinite when any run was unfinished.
    pub max_s: f64,
    pub floor_s: f64,
    pub finished: usize,
    pub intact: usize,
    pub runs: usize,
}

/// A measured ratio between two protocols on one receiver, in multiples of each
/// run's floor (so runs of different sizes compare), and the clocks behind it.
#[derive(Serialize, Clone, Debug)]
pub struct Ratio {
    pub receiver: usize,
    pub protocol: &'static str,
    pub baseline: &'static str,
    /// Median of `protocol` over median of `baseline`, both in floor multiples
    /// (below 1: `protocol` is faster; infinite or NaN when runs were unfinished).
    pub median_ratio: f64,
    /// True when the two were measured on different clocks (virtual vs real time).
    pub mixed_clocks: bool,
}

/// Everything a comparison measured.
#[derive(Clone, Debug)]
pub struct CompareReport {
    pub rows: Vec<Row>,
    pub summary: Vec<Summary>,
    pub ratios: Vec<Ratio>,
    /// The first run of each protocol (for plots).
    pub first: Vec<(&'static str, RunOutcome)>,
    /// Why the TCP baseline did not run, if it did not.
    pub tcp_error: Option<String>,
    /// The stop flag cut the comparison short: the rows are the runs done.
    pub interrupted: bool,
}

/// Where a comparison is, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CompareStep {
    /// PMT and multicast run `run` (virtual time) finished.
    Simulated { run: u64 },
    /// Kernel TCP run `run` starts; it takes up to `limit_s` seconds of real time.
    TcpStarting { run: u64, limit_s: f64 },
    /// Kernel TCP run `run` finished.
    TcpDone { run: u64 },
}

fn rows_of(protocol: &'static str, run: u64, out: &RunOutcome, limit: f64, rows: &mut Vec<Row>) {
    for (i, r) in out.receivers.iter().enumerate() {
        let finished = r.seconds.filter(|&s| s <= r.floor_seconds * limit);
        rows.push(Row {
            protocol,
            clock: Clock::of(protocol),
            receiver: i,
            run,
            bytes: r.bytes,
            seconds: finished,
            floor_seconds: r.floor_seconds,
            intact: r.intact && finished.is_some(),
        });
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Run the comparison; `on_step` hears each step (TCP runs are real time: it
/// hears how long each may take before it starts). Setting `stop` ends the
/// comparison after the current step (a TCP run ends at once, keeping what it
/// received); the report then holds the runs done and `interrupted`.
pub fn compare(
    c: &CompareConfig,
    stop: &Arc<AtomicBool>,
    mut on_step: impl FnMut(CompareStep),
) -> Result<CompareReport, AppError> {
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    if c.runs == 0 {
        return Err(AppError::AtLeastOne("runs"));
    }
    if c.tcp && c.tcp_runs < MIN_TCP_RUNS {
        return Err(AppError::TcpRuns(c.tcp_runs));
    }
    if c.limit_factor.is_nan() || c.limit_factor < 1.0 {
        return Err(AppError::AtLeastOne("the limit factor"));
    }
    let cfg = SenderConfig {
        window: c.window,
        groups: c.groups,
        ..Default::default()
    };
    let worst_floor = |size| {
        c.links
            .iter()
            .map(|l| floor_seconds(l, size))
            .fold(0.0, f64::max)
    };
    let limit = Duration::from_secs_f64(worst_floor(c.size) * c.limit_factor);
    let (mut rows, mut first, mut tcp_error) = (Vec::new(), Vec::new(), None);
    for run in 0..c.runs {
        if stopped() {
            break;
        }
        let seed = c.seed + run;
        let pmt = run_pmt(c.size, &c.links, seed, cfg.clone(), limit)?;
        rows_of("pmt", run, &pmt, c.limit_factor, &mut rows);
        let mc = run_multicast(c.size, &c.links, seed, limit);
        rows_of("multicast", run, &mc, c.limit_factor, &mut rows);
        if run == 0 {
            first.push(("pmt", pmt));
            first.push(("multicast", mc));
        }
        on_step(CompareStep::Simulated { run });
    }
    if c.tcp {
        for run in 0..c.tcp_runs {
            if stopped() {
                break;
            }
            let limit_s = worst_floor(c.tcp_size) * c.limit_factor;
            on_step(CompareStep::TcpStarting { run, limit_s });
            let seed = c.seed + run;
            let tcp = crate::tcp::run_tcp(c.tcp_size, &c.links, seed, c.limit_factor, "reno", stop);
            match tcp {
                // A run cut short by the stop flag is not a measurement.
                Ok(_) if stopped() => break,
                Ok(tcp) => {
                    rows_of("tcp-reno", run, &tcp, c.limit_factor, &mut rows);
                    if run == 0 {
                        first.push(("tcp-reno", tcp));
                    }
                    on_step(CompareStep::TcpDone { run });
                }
                Err(e) => {
                    tcp_error = Some(e.to_string());
                    break;
                }
            }
        }
    }
    let summary = summarize(&rows, c);
    let ratios = ratios(&rows, c.links.len());
    Ok(CompareReport {
        rows,
        summary,
        ratios,
        first,
        tcp_error,
        interrupted: stopped(),
    })
}

fn summarize(rows: &[Row], c: &CompareConfig) -> Vec<Summary> {
    let mut out = Vec::new();
    for protocol in ["pmt", "multicast", "tcp-reno"] {
        for receiver in 0..c.links.len() {
            let rs: Vec<&Row> = rows
                .iter()
                .filter(|r| r.protocol == protocol && r.receiver == receiver)
                .collect();
            let Some(r0) = rs.first() else { continue };
            let secs: Vec<f64> = rs
                .iter()
                .map(|r| r.seconds.unwrap_or(f64::INFINITY))
                .collect();
            out.push(Summary {
                protocol,
                clock: r0.clock,
                receiver,
                bytes: if protocol == "tcp-reno" {
                    c.tcp_size
                } else {
                    c.size
                },
                median_s: median(secs.clone()).unwrap_or(f64::NAN),
                min_s: secs.iter().cloned().fold(f64::INFINITY, f64::min),
                max_s: secs.iter().cloned().fold(0.0, f64::max),
                floor_s: r0.floor_seconds,
                finished: rs.iter().filter(|r| r.seconds.is_some()).count(),
                intact: rs.iter().filter(|r| r.intact).count(),
                runs: rs.len(),
            });
        }
    }
    out
}

/// PMT's median against each baseline's, per receiver, in multiples of the floor.
fn ratios(rows: &[Row], receivers: usize) -> Vec<Ratio> {
    let in_floors = |proto: &str, rx: usize| -> Option<f64> {
        median(
            rows.iter()
                .filter(|r| r.protocol == proto && r.receiver == rx)
                .map(|r| r.seconds.map_or(f64::INFINITY, |s| s / r.floor_seconds))
                .collect(),
        )
    };
    let mut out = Vec::new();
    for receiver in 0..receivers {
        let Some(pmt) = in_floors("pmt", receiver) else {
            continue;
        };
        for baseline in ["multicast", "tcp-reno"] {
            if let Some(b) = in_floors(baseline, receiver) {
                out.push(Ratio {
                    receiver,
                    protocol: "pmt",
                    baseline,
                    median_ratio: pmt / b,
                    mixed_clocks: Clock::of("pmt") != Clock::of(baseline),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn destinations_parse_with_optional_local_address() {
        let d = parse_destination("10.0.0.2:7001@10.0.0.1").unwrap();
        assert_eq!(d.to, "10.0.0.2:7001".parse::<SocketAddr>().unwrap());
        assert_eq!(d.local, Some("10.0.0.1:0".parse().unwrap()));
        assert!(parse_destination("nonsense").is_err());
        assert!(parse_destination("10.0.0.2:1@bad").is_err());
    }

    #[test]
    fn links_and_capacity_schedules() {
        let l = parse_links("1Mbit,1%;250kbit,20%", Some("1:10s=100kbit,5s=200kbit")).unwrap();
        assert_eq!(l.len(), 2);
        let at: Vec<_> = l[1]
            .capacity_schedule
            .iter()
            .map(|c| c.at.as_secs())
            .collect();
        assert_eq!(at, vec![5, 10]);
        assert!(parse_links("", None).is_err());
        assert!(matches!(
            parse_links("1Mbit", Some("3:1s=1Mbit")),
            Err(AppError::ScheduleLink { index: 3, .. })
        ));
        assert!(parse_links("1Mbit", Some("1s")).is_err());
    }

    #[test]
    fn small_comparison_without_tcp_labels_clocks_and_reports_spread() {
        let c = CompareConfig {
            size: 20_000,
            tcp_size: 20_000,
            links: parse_links("2Mbit,1%;500kbit,10%", None).unwrap(),
            runs: 3,
            tcp_runs: MIN_TCP_RUNS,
            seed: 3,
            tcp: false,
            limit_factor: 10.0,
            window: 8,
            groups: 2,
        };
        let go = Arc::new(AtomicBool::new(false));
        let mut simulated = 0;
        let r = compare(&c, &go, |s| match s {
            CompareStep::Simulated { .. } => simulated += 1,
            _ => panic!("TCP is off"),
        })
        .unwrap();
        assert_eq!(simulated, 3);
        assert!(!r.interrupted);
        assert_eq!(r.rows.len(), 12);
        assert!(r
            .rows
            .iter()
            .filter(|x| x.protocol == "pmt")
            .all(|x| x.intact));
        assert!(r.rows.iter().all(|x| x.clock == Clock::Virtual));
        assert_eq!(r.summary.len(), 4);
        for s in &r.summary {
            assert_eq!(s.runs, 3);
            assert!(s.min_s <= s.median_s && s.median_s <= s.max_s, "{s:?}");
            assert!(s.min_s >= s.floor_s, "beat the floor: {s:?}");
        }
        // Only baselines that ran get a ratio; PMT and multicast share a clock.
        assert_eq!(r.ratios.len(), 2);
        assert!(r
            .ratios
            .iter()
            .all(|x| x.baseline == "multicast" && !x.mixed_clocks && x.median_ratio > 0.0));
        let row = serde_json::to_string(&r.rows[0]).unwrap();
        assert!(row.contains("\"clock\":\"virtual-time\""), "{row}");
        assert!(compare(
            &CompareConfig {
                runs: 0,
                ..c.clone()
            },
            &go,
            |_| ()
        )
        .is_err());
        // TCP needs enough runs for a median and a spread; refused before anything runs.
        let few = CompareConfig {
            tcp: true,
            tcp_runs: 1,
            ..c.clone()
        };
        assert!(matches!(
            compare(&few, &go, |_| panic!("must not start")),
            Err(AppError::TcpRuns(1))
        ));
        // A stop ends it after the current run, keeping the rows done.
        let stop = Arc::new(AtomicBool::new(false));
        let r = compare(&c, &stop.clone(), |_| stop.store(true, Ordering::Relaxed)).unwrap();
        assert!(r.interrupted);
        assert_eq!(r.rows.len(), 4, "one run of two protocols to two receivers");
    }
}
