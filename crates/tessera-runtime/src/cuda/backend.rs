//! [`CudaBackend`]: the runtime's `Backend` on one NVIDIA GPU — memory, compilation
//! (emit → NVRTC → PTX, cached in memory and on disk → module load), launches with the
//! device's limits checked, synchronisation and CUDA-event timing.

use super::buffer::CudaBuffer;
use super::disk_cache;
use super::driver::{driver_version, keep_freed_memory, open_context};
use super::graph::CudaDeviceGraph;
use super::nvrtc::Nvrtc;
use crate::backend::{
    downcast_buffer, downcast_kernel, Backend, BackendKind, CompiledKernel, DeviceBuffer,
    DeviceGraph, DeviceInfo, KernelArg,
};
use crate::error::{Result, RuntimeError};
use crate::grid::check_grid;
use cudarc::driver::sys::{
    self, CUdevice_attribute, CUevent_flags, CUfunction_attribute, CUgraphInstantiate_flags,
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig, CUstreamCaptureMode,
};
use cudarc::driver::{result, CudaContext, CudaFunction, CudaModule, CudaStream};
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera_compiler::cuda::{emit, CudaSource, STATIC_SHARED_LIMIT};
use tessera_ir::Kernel;

const KIND: BackendKind = BackendKind::Cuda;

fn err(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Backend {
        backend: KIND,
        message: message.into(),
    }
}

/// Where a kernel's PTX came from when it was compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxOrigin {
    /// Compiled by NVRTC now.
    Nvrtc,
    /// This backend compiled the same source before.
    Memory,
    /// Read from the on-disk cache.
    Disk,
}

/// How long the steps of one compilation took.
#[derive(Clone, Copy, Debug)]
pub struct CompileTimes {
    pub origin: PtxOrigin,
    /// IR → CUDA C.
    pub emit: Duration,
    /// Getting the PTX: NVRTC, or the cache lookup.
    pub ptx: Duration,
    /// `cuModuleLoadData` (the driver's PTX → SASS step) and function lookup.
    pub load: Duration,
}

impl CompileTimes {
    pub fn total(&self) -> Duration {
        self.emit + self.ptx + self.load
    }
}

/// A kernel compiled for this GPU.
pub struct CudaKernel {
    kernel: Kernel,
    source: CudaSource,
    ptx: Arc<String>,
    arch: String,
    function: CudaFunction,
    _module: Arc<CudaModule>,
    max_threads: u32,
    times: CompileTimes,
}

impl CudaKernel {
    /// The generated CUDA C.
    pub fn cuda_source(&self) -> &CudaSource {
        &self.source
    }
    /// The PTX the module was loaded from.
    pub fn ptx(&self) -> &str {
        &self.ptx
    }
    /// The `compute_XX` architecture it was compiled for.
    pub fn arch(&self) -> &str {
        &self.arch
    }
    /// Where the PTX came from and how long each step took.
    pub fn compile_times(&self) -> CompileTimes {
        self.times
    }
}

impl CompiledKernel for CudaKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn sources(&self) -> Vec<(String, String)> {
        vec![
            ("cu".into(), self.source.source.clone()),
            ("ptx".into(), self.ptx.to_string()),
        ]
    }
    fn max_group_size(&self) -> Option<u32> {
        Some(self.max_threads)
    }
}

/// One NVIDIA GPU, and the stream its work goes to: its own, or a caller's
/// ([`CudaBackend::on_stream`]).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    ordinal: usize,
    stream: Arc<CudaStream>,
    info: DeviceInfo,
    /// `(major, minor)` compute capability.
    capability: (i32, i32),
    driver_version: i32,
    /// Threadgroup memory without opting in (48 KiB).
    default_shared: usize,
    max_grid: [u32; 3],
    /// L2 cache size in bytes.
    l2_bytes: usize,
    /// PTX by cache key, for this backend's lifetime, shared with its views on other
    /// streams.
    ptx_cache: Arc<Mutex<HashMap<String, Arc<String>>>>,
    /// Set while [`Backend::time_graph`] or [`Backend::record`] records the stream: allocations, copies and
    /// synchronisation are refused then (a recorded memset of a buffer freed after the
    /// recording would be replayed into freed memory).
    capturing: AtomicBool,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({})", self.info.name)
    }
}

