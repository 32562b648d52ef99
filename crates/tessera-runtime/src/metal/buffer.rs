//! Metal buffers in shared storage: the CPU reads and writes them through `contents()`
//! once the GPU work that uses them has finished.

use crate::backend::DeviceBuffer;
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::MTLBuffer;
use std::any::Any;
use std::fmt;

/// A device buffer of the Metal backend.
pub struct MetalBuffer {
    pub(crate) buffer: Option<Retained<ProtocolObject<dyn MTLBuffer>>>,
    pub(crate) len: usize,
}

// SAFETY: Metal resources may be used from any thread (Apple's "Metal threading" rules: only
// command encoders are single-threaded). The CPU touches the bytes only in upload / download,
// after waiting for the queue, so no access races with the GPU or another thread's copy.
unsafe impl Send for MetalBuffer {}
// SAFETY: as above; `&MetalBuffer` only exposes the length and the retained object.
unsafe impl Sync for MetalBuffer {}

impl fmt::Debug for MetalBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MetalBuffer({} bytes)", self.len)
    }
}

impl DeviceBuffer for MetalBuffer {
    fn size_bytes(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl MetalBuffer {
    /// Copies `src` in at byte `offset`. The caller has checked the range and waited for
    /// the GPU.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) {
        if let Some(b) = &self.buffer {
            let base = b.contents().as_ptr().cast::<u8>();
            // SAFETY: `offset + src.len() <= self.len <= b.length()` (checked by the caller);
            // the buffer is shared storage mapped for the CPU; no GPU work uses it now.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(offset), src.len()) };
        }
    }

    /// Copies bytes out from byte `offset`, under the same conditions as [`Self::write`].
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) {
        if let Some(b) = &self.buffer {
            let base = b.contents().as_ptr().cast::<u8>();
            // SAFETY: as in `write`.
            unsafe { std::ptr::copy_nonoverlapping(base.add(offset), dst.as_mut_ptr(), dst.len()) };
        }
    }
}
