//! Running Debian's `cyclictest` (package rt-tests) with the timer probe's
//! parameters and reading its per-sample output (`-v -N`: one
//! `thread:cycle:latency_ns` line per wake-up), so both land in the same
//! histogram type and are compared like for like.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::config::Policy;
use crate::stats::LatencyHistogram;

/// Why cyclictest gave no figures.
#[derive(Debug, Error)]
pub enum CyclictestError {
    /// Binary missing.
    #[error("cyclictest not found ({0}): install it with `apt-get install -y rt-tests`")]
    NotInstalled(std::io::Error),
    /// It ran but failed.
    #[error("`{cmdline}` exited with {status}: {stderr}")]
    Failed {
        /// Command run.
        cmdline: String,
        /// Exit status.
        status: String,
        /// Its stderr (last lines).
        stderr: String,
    },
    /// Waiting for it failed.
    #[error("waiting for cyclictest: {0}")]
    Wait(std::io::Error),
    /// Its output held no sample lines.
    #[error("no `thread:cycle:latency` sample lines in cyclictest output (starts: {0:?})")]
    NoSamples(String),
    /// Asked to stop (SIGINT), it was still running after the grace period, so it was
    /// killed and its samples are lost.
    #[error("cyclictest did not stop within {0:?} of SIGINT; killed it (its samples are lost)")]
    Unresponsive(Duration),
}

/// How long a stopped cyclictest gets to print its samples and exit before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// One sample line of `cyclictest -v`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleLine {
    /// Measurement thread index.
    pub thread: u32,
    /// Wake-up counter of that thread.
    pub cycle: u64,
    /// Latency in the unit cyclictest was asked for (ns with `-N`).
    pub value: i64,
}

/// Parses one line; `None` for anything that is not a sample line (banners,
/// `Thread 0 Interval: 1000`, `# /dev/cpu_dma_latency set to 0us`).
pub fn parse_line(line: &str) -> Option<SampleLine> {
    let mut parts = line.split(':');
    let thread = parts.next()?.trim().parse().ok()?;
    let cycle = parts.next()?.trim().parse().ok()?;
    let value = parts.next()?.trim().parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(SampleLine {
        thread,
        cycle,
        value,
    })
}

/// Samples of thread 0 found in an output text.
#[derive(Debug)]
pub struct Parsed {
    /// Latencies (ns when run with `-N`).
    pub histogram: LatencyHistogram,
    /// Cycles missing between consecutive sample lines (lost verbose output).
    pub gaps: u64,
}

/// Reads all sample lines of thread 0 into a histogram.
pub fn parse_output(text: &str) -> Result<Parsed, CyclictestError> {
    let mut histogram = LatencyHistogram::new();
    let mut gaps = 0u64;
    let mut last: Option<u64> = None;
    for s in text
        .lines()
        .filter_map(parse_line)
        .filter(|s| s.thread == 0)
    {
        histogram.record_signed(s.value);
        if let Some(prev) = last {
            gaps += s.cycle.saturating_sub(prev.saturating_add(1));
        }
        last = Some(s.cycle);
    }
    if histogram.is_empty() {
        let start: String = text.chars().take(200).collect();
        return Err(CyclictestError::NoSamples(start));
    }
    Ok(Parsed { histogram, gaps })
}

/// Parameters, mirroring the timer probe's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CyclictestRun {
    /// Policy of the measurement thread.
    pub policy: Policy,
    /// Priority (0 for `other`).
    pub priority: i32,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Wake-up period.
    pub interval: Duration,
    /// Number of wake-ups.
    pub samples: u64,
    /// `-m`: mlockall.
    pub lock_memory: bool,
    /// `Some(us)`: hold /dev/cpu_dma_latency at `us` (`--latency`); `None`:
    /// leave power management alone (`--default-system`).
    pub pm_qos_us: Option<u32>,
}

