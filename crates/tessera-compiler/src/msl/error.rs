//! Why a kernel has no MSL: IR the emitter does not accept (ops that earlier passes must
//! remove, or malformed IR from a hand-built kernel).

use thiserror::Error;

/// An emission failure, naming the kernel and the op.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MslError {
    /// An op that the compiler lowers before any backend sees it.
    #[error("kernel `{kernel}`: the MSL emitter does not accept `{op}`; {hint}")]
    NotLowered {
        kernel: String,
        op: String,
        hint: String,
    },
    /// An op the Metal emitter does not translate yet.
    #[error("kernel `{kernel}`: the MSL emitter does not support `{op}` yet; {hint}")]
    Unsupported {
        kernel: String,
        op: String,
        hint: String,
    },
    /// IR the emitter cannot translate (wrong operand types, bad references).
    #[error("kernel `{kernel}`: cannot emit MSL for `{op}`: {message}")]
    Invalid {
        kernel: String,
        op: String,
        message: String,
    },
}
