//! Invariants the Gated DeltaNet ops share: head sizes, the state tensors and the decode
//! geometry.

use crate::error::OpError;
use crate::validate::{shape_is, state_dtype};
use tessera_runtime::{DType, Tensor};

/// State rows (simdgroups) per decode threadgroup.
pub const DECODE_ROWS: u32 = 4;

/// Key head sizes the kernels are specialised for (`Dk / 32` elements per lane).
pub const DK_SUPPORTED: [usize; 3] = [64, 128, 256];

/// `Dk` ∈ {64, 128, 256}.
pub fn check_dk(op: &'static str, dk: usize) -> Result<(), OpError> {
    if DK_SUPPORTED.contains(&dk) {
        return Ok(());
    }
    Err(OpError::invalid(
        op,
        format!("the key head size Dk = {dk} is not supported: Dk must be 64, 128 or 256"),
    ))
}

/// The state tensors: `shape`, one dtype, f32 or the activations' dtype `t`, distinct.
pub fn check_decode_state(
    op: &'static str,
    state_in: &Tensor,
    state_out: &Tensor,
    t: DType,
    shape: &[usize],
) -> Result<(), OpError> {
    state_dtype(op, "state_in", state_in, t)?;
    let sd = state_in.dtype();
    if state_out.dtype() != sd {
        return Err(OpError::invalid(
            op,
            format!(
                "`state_out` must be {sd} like `state_in`, got {}",
                state_out.dtype()
            ),
        ));
    }
    shape_is(op, "state_in", state_in, shape)?;
    shape_is(op, "state_out", state_out, shape)?;
    Ok(())
}

/// Threadgroups along the value rows.
pub fn decode_groups(dv: u32) -> u32 {
    dv.div_ceil(DECODE_ROWS)
}
