//! Thread configuration for time-critical threads and the report of what the
//! kernel actually granted.
//!
//! `apply()` never fails because of missing privileges: each step is tried, its
//! outcome is read back from the kernel, and a refusal comes with the reason
//! and the fix. Only an impossible configuration (priority 150, CPU 5000) is an
//! error, and it is caught before anything changes.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::{cpulist, sys};

/// Scheduling policy of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// `SCHED_FIFO`: real-time, runs until it blocks or a higher priority wakes.
    Fifo,
    /// `SCHED_RR`: real-time with a time slice among equal priorities.
    Rr,
    /// `SCHED_OTHER`: the normal fair scheduler.
    Other,
    /// `SCHED_BATCH` (only ever observed, e.g. on a thread we did not configure).
    Batch,
    /// `SCHED_IDLE` (only ever observed).
    Idle,
}

impl Policy {
    /// The kernel's number for this policy.
    pub fn to_raw(self) -> i32 {
        match self {
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Other => libc::SCHED_OTHER,
            Policy::Batch => libc::SCHED_BATCH,
            Policy::Idle => libc::SCHED_IDLE,
        }
    }

    /// The policy for a kernel number, if it is one of ours.
    pub fn from_raw(raw: i32) -> Option<Policy> {
        [
            Policy::Fifo,
            Policy::Rr,
            Policy::Other,
            Policy::Batch,
            Policy::Idle,
        ]
        .into_iter()
        .find(|p| p.to_raw() == raw)
    }

    /// Whether this is a real-time policy (priority 1..=99).
    pub fn is_realtime(self) -> bool {
        matches!(self, Policy::Fifo | Policy::Rr)
    }

    /// Short lowercase name, as used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
            Policy::Batch => "batch",
            Policy::Idle => "idle",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a time-critical thread should run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadConfig {
    /// Scheduling policy.
    pub policy: Policy,
    /// Static priority: 1..=99 for FIFO/RR, 0 otherwise.
    pub priority: i32,
    /// CPUs to pin to; `None` leaves affinity alone.
    pub cpus: Option<Vec<usize>>,
    /// Lock all current and future memory of the *process* (`mlockall`), so
    /// page faults cannot stall the thread.
    pub lock_memory: bool,
    /// Bytes of this thread's stack to touch up front (0 = none), so its first
    /// deep call does not page-fault.
    pub prefault_stack_bytes: usize,
}

impl Default for ThreadConfig {
    /// Normal scheduling, no pinning, no locking: changes nothing.
    fn default() -> Self {
        ThreadConfig {
            policy: Policy::Other,
            priority: 0,
            cpus: None,
            lock_memory: false,
            prefault_stack_bytes: 0,
        }
    }
}

/// Stack prefault used by [`ThreadConfig::realtime`].
pub const DEFAULT_PREFAULT_BYTES: usize = 256 * 1024;

impl ThreadConfig {
    /// The usual setup for a time-critical thread: FIFO at `priority`, memory
    /// locked, 256 KiB of stack prefaulted.
    pub fn realtime(priority: i32) -> Self {
        ThreadConfig {
            policy: Policy::Fifo,
            priority,
            cpus: None,
            lock_memory: true,
            prefault_stack_bytes: DEFAULT_PREFAULT_BYTES,
        }
    }

    /// Same configuration pinned to `cpus`.
    pub fn pinned(mut self, cpus: impl Into<Vec<usize>>) -> Self {
        self.cpus = Some(cpus.into());
        self
    }

