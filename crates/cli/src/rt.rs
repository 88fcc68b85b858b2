//! `radiohost rt`: machine audit, latency probes and the cyclictest comparison.

mod bench;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use radiohost_rt::audit::{self, AuditInputs, AuditRequest, Finding};
use radiohost_rt::load::LoadStats;
use radiohost_rt::pmqos::CpuDmaLatency;
use radiohost_rt::probe::timer::TimerProbe;
use radiohost_rt::probe::udp::{UdpPeer, UdpProbe};
use radiohost_rt::probe::{effective_policy_label, study_config, study_plan};
use radiohost_rt::probe::{LatencyRow, ProbeControl, ProbeRun};
use radiohost_rt::process::{self, EchoProcess};
use radiohost_rt::{cpulist, Policy, ThreadConfig};
use radiohost_testbed::units;

use crate::plot;
use crate::table::Table;
use crate::ui::{self, with_progress};

/// The period of a probe: 10us..=10s (shorter ones only measure the probe itself).
pub fn interval_arg() -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync {
    let (lo, hi) = (Duration::from_micros(10), Duration::from_secs(10));
    ui::within(units::parse_duration, lo, hi, "10us..=10s")
}

/// The length of a run: 1ms..=24h.
pub fn run_length_arg() -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync {
    let (lo, hi) = (Duration::from_millis(1), Duration::from_secs(24 * 3600));
    ui::within(units::parse_duration, lo, hi, "1ms..=24h")
}

/// `radiohost rt ...`
#[derive(Subcommand)]
pub enum RtCmd {
    /// Audit this machine for real-time work: RT throttling, CPU isolation,
    /// C-states, cpufreq governor, rlimits and capabilities, each with a fix.
    Check(CheckArgs),
    /// Measure wake-up (timer), loopback round-trip (udp) or CHDR streamer
    /// RX-to-TX (pipeline) latency of a configured thread; optionally under
    /// load, or idle-vs-loaded and normal-vs-RT side by side.
    Probe(ProbeArgs),
    /// Timer probe and cyclictest back to back (same CPU, policy, priority,
    /// interval, load), idle and loaded, with the ratio of medians and P99.9.
    Bench(bench::BenchArgs),
    /// UDP echo for `probe --mode udp --processes` (the second process).
    Echo(EchoArgs),
    /// Run the built-in background load (CPU hogs, memory and syscall churn,
    /// short-lived processes) until stdin closes or the duration ends, then
    /// print the work done as JSON. Probes run it as a separate process so
    /// their memory locking cannot change it.
    Load(LoadArgs),
}

/// Command-line policy names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// SCHED_FIFO
    Fifo,
    /// SCHED_RR
    Rr,
    /// SCHED_OTHER (normal)
    Other,
}

impl From<PolicyArg> for Policy {
    fn from(p: PolicyArg) -> Policy {
        match p {
            PolicyArg::Fifo => Policy::Fifo,
            PolicyArg::Rr => Policy::Rr,
            PolicyArg::Other => Policy::Other,
        }
    }
}

/// Thread setup shared by probe, bench and echo.
#[derive(Args, Clone, Debug)]
pub struct ThreadArgs {
    /// Scheduling policy of the measurement thread.
    #[arg(long, value_enum, default_value = "fifo")]
    pub policy: PolicyArg,
    /// Priority, 1 to 99 for fifo/rr (ignored for other).
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub priority: i32,
    /// CPUs to pin to, kernel list syntax (`1`, `2-3`, `0,2`).
    #[arg(long, value_parser = parse_cpus)]
    pub cpu: Option<Cpus>,
    /// Do not lock memory (mlockall) for RT policies.
    #[arg(long)]
    pub no_mlock: bool,
    /// Stack to prefault for RT policies, a size with its unit (e.g. 256KiB; at most 64MiB).
    #[arg(long, default_value = "256KiB",
          value_parser = ui::within(units::parse_size, 0, 64 << 20, "0B..=64MiB"))]
    pub prefault: usize,
}

impl ThreadArgs {
    /// The requested configuration, as the study sets it up.
    pub fn config(&self) -> ThreadConfig {
        study_config(
            self.policy.into(),
            self.priority,
            self.cpu.clone().map(|c| c.0),
            !self.no_mlock,
            self.prefault,
        )
    }
}

/// A CPU list argument (a newtype so clap treats it as one value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cpus(pub Vec<usize>);

