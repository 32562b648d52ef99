//! RoPE fused into the paged appends: K is rotated on its way into the pages exactly as
//! the `rope` op would rotate it (the rope family's table, pair rule and angle), so one
//! `RopeTable` means the same rotation in both places and `rope` followed by an append
//! writes the same bytes as the fused call. V is never rotated.

use super::paged_append::SlotCheck;
use crate::error::OpError;
use crate::rope::kernels::{rope_angle, rope_pair};
use crate::rope::{RopeLayout, RopeTable};
use crate::validate::{dtype_is, shape_is};
use tessera_macros::func;
use tessera_runtime::{DType, Tensor};

/// Rotate each new key at its token's position before it is written: `positions` u32
/// `[tokens]`, as `rope` takes them, with `table`'s frequencies, layout and rot_dim.
#[derive(Clone, Copy)]
pub struct KeyRope<'a> {
    pub positions: &'a Tensor,
    pub table: &'a RopeTable,
}

/// What an append kernel binds for the rotation: the table (or, unrotated, placeholders
/// the kernel never reads) and the constexprs (`rot_dim` 0: no rotation).
pub(crate) struct RopeLaunch<'a> {
    pub positions: &'a Tensor,
    pub inv_freq: &'a Tensor,
    pub mscale: f32,
    pub rot_dim: u32,
    pub neox: u32,
}

impl<'a> RopeLaunch<'a> {
    /// The launch values of `table` (none: no rotation), `positions` bound as given (or
    /// the check's placeholder where the kernel computes positions itself or does not
    /// rotate).
    pub(crate) fn of(
        table: Option<&'a RopeTable>,
        positions: Option<&'a Tensor>,
        check: &'a SlotCheck,
    ) -> RopeLaunch<'a> {
        let (no_positions, unrotated) = check.placeholders();
        let positions = positions.unwrap_or(no_positions);
        match table {
            None => RopeLaunch {
                positions,
                inv_freq: unrotated,
                mscale: 1.0,
                rot_dim: 0,
                neox: 0,
            },
            Some(t) => RopeLaunch {
                positions,
                inv_freq: &t.inv_freq,
                mscale: t.mscale,
                rot_dim: t.config.rot_dim as u32,
                neox: u32::from(t.config.layout == RopeLayout::NeoX),
            },
        }
    }
}

/// Checks a table against head_dim (rot_dim at most head_dim, as `rope` requires).
pub(crate) fn check_table(
    op: &'static str,
    table: &RopeTable,
    head_dim: usize,
) -> Result<(), OpError> {
    if table.config.rot_dim > head_dim {
        return Err(OpError::invalid(
            op,
            format!(
                "the RoPE table rotates rot_dim = {} dims but head_dim is {head_dim}",
                table.config.rot_dim
            ),
        ));
    }
    Ok(())
}

/// Checks a fused rotation for `tokens` new keys of `head_dim`.
pub(crate) fn check_key_rope(
    op: &'static str,
    rope: &KeyRope,
    tokens: usize,
    head_dim: usize,
) -> Result<(), OpError> {
    dtype_is(op, "positions", rope.positions, DType::U32)?;
    shape_is(op, "positions", rope.positions, &[tokens])?;
    check_table(op, rope.table, head_dim)
}

/// Element `e` of the key head at `head` in `x`, rotated at position `pos` as
/// `rope_kernel` rotates it (in f32, before its rounding to the storage type).
#[allow(clippy::too_many_arguments)]
#[func]
pub fn rotated_element<T>(
    x: Mem<T>,
    head: u32,
    e: u32,
    pos: f32,
    inv_freq: Mem<f32>,
    mscale: f32,
    rot_dim: u32,
    neox: u32,
) -> f32 {
    let rotated = e < rot_dim;
    let (partner, pair, sign) = rope_pair(select(rotated, e, 0), rot_dim, neox);
    let (c, s) = rope_angle(pos, inv_freq, pair);
    let v = load(x[head + e]).cast::<f32>();
    let p = load(x[head + partner]).cast::<f32>();
    select(rotated, (v * c + sign * p * s) * mscale, v)
}