    /// Checks the configuration is possible at all (independent of privileges).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if matches!(self.policy, Policy::Batch | Policy::Idle) && self.priority != 0 {
            return Err(ConfigError::Priority {
                policy: self.policy,
                priority: self.priority,
                min: 0,
                max: 0,
            });
        }
        let (min, max) =
            sys::priority_range(self.policy.to_raw()).unwrap_or(if self.policy.is_realtime() {
                (1, 99)
            } else {
                (0, 0)
            });
        if self.priority < min || self.priority > max {
            return Err(ConfigError::Priority {
                policy: self.policy,
                priority: self.priority,
                min,
                max,
            });
        }
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return Err(ConfigError::NoCpus);
            }
            if let Some(&bad) = cpus.iter().find(|&&c| c >= sys::MAX_CPUS) {
                return Err(ConfigError::CpuOutOfRange(bad));
            }
        }
        Ok(())
    }

    /// Applies the configuration to the calling thread and reports each step.
    ///
    /// Order: memory lock, affinity, scheduling, stack prefault — pin before
    /// raising priority so the thread never runs at RT priority on a CPU it
    /// should not use, and prefault last so the pages land on the final CPU's
    /// node and are locked.
    pub fn apply(&self) -> Result<ApplyReport, ConfigError> {
        self.validate()?;
        let before = Observed::read();
        let steps = vec![
            StepReport {
                step: Step::LockMemory,
                outcome: crate::apply_steps::lock_memory(self.lock_memory),
            },
            StepReport {
                step: Step::Affinity,
                outcome: crate::apply_steps::affinity(self.cpus.as_deref()),
            },
            StepReport {
                step: Step::Scheduling,
                outcome: crate::apply_steps::scheduling(self.policy, self.priority, &before),
            },
            StepReport {
                step: Step::PrefaultStack,
                outcome: crate::apply_steps::prefault_stack(self.prefault_stack_bytes),
            },
        ];
        let report = ApplyReport {
            config: self.clone(),
            thread_id: sys::gettid(),
            before,
            after: Observed::read(),
            steps,
        };
        for step in &report.steps {
            match &step.outcome {
                Outcome::Refused { reason, .. } => {
                    tracing::warn!(step = %step.step, %reason, "real-time setup refused")
                }
                Outcome::Degraded { reason, .. } => {
                    tracing::warn!(step = %step.step, %reason, "real-time setup degraded")
                }
                _ => {}
            }
        }
        Ok(report)
    }
}

/// A configuration that cannot be applied on any machine.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// Priority outside the policy's range.
    #[error("priority {priority} is invalid for policy {policy} (valid: {min}..={max})")]
    Priority {
        /// Requested policy.
        policy: Policy,
        /// Requested priority.
        priority: i32,
        /// Lowest valid priority.
        min: i32,
        /// Highest valid priority.
        max: i32,
    },
    /// `cpus: Some(vec![])`.
    #[error("the CPU set is empty: give at least one CPU or leave affinity unset")]
    NoCpus,
    /// CPU index Linux cannot address.
    #[error("CPU {0} is beyond the largest CPU index Linux supports ({max})", max = sys::MAX_CPUS - 1)]
    CpuOutOfRange(usize),
}

/// One step of [`ThreadConfig::apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `mlockall(MCL_CURRENT | MCL_FUTURE)`.
    LockMemory,
    /// `sched_setaffinity`.
    Affinity,
    /// `sched_setscheduler`.
    Scheduling,
    /// Touching the stack.
    PrefaultStack,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // pad() so `{:<15}` aligns tables.
        f.pad(match self {
            Step::LockMemory => "lock memory",
            Step::Affinity => "cpu affinity",
            Step::Scheduling => "scheduling",
            Step::PrefaultStack => "prefault stack",
        })
    }
}

/// What happened to one step. Every claim is based on a kernel read-back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The configuration did not ask for this step.
    NotRequested,
    /// Done, and the read-back shows it.
    Applied {
        /// What is now in effect.
        detail: String,
    },
    /// Partly done: the kernel granted less than asked.
    Degraded {
        /// What is now in effect.
        detail: String,
        /// Why it is less than asked.
        reason: String,
        /// How to get the full request.
        fix: String,
    },
    /// Not done; the thread is as it was for this aspect.
    Refused {
        /// Why.
        reason: String,
        /// How to grant it.
        fix: String,
    },
}

impl Outcome {
    /// Short label: `applied`, `degraded`, `refused`, `-`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::NotRequested => "-",
            Outcome::Applied { .. } => "applied",
            Outcome::Degraded { .. } => "degraded",
            Outcome::Refused { .. } => "refused",
        }
    }
}

/// Kernel's view of the calling thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Observed {
    /// Policy number as the kernel reports it.
    pub policy_raw: i32,
    /// The same as a [`Policy`], when it is one.
    pub policy: Option<Policy>,
    /// Static priority.
    pub priority: i32,
    /// CPUs the thread may run on.
    pub cpus: Vec<usize>,
    /// Locked memory of the process (`VmLck`), KiB.
    pub vm_locked_kib: Option<u64>,
}

impl Observed {
    /// Reads the calling thread's state from the kernel.
    pub fn read() -> Observed {
        let (policy_raw, priority) = sys::current_scheduling().unwrap_or((-1, -1));
        Observed {
            policy_raw,
            policy: Policy::from_raw(policy_raw),
            priority,
            cpus: sys::current_affinity().unwrap_or_default(),
            vm_locked_kib: sys::vm_locked_kib(),
        }
    }
}

