//! The report of `ThreadConfig::apply` must say exactly what the kernel did:
//! every test reads policy, priority and affinity back with raw libc calls
//! (not the crate's wrappers) and checks them against the report, whatever
//! the outcome on this machine (granted as root, refused elsewhere).
//!
//! Refusals are provoked even as root by dropping a capability from the
//! *thread's* effective set (capabilities are per thread on Linux).

use radiohost_rt::{Outcome, Policy, RtThreadBuilder, SpawnError, Step, ThreadConfig};

fn kernel_scheduling() -> (i32, i32) {
    unsafe {
        let policy = libc::sched_getscheduler(0) & !0x4000_0000;
        let mut p = libc::sched_param { sched_priority: -1 };
        assert_eq!(libc::sched_getparam(0, &mut p), 0);
        (policy, p.sched_priority)
    }
}

fn kernel_affinity() -> Vec<usize> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn vm_locked_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Removes `cap` from the calling thread's effective set (v3 capset).
fn drop_effective_cap(cap: u32) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    unsafe {
        assert_eq!(libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()), 0);
        d[(cap / 32) as usize].effective &= !(1 << (cap % 32));
        assert_eq!(libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()), 0);
    }
}

/// The core property: what the report claims equals what the kernel says.
fn check_truthful(cfg: &ThreadConfig) -> radiohost_rt::ApplyReport {
    let report = cfg.apply().expect("valid config");
    let (policy, priority) = kernel_scheduling();
    let cpus = kernel_affinity();
    assert_eq!(report.after.policy_raw, policy);
    assert_eq!(report.after.priority, priority);
    assert_eq!(report.after.cpus, cpus);
    assert_eq!(report.thread_id, unsafe { libc::gettid() });
    match report.outcome(Step::Scheduling) {
        Outcome::Applied { .. } => {
            assert_eq!((policy, priority), (cfg.policy.to_raw(), cfg.priority))
        }
        Outcome::Refused { reason, fix } => {
            assert_eq!(
                (policy, priority),
                (report.before.policy_raw, report.before.priority)
            );
            assert!(!reason.is_empty() && (fix.contains("RTPRIO") || fix.contains("cgroup")));
        }
        other => panic!("unexpected scheduling outcome {other:?}"),
    }
    match (report.outcome(Step::Affinity), &cfg.cpus) {
        (Outcome::NotRequested, None) => assert_eq!(cpus, report.before.cpus),
        (Outcome::Applied { .. }, Some(want)) => {
            let mut want = want.clone();
            want.sort_unstable();
            want.dedup();
            assert_eq!(cpus, want);
        }
        (Outcome::Degraded { .. }, Some(want)) => {
            assert!(cpus.iter().all(|c| want.contains(c)));
            assert_ne!(&cpus, want);
        }
        (Outcome::Refused { .. }, Some(_)) => assert_eq!(cpus, report.before.cpus),
        other => panic!("affinity outcome {other:?} does not fit the request"),
    }
    match report.outcome(Step::LockMemory) {
        Outcome::Applied { .. } => assert!(vm_locked_kib() > 0),
        Outcome::NotRequested => assert!(!cfg.lock_memory),
        Outcome::Refused { fix, .. } => assert!(fix.contains("memlock")),
        other => panic!("lock outcome {other:?}"),
    }
    if cfg.prefault_stack_bytes == 0 {
        assert_eq!(report.outcome(Step::PrefaultStack), &Outcome::NotRequested);
    }
    assert_eq!(
        report.fully_applied(),
        report.problems().next().is_none(),
        "fully_applied and problems disagree"
    );
    report
}

