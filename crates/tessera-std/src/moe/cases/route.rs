//! Cases of `moe_route`: softmax and sigmoid scoring over 8 to 512 experts and top-1 to
//! top-10, with and without renormalisation, a selection bias and grouped top-k (DeepSeek-V3's
//! 256 experts in 8 groups), odd token counts, every float dtype; ties (to the lowest
//! index); rows with NaN, ±∞; rejections; benches.

use super::*;
use crate::moe::route::{moe_route, moe_route_kernel, route_group, RouteConfig, Scoring, OP};
use crate::testing::accuracy;

/// A router setting: (scoring, top_k, renormalize, n_group, topk_group, scaling).
fn config(
    scoring: Scoring,
    top_k: usize,
    renormalize: bool,
    (n_group, topk_group): (usize, usize),
    scaling: f32,
) -> RouteConfig {
    RouteConfig {
        top_k,
        scoring,
        renormalize,
        n_group,
        topk_group,
        routed_scaling_factor: scaling,
    }
}

/// The f64 selection keys of a row and its groups' scores (as the reference forms them).
fn keys(row: &[f64], bias: Option<&[f64]>, cfg: &RouteConfig) -> Vec<f64> {
    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = row.iter().map(|v| (v - max).exp()).sum();
    let mut k: Vec<f64> = row
        .iter()
        .enumerate()
        .map(|(e, &v)| {
            let p = match cfg.scoring {
                Scoring::Softmax => (v - max).exp() / total,
                Scoring::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            };
            p + bias.map_or(0.0, |b| b[e])
        })
        .collect();
    let width = row.len() / cfg.n_group;
    let groups: Vec<f64> = k
        .chunks(width)
        .map(|g| {
            let mut s = g.to_vec();
            s.sort_by(|a, b| b.total_cmp(a));
            s[0] + s.get(1).copied().unwrap_or(0.0)
        })
        .collect();
    k.extend(groups);
    k
}

/// Whether a row's keys (and group scores) are equal or more than 2e-6 apart relative to
/// their size (f32 forms each with a relative error near 3e-7), so that f32 rounding cannot
/// reorder them: a near-tie's order is a rounding question, not the router's (equal keys
/// come from equal inputs, equal in f32 too).
fn separated(row: &[f64], bias: Option<&[f64]>, cfg: &RouteConfig) -> bool {
    let mut k = keys(row, bias, cfg);
    k.sort_by(|a, b| a.total_cmp(b));
    k.windows(2)
        .all(|w| w[1] == w[0] || w[1] - w[0] > 2e-6 * w[0].abs().max(w[1].abs()) + 1e-12)
}

/// Compares ids exactly and weights within the op's accuracy, NaN where the reference has it.
fn check(ids: &Tensor, weights: &Tensor, want: &(Vec<f64>, Vec<f64>)) -> Result<Outcome, String> {
    let mut out = exact("topk_ids", ids, &want.0)?;
    let got = weights.to_f64_vec().map_err(err)?;
    let tol = accuracy(OP, DType::F32)?;
    for (i, (&g, &w)) in got.iter().zip(&want.1).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() <= tol.atol + tol.rtol * w.abs()
        };
        if !ok {
            return Err(format!("topk_weights[{i}] is {g}, expected {w}"));
        }
    }
    out.checked += got.len();
    Ok(out)
}

/// Runs the router on `logits` (values as stored) and compares with the reference.
fn run_route(
    ctx: &Context,
    dtype: DType,
    logits: &[f64],
    bias: Option<&[f64]>,
    (tokens, experts): (usize, usize),
    cfg: &RouteConfig,
) -> Result<Outcome, String> {
    let (x, xv) = upload(ctx, dtype, logits, &[tokens, experts])?;
    let b = match bias {
        Some(b) => Some(upload(ctx, DType::F32, b, &[experts])?),
        None => None,
    };
    let ids = ctx
        .full_nan(DType::I32, &[tokens, cfg.top_k])
        .map_err(err)?;
    let weights = ctx
        .full_nan(DType::F32, &[tokens, cfg.top_k])
        .map_err(err)?;
    moe_route(ctx, &x, b.as_ref().map(|b| &b.0), cfg, &ids, &weights).map_err(err)?;
    let want = reference::route(&xv, b.as_ref().map(|b| b.1.as_slice()), experts, cfg);
    check(&ids, &weights, &want)
}

