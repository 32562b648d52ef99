//! Where backends are opened by kind: the single place a new backend plugs in.
//!
//! To add a backend, give it a module (`src/cuda/`, `src/metal/`, `src/metal_emu/`), then
//! add an arm to [`open`] that returns it, and make [`open`] return
//! [`RuntimeError::BackendUnavailable`] with a helpful reason when its device or driver is
//! missing: [`crate::Context::new`] tries the kinds in [`BackendKind::ALL`] order and takes
//! the first that opens.

use crate::backend::{Backend, BackendKind};
use crate::cpu::CpuBackend;
use crate::error::{Result, RuntimeError};
use std::sync::Arc;

/// Opens device `ordinal` of backend `kind`.
pub fn open(kind: BackendKind, ordinal: usize) -> Result<Arc<dyn Backend>> {
    match kind {
        BackendKind::Cpu => Ok(Arc::new(CpuBackend::new())),
        // The CUDA backend plugs in here.
        BackendKind::Cuda => crate::cuda::open(ordinal),
        // The Metal backend plugs in here (macOS only).
        #[cfg(target_os = "macos")]
        BackendKind::Metal => crate::metal::open(ordinal),
        #[cfg(not(target_os = "macos"))]
        BackendKind::Metal => Err(unavailable(kind, ordinal)),
        // The Metal emulator plugs in here.
        BackendKind::MetalEmu => Ok(Arc::new(crate::metal_emu::MetalEmuBackend::new()?)),
    }
}

fn unavailable(kind: BackendKind, _ordinal: usize) -> RuntimeError {
    RuntimeError::BackendUnavailable {
        backend: kind,
        reason: "this build of tessera-runtime does not include it; use `cpu`".into(),
    }
}
