//! Machine audit for real-time work: what silently hurts latency, with
//! severity and the fix. Gathering ([`AuditInputs::gather`]) is separate from
//! judging ([`audit`]), so the rules are tested on fabricated machines.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sys::{self, Rlimit, CAP_IPC_LOCK, CAP_SYS_NICE};
use crate::{clock, cpulist};

/// C-states with a longer exit latency than this are flagged (µs).
pub const CSTATE_LATENCY_LIMIT_US: u64 = 10;

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Fine as it is.
    Ok,
    /// Worth knowing; rarely the cause of a missed deadline.
    Info,
    /// Will show up in the tail latency.
    Warning,
    /// The requested setup cannot work.
    Critical,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warning => "WARN",
            Severity::Critical => "CRIT",
        })
    }
}

/// One audit result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier, e.g. `rt-throttling`.
    pub check: &'static str,
    /// How much it matters.
    pub severity: Severity,
    /// What was found.
    pub message: String,
    /// How to fix it (empty when nothing to do).
    pub fix: String,
}

/// One idle state of a CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CState {
    /// State name (`POLL`, `C1`, `C6`, ...).
    pub name: String,
    /// Exit latency, µs.
    pub latency_us: u64,
    /// Disabled through sysfs.
    pub disabled: bool,
}

/// Everything the audit looks at, read from the machine or made up in tests.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AuditInputs {
    /// `/proc/sys/kernel/sched_rt_runtime_us` (-1 = no throttling).
    pub rt_runtime_us: Option<i64>,
    /// `/proc/sys/kernel/sched_rt_period_us`.
    pub rt_period_us: Option<i64>,
    /// `/sys/devices/system/cpu/online`.
    pub online: Option<Vec<usize>>,
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: Option<Vec<usize>>,
    /// `/sys/devices/system/cpu/nohz_full`.
    pub nohz_full: Option<Vec<usize>>,
    /// `/proc/cmdline`.
    pub cmdline: String,
    /// Idle states per CPU (index = CPU); empty when cpuidle is absent.
    pub cstates: Vec<(usize, Vec<CState>)>,
    /// cpufreq governor per CPU, when cpufreq exists.
    pub governors: Vec<(usize, String)>,
    /// `/proc/sys/kernel/version` (holds `PREEMPT_RT`, `PREEMPT_DYNAMIC`, ...).
    pub kernel_version: String,
    /// `/sys/kernel/realtime` reads 1.
    pub realtime_kernel: bool,
    /// `RLIMIT_RTPRIO`.
    pub rlimit_rtprio: Option<Rlimit>,
    /// `RLIMIT_MEMLOCK`, bytes.
    pub rlimit_memlock: Option<Rlimit>,
    /// Effective capabilities (`CapEff`).
    pub capabilities: Option<u64>,
    /// TAI - UTC offset the kernel applies, s.
    pub tai_offset_s: i64,
    /// Timer slack of normal threads (`/proc/self/timerslack_ns`).
    pub timer_slack_ns: Option<u64>,
}

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .ok()
        .map(|s| s.trim().to_string())
}

