//! Cases of `sort` and `argsort`: every float dtype over rows of 1, 7, 1000 and 4096
//! (threadgroup memory), 4097, 65536 and 262144 (radix passes), a 3-D x, both directions;
//! rows of few distinct values (stability decides most of the order); rows holding NaN,
//! ±∞ and ±0 on both paths; rejections; benches of one 256k row, 32 rows of 32k and 4096
//! rows of 1024.

use super::*;
use crate::reduce::sort::{
    argsort, sort, sort_count_kernel, sort_rows_kernel, sort_scan_kernel, sort_scatter_kernel,
    ARGSORT, OP,
};
use crate::reduce::sort_reference;
use crate::reduce::SortWorkspace;

/// (x's shape, descending): one element, odd, short, the longest short row, the shortest
/// radix row, long rows and one 256k row; a 3-D x.
const SHAPES: [(&[usize], bool); 8] = [
    (&[3, 1], false),
    (&[4, 7], true),
    (&[2, 1000], false),
    (&[3, 4096], true),
    (&[3, 4097], false),
    (&[2, 65_536], true),
    (&[1, 262_144], false),
    (&[2, 3, 96], true),
];

/// Whether `got` is `want` to the bit (−0 is not +0), or both are NaN.
fn same_value(got: f64, want: f64) -> bool {
    got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan()
}

/// Runs sort (or argsort, `values_too` false) on `xv` of `shape`, uploaded as `dtype`,
/// and compares the indices (and values, bit for bit) with the reference exactly.
fn run_exact(
    ctx: &Context,
    dtype: DType,
    shape: &[usize],
    descending: bool,
    values_too: bool,
    xv: &[f64],
) -> Result<Outcome, String> {
    let (x, xv) = upload(ctx, dtype, xv, shape)?;
    let n = *shape.last().ok_or("no shape")?;
    let indices = ctx.full_nan(DType::I32, shape).map_err(err)?;
    let ws = SortWorkspace::new(ctx, shape).map_err(err)?;
    let values = if values_too {
        let values = ctx.full_nan(dtype, shape).map_err(err)?;
        sort(ctx, &x, descending, &ws, &values, &indices).map_err(err)?;
        Some(values)
    } else {
        argsort(ctx, &x, descending, &ws, &indices).map_err(err)?;
        None
    };
    let (want_v, want_i) = sort_reference::sort(&xv, n, descending);
    let got_i = indices.to_f64_vec().map_err(err)?;
    if let Some(at) = (0..want_i.len()).find(|&i| got_i.get(i) != want_i.get(i)) {
        return Err(format!(
            "indices[{at}] (row {}, rank {}) is {}, the reference {}",
            at / n,
            at % n,
            got_i.get(at).copied().unwrap_or(f64::NAN),
            want_i[at]
        ));
    }
    let mut checked = got_i.len();
    if let Some(values) = values {
        let got_v = values.to_f64_vec().map_err(err)?;
        if got_v.len() != want_v.len() {
            return Err(format!(
                "{} values, the reference {}",
                got_v.len(),
                want_v.len()
            ));
        }
        for (i, (&g, &w)) in got_v.iter().zip(&want_v).enumerate() {
            if !same_value(g, w) {
                return Err(format!("values[{i}] is {g}, the reference {w}"));
            }
        }
        checked += got_v.len();
    }
    Ok(Outcome {
        checked,
        ..Outcome::default()
    })
}

fn op_of(values_too: bool) -> &'static str {
    if values_too {
        OP
    } else {
        ARGSORT
    }
}

/// Uniform values in [−4, 4) (few exact ties, more in f16 and bf16).
fn uniform(dtype: DType, shape: &'static [usize], descending: bool, values_too: bool) -> Case {
    Case {
        op: op_of(values_too),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("x={shape:?} descending={descending}"),
        run: Box::new(move |ctx, rng| {
            let len: usize = shape.iter().product();
            let xv: Vec<f64> = (0..len).map(|_| rng.uniform(-4.0, 4.0)).collect();
            run_exact(ctx, dtype, shape, descending, values_too, &xv)
        }),
    }
}

/// Values from 40 distinct ones, so most of each row's order is decided by stability.
fn duplicates(dtype: DType, shape: &'static [usize], descending: bool, values_too: bool) -> Case {
    Case {
        op: op_of(values_too),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("x={shape:?} of 40 distinct values, descending={descending}"),
        run: Box::new(move |ctx, rng| {
            let len: usize = shape.iter().product();
            let xv: Vec<f64> = (0..len)
                .map(|_| (f64::from(rng.int(0, 40)) - 20.0) / 4.0)
                .collect();
            run_exact(ctx, dtype, shape, descending, values_too, &xv)
        }),
    }
}