pub fn parse_cpus(s: &str) -> Result<Cpus, String> {
    let v = cpulist::parse(s).map_err(|e| e.to_string())?;
    if v.is_empty() {
        return Err("empty CPU list".into());
    }
    Ok(Cpus(v))
}

#[derive(Args)]
pub struct CheckArgs {
    /// CPUs the time-critical threads will use.
    #[arg(long, value_parser = parse_cpus)]
    cpu: Option<Cpus>,
    /// Real-time priority they will ask for, 1 to 99.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(i32).range(1..=99))]
    priority: i32,
    /// Memory locking will not be used.
    #[arg(long)]
    no_mlock: bool,
    /// Exit 0 even when a finding is CRIT (the requested setup cannot work);
    /// by default a CRIT finding makes the command exit 1.
    #[arg(long)]
    allow_critical: bool,
    /// Print findings as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Absolute-deadline sleep and wake-up latency (like cyclictest).
    Timer,
    /// UDP ping-pong round trip over loopback.
    Udp,
    /// A CHDR packet from an emulated radio through the host streamer and
    /// back: kernel RX timestamp to TX send (the streamer thread runs with
    /// the probe's thread setup).
    Pipeline,
}

#[derive(Args)]
pub struct ProbeArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value = "timer")]
    mode: Mode,
    #[command(flatten)]
    thread: ThreadArgs,
    /// Period between wake-ups / pings (ns, us, ms, s; 10us to 10s, e.g. 1ms).
    #[arg(long, default_value = "1ms", value_parser = interval_arg())]
    interval: Duration,
    /// Length of each run (ns, us, ms, s, min; 1ms to 24h, e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = run_length_arg())]
    duration: Duration,
    /// Run under the built-in background load (CPU hogs, memory and syscall
    /// churn, short-lived processes).
    #[arg(long)]
    load: bool,
    /// Run idle and loaded, with normal and with the requested RT setup, and
    /// print all four side by side (the study's table). Takes 4 x duration.
    #[arg(long)]
    compare: bool,
    /// udp: echo in a second process instead of a thread.
    #[arg(long)]
    processes: bool,
    /// udp: CPUs of the echo thread/process (default: same as --cpu).
    #[arg(long, value_parser = parse_cpus)]
    echo_cpu: Option<Cpus>,
    /// Hold /dev/cpu_dma_latency at this latency during the runs (keeps CPUs
    /// out of deep C-states, as cyclictest does by default), e.g. 10us.
    #[arg(long, value_parser = units::parse_duration)]
    pm_qos: Option<Duration>,
    /// Write a latency histogram plot (SVG) here (FILE, or DIR for DIR/rt_probe.svg).
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
    /// Print rows as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct EchoArgs {
    /// Address to listen on (port 0 picks one; the address is printed first).
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    #[command(flatten)]
    thread: ThreadArgs,
    /// Exit after this long at the latest (ns, us, ms, s, min; 1ms to 24h).
    #[arg(long, default_value = "60s", value_parser = run_length_arg())]
    max_duration: Duration,
}

#[derive(Args)]
pub struct LoadArgs {
    /// Stop after this long at the latest (ns, us, ms, s, min; 1ms to 24h).
    #[arg(long, default_value = "10s", value_parser = run_length_arg())]
    duration: Duration,
    /// Ignore stdin (otherwise end-of-file on stdin stops the load).
    #[arg(long)]
    ignore_stdin: bool,
}

pub fn run(cmd: RtCmd) -> Result<()> {
    match cmd {
        RtCmd::Check(a) => check(a),
        RtCmd::Probe(a) => probe(a),
        RtCmd::Bench(a) => bench::run(a),
        RtCmd::Echo(a) => echo(a),
        RtCmd::Load(a) => {
            process::serve_load(a.duration, a.ignore_stdin)?;
            Ok(())
        }
    }
}

fn check(a: CheckArgs) -> Result<()> {
    let req = AuditRequest {
        cpus: a.cpu.map(|c| c.0).unwrap_or_default(),
        priority: a.priority,
        lock_memory: !a.no_mlock,
    };
    let findings = audit::audit(&AuditInputs::gather_local(), &req);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print_findings(&findings);
    }
    let critical: Vec<&str> = findings
        .iter()
        .filter(|f| f.severity == audit::Severity::Critical)
        .map(|f| f.check)
        .collect();
    if !critical.is_empty() && !a.allow_critical {
        anyhow::bail!(
            "{} critical finding(s) ({}): the requested setup cannot work here \
             (--allow-critical to exit 0 anyway)",
            critical.len(),
            critical.join(", ")
        );
    }
    Ok(())
}