fn correctness(
    dtype: DType,
    tokens: usize,
    experts: usize,
    cfg: RouteConfig,
    with_bias: bool,
) -> Case {
    let name = format!(
        "T={tokens} E={experts} k={} {:?} renorm={} groups={}/{} bias={with_bias} scale={}",
        cfg.top_k,
        cfg.scoring,
        cfg.renormalize,
        cfg.topk_group,
        cfg.n_group,
        cfg.routed_scaling_factor
    );
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name,
        run: Box::new(move |ctx, rng| {
            let bias: Option<Vec<f64>> = with_bias.then(|| {
                (0..experts)
                    .map(|_| rng.uniform(-0.5, 0.5) as f32 as f64)
                    .collect()
            });
            let keyed = with_bias || cfg.n_group > 1;
            let mut logits = Vec::with_capacity(tokens * experts);
            for _ in 0..tokens {
                // Each row redrawn until no two keys are within 1e-6 (selection on the
                // logits themselves is exact, so only keyed rows need it).
                for _ in 0..100 {
                    let (_, row) = random_tensor(ctx, rng, dtype, &[experts], -4.0, 4.0)?;
                    if !keyed || separated(&row, bias.as_deref(), &cfg) {
                        logits.extend(row);
                        break;
                    }
                }
            }
            if logits.len() != tokens * experts {
                return Err("no row without near-ties in 100 draws".into());
            }
            run_route(
                ctx,
                dtype,
                &logits,
                bias.as_deref(),
                (tokens, experts),
                &cfg,
            )
        }),
    }
}

/// Logits from a few values, so many are equal: ties go to the lowest index, on the logits
/// (softmax) and on equal sigmoid keys and group scores (grouped, without a bias).
fn ties(dtype: DType, cfg: RouteConfig) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "ties {:?} k={} groups={}/{}",
            cfg.scoring, cfg.top_k, cfg.topk_group, cfg.n_group
        ),
        run: Box::new(move |ctx, rng| {
            let (tokens, experts) = (9, 32);
            let mut logits: Vec<f64> = (0..tokens * experts)
                .map(|_| [-1.0, 0.0, 0.5, 2.0][rng.int(0, 4) as usize])
                .collect();
            // Row 0 all equal: experts 0..k in order.
            logits[..experts].fill(0.5);
            let out = run_route(ctx, dtype, &logits, None, (tokens, experts), &cfg)?;
            let first = reference::route(&logits[..experts], None, experts, &cfg).0;
            let want: Vec<f64> = (0..cfg.top_k).map(|e| e as f64).collect();
            if cfg.n_group == 1 && first != want {
                return Err(format!(
                    "the reference gives {first:?} for an all-equal row"
                ));
            }
            Ok(out)
        }),
    }
}