/// Rows of `n` with NaNs, ±∞ and −0 beside +0 sprinkled over random values, an all-NaN
/// row, and a row of ±0 only (their order is the index order).
fn non_finite(dtype: DType, n: usize, descending: bool, values_too: bool) -> Case {
    Case {
        op: op_of(values_too),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows of {n} with NaN, ±inf, ±0, descending={descending}"),
        run: Box::new(move |ctx, rng| {
            let rows = 4;
            let mut xv: Vec<f64> = (0..rows * n).map(|_| rng.uniform(-4.0, 4.0)).collect();
            let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 1.0];
            for v in xv[..2 * n].iter_mut() {
                if rng.int(0, 4) == 0 {
                    *v = specials[rng.int(0, specials.len() as u32) as usize];
                }
            }
            for i in 0..n {
                xv[2 * n + i] = f64::NAN;
                xv[3 * n + i] = if rng.int(0, 2) == 0 { 0.0 } else { -0.0 };
            }
            run_exact(ctx, dtype, &[rows, n], descending, values_too, &xv)
        }),
    }
}

/// Tensors for a sort of a `[2, n]` f32 x with `values` and `indices` of the given dtype
/// and shape, and a workspace made for `ws_shape`.
fn bad_sort(
    ctx: &Context,
    n: usize,
    values: (DType, &[usize]),
    indices: (DType, &[usize]),
    ws_shape: &[usize],
) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, DType::F32, &[2, n])?;
    let v = ctx.full_nan(values.0, values.1).map_err(err)?;
    let i = ctx.full_nan(indices.0, indices.1).map_err(err)?;
    let ws = SortWorkspace::new(ctx, ws_shape).map_err(err)?;
    let (c, untouched) = (ctx.clone(), i.clone());
    Ok((
        untouched,
        Box::new(move || sort(&c, &x, false, &ws, &v, &i)) as Refused,
    ))
}

/// An argsort of a `[2, n]` bf16 x into `indices` of the given dtype and shape.
fn bad_argsort(
    ctx: &Context,
    n: usize,
    indices: (DType, &[usize]),
    ws_shape: &[usize],
) -> Result<(Tensor, Refused), String> {
    let x = zeros(ctx, DType::BF16, &[2, n])?;
    let i = ctx.full_nan(indices.0, indices.1).map_err(err)?;
    let ws = SortWorkspace::new(ctx, ws_shape).map_err(err)?;
    let (c, untouched) = (ctx.clone(), i.clone());
    Ok((
        untouched,
        Box::new(move || argsort(&c, &x, true, &ws, &i)) as Refused,
    ))
}

pub(crate) fn sort_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (shape, descending) in SHAPES {
            v.push(uniform(dtype, shape, descending, true));
        }
        v.push(duplicates(dtype, &[3, 3000], false, true));
        v.push(duplicates(dtype, &[2, 9000], true, true));
        for descending in [false, true] {
            v.push(non_finite(dtype, 300, descending, true));
            v.push(non_finite(dtype, 5000, descending, true));
        }
    }
    let f32s = DType::F32;
    v.push(rejection(
        OP,
        "values bf16 for f32 x",
        "`values` must be f32",
        move |ctx| {
            bad_sort(
                ctx,
                10,
                (DType::BF16, &[2, 10]),
                (DType::I32, &[2, 10]),
                &[2, 10],
            )
        },
    ));
    v.push(rejection(
        OP,
        "indices f32",
        "`indices` must be i32",
        move |ctx| bad_sort(ctx, 10, (f32s, &[2, 10]), (f32s, &[2, 10]), &[2, 10]),
    ));
    v.push(rejection(
        OP,
        "values of another shape",
        "`values` must have shape [2, 10]",
        move |ctx| bad_sort(ctx, 10, (f32s, &[2, 11]), (DType::I32, &[2, 10]), &[2, 10]),
    ));
    v.push(rejection(
        OP,
        "indices of another shape",
        "`indices` must have shape [2, 10]",
        move |ctx| bad_sort(ctx, 10, (f32s, &[2, 10]), (DType::I32, &[20]), &[2, 10]),
    ));
    v.push(rejection(
        OP,
        "n > 262144",
        "n = 262145 is above the longest row supported, 262144",
        move |ctx| {
            let s: &[usize] = &[2, 262_145];
            bad_sort(ctx, 262_145, (f32s, s), (DType::I32, s), &[2, 10])
        },
    ));
    v.push(rejection(
        OP,
        "workspace made for short rows",
        "make it with SortWorkspace::new",
        move |ctx| {
            let s: &[usize] = &[2, 5000];
            bad_sort(ctx, 5000, (f32s, s), (DType::I32, s), &[2, 100])
        },
    ));
    v.push(rejection(
        OP,
        "workspace made for fewer rows",
        "make it with SortWorkspace::new",
        move |ctx| {
            let s: &[usize] = &[2, 5000];
            bad_sort(ctx, 5000, (f32s, s), (DType::I32, s), &[1, 5000])
        },
    ));
    v.push(rejection(
        OP,
        "empty row",
        "must not be empty",
        move |ctx| {
            let s: &[usize] = &[2, 0];
            bad_sort(ctx, 0, (f32s, s), (DType::I32, s), &[2, 10])
        },
    ));
    v
}

