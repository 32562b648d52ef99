//! Cases of `argmax`: every float dtype at tiny, odd and Qwen-sized vocabularies (bf16
//! ties go to the lowest index), rows holding NaN, +∞ or only −∞; rejections; benches.

use super::*;
use crate::sampling::argmax::{
    argmax, argmax_combine_kernel, argmax_kernel, argmax_slice_kernel, argmax_split, OP,
};
use crate::sampling::split::SamplingWorkspace;

fn correctness(dtype: DType, batch: usize, vocab: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("batch={batch} vocab={vocab}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = logits(ctx, rng, dtype, batch, vocab)?;
            let token = ctx.full_nan(DType::I32, &[batch]).map_err(err)?;
            argmax(ctx, &x, &token).map_err(err)?;
            exact(&token, &reference::argmax(&xv, vocab))
        }),
    }
}

/// Rows of non-finite logits: a NaN (−1), +∞ twice (the first), all −∞ (0), −∞ beside
/// finite values (the finite max), and a plain row.
fn non_finite(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "rows with NaN, +inf, -inf".to_string(),
        run: Box::new(move |ctx, rng| {
            let vocab = 300;
            let (_, mut xv) = logits(ctx, rng, dtype, 5, vocab)?;
            let at = |r: usize, i: usize| r * vocab + i;
            xv[at(0, 17)] = f64::NAN;
            xv[at(1, 250)] = f64::INFINITY;
            xv[at(1, 31)] = f64::INFINITY;
            for i in 0..vocab {
                xv[at(2, i)] = f64::NEG_INFINITY;
            }
            for i in (0..vocab).step_by(2) {
                xv[at(3, i)] = f64::NEG_INFINITY;
            }
            let (x, xv) = upload(ctx, dtype, &xv, &[5, vocab])?;
            let token = ctx.full_nan(DType::I32, &[5]).map_err(err)?;
            argmax(ctx, &x, &token).map_err(err)?;
            let want = reference::argmax(&xv, vocab);
            if want[..3] != [-1.0, 31.0, 0.0] {
                return Err(format!("the reference gives {want:?} for the fixed rows"));
            }
            exact(&token, &want)
        }),
    }
}

/// The split form forced to `slices` slices a row (more than a short row's logits leave
/// some empty), on random rows (bf16 and f16 tie often) and on the non-finite rows of
/// [`non_finite`]: the reference's tokens, and the single-pass kernel's.
fn split_form(dtype: DType, batch: usize, vocab: usize, slices: u32) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("split into {slices} slices, batch={batch} vocab={vocab}"),
        run: Box::new(move |ctx, rng| {
            let (_, mut xv) = logits(ctx, rng, dtype, batch + 3, vocab)?;
            let at = |r: usize, i: usize| (batch + r) * vocab + i;
            xv[at(0, vocab / 2)] = f64::NAN;
            for i in 0..vocab {
                xv[at(1, i)] = f64::NEG_INFINITY;
            }
            xv[at(2, vocab - 1)] = f64::INFINITY;
            xv[at(2, vocab / 3)] = f64::INFINITY;
            let rows = batch + 3;
            let (x, xv) = upload(ctx, dtype, &xv, &[rows, vocab])?;
            let ws = SamplingWorkspace::with_slices(ctx, rows, slices).map_err(err)?;
            let split = ctx.full_nan(DType::I32, &[rows]).map_err(err)?;
            argmax_split(ctx, &x, &ws, &split).map_err(err)?;
            let single = ctx.full_nan(DType::I32, &[rows]).map_err(err)?;
            argmax(ctx, &x, &single).map_err(err)?;
            exact(&split, &single.to_f64_vec().map_err(err)?)?;
            exact(&split, &reference::argmax(&xv, vocab))
        }),
    }
}

