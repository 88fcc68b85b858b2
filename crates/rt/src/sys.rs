//! Thin, safe wrappers over the Linux calls the rest of the crate needs.
//!
//! Every call here acts on the *calling thread* (Linux scheduling calls take a
//! thread id; 0 means "me"), returns `io::Result`, and never panics.

use std::io;
use std::mem::MaybeUninit;

use crate::cpulist;

/// Linux's `SCHED_RESET_ON_FORK` flag, OR-ed into the policy that
/// `sched_getscheduler` returns when set.
const SCHED_RESET_ON_FORK: i32 = 0x4000_0000;

/// Largest CPU index a `cpu_set_t` can hold.
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Linux capability numbers used by the checks.
pub const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_NICE`: lets a thread raise its priority past `RLIMIT_RTPRIO`.
pub const CAP_SYS_NICE: u32 = 23;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Scheduling policy (raw, with the reset-on-fork flag removed) and static
/// priority of the calling thread, as the kernel reports them.
pub fn current_scheduling() -> io::Result<(i32, i32)> {
    // SAFETY: plain syscalls on the calling thread; `param` is a valid out-pointer.
    unsafe {
        let policy = check(libc::sched_getscheduler(0))? & !SCHED_RESET_ON_FORK;
        let mut param = MaybeUninit::<libc::sched_param>::zeroed();
        check(libc::sched_getparam(0, param.as_mut_ptr()))?;
        Ok((policy, param.assume_init().sched_priority))
    }
}

/// Sets policy and priority of the calling thread.
pub fn set_scheduling(policy: i32, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` lives across the call; 0 = calling thread.
    check(unsafe { libc::sched_setscheduler(0, policy, &param) }).map(|_| ())
}

/// Valid static priority range for a raw policy.
pub fn priority_range(policy: i32) -> io::Result<(i32, i32)> {
    // SAFETY: pure queries.
    unsafe {
        Ok((
            check(libc::sched_get_priority_min(policy))?,
            check(libc::sched_get_priority_max(policy))?,
        ))
    }
}

/// CPUs the calling thread may run on, ascending.
pub fn current_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: `set` is a correctly sized, zeroed cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        check(libc::sched_getaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ))?;
        Ok((0..MAX_CPUS)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Why [`single_cpu`] found no one CPU to run a comparison on.
#[derive(Debug, thiserror::Error)]
pub enum SingleCpuError {
    #[error("{0} CPUs given: name exactly one (--cpu N) so both tools run on the same one")]
    NotOne(usize),
    #[error("this process may run on no CPU")]
    NoCpu,
    #[error("reading this process's CPU affinity: {0}")]
    Affinity(#[from] io::Error),
}

/// The one CPU a side-by-side comparison pins both tools to: `requested` when
/// it names exactly one, else the last CPU this process may run on (CPU 0
/// takes most of the kernel's housekeeping).
pub fn single_cpu(requested: Option<&[usize]>) -> Result<usize, SingleCpuError> {
    match requested {
        Some([cpu]) => Ok(*cpu),
        Some(cpus) => Err(SingleCpuError::NotOne(cpus.len())),
        None => current_affinity()?
            .last()
            .copied()
            .ok_or(SingleCpuError::NoCpu),
    }
}

/// Pins the calling thread to `cpus` (each must be `< MAX_CPUS`; the caller validates).
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: indices are bounded by MAX_CPUS (checked below), `set` is valid.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c >= MAX_CPUS {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            libc::CPU_SET(c, &mut set);
        }
        check(libc::sched_setaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        ))
        .map(|_| ())
    }
}

/// A resource limit; `None` means unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Rlimit {
    /// Soft limit (the one enforced), `None` = unlimited.
    pub soft: Option<u64>,
    /// Hard limit (ceiling for raising the soft one without privilege).
    pub hard: Option<u64>,
}

fn rlimit(resource: libc::__rlimit_resource_t) -> io::Result<Rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer.
    check(unsafe { libc::getrlimit(resource, &mut lim) })?;
    let conv = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Ok(Rlimit {
        soft: conv(lim.rlim_cur),
        hard: conv(lim.rlim_max),
    })
}