/// Rows of non-finite logits: NaN (−1, NaN), +∞ (softmax: −1; sigmoid: chosen with score
/// 1), −∞ (ranked last), all −∞ (softmax: −1), and a plain row left exact.
fn non_finite(dtype: DType, cfg: RouteConfig) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "rows with NaN, +inf, -inf {:?} groups={}/{}",
            cfg.scoring, cfg.topk_group, cfg.n_group
        ),
        run: Box::new(move |ctx, rng| {
            let (tokens, experts) = (5, 16);
            let (_, mut v) = random_tensor(ctx, rng, dtype, &[tokens, experts], -4.0, 4.0)?;
            v[3] = f64::NAN;
            v[experts + 11] = f64::INFINITY;
            for e in 0..experts / 2 {
                v[2 * experts + 2 * e] = f64::NEG_INFINITY;
            }
            v[3 * experts..4 * experts].fill(f64::NEG_INFINITY);
            let out = run_route(ctx, dtype, &v, None, (tokens, experts), &cfg)?;
            let (ids, _) = reference::route(&v, None, experts, &cfg);
            let k = cfg.top_k;
            let softmax = cfg.scoring == Scoring::Softmax;
            if ids[0] != -1.0 || (ids[k] == -1.0) != softmax || (softmax && ids[3 * k] != -1.0) {
                return Err(format!("the reference gives {ids:?}"));
            }
            Ok(out)
        }),
    }
}

