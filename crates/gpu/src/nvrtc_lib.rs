//! The NVRTC functions the compiler needs, looked up in a library this crate opened.
//!
//! cudarc (built against CUDA 12.8) opens NVRTC by a list of names that stops at
//! `libnvrtc.so.12`, so a machine with only CUDA 13's `libnvrtc.so.13` (a CUDA 13
//! toolkit, or PyPI's `nvidia-cuda-nvrtc`) could not compile. The eleven functions below
//! have the same C signatures in NVRTC 12 and 13 (compiled with 12.9, 13.0 and 13.5);
//! looking them up in the handle we opened ourselves makes either version usable.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

/// `nvrtcResult`: 0 is success.
pub type NvrtcResult = c_int;
/// `nvrtcProgram`, an opaque handle.
pub type Program = *mut c_void;

/// Why an NVRTC library or one of its calls failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NvrtcCallError {
    #[error("the library has no `{0}`")]
    MissingSymbol(&'static str),
    #[error("{name} (NVRTC error {code})")]
    Failed { code: NvrtcResult, name: String },
}

/// The loaded library's functions (the handle is never closed).
pub struct NvrtcLib {
    pub version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> NvrtcResult,
    pub create_program: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> NvrtcResult,
    pub compile_program: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> NvrtcResult,
    pub destroy_program: unsafe extern "C" fn(*mut Program) -> NvrtcResult,
    pub get_program_log_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    pub get_program_log: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    pub get_ptx_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    pub get_ptx: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    pub get_cubin_size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
    pub get_cubin: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    pub get_error_string: unsafe extern "C" fn(NvrtcResult) -> *const c_char,
}

// SAFETY: the table holds function pointers into a library that stays loaded; NVRTC's
// functions may be called from any thread (each program is used by one at a time).
unsafe impl Send for NvrtcLib {}
unsafe impl Sync for NvrtcLib {}

impl NvrtcLib {
    /// Look every function up in `handle` (from `dlopen`).
    ///
    /// # Errors
    /// [`NvrtcCallError::MissingSymbol`]: the first symbol the library lacks.
    ///
    /// # Safety
    /// `handle` must be a live `dlopen` handle of an NVRTC library, never closed.
    pub unsafe fn from_handle(handle: *mut c_void) -> Result<Self, NvrtcCallError> {
        unsafe fn sym<T: Copy>(
            handle: *mut c_void,
            name: &'static str,
        ) -> Result<T, NvrtcCallError> {
            let c = CString::new(name).expect("static symbol name");
            let p = libc::dlsym(handle, c.as_ptr());
            if p.is_null() {
                return Err(NvrtcCallError::MissingSymbol(name));
            }
            // SAFETY (caller): T is the function-pointer type of `name`.
            Ok(std::mem::transmute_copy::<*mut c_void, T>(&p))
        }
        Ok(Self {
            version: sym(handle, "nvrtcVersion")?,
            create_program: sym(handle, "nvrtcCreateProgram")?,
            compile_program: sym(handle, "nvrtcCompileProgram")?,
            destroy_program: sym(handle, "nvrtcDestroyProgram")?,
            get_program_log_size: sym(handle, "nvrtcGetProgramLogSize")?,
            get_program_log: sym(handle, "nvrtcGetProgramLog")?,
            get_ptx_size: sym(handle, "nvrtcGetPTXSize")?,
            get_ptx: sym(handle, "nvrtcGetPTX")?,
            get_cubin_size: sym(handle, "nvrtcGetCUBINSize")?,
            get_cubin: sym(handle, "nvrtcGetCUBIN")?,
            get_error_string: sym(handle, "nvrtcGetErrorString")?,
        })
    }

    /// `Ok(())` for success, else the failure with NVRTC's name for `code`.
    ///
    /// # Errors
    /// [`NvrtcCallError::Failed`], named e.g. `NVRTC_ERROR_COMPILATION`.
    pub fn check(&self, code: NvrtcResult) -> Result<(), NvrtcCallError> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: nvrtcGetErrorString returns NULL or a static NUL-terminated string.
        let p = unsafe { (self.get_error_string)(code) };
        let name = if p.is_null() {
            "unnamed".to_string()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        Err(NvrtcCallError::Failed { code, name })
    }

    /// One of the program's outputs (log, PTX, CUBIN) through its size and copy calls.
    ///
    /// # Errors
    /// NVRTC's error for either call.
    ///
    /// # Safety
    /// `prog` must be a live program.
    pub unsafe fn output(
        &self,
        prog: Program,
        size: unsafe extern "C" fn(Program, *mut usize) -> NvrtcResult,
        copy: unsafe extern "C" fn(Program, *mut c_char) -> NvrtcResult,
    ) -> Result<Vec<u8>, NvrtcCallError> {
        let mut n = 0usize;
        self.check(size(prog, &mut n))?;
        let mut buf = vec![0u8; n];
        if n > 0 {
            self.check(copy(prog, buf.as_mut_ptr().cast()))?;
        }
        Ok(buf)
    }
}