impl AuditInputs {
    /// Reads the machine. `root` prefixes `/proc` and `/sys` paths (use `/`);
    /// rlimits, capabilities and clocks always come from this process.
    pub fn gather(root: &Path) -> AuditInputs {
        let num = |p: &str| read(root, p).and_then(|s| s.parse::<i64>().ok());
        let list = |p: &str| read(root, p).and_then(|s| cpulist::parse(&s).ok());
        let online = list("/sys/devices/system/cpu/online");
        let cpus: Vec<usize> = online.clone().unwrap_or_default();
        let mut cstates = Vec::new();
        let mut governors = Vec::new();
        for &cpu in &cpus {
            let dir = format!("/sys/devices/system/cpu/cpu{cpu}");
            let mut states = Vec::new();
            for k in 0..32 {
                let s = format!("{dir}/cpuidle/state{k}");
                let Some(name) = read(root, &format!("{s}/name")) else {
                    break;
                };
                states.push(CState {
                    name,
                    latency_us: read(root, &format!("{s}/latency"))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0),
                    disabled: read(root, &format!("{s}/disable")).as_deref() == Some("1"),
                });
            }
            if !states.is_empty() {
                cstates.push((cpu, states));
            }
            if let Some(g) = read(root, &format!("{dir}/cpufreq/scaling_governor")) {
                governors.push((cpu, g));
            }
        }
        let status = sys::proc_self_status().ok();
        AuditInputs {
            rt_runtime_us: num("/proc/sys/kernel/sched_rt_runtime_us"),
            rt_period_us: num("/proc/sys/kernel/sched_rt_period_us"),
            online,
            isolated: list("/sys/devices/system/cpu/isolated"),
            nohz_full: list("/sys/devices/system/cpu/nohz_full"),
            cmdline: read(root, "/proc/cmdline").unwrap_or_default(),
            cstates,
            governors,
            kernel_version: read(root, "/proc/sys/kernel/version").unwrap_or_default(),
            realtime_kernel: read(root, "/sys/kernel/realtime").as_deref() == Some("1"),
            rlimit_rtprio: sys::rlimit_rtprio().ok(),
            rlimit_memlock: sys::rlimit_memlock().ok(),
            capabilities: status.as_deref().and_then(sys::effective_caps),
            tai_offset_s: clock::tai_offset_s(),
            timer_slack_ns: num("/proc/self/timerslack_ns").map(|v| v.max(0) as u64),
        }
    }

    /// Reads the real machine (`root` = `/`).
    pub fn gather_local() -> AuditInputs {
        Self::gather(&PathBuf::from("/"))
    }

    fn has_cap(&self, cap: u32) -> bool {
        self.capabilities.is_some_and(|c| c & (1 << cap) != 0)
    }

    /// CPUs named by kernel parameter `key=` (the last occurrence wins, as in
    /// the kernel); `Some(vec![])` for a bare `rcu_nocbs`, meaning all CPUs.
    fn cmdline_cpus(&self, key: &str) -> Option<Vec<usize>> {
        let mut found = None;
        for arg in self.cmdline.split_whitespace() {
            if arg == "--" {
                break; // the rest goes to init, not the kernel
            }
            if arg == key {
                found = Some(self.online.clone().unwrap_or_default());
            } else if let Some(v) = arg.strip_prefix(key).and_then(|v| v.strip_prefix('=')) {
                // isolcpus takes optional flags before the list: `domain,managed_irq,2-3`.
                let list: Vec<&str> = v
                    .split(',')
                    .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
                    .collect();
                found = cpulist::parse(&list.join(",")).ok();
            }
        }
        found
    }
}

/// What the audit should judge against.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AuditRequest {
    /// CPUs the time-critical threads will use (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Real-time priority wanted (0 = none).
    pub priority: i32,
    /// Whether memory locking is wanted.
    pub lock_memory: bool,
}

fn finding(check: &'static str, severity: Severity, message: String, fix: &str) -> Finding {
    Finding {
        check,
        severity,
        message,
        fix: fix.to_string(),
    }
}

/// Judges a machine for the requested setup. Findings come in a fixed order.
pub fn audit(m: &AuditInputs, req: &AuditRequest) -> Vec<Finding> {
    let mut out = Vec::new();
    rt_throttling(m, &mut out);
    kernel(m, &mut out);
    isolation(m, req, &mut out);
    cstates(m, req, &mut out);
    governors(m, req, &mut out);
    limits(m, req, &mut out);
    timer_slack(m, req, &mut out);
    tai(m, &mut out);
    out
}