/// Human table of audit findings.
pub fn print_findings(findings: &[Finding]) {
    println!("{:<5} {:<15} finding", "", "check");
    for f in findings {
        println!(
            "{:<5} {:<15} {}",
            f.severity.to_string(),
            f.check,
            f.message
        );
        if !f.fix.is_empty() {
            println!("{:<21} fix: {}", "", f.fix);
        }
    }
    println!("worst: {}", audit::worst(findings));
}

/// One probe run's result with what it ran under.
pub struct Measured {
    pub row: LatencyRow,
    pub run: ProbeRun,
    pub load: Option<LoadStats>,
}

/// This binary with `args`: the helper processes are its own subcommands.
fn this_binary<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Result<Command> {
    let exe = std::env::current_exe().context("finding the radiohost executable")?;
    let mut cmd = Command::new(exe);
    cmd.args(args);
    Ok(cmd)
}

/// Runs `f` under the background load (when `loaded`), started as a separate
/// `radiohost rt load` process so this process's mlockall does not change it.
pub fn under_load<T>(
    loaded: bool,
    bound: Duration,
    f: impl FnOnce() -> T,
) -> Result<(T, Option<LoadStats>)> {
    let limit = format!("{}ms", (bound + Duration::from_secs(5)).as_millis());
    let cmd = match loaded {
        true => Some(this_binary(["rt", "load", "--duration", &limit])?),
        false => None,
    };
    Ok(process::under_load(cmd, f)?)
}

/// `radiohost rt echo` with the echo side's thread setup, as a child process.
fn spawn_echo_process(cfg: &ThreadArgs, bound: Duration) -> Result<EchoProcess> {
    let policy = format!("{:?}", cfg.policy).to_lowercase();
    let (priority, prefault) = (cfg.priority.to_string(), format!("{}B", cfg.prefault));
    let limit = format!("{}s", bound.as_secs() + 10);
    let mut cmd = this_binary(["rt", "echo", "--bind", "127.0.0.1:0", "--policy", &policy])?;
    cmd.args(["--priority", &priority, "--prefault", &prefault]);
    cmd.args(["--max-duration", &limit]);
    if let Some(c) = &cfg.cpu {
        cmd.args(["--cpu", &cpulist::format(&c.0)]);
    }
    if cfg.no_mlock {
        cmd.arg("--no-mlock");
    }
    Ok(EchoProcess::start(cmd)?)
}

/// One probe run: mode, thread setup, optional load.
fn measure(a: &ProbeArgs, cfg: &ThreadConfig, loaded: bool) -> Result<Measured> {
    let control = ProbeControl::default();
    let load_label = if loaded { "loaded" } else { "idle" };
    let label = format!("{:?} {} {load_label}", a.mode, cfg.policy).to_lowercase();
    let show = !a.json;
    // Ctrl-C stops the probe early; it returns the samples it has.
    let progress = || {
        if ui::interrupted() {
            control.stop();
        }
        control.samples()
    };
    let (run, load) = match a.mode {
        Mode::Timer => {
            let probe = TimerProbe::for_duration(cfg.clone(), a.interval, a.duration);
            under_load(loaded, a.duration, || {
                with_progress(&label, probe.samples, show, progress, || {
                    probe.run(&control).map_err(anyhow::Error::from)
                })
            })?
        }
        Mode::Udp => {
            let mut echo_args = a.thread.clone();
            echo_args.cpu = a.echo_cpu.clone().or_else(|| a.thread.cpu.clone());
            if !cfg.policy.is_realtime() {
                echo_args.policy = PolicyArg::Other;
            }
            let mut _process = None;
            let peer = if a.processes {
                let p = spawn_echo_process(&echo_args, a.duration)?;
                let addr = p.addr;
                _process = Some(p); // killed when the run is over
                UdpPeer::Remote(addr)
            } else {
                let mut c = echo_args.config();
                c.lock_memory = false; // process-wide; the pinger's setting decides
                UdpPeer::Thread(c)
            };
            let probe = UdpProbe::for_duration(cfg.clone(), peer, a.interval, a.duration);
            under_load(loaded, a.duration, || {
                with_progress(&label, probe.samples, show, progress, || {
                    probe.run(&control).map_err(anyhow::Error::from)
                })
            })?
        }
        // The streamer keeps its own counters; no progress bar.
        Mode::Pipeline => under_load(loaded, a.duration, || {
            radiohost_chdr::session::probe_pipeline(cfg, a.interval, a.duration)
                .map_err(anyhow::Error::from)
        })?,
    };
    let run = run?;
    let mode = match a.mode {
        Mode::Pipeline => "pipeline",
        Mode::Timer => "timer",
        Mode::Udp if a.processes => "udp-process",
        Mode::Udp => "udp",
    };
    let policy = effective_policy_label(&run.report);
    let row = LatencyRow::new(mode, &policy, load_label, &run.histogram.summary());
    Ok(Measured { row, run, load })
}

