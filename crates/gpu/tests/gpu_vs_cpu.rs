//! GPU kernels against the CPU phy kernels on generated frames (every CUDA kernel
//! checked against its CPU reference). They need an NVIDIA GPU, its driver and
//! NVRTC. Without a driver each prints `SKIPPED: no CUDA driver (...)` and returns,
//! unless RADIOHOST_REQUIRE_GPU=1, which makes the absence a failure.

use std::path::Path;
use std::sync::Arc;

use radiohost_gpu::{probe_driver, selftest, GpuDevice};
use radiohost_phy::FrameConfig;

fn config(name: &str) -> FrameConfig {
    FrameConfig::load(Path::new(&format!(
        "{}/../phy/configs/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    )))
    .unwrap()
}

/// The device, or None after saying why the test cannot run here.
fn device() -> Option<Arc<GpuDevice>> {
    let required = std::env::var("RADIOHOST_REQUIRE_GPU").is_ok_and(|v| v == "1");
    match GpuDevice::open(0, None) {
        Ok(d) => Some(Arc::new(d)),
        Err(e) if !required => {
            eprintln!("SKIPPED: no CUDA driver ({e})");
            None
        }
        Err(e) => panic!("RADIOHOST_REQUIRE_GPU=1 but the GPU cannot be used: {e}"),
    }
}

fn selftest_of(name: &str, parts: usize) {
    let Some(dev) = device() else { return };
    let report = selftest::run(dev, &config(name), name, parts).unwrap();
    for c in &report.checks {
        eprintln!(
            "{:>5} {:<60} {:>12.3e} (bound {:e})",
            if c.passed { "ok" } else { "FAIL" },
            c.name,
            c.value,
            c.bound
        );
    }
    assert!(report.passed(), "{name}: GPU and CPU kernels disagree");
}

#[test]
fn uplink_8x2_matches_cpu() {
    selftest_of("8x2", 3);
}

#[test]
fn uplink_64x16_matches_cpu() {
    selftest_of("64x16", 8);
}

#[test]
fn downlink_64x16_matches_cpu() {
    selftest_of("64x16_downlink", 4);
}

/// Runs everywhere: probing for the driver never panics, and on a machine without one
/// the error says so (the GPU tests above then report themselves as skipped).
#[test]
fn driver_probe_reports_presence_or_absence() {
    match probe_driver() {
        Ok(info) => eprintln!(
            "CUDA driver {} with {} device(s): the GPU tests run",
            info.version,
            info.devices.len()
        ),
        Err(e) => {
            let text = e.to_string();
            assert!(text.starts_with("no CUDA driver found"), "{text}");
            assert!(e.is_device_lost());
            eprintln!("no GPU here, GPU tests will skip: {text}");
        }
    }
}
