//! How Tessera's errors become Python exceptions: a call the op or the runtime refuses (a
//! shape, a parameter, an alias) is a `ValueError` with the op's own message; a dtype
//! Python names that Tessera does not know is a `TypeError`; a failure while running is a
//! `RuntimeError`.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::PyErr;
use tessera_runtime::{DType, RuntimeError};
use tessera_std::OpError;

/// A refused or failed op call.
pub fn op_error(e: OpError) -> PyErr {
    if e.is_rejection() {
        PyValueError::new_err(e.to_string())
    } else {
        PyRuntimeError::new_err(e.to_string())
    }
}

/// A refused or failed runtime step, named by `what` (`input q`).
pub fn runtime_error(what: &str, e: RuntimeError) -> PyErr {
    if e.is_invalid_launch() || matches!(e, RuntimeError::InvalidShape { .. }) {
        PyValueError::new_err(format!("{what}: {e}"))
    } else {
        PyRuntimeError::new_err(format!("{what}: {e}"))
    }
}

/// A message from the declaration's own checks (parameters, tensor names).
pub fn invalid(message: String) -> PyErr {
    PyValueError::new_err(message)
}

/// The dtype a name gives: `f32`, `f16`, `bf16`, `u32`, `i32`, `u8`, `i8`, `bool`.
pub fn dtype(name: &str) -> Result<DType, PyErr> {
    DType::parse(name).ok_or_else(|| {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        PyTypeError::new_err(format!(
            "dtype `{name}` is not one Tessera runs; expected one of {}",
            known.join(", ")
        ))
    })
}