impl CudaBackend {
    /// Opens CUDA device `ordinal`; `Err(BackendUnavailable)` with the reason where there
    /// is no driver or no such GPU.
    pub fn new(ordinal: usize) -> Result<CudaBackend> {
        let ctx = open_context(ordinal).map_err(|reason| RuntimeError::BackendUnavailable {
            backend: KIND,
            reason,
        })?;
        let attr = |a: CUdevice_attribute| {
            ctx.attribute(a)
                .map_err(|e| err(format!("reading device attribute {a:?}: {e}")))
        };
        let capability = ctx
            .compute_capability()
            .map_err(|e| err(format!("reading the compute capability: {e}")))?;
        let max_threads = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
        let optin =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        let default_shared =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?;
        let sms = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let warp = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?;
        let l2 = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        let max_grid = [
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)? as u32,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)? as u32,
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)? as u32,
        ];
        if warp != 32 {
            return Err(RuntimeError::BackendUnavailable {
                backend: KIND,
                reason: format!("device {ordinal} has warps of {warp} lanes; Tessera needs 32"),
            });
        }
        let name = ctx
            .name()
            .unwrap_or_else(|_| format!("CUDA device {ordinal}"));
        let memory_bytes = ctx.total_mem().unwrap_or(0) as u64;
        let stream = ctx
            .new_stream()
            .map_err(|e| err(format!("creating a stream: {e}")))?;
        keep_freed_memory(&ctx, ordinal);
        Ok(CudaBackend {
            info: DeviceInfo {
                kind: KIND,
                name: format!("{name} (sm_{}{})", capability.0, capability.1),
                max_threads_per_group: max_threads as u32,
                max_shared_bytes: optin.max(default_shared) as usize,
                simd_width: 32,
                compute_units: sms as u32,
                memory_bytes,
            },
            driver_version: driver_version(),
            capability,
            default_shared: default_shared as usize,
            max_grid,
            l2_bytes: l2.max(0) as usize,
            ctx,
            ordinal,
            stream,
            ptx_cache: Arc::new(Mutex::new(HashMap::new())),
            capturing: AtomicBool::new(false),
        })
    }

    /// The same GPU, its work issued on `stream` (a caller's: an engine's, PyTorch's
    /// current stream) instead: the context, the device's facts and the PTX cache are
    /// shared, nothing is compiled or loaded again, and nothing is synchronised. Buffers
    /// this view allocates are allocated and freed in `stream`'s order. `stream` must
    /// belong to this backend's CUDA context (the device's primary context, which PyTorch
    /// and cudarc's `CudaContext::new` use).
    pub fn on_stream(&self, stream: Arc<CudaStream>) -> Result<CudaBackend> {
        if stream.context().cu_ctx() != self.ctx.cu_ctx() {
            return Err(err(format!(
                "the stream belongs to another CUDA context than device {}'s primary \
                 context; create it on that context",
                self.ordinal
            )));
        }
        Ok(CudaBackend {
            ctx: self.ctx.clone(),
            ordinal: self.ordinal,
            stream,
            info: self.info.clone(),
            capability: self.capability,
            driver_version: self.driver_version,
            default_shared: self.default_shared,
            max_grid: self.max_grid,
            l2_bytes: self.l2_bytes,
            ptx_cache: self.ptx_cache.clone(),
            capturing: AtomicBool::new(false),
        })
    }

    /// [`CudaBackend::on_stream`] for a raw `CUstream` another library owns.
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this backend's CUDA context (or null, the legacy
    /// default stream), and stay alive while the returned backend, or anything made
    /// through it, is used.
    pub unsafe fn on_raw_stream(&self, stream: sys::CUstream) -> Result<CudaBackend> {
        // SAFETY: the caller vouches for the stream's context and lifetime; the wrapper
        // never destroys it.
        let wrapped = unsafe { self.ctx.wrap_borrowed_stream(stream) };
        self.on_stream(wrapped)
    }

    /// The CUDA context (the device's primary context).
    pub fn cuda_context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream this backend issues its work on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// The device's `(major, minor)` compute capability.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.capability
    }

    /// The driver's CUDA version (13000 for 13.0).
    pub fn driver_version(&self) -> i32 {
        self.driver_version
    }

    fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| err(format!("binding the CUDA context: {e}")))
    }

    /// The PTX for `src`: from memory, from disk, or from NVRTC (then stored in both).
    fn ptx_for(
        &self,
        src: &CudaSource,
        arch: &str,
        nvrtc: &Nvrtc,
    ) -> Result<(Arc<String>, PtxOrigin)> {
        let (maj, min) = nvrtc.version();
        let key = disk_cache::key(&[
            src.source.as_bytes(),
            src.options.join(" ").as_bytes(),
            arch.as_bytes(),
            format!("nvrtc {maj}.{min} driver {}", self.driver_version).as_bytes(),
        ]);
        let mem = self
            .ptx_cache
            .lock()
            .map_err(|_| err("the PTX cache lock is poisoned"))?;
        if let Some(p) = mem.get(&key) {
            return Ok((p.clone(), PtxOrigin::Memory));
        }
        drop(mem);
        let dir = disk_cache::dir();
        let (ptx, origin) = match dir
            .as_deref()
            .and_then(|d| disk_cache::load(d, &src.entry, &key))
        {
            Some(p) => (Arc::new(p), PtxOrigin::Disk),
            None => {
                let out = nvrtc
                    .compile(&src.source, &src.entry, arch, &src.options)
                    .map_err(|e| err(e.to_string()))?;
                if let Some(d) = &dir {
                    disk_cache::store(d, &src.entry, &key, &out.text);
                }
                (Arc::new(out.text), PtxOrigin::Nvrtc)
            }
        };
        if let Ok(mut mem) = self.ptx_cache.lock() {
            mem.insert(key, ptx.clone());
        }
        Ok((ptx, origin))
    }

    fn compile_kernel(&self, kernel: &Kernel) -> Result<CudaKernel> {
        let t0 = Instant::now();
        let source = emit(kernel).map_err(|e| err(e.to_string()))?;
        let emit_time = t0.elapsed();
        let static_limit = self.default_shared.min(STATIC_SHARED_LIMIT);
        if source.shared_bytes() > self.info.max_shared_bytes {
            return Err(err(format!(
                "kernel `{}` declares {} bytes of threadgroup memory; this GPU allows at most {}",
                kernel.name,
                source.shared_bytes(),
                self.info.max_shared_bytes
            )));
        }
        let nvrtc = Nvrtc::get().map_err(|e| err(e.to_string()))?;
        let arch = nvrtc.arch_for(self.capability.0 * 10 + self.capability.1);
        let t1 = Instant::now();
        let (ptx, origin) = self.ptx_for(&source, &arch, nvrtc)?;
        let ptx_time = t1.elapsed();
        let t2 = Instant::now();
        self.bind()?;
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx.as_str()))
            .map_err(|e| err(format!("loading the PTX of `{}`: {e}", kernel.name)))?;
        let function = module
            .load_function(&source.entry)
            .map_err(|e| err(format!("finding `{}` in its module: {e}", source.entry)))?;
        if source.dynamic_shared_bytes > 0 {
            // Above the default limit a kernel must opt in to its dynamic threadgroup memory.
            let bytes = source.dynamic_shared_bytes.max(static_limit);
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
                .map_err(|e| err(format!("allowing {bytes} bytes of shared memory: {e}")))?;
        }
        let max_threads = function
            .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
            .map_err(|e| err(format!("reading the kernel's thread limit: {e}")))?;
        let load_time = t2.elapsed();
        Ok(CudaKernel {
            kernel: kernel.clone(),
            source,
            ptx,
            arch,
            function,
            _module: module,
            max_threads: max_threads.max(1) as u32,
            times: CompileTimes {
                origin,
                emit: emit_time,
                ptx: ptx_time,
                load: load_time,
            },
        })
    }

    /// Compiles like [`Backend::compile`], returning the concrete kernel (for its sources
    /// and timings).
    pub fn compile_cuda(&self, kernel: &Kernel) -> Result<Arc<CudaKernel>> {
        self.compile_kernel(kernel).map(Arc::new)
    }

    fn range_check(buf: &CudaBuffer, offset: usize, len: usize, what: &str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > buf.size) {
            return Err(err(format!(
                "{what} of {len} bytes at offset {offset} is outside a buffer of {} bytes",
                buf.size
            )));
        }
        Ok(())
    }

    /// Refuses `what` while a graph is being recorded.
    fn not_capturing(&self, what: &str) -> Result<()> {
        if self.capturing.load(Ordering::Acquire) {
            return Err(err(format!(
                "{what} while a graph is being recorded: a recorded closure may only launch"
            )));
        }
        Ok(())
    }

    /// A block from the device's memory pool, on this backend's stream.
    fn alloc_block(&self, bytes: usize) -> Result<CudaBuffer> {
        self.not_capturing("an allocation")?;
        CudaBuffer::new(&self.ctx, &self.stream, bytes).map_err(err)
    }

    /// Records `launches` calls of `f` on the stream into an instantiated graph.
    fn record_graph(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        launches: u32,
    ) -> Result<cudarc::driver::CudaGraph> {
        self.bind()?;
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| err(format!("starting a graph recording: {e}")))?;
        self.capturing.store(true, Ordering::Release);
        let mut recorded = Ok(());
        for _ in 0..launches {
            recorded = f();
            if recorded.is_err() {
                break;
            }
        }
        self.capturing.store(false, Ordering::Release);
        // Always end the recording, so the stream leaves capture mode even after an error.
        let graph = self
            .stream
            .end_capture(CUgraphInstantiate_flags(0))
            .map_err(|e| err(format!("ending a graph recording: {e}")));
        recorded?;
        graph?.ok_or_else(|| err("the graph recording captured nothing"))
    }

    fn sync_err(&self, e: impl std::fmt::Display) -> RuntimeError {
        err(format!(
            "{e}. A kernel fault (out-of-bounds access, `__trap` from a non-positive loop \
             step) leaves the CUDA context unusable; run the launch on the cpu backend to \
             find it"
        ))
    }
}

impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        let buf = self.alloc_block(bytes)?;
        // SAFETY: the buffer holds at least `max(bytes, 1)` bytes; the stream is this context's.
        unsafe { result::memset_d8_async(buf.ptr, 0, buf.size.max(1), self.stream.cu_stream()) }
            .map_err(|e| err(format!("zeroing {bytes} bytes: {e}")))?;
        Ok(Arc::new(buf))
    }

    fn alloc_uninit(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        Ok(Arc::new(self.alloc_block(bytes)?))
    }

    unsafe fn borrow_memory(&self, address: u64, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        // SAFETY: the caller's contract (see `Backend::borrow_memory`) is the buffer's.
        let buf = unsafe { CudaBuffer::borrowed(&self.ctx, self.ordinal, address, bytes) };
        Ok(Arc::new(buf.map_err(err)?))
    }

    unsafe fn borrow_vouched_memory(
        &self,
        address: u64,
        bytes: usize,
    ) -> Result<Arc<dyn DeviceBuffer>> {
        // SAFETY: the caller's contract (memory of this device) is the buffer's.
        let buf = unsafe { CudaBuffer::vouched(&self.ctx, address, bytes) };
        Ok(Arc::new(buf))
    }

    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()> {
        self.not_capturing("an upload")?;
        let buf = downcast_buffer::<CudaBuffer>(dst, KIND)?;
        Self::range_check(buf, offset, src.len(), "an upload")?;
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range was checked; `src` stays borrowed until the stream is synchronised.
        unsafe { result::memcpy_htod_async(buf.ptr + offset as u64, src, self.stream.cu_stream()) }
            .map_err(|e| err(format!("copying {} bytes to the GPU: {e}", src.len())))?;
        self.stream.synchronize().map_err(|e| self.sync_err(e))
    }

    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.not_capturing("a download")?;
        let buf = downcast_buffer::<CudaBuffer>(src, KIND)?;
        Self::range_check(buf, offset, dst.len(), "a download")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        let n = dst.len();
        // SAFETY: the range was checked; `dst` stays borrowed until the stream is synchronised.
        unsafe { result::memcpy_dtoh_async(dst, buf.ptr + offset as u64, self.stream.cu_stream()) }
            .map_err(|e| err(format!("copying {n} bytes from the GPU: {e}")))?;
        self.stream.synchronize().map_err(|e| self.sync_err(e))
    }

    fn compile(&self, kernel: &Kernel) -> Result<Arc<dyn CompiledKernel>> {
        Ok(Arc::new(self.compile_kernel(kernel)?))
    }

    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()> {
        let k = downcast_kernel::<CudaKernel>(kernel, KIND)?;
        let name = &k.kernel.name;
        if group_size == 0 || group_size > k.max_threads {
            return Err(err(format!(
                "`{name}`: {group_size} threads per threadgroup; this kernel allows 1..={} on this GPU",
                k.max_threads
            )));
        }
        check_grid(name, grid, group_size)?;
        for (axis, (&g, &max)) in grid.iter().zip(&self.max_grid).enumerate() {
            if g == 0 || g > max {
                return Err(err(format!(
                    "`{name}`: grid {grid:?} — axis {axis} must be in 1..={max} on this GPU"
                )));
            }
        }
        if args.len() != k.kernel.params.len() {
            return Err(err(format!(
                "`{name}` takes {} arguments, {} given",
                k.kernel.params.len(),
                args.len()
            )));
        }
        // Each argument's bits in a u64: the driver copies as many bytes as the parameter has
        // (little-endian, so the low bytes are the value). Kept on the stack for the usual
        // few arguments (no allocation per launch).
        const ON_STACK: usize = 32;
        let n = args.len();
        let (mut values_stack, mut values_heap) = ([0u64; ON_STACK], Vec::new());
        let values: &mut [u64] = if n <= ON_STACK {
            &mut values_stack[..n]
        } else {
            values_heap.resize(n, 0);
            &mut values_heap
        };
        for (v, a) in values.iter_mut().zip(args) {
            *v = match a {
                KernelArg::Buffer(b) => downcast_buffer::<CudaBuffer>(*b, KIND)?.ptr,
                KernelArg::Scalar(l) => l.to_bits() as u64,
            };
        }
        let (mut params_stack, mut params_heap) = ([std::ptr::null_mut(); ON_STACK], Vec::new());
        let params: &mut [*mut c_void] = if n <= ON_STACK {
            &mut params_stack[..n]
        } else {
            params_heap.resize(n, std::ptr::null_mut());
            &mut params_heap
        };
        for (p, v) in params.iter_mut().zip(values.iter_mut()) {
            *p = (v as *mut u64).cast::<c_void>();
        }
        // From sm_90 every launch may overlap the end of the kernel before it: the emitted
        // kernel waits for that grid (`griddepcontrol.wait`) before touching memory.
        // SAFETY: a plain-old-data union; zero is a valid value of each field.
        let mut overlap: CUlaunchAttribute = unsafe { std::mem::zeroed() };
        overlap.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        overlap.value.programmaticStreamSerializationAllowed = 1;
        let cfg = CUlaunchConfig {
            gridDimX: grid[0],
            gridDimY: grid[1],
            gridDimZ: grid[2],
            blockDimX: group_size,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: k.source.dynamic_shared_bytes as u32,
            hStream: self.stream.cu_stream(),
            attrs: &mut overlap,
            numAttrs: u32::from(self.capability.0 >= 9),
        };
        self.bind()?;
        // SAFETY: the arguments match the kernel's parameters in number and size (pointers
        // are u64 device addresses of live buffers of this context; scalars are the
        // parameter's own width, read from the low bytes), the geometry was checked, and
        // `params`, `values` and `overlap` outlive the call.
        unsafe {
            sys::cuLaunchKernelEx(
                &cfg,
                k.function.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| err(format!("launching `{name}`: {e}")))?;
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.not_capturing("a synchronisation")?;
        self.bind()?;
        self.stream.synchronize().map_err(|e| self.sync_err(e))
    }

    fn time_launches(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        iters: u32,
    ) -> Result<Option<Duration>> {
        self.bind()?;
        // Timing events: the default flags (cudarc's own default disables timing).
        let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = self
            .ctx
            .new_event(timed)
            .map_err(|e| err(format!("creating an event: {e}")))?;
        let end = self
            .ctx
            .new_event(timed)
            .map_err(|e| err(format!("creating an event: {e}")))?;
        start
            .record(&self.stream)
            .map_err(|e| err(format!("recording an event: {e}")))?;
        for _ in 0..iters {
            f()?;
        }
        end.record(&self.stream)
            .map_err(|e| err(format!("recording an event: {e}")))?;
        end.synchronize().map_err(|e| self.sync_err(e))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| err(format!("reading the event timer: {e}")))?;
        Ok(Some(Duration::from_secs_f64(ms as f64 / 1e3)))
    }

    fn recording_graph(&self) -> bool {
        // A caller may be capturing its stream (`torch.cuda.graph`) without telling us.
        // SAFETY: the stream is live while this backend is (its owner's contract for a
        // borrowed one); the query changes nothing.
        self.capturing.load(Ordering::Acquire)
            || unsafe { result::stream::is_capturing(self.stream.cu_stream()) }
                .is_ok_and(|s| s != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }

    fn time_graph(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        launches: u32,
        replays: u32,
    ) -> Result<Option<Duration>> {
        let graph = self.record_graph(f, launches.max(1))?;
        graph
            .upload()
            .map_err(|e| err(format!("uploading a graph: {e}")))?;
        // One untimed replay: the first launch of a graph pays for its setup.
        graph
            .launch()
            .map_err(|e| err(format!("replaying a graph: {e}")))?;
        let mut replay = || {
            graph
                .launch()
                .map_err(|e| err(format!("replaying a graph: {e}")))
        };
        self.time_launches(&mut replay, replays.max(1))
    }

    fn record(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Option<Box<dyn DeviceGraph>>> {
        let graph = self.record_graph(f, 1)?;
        Ok(Some(Box::new(CudaDeviceGraph::new(graph)?)))
    }

    fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    fn as_cuda(&self) -> Option<&CudaBackend> {
        Some(self)
    }
}
