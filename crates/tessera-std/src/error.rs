//! The op wrappers' error type: a rejected call (nothing was launched, nothing written) or
//! a failure from the runtime.

use tessera_runtime::RuntimeError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OpError {
    /// The call breaks one of the op's invariants; nothing ran.
    #[error("{op}: {message}")]
    Invalid { op: &'static str, message: String },
    /// The runtime rejected or failed the launch.
    #[error("{op}: {source}")]
    Runtime {
        op: &'static str,
        #[source]
        source: RuntimeError,
    },
}

impl OpError {
    pub fn invalid(op: &'static str, message: impl Into<String>) -> OpError {
        OpError::Invalid {
            op,
            message: message.into(),
        }
    }

    /// True for a call rejected before anything ran (by the wrapper or the launch checks).
    pub fn is_rejection(&self) -> bool {
        match self {
            OpError::Invalid { .. } => true,
            OpError::Runtime { source, .. } => source.is_invalid_launch(),
        }
    }
}

/// Attaches the op name to runtime errors: `launch.run().map_err(runtime("add"))?`.
pub fn runtime(op: &'static str) -> impl Fn(RuntimeError) -> OpError {
    move |source| OpError::Runtime { op, source }
}
