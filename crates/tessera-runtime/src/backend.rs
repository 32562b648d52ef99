//! The interface every backend implements: device memory, compilation of optimised IR,
//! launches, synchronisation and device-side timing.
//!
//! # Contract
//!
//! - A backend is shared between threads (`Send + Sync`) and used through
//!   `Arc<dyn Backend>`; the [`crate::Context`] wraps it and does every check a launch
//!   needs *before* calling [`Backend::launch`] (argument binding, dtypes, aliasing, grid,
//!   group size against [`DeviceInfo`] and [`CompiledKernel::max_group_size`], threadgroup
//!   memory). A backend may assume those hold; it still reports its own failures as
//!   [`RuntimeError::Backend`] rather than panicking.
//! - Buffers are untyped bytes. [`Backend::alloc`] returns zero-filled memory. A buffer is
//!   freed when the last `Arc` to it drops.
//! - Work is stream-ordered: uploads, launches and downloads on one backend happen in the
//!   order they were issued. [`Backend::launch`] may return before the kernel finishes;
//!   [`Backend::download`] returns once the bytes are on the host; [`Backend::synchronize`]
//!   waits for everything issued so far.
//! - [`Backend::compile`] receives IR that `tessera_compiler::optimize(kernel, target)` has
//!   already transformed for [`BackendKind::target`]. Compilation results are cached by the
//!   context per (kernel, specialisation, backend), so `compile` runs once per key.
//! - Launch arguments come in the order of [`tessera_ir::Kernel::params`]: a buffer for each
//!   tensor parameter, a literal of the declared type for each runtime scalar.
//! - Threadgroups are one-dimensional (`group_size` threads); the grid is three-dimensional.

use crate::error::{Result, RuntimeError};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tessera_compiler::Target;
use tessera_ir::{Kernel, Literal};

/// Which kind of backend runs the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// The lock-step SIMT interpreter: always present, the reference and sanitizer.
    Cpu,
    /// NVIDIA GPUs through NVRTC and the CUDA driver.
    Cuda,
    /// Apple GPUs through the Metal runtime.
    Metal,
    /// Generated MSL run on the CPU under an emulator (checks the Metal emitter off Apple hardware).
    MetalEmu,
}

