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

/// Lanes per state row of the decode step and their log2: enough that each lane moves one
/// 16-byte vector of the state (`Dk / lanes` elements), at most a whole simdgroup. An f32
/// state keeps 32 lanes a row; a 2-byte state of Dk 128 takes 16 (two rows a simdgroup).
pub fn decode_lanes(dk: usize, state: DType) -> (u32, u32) {
    if state == DType::F32 {
        return (32, 5);
    }
    let lanes = (dk * state.size_bytes() / 16).clamp(8, 32) as u32;
    (lanes, lanes.trailing_zeros())
}

/// Threadgroups along the value rows when each row takes `lanes` lanes.
pub fn decode_groups(dv: u32, lanes: u32) -> u32 {
    dv.div_ceil(DECODE_ROWS * (32 / lanes))
}
