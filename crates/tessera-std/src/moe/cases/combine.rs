//! Cases of `moe_combine`: every float dtype, with and without a shared expert, one token
//! to 17, top-1 to top-8, D odd; a NaN weight makes only its token's row NaN; rejections;
//! Qwen3-30B-A3B's combine at 1, 16 and 64 tokens.

use super::*;
use crate::moe::combine::{moe_combine, moe_combine_kernel, OP};
use crate::testing::{accuracy, compare, kernel_use};

fn correct(dtype: DType, (tokens, top_k, d): (usize, usize, usize), shared: bool) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("T={tokens} k={top_k} D={d} shared={shared}"),
        run: Box::new(move |ctx, rng| {
            let (y, yv) = random_tensor(ctx, rng, dtype, &[tokens, top_k, d], -1.0, 1.0)?;
            let (w, wv) = random_tensor(ctx, rng, DType::F32, &[tokens, top_k], 0.0, 1.0)?;
            let s = if shared {
                Some(random_tensor(ctx, rng, dtype, &[tokens, d], -1.0, 1.0)?)
            } else {
                None
            };
            let out = ctx.full_nan(dtype, &[tokens, d]).map_err(err)?;
            moe_combine(ctx, &y, &w, s.as_ref().map(|s| &s.0), &out).map_err(err)?;
            let want = reference::combine(
                &yv,
                &wv,
                s.as_ref().map(|s| s.1.as_slice()),
                (tokens, top_k, d),
            );
            compare(&out.to_f64_vec().map_err(err)?, &want, accuracy(OP, dtype)?)
        }),
    }
}

/// Token 1's weights hold a NaN (a router row with no answer): its row is NaN, the others
/// exact.
fn nan_weight(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "a NaN weight".into(),
        run: Box::new(move |ctx, rng| {
            let (tokens, top_k, d) = (3, 4, 19);
            let (y, yv) = random_tensor(ctx, rng, dtype, &[tokens, top_k, d], -1.0, 1.0)?;
            let (_, mut wv) = random_tensor(ctx, rng, DType::F32, &[tokens, top_k], 0.0, 1.0)?;
            wv[top_k + 2] = f64::NAN;
            let (w, wv) = upload(ctx, DType::F32, &wv, &[tokens, top_k])?;
            let out = ctx.full_nan(dtype, &[tokens, d]).map_err(err)?;
            moe_combine(ctx, &y, &w, None, &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            if !got[d..2 * d].iter().all(|v| v.is_nan()) {
                return Err(format!("token 1's row should be NaN: {:?}", &got[d..2 * d]));
            }
            let want = reference::combine(&yv, &wv, None, (tokens, top_k, d));
            let keep: Vec<usize> = (0..tokens * d)
                .filter(|i| !(d..2 * d).contains(i))
                .collect();
            let pick = |v: &[f64]| keep.iter().map(|&i| v[i]).collect::<Vec<_>>();
            compare(&pick(&got), &pick(&want), accuracy(OP, dtype)?)
        }),
    }
}

pub(crate) fn combine_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (dims, shared) in [
            ((1, 8, 2048), false),
            ((3, 2, 37), true),
            ((17, 4, 100), false),
            ((5, 1, 1), true),
            ((2, 10, 513), true),
        ] {
            v.push(correct(dtype, dims, shared));
        }
        v.push(nan_weight(dtype));
    }
    v.push(rejection(
        OP,
        "y rank 2",
        "`y` must be a non-empty [tokens, top_k, D]",
        |ctx| {
            let y = zeros(ctx, DType::F16, &[2, 8])?;
            let w = zeros(ctx, DType::F32, &[2, 1])?;
            let out = ctx.full_nan(DType::F16, &[2, 8]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || moe_combine(&c, &y, &w, None, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "out of another dtype",
        "`out` must be bf16",
        |ctx| {
            let y = zeros(ctx, DType::BF16, &[2, 3, 8])?;
            let w = zeros(ctx, DType::F32, &[2, 3])?;
            let out = ctx.full_nan(DType::F32, &[2, 8]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || moe_combine(&c, &y, &w, None, &o)) as Refused,
            ))
        },
    ));
    v
}

pub(crate) fn combine_kernels() -> Vec<KernelUse> {
    FLOAT_DTYPES
        .iter()
        .map(|&d| kernel_use(&moe_combine_kernel::DEF, d, &[]))
        .collect()
}

/// Qwen3-30B-A3B's combine (top-8 of hidden 2048, plus a shared output) at 1, 16 and 64
/// tokens, bf16.
pub(crate) fn combine_benches() -> Vec<BenchCase> {
    let (_, top_k, hidden, _) = QWEN3_MOE;
    let dtype = DType::BF16;
    BENCH_TOKENS
        .into_iter()
        .map(|tokens| BenchCase {
            op: OP,
            kernel: "moe_combine_kernel",
            dtype,
            shape: format!("T={tokens} k={top_k} D={hidden} shared"),
            bytes: ((tokens * top_k * hidden + 2 * tokens * hidden) * 2 + tokens * top_k * 4)
                as u64,
            flops: (2 * tokens * top_k * hidden) as u64,
            quick: tokens == 1,
            prepare: Box::new(move |ctx, rng| {
                let (y, yv) = random_tensor(ctx, rng, dtype, &[tokens, top_k, hidden], -1.0, 1.0)?;
                let (w, wv) = random_tensor(ctx, rng, DType::F32, &[tokens, top_k], 0.0, 1.0)?;
                let (s, sv) = random_tensor(ctx, rng, dtype, &[tokens, hidden], -1.0, 1.0)?;
                let out = ctx.full_nan(dtype, &[tokens, hidden]).map_err(err)?;
                let (c, o) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || moe_combine(&c, &y, &w, Some(&s), &o).map_err(err)),
                    output: out,
                    reference: reference::combine(&yv, &wv, Some(&sv), (tokens, top_k, hidden)),
                })
            }),
        })
        .collect()
}