fn probe(a: ProbeArgs) -> Result<()> {
    a.thread.config().validate()?;
    let _pm = match a.pm_qos {
        Some(d) => Some(CpuDmaLatency::request(whole_us(d)).context("--pm-qos")?),
        None => None,
    };
    let svg = a.svg.as_deref().map(ui::SvgOut::new).transpose()?;
    let plan = study_plan(&a.thread.config(), a.compare, a.load);
    let mut results = Vec::new();
    for (cfg, loaded) in &plan {
        if ui::interrupted() {
            break;
        }
        let m = measure(&a, cfg, *loaded)?;
        if a.json {
            println!("{}", serde_json::to_string(&m.row)?);
        }
        results.push(m);
    }
    if !a.json {
        print_setup(&results);
        print_rows(&results.iter().map(|m| m.row.clone()).collect::<Vec<_>>());
        print_extras(&results);
    }
    if let Some(path) = svg.map(|s| s.path("rt_probe", false)) {
        let series: Vec<_> = results
            .iter()
            .map(|m| {
                let r = &m.row;
                (
                    format!("{} {} {}", r.mode, r.policy, r.load),
                    &m.run.histogram,
                )
            })
            .collect();
        let title = format!("{:?} probe latency", a.mode).to_lowercase();
        plot::latency_histograms(&title, &series).write(&path, (900, 540))?;
        if !a.json {
            println!("plot: {}", path.display());
        }
    }
    ui::partial_if_interrupted(|| {
        format!(
            "{} of {} runs, the last one cut short",
            results.len(),
            plan.len()
        )
    })
}

fn print_setup(results: &[Measured]) {
    let mut seen = Vec::new();
    for m in results {
        let r = &m.run.report;
        if seen.contains(&r.config) {
            continue;
        }
        seen.push(r.config.clone());
        print!("{r}");
    }
}

/// The study's table: one row per run, µs.
pub fn print_rows(rows: &[LatencyRow]) {
    let t = Table::new("<12 <9 <7 >8 >9.1 >9.1 >9.1 >9.1 >9.1 >9.1");
    t.header("mode|policy|load|samples|min us|median|p99|p99.9|max|jitter");
    for r in rows {
        t.row(&[
            &r.mode,
            &r.policy,
            &r.load,
            &r.samples,
            &r.min_us,
            &r.median_us,
            &r.p99_us,
            &r.p999_us,
            &r.max_us,
            &r.jitter_us,
        ]);
    }
    println!("jitter = width of the shortest interval holding 99.9% of samples");
}

fn print_extras(results: &[Measured]) {
    for m in results {
        if m.run.missed > 0 {
            println!(
                "{} {} {}: {} intervals missed (woke after the next deadline / reply lost)",
                m.row.mode, m.row.policy, m.row.load, m.run.missed
            );
        }
        if let Some(l) = &m.load {
            println!(
                "load during {} {}: {} cpu blocks, {} MiB churned, {} syscalls, {} processes ({} failed)",
                m.row.mode,
                m.row.policy,
                l.cpu_blocks,
                l.bytes_churned >> 20,
                l.syscalls,
                l.processes,
                l.spawn_failures
            );
        }
    }
}

fn echo(a: EchoArgs) -> Result<()> {
    process::serve_echo(a.bind, a.thread.config(), a.max_duration)?;
    Ok(())
}

/// A PM QoS request is whole microseconds (what /dev/cpu_dma_latency takes).
pub fn whole_us(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_thread_flags_reach_the_config() {
        assert!(parse_cpus("").is_err());
        assert_eq!(parse_cpus("0-2"), Ok(Cpus(vec![0, 1, 2])));
        let args = ThreadArgs {
            policy: PolicyArg::Rr,
            priority: 70,
            cpu: Some(Cpus(vec![1])),
            no_mlock: true,
            prefault: 128 * 1024,
        };
        let c = args.config();
        assert_eq!(
            (c.policy, c.priority, c.lock_memory),
            (Policy::Rr, 70, false)
        );
        assert_eq!(
            (c.prefault_stack_bytes, c.cpus),
            (128 * 1024, Some(vec![1]))
        );
    }
}
