//! The Metal device behind [`crate::Backend`]: buffers, compilation into pipeline states,
//! stream-ordered dispatch on one command queue, and GPU timestamps for timing. The device
//! and queue may be a caller's ([`MetalBackend::on_queue`]), and a view may encode into a
//! caller's command buffer instead of committing its own ([`MetalBackend::encoding_into`]).

use super::buffer::MetalBuffer;
use super::library::{Pipeline, PipelineCache};
use crate::backend::{
    downcast_buffer, downcast_kernel, Backend, BackendKind, CompiledKernel, DeviceBuffer,
    DeviceInfo, KernelArg,
};
use crate::error::{Result, RuntimeError};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandBufferStatus, MTLCommandEncoder, MTLCommandQueue,
    MTLComputeCommandEncoder, MTLComputePipelineState, MTLCreateSystemDefaultDevice, MTLDevice,
    MTLResourceOptions, MTLSize,
};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_compiler::msl::{self, MslArg, MslSource};
use tessera_ir::Kernel;

/// Whether two Objective-C references are one object.
fn same_object<T: ?Sized>(a: &T, b: &T) -> bool {
    std::ptr::addr_eq(a as *const T, b as *const T)
}

/// Refuses a command buffer that can no longer take encoders (committed, or done).
fn check_encodable(cb: &ProtocolObject<dyn MTLCommandBuffer>) -> Result<()> {
    let status = cb.status();
    if status != MTLCommandBufferStatus::NotEnqueued && status != MTLCommandBufferStatus::Enqueued {
        return Err(error(
            "the caller's command buffer is already committed; give one that is not",
        ));
    }
    Ok(())
}

fn error(message: impl Into<String>) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::Metal,
        message: message.into(),
    }
}

type CommandBuffer = Retained<ProtocolObject<dyn MTLCommandBuffer>>;

/// Command buffers committed and not yet waited for, plus those a timing run records.
#[derive(Default)]
struct InFlight {
    last: Option<CommandBuffer>,
    recording: Option<Vec<CommandBuffer>>,
}

/// A kernel's MSL and its pipeline state.
pub struct MetalKernel {
    kernel: Kernel,
    source: MslSource,
    pipeline: Pipeline,
}

// SAFETY: compute pipeline states are immutable and thread-safe (Metal's threading rules);
// the rest is plain data.
unsafe impl Send for MetalKernel {}
// SAFETY: as above.
unsafe impl Sync for MetalKernel {}

impl CompiledKernel for MetalKernel {
    fn kernel(&self) -> &Kernel {
        &self.kernel
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn sources(&self) -> Vec<(String, String)> {
        vec![("metal".to_string(), self.source.code.clone())]
    }
    /// The pipeline's own limit (register pressure can put it below the device's 1024).
    fn max_group_size(&self) -> Option<u32> {
        Some(
            self.pipeline
                .maxTotalThreadsPerThreadgroup()
                .min(u32::MAX as usize) as u32,
        )
    }
}

/// A Metal device and the command queue its work is committed to: the system default
/// device and a queue of its own, or a caller's device and queue.
pub struct MetalBackend {
    info: DeviceInfo,
    device: Retained<ProtocolObject<dyn MTLDevice>>,
    queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    pipelines: PipelineCache,
    in_flight: Mutex<InFlight>,
    /// A caller's command buffer that launches encode into, never committed here (the
    /// caller commits it); `None`: each launch commits a command buffer of its own.
    target: Option<CommandBuffer>,
}

// SAFETY: the device, queue and pipeline cache are thread-safe Metal objects; the command
// buffers in `in_flight` are only touched under its mutex.
unsafe impl Send for MetalBackend {}
// SAFETY: as above.
unsafe impl Sync for MetalBackend {}

impl MetalBackend {
    /// Opens the system default device (`ordinal` 0).
    pub fn new(ordinal: usize) -> Result<MetalBackend> {
        let unavailable = |reason: String| RuntimeError::BackendUnavailable {
            backend: BackendKind::Metal,
            reason,
        };
        if ordinal != 0 {
            return Err(unavailable(format!(
                "Metal device {ordinal} requested; only the system default device (0) is supported"
            )));
        }
        let device = MTLCreateSystemDefaultDevice()
            .ok_or_else(|| unavailable("this Mac has no Metal device".into()))?;
        let queue = device
            .newCommandQueue()
            .ok_or_else(|| unavailable("cannot create a Metal command queue".into()))?;
        Ok(MetalBackend::from_parts(device, queue, None))
    }

    /// The backend on a caller's `device`, committing its work to the caller's `queue`, so
    /// it is ordered with the caller's own command buffers on that queue (a Metal queue runs
    /// its command buffers in the order they were committed). Refused when the queue is
    /// another device's.
    pub fn on_queue(
        device: Retained<ProtocolObject<dyn MTLDevice>>,
        queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    ) -> Result<MetalBackend> {
        if !same_object(&*queue.device(), &*device) {
            return Err(error(
                "the command queue belongs to another Metal device than the one given",
            ));
        }
        Ok(MetalBackend::from_parts(device, queue, None))
    }