impl BackendKind {
    /// Every kind, in the order [`crate::Context::new`] prefers them (best first, CPU last).
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Cuda,
        BackendKind::Metal,
        BackendKind::MetalEmu,
        BackendKind::Cpu,
    ];

    /// The spelling used by `TESSERA_BACKEND` and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Metal => "metal",
            BackendKind::MetalEmu => "metal-emu",
        }
    }

    /// Parses `cpu`, `cuda`, `metal` or `metal-emu`.
    pub fn parse(s: &str) -> Option<BackendKind> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim().to_ascii_lowercase())
    }

    /// The names [`BackendKind::parse`] accepts, for error messages.
    pub fn allowed_names() -> String {
        BackendKind::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The compiler target whose pass pipeline prepares IR for this backend.
    pub fn target(self) -> Target {
        match self {
            BackendKind::Cpu => Target::Cpu,
            BackendKind::Cuda => Target::Cuda,
            BackendKind::Metal | BackendKind::MetalEmu => Target::Metal,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a device is and what it allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub kind: BackendKind,
    /// A human-readable device name: `NVIDIA H100 80GB HBM3`, `cpu (16 threads)`.
    pub name: String,
    /// The largest threadgroup the device runs.
    pub max_threads_per_group: u32,
    /// Threadgroup memory available to one threadgroup, in bytes.
    pub max_shared_bytes: usize,
    /// Lanes per simdgroup: 32 on every backend Tessera supports.
    pub simd_width: u32,
    /// Streaming multiprocessors / GPU cores / CPU worker threads.
    pub compute_units: u32,
    /// Device memory in bytes, 0 if unknown.
    pub memory_bytes: u64,
}

/// A block of device memory owned by a backend. Backends downcast it through
/// [`DeviceBuffer::as_any`] to their own type; a buffer from another backend is an error.
pub trait DeviceBuffer: Any + Send + Sync + fmt::Debug {
    /// Size in bytes.
    fn size_bytes(&self) -> usize;
    /// For downcasting to the backend's own buffer type.
    fn as_any(&self) -> &dyn Any;
    /// The device addresses the buffer spans, where the backend has addresses that two
    /// buffers can share (a caller's memory borrowed twice, or a view into a block the
    /// runtime also owns): aliasing checks compare these ranges, not only buffers.
    fn address_range(&self) -> Option<AddressRange> {
        None
    }
}

/// Bytes `start..start + len` of one backend's device address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressRange {
    pub backend: BackendKind,
    pub start: u64,
    pub len: u64,
}

impl AddressRange {
    /// True if both ranges are of one address space and share at least one byte (an
    /// empty range shares none).
    pub fn overlaps(&self, other: &AddressRange) -> bool {
        self.backend == other.backend
            && self.len > 0
            && other.len > 0
            && self.start < other.start.saturating_add(other.len)
            && other.start < self.start.saturating_add(self.len)
    }
}

/// A kernel compiled by one backend, ready to launch.
pub trait CompiledKernel: Any + Send + Sync {
    /// The optimised IR this was compiled from (what the backend runs).
    fn kernel(&self) -> &Kernel;
    /// For downcasting to the backend's own type.
    fn as_any(&self) -> &dyn Any;
    /// Generated sources worth keeping, as `(file extension, text)`: `("cu", …)`,
    /// `("ptx", …)`, `("metal", …)`. `TESSERA_DUMP` writes each next to the IR.
    fn sources(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// A per-kernel threadgroup-size limit below the device's (register pressure), if any.
    fn max_group_size(&self) -> Option<u32> {
        None
    }
}

/// One launch argument, in [`tessera_ir::Kernel::params`] order.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// The buffer bound to a tensor parameter.
    Buffer(&'a dyn DeviceBuffer),
    /// The value of a runtime scalar parameter, of its declared type.
    Scalar(Literal),
}

/// A device that stores buffers and runs compiled kernels. See the module docs for the contract.
pub trait Backend: Send + Sync {
    /// What the device is and what it allows.
    fn info(&self) -> &DeviceInfo;

    /// Allocates `bytes` bytes of zero-filled device memory (`bytes` may be 0).
    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>>;

    /// Allocates `bytes` bytes whose contents are unspecified, for scratch that a kernel
    /// writes before it reads; backends where zeroing costs nothing zero it anyway.
    fn alloc_uninit(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        self.alloc(bytes)
    }

    /// Wraps `bytes` bytes of a caller's device memory at `address` as a buffer that is
    /// never freed here. Backends without caller memory refuse (the default).
    ///
    /// # Safety
    ///
    /// `address..address + bytes` must be device memory of this backend's device, valid
    /// for reads and writes for as long as the returned buffer (or any tensor holding it)
    /// lives and until the work issued with it has finished; nothing else may free or
    /// reuse it meanwhile. See [`crate::Context::borrow_device_memory`].
    unsafe fn borrow_memory(&self, address: u64, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        let _ = (address, bytes);
        Err(RuntimeError::Backend {
            backend: self.info().kind,
            message: "this backend cannot run on a caller's memory; copy the data into a \
                      tensor made by the context instead"
                .into(),
        })
    }

    /// [`Backend::borrow_memory`] where the caller has already established that the
    /// memory is this device's (its owner says so), so the backend need not ask its driver.
    /// Backends that check nothing there use the default, [`Backend::borrow_memory`].
    ///
    /// # Safety
    ///
    /// That of [`Backend::borrow_memory`], and `address` must be this device's memory.
    unsafe fn borrow_vouched_memory(
        &self,
        address: u64,
        bytes: usize,
    ) -> Result<Arc<dyn DeviceBuffer>> {
        // SAFETY: the caller's contract covers `borrow_memory`'s.
        unsafe { self.borrow_memory(address, bytes) }
    }

    /// Copies `src` into `dst` starting at byte `offset`.
    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()>;

    /// Copies `dst.len()` bytes of `src` starting at byte `offset` to the host, after all
    /// work issued before it.
    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()>;

    /// Compiles optimised IR for this device.
    fn compile(&self, kernel: &Kernel) -> Result<Arc<dyn CompiledKernel>>;

    /// Runs `kernel` over `grid` threadgroups of `group_size` threads. The arguments have
    /// been checked against the kernel's parameters by the caller.
    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()>;

    /// Waits until all work issued so far has finished.
    fn synchronize(&self) -> Result<()>;

    /// Times `iters` calls of `f` (each issuing launches) on the device: the elapsed device
    /// time from before the first to after the last, e.g. between two GPU events. Returns
    /// `None` where the backend cannot time on the device (the caller then uses wall-clock
    /// time around [`Backend::synchronize`]). `f`'s errors are returned as they are.
    fn time_launches(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        iters: u32,
    ) -> Result<Option<Duration>>;

    /// Records `launches` calls of `f` into a device graph once, replays the graph
    /// `replays` times and returns the device time of the replays (warm-up excluded),
    /// which shrinks the launch gaps of µs-scale kernels. `None` where the backend has no
    /// graphs (the default). `f` must only launch: a backend refuses allocations, copies
    /// and synchronisation while recording, and then returns the error.
    fn time_graph(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        launches: u32,
        replays: u32,
    ) -> Result<Option<Duration>> {
        let _ = (f, launches, replays);
        Ok(None)
    }

    /// Records the launches `f` issues into a device graph, without running them, for
    /// [`DeviceGraph::replay`] to run them again and again as one submission. `None`, and
    /// `f` not called, where the backend has no graphs (the default). `f` must only
    /// launch: a backend refuses allocations, copies and synchronisation while recording,
    /// and then returns the error (and no graph). Use it through
    /// [`crate::Context::record`], which also keeps the recorded buffers alive.
    fn record(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<Option<Box<dyn DeviceGraph>>> {
        let _ = f;
        Ok(None)
    }

    /// True while [`Backend::time_graph`] (or another graph capture) is recording: a
    /// call may then only launch, so an op whose eager form reads device data back takes
    /// its graph-safe form instead.
    fn recording_graph(&self) -> bool {
        false
    }

    /// The device's last-level cache in bytes, 0 where unknown or irrelevant (benchmarks
    /// rotate input sets to exceed it).
    fn l2_bytes(&self) -> usize {
        0
    }

    /// This backend as the CUDA backend, where it is one: the door to running it on a
    /// caller's stream ([`crate::Context::on_cuda_stream`]).
    fn as_cuda(&self) -> Option<&crate::cuda::CudaBackend> {
        None
    }

    /// This backend as the Metal backend, where it is one: the door to a caller's command
    /// buffer and buffers ([`crate::Context::on_metal_command_buffer`]).
    #[cfg(target_os = "macos")]
    fn as_metal(&self) -> Option<&crate::metal::MetalBackend> {
        None
    }
}

/// Launches recorded by [`Backend::record`], ready to run again on the device in one
/// submission, reading and writing the same buffers each time.
pub trait DeviceGraph {
    /// Issues the recorded launches, stream-ordered after the work issued before.
    fn replay(&self) -> Result<()>;
}

/// Downcasts a buffer to a backend's own buffer type, or says which backend expected it.
pub fn downcast_buffer<B: DeviceBuffer>(
    buf: &dyn DeviceBuffer,
    backend: BackendKind,
) -> Result<&B> {
    downcast(
        buf.as_any(),
        backend,
        "a buffer of another backend",
        "create tensors with the context that launches them",
    )
}

/// Downcasts a compiled kernel to a backend's own type, or says which backend expected it.
pub fn downcast_kernel<K: CompiledKernel>(
    k: &dyn CompiledKernel,
    backend: BackendKind,
) -> Result<&K> {
    downcast(
        k.as_any(),
        backend,
        "a kernel compiled by another backend",
        "launch it through the context that compiled it",
    )
}

/// Downcasts `any` to `T`, or says that `what` was passed to `backend` and how to fix it.
fn downcast<'a, T: 'static>(
    any: &'a dyn Any,
    backend: BackendKind,
    what: &str,
    fix: &str,
) -> Result<&'a T> {
    any.downcast_ref::<T>()
        .ok_or_else(|| RuntimeError::Backend {
            backend,
            message: format!("{what} was passed to the {backend} backend; {fix}"),
        })
}
