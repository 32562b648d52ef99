//! The inverse RMS of a row, reduced across the threadgroup: written once, inlined into
//! every norm kernel (one form with a group reduction, one through two alternating halves
//! of a slot array for kernels that walk rows).

use tessera_macros::func;

/// `1 / sqrt(sum(partial_ssq over the threadgroup) / n + eps)`; every thread must call it
/// with its own partial sum of squares.
#[func]
pub fn rms_inv(partial_ssq: f32, eps: f32, n: u32) -> f32 {
    let total = group_sum(partial_ssq);
    rsqrt(total / n.cast::<f32>() + eps)
}

/// `1 / sqrt(sum(ssq over the threadgroup) / n + eps)` through the `parity` half of
/// `part` (two halves of `sgs` slots, one per simdgroup): a row walk that alternates the
/// halves needs one barrier per row, as no simdgroup can overwrite a half another is still
/// reading. Every thread must call it with its own sum of squares.
#[func]
pub fn rms_inv_pipelined(
    ssq: f32,
    mut part: Mem<f32>,
    parity: u32,
    sgs: u32,
    n: u32,
    eps: f32,
) -> f32 {
    let sg_ssq = simd_sum(ssq);
    if simd_lane() == 0 {
        store(part[parity * sgs + simd_id()], sg_ssq);
    }
    barrier();
    let mut total = 0.0f32;
    for s in 0..sgs {
        total += load(part[parity * sgs + s]);
    }
    rsqrt(total / n.cast::<f32>() + eps)
}
