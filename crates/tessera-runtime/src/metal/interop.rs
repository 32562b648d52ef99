//! Running on a caller's Metal objects, the Metal side of what
//! [`Context::on_raw_cuda_stream`] and [`Context::borrow_device_memory`] do for CUDA: a
//! context on an engine's `MTLDevice` and `MTLCommandQueue`, a view of it that encodes into
//! the engine's `MTLCommandBuffer`, and the engine's `MTLBuffer`s bound as tensors without a
//! copy. Compiled (type-checked for `aarch64-apple-darwin`), not yet run on a Mac.

use super::backend::MetalBackend;
use super::buffer::MetalBuffer;
use crate::backend::BackendKind;
use crate::context::Context;
use crate::error::{Result, RuntimeError};
use crate::tensor::{self, Tensor};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2::Message;
use objc2_metal::{
    MTLBuffer, MTLCommandBuffer, MTLCommandQueue, MTLDevice, MTLResource, MTLStorageMode,
};
use std::sync::Arc;
use tessera_ir::Scalar as DType;

fn error(message: String) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::Metal,
        message,
    }
}

impl Context {
    /// A Metal context on a caller's `device` whose work is committed, one command buffer
    /// per launch, to the caller's `queue`: ordered after the command buffers the caller
    /// committed to it before, and before those it commits after. Refused when the queue is
    /// another device's.
    pub fn on_metal_queue(
        device: Retained<ProtocolObject<dyn MTLDevice>>,
        queue: Retained<ProtocolObject<dyn MTLCommandQueue>>,
    ) -> Result<Context> {
        Ok(Context::with_backend(Arc::new(MetalBackend::on_queue(
            device, queue,
        )?)))
    }

    /// This Metal context's kernels, encoded into the caller's command buffer `cb` instead
    /// of committed: each launch adds one compute encoder to `cb` and ends it; the caller
    /// commits `cb` (and waits for it) when it chooses. The view shares this context's
    /// compiled kernels. Workspaces a call makes are new buffers that `cb` retains, so `cb`
    /// must retain its references (`commandBuffer()`, not the unretained form). While a
    /// view encodes, the caller must have no encoder of its own open on `cb`. The view
    /// refuses what cannot be ordered with work nobody has committed yet: `synchronize`,
    /// uploads and downloads (`tensor`, `to_vec`, ...) and timing; once `cb` has completed,
    /// read the buffers through the context on the queue (borrowed there again). Like any
    /// context, the view binds only tensors made or borrowed through it.
    pub fn on_metal_command_buffer(
        &self,
        cb: Retained<ProtocolObject<dyn MTLCommandBuffer>>,
    ) -> Result<Context> {
        let metal = self.backend().as_metal().ok_or_else(|| {
            error(format!(
                "only a Metal context encodes into a Metal command buffer; this one is {}",
                self.kind()
            ))
        })?;
        Ok(self.view(Arc::new(metal.encoding_into(cb)?)))
    }

    /// A tensor over `shape` elements of `dtype`, row-major and contiguous, in the caller's
    /// `buffer` from byte `offset`: nothing is copied and the buffer is retained (not
    /// copied, never freed here) for as long as the tensor or a clone lives. Refused when
    /// the buffer is another device's, the offset is not 16-byte aligned (the kernels'
    /// wide loads need it), or the bytes do not fit. The CPU copies in and out only of a
    /// buffer in shared storage; launches bind any. Aliasing checks compare GPU address
    /// ranges (Metal 3), so two overlapping borrows of one buffer are caught. Borrowing
    /// counts as no allocation.
    ///
    /// # Safety
    ///
    /// While work issued with the tensor may run, nothing else — the CPU through
    /// `contents()`, or GPU work the caller does not order with this context's queue or
    /// command buffer — may write the bytes the tensor covers, nor read those the work
    /// writes.
    pub unsafe fn borrow_metal_buffer(
        &self,
        buffer: &ProtocolObject<dyn MTLBuffer>,
        offset: usize,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tensor> {
        let metal = self.backend().as_metal().ok_or_else(|| {
            error(format!(
                "only a Metal context binds a Metal buffer; this one is {}",
                self.kind()
            ))
        })?;
        let bytes = tensor::size_in_bytes(dtype, shape)?;
        if !std::ptr::addr_eq(
            &*buffer.device() as *const ProtocolObject<dyn MTLDevice>,
            metal.device() as *const ProtocolObject<dyn MTLDevice>,
        ) {
            return Err(error(
                "the buffer belongs to another Metal device than this context's".into(),
            ));
        }
        if !offset.is_multiple_of(16) {
            return Err(error(format!(
                "a borrowed {dtype}{shape:?} tensor at byte {offset} of its buffer is not \
                 16-byte aligned; the kernels' wide loads need it"
            )));
        }
        let length = buffer.length();
        if offset.checked_add(bytes).is_none_or(|end| end > length) {
            return Err(error(format!(
                "a borrowed {dtype}{shape:?} tensor ({bytes} bytes) at byte {offset} does not \
                 fit its buffer of {length} bytes"
            )));
        }
        let cpu_access = buffer.storageMode() == MTLStorageMode::Shared;
        let buffer = MetalBuffer {
            buffer: Some(buffer.retain()),
            offset,
            len: bytes,
            cpu_access,
            borrowed: true,
        };
        Ok(Tensor::from_buffer(
            self.backend(),
            Arc::new(buffer),
            dtype,
            shape,
        ))
    }
}