/// The tokens equal `want` exactly.
pub(super) fn exact(token: &Tensor, want: &[f64]) -> Result<Outcome, String> {
    let got = token.to_f64_vec().map_err(err)?;
    if got != want {
        return Err(format!("tokens {got:?}, expected {want:?}"));
    }
    Ok(Outcome {
        checked: got.len(),
        ..Outcome::default()
    })
}

pub(crate) fn argmax_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for vocab in VOCABS {
            let batch = if vocab > 100_000 { 2 } else { 5 };
            v.push(correctness(dtype, batch, vocab));
        }
        v.push(non_finite(dtype));
    }
    for (dtype, batch, vocab, slices) in [
        (DType::BF16, 2, 5, 8),
        (DType::F16, 1, 257, 3),
        (DType::F32, 2, 1000, 7),
        (DType::BF16, 1, 151_936, 128),
        (DType::F32, 1, 151_936, 64),
    ] {
        v.push(split_form(dtype, batch, vocab, slices));
    }
    v.push(rejection(
        OP,
        "split workspace of fewer rows",
        "the workspace holds 1 rows",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 10])?;
            let ws = SamplingWorkspace::with_slices(ctx, 1, 4).map_err(err)?;
            let token = ctx.full_nan(DType::I32, &[2]).map_err(err)?;
            let (c, t) = (ctx.clone(), token.clone());
            Ok((
                token,
                Box::new(move || argmax_split(&c, &x, &ws, &t)) as Refused,
            ))
        },
    ));
    v.push(rejection(OP, "token f32", "`token` must be i32", |ctx| {
        let x = zeros(ctx, DType::F32, &[2, 10])?;
        let token = ctx.full_nan(DType::F32, &[2]).map_err(err)?;
        let (c, t) = (ctx.clone(), token.clone());
        Ok((token, Box::new(move || argmax(&c, &x, &t)) as Refused))
    }));
    v.push(rejection(
        OP,
        "token of another batch",
        "`token` must have shape",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 10])?;
            let token = ctx.full_nan(DType::I32, &[3]).map_err(err)?;
            let (c, t) = (ctx.clone(), token.clone());
            Ok((token, Box::new(move || argmax(&c, &x, &t)) as Refused))
        },
    ));
    v.push(rejection(
        OP,
        "logits 1-D",
        "`logits` must be [batch, vocab]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[10])?;
            let token = ctx.full_nan(DType::I32, &[1]).map_err(err)?;
            let (c, t) = (ctx.clone(), token.clone());
            Ok((token, Box::new(move || argmax(&c, &x, &t)) as Refused))
        },
    ));
    v
}

pub(crate) fn argmax_kernels() -> Vec<KernelUse> {
    let mut v = per_float(&argmax_kernel::DEF);
    v.extend(per_float(&argmax_slice_kernel::DEF));
    v.push(KernelUse {
        def: &argmax_combine_kernel::DEF,
        spec: Specialization::new(vec![], vec![]),
    });
    v
}

/// Greedy decoding over Qwen's 151,936-token vocabulary at batch 1, 32 and 256, through
/// the split form where the device's core count picks it: the bytes are the logits read
/// (and the tokens written).
pub(crate) fn argmax_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (batch, vocab, quick) in BENCH_ROWS {
            v.push(BenchCase {
                op: OP,
                kernel: "argmax_kernel",
                dtype,
                shape: format!("batch={batch} vocab={vocab}"),
                bytes: (batch * vocab * dtype.size_bytes() + 4 * batch) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = logits(ctx, rng, dtype, batch, vocab)?;
                    let token = ctx.full_nan(DType::I32, &[batch]).map_err(err)?;
                    let ws = SamplingWorkspace::new(ctx, batch, vocab).map_err(err)?;
                    let (c, t) = (ctx.clone(), token.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || argmax_split(&c, &x, &ws, &t).map_err(err)),
                        output: token,
                        reference: reference::argmax(&xv, vocab),
                    })
                }),
            });
        }
    }
    v
}