/// Result of [`ThreadConfig::apply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// What was asked.
    pub config: ThreadConfig,
    /// Kernel thread id the configuration was applied to.
    pub thread_id: i32,
    /// Thread state before.
    pub before: Observed,
    /// Thread state after, read back from the kernel.
    pub after: Observed,
    /// Outcome per step, in the order they ran.
    pub steps: Vec<StepReport>,
}

/// One step and its outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Which step.
    pub step: Step,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl ApplyReport {
    /// Outcome of one step.
    pub fn outcome(&self, step: Step) -> &Outcome {
        self.steps
            .iter()
            .find(|s| s.step == step)
            .map(|s| &s.outcome)
            .unwrap_or(&Outcome::NotRequested)
    }

    /// True when every requested step was fully applied.
    pub fn fully_applied(&self) -> bool {
        self.steps
            .iter()
            .all(|s| matches!(s.outcome, Outcome::NotRequested | Outcome::Applied { .. }))
    }

    /// Steps that were refused or degraded.
    pub fn problems(&self) -> impl Iterator<Item = &StepReport> {
        self.steps.iter().filter(|s| {
            matches!(
                s.outcome,
                Outcome::Refused { .. } | Outcome::Degraded { .. }
            )
        })
    }

    /// One-line summary of what is in effect, e.g. `fifo:80 cpus=1 mlocked`.
    pub fn summary(&self) -> String {
        let policy = self
            .after
            .policy
            .map(|p| p.to_string())
            .unwrap_or_else(|| format!("policy#{}", self.after.policy_raw));
        let mut s = format!(
            "{policy}:{} cpus={}",
            self.after.priority,
            cpulist::format(&self.after.cpus)
        );
        if matches!(self.outcome(Step::LockMemory), Outcome::Applied { .. }) {
            s.push_str(" mlocked");
        }
        if let Outcome::Applied { .. } = self.outcome(Step::PrefaultStack) {
            s.push_str(&format!(
                " stack+{}KiB",
                self.config.prefault_stack_bytes / 1024
            ));
        }
        s
    }
}

impl fmt::Display for ApplyReport {
    /// Human table: one line per step, then reason and fix of each problem.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "thread {}: {}", self.thread_id, self.summary())?;
        for s in &self.steps {
            match &s.outcome {
                Outcome::NotRequested => writeln!(f, "  {:<15} not requested", s.step)?,
                Outcome::Applied { detail } => writeln!(f, "  {:<15} applied   {detail}", s.step)?,
                Outcome::Degraded {
                    detail,
                    reason,
                    fix,
                } => {
                    writeln!(f, "  {:<15} DEGRADED  {detail}", s.step)?;
                    writeln!(f, "  {:<15}   why: {reason}", "")?;
                    writeln!(f, "  {:<15}   fix: {fix}", "")?;
                }
                Outcome::Refused { reason, fix } => {
                    writeln!(f, "  {:<15} REFUSED", s.step)?;
                    writeln!(f, "  {:<15}   why: {reason}", "")?;
                    writeln!(f, "  {:<15}   fix: {fix}", "")?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_round_trips() {
        for p in [
            Policy::Fifo,
            Policy::Rr,
            Policy::Other,
            Policy::Batch,
            Policy::Idle,
        ] {
            assert_eq!(Policy::from_raw(p.to_raw()), Some(p));
        }
        assert_eq!(Policy::from_raw(6), None); // SCHED_DEADLINE is not ours
    }

    #[test]
    fn impossible_configs_are_errors() {
        let mut c = ThreadConfig::realtime(0);
        assert!(matches!(c.validate(), Err(ConfigError::Priority { .. })));
        c.priority = 100;
        assert!(matches!(c.apply(), Err(ConfigError::Priority { .. })));
        let c = ThreadConfig {
            priority: 5,
            ..ThreadConfig::default()
        };
        assert!(c.validate().is_err());
        let c = ThreadConfig::default().pinned(vec![]);
        assert_eq!(c.validate(), Err(ConfigError::NoCpus));
        let c = ThreadConfig::default().pinned(vec![0, 4096]);
        assert_eq!(c.validate(), Err(ConfigError::CpuOutOfRange(4096)));
        assert!(ThreadConfig::realtime(80).validate().is_ok());
    }

    #[test]
    fn default_config_changes_nothing() {
        let report = std::thread::spawn(|| ThreadConfig::default().apply().unwrap())
            .join()
            .unwrap();
        assert!(report.fully_applied());
        assert_eq!(report.before.cpus, report.after.cpus);
        assert_eq!(report.after.policy, Some(Policy::Other));
        assert_eq!(report.outcome(Step::Affinity), &Outcome::NotRequested);
    }
}