fn in_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(4 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn some_allowed_cpu() -> usize {
    *kernel_affinity().last().unwrap()
}

#[test]
fn realtime_config_is_reported_truthfully() {
    let cpu = some_allowed_cpu();
    in_thread(move || {
        for (policy, prio) in [(Policy::Fifo, 10), (Policy::Rr, 5), (Policy::Other, 0)] {
            let cfg = ThreadConfig {
                policy,
                priority: prio,
                cpus: Some(vec![cpu]),
                lock_memory: policy == Policy::Fifo,
                prefault_stack_bytes: 128 * 1024,
            };
            let report = check_truthful(&cfg);
            // Prefault either ran and was verified resident, or says why not.
            assert_ne!(report.outcome(Step::PrefaultStack), &Outcome::NotRequested);
        }
    });
}

#[test]
fn refused_priority_leaves_the_thread_unchanged_and_says_why() {
    in_thread(|| {
        drop_effective_cap(23); // CAP_SYS_NICE
        let report = check_truthful(&ThreadConfig {
            policy: Policy::Fifo,
            priority: 50,
            ..ThreadConfig::default()
        });
        let rtprio = unsafe {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_RTPRIO, &mut l);
            l.rlim_cur
        };
        if rtprio < 50 {
            match report.outcome(Step::Scheduling) {
                Outcome::Refused { reason, .. } => {
                    assert!(reason.contains("RLIMIT_RTPRIO"), "{reason}");
                    assert!(reason.contains("CAP_SYS_NICE is missing"), "{reason}");
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
            assert!(!report.fully_applied());
        }
    });
}

#[test]
fn memory_lock_without_capability_is_refused_up_front_when_limited() {
    in_thread(|| {
        drop_effective_cap(14); // CAP_IPC_LOCK
        let limited = unsafe {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut l);
            l.rlim_cur != libc::RLIM_INFINITY
        };
        let report = check_truthful(&ThreadConfig {
            lock_memory: true,
            ..ThreadConfig::default()
        });
        if limited {
            assert!(matches!(
                report.outcome(Step::LockMemory),
                Outcome::Refused { reason, .. } if reason.contains("RLIMIT_MEMLOCK")
            ));
        }
    });
}

#[test]
fn cpus_outside_the_allowed_set_are_refused_or_degraded() {
    let allowed = kernel_affinity();
    in_thread(move || {
        // Only a CPU that cannot exist here: refused, affinity untouched.
        let report = check_truthful(&ThreadConfig::default().pinned(vec![1023]));
        assert!(matches!(
            report.outcome(Step::Affinity),
            Outcome::Refused { .. }
        ));
        // One real CPU plus one impossible: the kernel grants the real one.
        let report = check_truthful(&ThreadConfig::default().pinned(vec![allowed[0], 1023]));
        assert!(matches!(
            report.outcome(Step::Affinity),
            Outcome::Degraded { .. }
        ));
        assert_eq!(report.after.cpus, vec![allowed[0]]);
    });
}

#[test]
fn prefault_larger_than_the_stack_is_refused() {
    let t = RtThreadBuilder::new("small-stack")
        .config(ThreadConfig {
            prefault_stack_bytes: 4 << 20,
            ..ThreadConfig::default()
        })
        .stack_size(256 * 1024)
        .spawn(|r| r.outcome(Step::PrefaultStack).clone())
        .unwrap();
    assert!(
        matches!(t.join().unwrap(), Outcome::Refused { reason, .. } if reason.contains("stack"))
    );
}

#[test]
fn spawn_reports_before_running_and_can_require_everything() {
    let cpu = some_allowed_cpu();
    let t = RtThreadBuilder::new("configured")
        .config(ThreadConfig::default().pinned(vec![cpu]))
        .spawn(|report| (report.clone(), kernel_affinity()))
        .unwrap();
    let seen_by_caller = t.report().clone();
    let (seen_by_body, affinity) = t.join().unwrap();
    assert_eq!(seen_by_caller, seen_by_body);
    assert_eq!(affinity, vec![cpu]);

    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ran.clone();
    let err = RtThreadBuilder::new("strict")
        .config(ThreadConfig::default().pinned(vec![1023]))
        .require_fully_applied(true)
        .spawn(move |_| flag.store(true, std::sync::atomic::Ordering::SeqCst))
        .unwrap_err();
    assert!(matches!(err, SpawnError::NotApplied { .. }));
    assert!(err.to_string().contains("REFUSED"));
    assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));

    let err = RtThreadBuilder::new("bad")
        .config(ThreadConfig::realtime(500))
        .spawn(|_| ())
        .unwrap_err();
    assert!(matches!(err, SpawnError::Config(_)));
}

#[test]
fn probe_rows_name_the_policy_the_kernel_granted() {
    use radiohost_rt::probe::timer::TimerProbe;
    use radiohost_rt::probe::{effective_policy_label, ProbeControl};
    in_thread(|| {
        // Threads inherit the creator's capabilities: the probe thread spawned
        // from here has no CAP_SYS_NICE either.
        drop_effective_cap(23);
        let probe = TimerProbe {
            thread: ThreadConfig {
                policy: Policy::Fifo,
                priority: 60,
                ..ThreadConfig::default()
            },
            interval: std::time::Duration::from_micros(200),
            samples: 5,
            clock: radiohost_rt::ClockId::Monotonic,
        };
        let run = probe.run(&ProbeControl::default()).unwrap();
        assert_eq!(run.histogram.len(), 5);
        let label = effective_policy_label(&run.report);
        match run.report.outcome(Step::Scheduling) {
            Outcome::Applied { .. } => assert_eq!(label, "fifo:60"),
            Outcome::Refused { .. } => assert_eq!(label, "other"),
            other => panic!("unexpected {other:?}"),
        }
    });
}
