//! The IR crate's error type: what went wrong building, specialising or verifying a kernel.

use crate::kernel::Loc;
use thiserror::Error;

fn at(loc: &Option<Loc>) -> String {
    loc.map(|l| format!(" at line {}:{}", l.line, l.col))
        .unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq, Error)]
pub enum IrError {
    /// The DSL body does not type-check for the dtypes and constexprs it was built with.
    #[error("kernel `{kernel}`{}: {message}", at(.loc))]
    Build {
        kernel: String,
        loc: Option<Loc>,
        message: String,
    },
    /// The dtypes or constexpr values given do not match the kernel's signature.
    #[error("kernel `{kernel}`: {message}")]
    Specialization { kernel: String, message: String },
    /// The verifier found malformed IR (a compiler bug, or a hand-built kernel).
    #[error("kernel `{kernel}` failed verification{}: {message}", at(.loc))]
    Verify {
        kernel: String,
        loc: Option<Loc>,
        message: String,
    },
}
