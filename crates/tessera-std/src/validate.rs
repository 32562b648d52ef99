//! Checks the op wrappers share: dtypes, shapes and scalar ranges, each failing with a
//! message that says what was expected and what came.

use crate::error::OpError;
use tessera_runtime::{DType, Tensor};

/// The floating-point dtypes the float kernels are instantiated for.
pub const FLOAT_DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// `t` has one of `allowed` dtypes.
pub fn dtype_in(
    op: &'static str,
    name: &str,
    t: &Tensor,
    allowed: &[DType],
) -> Result<(), OpError> {
    if allowed.contains(&t.dtype()) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
    Err(OpError::invalid(
        op,
        format!(
            "`{name}` must be one of {}, got {}",
            names.join(", "),
            t.dtype()
        ),
    ))
}

/// `t` has exactly dtype `want`.
pub fn dtype_is(op: &'static str, name: &str, t: &Tensor, want: DType) -> Result<(), OpError> {
    if t.dtype() == want {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("`{name}` must be {want}, got {}", t.dtype()),
    ))
}

/// `t` has exactly `shape`.
pub fn shape_is(op: &'static str, name: &str, t: &Tensor, shape: &[usize]) -> Result<(), OpError> {
    if t.shape() == shape {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("`{name}` must have shape {shape:?}, got {:?}", t.shape()),
    ))
}

/// `t` is `[rows…, n]` with at least one row: returns (rows, n).
pub fn rows_of(op: &'static str, name: &str, t: &Tensor) -> Result<(usize, usize), OpError> {
    let shape = t.shape();
    let Some((&n, lead)) = shape.split_last() else {
        return Err(OpError::invalid(
            op,
            format!("`{name}` must have at least one dimension [rows…, n], got a scalar"),
        ));
    };
    let rows: usize = lead.iter().product();
    if rows == 0 || n == 0 {
        return Err(OpError::invalid(
            op,
            format!("`{name}` must not be empty, got shape {shape:?}"),
        ));
    }
    Ok((rows, n))
}

/// A count that must fit a u32 kernel index.
pub fn fits_u32(op: &'static str, what: &str, v: usize) -> Result<u32, OpError> {
    u32::try_from(v).map_err(|_| {
        OpError::invalid(
            op,
            format!("{what} is {v}, above the u32 index limit {}", u32::MAX),
        )
    })
}

/// A finite, non-negative epsilon.
pub fn eps_ok(op: &'static str, eps: f32) -> Result<(), OpError> {
    if eps.is_finite() && eps >= 0.0 {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("`eps` must be finite and >= 0, got {eps}"),
    ))
}

/// `out` must not share memory with any input.
pub fn distinct(op: &'static str, out: &Tensor, inputs: &[(&str, &Tensor)]) -> Result<(), OpError> {
    distinct_named(op, "out", out, inputs)
}

/// The output called `output` must not share memory with any input; the message names it.
pub fn distinct_named(
    op: &'static str,
    output: &str,
    out: &Tensor,
    inputs: &[(&str, &Tensor)],
) -> Result<(), OpError> {
    for (name, t) in inputs {
        if out.same_buffer(t) {
            return Err(OpError::invalid(
                op,
                format!("`{output}` aliases `{name}`; pass a separate output tensor"),
            ));
        }
    }
    Ok(())
}

/// A recurrent state tensor: f32, or the activations' dtype `act` (a 2-byte state halves
/// the state traffic).
pub fn state_dtype(
    op: &'static str,
    name: &str,
    state: &Tensor,
    act: DType,
) -> Result<(), OpError> {
    let sd = state.dtype();
    if sd == DType::F32 || sd == act {
        return Ok(());
    }
    let allowed = if act == DType::F32 {
        "f32".to_string()
    } else {
        format!("f32 or {act} (the activations' dtype)")
    };
    Err(OpError::invalid(
        op,
        format!("`{name}` must be {allowed}, got {sd}"),
    ))
}
