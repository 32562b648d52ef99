//! [`Context`]: one backend, the tensors made on it, its compile cache, and the entry
//! points for launches.

use crate::backend::{Backend, BackendKind, CompiledKernel, DeviceInfo};
use crate::cache::{CacheEntry, CacheKey, CompileCache};
use crate::dump;
use crate::error::{Result, RuntimeError};
use crate::launch::Launch;
use crate::registry;
use crate::tensor::{self, element_count, Element, Tensor};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tessera_ir::Scalar as DType;
use tessera_ir::{Kernel, KernelDef, Op, Specialization};

struct Inner {
    backend: Arc<dyn Backend>,
    /// Tensors made through this context (see [`Context::allocations`]).
    allocations: AtomicU64,
    /// Shared with this context's views on other streams ([`Context::on_cuda_stream`]).
    cache: Arc<CompileCache>,
    dump_dir: Option<PathBuf>,
    /// While [`Context::record`] runs: the buffers its launches bind, which the
    /// recorded graph keeps alive (see [`crate::graph`]).
    kept: crate::graph::KeptBuffers,
}

/// A handle on one backend. Cloning is cheap and shares the backend and the compile cache.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({})", self.info().name)
    }
}

impl Context {
    /// The backend named by `TESSERA_BACKEND` if set, else the best present: CUDA, Metal,
    /// else the CPU.
    pub fn new() -> Result<Context> {
        if let Some(name) = std::env::var("TESSERA_BACKEND")
            .ok()
            .filter(|s| !s.trim().is_empty())
        {
            return Context::by_name(&name);
        }
        for kind in [BackendKind::Cuda, BackendKind::Metal] {
            if let Ok(backend) = registry::open(kind, 0) {
                return Ok(Context::with_backend(backend));
            }
        }
        Context::by_kind(BackendKind::Cpu, 0)
    }

    /// The CPU backend (always available).
    pub fn cpu() -> Context {
        Context::with_backend(Arc::new(crate::cpu::CpuBackend::new()))
    }

    /// CUDA device `ordinal`.
    pub fn cuda(ordinal: usize) -> Result<Context> {
        Context::by_kind(BackendKind::Cuda, ordinal)
    }

    /// The default Metal device.
    pub fn metal() -> Result<Context> {
        Context::by_kind(BackendKind::Metal, 0)
    }

    /// A backend by its name: `cpu`, `cuda`, `metal` or `metal-emu`.
    pub fn by_name(name: &str) -> Result<Context> {
        let kind = BackendKind::parse(name).ok_or_else(|| RuntimeError::UnknownBackend {
            name: name.to_string(),
            allowed: BackendKind::allowed_names(),
        })?;
        Context::by_kind(kind, 0)
    }

    /// Device `ordinal` of a backend kind.
    pub fn by_kind(kind: BackendKind, ordinal: usize) -> Result<Context> {
        Ok(Context::with_backend(registry::open(kind, ordinal)?))
    }

