//! Cases of `moe_gemv` and `moe_gemv_silu_mul` (the experts no pair chose hold NaN, so
//! reading one fails the case): every float dtype over one token (tile 1)
//! to 17 tokens with an expert taken by more pairs than a tile holds, distinct experts per
//! token and repeats, `x` per token and per pair, K of every run width down to one element,
//! N not a multiple of the four columns a threadgroup takes, one expert; hand-written
//! rejections (an id out of range through the declared op, y aliasing w, a plan of another
//! shape); the specialisations; Qwen3-30B-A3B's expert MLP at 1, 16 and 64 tokens.

use super::permute::plan_of;
use super::*;
use crate::decl::ParamValues;
use crate::matmul::gemv::run_width;
use crate::moe::gemv::{moe_gemv, moe_gemv_kernel, moe_gemv_silu_mul, pair_tile, MOE_TILES};
use crate::moe::MoePlan;
use crate::testing::{accuracy, compare};
use std::collections::BTreeMap;

/// One grouped GEMV shape: tokens, top_k, experts, n (output columns), k.
type Dims = (usize, usize, usize, usize, usize);

fn op_name(gated: bool) -> &'static str {
    if gated {
        "moe_gemv_silu_mul"
    } else {
        "moe_gemv"
    }
}

fn correct(dtype: DType, dims: Dims, distinct: bool, per_pair: bool, gated: bool) -> Case {
    let (tokens, top_k, experts, n, k) = dims;
    Case {
        op: op_name(gated),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "T={tokens} k={top_k} E={experts} N={n} K={k} distinct={distinct} x_per_pair={per_pair} tile={}",
            pair_tile(tokens, tokens * top_k, experts)
        ),
        run: Box::new(move |ctx, rng| {
            let ids = routing(rng, tokens, top_k, experts, distinct);
            let t = ids_tensor(ctx, &ids, tokens, top_k)?;
            let plan = plan_of(ctx, &t, experts, tokens * top_k)?;
            let xshape = if per_pair { vec![tokens, top_k, k] } else { vec![tokens, k] };
            let (x, xv) = random_tensor(ctx, rng, dtype, &xshape, -1.0, 1.0)?;
            let rows = if gated { 2 * n } else { n };
            // Weights of a trained layer's scale (sums of order 1): with weights of ±1 a gated
            // output near 0 is silu(g)·u with g and u in the tens, whose f32 rounding
            // (relative to the sums, not to their small product) the tolerance cannot hold.
            let (_, mut wv) = random_tensor(ctx, rng, dtype, &[experts, rows, k], -0.1, 0.1)?;
            // Experts no pair chose hold NaN: a read of them would reach y.
            for e in (0..experts).filter(|&e| !ids.contains(&(e as f64))) {
                wv[e * rows * k..(e + 1) * rows * k].fill(f64::NAN);
            }
            let (w, wv) = upload(ctx, dtype, &wv, &[experts, rows, k])?;
            let y = ctx.full_nan(dtype, &[tokens, top_k, n]).map_err(err)?;
            if gated {
                moe_gemv_silu_mul(ctx, &x, &w, &plan, &y).map_err(err)?;
            } else {
                moe_gemv(ctx, &x, &w, &plan, &y).map_err(err)?;
            }
            let want = reference::gemv(&xv, &wv, &ids, (tokens, top_k, n, k), per_pair, gated);
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(op_name(gated), dtype)?)
        }),
    }
}

const SHAPES: [(Dims, bool, bool); 9] = [
    ((1, 8, 16, 37, 256), true, false),
    ((3, 2, 16, 6, 100), true, true),
    ((8, 2, 8, 9, 264), false, false),
    ((17, 4, 8, 5, 40), false, false),
    ((17, 4, 8, 5, 40), true, true),
    ((2, 3, 4, 130, 77), false, true),
    ((5, 1, 1, 4, 1000), false, false),
    ((4, 2, 6, 1, 3), true, false),
    ((2, 8, 128, 12, 2056), true, false),
];

