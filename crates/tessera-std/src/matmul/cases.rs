//! Registered cases of the tiled GEMM: f16 and bf16, both B layouts, shapes with ragged
//! edges in every dimension; a rejection per invariant; specialisations; bench shapes
//! (up to 2048·2048·512: the f64 reference of a larger GEMM takes minutes).

use super::pipelined::matmul_pipelined_kernel;
use super::reference;
use super::tiled::{matmul, matmul_bt, matmul_tiled_kernel, MATMUL_DTYPES};
use crate::error::OpError;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, err, random_tensor, rejection, zeros};
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

type MatmulFn = fn(&Context, &Tensor, &Tensor, &Tensor) -> Result<(), OpError>;

fn f(bt: bool) -> (&'static str, MatmulFn) {
    if bt {
        ("matmul_bt", matmul_bt)
    } else {
        ("matmul", matmul)
    }
}

fn b_shape(bt: bool, n: usize, k: usize) -> [usize; 2] {
    if bt {
        [n, k]
    } else {
        [k, n]
    }
}

fn correct(dt: DType, (m, n, k): (usize, usize, usize), bt: bool) -> Case {
    let (op, call) = f(bt);
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dt),
        name: format!("M={m} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let (a, av) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
            let (b, bv) = random_tensor(ctx, rng, dt, &b_shape(bt, n, k), -1.0, 1.0)?;
            let c = ctx.full_nan(dt, &[m, n]).map_err(err)?;
            call(ctx, &a, &b, &c).map_err(err)?;
            let want = reference::matmul(&av, &bv, (m, n, k), bt);
            compare(&c.to_f64_vec().map_err(err)?, &want, accuracy(op, dt)?)
        }),
    }
}

type Bad = fn(&Context) -> Result<[Tensor; 3], String>;

fn reject(bt: bool, what: &str, reason: &'static str, bad: Bad) -> Case {
    let (op, call) = f(bt);
    rejection(op, what, reason, move |ctx| {
        let [a, b, c] = bad(ctx)?;
        let (cx, untouched) = (ctx.clone(), c.clone());
        Ok((untouched, Box::new(move || call(&cx, &a, &b, &c))))
    })
}

fn cases(bt: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dt in MATMUL_DTYPES {
        for dims in [(32, 32, 16), (50, 70, 45), (1, 33, 200), (65, 16, 8)] {
            v.push(correct(dt, dims, bt));
        }
        // With K (and for `b` as [K, N], N) a multiple of 8 the pipelined kernel runs:
        // several K tiles through the ring of stages, a partial last one, edge tiles.
        for dims in [(64, 64, 64), (130, 72, 200), (3, 24, 136), (300, 264, 520)] {
            v.push(correct(dt, dims, bt));
        }
    }
    v.extend([
        reject(bt, "f32 inputs", "`a` must be one of f16, bf16", |c| {
            Ok([
                zeros(c, DType::F32, &[4, 8])?,
                zeros(c, DType::F32, &[8, 8])?,
                zeros(c, DType::F32, &[4, 8])?,
            ])
        }),
        reject(bt, "b dtype != a dtype", "`b` must be f16", |c| {
            Ok([
                zeros(c, DType::F16, &[4, 8])?,
                zeros(c, DType::BF16, &[8, 8])?,
                zeros(c, DType::F16, &[4, 8])?,
            ])
        }),
        reject(bt, "c dtype != a dtype", "`c` must be bf16", |c| {
            Ok([
                zeros(c, DType::BF16, &[4, 8])?,
                zeros(c, DType::BF16, &[8, 8])?,
                zeros(c, DType::F32, &[4, 8])?,
            ])
        }),
        reject(
            bt,
            "a not a matrix",
            "`a` must be a non-empty matrix",
            |c| {
                Ok([
                    zeros(c, DType::F16, &[32])?,
                    zeros(c, DType::F16, &[8, 8])?,
                    zeros(c, DType::F16, &[4, 8])?,
                ])
            },
        ),
        reject(bt, "empty a", "`a` must be a non-empty matrix", |c| {
            Ok([
                zeros(c, DType::F16, &[0, 8])?,
                zeros(c, DType::F16, &[8, 8])?,
                zeros(c, DType::F16, &[0, 8])?,
            ])
        }),
        reject(bt, "c shape", "`c` must have shape [4, 8]", |c| {
            Ok([
                zeros(c, DType::F16, &[4, 8])?,
                zeros(c, DType::F16, &[8, 8])?,
                zeros(c, DType::F16, &[8, 4])?,
            ])
        }),
        reject(bt, "c aliases a", "aliases `a`", |c| {
            let a = zeros(c, DType::F16, &[8, 8])?;
            Ok([a.clone(), zeros(c, DType::F16, &[8, 8])?, a])
        }),
    ]);
    // The inner dimension must agree.
    v.push(if bt {
        reject(bt, "K mismatch", "`b` must be [N, K = 8]", |c| {
            Ok([
                zeros(c, DType::F16, &[4, 8])?,
                zeros(c, DType::F16, &[8, 9])?,
                zeros(c, DType::F16, &[4, 8])?,
            ])
        })
    } else {
        reject(bt, "K mismatch", "`b` must be [K = 8, N]", |c| {
            Ok([
                zeros(c, DType::F16, &[4, 8])?,
                zeros(c, DType::F16, &[9, 8])?,
                zeros(c, DType::F16, &[4, 8])?,
            ])
        })
    });
    v
}