/// `RLIMIT_RTPRIO`: highest real-time priority an unprivileged thread may take.
pub fn rlimit_rtprio() -> io::Result<Rlimit> {
    rlimit(libc::RLIMIT_RTPRIO)
}

/// `RLIMIT_MEMLOCK` in bytes.
pub fn rlimit_memlock() -> io::Result<Rlimit> {
    rlimit(libc::RLIMIT_MEMLOCK)
}

/// Reads the calling *thread's* status (capabilities are per thread; VmLck
/// and the other memory fields are per process either way).
pub fn proc_self_status() -> io::Result<String> {
    std::fs::read_to_string("/proc/thread-self/status")
        .or_else(|_| std::fs::read_to_string("/proc/self/status"))
}

/// Looks up a `Key:\tvalue` field of a `/proc/<pid>/status` text.
pub fn status_field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// Effective capability bitmask (`CapEff`) from a status text.
pub fn effective_caps(status: &str) -> Option<u64> {
    u64::from_str_radix(status_field(status, "CapEff")?, 16).ok()
}

/// Whether the calling thread has capability `cap` in its effective set.
pub fn has_capability(cap: u32) -> bool {
    proc_self_status()
        .ok()
        .and_then(|s| effective_caps(&s))
        .is_some_and(|caps| cap < 64 && caps & (1 << cap) != 0)
}

/// `VmLck` of this process in KiB.
pub fn vm_locked_kib() -> Option<u64> {
    let status = proc_self_status().ok()?;
    status_field(&status, "VmLck")?
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// CPUs the kernel has online, from sysfs.
pub fn online_cpus() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    cpulist::parse(text.trim()).ok()
}

/// `mlockall(MCL_CURRENT | MCL_FUTURE)`.
pub fn lock_all_memory() -> io::Result<()> {
    // SAFETY: no pointers involved.
    check(unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) }).map(|_| ())
}

/// Stack of the calling thread as `(lowest address, size)`.
pub fn current_stack() -> io::Result<(usize, usize)> {
    // SAFETY: attr is initialised by pthread_getattr_np and destroyed after use;
    // the out-pointers are valid locals.
    unsafe {
        let mut attr = MaybeUninit::<libc::pthread_attr_t>::zeroed();
        let rc = libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok((addr as usize, size))
    }
}

/// System page size.
pub fn page_size() -> usize {
    // SAFETY: pure query.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// Number of resident pages in `[start, start + len)` (page-aligned by the caller).
pub fn resident_pages(start: usize, len: usize) -> io::Result<usize> {
    let pages = len.div_ceil(page_size());
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` has one byte per page of the range, as mincore requires;
    // the kernel validates the range itself (ENOMEM if unmapped).
    check(unsafe { libc::mincore(start as *mut libc::c_void, len, vec.as_mut_ptr()) })?;
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
}

/// Kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_cpu_takes_one_given_or_the_last_allowed() {
        assert_eq!(single_cpu(Some(&[3])).unwrap(), 3);
        assert!(matches!(
            single_cpu(Some(&[1, 2])),
            Err(SingleCpuError::NotOne(2))
        ));
        assert!(matches!(
            single_cpu(Some(&[])),
            Err(SingleCpuError::NotOne(0))
        ));
        let allowed = current_affinity().unwrap();
        assert_eq!(single_cpu(None).unwrap(), *allowed.last().unwrap());
    }

    const STATUS: &str = "Name:\tcat\nVmLck:\t     128 kB\nCapEff:\t000001fffeffffff\n";

    #[test]
    fn status_fields_parse() {
        assert_eq!(status_field(STATUS, "Name"), Some("cat"));
        assert_eq!(status_field(STATUS, "Missing"), None);
        let caps = effective_caps(STATUS).unwrap();
        assert_ne!(caps & (1 << CAP_SYS_NICE), 0);
        assert_eq!(caps & (1 << 24), 0);
    }

    #[test]
    fn readback_matches_itself() {
        let (policy, prio) = current_scheduling().unwrap();
        let (lo, hi) = priority_range(policy).unwrap();
        assert!(prio >= lo && prio <= hi);
        assert!(!current_affinity().unwrap().is_empty());
        assert!(set_affinity(&[MAX_CPUS]).is_err());
    }
}
