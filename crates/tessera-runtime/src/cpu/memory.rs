//! Device memory of the CPU backend: 32-bit atomic words viewed as 8-, 16- or 32-bit
//! elements, so threadgroups running in parallel share it without data races.

use crate::backend::DeviceBuffer;
use std::any::Any;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering};

/// A CPU "device" buffer. Every access is a relaxed atomic: kernels that race on device
/// memory get some interleaving of whole elements, never undefined behaviour.
#[derive(Debug)]
pub struct CpuBuffer {
    words: Box<[AtomicU32]>,
    bytes: usize,
}

impl CpuBuffer {
    /// A zero-filled buffer of `bytes` bytes.
    pub fn new(bytes: usize) -> CpuBuffer {
        let n = bytes.div_ceil(4);
        CpuBuffer {
            words: (0..n).map(|_| AtomicU32::new(0)).collect(),
            bytes,
        }
    }

    /// The buffer as bytes.
    pub fn u8s(&self) -> &[AtomicU8] {
        // SAFETY: `AtomicU8` has the size and alignment of `u8` and may alias the bytes of
        // the `AtomicU32` words it views (both are `UnsafeCell`-based atomics over plain
        // integers). The view covers `bytes <= 4 * words.len()` bytes of the allocation and
        // borrows `self`, so it cannot outlive it. Accesses of different widths to the same
        // bytes only ever occur as concurrent reads (a launch binds one dtype per writable
        // buffer and rejects a written buffer aliased by another argument).
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<AtomicU8>(), self.bytes) }
    }

    /// The buffer as 16-bit elements (a trailing odd byte is not addressable).
    pub fn u16s(&self) -> &[AtomicU16] {
        // SAFETY: as in `u8s`; `AtomicU16` needs 2-byte alignment, which the 4-byte-aligned
        // word allocation provides, and `bytes / 2` elements stay inside it.
        unsafe {
            std::slice::from_raw_parts(self.words.as_ptr().cast::<AtomicU16>(), self.bytes / 2)
        }
    }

    /// The buffer as 32-bit elements (trailing bytes are not addressable).
    pub fn u32s(&self) -> &[AtomicU32] {
        &self.words[..self.bytes / 4]
    }

    /// Copies `src` in at byte `offset`.
    pub fn write_bytes(&self, offset: usize, src: &[u8]) {
        let view = self.u8s();
        for (d, &s) in view[offset..offset + src.len()].iter().zip(src) {
            d.store(s, Ordering::Relaxed);
        }
    }

    /// Copies bytes out from byte `offset`.
    pub fn read_bytes(&self, offset: usize, dst: &mut [u8]) {
        let n = dst.len();
        let view = &self.u8s()[offset..offset + n];
        for (d, s) in dst.iter_mut().zip(view) {
            *d = s.load(Ordering::Relaxed);
        }
    }
}

impl DeviceBuffer for CpuBuffer {
    fn size_bytes(&self) -> usize {
        self.bytes
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
