//! The individual steps of `ThreadConfig::apply`, each returning an
//! [`Outcome`] decided by reading the kernel's state back, with the reason and
//! fix when it refuses.

use std::io;

use crate::config::{Observed, Outcome, Policy};
use crate::{cpulist, sys};

/// Margin of stack left untouched below a prefault, for the calls that follow.
const STACK_MARGIN: usize = 64 * 1024;

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

fn limit_text(v: Option<u64>, unit_bytes: bool) -> String {
    match v {
        None => "unlimited".to_string(),
        Some(v) if unit_bytes => kib(v),
        Some(v) => v.to_string(),
    }
}

pub(crate) fn lock_memory(requested: bool) -> Outcome {
    if !requested {
        return Outcome::NotRequested;
    }
    let has_cap = sys::has_capability(sys::CAP_IPC_LOCK);
    let limit = sys::rlimit_memlock().ok();
    let fix = "raise the limit: `ulimit -l unlimited` in the launching shell, `memlock` \
               in /etc/security/limits.conf (e.g. `@audio - memlock unlimited`), \
               `LimitMEMLOCK=infinity` in a systemd unit, or grant CAP_IPC_LOCK \
               (`setcap cap_ipc_lock+ep $(which radiohost)`)";
    // With MCL_FUTURE and a finite limit, later allocations fail once the
    // limit is reached (the process would abort on OOM): refuse up front.
    if !has_cap {
        if let Some(Some(soft)) = limit.map(|l| l.soft) {
            return Outcome::Refused {
                reason: format!(
                    "RLIMIT_MEMLOCK is {} and CAP_IPC_LOCK is missing: locking all current \
                     and future memory would make allocations fail once {} are locked",
                    kib(soft),
                    kib(soft)
                ),
                fix: fix.to_string(),
            };
        }
    }
    match sys::lock_all_memory() {
        Ok(()) => Outcome::Applied {
            detail: format!(
                "mlockall(current|future), process VmLck now {} KiB",
                sys::vm_locked_kib()
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "?".into())
            ),
        },
        Err(e) => Outcome::Refused {
            reason: format!(
                "mlockall failed: {e} (RLIMIT_MEMLOCK soft {}, CAP_IPC_LOCK {})",
                limit_text(limit.and_then(|l| l.soft), true),
                if has_cap { "present" } else { "missing" }
            ),
            fix: fix.to_string(),
        },
    }
}

pub(crate) fn affinity(cpus: Option<&[usize]>) -> Outcome {
    let Some(requested) = cpus else {
        return Outcome::NotRequested;
    };
    let mut requested = requested.to_vec();
    requested.sort_unstable();
    requested.dedup();
    let allowed_before = sys::current_affinity().unwrap_or_default();
    let cpuset_fix = "choose CPUs from the allowed set, or widen it: the process's cpuset \
                      cgroup (`cat /proc/self/cpuset`, systemd `AllowedCPUs=`), `taskset` \
                      of the parent, or bring the CPU online \
                      (`echo 1 > /sys/devices/system/cpu/cpuN/online`)";
    let online = sys::online_cpus();
    let why_not = |cpus: &[usize]| {
        format!(
            "allowed set of this thread is {}, CPUs online are {}; the kernel only grants \
             CPUs that are online and in the process's cpuset",
            cpulist::format(&allowed_before),
            online
                .as_deref()
                .map(cpulist::format)
                .unwrap_or_else(|| "unknown".into())
        ) + &if cpus.is_empty() {
            String::new()
        } else {
            format!(" (not granted: {})", cpulist::format(cpus))
        }
    };
    if let Err(e) = sys::set_affinity(&requested) {
        return Outcome::Refused {
            reason: format!(
                "sched_setaffinity({}) failed: {e}; {}",
                cpulist::format(&requested),
                why_not(&[])
            ),
            fix: cpuset_fix.to_string(),
        };
    }
    let got = sys::current_affinity().unwrap_or_default();
    if got == requested {
        Outcome::Applied {
            detail: format!("pinned to CPUs {}", cpulist::format(&got)),
        }
    } else {
        let missing: Vec<usize> = requested
            .iter()
            .copied()
            .filter(|c| !got.contains(c))
            .collect();
        Outcome::Degraded {
            detail: format!(
                "running on CPUs {} (asked {})",
                cpulist::format(&got),
                cpulist::format(&requested)
            ),
            reason: why_not(&missing),
            fix: cpuset_fix.to_string(),
        }
    }
}

