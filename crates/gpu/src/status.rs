//! `radiohost gpu info`: whether a CUDA driver and NVRTC are present, as one report.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::device::{probe_driver, DeviceSummary, DriverInfo};
use crate::nvrtc::{load_nvrtc, NvrtcInfo};
use crate::GpuError;

/// The CUDA driver and NVRTC as found on this machine: each what was found, or why
/// not (the error says what to do). As JSON each is `{"Ok": ..}` or `{"Err": ".."}`.
#[derive(Debug, Serialize)]
pub struct GpuStatus {
    #[serde(serialize_with = "ok_or_message")]
    pub driver: Result<DriverInfo, GpuError>,
    #[serde(serialize_with = "ok_or_message")]
    pub nvrtc: Result<NvrtcInfo, GpuError>,
}

impl GpuStatus {
    /// Probe the driver (no context is opened) and load NVRTC; never fails.
    pub fn probe() -> Self {
        Self {
            driver: probe_driver(),
            nvrtc: load_nvrtc(),
        }
    }
}

fn ok_or_message<T: Serialize, E: fmt::Display, S: Serializer>(
    r: &Result<T, E>,
    s: S,
) -> Result<S::Ok, S::Error> {
    r.as_ref().map_err(|e| e.to_string()).serialize(s)
}

impl DriverInfo {
    /// The CUDA version as `major.minor` (12080 is "12.8").
    pub fn version_text(&self) -> String {
        format!("{}.{}", self.version / 1000, self.version % 1000 / 10)
    }
}

impl DeviceSummary {
    /// The compute capability as `major.minor`, e.g. "9.0".
    pub fn compute_capability_text(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!("{major}.{minor}")
    }

    /// Device memory in GiB.
    pub fn memory_gib(&self) -> f64 {
        self.memory_bytes as f64 / (1u64 << 30) as f64
    }
}

impl NvrtcInfo {
    /// Where the library was loaded from: its path, or "the system loader path".
    pub fn source(&self) -> String {
        self.path.as_ref().map_or_else(
            || "the system loader path".to_string(),
            |p| p.display().to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_serialises_errors_as_messages() {
        let status = GpuStatus {
            driver: Err(GpuError::NoDriver("no libcuda".into())),
            nvrtc: Ok(NvrtcInfo {
                path: None,
                version: (12, 8),
            }),
        };
        let v = serde_json::to_value(&status).unwrap();
        assert!(v["driver"]["Err"].as_str().unwrap().contains("no libcuda"));
        assert_eq!(v["nvrtc"]["Ok"]["version"], serde_json::json!([12, 8]));
        let n = status.nvrtc.as_ref().unwrap();
        assert_eq!(n.source(), "the system loader path");
        let d = DriverInfo {
            version: 12080,
            devices: Vec::new(),
        };
        assert_eq!(d.version_text(), "12.8");
    }
}
