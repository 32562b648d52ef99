//! Device memory of the CUDA backend: one stream-ordered block per buffer (256-byte
//! aligned) from the device's memory pool, handed back to the pool, in stream order, when
//! the last reference drops. The pool keeps freed blocks for the next allocations, so a
//! call that allocates its scratch does not pay `cuMemAlloc`/`cuMemFree` (which
//! synchronises the device) every time.

use crate::backend::DeviceBuffer;
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::any::Any;
use std::sync::Arc;

/// A block of GPU memory.
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) size: usize,
    ctx: Arc<CudaContext>,
    /// The stream the block was allocated on and is freed on.
    stream: Arc<CudaStream>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} bytes at 0x{:x})", self.size, self.ptr)
    }
}

impl CudaBuffer {
    /// Allocates `size` bytes (at least one, so every buffer has an address).
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        size: usize,
    ) -> Result<CudaBuffer, String> {
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        // SAFETY: the context is current on this thread and owns the stream; the size is
        // nonzero.
        let ptr = unsafe { result::malloc_async(stream.cu_stream(), size.max(1)) }
            .map_err(|e| format!("cuMemAllocAsync of {size} bytes failed: {e}"))?;
        Ok(CudaBuffer {
            ptr,
            size,
            ctx: ctx.clone(),
            stream: stream.clone(),
        })
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAllocAsync on this stream and is freed once, after
            // all work issued on the stream (every use of the buffer) in stream order.
            let _ = unsafe { result::free_async(self.ptr, self.stream.cu_stream()) };
        }
    }
}

impl DeviceBuffer for CudaBuffer {
    fn size_bytes(&self) -> usize {
        self.size
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
