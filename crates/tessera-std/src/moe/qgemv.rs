//! `moe_qgemv` and `moe_qgemv_silu_mul`: the grouped gather-GEMV of [`super::gemv`] over
//! experts quantized in MLX's affine format: `packed` `[experts, N, K·bits/32]` u32 with
//! `scales` and `biases` `[experts, N, K/group_size]` in the activations' dtype (an MLX
//! `SwitchLinear`'s tensors, one `[N, K]` matrix per expert), never dequantized to memory.
//! The walk is the plan's, as in the dense form (a threadgroup per chosen expert and four
//! columns, each expert's weights read once for all its pairs); within a row it is the
//! quantized GEMV's: lanes take units of 32 values (`bits` whole words, one 16-byte load
//! at 4 bits), two at a time, and dequantize eight values at a time through the quant
//! family's `affine_weight`, `w = scale·q + bias` in f32, before multiplying them into the
//! tile of the expert's pairs' `x` rows. Gated: the gate and up rows side by side, and
//! `silu(gate)·up` before the store.

use super::gemv::{pair_tile, plan_slots, MOE_COLUMNS_PER_GROUP};
use super::permute::MoePlan;
use crate::elementwise::activation::silu_f32;
use crate::error::{runtime, OpError};
use crate::quant::format::AffineFormat;
use crate::quant::qgemv::affine_weight;
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::kernel;
use tessera_runtime::{Context, DType, Tensor};

