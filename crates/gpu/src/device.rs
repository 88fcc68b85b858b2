//! One GPU (or one SM-budget slice of one GPU) as the station sees it: a CUDA context,
//! a high- and a low-priority stream (over-committed work goes to the low one), the
//! kernel modules compiled for its architecture, and each kernel's attributes.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::sys::{self, CUdevice_attribute as Attr, CUfunction_attribute as FnAttr};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;
use serde::Serialize;

use crate::describe::KernelResources;
use crate::kernels::MODULES;
use crate::nvrtc;
use crate::occupancy::GpuSpec;
use crate::GpuError;

/// What the CUDA driver reports, without opening a context.
#[derive(Clone, Debug, Serialize)]
pub struct DriverInfo {
    /// e.g. 12080 for CUDA 12.8.
    pub version: i32,
    pub devices: Vec<DeviceSummary>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceSummary {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sms: i32,
    pub memory_bytes: usize,
}

/// Whether libcuda can be opened, and the driver's view of the devices.
///
/// # Errors
/// [`GpuError::NoDriver`] when libcuda is absent or `cuInit` fails.
pub fn probe_driver() -> Result<DriverInfo, GpuError> {
    // SAFETY: only tries to open the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(GpuError::NoDriver(
            "libcuda.so could not be opened (no NVIDIA driver on this machine, or it is not on the loader's path)".into(),
        ));
    }
    result::init().map_err(|e| GpuError::NoDriver(format!("cuInit failed: {:?}", e.0)))?;
    let mut version = 0;
    // SAFETY: valid out-pointer; the driver is initialised.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| GpuError::NoDriver(format!("cuDriverGetVersion failed: {:?}", e.0)))?;
    let count = CudaContext::device_count().map_err(|e| GpuError::cuda(0, "device count", e))?;
    let mut devices = Vec::new();
    for ordinal in 0..count.max(0) as usize {
        let dev = result::device::get(ordinal as i32)
            .map_err(|e| GpuError::cuda(ordinal, "cuDeviceGet", e))?;
        // SAFETY: dev is a valid device handle.
        let attr = |a| unsafe { result::device::get_attribute(dev, a) };
        let name = result::device::get_name(dev).map_err(|e| GpuError::cuda(ordinal, "name", e))?;
        // SAFETY: as above.
        let memory_bytes = unsafe { result::device::total_mem(dev) }
            .map_err(|e| GpuError::cuda(ordinal, "memory", e))?;
        let cc = (
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                .map_err(|e| GpuError::cuda(ordinal, "attribute", e))?,
            attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                .map_err(|e| GpuError::cuda(ordinal, "attribute", e))?,
        );
        let sms = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| GpuError::cuda(ordinal, "attribute", e))?;
        devices.push(DeviceSummary {
            ordinal,
            name,
            compute_capability: cc,
            sms,
            memory_bytes,
        });
    }
    Ok(DriverInfo { version, devices })
}

/// A kernel loaded on the device with its attributes.
#[derive(Clone, Debug)]
pub struct LoadedKernel {
    pub function: CudaFunction,
    pub resources: KernelResources,
}

/// A logical GPU device: a whole GPU or an SM budget of one.
pub struct GpuDevice {
    ctx: Arc<CudaContext>,
    ordinal: usize,
    sm_budget: u32,
    spec: GpuSpec,
    high: Arc<CudaStream>,
    low: Arc<CudaStream>,
    kernels: HashMap<&'static str, LoadedKernel>,
    _modules: Vec<Arc<CudaModule>>,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice")
            .field("ordinal", &self.ordinal)
            .field("sm_budget", &self.sm_budget)
            .field("gpu", &self.spec.name)
            .finish()
    }
}

impl GpuDevice {
    /// Open GPU `ordinal` with `sm_budget` SMs of scoreboard capacity (`None`: all).
    /// Compiles every kernel module for the GPU's architecture (NVRTC, CUBIN) and loads
    /// them.
    ///
    /// # Errors
    /// No driver, no such GPU, no NVRTC, a compile or load failure, or a budget larger
    /// than the GPU.
    pub fn open(ordinal: usize, sm_budget: Option<u32>) -> Result<Self, GpuError> {
        let mut v = Self::split(ordinal, &[sm_budget.unwrap_or(0)])?;
        Ok(v.remove(0))
    }

