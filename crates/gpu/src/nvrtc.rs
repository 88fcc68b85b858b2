//! Finding NVRTC and compiling the kernel modules with it — no GPU needed.
//!
//! NVRTC 12 or 13 comes from a CUDA toolkit or from PyPI (`pip install
//! nvidia-cuda-nvrtc-cu12` puts `libnvrtc.so.12` under
//! `site-packages/nvidia/cuda_nvrtc/lib`; CUDA 13's `nvidia-cuda-nvrtc` puts
//! `libnvrtc.so.13` under `site-packages/nvidia/cu13/lib`). The library is looked for
//! in `RADIOHOST_NVRTC` (a file or a folder), then `LD_LIBRARY_PATH`, the usual CUDA
//! folders and Python site-packages folders, then by name through the system loader.
//! The one found is opened by absolute path and its functions looked up in that handle
//! ([`crate::nvrtc_lib`]), so no `LD_LIBRARY_PATH` is needed.
//!
//! Compilation targets a real architecture (`sm_90`), so NVRTC yields a CUBIN as well
//! as the PTX; loading the CUBIN avoids PTX JIT, which fails when the driver is older
//! than NVRTC. `ptxas -v` output gives each kernel's registers and static shared memory
//! without a GPU.

use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use serde::Serialize;

use crate::kernels::KernelModule;
use crate::nvrtc_lib::{NvrtcCallError, NvrtcLib, Program};
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
    // CUDA 12's wheel (nvidia-cuda-nvrtc-cu12), then CUDA 13's (nvidia-cuda-nvrtc).
    for sp in site_packages() {
        dirs.push(sp.join("nvidia/cuda_nvrtc/lib"));
        dirs.push(sp.join("nvidia/cu13/lib"));
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
    #[error("{} exists but cannot be loaded ({reason}): set RADIOHOST_NVRTC to a libnvrtc.so.12 or .so.13 that matches this machine", path.display())]
    Unloadable { path: PathBuf, reason: String },
    #[error("searched RADIOHOST_NVRTC, LD_LIBRARY_PATH, /usr/local/cuda, Python site-packages (nvidia/cuda_nvrtc/lib, nvidia/cu13/lib) and the loader's cache: install it with `pip install nvidia-cuda-nvrtc-cu12` or set RADIOHOST_NVRTC=/path/to/libnvrtc.so.12")]
    NotFound,
    #[error(
        "the NVRTC library is unusable ({0}); reinstall it (`pip install nvidia-cuda-nvrtc-cu12`)"
    )]
    Unusable(#[from] NvrtcCallError),
}

/// Names the system loader is asked for when no file was found in the candidate
/// folders (its own search: `ld.so.cache`, `LD_LIBRARY_PATH`), newest first.
const SONAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

fn dlopen_global(name: &CStr) -> *mut c_void {
    // SAFETY: dlopen with a valid C string; the handle is deliberately never closed
    // (the function table points into the library for the process lifetime).
    unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) }
}

/// Open NVRTC's builtins library from the folder of `nvrtc` ahead of NVRTC, which
/// looks for it by name when it first compiles: a pip wheel's folder is on no
/// loader path. Best effort: a toolkit install finds it through `ld.so.cache`.
fn preload_builtins(nvrtc: &Path) {
    let Some(dir) = nvrtc.parent() else { return };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("libnvrtc-builtins.so.") {
            if let Ok(c) = CString::new(e.path().as_os_str().as_encoded_bytes()) {
                dlopen_global(&c);
            }
        }
    }
}

fn open_nvrtc() -> Result<(NvrtcInfo, NvrtcLib), NvrtcLoadError> {
    let path = find_nvrtc_file();
    let handle = match &path {
        Some(p) => {
            let c = CString::new(p.as_os_str().as_encoded_bytes())
                .map_err(|_| NvrtcLoadError::NulInPath(p.clone()))?;
            preload_builtins(p);
            let h = dlopen_global(&c);
            if h.is_null() {
                return Err(NvrtcLoadError::Unloadable {
                    path: p.clone(),
                    reason: dlerror_text(),
                });
            }
            h
        }
        None => SONAMES
            .iter()
            .map(|n| dlopen_global(&CString::new(*n).expect("static name")))
            .find(|h| !h.is_null())
            .ok_or(NvrtcLoadError::NotFound)?,
    };
    // SAFETY: a live handle of a library named libnvrtc, never closed.
    let lib = unsafe { NvrtcLib::from_handle(handle) }?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-pointers are valid.
    lib.check(unsafe { (lib.version)(&mut major, &mut minor) })?;
    Ok((
        NvrtcInfo {
            path,
            version: (major, minor),
        },
        lib,
    ))
}

