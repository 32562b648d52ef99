//! Device memory of the CUDA backend. A block the runtime owns is stream-ordered (256-byte
//! aligned) from the device's memory pool, handed back to the pool, in stream order, when
//! the last reference drops; the pool keeps freed blocks for the next allocations, so a
//! call that allocates its scratch does not pay `cuMemAlloc`/`cuMemFree` (which
//! synchronises the device) every time. A borrowed block is a caller's memory (a PyTorch
//! tensor, an engine's buffer): wrapped, bound to launches, never freed here.

use crate::backend::{AddressRange, BackendKind, DeviceBuffer};
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::any::Any;
use std::sync::Arc;

/// A block of GPU memory.
pub struct CudaBuffer {
    pub(crate) ptr: sys::CUdeviceptr,
    pub(crate) size: usize,
    ctx: Arc<CudaContext>,
    /// The stream the block was allocated on and is freed on; `None` for a caller's
    /// memory, which its owner frees.
    owner: Option<Arc<CudaStream>>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let whose = if self.owner.is_some() {
            ""
        } else {
            ", borrowed"
        };
        write!(
            f,
            "CudaBuffer({} bytes at 0x{:x}{whose})",
            self.size, self.ptr
        )
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
            owner: Some(stream.clone()),
        })
    }

    /// Wraps `size` bytes of a caller's memory at `ptr` after checking, with the driver,
    /// that `ptr` is device memory of `ordinal` (a host pointer or another GPU's memory
    /// is an error, not a fault inside a kernel). The driver cannot say where the caller's
    /// tensor ends inside its allocation; the caller's contract covers the length.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + size` must stay valid device memory of this context, neither freed nor
    /// reused by its owner, while the buffer lives and until the work issued with it has
    /// finished.
    pub(crate) unsafe fn borrowed(
        ctx: &Arc<CudaContext>,
        ordinal: usize,
        ptr: sys::CUdeviceptr,
        size: usize,
    ) -> Result<CudaBuffer, String> {
        if size > 0 {
            ctx.bind_to_thread().map_err(|e| e.to_string())?;
            let mut device: i32 = -1;
            // SAFETY: `device` is valid for the one `int` the attribute writes; the driver
            // only reads its own records about `ptr`.
            let status = unsafe {
                sys::cuPointerGetAttribute(
                    (&mut device as *mut i32).cast(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                    ptr,
                )
            };
            if status != sys::CUresult::CUDA_SUCCESS {
                return Err(format!(
                    "0x{ptr:x} is not CUDA device memory ({status:?}); pass a tensor on the GPU"
                ));
            }
            if device != ordinal as i32 {
                return Err(format!(
                    "0x{ptr:x} is memory of CUDA device {device}; this context runs on device \
                     {ordinal}"
                ));
            }
        }
        Ok(CudaBuffer {
            ptr,
            size,
            ctx: ctx.clone(),
            owner: None,
        })
    }

    /// Wraps `size` bytes of a caller's memory at `ptr` that the caller has already
    /// established is device memory of this context (its owner said so): the driver is
    /// not asked.
    ///
    /// # Safety
    ///
    /// That of [`CudaBuffer::borrowed`], and `ptr` must be this context's device memory.
    pub(crate) unsafe fn vouched(
        ctx: &Arc<CudaContext>,
        ptr: sys::CUdeviceptr,
        size: usize,
    ) -> CudaBuffer {
        CudaBuffer {
            ptr,
            size,
            ctx: ctx.clone(),
            owner: None,
        }
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        let Some(stream) = &self.owner else {
            return;
        };
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAllocAsync on this stream and is freed once, after
            // all work issued on the stream (every use of the buffer) in stream order.
            let _ = unsafe { result::free_async(self.ptr, stream.cu_stream()) };
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
    fn address_range(&self) -> Option<AddressRange> {
        // Unified addressing: device pointers are unique across the process's GPUs.
        Some(AddressRange {
            backend: BackendKind::Cuda,
            start: self.ptr,
            len: self.size as u64,
        })
    }
}
