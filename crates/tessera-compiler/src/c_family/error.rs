//! Why a kernel could not be turned into CUDA C or MSL: one error type for both targets.

use thiserror::Error;

/// An emission failure, naming the target, the kernel and the op.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EmitError {
    /// An op the optimiser must remove before emission (`GroupReduce` is lowered, `Call`
    /// is inlined).
    #[error(
        "kernel `{kernel}`: `{op}` reached the {target} emitter; {hint}. Run \
         `tessera_compiler::optimize` (or `compile`) before emitting"
    )]
    NotLowered {
        target: &'static str,
        kernel: String,
        op: String,
        hint: &'static str,
    },
    /// A construct the target does not implement (an op on a type it has no meaning for).
    #[error("kernel `{kernel}`: the {target} emitter does not support {what} (in `{op}`)")]
    Unsupported {
        target: &'static str,
        kernel: String,
        op: String,
        what: String,
    },
    /// IR the verifier should have refused (bad references, mismatched types): a compiler
    /// bug, or a hand-built kernel.
    #[error("kernel `{kernel}`: malformed IR for the {target} emitter at `{op}`: {message}")]
    Malformed {
        target: &'static str,
        kernel: String,
        op: String,
        message: String,
    },
}
