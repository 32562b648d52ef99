//! Device memory of the CUDA backend: one `cuMemAlloc` block per buffer (256-byte aligned),
//! freed when the last reference drops.

use crate::backend::DeviceBuffer;
use cudarc::driver::{result, sys, CudaContext};
use std::any::Any;
use std::sync::Arc;

/// A block of GPU memory.
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) size: usize,
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} bytes at 0x{:x})", self.size, self.ptr)
    }
}

impl CudaBuffer {
    /// Allocates `size` bytes (at least one, so every buffer has an address).
    pub(crate) fn new(ctx: &Arc<CudaContext>, size: usize) -> Result<CudaBuffer, String> {
        ctx.bind_to_thread().map_err(|e| e.to_string())?;
        // SAFETY: the context is current on this thread; the size is nonzero.
        let ptr = unsafe { result::malloc_sync(size.max(1)) }
            .map_err(|e| format!("cuMemAlloc of {size} bytes failed: {e}"))?;
        Ok(CudaBuffer {
            ptr,
            size,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed once.
            let _ = unsafe { result::free_sync(self.ptr) };
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
