//! `moe_gemv` and `moe_gemv_silu_mul`: the grouped gather-GEMV of MoE decode. For every
//! (token, slot) pair `p = t·top_k + j` of a [`MoePlan`], `y[t, j, :] = x_row · W[e]ᵀ` with
//! `e = topk_ids[t, j]` and the experts' weights `w` `[experts, N, K]` (torch.nn.Linear's
//! layout per expert). `x_row` is `x[t]` when `x` is `[tokens, K]` (the gate/up
//! projection: every chosen expert sees the token) or `x[t, j]` when it is `[tokens,
//! top_k, K]` (the down projection: each pair has its own input). `moe_gemv_silu_mul`
//! takes the packed gate/up weight `[experts, 2·I, K]` (gate rows first) and writes
//! `silu(x·gateᵀ)·(x·upᵀ)` `[tokens, top_k, I]`, the expert MLP's first half in one pass.
//!
//! Only the chosen experts' weights are read, each once for all the pairs that chose it: a
//! threadgroup takes one slot of the plan's `active_experts` (grid y; a slot holding no
//! expert does nothing) and four output columns (grid x), a simdgroup per column. As in
//! the dense GEMV, a simdgroup walks its weight row (and, gated, the matching up row) in
//! 16-byte runs, lane `l` taking runs `l, l + 32, …`, four at a time loaded before any is
//! used; each run is multiplied into a tile of the expert's pairs' `x` rows (a constexpr
//! of 1, 2, 4 or 8 rows; more pairs take further passes, which find the weights in L2),
//! and a `simd_sum` per row ends the column. f32 accumulation.

use super::permute::MoePlan;
use crate::elementwise::activation::silu_f32;
use crate::error::{runtime, OpError};
use crate::matmul::gemv::run_width;
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, Tensor};

/// Output columns per threadgroup: one per simdgroup.
pub const MOE_COLUMNS_PER_GROUP: u32 = 4;
/// The pair tiles a kernel is compiled for.
pub const MOE_TILES: [u32; 4] = [1, 2, 4, 8];

/// `y[p, col]` for the pairs `p` of the expert in plan slot `group_id_y()`: `n` output
/// columns, `kvecs = K / vec` runs per weight row; `x_per_pair` 1 when `x` has a row per
/// pair, else per token (`p / top_k`); `gated` 1 for the fused SiLU·mul over `[E, 2n, K]`.
/// Grid `[ceil(n / 4), min(experts, pairs), 1]`, 128 threads.
#[kernel]
pub fn moe_gemv_kernel<T>(
    x: Tensor<T>,
    w: Tensor<T>,
    expert_counts: Tensor<u32>,
    expert_offsets: Tensor<u32>,
    sorted_pairs: Tensor<u32>,
    active_experts: Tensor<u32>,
    mut y: Tensor<T>,
    experts: u32,
    n: u32,
    kvecs: u32,
    pairs: u32,
    top_k: u32,
    x_per_pair: u32,
    #[constexpr] tile: u32,
    #[constexpr] vec: u32,
    #[constexpr] gated: u32,
) {
    let lane = simd_lane();
    let col = group_id_x() * 4 + simd_id();
    // The plan's words, one value for the whole simdgroup (the loops below hold `simd_sum`).
    let e = simd_broadcast(load(active_experts[group_id_y()]), 0u32);
    if e < experts {
        // Whatever the plan holds, nothing is read out of bounds.
        let count = simd_broadcast(min(load(expert_counts[e]), pairs), 0u32);
        let start = simd_broadcast(min(load(expert_offsets[e]), pairs - count), 0u32);
        // A simdgroup past the last column reads the last row and stores nothing.
        let wcol = min(col, n - 1);
        let rows = n + gated * n;
        let gate_row = (e * rows + wcol) * kvecs;
        let up_row = (e * rows + n + wcol) * kvecs;
        let pair = stack_array::<u32>(tile);
        let xrow = stack_array::<u32>(tile);
        let acc = stack_array::<f32>(tile);
        let acc_up = stack_array::<f32>(tile);
        let wv = stack_array::<f32>(4 * vec);
        let uv = stack_array::<f32>(4 * vec);
        for c0 in range(0u32, count, tile) {
            for r in 0..tile {
                // Rows of the tile past the expert's pairs repeat its last; their sums are
                // dropped.
                let p = min(
                    load(sorted_pairs[start + min(c0 + r, count - 1)]),
                    pairs - 1,
                );
                store(pair[r], p);
                store(xrow[r], select(x_per_pair == 1u32, p, p / top_k));
                store(acc[r], 0.0f32);
                store(acc_up[r], 0.0f32);
            }
            for v0 in range(lane, kvecs, 128u32) {
                for u in 0..4 {
                    let v = min(v0 + u * 32, kvecs - 1);
                    for i in 0..vec {
                        store(
                            wv[u * vec + i],
                            load(w[(gate_row + v) * vec + i]).cast::<f32>(),
                        );
                    }
                    if gated == 1u32 {
                        for i in 0..vec {
                            store(
                                uv[u * vec + i],
                                load(w[(up_row + v) * vec + i]).cast::<f32>(),
                            );
                        }
                    }
                }
                for u in 0..4 {
                    let v = v0 + u * 32;
                    if v < kvecs {
                        for r in 0..tile {
                            let xb = (load(xrow[r]) * kvecs + v) * vec;
                            let mut s = load(acc[r]);
                            let mut su = load(acc_up[r]);
                            for i in 0..vec {
                                let xi = load(x[xb + i]).cast::<f32>();
                                s = fma(xi, load(wv[u * vec + i]), s);
                                if gated == 1u32 {
                                    su = fma(xi, load(uv[u * vec + i]), su);
                                }
                            }
                            store(acc[r], s);
                            store(acc_up[r], su);
                        }
                    }
                }
            }
            for r in 0..tile {
                let g = simd_sum(load(acc[r]));
                let mut out = g;
                if gated == 1u32 {
                    out = silu_f32(g) * simd_sum(load(acc_up[r]));
                }
                if lane == 0u32 && col < n && c0 + r < count {
                    store(y[load(pair[r]) * n + col], out.cast::<T>());
                }
            }
        }
    }
}