impl CyclictestRun {
    /// Command-line arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "-N".to_string(),
            "-v".into(),
            "-t".into(),
            "1".into(),
            "-d".into(),
            "0".into(),
            format!("--loops={}", self.samples),
            format!("--interval={}", self.interval.as_micros().max(1)),
            format!("--policy={}", self.policy),
            format!("--priority={}", self.priority),
        ];
        if let Some(cpu) = self.cpu {
            a.push(format!("--affinity={cpu}"));
        }
        if self.lock_memory {
            a.push("--mlockall".into());
        }
        match self.pm_qos_us {
            Some(us) => a.push(format!("--latency={us}")),
            None => a.push("--default-system".into()),
        }
        a
    }

    /// The command line, for reports.
    pub fn cmdline(&self) -> String {
        format!("cyclictest {}", self.args().join(" "))
    }

    /// Runs cyclictest to completion and parses its samples. Once `stop` is
    /// set, cyclictest is asked to finish (SIGINT) and the samples it took are
    /// parsed. It runs in its own process group, so a Ctrl-C at the terminal
    /// reaches only us, and we stop it ourselves after it has written them.
    pub fn run(&self, stop: &AtomicBool) -> Result<Parsed, CyclictestError> {
        self.run_program("cyclictest", stop)
    }

    fn run_program(&self, program: &str, stop: &AtomicBool) -> Result<Parsed, CyclictestError> {
        let mut command = Command::new(program);
        command
            .args(self.args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: signal(2) is async-signal-safe, so it may run between fork and exec.
        // A process started with SIGINT ignored (a background job of a non-interactive
        // shell, `nohup`) passes that on, and a shell wrapper cannot trap a signal it
        // inherited ignored: restore the default so the stop request below reaches it.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(CyclictestError::NotInstalled)?;
        // Drain both pipes on their own threads so a full pipe never blocks it.
        let drain = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut text);
                }
                text
            })
        };
        let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
        let mut asked: Option<Instant> = None;
        let mut killed = false;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(CyclictestError::Wait)? {
                break status;
            }
            match asked {
                None if stop.load(Ordering::Relaxed) => {
                    asked = Some(Instant::now());
                    // SAFETY: kill(2) on our own child's pid, which it still is:
                    // it has not been reaped (try_wait returned None).
                    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
                }
                Some(at) if !killed && at.elapsed() > STOP_GRACE => {
                    killed = true;
                    // SAFETY: as above. The whole process group (its own, from
                    // `process_group(0)`): a wrapper's children would otherwise keep
                    // the pipes open and the drain threads waiting.
                    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        if killed {
            return Err(CyclictestError::Unresponsive(STOP_GRACE));
        }
        let asked = asked.is_some();
        if !status.success() && !asked {
            let err = String::from_utf8_lossy(&err);
            let tail: Vec<&str> = err.lines().rev().take(5).collect();
            return Err(CyclictestError::Failed {
                cmdline: self.cmdline(),
                status: status.to_string(),
                stderr: tail.into_iter().rev().collect::<Vec<_>>().join(" | "),
            });
        }
        parse_output(&String::from_utf8_lossy(&out))
    }
}