/// `y[p, col]` for the pairs `p` of the expert in plan slot `group_id_y()`: `n` output
/// columns, `units = K / 32` units per weight row, `units_per_group = group_size / 32`.
/// Grid `[ceil(n / 4), min(experts, pairs), 1]`, 128 threads.
#[kernel]
pub fn moe_qgemv_kernel<T>(
    x: Tensor<T>,
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    expert_counts: Tensor<u32>,
    expert_offsets: Tensor<u32>,
    sorted_pairs: Tensor<u32>,
    active_experts: Tensor<u32>,
    mut y: Tensor<T>,
    experts: u32,
    n: u32,
    units: u32,
    units_per_group: u32,
    pairs: u32,
    top_k: u32,
    x_per_pair: u32,
    #[constexpr] tile: u32,
    #[constexpr] bits: u32,
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
        let wcol = min(col, n - 1);
        let gate_row = e * (n + gated * n) + wcol;
        let up_row = gate_row + n;
        let groups = units / units_per_group;
        let pair = stack_array::<u32>(tile);
        let xrow = stack_array::<u32>(tile);
        let acc = stack_array::<f32>(tile);
        let acc_up = stack_array::<f32>(tile);
        let words = stack_array::<u32>(2 * bits);
        let up_words = stack_array::<u32>(2 * bits);
        let sb = stack_array::<f32>(4);
        let up_sb = stack_array::<f32>(4);
        let wv = stack_array::<f32>(8);
        let uv = stack_array::<f32>(8);
        for c0 in range(0u32, count, tile) {
            for r in 0..tile {
                let p = min(
                    load(sorted_pairs[start + min(c0 + r, count - 1)]),
                    pairs - 1,
                );
                store(pair[r], p);
                store(xrow[r], select(x_per_pair == 1u32, p, p / top_k));
                store(acc[r], 0.0f32);
                store(acc_up[r], 0.0f32);
            }
            // Two units per lane per step, loaded before either is used; a unit past the
            // row's end loads the last unit again and is skipped.
            for u0 in range(lane, units, 64u32) {
                for h in 0..2 {
                    let u = min(u0 + h * 32, units - 1);
                    for i in 0..bits {
                        store(
                            words[h * bits + i],
                            load(packed[(gate_row * units + u) * bits + i]),
                        );
                    }
                    let gi = gate_row * groups + u / units_per_group;
                    store(sb[2 * h], load(scales[gi]).cast::<f32>());
                    store(sb[2 * h + 1], load(biases[gi]).cast::<f32>());
                    if gated == 1u32 {
                        for i in 0..bits {
                            store(
                                up_words[h * bits + i],
                                load(packed[(up_row * units + u) * bits + i]),
                            );
                        }
                        let ui = up_row * groups + u / units_per_group;
                        store(up_sb[2 * h], load(scales[ui]).cast::<f32>());
                        store(up_sb[2 * h + 1], load(biases[ui]).cast::<f32>());
                    }
                }
                for h in 0..2 {
                    let u = u0 + h * 32;
                    if u < units {
                        for part in 0..4 {
                            for j in 0..8 {
                                let bit = (part * 8 + j) * bits;
                                let at = bit % 32;
                                let w0 = h * bits + bit / 32;
                                // The last word never starts a straddling value.
                                let w1 = h * bits + min(bit / 32 + 1, bits - 1);
                                store(
                                    wv[j],
                                    affine_weight(
                                        load(words[w0]),
                                        load(words[w1]),
                                        at,
                                        bits,
                                        load(sb[2 * h]),
                                        load(sb[2 * h + 1]),
                                    ),
                                );
                                if gated == 1u32 {
                                    store(
                                        uv[j],
                                        affine_weight(
                                            load(up_words[w0]),
                                            load(up_words[w1]),
                                            at,
                                            bits,
                                            load(up_sb[2 * h]),
                                            load(up_sb[2 * h + 1]),
                                        ),
                                    );
                                }
                            }
                            for r in 0..tile {
                                let xb = ((load(xrow[r]) * units + u) * 4 + part) * 8;
                                let mut s = load(acc[r]);
                                let mut su = load(acc_up[r]);
                                for j in 0..8 {
                                    let xi = load(x[xb + j]).cast::<f32>();
                                    s = fma(load(wv[j]), xi, s);
                                    if gated == 1u32 {
                                        su = fma(load(uv[j]), xi, su);
                                    }
                                }
                                store(acc[r], s);
                                store(acc_up[r], su);
                            }
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

/// The quantized experts of one call.
#[derive(Clone, Copy)]
pub struct AffineExperts<'a> {
    /// `[experts, rows, K·bits/32]` u32 codes.
    pub packed: &'a Tensor,
    /// `[experts, rows, K/group_size]`, the activations' dtype.
    pub scales: &'a Tensor,
    /// Like `scales`.
    pub biases: &'a Tensor,
    pub bits: u32,
    pub group_size: u32,
}

/// (experts, pairs, tokens, top_k, n, k, x_per_pair) of a checked call.
type Checked = (usize, usize, usize, usize, usize, usize, bool);

/// Checks a call without launching it (the declared ops check before they permute).
pub(super) fn check(
    op: &'static str,
    x: &Tensor,
    w: &AffineExperts,
    plan: &MoePlan,
    y: &Tensor,
    gated: bool,
) -> Result<Checked, OpError> {
    let format = AffineFormat::new(op, w.bits, w.group_size)?;
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    dtype_is(op, "y", y, x.dtype())?;
    dtype_is(op, "packed", w.packed, DType::U32)?;
    dtype_is(op, "scales", w.scales, x.dtype())?;
    dtype_is(op, "biases", w.biases, x.dtype())?;
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
        [t, k] if t == tokens => (k, false),
        [t, j, k] if t == tokens && j == top_k => (k, true),
        ref s => {
            return Err(OpError::invalid(
                op,
                format!("`x` must be [tokens = {tokens}, K] or [tokens, top_k = {top_k}, K], got shape {s:?}"),
            ))
        }
    };
    format.check_row(op, k)?;
    let rows = if gated { 2 * n } else { n };
    let rows_text = if gated { "2·I" } else { "N" };
    if w.packed.shape() != [experts, rows, format.words(k)] {
        return Err(OpError::invalid(
            op,
            format!(
                "`packed` must be [experts = {experts}, {rows_text} = {rows}, {}] ({k} {}-bit values per row), got shape {:?}",
                format.words(k),
                w.bits,
                w.packed.shape()
            ),
        ));
    }
    shape_is(op, "scales", w.scales, &[experts, rows, format.groups(k)])?;
    shape_is(op, "biases", w.biases, &[experts, rows, format.groups(k)])?;
    let mut inputs = vec![
        ("x", x),
        ("packed", w.packed),
        ("scales", w.scales),
        ("biases", w.biases),
    ];
    inputs.extend(plan.named());
    distinct_named(op, "y", y, &inputs)?;
    fits_u32(op, "the word count of `packed`", w.packed.len())?;
    fits_u32(op, "the element count of `x`", x.len())?;
    fits_u32(op, "the element count of `y`", y.len())?;
    Ok((experts, pairs, tokens, top_k, n, k, x_per_pair))
}

fn launch(
    op: &'static str,
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    plan: &MoePlan,
    y: &Tensor,
    gated: bool,
) -> Result<(), OpError> {
    let (experts, pairs, tokens, top_k, n, k, x_per_pair) = check(op, x, w, plan, y, gated)?;
    let nn = n as u32;
    moe_qgemv_kernel::launch(
        ctx,
        moe_qgemv_kernel::Args {
            x,
            packed: w.packed,
            scales: w.scales,
            biases: w.biases,
            expert_counts: &plan.expert_counts,
            expert_offsets: &plan.expert_offsets,
            sorted_pairs: &plan.sorted_pairs,
            active_experts: &plan.active_experts,
            y,
            experts: experts as u32,
            n: nn,
            units: (k / 32) as u32,
            units_per_group: w.group_size / 32,
            pairs: pairs as u32,
            top_k: top_k as u32,
            x_per_pair: u32::from(x_per_pair),
        },
        moe_qgemv_kernel::Consts {
            tile: pair_tile(tokens, pairs, experts),
            bits: w.bits,
            gated: u32::from(gated),
        },
    )
    .grid([
        nn.div_ceil(MOE_COLUMNS_PER_GROUP),
        plan_slots(experts, pairs) as u32,
        1,
    ])
    .group_size(32 * MOE_COLUMNS_PER_GROUP)
    .run()
    .map_err(runtime(op))
}

/// `y[t, j, :] = x_row · dequant(W[topk_ids[t, j]])ᵀ` over the pairs of `plan`, the experts
/// in MLX's affine format: `x` `[tokens, K]` or `[tokens, top_k, K]` (K a multiple of the
/// group size), `y` `[tokens, top_k, N]`, f32 accumulation.
pub fn moe_qgemv(
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    plan: &MoePlan,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_qgemv", ctx, x, w, plan, y, false)
}

/// `y[t, j, :] = silu(x_row · gateᵀ)·(x_row · upᵀ)` with the packed gate/up experts
/// `[experts, 2·I, …]` in MLX's affine format and `y` `[tokens, top_k, I]`.
pub fn moe_qgemv_silu_mul(
    ctx: &Context,
    x: &Tensor,
    w: &AffineExperts,
    plan: &MoePlan,
    y: &Tensor,
) -> Result<(), OpError> {
    launch("moe_qgemv_silu_mul", ctx, x, w, plan, y, true)
}
