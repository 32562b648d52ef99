//! Arithmetic whose result has the same bits on every backend, so a seeded draw picks the
//! same token everywhere: only IEEE-rounded `+ − × ÷`, `sqrt` and `floor` (CUDA C is
//! compiled with `--fmad=false`, so `a·b + c` rounds twice there as on the CPU), never a
//! library `exp` (whose last bit differs between CUDA, Metal and the CPU's libm), and sums
//! in one fixed order: a butterfly of lane exchanges (pure data movement), then the
//! simdgroups' partials added in index order — never `group_sum`, whose order is each
//! backend's own.

use tessera_macros::func;

/// `2^n` for an integer `n` in `[-149, 0]`, exactly: a product of the powers `2^-(2^i)`
/// for the bits of `-n` (every partial product is a power of two no smaller than the
/// result, so none rounds).
#[func]
pub fn pow2_neg(n: u32) -> f32 {
    let mut r = 1.0f32;
    r *= select((n & 1u32) != 0u32, 0.5f32, 1.0f32);
    r *= select((n & 2u32) != 0u32, 0.25f32, 1.0f32);
    r *= select((n & 4u32) != 0u32, 0.0625f32, 1.0f32);
    r *= select((n & 8u32) != 0u32, 0.003_906_25f32, 1.0f32);
    r *= select((n & 16u32) != 0u32, 1.525_878_9e-5f32, 1.0f32);
    r *= select((n & 32u32) != 0u32, 2.328_306_436_538_696_3e-10f32, 1.0f32);
    r *= select((n & 64u32) != 0u32, 5.421_010_862_427_522e-20f32, 1.0f32);
    r *= select((n & 128u32) != 0u32, 2.938_735_877_055_719e-39f32, 1.0f32);
    r
}

/// `e^z` for `z ≤ 0` (−∞ gives 0), to about 2⁻²³ relative: `2^(z·log₂e)` split into an
/// integer power (exact, [`pow2_neg`]) and `2^f`, `f ∈ [0, 1)`, by its Taylor polynomial
/// of degree 9 (error below 1e-8) in Horner form. Below 2⁻¹⁴⁹ it is 0.
#[func]
pub fn exp_neg(z: f32) -> f32 {
    let y = z * 1.442_695f32;
    let n = floor(y);
    let f = y - n;
    let g = f * 0.693_147_2f32;
    let mut p = 2.755_732e-6f32;
    p = p * g + 2.480_158_7e-5f32;
    p = p * g + 1.984_127e-4f32;
    p = p * g + 1.388_888_9e-3f32;
    p = p * g + 8.333_333e-3f32;
    p = p * g + 4.166_666_6e-2f32;
    p = p * g + 0.166_666_67f32;
    p = p * g + 0.5f32;
    p = p * g + 1.0f32;
    p = p * g + 1.0f32;
    let tiny = !(y >= -149.0f32);
    let scale = pow2_neg(select(tiny, 0.0f32, -n).cast::<u32>());
    select(tiny, 0.0f32, p * scale)
}

/// The sum of `v` over the threadgroup in one fixed order, returned to every thread: a
/// butterfly over the 32 lanes (each lane adds the same two values, so all lanes agree),
/// then simdgroup `0`'s, `1`'s, … partials in turn. `partial` holds at least one f32 per
/// simdgroup; every thread must call it.
#[func]
pub fn ordered_sum(v: f32, mut partial: Mem<f32>) -> f32 {
    let mut s = v;
    s += simd_shuffle_xor(s, 16u32);
    s += simd_shuffle_xor(s, 8u32);
    s += simd_shuffle_xor(s, 4u32);
    s += simd_shuffle_xor(s, 2u32);
    s += simd_shuffle_xor(s, 1u32);
    if simd_lane() == 0u32 {
        store(partial[simd_id()], s);
    }
    barrier();
    let mut total = 0.0f32;
    for j in 0..simd_groups() {
        total += load(partial[j]);
    }
    barrier();
    // Every thread holds the same total; the maximum says so to the uniformity analysis
    // (a value read from threadgroup memory is not known to be uniform), so a search may
    // branch on it around barriers.
    group_max(total)
}

/// The exclusive prefix sum of `v` over the threads of the group in thread order, in one
/// fixed order (lane exchanges within a simdgroup, the simdgroups' totals added in index
/// order), the thread's end (the next thread's prefix, bit for bit) and the group's total:
/// `(prefix, end, total)`. The threads' ranges `[prefix, end)` tile `[0, total)`; the
/// last thread's end is the total. `partial` as in [`ordered_sum`].
#[func]
pub fn ordered_exclusive_scan(v: f32, mut partial: Mem<f32>) -> (f32, f32, f32) {
    let lane = simd_lane();
    let mut incl = v;
    let mut y = simd_shuffle_up(incl, 1u32);
    incl += select(lane >= 1u32, y, 0.0f32);
    y = simd_shuffle_up(incl, 2u32);
    incl += select(lane >= 2u32, y, 0.0f32);
    y = simd_shuffle_up(incl, 4u32);
    incl += select(lane >= 4u32, y, 0.0f32);
    y = simd_shuffle_up(incl, 8u32);
    incl += select(lane >= 8u32, y, 0.0f32);
    y = simd_shuffle_up(incl, 16u32);
    incl += select(lane >= 16u32, y, 0.0f32);
    let before = simd_shuffle_up(incl, 1u32);
    let excl = select(lane >= 1u32, before, 0.0f32);
    if lane == 31u32 {
        store(partial[simd_id()], incl);
    }
    barrier();
    let mut offset = 0.0f32;
    let mut total = 0.0f32;
    for j in 0..simd_groups() {
        let part = load(partial[j]);
        offset += select(j < simd_id(), part, 0.0f32);
        total += part;
    }
    barrier();
    (offset + excl, offset + incl, total)
}

/// A pivot strictly above `lo` and at most `top` (`lo < top`, both finite), the same on
/// every backend: 0 across a sign change, the geometric mean of two magnitudes more than
/// 4× apart (so a search over values spread across exponents narrows in few steps), else
/// the midpoint; `top` when rounding leaves no value strictly between.
#[func]
pub fn pivot(lo: f32, top: f32) -> f32 {
    let smallest = 1.175_494_4e-38f32;
    let mid = lo * 0.5f32 + top * 0.5f32;
    let up = sqrt(max(lo, smallest)) * sqrt(top);
    let down = -(sqrt(-lo) * sqrt(max(-top, smallest)));
    let spread_up = lo >= 0.0f32 && top > 4.0f32 * lo;
    let spread_down = top <= 0.0f32 && -lo > -4.0f32 * top;
    let p = select(
        lo < 0.0f32 && top > 0.0f32,
        0.0f32,
        select(spread_up, up, select(spread_down, down, mid)),
    );
    select(p > lo && p <= top, p, top)
}
