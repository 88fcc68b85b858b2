//! Finding NVRTC and compiling the kernel modules with it — no GPU needed.
//!
//! NVRTC comes from a CUDA toolkit or from PyPI (`pip install nvidia-cuda-nvrtc-cu12`,
//! which puts `libnvrtc.so.12` under `site-packages/nvidia/cuda_nvrtc/lib`). The
//! library is looked for in `RADIOHOST_NVRTC` (a file or a folder), then
//! `LD_LIBRARY_PATH`, the usual CUDA folders and Python site-packages folders. The one
//! found is opened by absolute path (`RTLD_GLOBAL`) before cudarc opens it by name:
//! the dynamic loader then reuses the already-loaded library (same soname), so no
//! `LD_LIBRARY_PATH` is needed.
//!
//! Compilation targets a real architecture (`sm_90`), so NVRTC yields a CUBIN as well
//! as the PTX; loading the CUBIN avoids PTX JIT, which fails when the driver is older
//! than NVRTC. `ptxas -v` output gives each kernel's registers and static shared memory
//! without a GPU.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use cudarc::nvrtc::{result, sys};
use serde::Serialize;

use crate::kernels::KernelModule;
use crate::GpuError;

/// The NVRTC library in use.
#[derive(Clone, Debug, Serialize)]
pub struct NvrtcInfo {
    /// Absolute path opened (None: found by the system loader's own search).
    pub path: Option<PathBuf>,
    pub version: (i32, i32),
}

const LIB_NAMES: [&str; 3] = ["libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so"];

/// Folders that may hold libnvrtc, most specific first.
fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os("RADIOHOST_NVRTC") {
        let p = PathBuf::from(p);
        if p.is_dir() {
            dirs.push(p);
        } else if let Some(parent) = p.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&ld));
    }
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
    ] {
        dirs.push(d.into());
    }
    let pip_suffix = Path::new("nvidia/cuda_nvrtc/lib");
    for sp in site_packages() {
        dirs.push(sp.join(pip_suffix));
    }
    dirs
}

/// Python site-packages folders: the virtualenv, pyenv versions, the user's and the
/// system's (one level of `python3.*` globbing, no Python process started).
fn site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
        roots.push(PathBuf::from(v).join("lib"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = PathBuf::from(home);
        roots.push(home.join(".local/lib"));
        if let Ok(rd) = std::fs::read_dir(home.join(".pyenv/versions")) {
            roots.extend(rd.flatten().map(|e| e.path().join("lib")));
        }
    }
    for r in ["/usr/lib", "/usr/local/lib", "/opt/conda/lib"] {
        roots.push(r.into());
    }
    let mut out = Vec::new();
    for root in roots {
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("python3") {
                out.push(e.path().join("site-packages"));
                out.push(e.path().join("dist-packages"));
            }
        }
    }
    out
}

/// The first libnvrtc file in the candidate folders.
pub fn find_nvrtc_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RADIOHOST_NVRTC") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    candidate_dirs()
        .into_iter()
        .flat_map(|d| LIB_NAMES.map(|n| d.join(n)))
        .find(|p| p.is_file())
}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Why NVRTC could not be loaded (cached: the first attempt's answer holds for
/// the process).
#[derive(Clone, Debug, thiserror::Error)]
pub enum NvrtcLoadError {
    #[error("path {} contains a NUL byte: set RADIOHOST_NVRTC to a path without one", .0.display())]
    NulInPath(PathBuf),
    #[error("{} exists but cannot be loaded ({reason}): set RADIOHOST_NVRTC to a libnvrtc.so.12 that matches this machine", path.display())]
    Unloadable { path: PathBuf, reason: String },
    #[error("searched RADIOHOST_NVRTC, LD_LIBRARY_PATH, /usr/local/cuda and Python site-packages (nvidia/cuda_nvrtc/lib): install it with `pip install nvidia-cuda-nvrtc-cu12` or set RADIOHOST_NVRTC=/path/to/libnvrtc.so.12")]
    NotFound,
    #[error("nvrtcVersion failed ({0}): the library is broken; reinstall it (`pip install nvidia-cuda-nvrtc-cu12`)")]
    Version(String),
}

/// Load NVRTC once per process (the library stays loaded for the process lifetime).
///
/// # Errors
/// [`GpuError::NoNvrtc`] saying where it looked and how to install it.
pub fn load_nvrtc() -> Result<NvrtcInfo, GpuError> {
    static LOADED: OnceLock<Result<NvrtcInfo, NvrtcLoadError>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let path = find_nvrtc_file();
            if let Some(p) = &path {
                let c = CString::new(p.as_os_str().as_encoded_bytes())
                    .map_err(|_| NvrtcLoadError::NulInPath(p.clone()))?;
                // SAFETY: dlopen with a valid C string; the handle is deliberately
                // never closed (cudarc keeps using the library).
                let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
                if h.is_null() {
                    return Err(NvrtcLoadError::Unloadable {
                        path: p.clone(),
                        reason: dlerror_text(),
                    });
                }
            }
            // SAFETY: only probes whether the library can be opened.
            if !unsafe { sys::is_culib_present() } {
                return Err(NvrtcLoadError::NotFound);
            }
            let (mut major, mut minor) = (0, 0);
            // SAFETY: the library is present; out-pointers are valid.
            unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
                .result()
                .map_err(|e| NvrtcLoadError::Version(format!("{e:?}")))?;
            Ok(NvrtcInfo {
                path,
                version: (major, minor),
            })
        })
        .clone()
        .map_err(GpuError::NoNvrtc)
}

