//! Why a kernel could not be turned into CUDA C.

use thiserror::Error;

/// An error from [`crate::cuda::emit`].
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CudaEmitError {
    /// The kernel still holds an op the optimiser must remove before emission
    /// (`GroupReduce` is lowered, `Call` is inlined).
    #[error(
        "kernel `{kernel}`: `{op}` reached the CUDA emitter; {hint}. Run \
         `tessera_compiler::optimize(kernel, Target::Cuda)` before `cuda::emit`"
    )]
    NotLowered {
        kernel: String,
        op: &'static str,
        hint: &'static str,
    },
    /// The kernel is malformed in a way the verifier should have caught (bad indices,
    /// mismatched types): a compiler bug, or a hand-built kernel.
    #[error("kernel `{kernel}`: malformed IR for the CUDA emitter: {message}")]
    Malformed { kernel: String, message: String },
    /// A construct the CUDA backend does not implement.
    #[error("kernel `{kernel}`: the CUDA backend does not support {what}")]
    Unsupported { kernel: String, what: String },
}
