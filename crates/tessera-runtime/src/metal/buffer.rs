//! Metal buffers: the backend's own, in shared storage, and a caller's `MTLBuffer`
//! borrowed from a byte offset (see [`crate::Context::borrow_metal_buffer`]). The CPU reads
//! and writes shared-storage bytes through `contents()` once the GPU work that uses them
//! has finished; other storage modes are the GPU's alone.

use crate::backend::{AddressRange, BackendKind, DeviceBuffer};
use objc2::rc::Retained;
use objc2::runtime::{NSObjectProtocol, ProtocolObject};
use objc2::sel;
use objc2_metal::MTLBuffer;
use std::any::Any;
use std::fmt;

/// A device buffer of the Metal backend: `len` bytes of `buffer` from byte `offset`.
pub struct MetalBuffer {
    pub(crate) buffer: Option<Retained<ProtocolObject<dyn MTLBuffer>>>,
    /// Where the tensor's bytes start in `buffer` (0 for the backend's own buffers).
    pub(crate) offset: usize,
    pub(crate) len: usize,
    /// Shared storage: the CPU may copy in and out through `contents()`.
    pub(crate) cpu_access: bool,
    /// A caller's buffer: aliasing checks compare its GPU address range.
    pub(crate) borrowed: bool,
}

// SAFETY: Metal resources may be used from any thread (Apple's "Metal threading" rules: only
// command encoders are single-threaded). The CPU touches the bytes only in upload / download,
// after waiting for the queue, so no access races with the GPU or another thread's copy.
unsafe impl Send for MetalBuffer {}
// SAFETY: as above; `&MetalBuffer` only exposes the length and the retained object.
unsafe impl Sync for MetalBuffer {}

impl fmt::Debug for MetalBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MetalBuffer({} bytes at {})", self.len, self.offset)
    }
}

impl DeviceBuffer for MetalBuffer {
    fn size_bytes(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    /// A borrowed buffer's bytes in the device's GPU address space (Metal 3,
    /// `MTLBuffer.gpuAddress`), so two borrows of one `MTLBuffer` that overlap are caught;
    /// `None` where the OS lacks it (the same borrowed tensor is still caught) and for the
    /// backend's own buffers, which nothing else can bind.
    fn address_range(&self) -> Option<AddressRange> {
        let b = self.buffer.as_ref().filter(|_| self.borrowed)?;
        if !b.respondsToSelector(sel!(gpuAddress)) {
            return None;
        }
        Some(AddressRange {
            backend: BackendKind::Metal,
            start: b.gpuAddress().checked_add(self.offset as u64)?,
            len: self.len as u64,
        })
    }
}

impl MetalBuffer {
    /// The backend's own buffer of `len` bytes (`None`: an empty one).
    pub(crate) fn owned(
        buffer: Option<Retained<ProtocolObject<dyn MTLBuffer>>>,
        len: usize,
    ) -> Self {
        MetalBuffer {
            buffer,
            offset: 0,
            len,
            cpu_access: true,
            borrowed: false,
        }
    }

    /// Copies `src` in at byte `offset`. The caller has checked the range, that the buffer
    /// is CPU-visible ([`Self::cpu_access`]) and waited for the GPU.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) {
        if let Some(b) = &self.buffer {
            let base = b.contents().as_ptr().cast::<u8>();
            // SAFETY: `self.offset + offset + src.len() <= self.offset + self.len <=
            // b.length()` (the range checked by the caller, the borrow by
            // `borrow_metal_buffer`); the buffer is shared storage mapped for the CPU; no
            // GPU work uses it now.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.as_ptr(),
                    base.add(self.offset + offset),
                    src.len(),
                )
            };
        }
    }

    /// Copies bytes out from byte `offset`, under the same conditions as [`Self::write`].
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) {
        if let Some(b) = &self.buffer {
            let base = b.contents().as_ptr().cast::<u8>();
            // SAFETY: as in `write`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    base.add(self.offset + offset),
                    dst.as_mut_ptr(),
                    dst.len(),
                )
            };
        }
    }
}