pub(crate) fn route_cases() -> Vec<Case> {
    use Scoring::{Sigmoid, Softmax};
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        v.push(correctness(
            dtype,
            3,
            8,
            config(Softmax, 2, true, (1, 1), 1.0),
            false,
        ));
        v.push(correctness(
            dtype,
            17,
            128,
            config(Softmax, 8, true, (1, 1), 1.0),
            false,
        ));
        v.push(correctness(
            dtype,
            5,
            256,
            config(Sigmoid, 8, true, (8, 4), 2.5),
            true,
        ));
        v.push(ties(dtype, config(Softmax, 4, true, (1, 1), 1.0)));
        v.push(ties(dtype, config(Sigmoid, 3, false, (4, 2), 1.0)));
        v.push(non_finite(dtype, config(Softmax, 3, true, (1, 1), 1.0)));
        v.push(non_finite(dtype, config(Sigmoid, 3, true, (1, 1), 1.0)));
    }
    let f32 = DType::F32;
    v.push(correctness(
        f32,
        1,
        8,
        config(Softmax, 1, false, (1, 1), 1.0),
        false,
    ));
    v.push(correctness(
        f32,
        4,
        64,
        config(Softmax, 6, false, (1, 1), 1.0),
        false,
    ));
    v.push(correctness(
        DType::BF16,
        3,
        60,
        config(Softmax, 4, true, (1, 1), 1.0),
        false,
    ));
    v.push(correctness(
        DType::BF16,
        2,
        512,
        config(Softmax, 10, true, (1, 1), 1.0),
        false,
    ));
    v.push(correctness(
        f32,
        7,
        64,
        config(Sigmoid, 6, false, (1, 1), 1.0),
        true,
    ));
    v.push(correctness(
        f32,
        3,
        16,
        config(Sigmoid, 4, true, (4, 2), 1.0),
        false,
    ));
    v.push(correctness(
        DType::F16,
        6,
        160,
        config(Softmax, 6, true, (8, 3), 16.0),
        false,
    ));
    v.push(correctness(
        f32,
        2,
        20,
        config(Sigmoid, 20, true, (1, 1), 1.0),
        true,
    ));
    v.push(non_finite(f32, config(Sigmoid, 4, false, (4, 2), 1.0)));
    v.push(rejection(
        OP,
        "topk_ids u32",
        "`topk_ids` must be i32",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 8])?;
            let ids = ctx.full_nan(DType::U32, &[2, 2]).map_err(err)?;
            let w = zeros(ctx, DType::F32, &[2, 2])?;
            let (c, o) = (ctx.clone(), ids.clone());
            let cfg = RouteConfig::softmax(2, true);
            Ok((
                ids,
                Box::new(move || moe_route(&c, &x, None, &cfg, &o, &w)) as Refused,
            ))
        },
    ));
    v.push(rejection(OP, "1025 experts", "at most 1024", |ctx| {
        let x = zeros(ctx, DType::F32, &[1, 1025])?;
        let ids = ctx.full_nan(DType::I32, &[1, 2]).map_err(err)?;
        let w = zeros(ctx, DType::F32, &[1, 2])?;
        let (c, o) = (ctx.clone(), ids.clone());
        let cfg = RouteConfig::softmax(2, true);
        Ok((
            ids,
            Box::new(move || moe_route(&c, &x, None, &cfg, &o, &w)) as Refused,
        ))
    }));
    v.push(rejection(
        OP,
        "weights alias logits",
        "`topk_weights` aliases `logits`",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 2])?;
            let ids = zeros(ctx, DType::I32, &[2, 2])?;
            let (c, o) = (ctx.clone(), x.clone());
            let cfg = RouteConfig::softmax(2, true);
            Ok((
                x,
                Box::new(move || moe_route(&c, &o, None, &cfg, &ids, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "infinite scaling",
        "routed_scaling_factor must be finite",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 8])?;
            let ids = ctx.full_nan(DType::I32, &[2, 2]).map_err(err)?;
            let w = zeros(ctx, DType::F32, &[2, 2])?;
            let (c, o) = (ctx.clone(), ids.clone());
            let cfg = RouteConfig {
                routed_scaling_factor: f32::INFINITY,
                ..RouteConfig::softmax(2, true)
            };
            Ok((
                ids,
                Box::new(move || moe_route(&c, &x, None, &cfg, &o, &w)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn route_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for bias in FLOAT_DTYPES {
            for sigmoid in [0, 1] {
                v.push(KernelUse {
                    def: &moe_route_kernel::DEF,
                    spec: tessera_ir::Specialization::new(
                        vec![dt, bias],
                        vec![tessera_runtime::Literal::U32(sigmoid)],
                    ),
                });
            }
        }
    }
    v
}

/// Qwen3-30B-A3B's router (128 experts, top-8, softmax, renormalised) and DeepSeek-V3's
/// (256 experts, top-8 of 4 of 8 groups, sigmoid with bias) over 1, 16 and 64 tokens.
pub(crate) fn route_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for tokens in BENCH_TOKENS {
        for (experts, cfg, bias) in [
            (128, RouteConfig::softmax(8, true), false),
            (256, config(Scoring::Sigmoid, 8, true, (8, 4), 2.5), true),
        ] {
            let dtype = DType::BF16;
            v.push(BenchCase {
                op: OP,
                kernel: "moe_route_kernel",
                dtype,
                shape: format!(
                    "T={tokens} E={experts} k=8 {:?} group={}",
                    cfg.scoring,
                    route_group(experts)
                ),
                bytes: (tokens * experts * 2 + tokens * 8 * 8) as u64,
                flops: 0,
                quick: tokens == 1,
                prepare: Box::new(move |ctx, rng| {
                    let (b, bv) = random_tensor(ctx, rng, DType::F32, &[experts], -0.1, 0.1)?;
                    // Rows redrawn as in the cases, so the output check meets no near-tie.
                    let mut logits = Vec::with_capacity(tokens * experts);
                    while logits.len() < tokens * experts {
                        let (_, row) = random_tensor(ctx, rng, dtype, &[experts], -4.0, 4.0)?;
                        if separated(&row, bias.then_some(bv.as_slice()), &cfg) {
                            logits.extend(row);
                        }
                    }
                    let (x, xv) = upload(ctx, dtype, &logits, &[tokens, experts])?;
                    let ids = ctx.full_nan(DType::I32, &[tokens, 8]).map_err(err)?;
                    let w = ctx.full_nan(DType::F32, &[tokens, 8]).map_err(err)?;
                    let (c, o) = (ctx.clone(), w.clone());
                    let bias_v = bias.then_some(bv);
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            moe_route(&c, &x, bias.then_some(&b), &cfg, &ids, &o).map_err(err)
                        }),
                        output: w,
                        reference: reference::route(&xv, bias_v.as_deref(), experts, &cfg).1,
                    })
                }),
            });
        }
    }
    v
}