fn kernels(bt: bool) -> Vec<KernelUse> {
    let mut v: Vec<KernelUse> = MATMUL_DTYPES
        .iter()
        .map(|&t| KernelUse {
            def: &matmul_tiled_kernel::DEF,
            spec: Specialization::new(vec![t], vec![Literal::U32(bt as u32)]),
        })
        .collect();
    for t in MATMUL_DTYPES {
        for (wg, nb, stages) in [(2, 16, 3), (1, 8, 4), (1, 4, 2)] {
            v.push(KernelUse {
                def: &matmul_pipelined_kernel::DEF,
                spec: Specialization::new(
                    vec![t],
                    [wg, nb, stages, bt as u32].map(Literal::U32).to_vec(),
                ),
            });
        }
    }
    v
}

fn benches(bt: bool) -> Vec<BenchCase> {
    let (op, call) = f(bt);
    let mut v = Vec::new();
    for dt in MATMUL_DTYPES {
        for ((m, n, k), quick) in [
            ((256, 256, 256), true),
            ((4096, 4096, 4096), false),
            ((4096, 8192, 2048), false),
            ((2048, 2048, 512), false),
            ((128, 4096, 4096), false),
        ] {
            v.push(BenchCase {
                op,
                kernel: "matmul_pipelined_kernel",
                dtype: dt,
                shape: format!("M={m} N={n} K={k}"),
                bytes: ((m * k + k * n + m * n) * dt.size_bytes()) as u64,
                flops: (2 * m * n * k) as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (a, av) = random_tensor(ctx, rng, dt, &[m, k], -1.0, 1.0)?;
                    let (b, bv) = random_tensor(ctx, rng, dt, &b_shape(bt, n, k), -1.0, 1.0)?;
                    let c = ctx.full_nan(dt, &[m, n]).map_err(err)?;
                    let (cx, o) = (ctx.clone(), c.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || call(&cx, &a, &b, &o).map_err(err)),
                        output: c,
                        // The f64 reference of the large shapes takes minutes; the
                        // cases check those kernels at smaller shapes.
                        reference: if m * n * k <= 1 << 31 {
                            reference::matmul(&av, &bv, (m, n, k), bt)
                        } else {
                            Vec::new()
                        },
                    })
                }),
            });
        }
    }
    v
}

pub(super) fn matmul_kernels() -> Vec<KernelUse> {
    kernels(false)
}

pub(super) fn matmul_cases() -> Vec<Case> {
    cases(false)
}

pub(super) fn matmul_benches() -> Vec<BenchCase> {
    benches(false)
}

pub(super) fn matmul_bt_kernels() -> Vec<KernelUse> {
    kernels(true)
}

pub(super) fn matmul_bt_cases() -> Vec<Case> {
    cases(true)
}

pub(super) fn matmul_bt_benches() -> Vec<BenchCase> {
    benches(true)
}