    /// A view of this backend whose launches encode into the caller's command buffer `cb`
    /// (one compute encoder per launch, ended before the launch returns) and commit
    /// nothing: the caller commits `cb` and waits for it. Refused when `cb` is another
    /// device's, already committed, or does not retain its references (the workspaces a
    /// call makes are released when the call returns; the command buffer must keep them).
    pub fn encoding_into(
        &self,
        cb: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    ) -> Result<MetalBackend> {
        if !same_object(&*cb.device(), &*self.device) {
            return Err(error(
                "the command buffer belongs to another Metal device than this context's",
            ));
        }
        if !cb.retainedReferences() {
            return Err(error(
                "the command buffer does not retain its references (made with \
                 commandBufferWithUnretainedReferences); a call's workspaces are released when \
                 it returns, so make it with commandBuffer()",
            ));
        }
        check_encodable(&cb)?;
        let queue = cb.commandQueue();
        Ok(MetalBackend::from_parts(
            self.device.clone(),
            queue,
            Some(cb),
        ))
    }

    fn from_parts(
        device: Retained<ProtocolObject<dyn MTLDevice>>,
        queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
        target: Option<CommandBuffer>,
    ) -> MetalBackend {
        let max = device.maxThreadsPerThreadgroup();
        let info = DeviceInfo {
            kind: BackendKind::Metal,
            name: device.name().to_string(),
            max_threads_per_group: (max.width.min(1024)) as u32,
            max_shared_bytes: device.maxThreadgroupMemoryLength(),
            simd_width: 32,
            compute_units: 0,
            memory_bytes: device.recommendedMaxWorkingSetSize(),
        };
        MetalBackend {
            info,
            device,
            queue,
            pipelines: PipelineCache::default(),
            in_flight: Mutex::new(InFlight::default()),
            target,
        }
    }

    /// The device this backend runs on.
    pub fn device(&self) -> &ProtocolObject<dyn MTLDevice> {
        &self.device
    }

    /// Refuses what a view encoding into a caller's command buffer cannot do: wait for
    /// its work (the caller has not committed it; waiting would never end) or copy
    /// between the CPU and a buffer (the copy would not be ordered with the encoded work).
    fn not_encoding_into(&self, what: &str) -> Result<()> {
        if self.target.is_some() {
            return Err(error(format!(
                "{what} on a context that encodes into a caller's command buffer: commit the \
                 command buffer, wait for it, and use the context on the queue"
            )));
        }
        Ok(())
    }

    /// Waits for every committed command buffer; reports a failed one.
    fn wait(&self) -> Result<()> {
        let last = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last
            .take();
        if let Some(cb) = last {
            cb.waitUntilCompleted();
            if cb.status() == MTLCommandBufferStatus::Error {
                let why = cb
                    .error()
                    .map(|e| e.localizedDescription().to_string())
                    .unwrap_or_else(|| "unknown error".into());
                return Err(error(format!("a kernel failed on the GPU: {why}")));
            }
        }
        Ok(())
    }

    /// The Metal buffer behind `buf`, refused where the CPU cannot copy through it.
    fn cpu_buffer<'b>(&self, buf: &'b dyn DeviceBuffer, what: &str) -> Result<&'b MetalBuffer> {
        self.not_encoding_into(what)?;
        let b = downcast_buffer::<MetalBuffer>(buf, BackendKind::Metal)?;
        if !b.cpu_access {
            return Err(error(format!(
                "{what} of a borrowed buffer that is not in shared storage: the CPU cannot \
                 reach its bytes; copy it on the GPU (a blit) into a shared buffer"
            )));
        }
        Ok(b)
    }

    fn check_range(buf: &dyn DeviceBuffer, offset: usize, len: usize, what: &str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > buf.size_bytes()) {
            return Err(error(format!(
                "{what} of {len} bytes at offset {offset} does not fit a buffer of {} bytes",
                buf.size_bytes()
            )));
        }
        Ok(())
    }
}

