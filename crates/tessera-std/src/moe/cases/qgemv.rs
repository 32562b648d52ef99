//! Cases of `moe_qgemv` and `moe_qgemv_silu_mul`: experts quantized on the host by the
//! quant family's reference (MLX's bytes) over several bits and group sizes and every
//! float dtype, one token to 17 with experts taken by more pairs than a tile holds, `x`
//! per token and per pair; a hand-written rejection of K off the group; the
//! specialisations; Qwen3-30B-A3B's expert MLP in 4 bits (group 64) at 1, 16 and 64 tokens.

use super::permute::plan_of;
use super::*;
use crate::moe::gemv::{pair_tile, MOE_TILES};
use crate::moe::qgemv::{moe_qgemv, moe_qgemv_kernel, moe_qgemv_silu_mul, AffineExperts};
use crate::moe::MoePlan;
use crate::quant::AFFINE_BITS;
use crate::testing::{accuracy, compare};

/// One quantized GEMV shape: tokens, top_k, experts, n (output columns), k.
type Dims = (usize, usize, usize, usize, usize);

fn op_name(gated: bool) -> &'static str {
    if gated {
        "moe_qgemv_silu_mul"
    } else {
        "moe_qgemv"
    }
}

/// Experts `[experts·rows, k]` of `dtype` quantized on the host and uploaded as
/// `[experts, rows, …]`, NaN scales for the experts `ids` does not name: the three tensors
/// and the values they stand for.
fn quantized_experts(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    (experts, rows, k): (usize, usize, usize),
    (bits, group): (u32, usize),
    ids: &[f64],
) -> Result<([Tensor; 3], Vec<f64>), String> {
    let (_, wv) = random_tensor(ctx, rng, dtype, &[experts * rows, k], -1.0, 1.0)?;
    let mut q = crate::quant::reference::quantize(&wv, bits, group, dtype);
    // Experts no pair chose get NaN scales: a read of them would reach y.
    let per = rows * (k / group);
    for e in (0..experts).filter(|&e| !ids.contains(&(e as f64))) {
        q.scales[e * per..(e + 1) * per].fill(f64::NAN);
    }
    let words = k * bits as usize / 32;
    let (packed, _) = upload(ctx, DType::U32, &q.packed, &[experts, rows, words])?;
    let (scales, _) = upload(ctx, dtype, &q.scales, &[experts, rows, k / group])?;
    let (biases, _) = upload(ctx, dtype, &q.biases, &[experts, rows, k / group])?;
    let w = reference::affine_weights(
        &q.packed,
        &q.scales,
        &q.biases,
        (experts * rows, k),
        bits,
        group,
    );
    Ok(([packed, scales, biases], w))
}

fn correct(
    dtype: DType,
    dims: Dims,
    (bits, group): (u32, u32),
    per_pair: bool,
    gated: bool,
) -> Case {
    let (tokens, top_k, experts, n, k) = dims;
    Case {
        op: op_name(gated),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "T={tokens} k={top_k} E={experts} N={n} K={k} bits={bits} group={group} x_per_pair={per_pair} tile={}",
            pair_tile(tokens, tokens * top_k, experts)
        ),
        run: Box::new(move |ctx, rng| {
            let ids = routing(rng, tokens, top_k, experts, tokens % 2 == 1);
            let t = ids_tensor(ctx, &ids, tokens, top_k)?;
            let plan = plan_of(ctx, &t, experts, tokens * top_k)?;
            let xshape = if per_pair { vec![tokens, top_k, k] } else { vec![tokens, k] };
            let (x, xv) = random_tensor(ctx, rng, dtype, &xshape, -1.0, 1.0)?;
            let rows = if gated { 2 * n } else { n };
            let ([packed, scales, biases], wv) = quantized_experts(
                ctx,
                rng,
                dtype,
                (experts, rows, k),
                (bits, group as usize),
                &ids,
            )?;
            let w = AffineExperts { packed: &packed, scales: &scales, biases: &biases, bits, group_size: group };
            let y = ctx.full_nan(dtype, &[tokens, top_k, n]).map_err(err)?;
            if gated {
                moe_qgemv_silu_mul(ctx, &x, &w, &plan, &y).map_err(err)?;
            } else {
                moe_qgemv(ctx, &x, &w, &plan, &y).map_err(err)?;
            }
            let want = reference::gemv(&xv, &wv, &ids, (tokens, top_k, n, k), per_pair, gated);
            compare(&y.to_f64_vec().map_err(err)?, &want, accuracy(op_name(gated), dtype)?)
        }),
    }
}

fn cases_of(gated: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        v.push(correct(dtype, (1, 8, 16, 7, 256), (4, 64), false, gated));
        v.push(correct(dtype, (3, 2, 8, 5, 128), (8, 32), true, gated));
        v.push(correct(dtype, (17, 4, 8, 3, 128), (4, 128), false, gated));
    }
    for bits in AFFINE_BITS {
        v.push(correct(
            DType::BF16,
            (5, 2, 4, 6, 192),
            (bits, 64),
            bits % 2 == 0,
            gated,
        ));
    }
    v.push(correct(
        DType::F32,
        (2, 8, 128, 9, 64),
        (4, 32),
        false,
        gated,
    ));
    let op = op_name(gated);
    v.push(rejection(
        op,
        "K off the group",
        "must be a positive multiple of the group size 64",
        move |ctx| {
            let (tokens, top_k, experts, n, k) = (2, 2, 4, 3, 96);
            let rows = if gated { 2 * n } else { n };
            let x = zeros(ctx, DType::BF16, &[tokens, k])?;
            let packed = zeros(ctx, DType::U32, &[experts, rows, k / 8])?;
            let scales = zeros(ctx, DType::BF16, &[experts, rows, 1])?;
            let biases = zeros(ctx, DType::BF16, &[experts, rows, 1])?;
            let plan = MoePlan::new(ctx, experts, tokens * top_k).map_err(err)?;
            let y = ctx
                .full_nan(DType::BF16, &[tokens, top_k, n])
                .map_err(err)?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || {
                    let w = AffineExperts {
                        packed: &packed,
                        scales: &scales,
                        biases: &biases,
                        bits: 4,
                        group_size: 64,
                    };
                    if gated {
                        moe_qgemv_silu_mul(&c, &x, &w, &plan, &o)
                    } else {
                        moe_qgemv(&c, &x, &w, &plan, &o)
                    }
                }) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn qgemv_cases() -> Vec<Case> {
    cases_of(false)
}

pub(crate) fn qgemv_silu_mul_cases() -> Vec<Case> {
    cases_of(true)
}

pub(crate) fn qgemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for bits in AFFINE_BITS {
            for tile in MOE_TILES {
                for gated in [0, 1] {
                    v.push(crate::testing::kernel_use(
                        &moe_qgemv_kernel::DEF,
                        dt,
                        &[tile, bits, gated],
                    ));
                }
            }
        }
    }
    v
}