    /// Wraps a backend someone opened directly.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Context {
        Context {
            inner: Arc::new(Inner {
                backend,
                allocations: AtomicU64::new(0),
                cache: Arc::default(),
                dump_dir: dump::dump_dir_from_env(),
                kept: Default::default(),
            }),
        }
    }

    /// The same CUDA device, its work issued on a caller's `stream` (an engine's cudarc
    /// stream) instead of the context's own: the compiled kernels (loaded modules) and the
    /// PTX cache are shared, so moving between streams never recompiles or reloads, and
    /// making the view synchronises nothing. Tensors made through the view are allocated
    /// and freed in `stream`'s order; the view refuses tensors made by other contexts
    /// (their memory is ordered on another stream), so bind the caller's memory with
    /// [`Context::borrow_device_memory`] and make scratch through the view.
    pub fn on_cuda_stream(
        &self,
        stream: Arc<crate::cuda::cudarc::driver::CudaStream>,
    ) -> Result<Context> {
        let backend = self.cuda_backend()?.on_stream(stream)?;
        Ok(self.view(Arc::new(backend)))
    }

    /// [`Context::on_cuda_stream`] for a raw `CUstream` another library owns (PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`).
    ///
    /// # Safety
    ///
    /// `stream` must be a live stream of this device's primary context (or null, the
    /// legacy default stream), alive while the returned context or anything made
    /// through it is used.
    pub unsafe fn on_raw_cuda_stream(
        &self,
        stream: crate::cuda::cudarc::driver::sys::CUstream,
    ) -> Result<Context> {
        // SAFETY: the caller's contract is the backend's.
        let backend = unsafe { self.cuda_backend()?.on_raw_stream(stream) }?;
        Ok(self.view(Arc::new(backend)))
    }

    fn cuda_backend(&self) -> Result<&crate::cuda::CudaBackend> {
        self.backend()
            .as_cuda()
            .ok_or_else(|| RuntimeError::Backend {
                backend: self.kind(),
                message: "only a CUDA context runs on a caller's CUDA stream; open one with \
                          Context::cuda(ordinal)"
                    .into(),
            })
    }

    /// Another context on `backend` (the same device) sharing this one's compile cache.
    pub(crate) fn view(&self, backend: Arc<dyn Backend>) -> Context {
        Context {
            inner: Arc::new(Inner {
                backend,
                allocations: AtomicU64::new(0),
                cache: self.inner.cache.clone(),
                dump_dir: self.inner.dump_dir.clone(),
                kept: Default::default(),
            }),
        }
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    /// True if `tensor` was made by this context (or a clone of it), so its launches may
    /// bind it.
    pub fn owns(&self, tensor: &Tensor) -> bool {
        tensor.is_on(self.backend())
    }

    /// True while a device graph is being recorded on this context (see
    /// [`crate::Backend::recording_graph`]): only launches may be issued.
    pub fn recording_graph(&self) -> bool {
        self.backend().recording_graph()
    }

    /// The buffers a recording in progress keeps (see [`Context::record`]).
    pub(crate) fn kept(&self) -> &crate::graph::KeptBuffers {
        &self.inner.kept
    }

    pub fn kind(&self) -> BackendKind {
        self.info().kind
    }

    pub fn info(&self) -> &DeviceInfo {
        self.inner.backend.info()
    }

    /// Waits for all work issued so far.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.backend.synchronize()
    }

    // ── tensors ──────────────────────────────────────────────────────────────

    /// How many tensors were made through this context so far: a caller (or a test)
    /// compares it before and after a call to prove the call allocates nothing, as a
    /// call captured in a CUDA graph must not.
    pub fn allocations(&self) -> u64 {
        self.inner.allocations.load(Ordering::Relaxed)
    }

    fn counted(&self) {
        self.inner.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// A tensor holding `data` (row-major) with `shape`.
    pub fn tensor<T: Element>(&self, data: &[T], shape: &[usize]) -> Result<Tensor> {
        let n = element_count(shape)?;
        if n != data.len() {
            return Err(RuntimeError::LengthMismatch {
                what: format!("creating a {} tensor of shape {shape:?}", T::DTYPE),
                expected: n,
                got: data.len(),
            });
        }
        self.counted();
        let t = Tensor::alloc(&self.inner.backend, T::DTYPE, shape)?;
        t.write(data)?;
        Ok(t)
    }

    /// A tensor over a caller's device memory: `shape` elements of `dtype`, row-major and
    /// contiguous, at `address`. Nothing is copied, and the memory is never freed here.
    /// Launches bind it like any tensor of this context; aliasing checks compare its
    /// address range, so two borrowed views of one block are caught. The address must be
    /// 16-byte aligned (the kernels' wide loads assume it) and, on CUDA, device memory of
    /// this context's GPU (the driver is asked); a backend with no caller memory (the CPU
    /// interpreter, Metal) refuses. Borrowing counts as no allocation.
    ///
    /// # Safety
    ///
    /// `address` must point to at least `shape.product() * dtype.size_bytes()` bytes of
    /// this device's memory that stay valid — not freed, not reused by their owner — for
    /// as long as the tensor or any clone of it lives and until the work issued with it
    /// on this context's stream has finished; and no other stream may write them
    /// meanwhile unless the caller orders it with this context's stream.
    pub unsafe fn borrow_device_memory(
        &self,
        address: u64,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.borrow(address, dtype, shape, false) }
    }

    /// [`Context::borrow_device_memory`] for memory whose owner has already said it is
    /// this context's device memory (a PyTorch CUDA tensor on this device): the driver is
    /// not asked again, which saves a driver call per tensor per call. The alignment is
    /// still checked.
    ///
    /// # Safety
    ///
    /// The contract of [`Context::borrow_device_memory`], and `address` must be device
    /// memory of this context's GPU (not host memory, not another GPU's).
    pub unsafe fn borrow_device_memory_vouched(
        &self,
        address: u64,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.borrow(address, dtype, shape, true) }
    }

    /// Both borrows; `vouched`: the caller vouches for the device.
    unsafe fn borrow(
        &self,
        address: u64,
        dtype: DType,
        shape: &[usize],
        vouched: bool,
    ) -> Result<Tensor> {
        let bytes = tensor::size_in_bytes(dtype, shape)?;
        if !address.is_multiple_of(16) {
            return Err(RuntimeError::Backend {
                backend: self.kind(),
                message: format!(
                    "a borrowed {dtype}{shape:?} tensor at 0x{address:x} is not 16-byte \
                     aligned; the kernels' wide loads need it (copy it to a fresh allocation)"
                ),
            });
        }
        // SAFETY: the caller's contract is the backend's.
        let buffer = unsafe {
            if vouched {
                self.inner.backend.borrow_vouched_memory(address, bytes)
            } else {
                self.inner.backend.borrow_memory(address, bytes)
            }
        }?;
        Ok(Tensor::from_buffer(
            &self.inner.backend,
            buffer,
            dtype,
            shape,
        ))
    }

    /// A tensor that has a dtype and a shape but no memory, for deriving shapes (an op's
    /// output specs): no device work, no allocation; binding it to a launch, reading or
    /// writing it is an error.
    pub fn placeholder(&self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let bytes = tensor::size_in_bytes(dtype, shape)?;
        Ok(Tensor::from_buffer(
            &self.inner.backend,
            Arc::new(tensor::Placeholder { bytes }),
            dtype,
            shape,
        ))
    }

    /// A zero-filled tensor.
    pub fn zeros(&self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        self.counted();
        Tensor::alloc(&self.inner.backend, dtype, shape)
    }

    /// A tensor whose contents are unspecified (zero on the CPU backends), for scratch
    /// that the kernels write in full before they read it: no zero-fill on the GPU.
    pub fn scratch(&self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        self.counted();
        Tensor::alloc_uninit(&self.inner.backend, dtype, shape)
    }

    /// A tensor filled with NaN (floats) or all-ones bits (integers): poisons an output so
    /// an element the kernel does not write fails the comparison.
    pub fn full_nan(&self, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        self.counted();
        let t = Tensor::alloc(&self.inner.backend, dtype, shape)?;
        let bytes = tensor::nan_pattern(dtype).repeat(t.len());
        t.write_bytes(&bytes)?;
        Ok(t)
    }

    /// A tensor from raw little-endian bytes of `dtype`.
    pub fn tensor_from_bytes(&self, dtype: DType, bytes: &[u8], shape: &[usize]) -> Result<Tensor> {
        self.counted();
        let t = Tensor::alloc(&self.inner.backend, dtype, shape)?;
        t.write_bytes(bytes)?;
        Ok(t)
    }

    // ── launches ─────────────────────────────────────────────────────────────

    /// Starts a launch of a `#[kernel]`: name its dtypes, constexprs, arguments, grid and
    /// group size, then `.run()`.
    pub fn launch<'a>(&'a self, def: &'a KernelDef) -> Launch<'a> {
        Launch::new(self, crate::launch::Source::Def(def))
    }

    /// Starts a launch of already-built IR (hand-built kernels, pass tests). The IR goes
    /// through the compiler's pipeline unless `.no_optimize()` is called; it is not cached.
    pub fn launch_ir<'a>(&'a self, kernel: &'a Kernel) -> Launch<'a> {
        Launch::new(self, crate::launch::Source::Ir(kernel))
    }

    /// Number of compiled kernels in the cache.
    pub fn cached_kernels(&self) -> usize {
        self.inner.cache.len()
    }

    /// Builds, optimises and compiles `def` for `spec`, or takes it from the cache.
    /// [`Context::compiled`] of the specialisation `(dtypes, constexprs)`, first looked up
    /// among the last few launched by comparing them as they are (no key is built).
    pub(crate) fn compiled_parts(
        &self,
        def: &KernelDef,
        dtypes: &[DType],
        constexprs: Vec<tessera_ir::Literal>,
    ) -> Result<Arc<CacheEntry>> {
        if let Some(e) = self
            .inner
            .cache
            .recent(def, dtypes, &constexprs, self.kind())
        {
            return Ok(e);
        }
        self.compiled(def, Specialization::new(dtypes.to_vec(), constexprs))
    }

    pub(crate) fn compiled(
        &self,
        def: &KernelDef,
        spec: Specialization,
    ) -> Result<Arc<CacheEntry>> {
        let key = CacheKey::new(def, spec, self.kind());
        if let Some(e) = self.inner.cache.get(&key) {
            self.inner.cache.remember(key, e.clone());
            return Ok(e);
        }
        let kernel = def.build(&key.spec)?;
        let names: Vec<&str> = def.signature.params.iter().map(|p| p.name()).collect();
        let entry = Arc::new(self.compile(kernel, true, &names)?);
        self.inner.cache.insert(key.clone(), entry.clone());
        self.inner.cache.remember(key, entry.clone());
        Ok(entry)
    }

    /// Optimises (if asked) and compiles IR whose arguments come in its own parameter order.
    pub(crate) fn compile_ir(&self, kernel: Kernel, optimize: bool) -> Result<CacheEntry> {
        let names: Vec<String> = kernel.params.iter().map(|p| p.name.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.compile(kernel, optimize, &names)
    }

    /// Optimises (if asked) and compiles IR whose launch arguments are named `arg_names`,
    /// and dumps it when `TESSERA_DUMP` is set.
    fn compile(&self, kernel: Kernel, optimize: bool, arg_names: &[&str]) -> Result<CacheEntry> {
        let before_needs = needs_simd_multiple(&kernel);
        let kernel = if optimize {
            tessera_compiler::optimize(kernel, self.kind().target())?
        } else {
            kernel
        };
        let compiled: Arc<dyn CompiledKernel> = self.inner.backend.compile(&kernel)?;
        if let Some(dir) = &self.inner.dump_dir {
            dump::dump(dir, compiled.kernel(), &*compiled)?;
        }
        let mut arg_order = Vec::with_capacity(compiled.kernel().params.len());
        for p in &compiled.kernel().params {
            let Some(pos) = arg_names.iter().position(|n| *n == p.name) else {
                return Err(RuntimeError::InvalidLaunch {
                    kernel: compiled.kernel().specialized_name(),
                    message: format!(
                        "internal: the compiled kernel has a parameter `{}` the signature lacks",
                        p.name
                    ),
                });
            };
            arg_order.push(pos);
        }
        Ok(CacheEntry {
            needs_simd_multiple: before_needs || needs_simd_multiple(compiled.kernel()),
            needs_warpgroups: compiled.kernel().uses_warpgroups(),
            shared_bytes: compiled.kernel().body.shared_bytes(),
            arg_order,
            compiled,
        })
    }
}

/// Simdgroup collectives or threadgroup reductions need whole simdgroups.
fn needs_simd_multiple(k: &Kernel) -> bool {
    k.uses_simdgroups()
        || k.body
            .block
            .any(&mut |op| matches!(op, Op::GroupReduce(..)))
}