/// NVRTC, opened once per process (the first attempt's answer holds for the process).
fn nvrtc() -> Result<&'static (NvrtcInfo, NvrtcLib), GpuError> {
    static LOADED: OnceLock<Result<(NvrtcInfo, NvrtcLib), NvrtcLoadError>> = OnceLock::new();
    LOADED
        .get_or_init(open_nvrtc)
        .as_ref()
        .map_err(|e| GpuError::NoNvrtc(e.clone()))
}

/// Load NVRTC once per process (the library stays loaded for the process lifetime).
///
/// # Errors
/// [`GpuError::NoNvrtc`] saying where it looked and how to install it.
pub fn load_nvrtc() -> Result<NvrtcInfo, GpuError> {
    nvrtc().map(|(info, _)| info.clone())
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
    /// NVRTC's log (the `ptxas -v` lines the kernels' resources were read from).
    #[serde(skip)]
    pub log: String,
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

/// The environment variable that turns the CUDA compute cache off (NVRTC 13 obeys
/// it too: with it set, every compile runs ptxas and reports each kernel).
pub const NO_CACHE_ENV: &str = "CUDA_CACHE_DISABLE";

/// Turn the compute cache off for this process (unless its environment already
/// says), so that every [`compile`] reports every kernel. It sets an environment
/// variable: call it before NVRTC loads and while no other thread runs.
pub fn report_every_kernel() {
    if std::env::var_os(NO_CACHE_ENV).is_none() {
        std::env::set_var(NO_CACHE_ENV, "1");
    }
}

/// Compile `module` for `arch` (e.g. `"sm_90"`): PTX, CUBIN and per-kernel resources.
///
/// The resources come from ptxas's report in NVRTC's log. NVRTC 13 serves a module it
/// compiled before from the CUDA compute cache without running ptxas, and its log
/// then has no report: `kernels` lists only what the log gave. Call
/// [`report_every_kernel`] first for a full report.
///
/// # Errors
/// NVRTC missing, or a compile error with NVRTC's log.
pub fn compile(module: &KernelModule, arch: &str) -> Result<CompiledModule, GpuError> {
    let (_, lib) = nvrtc()?;
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
    let options: Vec<CString> = [
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--ptxas-options=-v".to_string(),
        "--fmad=true".to_string(),
    ]
    .into_iter()
    .map(|o| CString::new(o).expect("options have no NUL"))
    .collect();
    let option_ptrs: Vec<_> = options.iter().map(|o| o.as_ptr()).collect();
    let t0 = Instant::now();
    let mut prog: Program = std::ptr::null_mut();
    // SAFETY: valid C strings, no headers; prog receives the new program.
    lib.check(unsafe {
        (lib.create_program)(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })
    .map_err(|e| fail(e.to_string()))?;
    // SAFETY: prog is live until destroy_program below; the options outlive the call.
    let compiled = lib.check(unsafe {
        (lib.compile_program)(prog, option_ptrs.len() as i32, option_ptrs.as_ptr())
    });
    // SAFETY: prog is live.
    let log = unsafe { lib.output(prog, lib.get_program_log_size, lib.get_program_log) }
        .map(|b| text_of(&b))
        .unwrap_or_else(|e| format!("(no log: {e})"));
    let out = (|| {
        compiled.map_err(|e| fail(format!("{e}\n{log}")))?;
        // SAFETY: compiled successfully; prog is live.
        let mut ptx = unsafe { lib.output(prog, lib.get_ptx_size, lib.get_ptx) }
            .map_err(|e| fail(format!("PTX: {e}")))?;
        while ptx.last() == Some(&0) {
            ptx.pop();
        }
        // SAFETY: as above.
        let cubin = unsafe { lib.output(prog, lib.get_cubin_size, lib.get_cubin) }
            .map_err(|e| fail(format!("CUBIN: {e}")))?;
        Ok(CompiledModule {
            module: module.name,
            arch: arch.to_string(),
            ptx_bytes: ptx.len(),
            cubin_bytes: cubin.len(),
            ptx,
            cubin,
            compile_ms: t0.elapsed().as_secs_f64() * 1e3,
            kernels: parse_ptxas_log(&log),
            log,
        })
    })();
    // SAFETY: prog was created above and is destroyed once.
    let _ = unsafe { (lib.destroy_program)(&mut prog) };
    out
}

/// A NUL-terminated buffer from NVRTC as text.
fn text_of(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
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