fn rt_throttling(m: &AuditInputs, out: &mut Vec<Finding>) {
    let period = m.rt_period_us.unwrap_or(1_000_000);
    out.push(match m.rt_runtime_us {
        None => finding(
            "rt-throttling",
            Severity::Info,
            "sched_rt_runtime_us unreadable; RT throttling unknown".into(),
            "",
        ),
        Some(-1) => finding(
            "rt-throttling",
            Severity::Ok,
            "RT throttling disabled (sched_rt_runtime_us = -1): a runaway RT thread can \
             hog its CPU, so pin RT threads away from housekeeping CPUs"
                .into(),
            "",
        ),
        Some(rt) if rt >= period => finding(
            "rt-throttling",
            Severity::Ok,
            format!("RT runtime {rt} us >= period {period} us: no throttling"),
            "",
        ),
        Some(rt) => finding(
            "rt-throttling",
            Severity::Warning,
            format!(
                "RT threads may run only {rt} us of every {period} us ({:.0}%): a busy-polling \
                 RT thread is stopped for {} us each period",
                100.0 * rt as f64 / period as f64,
                period - rt
            ),
            "sysctl -w kernel.sched_rt_runtime_us=-1 (only with RT threads pinned to \
             isolated CPUs), or make polling threads block or sleep regularly",
        ),
    });
}

fn kernel(m: &AuditInputs, out: &mut Vec<Finding>) {
    let v = &m.kernel_version;
    out.push(if m.realtime_kernel || v.contains("PREEMPT_RT") {
        finding("kernel", Severity::Ok, "PREEMPT_RT kernel".into(), "")
    } else if v.contains("PREEMPT") {
        finding(
            "kernel",
            Severity::Info,
            format!("preemptible but not PREEMPT_RT ({v}): tails grow under I/O and load"),
            "for the tightest tails boot a PREEMPT_RT kernel (e.g. Debian linux-image-rt-amd64)",
        )
    } else {
        finding(
            "kernel",
            Severity::Warning,
            format!("kernel is not preemptible ({v}): long kernel paths delay wake-ups"),
            "boot a PREEMPT or PREEMPT_RT kernel (or `preempt=full` on PREEMPT_DYNAMIC)",
        )
    });
}

fn isolation(m: &AuditInputs, req: &AuditRequest, out: &mut Vec<Finding>) {
    if req.cpus.is_empty() {
        out.push(finding(
            "isolation",
            Severity::Info,
            "no CPU chosen: time-critical threads float and share CPUs with everything".into(),
            "pick a CPU (--cpu N), ideally one isolated from the scheduler",
        ));
        return;
    }
    if let Some(online) = &m.online {
        let off: Vec<usize> = req
            .cpus
            .iter()
            .copied()
            .filter(|c| !online.contains(c))
            .collect();
        if !off.is_empty() {
            out.push(finding(
                "cpu-online",
                Severity::Critical,
                format!(
                    "CPU {} not online (online: {})",
                    cpulist::format(&off),
                    cpulist::format(online)
                ),
                "choose an online CPU (see /sys/devices/system/cpu/online)",
            ));
        }
    }
    if req.cpus.contains(&0) {
        out.push(finding(
            "isolation",
            Severity::Info,
            "CPU 0 chosen: it usually takes most interrupts and housekeeping".into(),
            "prefer another CPU",
        ));
    }
    let isolated = m
        .isolated
        .clone()
        .filter(|v| !v.is_empty())
        .or_else(|| m.cmdline_cpus("isolcpus"))
        .unwrap_or_default();
    let nohz = m
        .nohz_full
        .clone()
        .filter(|v| !v.is_empty())
        .or_else(|| m.cmdline_cpus("nohz_full"))
        .unwrap_or_default();
    let nocbs = m.cmdline_cpus("rcu_nocbs").unwrap_or_default();
    for (what, set, why) in [
        (
            "isolcpus",
            &isolated,
            "the scheduler places other tasks on it",
        ),
        (
            "nohz_full",
            &nohz,
            "the scheduler tick interrupts it every 1-4 ms",
        ),
        ("rcu_nocbs", &nocbs, "RCU callbacks run on it"),
    ] {
        let missing: Vec<usize> = req
            .cpus
            .iter()
            .copied()
            .filter(|c| !set.contains(c))
            .collect();
        let list = cpulist::format(&req.cpus);
        out.push(if missing.is_empty() {
            finding(
                "isolation",
                Severity::Ok,
                format!("CPU {list} in {what}"),
                "",
            )
        } else {
            Finding {
                check: "isolation",
                severity: Severity::Warning,
                message: format!("CPU {} not in {what}: {why}", cpulist::format(&missing)),
                fix: format!(
                    "add `isolcpus={list} nohz_full={list} rcu_nocbs={list}` to the kernel \
                     command line (GRUB_CMDLINE_LINUX) and reboot"
                ),
            }
        });
    }
}

