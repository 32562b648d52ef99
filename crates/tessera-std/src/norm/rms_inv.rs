//! The inverse RMS of a row, reduced across the threadgroup: written once, inlined into
//! every norm kernel (one form with a group reduction, one through two alternating halves
//! of a slot array for kernels that walk rows).
//!
//! A sum of squares in f32 overflows for rows of values past ~1e19 that are themselves
//! far inside f32's range. Every thread therefore also sums its squares scaled by
//! 2⁻⁸⁰ (a power of two: exact), in registers, reduced beside the plain sum in the same
//! pass (one barrier, no rare branch), and used when the plain sum is +∞. Only dtypes
//! with f32's exponents (f32, bf16) need it: for f16 it is compiled out. 2⁻⁸⁰ keeps that
//! sum finite for any finite f32 row of fewer than 2³² elements (each term is below 2⁹⁶)
//! and normal whenever the plain sum overflowed (the largest term is then above 2⁻⁶⁴). A row holding ±∞ keeps the plain path: its other elements
//! are 0 and the infinite one NaN, the IEEE limit.

use tessera_macros::func;

/// `v · 2⁻⁸⁰`, squared: a thread's term of the overflow-free sum of squares.
#[func]
pub fn tiny_square(v: f32) -> f32 {
    let s = v * 8.271_806e-25;
    s * s
}

/// The threadgroup sums of `plain` and, where `wide` (the dtype reaches f32's exponents:
/// [`crate::float_range::f32_range`]), of `tiny`, in one pass with one barrier: each
/// simdgroup's sums go to its slots, and every simdgroup adds the partials up again, lane
/// `l` taking simdgroup `l`'s. Two interleaved shuffle trees instead of a second reduction
/// (and barrier) in a branch: the common path carries no rare branch. Where `wide` is
/// false (a constant of the specialisation) the scaled sum is 0 and costs nothing. Every
/// thread must call it; a caller in a loop must meet a barrier before the next call.
#[func]
pub fn group_sum_pair(plain: f32, tiny: f32, wide: bool) -> (f32, f32) {
    let slots = threadgroup_array::<f32>(64);
    let sp = simd_sum(plain);
    let st = select(wide, simd_sum(tiny), 0.0f32);
    let lane = simd_lane();
    if lane == 0 {
        store(slots[simd_id()], sp);
        if wide {
            store(slots[32 + simd_id()], st);
        }
    }
    barrier();
    let ok = lane < simd_groups();
    let at = select(ok, lane, 0);
    let pp = select(ok, load(slots[at]), -0.0f32);
    let pt = select(ok && wide, load(slots[32 + at]), -0.0f32);
    (simd_sum(pp), select(wide, simd_sum(pt), 0.0f32))
}

/// `1 / sqrt(total / n + eps)` from a row's sum of squares, or, when it overflowed (only
/// where `wide`), from the sum of [`tiny_square`]s (eps, below 2⁻¹²⁸ relative to the mean
/// square then, drops out).
#[func]
pub fn rms_inv_from(total: f32, total_tiny: f32, wide: bool, eps: f32, n: u32) -> f32 {
    let nf = n.cast::<f32>();
    let plain = rsqrt(total / nf + eps);
    let scaled = rsqrt(total_tiny / nf) * 8.271_806e-25;
    select(wide && total > 3.402_823_5e38, scaled, plain)
}

/// `1 / sqrt(sum(partial_ssq over the threadgroup) / n + eps)`; every thread must call it
/// with its own partial sum of squares and the same sum of [`tiny_square`]s, and `wide`
/// for a dtype with f32's exponents (f16 rows cannot overflow: no scaled sum at all).
#[func]
pub fn rms_inv(partial_ssq: f32, partial_ssq_tiny: f32, wide: bool, eps: f32, n: u32) -> f32 {
    let (total, tiny) = group_sum_pair(partial_ssq, partial_ssq_tiny, wide);
    rms_inv_from(total, tiny, wide, eps, n)
}

/// `1 / sqrt(sum(ssq over the threadgroup) / n + eps)` through the `parity` half of
/// `part` (two halves of `2·sgs` slots, a plain and a scaled sum per simdgroup): a row
/// walk that alternates the halves needs one barrier per row, as no simdgroup can
/// overwrite a half another is still reading. Every thread must call it with its own sum
/// of squares and of [`tiny_square`]s. Both sums go through the slots (a branch on a
/// total read from threadgroup memory is not known to be uniform).
#[func]
pub fn rms_inv_pipelined(
    ssq: f32,
    ssq_tiny: f32,
    mut part: Mem<f32>,
    parity: u32,
    sgs: u32,
    n: u32,
    eps: f32,
) -> f32 {
    let sg_ssq = simd_sum(ssq);
    let sg_tiny = simd_sum(ssq_tiny);
    let half = parity * 2 * sgs;
    if simd_lane() == 0 {
        store(part[half + simd_id()], sg_ssq);
        store(part[half + sgs + simd_id()], sg_tiny);
    }
    barrier();
    let mut total = 0.0f32;
    let mut tiny = 0.0f32;
    for s in 0..sgs {
        total += load(part[half + s]);
        tiny += load(part[half + sgs + s]);
    }
    let nf = n.cast::<f32>();
    let plain = rsqrt(total / nf + eps);
    let scaled = rsqrt(tiny / nf) * 8.271_806e-25;
    select(total > 3.402_823_5e38, scaled, plain)
}
