//! Opening the CUDA driver safely: `libcuda` is loaded dynamically (the default
//! `cuda-dynamic-loading` feature), so a machine without it (CI, a laptop) gets a clear
//! error instead of a link failure or a panic.

use cudarc::driver::{result, sys, CudaContext};
use std::sync::Arc;

/// Opens device `ordinal`'s primary context, or says why it cannot.
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, String> {
    // SAFETY: only probes whether a library of the driver's names can be loaded. (Linked
    // at build time instead, the driver is there or the program did not start.)
    #[cfg(feature = "cuda-dynamic-loading")]
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "no CUDA driver: libcuda.so not found (install the NVIDIA driver, or \
                    use the cpu backend)"
                .into(),
        );
    }
    // cudarc panics where the driver lacks a symbol it binds; turn that into an error.
    let opened = std::panic::catch_unwind(|| -> Result<Arc<CudaContext>, String> {
        let count = CudaContext::device_count().map_err(|e| {
            format!("the CUDA driver found no usable GPU (cuInit / cuDeviceGetCount: {e})")
        })?;
        if count <= 0 {
            return Err("the CUDA driver is installed but reports no GPU".into());
        }
        if ordinal >= count as usize {
            return Err(format!(
                "CUDA device {ordinal} does not exist; this machine has {count} (0..{count})"
            ));
        }
        CudaContext::new(ordinal)
            .map_err(|e| format!("creating a context on device {ordinal}: {e}"))
    });
    match opened {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("the CUDA driver could not be used: {what}"))
        }
    }
}

/// The driver's CUDA version as `major * 1000 + minor * 10` (13000 for 13.0).
pub fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: the driver is loaded (a context exists); `v` is valid for one write.
    let _ = unsafe { sys::cuDriverGetVersion(&mut v) };
    v
}

/// Lets device `ordinal`'s default memory pool keep the blocks it gets back instead of
/// returning them to the driver at every synchronisation, so stream-ordered allocations of
/// a repeated call reuse them. Best effort: where the attribute cannot be set the pool still
/// serves allocations, only with less reuse.
pub fn keep_freed_memory(ctx: &Arc<CudaContext>, ordinal: usize) {
    if ctx.bind_to_thread().is_err() {
        return;
    }
    let Ok(device) = result::device::get(ordinal as i32) else {
        return;
    };
    let mut pool = std::mem::MaybeUninit::<sys::CUmemoryPool>::uninit();
    // SAFETY: the context is current; `pool` is written by the call before it is read.
    unsafe {
        if sys::cuDeviceGetDefaultMemPool(pool.as_mut_ptr(), device) != sys::CUresult::CUDA_SUCCESS
        {
            return;
        }
        let mut threshold = u64::MAX;
        let _ = sys::cuMemPoolSetAttribute(
            pool.assume_init(),
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        );
    }
}
