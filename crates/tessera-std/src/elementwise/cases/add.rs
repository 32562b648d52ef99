//! Registered cases of `add` and the in-place residual add: every float dtype over shapes
//! with a partial 16-byte run, a rejection per invariant, specialisations and benches.

use super::*;
use crate::elementwise::add::{add, add_in_place, add_in_place_kernel, add_kernel, OP};
use crate::error::{runtime, OpError};
use crate::testing::expect_rejection;
use tessera_runtime::{Context, Tensor};

/// `acc += x` in place: the residual stream after a block.
fn in_place(dtype: DType, shape: Vec<usize>) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("in place shape={shape:?}"),
        run: Box::new(move |ctx, rng| {
            let (acc, accv) = random_tensor(ctx, rng, dtype, &shape, -4.0, 4.0)?;
            let (x, xv) = random_tensor(ctx, rng, dtype, &shape, -4.0, 4.0)?;
            add_in_place(ctx, &acc, &x).map_err(|e| e.to_string())?;
            let got = acc.to_f64_vec().map_err(|e| e.to_string())?;
            compare(&got, &reference::add(&accv, &xv), accuracy(OP, dtype)?)
        }),
    }
}

/// NaN and ±inf in either addend reach exactly their own sums, out of place and in place.
fn non_finite(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "non-finite inputs".to_string(),
        run: Box::new(move |ctx, rng| {
            let n = 77;
            let (_, mut av) = random_tensor(ctx, rng, dtype, &[n], -4.0, 4.0)?;
            let (_, mut bv) = random_tensor(ctx, rng, dtype, &[n], -4.0, 4.0)?;
            for (k, s) in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY]
                .into_iter()
                .enumerate()
            {
                av[3 + 20 * k] = s;
                bv[10 + 20 * k] = s;
            }
            let (a, _) = upload(ctx, dtype, &av, &[n])?;
            let (b, _) = upload(ctx, dtype, &bv, &[n])?;
            let out = ctx.full_nan(dtype, &[n]).map_err(err)?;
            add(ctx, &a, &b, &out).map_err(err)?;
            add_in_place(ctx, &a, &b).map_err(err)?;
            let touched: Vec<bool> = av
                .iter()
                .zip(&bv)
                .map(|(x, y)| !x.is_finite() || !y.is_finite())
                .collect();
            let want = |i: usize| av[i] + bv[i];
            let tol = accuracy(OP, dtype)?;
            let fresh = compare_non_finite(&out.to_f64_vec().map_err(err)?, &touched, want, tol)?;
            let in_place = compare_non_finite(&a.to_f64_vec().map_err(err)?, &touched, want, tol)?;
            Ok(crate::testing::merge(fresh, in_place))
        }),
    }
}

fn correctness(dtype: DType, shape: Vec<usize>) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("shape={shape:?}"),
        run: Box::new(move |ctx, rng| {
            let (a, av) = random_tensor(ctx, rng, dtype, &shape, -4.0, 4.0)?;
            let (b, bv) = random_tensor(ctx, rng, dtype, &shape, -4.0, 4.0)?;
            let out = ctx.full_nan(dtype, &shape).map_err(|e| e.to_string())?;
            add(ctx, &a, &b, &out).map_err(|e| e.to_string())?;
            let got = out.to_f64_vec().map_err(|e| e.to_string())?;
            compare(&got, &reference::add(&av, &bv), accuracy(OP, dtype)?)
        }),
    }
}

type BadCall = fn(&Context, &Tensor, &Tensor, &Tensor) -> Result<(), OpError>;

fn rejection(name: &str, reason: &'static str, call: BadCall) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Rejection,
        dtype: Some(DType::F32),
        name: name.to_string(),
        run: Box::new(move |ctx, rng| {
            let (a, _) = random_tensor(ctx, rng, DType::F32, &[64], -1.0, 1.0)?;
            let (b, _) = random_tensor(ctx, rng, DType::F32, &[64], -1.0, 1.0)?;
            let out = ctx.full_nan(DType::F32, &[64]).map_err(|e| e.to_string())?;
            expect_rejection(&out, reason, || call(ctx, &a, &b, &out))
        }),
    }
}

pub(crate) fn add_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for shape in [vec![1], vec![1000], vec![7, 333], vec![3, 4096], vec![5, 1]] {
            v.push(correctness(dtype, shape.clone()));
            v.push(in_place(dtype, shape));
        }
        v.push(non_finite(dtype));
    }
    v.push(rejection(
        "shape mismatch",
        "`b` must have shape",
        |ctx, a, _b, out| {
            let b = ctx.zeros(DType::F32, &[63]).map_err(runtime(OP))?;
            add(ctx, a, &b, out)
        },
    ));
    v.push(rejection(
        "dtype mismatch",
        "`b` must be f32",
        |ctx, a, _b, out| {
            let b = ctx.zeros(DType::F16, &[64]).map_err(runtime(OP))?;
            add(ctx, a, &b, out)
        },
    ));
    v.push(rejection(
        "integer dtype",
        "`a` must be one of",
        |ctx, _a, _b, _out| {
            let a = ctx.zeros(DType::U32, &[64]).map_err(runtime(OP))?;
            add(ctx, &a, &a.clone(), &a)
        },
    ));
    v.push(rejection(
        "in place onto its own addend",
        "`acc` aliases `x`",
        |ctx, a, _b, _out| add_in_place(ctx, a, a),
    ));
    v.push(rejection(
        "in place with another shape",
        "`x` must have shape",
        |ctx, _a, _b, out| {
            let x = ctx.zeros(DType::F32, &[65]).map_err(runtime(OP))?;
            add_in_place(ctx, out, &x)
        },
    ));
    v.push(rejection(
        "output aliases input",
        "aliases `a`",
        |ctx, a, b, _out| add(ctx, a, b, a),
    ));
    v
}

pub(crate) fn add_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for t in FLOAT_DTYPES {
        let spec = Specialization::new(vec![t], vec![]);
        v.push(KernelUse {
            def: &add_kernel::DEF,
            spec: spec.clone(),
        });
        v.push(KernelUse {
            def: &add_in_place_kernel::DEF,
            spec,
        });
    }
    v
}

pub(crate) fn add_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (n, quick) in [(1usize << 16, true), (1 << 26, false)] {
            v.push(BenchCase {
                op: OP,
                kernel: "add_kernel",
                dtype,
                shape: format!("n={n}"),
                bytes: (3 * n * dtype.size_bytes()) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (a, av) = random_tensor(ctx, rng, dtype, &[n], -4.0, 4.0)?;
                    let (b, bv) = random_tensor(ctx, rng, dtype, &[n], -4.0, 4.0)?;
                    let out = ctx.full_nan(dtype, &[n]).map_err(|e| e.to_string())?;
                    let (ctx2, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || add(&ctx2, &a, &b, &o).map_err(|e| e.to_string())),
                        output: out,
                        reference: reference::add(&av, &bv),
                    })
                }),
            });
        }
    }
    v
}