/// What `ptxas -v` reported for one kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PtxasInfo {
    pub kernel: String,
    pub registers: u32,
    pub static_smem: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// One module compiled for one architecture.
#[derive(Clone, Debug, Serialize)]
pub struct CompiledModule {
    pub module: &'static str,
    pub arch: String,
    #[serde(skip)]
    pub ptx: Vec<u8>,
    #[serde(skip)]
    pub cubin: Vec<u8>,
    pub ptx_bytes: usize,
    pub cubin_bytes: usize,
    pub compile_ms: f64,
    pub kernels: Vec<PtxasInfo>,
}

/// Parse the `ptxas info` lines of an NVRTC log.
pub fn parse_ptxas_log(log: &str) -> Vec<PtxasInfo> {
    let mut out: Vec<PtxasInfo> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let at = line.find(unit)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.push(PtxasInfo {
                kernel: name,
                ..Default::default()
            });
        } else if let Some(cur) = out.last_mut() {
            if line.contains("spill stores") {
                cur.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                cur.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used ") && line.contains("registers") {
                cur.registers = number_before(line, "registers").unwrap_or(0);
                cur.static_smem = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    out
}

fn log_of(prog: sys::nvrtcProgram) -> String {
    // SAFETY: prog is a live program.
    match unsafe { result::get_program_log(prog) } {
        Ok(raw) => {
            // SAFETY: NVRTC returns a NUL-terminated buffer.
            unsafe { CStr::from_ptr(raw.as_ptr() as *const c_char) }
                .to_string_lossy()
                .into_owned()
        }
        Err(e) => format!("(no log: {e:?})"),
    }
}

/// Compile `module` for `arch` (e.g. `"sm_90"`): PTX, CUBIN and per-kernel resources.
///
/// # Errors
/// NVRTC missing, or a compile error with NVRTC's log.
pub fn compile(module: &KernelModule, arch: &str) -> Result<CompiledModule, GpuError> {
    load_nvrtc()?;
    let fail = |message: String| GpuError::Compile {
        module: module.name,
        arch: arch.to_string(),
        message,
    };
    if !arch.starts_with("sm_") || arch[3..].parse::<u32>().is_err() {
        return Err(fail(format!(
            "architecture `{arch}` must look like sm_90 (a real GPU architecture)"
        )));
    }
    let src = CString::new(module.source()).map_err(|_| fail("source has a NUL byte".into()))?;
    let name = CString::new(format!("{}.cu", module.name)).expect("static name");
    let t0 = Instant::now();
    let prog = result::create_program(&src, Some(&name)).map_err(|e| fail(format!("{e:?}")))?;
    let options = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--ptxas-options=-v".to_string(),
        "--fmad=true".to_string(),
    ];
    // SAFETY: prog is live until destroy_program below.
    let compiled = unsafe { result::compile_program(prog, &options) };
    let log = log_of(prog);
    let out = (|| {
        compiled.map_err(|e| fail(format!("{e:?}\n{log}")))?;
        // SAFETY: compiled successfully; buffers sized by NVRTC's own size calls.
        let ptx = unsafe { result::get_ptx(prog) }.map_err(|e| fail(format!("PTX: {e:?}")))?;
        let mut ptx: Vec<u8> = ptx.into_iter().map(|c| c as u8).collect();
        while ptx.last() == Some(&0) {
            ptx.pop();
        }
        let mut size = 0usize;
        // SAFETY: as above.
        unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
            .result()
            .map_err(|e| fail(format!("CUBIN size: {e:?}")))?;
        let mut cubin = vec![0u8; size];
        // SAFETY: cubin has the size NVRTC asked for.
        unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut c_char) }
            .result()
            .map_err(|e| fail(format!("CUBIN: {e:?}")))?;
        Ok(CompiledModule {
            module: module.name,
            arch: arch.to_string(),
            ptx_bytes: ptx.len(),
            cubin_bytes: cubin.len(),
            ptx,
            cubin,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
            kernels: parse_ptxas_log(&log),
        })
    })();
    // SAFETY: prog was created above and is destroyed once.
    let _ = unsafe { result::destroy_program(prog) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptxas_log_is_parsed() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'zf_detect' for 'sm_90'\n\
ptxas info    : Function properties for zf_detect\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 128 bytes smem, 456 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'precode' for 'sm_90'\n\
ptxas info    : Used 22 registers, 400 bytes cmem[0]\n";
        let k = parse_ptxas_log(log);
        assert_eq!(k.len(), 2);
        assert_eq!(
            k[0],
            PtxasInfo {
                kernel: "zf_detect".into(),
                registers: 40,
                static_smem: 128,
                spill_stores: 4,
                spill_loads: 12
            }
        );
        assert_eq!((k[1].registers, k[1].static_smem), (22, 0));
    }
}
