//! PM QoS request through `/dev/cpu_dma_latency`: while the file stays open
//! with a value written, the kernel keeps CPUs out of idle states whose exit
//! latency exceeds it (cyclictest does the same with 0 µs by default).

use std::fs::File;
use std::io::{self, Write};

const DEVICE: &str = "/dev/cpu_dma_latency";

/// Holds a CPU wake-up latency limit until dropped.
#[derive(Debug)]
pub struct CpuDmaLatency {
    _file: File,
    limit_us: u32,
}

impl CpuDmaLatency {
    /// Asks the kernel to keep idle exit latency at or below `limit_us`.
    pub fn request(limit_us: u32) -> io::Result<CpuDmaLatency> {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(DEVICE)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot open {DEVICE}: {e} (needs root or write permission on it)"),
                )
            })?;
        // The device takes a binary s32.
        file.write_all(&(limit_us as i32).to_ne_bytes())?;
        Ok(CpuDmaLatency {
            _file: file,
            limit_us,
        })
    }

    /// The limit held.
    pub fn limit_us(&self) -> u32 {
        self.limit_us
    }
}