/// Whether a `cyclictest` binary can be started.
pub fn available() -> bool {
    Command::new("cyclictest")
        .arg("--help")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const OUTPUT: &str = "# /dev/cpu_dma_latency set to 0us\nThread 0 Interval: 1000\n\
        \x20      0:       0:   10716\n       0:       1:    9851\n\
        \x20      0:       4:   18459\n       1:       0:  999999\n";

    /// Runs `body` as a stand-in for cyclictest (after a line that sets its SIGINT
    /// trap and one that says so), asking it to stop once the trap is set; returns the
    /// run's result and how long it took.
    fn stop_a_fake(trap: &str, body: &str) -> (Result<Parsed, CyclictestError>, Duration) {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("fake-cyclictest");
        let script = format!("#!/bin/sh\n{trap}\ntouch \"$0.ready\"\n{body}\n");
        std::fs::write(&fake, script).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let run = CyclictestRun {
            policy: Policy::Other,
            priority: 0,
            cpu: None,
            interval: Duration::from_millis(1),
            samples: 1_000_000,
            lock_memory: false,
            pm_qos_us: None,
        };
        let ready = dir.path().join("fake-cyclictest.ready");
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let result = std::thread::scope(|s| {
            // Before its trap is set, SIGINT would simply end the script.
            s.spawn(|| {
                while !ready.exists() && started.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, Ordering::Relaxed);
            });
            // Another test's fork can hold the script open for writing (inherited
            // until its exec) just as this one starts it: exec then fails with
            // ETXTBSY, so start it again (the stop thread is still waiting).
            loop {
                match run.run_program(fake.to_str().unwrap(), &stop) {
                    Err(CyclictestError::NotInstalled(e))
                        if e.raw_os_error() == Some(libc::ETXTBSY)
                            && started.elapsed() < Duration::from_secs(10) =>
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    other => break other,
                }
            }
        });
        (result, started.elapsed())
    }

    #[test]
    fn a_stop_keeps_the_samples_taken() {
        // One sample line when asked to stop, as cyclictest prints its samples when it
        // finishes on SIGINT.
        let (parsed, _) = stop_a_fake(
            "trap 'echo \"       0:       0:   10716\"; exit 0' INT",
            "while :; do sleep 0.02; done",
        );
        assert_eq!(parsed.unwrap().histogram.len(), 1);
    }

    #[test]
    fn a_program_that_ignores_the_stop_is_killed() {
        let (result, took) = stop_a_fake("trap '' INT", "while :; do sleep 0.02; done");
        let err = result.unwrap_err();
        assert!(matches!(err, CyclictestError::Unresponsive(_)), "{err}");
        assert!(took < STOP_GRACE + Duration::from_secs(25));
    }

    #[test]
    fn parses_sample_lines_only() {
        assert_eq!(
            parse_line("       0:       1:    9851"),
            Some(SampleLine {
                thread: 0,
                cycle: 1,
                value: 9851
            })
        );
        assert_eq!(parse_line("Thread 0 Interval: 1000"), None);
        assert_eq!(parse_line("1:2:3:4"), None);
        let p = parse_output(OUTPUT).unwrap();
        let s = p.histogram.summary();
        // Above 2048 ns HDR buckets read up to 0.1 % high.
        assert_eq!(s.samples, 3);
        assert!(s.min_ns >= 9851 && s.min_ns < 9862, "{}", s.min_ns);
        assert!(s.max_ns >= 18459 && s.max_ns < 18500);
        assert_eq!(p.gaps, 2);
        assert!(matches!(
            parse_output("Using 1 cpus.\n"),
            Err(CyclictestError::NoSamples(_))
        ));
    }

    #[test]
    fn args_mirror_the_probe() {
        let run = CyclictestRun {
            policy: Policy::Fifo,
            priority: 80,
            cpu: Some(1),
            interval: Duration::from_micros(1000),
            samples: 10_000,
            lock_memory: true,
            pm_qos_us: None,
        };
        let c = run.cmdline();
        for part in [
            "--policy=fifo",
            "--priority=80",
            "--affinity=1",
            "--interval=1000",
            "--loops=10000",
            "--mlockall",
            "--default-system",
            "-N",
            "-v",
        ] {
            assert!(c.contains(part), "{c} lacks {part}");
        }
    }

    proptest! {
        #[test]
        fn formatted_samples_parse_back(t in 0u32..64, c in 0u64..u64::MAX, v in any::<i64>()) {
            let line = format!("{t:8}:{c:8}:{v:8}");
            prop_assert_eq!(parse_line(&line), Some(SampleLine { thread: t, cycle: c, value: v }));
        }

        #[test]
        fn never_panics(s in "\\PC{0,40}") {
            let _ = parse_line(&s);
            let _ = parse_output(&s);
        }
    }
}
