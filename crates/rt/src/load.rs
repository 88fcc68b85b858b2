//! Bounded background load shaped like a parallel kernel build: CPU hogs,
//! memory churn (map, touch, unmap), syscall churn, and many short-lived
//! processes. It stops by itself at its deadline, on [`Load::stop`], or on drop.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoadConfig {
    /// Threads spinning on arithmetic.
    pub cpu_hogs: usize,
    /// Threads allocating, touching and freeing memory.
    pub memory_workers: usize,
    /// Bytes each memory worker maps per round.
    pub memory_bytes: usize,
    /// Threads doing cheap syscalls (open/read/close, pipe ping, yield).
    pub syscall_workers: usize,
    /// Threads each keeping one short-lived child process running at a time.
    pub process_spawners: usize,
    /// Hard bound: the load stops after this long even if nobody stops it.
    pub max_duration: Duration,
}

impl LoadConfig {
    /// One CPU hog per online CPU, one memory worker (64 MiB rounds), one
    /// syscall worker, one process spawner per two CPUs (at least one).
    pub fn kernel_build_like(max_duration: Duration) -> LoadConfig {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        LoadConfig {
            cpu_hogs: cpus,
            memory_workers: 1,
            memory_bytes: 64 << 20,
            syscall_workers: 1,
            process_spawners: (cpus / 2).max(1),
            max_duration,
        }
    }
}

/// Work done by a load, to show it really ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadStats {
    /// Blocks of 65 536 arithmetic iterations.
    pub cpu_blocks: u64,
    /// Bytes mapped and touched.
    pub bytes_churned: u64,
    /// Syscalls made by syscall workers.
    pub syscalls: u64,
    /// Child processes that ran to completion.
    pub processes: u64,
    /// Child processes that could not be started.
    pub spawn_failures: u64,
}

#[derive(Default)]
struct Counters {
    cpu_blocks: AtomicU64,
    bytes: AtomicU64,
    syscalls: AtomicU64,
    processes: AtomicU64,
    spawn_failures: AtomicU64,
}

/// A running load.
pub struct Load {
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    workers: Vec<JoinHandle<()>>,
}

/// A worker body: context and the memory worker's byte count.
type WorkerFn = fn(&Ctx, usize);

struct Ctx {
    stop: Arc<AtomicBool>,
    deadline: Instant,
    counters: Arc<Counters>,
}

impl Ctx {
    fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }
}

impl Load {
    /// Starts the load. Fails only if a worker thread cannot be created (the
    /// ones already started are stopped).
    pub fn start(config: &LoadConfig) -> std::io::Result<Load> {
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let deadline = Instant::now() + config.max_duration;
        let mut load = Load {
            stop: stop.clone(),
            counters: counters.clone(),
            workers: Vec::new(),
        };
        let kinds: [(usize, &str, WorkerFn); 4] = [
            (config.cpu_hogs, "load-cpu", cpu_hog),
            (config.memory_workers, "load-mem", memory_churn),
            (config.syscall_workers, "load-sys", syscall_churn),
            (config.process_spawners, "load-proc", process_spawner),
        ];
        for (count, name, body) in kinds {
            for i in 0..count {
                let ctx = Ctx {
                    stop: stop.clone(),
                    deadline,
                    counters: counters.clone(),
                };
                let bytes = config.memory_bytes;
                let handle = std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .stack_size(256 * 1024)
                    .spawn(move || body(&ctx, bytes))?;
                load.workers.push(handle);
            }
        }
        Ok(load)
    }

    /// Work done so far.
    pub fn stats(&self) -> LoadStats {
        let c = &self.counters;
        LoadStats {
            cpu_blocks: c.cpu_blocks.load(Ordering::Relaxed),
            bytes_churned: c.bytes.load(Ordering::Relaxed),
            syscalls: c.syscalls.load(Ordering::Relaxed),
            processes: c.processes.load(Ordering::Relaxed),
            spawn_failures: c.spawn_failures.load(Ordering::Relaxed),
        }
    }

    /// Stops all workers, waits for them, and returns the work done.
    pub fn stop(mut self) -> LoadStats {
        self.halt();
        self.stats()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}

fn cpu_hog(ctx: &Ctx, _: usize) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while ctx.running() {
        for _ in 0..65_536 {
            // xorshift: cheap, not optimisable away thanks to black_box below.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
        ctx.counters.cpu_blocks.fetch_add(1, Ordering::Relaxed);
    }
}

fn memory_churn(ctx: &Ctx, bytes: usize) {
    let bytes = bytes.max(4096);
    while ctx.running() {
        // A fresh allocation this large is a new mmap: page faults on touch,
        // munmap and TLB shootdowns on drop, like compiler processes.
        let mut buf = vec![0u8; bytes];
        for i in (0..bytes).step_by(4096) {
            buf[i] = i as u8;
            if i % (1 << 20) == 0 && !ctx.running() {
                break;
            }
        }
        std::hint::black_box(&buf);
        ctx.counters
            .bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

fn syscall_churn(ctx: &Ctx, _: usize) {
    let mut buf = [0u8; 512];
    while ctx.running() {
        for _ in 0..64 {
            if let Ok(mut f) = std::fs::File::open("/proc/self/stat") {
                let _ = std::io::Read::read(&mut f, &mut buf);
            }
            std::thread::yield_now();
        }
        // open + read + close + sched_yield per round
        ctx.counters.syscalls.fetch_add(64 * 4, Ordering::Relaxed);
    }
}

fn process_spawner(ctx: &Ctx, _: usize) {
    // A small shell loop: fork, exec, a little work, exit — a compiler
    // invocation in miniature.
    while ctx.running() {
        let status = std::process::Command::new("/bin/sh")
            .args(["-c", "i=0; while [ $i -lt 300 ]; do i=$((i+1)); done"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        match status {
            Ok(_) => ctx.counters.processes.fetch_add(1, Ordering::Relaxed),
            Err(_) => {
                // Do not spin on a missing /bin/sh.
                std::thread::sleep(Duration::from_millis(20));
                ctx.counters.spawn_failures.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_load_does_every_kind_of_work_and_stops_by_itself() {
        let cfg = LoadConfig {
            cpu_hogs: 1,
            memory_workers: 1,
            memory_bytes: 1 << 20,
            syscall_workers: 1,
            process_spawners: 1,
            max_duration: Duration::from_millis(300),
        };
        let load = Load::start(&cfg).unwrap();
        // Not stopped by us: the deadline ends it; join must then return.
        std::thread::sleep(Duration::from_millis(400));
        let stats = load.stop();
        assert!(stats.cpu_blocks > 0);
        assert!(stats.bytes_churned >= 1 << 20);
        assert!(stats.syscalls > 0);
        assert!(stats.processes + stats.spawn_failures > 0);
    }
}