impl Backend for MetalBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<Arc<dyn DeviceBuffer>> {
        // Metal refuses zero-length buffers; an empty tensor binds no buffer at all.
        let buffer = if bytes == 0 {
            None
        } else {
            let b = self
                .device
                .newBufferWithLength_options(bytes, MTLResourceOptions::StorageModeShared)
                .ok_or_else(|| error(format!("cannot allocate a buffer of {bytes} bytes")))?;
            // Fresh buffers are zero-filled, as the Backend contract requires.
            // SAFETY: the new buffer has at least `bytes` bytes of CPU-visible memory and
            // no GPU work uses it yet.
            unsafe { std::ptr::write_bytes(b.contents().as_ptr().cast::<u8>(), 0, bytes) };
            Some(b)
        };
        Ok(Arc::new(MetalBuffer::owned(buffer, bytes)))
    }

    fn upload(&self, dst: &dyn DeviceBuffer, offset: usize, src: &[u8]) -> Result<()> {
        Self::check_range(dst, offset, src.len(), "an upload")?;
        let b = self.cpu_buffer(dst, "an upload")?;
        self.wait()?;
        b.write(offset, src);
        Ok(())
    }

    fn download(&self, src: &dyn DeviceBuffer, offset: usize, dst: &mut [u8]) -> Result<()> {
        Self::check_range(src, offset, dst.len(), "a download")?;
        let b = self.cpu_buffer(src, "a download")?;
        self.wait()?;
        b.read(offset, dst);
        Ok(())
    }

    fn compile(&self, kernel: &Kernel) -> Result<Arc<dyn CompiledKernel>> {
        let source = msl::emit(kernel).map_err(|e| error(e.to_string()))?;
        let pipeline = self.pipelines.get(
            &self.device,
            &source.kernel_name,
            &source.entry,
            &source.code,
        )?;
        Ok(Arc::new(MetalKernel {
            kernel: kernel.clone(),
            source,
            pipeline,
        }))
    }

    fn launch(
        &self,
        kernel: &dyn CompiledKernel,
        args: &[KernelArg<'_>],
        grid: [u32; 3],
        group_size: u32,
    ) -> Result<()> {
        let k = downcast_kernel::<MetalKernel>(kernel, BackendKind::Metal)?;
        let max = k.pipeline.maxTotalThreadsPerThreadgroup();
        if group_size == 0 || group_size as usize > max {
            return Err(RuntimeError::InvalidLaunch {
                kernel: k.source.kernel_name.clone(),
                message: format!(
                    "a threadgroup of {group_size} threads; this kernel's pipeline allows 1..={max}"
                ),
            });
        }
        if args.len() != k.kernel.params.len() {
            return Err(error(format!(
                "`{}` takes {} arguments, {} given",
                k.source.kernel_name,
                k.kernel.params.len(),
                args.len()
            )));
        }
        let cb = match &self.target {
            Some(cb) => {
                check_encodable(cb)?;
                cb.clone()
            }
            None => self
                .queue
                .commandBuffer()
                .ok_or_else(|| error("cannot create a command buffer"))?,
        };
        let enc = cb
            .computeCommandEncoder()
            .ok_or_else(|| error("cannot create a compute encoder"))?;
        enc.setComputePipelineState(&k.pipeline);
        for arg in &k.source.args {
            match arg {
                MslArg::Tensor { param, buffer, .. } => {
                    let KernelArg::Buffer(b) = args[*param] else {
                        enc.endEncoding();
                        return Err(error(format!("argument {param} must be a tensor")));
                    };
                    let b = downcast_buffer::<MetalBuffer>(b, BackendKind::Metal)?;
                    // SAFETY: `buffer` is the index the MSL declares for this parameter, well
                    // below Metal's 31 buffer slots for any kernel the DSL builds.
                    unsafe {
                        enc.setBuffer_offset_atIndex(
                            b.buffer.as_deref(),
                            b.offset,
                            *buffer as usize,
                        )
                    };
                }
                MslArg::Scalar {
                    param, buffer, ty, ..
                } => {
                    let KernelArg::Scalar(l) = args[*param] else {
                        enc.endEncoding();
                        return Err(error(format!("argument {param} must be a scalar")));
                    };
                    let bytes = l.to_bits().to_le_bytes();
                    let n = ty.size_bytes();
                    let ptr = NonNull::from(&bytes).cast();
                    // SAFETY: `ptr` points at `n <= 4` readable bytes that Metal copies
                    // before returning; `buffer` is the MSL's index for this parameter.
                    unsafe { enc.setBytes_length_atIndex(ptr, n, *buffer as usize) };
                }
                MslArg::Builtin(_) => {}
            }
        }
        let size = |w: u32, h: u32, d: u32| MTLSize {
            width: w as usize,
            height: h as usize,
            depth: d as usize,
        };
        enc.dispatchThreadgroups_threadsPerThreadgroup(
            size(grid[0], grid[1], grid[2]),
            size(group_size, 1, 1),
        );
        enc.endEncoding();
        if self.target.is_some() {
            // The caller commits its command buffer.
            return Ok(());
        }
        cb.commit();
        let mut f = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rec) = f.recording.as_mut() {
            rec.push(cb.clone());
        }
        f.last = Some(cb);
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.not_encoding_into("waiting")?;
        self.wait()
    }

    fn as_metal(&self) -> Option<&MetalBackend> {
        Some(self)
    }

    /// GPU time from the first recorded command buffer's start to the last one's end.
    fn time_launches(
        &self,
        f: &mut dyn FnMut() -> Result<()>,
        iters: u32,
    ) -> Result<Option<Duration>> {
        self.not_encoding_into("timing")?;
        self.wait()?;
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recording = Some(Vec::new());
        let mut run = || -> Result<()> {
            for _ in 0..iters {
                f()?;
            }
            self.wait()
        };
        let outcome = run();
        let recorded = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .recording
            .take()
            .unwrap_or_default();
        outcome?;
        let (Some(first), Some(last)) = (recorded.first(), recorded.last()) else {
            return Ok(None);
        };
        let secs = last.GPUEndTime() - first.GPUStartTime();
        Ok((secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs)))
    }
}