fn chosen_or_all<T: Clone>(items: &[(usize, T)], req: &AuditRequest) -> Vec<(usize, T)> {
    items
        .iter()
        .filter(|(c, _)| req.cpus.is_empty() || req.cpus.contains(c))
        .cloned()
        .collect()
}

fn cstates(m: &AuditInputs, req: &AuditRequest, out: &mut Vec<Finding>) {
    if m.cstates.is_empty() {
        out.push(finding(
            "c-states",
            Severity::Info,
            "no cpuidle states exposed (VM or cpuidle disabled): idle depth is decided \
             elsewhere (hypervisor, firmware)"
                .into(),
            "",
        ));
        return;
    }
    for (cpu, states) in chosen_or_all(&m.cstates, req) {
        let deep: Vec<String> = states
            .iter()
            .filter(|s| !s.disabled && s.latency_us > CSTATE_LATENCY_LIMIT_US)
            .map(|s| format!("{} ({} us)", s.name, s.latency_us))
            .collect();
        out.push(if deep.is_empty() {
            finding(
                "c-states",
                Severity::Ok,
                format!("CPU {cpu}: no enabled idle state exits slower than {CSTATE_LATENCY_LIMIT_US} us"),
                "",
            )
        } else {
            Finding {
                check: "c-states",
                severity: Severity::Warning,
                message: format!("CPU {cpu} may enter deep idle states: {}", deep.join(", ")),
                fix: format!(
                    "`cpupower -c {cpu} idle-set -D {CSTATE_LATENCY_LIMIT_US}`, or hold \
                     /dev/cpu_dma_latency at 0 while running (radiohost rt probe --pm-qos), \
                     or boot with `intel_idle.max_cstate=1 processor.max_cstate=1`"
                ),
            }
        });
    }
}

fn governors(m: &AuditInputs, req: &AuditRequest, out: &mut Vec<Finding>) {
    let chosen = chosen_or_all(&m.governors, req);
    if chosen.is_empty() {
        out.push(finding(
            "cpufreq",
            Severity::Info,
            "no cpufreq governor exposed (VM or fixed frequency)".into(),
            "",
        ));
        return;
    }
    for (cpu, g) in chosen {
        out.push(if g == "performance" {
            finding(
                "cpufreq",
                Severity::Ok,
                format!("CPU {cpu}: governor performance"),
                "",
            )
        } else {
            Finding {
                check: "cpufreq",
                severity: Severity::Warning,
                message: format!(
                    "CPU {cpu}: governor `{g}` ramps the clock up only after load appears"
                ),
                fix: format!("`cpupower -c {cpu} frequency-set -g performance`"),
            }
        });
    }
}