    /// Open GPU `ordinal` as several logical devices with the given SM budgets (0 means
    /// the whole GPU): they share the context and the loaded modules, and each has its
    /// own pair of priority streams.
    ///
    /// # Errors
    /// As [`GpuDevice::open`], or budgets adding up to more SMs than the GPU has.
    pub fn split(ordinal: usize, budgets: &[u32]) -> Result<Vec<Self>, GpuError> {
        let info = probe_driver()?;
        if ordinal >= info.devices.len() {
            return Err(GpuError::NoSuchDevice {
                ordinal,
                count: info.devices.len(),
            });
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| GpuError::cuda(ordinal, "context creation", e))?;
        // Dependences are explicit (events per instruction): cudarc's per-allocation
        // tracking would serialise instructions writing disjoint parts of one buffer.
        // SAFETY: no allocation exists yet on this context.
        unsafe { ctx.disable_event_tracking() };
        let spec = read_spec(&ctx, ordinal)?;
        let total: u32 = budgets
            .iter()
            .map(|&b| if b == 0 { spec.sms } else { b })
            .sum();
        if budgets.is_empty() || total > spec.sms {
            return Err(GpuError::SmBudget {
                ordinal,
                sms: spec.sms,
                budget: total,
            });
        }
        let arch = format!("sm_{}{}", spec.cc.0, spec.cc.1);
        let mut modules = Vec::new();
        let mut kernels = HashMap::new();
        for m in &MODULES {
            let compiled = nvrtc::compile(m, &arch)?;
            let module = ctx
                .load_module(Ptx::from_binary(compiled.cubin))
                .map_err(|e| GpuError::cuda(ordinal, format!("loading module {}", m.name), e))?;
            for &k in m.kernels {
                let function = module
                    .load_function(k)
                    .map_err(|e| GpuError::cuda(ordinal, format!("loading kernel {k}"), e))?;
                let resources = kernel_attributes(&function, &spec, ordinal, k)?;
                kernels.insert(
                    k,
                    LoadedKernel {
                        function,
                        resources,
                    },
                );
            }
            modules.push(module);
        }
        let (least, greatest) = result::stream::get_priority_range()
            .map_err(|e| GpuError::cuda(ordinal, "stream priorities", e))?;
        budgets
            .iter()
            .map(|&b| {
                Ok(Self {
                    high: ctx
                        .new_stream_with_priority(greatest)
                        .map_err(|e| GpuError::cuda(ordinal, "high-priority stream", e))?,
                    low: ctx
                        .new_stream_with_priority(least)
                        .map_err(|e| GpuError::cuda(ordinal, "low-priority stream", e))?,
                    ctx: ctx.clone(),
                    ordinal,
                    sm_budget: if b == 0 { spec.sms } else { b },
                    spec: spec.clone(),
                    kernels: kernels.clone(),
                    _modules: modules.clone(),
                })
            })
            .collect()
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Scoreboard capacity of this logical device, in SMs.
    pub fn sm_budget(&self) -> u32 {
        self.sm_budget
    }

    pub fn spec(&self) -> &GpuSpec {
        &self.spec
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream for normal (`false`) or over-committed (`true`) work.
    pub fn stream(&self, low_priority: bool) -> &Arc<CudaStream> {
        if low_priority {
            &self.low
        } else {
            &self.high
        }
    }

    /// A loaded kernel by name.
    ///
    /// # Errors
    /// An unknown name (a bug in the caller).
    pub fn kernel(&self, name: &str) -> Result<&LoadedKernel, GpuError> {
        self.kernels
            .get(name)
            .ok_or_else(|| GpuError::Config(format!("no kernel named {name}")))
    }

    /// Resources of every kernel, by name (for [`crate::describe::ExecutorTable`]).
    pub fn resources(&self) -> HashMap<&'static str, KernelResources> {
        self.kernels
            .iter()
            .map(|(k, v)| (*k, v.resources))
            .collect()
    }

    /// Wait until `event` completed (host side).
    ///
    /// # Errors
    /// The CUDA error of the work the event covers.
    pub fn wait_event(&self, event: &CudaEvent) -> Result<(), GpuError> {
        event
            .synchronize()
            .map_err(|e| GpuError::cuda(self.ordinal, "event wait", e))
    }

    /// The executor description of every opcode of `cfg` cut as `shape` on this GPU,
    /// from the loaded kernels' attributes.
    ///
    /// # Errors
    /// A launch this GPU cannot run.
    pub fn executor_table(
        &self,
        cfg: &radiohost_phy::FrameConfig,
        shape: &radiohost_station::shape::FrameShape,
    ) -> Result<crate::describe::ExecutorTable, GpuError> {
        crate::describe::ExecutorTable::new(&self.spec, cfg, shape, &self.resources())
    }

    /// SMs one instruction of `opcode` reserves on this device (at most its budget).
    ///
    /// # Errors
    /// As [`GpuDevice::executor_table`].
    pub fn sm_need(
        &self,
        opcode: radiohost_station::isa::Opcode,
        cfg: &radiohost_phy::FrameConfig,
        shape: &radiohost_station::shape::FrameShape,
    ) -> Result<u32, GpuError> {
        Ok(self
            .executor_table(cfg, shape)?
            .sm_need(opcode)
            .min(self.sm_budget))
    }

    /// Record an event with timing enabled on the normal (`false`) or low-priority
    /// stream (benchmarks; instruction events are recorded without timing).
    ///
    /// # Errors
    /// A CUDA error.
    pub fn timing_event(&self, low_priority: bool) -> Result<CudaEvent, GpuError> {
        self.stream(low_priority)
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| GpuError::cuda(self.ordinal, "timing event", e))
    }

