//! The inverse RMS of a row, reduced across the threadgroup: written once, inlined into
//! every norm kernel.

use tessera_macros::func;

/// `1 / sqrt(sum(partial_ssq over the threadgroup) / n + eps)`; every thread must call it
/// with its own partial sum of squares.
#[func]
pub fn rms_inv(partial_ssq: f32, eps: f32, n: u32) -> f32 {
    let total = group_sum(partial_ssq);
    rsqrt(total / n.cast::<f32>() + eps)
}