pub(crate) fn argsort_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        v.push(uniform(dtype, &[3, 1000], true, false));
        v.push(uniform(dtype, &[2, 6000], false, false));
        v.push(duplicates(dtype, &[2, 20_000], true, false));
        v.push(non_finite(dtype, 500, false, false));
        v.push(non_finite(dtype, 4500, true, false));
    }
    v.push(rejection(
        ARGSORT,
        "indices u32",
        "`indices` must be i32",
        move |ctx| bad_argsort(ctx, 10, (DType::U32, &[2, 10]), &[2, 10]),
    ));
    v.push(rejection(
        ARGSORT,
        "indices of another shape",
        "`indices` must have shape [2, 10]",
        move |ctx| bad_argsort(ctx, 10, (DType::I32, &[2, 9]), &[2, 10]),
    ));
    v.push(rejection(
        ARGSORT,
        "workspace made for short rows",
        "make it with SortWorkspace::new",
        move |ctx| bad_argsort(ctx, 8000, (DType::I32, &[2, 8000]), &[2, 4096]),
    ));
    v
}

/// Every (dtype, pad, with_values) the threadgroup-memory sort launches, and the radix
/// passes' kernels.
fn kernels(with_values: u32) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for pad in [2u32, 8, 128, 1024, 2048, 4096] {
            v.push(kernel_use(
                &sort_rows_kernel::DEF,
                dtype,
                &[pad, pad.trailing_zeros(), with_values],
            ));
        }
        v.push(kernel_use(&sort_count_kernel::DEF, dtype, &[]));
        v.push(kernel_use(&sort_scatter_kernel::DEF, dtype, &[with_values]));
    }
    v.push(KernelUse {
        def: &sort_scan_kernel::DEF,
        spec: tessera_ir::Specialization::new(vec![], vec![]),
    });
    v
}

pub(crate) fn sort_kernels() -> Vec<KernelUse> {
    kernels(1)
}

pub(crate) fn argsort_kernels() -> Vec<KernelUse> {
    kernels(0)
}

/// (rows, n, quick): a quick shape, then one 256k row, 32 rows of 32k and 4096 of 1024.
const BENCH_SHAPES: [(usize, usize, bool); 4] = [
    (4, 1000, true),
    (1, 262_144, false),
    (32, 32_768, false),
    (4096, 1024, false),
];

/// The bytes are x read and the outputs written once (the radix passes' traffic through
/// the workspace is not counted).
fn benches(values_too: bool) -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, quick) in BENCH_SHAPES {
            let written = if values_too {
                dtype.size_bytes() + 4
            } else {
                4
            };
            v.push(BenchCase {
                op: op_of(values_too),
                kernel: if n > crate::reduce::sort::SHORT_MAX {
                    "sort_scatter_kernel"
                } else {
                    "sort_rows_kernel"
                },
                dtype,
                shape: format!("rows={rows} n={n}"),
                bytes: (rows * n * (dtype.size_bytes() + written)) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -4.0, 4.0)?;
                    let indices = ctx.full_nan(DType::I32, &[rows, n]).map_err(err)?;
                    let ws = SortWorkspace::new(ctx, &[rows, n]).map_err(err)?;
                    let (c, i) = (ctx.clone(), indices.clone());
                    let launch: Box<dyn FnMut() -> Result<(), String>> = if values_too {
                        let values = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
                        Box::new(move || sort(&c, &x, false, &ws, &values, &i).map_err(err))
                    } else {
                        Box::new(move || argsort(&c, &x, false, &ws, &i).map_err(err))
                    };
                    Ok(PreparedBench {
                        launch,
                        output: indices,
                        reference: sort_reference::sort(&xv, n, false).1,
                    })
                }),
            });
        }
    }
    v
}

pub(crate) fn sort_benches() -> Vec<BenchCase> {
    benches(true)
}

pub(crate) fn argsort_benches() -> Vec<BenchCase> {
    benches(false)
}