    /// Milliseconds between two timing events, after waiting for `end`.
    ///
    /// # Errors
    /// A CUDA error of the timed work.
    pub fn elapsed_ms(&self, start: &CudaEvent, end: &CudaEvent) -> Result<f32, GpuError> {
        self.wait_event(end)?;
        start
            .elapsed_ms(end)
            .map_err(|e| GpuError::cuda(self.ordinal, "event timing", e))
    }

    /// Wait until both streams are idle.
    ///
    /// # Errors
    /// The CUDA error of any queued work.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        for s in [&self.high, &self.low] {
            s.synchronize()
                .map_err(|e| GpuError::cuda(self.ordinal, "stream synchronize", e))?;
        }
        Ok(())
    }
}

fn read_spec(ctx: &Arc<CudaContext>, ordinal: usize) -> Result<GpuSpec, GpuError> {
    let a = |attr| {
        ctx.attribute(attr)
            .map(|v| v.max(0) as u32)
            .map_err(|e| GpuError::cuda(ordinal, "device attribute", e))
    };
    let name = ctx
        .name()
        .map_err(|e| GpuError::cuda(ordinal, "device name", e))?;
    // Allocation granularities are those of compute capability 8.x/9.x (h100()).
    Ok(GpuSpec {
        name,
        cc: (
            a(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            a(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sms: a(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_sm: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        max_ctas_per_sm: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        regs_per_sm: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        smem_per_sm: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        max_smem_per_cta: a(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        ..GpuSpec::h100()
    })
}

/// Registers, static shared memory and CTA limit of a loaded kernel; also opts the
/// kernel in to the largest dynamic shared memory the GPU allows.
fn kernel_attributes(
    f: &CudaFunction,
    spec: &GpuSpec,
    ordinal: usize,
    name: &str,
) -> Result<KernelResources, GpuError> {
    let get = |attr| {
        // SAFETY: f is a loaded function of a live module.
        unsafe { result::function::get_function_attribute(f.cu_function(), attr) }
            .map(|v| v.max(0) as u32)
            .map_err(|e| GpuError::cuda(ordinal, format!("attributes of {name}"), e))
    };
    let registers = get(FnAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
    let static_smem = get(FnAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?;
    let max_threads = get(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    let dynamic_max = spec.max_smem_per_cta.saturating_sub(static_smem);
    // SAFETY: as above; the value is within the device's opt-in limit.
    unsafe {
        result::function::set_function_attribute(
            f.cu_function(),
            FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            dynamic_max as i32,
        )
    }
    .map_err(|e| GpuError::cuda(ordinal, format!("shared memory opt-in of {name}"), e))?;
    Ok(KernelResources {
        registers,
        static_smem,
        max_threads,
    })
}