fn scheduling_refusal(policy: Policy, priority: i32, err: &io::Error) -> Outcome {
    let rtprio = sys::rlimit_rtprio().ok();
    let has_cap = sys::has_capability(sys::CAP_SYS_NICE);
    let soft = rtprio.and_then(|l| l.soft);
    let reason = if err.raw_os_error() == Some(libc::EPERM) && has_cap {
        format!(
            "sched_setscheduler({policy}, {priority}) failed: {err}, although CAP_SYS_NICE is \
             present: the process's cgroup probably has no real-time budget \
             (cpu.rt_runtime_us = 0 with CONFIG_RT_GROUP_SCHED)"
        )
    } else {
        format!(
            "sched_setscheduler({policy}, {priority}) failed: {err}; RLIMIT_RTPRIO is {} and \
             CAP_SYS_NICE is {}",
            limit_text(soft, false),
            if has_cap { "present" } else { "missing" }
        )
    };
    let fix = if err.raw_os_error() == Some(libc::EPERM) && has_cap {
        "give the cgroup a real-time budget (e.g. `echo 950000 > \
         /sys/fs/cgroup/cpu/<group>/cpu.rt_runtime_us`) or run outside it"
            .to_string()
    } else {
        format!(
            "raise RLIMIT_RTPRIO to at least {priority}: `ulimit -r {priority}` (hard limit \
             permitting), `@audio - rtprio 95` in /etc/security/limits.conf, \
             `LimitRTPRIO={priority}` in a systemd unit, or grant CAP_SYS_NICE \
             (`setcap cap_sys_nice+ep $(which radiohost)`)"
        )
    };
    Outcome::Refused { reason, fix }
}

pub(crate) fn scheduling(policy: Policy, priority: i32, before: &Observed) -> Outcome {
    if before.policy == Some(policy) && before.priority == priority {
        return Outcome::Applied {
            detail: format!("{policy} priority {priority} (already in effect)"),
        };
    }
    if let Err(e) = sys::set_scheduling(policy.to_raw(), priority) {
        return scheduling_refusal(policy, priority, &e);
    }
    match sys::current_scheduling() {
        Ok((raw, prio)) if raw == policy.to_raw() && prio == priority => Outcome::Applied {
            detail: format!("{policy} priority {priority}"),
        },
        Ok((raw, prio)) => Outcome::Degraded {
            detail: format!(
                "kernel reports policy {} priority {prio}",
                Policy::from_raw(raw)
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| raw.to_string())
            ),
            reason: "sched_setscheduler succeeded but the read-back differs (another \
                     process changed this thread?)"
                .into(),
            fix: "check for tools that manage priorities (rtkit, tuned, irqbalance scripts)".into(),
        },
        Err(e) => Outcome::Degraded {
            detail: "unknown".into(),
            reason: format!("sched_getscheduler failed after setting: {e}"),
            fix: "none known; please report".into(),
        },
    }
}

/// Recursion with one page-sized frame per level. `black_box` keeps each frame
/// and its zeroing; the addition after the call prevents tail-call reuse.
#[inline(never)]
fn touch_stack(frames: usize) -> u8 {
    let mut page = [0u8; 4096];
    std::hint::black_box(&mut page);
    if frames > 1 {
        page[frames % 4096].wrapping_add(touch_stack(frames - 1))
    } else {
        page[0]
    }
}

pub(crate) fn prefault_stack(bytes: usize) -> Outcome {
    if bytes == 0 {
        return Outcome::NotRequested;
    }
    let marker = 0u8;
    let sp = std::hint::black_box(&marker) as *const u8 as usize;
    let fix = "spawn the thread with a larger stack (`RtThread::builder(..).stack_size(..)`; \
               spawn_configured sizes it from prefault_stack_bytes) or prefault less";
    let (stack_lo, stack_size) = match sys::current_stack() {
        Ok(s) => s,
        Err(e) => {
            return Outcome::Refused {
                reason: format!("cannot find this thread's stack bounds: {e}"),
                fix: fix.into(),
            }
        }
    };
    let available = sp.saturating_sub(stack_lo);
    if sp > stack_lo + stack_size || bytes + STACK_MARGIN > available {
        return Outcome::Refused {
            reason: format!(
                "asked to prefault {} but only {} of stack remain below the current frame \
                 (stack size {}; {} kept as margin)",
                kib(bytes as u64),
                kib(available as u64),
                kib(stack_size as u64),
                kib(STACK_MARGIN as u64)
            ),
            fix: fix.into(),
        };
    }
    let page = sys::page_size();
    std::hint::black_box(touch_stack(bytes.div_ceil(4096)));
    // Verify with mincore over the whole pages strictly below our frame.
    let top = sp / page * page;
    let lo = top.saturating_sub(bytes.div_ceil(page) * page);
    match sys::resident_pages(lo, top - lo) {
        Ok(resident) => {
            let pages = (top - lo) / page;
            // Frames may be slightly smaller than a page (the compiler may
            // overlap the last locals), so allow the final two pages to miss.
            if resident + 2 >= pages {
                Outcome::Applied {
                    detail: format!(
                        "{} of stack resident ({resident}/{pages} pages)",
                        kib(bytes as u64)
                    ),
                }
            } else {
                Outcome::Degraded {
                    detail: format!("only {resident} of {pages} stack pages resident"),
                    reason: "the kernel reclaimed touched stack pages (memory not locked?)".into(),
                    fix: "also set lock_memory so touched pages stay resident".into(),
                }
            }
        }
        Err(e) => Outcome::Degraded {
            detail: "stack touched; residency unknown".into(),
            reason: format!("mincore failed: {e}"),
            fix: "none needed unless the stack faults later".into(),
        },
    }
}