fn cases_of(gated: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (dims, distinct, per_pair) in SHAPES {
            v.push(correct(dtype, dims, distinct, per_pair, gated));
        }
    }
    let op = op_name(gated);
    v.push(rejection(
        op,
        "an id out of range (declared op)",
        "`topk_ids` out of range",
        move |ctx| {
            let decl = crate::find_op(op).ok_or("no declaration")?;
            let (tokens, top_k, experts, n, k) = (3, 2, 6, 5, 40);
            let rows = if gated { 2 * n } else { n };
            let mut inputs = BTreeMap::new();
            inputs.insert("x".to_string(), zeros(ctx, DType::F32, &[tokens, k])?);
            inputs.insert(
                "w".to_string(),
                zeros(ctx, DType::F32, &[experts, rows, k])?,
            );
            let ids = [0.0, 1.0, 2.0, 6.0, 4.0, 5.0];
            inputs.insert(
                "topk_ids".to_string(),
                ids_tensor(ctx, &ids, tokens, top_k)?,
            );
            let y = ctx.full_nan(DType::F32, &[tokens, top_k, n]).map_err(err)?;
            let mut outputs = BTreeMap::new();
            outputs.insert("y".to_string(), y.clone());
            let c = ctx.clone();
            Ok((
                y,
                Box::new(move || {
                    let params = ParamValues::parse(decl, &[])
                        .map_err(|e| crate::OpError::invalid(op, e))?;
                    decl.invoke(&c, &inputs, &outputs, &params)
                }) as Refused,
            ))
        },
    ));
    // Plain: y [2, 3, 3] is w [2, 3, 3]; gated: y [2, 3, 3] is x [2, 3, 3] (a row per pair).
    let alias = if gated {
        "`y` aliases `x`"
    } else {
        "`y` aliases `w`"
    };
    v.push(rejection(op, "y aliases an input", alias, move |ctx| {
        let (tokens, top_k, experts, n) = (2, 3, 2, 3);
        let rows = if gated { 2 * n } else { n };
        let w = zeros(ctx, DType::F32, &[experts, rows, n])?;
        let x = zeros(ctx, DType::F32, &[tokens, top_k, n])?;
        let plan = MoePlan::new(ctx, experts, tokens * top_k).map_err(err)?;
        let c = ctx.clone();
        if gated {
            let y = x.clone();
            Ok((
                y,
                Box::new(move || moe_gemv_silu_mul(&c, &x, &w, &plan, &x)) as Refused,
            ))
        } else {
            let y = w.clone();
            Ok((
                y,
                Box::new(move || moe_gemv(&c, &x, &w, &plan, &w)) as Refused,
            ))
        }
    }));
    v.push(rejection(
        op,
        "a plan of other pairs",
        "tokens·top_k = 8 (the plan's pairs)",
        move |ctx| {
            let (tokens, top_k, experts, n, k) = (3, 2, 4, 5, 16);
            let rows = if gated { 2 * n } else { n };
            let x = zeros(ctx, DType::BF16, &[tokens, k])?;
            let w = zeros(ctx, DType::BF16, &[experts, rows, k])?;
            let plan = MoePlan::new(ctx, experts, 8).map_err(err)?;
            let y = ctx
                .full_nan(DType::BF16, &[tokens, top_k, n])
                .map_err(err)?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || {
                    if gated {
                        moe_gemv_silu_mul(&c, &x, &w, &plan, &o)
                    } else {
                        moe_gemv(&c, &x, &w, &plan, &o)
                    }
                }) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn gemv_cases() -> Vec<Case> {
    cases_of(false)
}

pub(crate) fn gemv_silu_mul_cases() -> Vec<Case> {
    cases_of(true)
}

pub(crate) fn gemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        let mut width = run_width(dt, 1 << 20);
        while width >= 1 {
            for tile in MOE_TILES {
                for gated in [0, 1] {
                    v.push(crate::testing::kernel_use(
                        &moe_gemv_kernel::DEF,
                        dt,
                        &[tile, width, gated],
                    ));
                }
            }
            width /= 2;
        }
    }
    v
}