/// The pair tile for `pairs` pairs of `tokens` tokens over `experts` experts: one row at one
/// token (its experts are distinct), else twice the mean pairs per expert, up to 8.
pub fn pair_tile(tokens: usize, pairs: usize, experts: usize) -> u32 {
    if tokens <= 1 {
        return 1;
    }
    let want = (2 * pairs.div_ceil(experts.max(1))).min(8) as u32;
    MOE_TILES.into_iter().find(|&t| t >= want).unwrap_or(8)
}

/// The plan's slots: at most one per expert and one per pair.
pub fn plan_slots(experts: usize, pairs: usize) -> usize {
    experts.min(pairs)
}

/// The shapes of one grouped GEMV call: (tokens, top_k, experts, n, k, x_per_pair).
struct Shape {
    tokens: usize,
    top_k: usize,
    experts: usize,
    n: usize,
    k: usize,
    x_per_pair: bool,
}

fn check(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    plan: &MoePlan,
    y: &Tensor,
    gated: bool,
) -> Result<Shape, OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    dtype_is(op, "w", w, x.dtype())?;
    dtype_is(op, "y", y, x.dtype())?;
    let (experts, pairs) = plan.check(op)?;
    let (tokens, top_k, n) = match *y.shape() {
        [t, k, n] if t > 0 && k > 0 && n > 0 && t * k == pairs => (t, k, n),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`y` must be [tokens, top_k, N] with tokens·top_k = {pairs} (the plan's pairs), got shape {s:?}"),
            ))
        }
    };
    let (k, x_per_pair) = match *x.shape() {
        [t, k] if t == tokens && k > 0 => (k, false),
        [t, j, k] if t == tokens && j == top_k && k > 0 => (k, true),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`x` must be [tokens = {tokens}, K] or [tokens, top_k = {top_k}, K] with K > 0, got shape {s:?}"),
            ))
        }
    };
    let rows = if gated { 2 * n } else { n };
    let what = if gated {
        format!(
            "[experts = {experts}, 2·I = {rows}, K = {k}] (gate rows, then up rows; y has I = {n})"
        )
    } else {
        format!("[experts = {experts}, N = {n}, K = {k}] (y has N = {n})")
    };
    if w.shape() != [experts, rows, k] {
        return Err(OpError::invalid(
            op,
            format!("`w` must be {what}, got shape {:?}", w.shape()),
        ));
    }
    let mut inputs = vec![("x", x), ("w", w)];
    inputs.extend(plan.named());
    distinct_named(op, "y", y, &inputs)?;
    fits_u32(op, "the element count of `w`", w.len())?;
    fits_u32(op, "the element count of `x`", x.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    shape_is(op, "y", y, &[tokens, top_k, n])?;
    Ok(Shape {
        tokens,
        top_k,
        experts,
        n,
        k,
        x_per_pair,
    })
}

/// Checks a call without launching it (the declared ops check before they permute).
pub(super) fn validate(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    plan: &MoePlan,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    check(op, x, w, plan, y, gated).map(|_| ())
}

fn launch(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    plan: &MoePlan,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    let s = check(op, x, w, plan, y, gated)?;
    let pairs = s.tokens * s.top_k;
    let vec = run_width(x.dtype(), s.k);
    let n = s.n as u32;
    moe_gemv_kernel::launch(
        ctx,
        moe_gemv_kernel::Args {
            x,
            w,
            expert_counts: &plan.expert_counts,
            expert_offsets: &plan.expert_offsets,
            sorted_pairs: &plan.sorted_pairs,
            active_experts: &plan.active_experts,
            y,
            experts: s.experts as u32,
            n,
            kvecs: (s.k / vec as usize) as u32,
            pairs: pairs as u32,
            top_k: s.top_k as u32,
            x_per_pair: u32::from(s.x_per_pair),
        },
        moe_gemv_kernel::Consts {
            tile: pair_tile(s.tokens, pairs, s.experts),
            vec,
            gated: u32::from(gated),
        },
    )
    .grid([
        n.div_ceil(MOE_COLUMNS_PER_GROUP),
        plan_slots(s.experts, pairs) as u32,
        1,
    ])
    .group_size(32 * MOE_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(op))
}

/// `y[t, j, :] = x_row · w[topk_ids[t, j]]ᵀ` over the pairs of `plan` (built by
/// [`super::moe_permute`] from those ids): `x` `[tokens, K]` or `[tokens, top_k, K]`, `w`
/// `[experts, N, K]`, `y` `[tokens, top_k, N]`, one float dtype, f32 accumulation.
pub fn moe_gemv(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    plan: &MoePlan,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_gemv", ctx, x, w, plan, y, false)
}

/// `y[t, j, :] = silu(x_row · gateᵀ) · (x_row · upᵀ)` with `w_gate_up` `[experts, 2·I, K]`
/// (expert `e`'s gate rows `0..I`, up rows `I..2·I`) and `y` `[tokens, top_k, I]`.
pub fn moe_gemv_silu_mul(
    ctx: &Context,
    x: &Tensor,
    w_gate_up: &Tensor,
    plan: &MoePlan,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_gemv_silu_mul", ctx, x, w_gate_up, plan, y, true)
}