fn limits(m: &AuditInputs, req: &AuditRequest, out: &mut Vec<Finding>) {
    let nice = m.has_cap(CAP_SYS_NICE);
    let ipc = m.has_cap(CAP_IPC_LOCK);
    out.push(finding(
        "capabilities",
        Severity::Info,
        match m.capabilities {
            Some(c) => format!(
                "CapEff {c:016x}: CAP_SYS_NICE {}, CAP_IPC_LOCK {}",
                if nice { "present" } else { "missing" },
                if ipc { "present" } else { "missing" }
            ),
            None => "capabilities unreadable".into(),
        },
        "",
    ));
    let rtprio = m.rlimit_rtprio.and_then(|l| l.soft);
    let rt_text = rtprio.map_or("unlimited".to_string(), |v| v.to_string());
    out.push(
        if nice || rtprio.is_none_or(|v| v >= req.priority.max(0) as u64) {
            finding(
                "rlimit-rtprio",
                Severity::Ok,
                format!(
                    "RLIMIT_RTPRIO {rt_text}{}: priority {} allowed",
                    if nice {
                        " (CAP_SYS_NICE overrides)"
                    } else {
                        ""
                    },
                    req.priority
                ),
                "",
            )
        } else {
            Finding {
                check: "rlimit-rtprio",
                severity: if req.priority > 0 {
                    Severity::Critical
                } else {
                    Severity::Info
                },
                message: format!(
                    "RLIMIT_RTPRIO {rt_text} and no CAP_SYS_NICE: real-time priority above \
                 {rt_text} will be refused"
                ),
                fix: format!(
                    "`ulimit -r {p}`, `@audio - rtprio 95` in /etc/security/limits.conf, \
                 LimitRTPRIO={p} in a systemd unit, or `setcap cap_sys_nice+ep $(which \
                 radiohost)`",
                    p = req.priority.max(1)
                ),
            }
        },
    );
    let memlock = m.rlimit_memlock.and_then(|l| l.soft);
    out.push(if ipc || memlock.is_none() {
        finding(
            "rlimit-memlock",
            Severity::Ok,
            format!(
                "RLIMIT_MEMLOCK {}{}: mlockall allowed",
                memlock.map_or("unlimited".into(), |v| format!("{} KiB", v / 1024)),
                if ipc { " (CAP_IPC_LOCK overrides)" } else { "" }
            ),
            "",
        )
    } else {
        Finding {
            check: "rlimit-memlock",
            severity: if req.lock_memory {
                Severity::Critical
            } else {
                Severity::Info
            },
            message: format!(
                "RLIMIT_MEMLOCK {} KiB and no CAP_IPC_LOCK: memory cannot be locked, page \
                 faults can stall time-critical threads",
                memlock.unwrap_or(0) / 1024
            ),
            fix: "`ulimit -l unlimited`, `@audio - memlock unlimited` in \
                  /etc/security/limits.conf, LimitMEMLOCK=infinity, or `setcap \
                  cap_ipc_lock+ep $(which radiohost)`"
                .into(),
        }
    });
}

fn timer_slack(m: &AuditInputs, req: &AuditRequest, out: &mut Vec<Finding>) {
    let Some(slack) = m.timer_slack_ns else {
        return;
    };
    out.push(if req.priority > 0 || slack <= 1_000 {
        finding(
            "timer-slack",
            Severity::Ok,
            format!(
                "timer slack {} us{}",
                slack / 1000,
                if req.priority > 0 {
                    " (not applied to RT threads)"
                } else {
                    ""
                }
            ),
            "",
        )
    } else {
        finding(
            "timer-slack",
            Severity::Info,
            format!(
                "normal-policy threads wake up to {} us after their deadline (timer slack); \
                 RT policies get none",
                slack / 1000
            ),
            "use an RT policy, or prctl(PR_SET_TIMERSLACK, 1) in the thread",
        )
    });
}

fn tai(m: &AuditInputs, out: &mut Vec<Finding>) {
    out.push(if m.tai_offset_s == 0 {
        finding(
            "tai-offset",
            Severity::Info,
            "kernel TAI offset is 0: CLOCK_TAI equals UTC, so TAI timestamps are ~37 s off \
             those of PTP-disciplined radios"
                .into(),
            "let chrony (`leapsectz right/UTC`) or ptp4l/phc2sys set the offset",
        )
    } else {
        finding(
            "tai-offset",
            Severity::Ok,
            format!("TAI = UTC + {} s", m.tai_offset_s),
            "",
        )
    });
}

/// Worst severity among findings.
pub fn worst(findings: &[Finding]) -> Severity {
    findings
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Ok)
}