/// 4-bit, group-64 experts `[experts, rows, k]` (bf16 scales and biases) with random words
/// for the experts in `kept` and zeros for the others (never read): the tensors, and the
/// kept experts' values in the order of `kept`.
fn random_experts(
    ctx: &Context,
    rng: &mut CaseRng,
    (experts, rows, k): (usize, usize, usize),
    kept: &[usize],
) -> Result<([Tensor; 3], Vec<f64>), String> {
    let (words, groups) = (k / 8, k / 64);
    let mut packed = vec![0u32; experts * rows * words];
    let mut scales = vec![half::bf16::ZERO; experts * rows * groups];
    let mut biases = scales.clone();
    let (mut kp, mut ks, mut kb) = (Vec::new(), Vec::new(), Vec::new());
    for &e in kept {
        for slot in &mut packed[e * rows * words..(e + 1) * rows * words] {
            *slot = rng.int(0, u32::MAX);
            kp.push(f64::from(*slot));
        }
        for i in e * rows * groups..(e + 1) * rows * groups {
            scales[i] = half::bf16::from_f64(rng.uniform(-1.0 / 15.0, 1.0 / 15.0));
            biases[i] = half::bf16::from_f64(rng.uniform(-0.5, 0.5));
            ks.push(scales[i].to_f64());
            kb.push(biases[i].to_f64());
        }
    }
    let p = ctx.tensor(&packed, &[experts, rows, words]).map_err(err)?;
    let s = ctx.tensor(&scales, &[experts, rows, groups]).map_err(err)?;
    let b = ctx.tensor(&biases, &[experts, rows, groups]).map_err(err)?;
    let w = reference::affine_weights(&kp, &ks, &kb, (kept.len() * rows, k), 4, 64);
    Ok(([p, s, b], w))
}

/// Qwen3-30B-A3B's expert MLP with 4-bit, group-64 experts (MLX's default), bf16
/// activations, at 1, 16 and 64 tokens: gate/up with SiLU·mul or the down projection (x per
/// pair). The bytes are the chosen experts' codes, scales and biases, read once, plus x
/// and y; the plan is built before timing.
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
        let mut kept: Vec<usize> = ids.iter().map(|&e| e as usize).collect();
        kept.sort_unstable();
        kept.dedup();
        let (n, k, rows) = if gated {
            (width, hidden, 2 * width)
        } else {
            (hidden, width, hidden)
        };
        let pairs = tokens * top_k;
        let x_rows = if gated { tokens } else { pairs };
        let weight_bytes = kept.len() * rows * (k / 2 + 2 * 2 * (k / 64));
        let bytes = weight_bytes + (x_rows * k + pairs * n) * dtype.size_bytes();
        v.push(BenchCase {
            op: op_name(gated),
            kernel: "moe_qgemv_kernel",
            dtype,
            shape: format!(
                "T={tokens} E={experts} k={top_k} N={n} K={k} bits=4 group=64 chosen={} tile={}",
                kept.len(),
                pair_tile(tokens, pairs, experts)
            ),
            bytes: bytes as u64,
            flops: (2 * pairs * rows * k) as u64,
            quick: false,
            prepare: Box::new(move |ctx, rng| {
                let compact: Vec<f64> = ids
                    .iter()
                    .map(|&e| kept.iter().position(|&c| c == e as usize).unwrap_or(0) as f64)
                    .collect();
                let t = ids_tensor(ctx, &ids, tokens, top_k)?;
                let plan = plan_of(ctx, &t, experts, pairs)?;
                let xshape = if gated {
                    vec![tokens, k]
                } else {
                    vec![tokens, top_k, k]
                };
                let (x, xv) = random_tensor(ctx, rng, dtype, &xshape, -1.0, 1.0)?;
                let ([packed, scales, biases], wv) =
                    random_experts(ctx, rng, (experts, rows, k), &kept)?;
                let y = ctx.full_nan(dtype, &[tokens, top_k, n]).map_err(err)?;
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        let w = AffineExperts {
                            packed: &packed,
                            scales: &scales,
                            biases: &biases,
                            bits: 4,
                            group_size: 64,
                        };
                        if gated {
                            moe_qgemv_silu_mul(&c, &x, &w, &plan, &o).map_err(err)
                        } else {
                            moe_qgemv(&c, &x, &w, &plan, &o).map_err(err)
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

pub(crate) fn qgemv_benches() -> Vec<BenchCase> {
    benches_of(false)
}

pub(crate) fn qgemv_silu_mul_benches() -> Vec<BenchCase> {
    benches_of(true)
}