/// bf16 expert weights `[experts, rows, k]`, random in [-1, 1) for the experts in `kept`
/// and zero for the others (never read): the tensor, and the kept experts' values in the
/// order of `kept`.
fn expert_weights(
    ctx: &Context,
    rng: &mut CaseRng,
    (experts, rows, k): (usize, usize, usize),
    kept: &[usize],
) -> Result<(Tensor, Vec<f64>), String> {
    let per = rows * k;
    let mut kept_values = Vec::with_capacity(kept.len() * per);
    let mut values = vec![half::bf16::ZERO; experts * per];
    for &e in kept {
        for slot in &mut values[e * per..(e + 1) * per] {
            *slot = half::bf16::from_f64(rng.uniform(-1.0, 1.0));
            kept_values.push(slot.to_f64());
        }
    }
    let t = ctx.tensor(&values, &[experts, rows, k]).map_err(err)?;
    Ok((t, kept_values))
}

/// The experts a routing chooses, ascending, and the ids renumbered into that list.
fn chosen(ids: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let mut kept: Vec<usize> = ids.iter().map(|&e| e as usize).collect();
    kept.sort_unstable();
    kept.dedup();
    let compact = ids
        .iter()
        .map(|&e| kept.iter().position(|&c| c == e as usize).unwrap_or(0) as f64)
        .collect();
    (kept, compact)
}

/// Qwen3-30B-A3B's expert MLP, bf16, at 1, 16 and 64 tokens: the gate/up projection with
/// SiLU·mul (`[128, 1536, 2048]`) or the down projection (`[128, 2048, 768]`, x per pair).
/// The routing is fixed per shape (distinct experts per token, seeded), so the bytes are
/// the chosen experts' weights, read once, plus x and y. The plan is built before timing
/// (an engine permutes once per layer for both projections).
fn benches_of(gated: bool) -> Vec<BenchCase> {
    let (experts, top_k, hidden, width) = QWEN3_MOE;
    let dtype = DType::BF16;
    let mut v = Vec::new();
    for tokens in BENCH_TOKENS {
        let ids = routing(
            &mut CaseRng::new(0x5eed + tokens as u64),
            tokens,
            top_k,
            experts,
            true,
        );
        let (kept, _) = chosen(&ids);
        let (n, k, rows) = if gated {
            (width, hidden, 2 * width)
        } else {
            (hidden, width, hidden)
        };
        let pairs = tokens * top_k;
        let x_rows = if gated { tokens } else { pairs };
        let bytes = (kept.len() * rows * k + x_rows * k + pairs * n) * dtype.size_bytes();
        v.push(BenchCase {
            op: op_name(gated),
            kernel: "moe_gemv_kernel",
            dtype,
            shape: format!(
                "T={tokens} E={experts} k={top_k} N={n} K={k} chosen={} tile={}",
                kept.len(),
                pair_tile(tokens, pairs, experts)
            ),
            bytes: bytes as u64,
            flops: (2 * pairs * rows * k) as u64,
            quick: false,
            prepare: Box::new(move |ctx, rng| {
                let (kept, compact) = chosen(&ids);
                let t = ids_tensor(ctx, &ids, tokens, top_k)?;
                let plan = plan_of(ctx, &t, experts, pairs)?;
                let xshape = if gated {
                    vec![tokens, k]
                } else {
                    vec![tokens, top_k, k]
                };
                let (x, xv) = random_tensor(ctx, rng, dtype, &xshape, -1.0, 1.0)?;
                let (w, wv) = expert_weights(ctx, rng, (experts, rows, k), &kept)?;
                let y = ctx.full_nan(dtype, &[tokens, top_k, n]).map_err(err)?;
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        if gated {
                            moe_gemv_silu_mul(&c, &x, &w, &plan, &o).map_err(err)
                        } else {
                            moe_gemv(&c, &x, &w, &plan, &o).map_err(err)
                        }
                    }),
                    output: y,
                    reference: reference::gemv(
                        &xv,
                        &wv,
                        &compact,
                        (tokens, top_k, n, k),
                        !gated,
                        gated,
                    ),
                })
            }),
        });
    }
    v
}

pub(crate) fn gemv_benches() -> Vec<BenchCase> {
    benches_of(false)
}

pub(crate) fn gemv_silu_mul_benches() -> Vec<BenchCase> {
    benches_of(true)
}
