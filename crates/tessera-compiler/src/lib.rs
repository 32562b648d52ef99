//! Tessera's compiler: optimisation passes over the IR and per-target source emitters.

pub mod cuda;
pub mod passes;

use tessera_ir::{IrError, Kernel};
use thiserror::Error;

/// What the optimised IR is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    Cpu,
    Cuda,
    Metal,
}

#[derive(Clone, Debug, PartialEq, Error)]
pub enum CompileError {
    #[error(transparent)]
    Ir(#[from] IrError),
}

/// Runs the pass pipeline for `target`. The passes are being assembled; until then the
/// kernel passes through unchanged.
pub fn optimize(kernel: Kernel, _target: Target) -> Result<Kernel, CompileError> {
    Ok(kernel)
}
