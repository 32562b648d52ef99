//! Device memory of the CPU backend: 32-bit atomic words viewed as 8-, 16- or 32-bit
//! elements, so threadgroups running in parallel share it without data races.

use crate::backend::{BackendKind, DeviceBuffer};
use crate::error::{Result, RuntimeError};
use std::alloc::{alloc_zeroed, Layout};
use std::any::Any;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU8, Ordering};

/// A CPU "device" buffer. Every access is a relaxed atomic: kernels that race on device
/// memory get some interleaving of whole elements, never undefined behaviour.
#[derive(Debug)]
pub struct CpuBuffer {
    words: Box<[AtomicU32]>,
    bytes: usize,
}

/// `n` zeroed words from the allocator's zeroed pages (untouched until used), or `None`
/// when the allocator refuses (more than the host can hold) or the size overflows.
fn zeroed_words(n: usize) -> Option<Box<[AtomicU32]>> {
    if n == 0 {
        return Some(Box::new([]));
    }
    let layout = Layout::array::<AtomicU32>(n).ok()?;
    // SAFETY: `layout` has a non-zero size; `alloc_zeroed` returns null or a block for it.
    let p = unsafe { alloc_zeroed(layout) }.cast::<AtomicU32>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` holds `n` zeroed words (zero bits are a valid `AtomicU32`), allocated by
    // the global allocator with `Layout::array::<AtomicU32>(n)`, the layout a
    // `Box<[AtomicU32]>` of `n` elements frees with; nothing else owns it.
    Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) })
}

impl CpuBuffer {
    /// A zero-filled buffer of `bytes` bytes; an error, not an abort, when the host cannot
    /// hold it.
    pub fn new(bytes: usize) -> Result<CpuBuffer> {
        let words = zeroed_words(bytes.div_ceil(4)).ok_or_else(|| RuntimeError::Backend {
            backend: BackendKind::Cpu,
            message: format!(
                "cannot allocate {bytes} bytes ({:.1} GiB): the host has not that much memory free",
                bytes as f64 / (1u64 << 30) as f64
            ),
        })?;
        Ok(CpuBuffer { words, bytes })
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
