//! Cases of `hadamard`: every float dtype at every power of two from 1 to 32768 (each
//! register / lane / threadgroup-memory split of the index bits), a 3-D x, scale 1 and
//! 1/√n, a NaN and an infinity in a row; rejections; benches at 64 MiB and more.

use super::fwht::{hadamard, hadamard_kernel, layout, OP};
use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, kernel_use, random_tensor, rejection, upload, zeros, Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::DType;

fn correctness(dtype: DType, shape: Vec<usize>, scale: Option<f64>) -> Case {
    let n = *shape.last().unwrap_or(&1);
    let scale = scale.unwrap_or(1.0 / (n as f64).sqrt());
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("x={shape:?} scale={scale:.4}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &shape, -1.0, 1.0)?;
            let out = ctx.full_nan(dtype, &shape).map_err(err)?;
            hadamard(ctx, &x, scale as f32, &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            compare(
                &got,
                &reference::hadamard(&xv, n, scale),
                accuracy(OP, dtype)?,
            )
        }),
    }
}

/// A NaN in row 0 and +∞ in row 1 of three rows of 64: the whole of row 0 is NaN, row 1
/// is ±∞ everywhere, row 2 matches the reference.
fn non_finite(dtype: DType) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: "rows with NaN, +inf".to_string(),
        run: Box::new(move |ctx, rng| {
            let n = 64;
            let mut xv: Vec<f64> = (0..3 * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            xv[9] = f64::NAN;
            xv[n + 40] = f64::INFINITY;
            let (x, xv) = upload(ctx, dtype, &xv, &[3, n])?;
            let out = ctx.full_nan(dtype, &[3, n]).map_err(err)?;
            hadamard(ctx, &x, 0.125, &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            let want = reference::hadamard(&xv, n, 0.125);
            for i in 0..2 * n {
                let same = (got[i].is_nan() && want[i].is_nan()) || got[i] == want[i];
                if !same {
                    return Err(format!("out[{i}] is {}, the reference {}", got[i], want[i]));
                }
            }
            let mut o = compare(&got[2 * n..], &want[2 * n..], accuracy(OP, dtype)?)?;
            o.checked += 2 * n;
            Ok(o)
        }),
    }
}

pub(crate) fn hadamard_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for k in 0..=15 {
            let n = 1usize << k;
            // Short rows share a threadgroup: an odd count leaves part of the last empty.
            let rows = if n < 256 {
                37
            } else {
                ((1 << 16) / n).clamp(1, 5)
            };
            v.push(correctness(dtype, vec![rows, n], None));
        }
        v.push(correctness(dtype, vec![2, 3, 128], Some(1.0)));
        v.push(non_finite(dtype));
    }
    v.push(rejection(OP, "n = 3", "must be a power of two", |ctx| {
        let x = zeros(ctx, DType::F32, &[2, 3])?;
        let out = ctx.full_nan(DType::F32, &[2, 3]).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((out, Box::new(move || hadamard(&c, &x, 1.0, &o)) as Refused))
    }));
    v.push(rejection(
        OP,
        "scale NaN",
        "`scale` must be finite",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 16])?;
            let out = ctx.full_nan(DType::BF16, &[2, 16]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || hadamard(&c, &x, f32::NAN, &o)) as Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "out of another dtype",
        "`out` must be f16",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[2, 16])?;
            let out = ctx.full_nan(DType::F32, &[2, 16]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || hadamard(&c, &x, 0.25, &o)) as Refused))
        },
    ));
    v
}

pub(crate) fn hadamard_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for k in 0..=15 {
            let l = layout(1 << k);
            let consts = [1 << k, l.epl, l.reg_bits, l.lane_bits, l.warp_bits, l.chunk];
            v.push(kernel_use(&hadamard_kernel::DEF, dtype, &consts));
        }
    }
    v
}

/// (rows, n, quick): a quick shape, then 64–128 MiB at the head dimension 128 of QuaRot's
/// rotations, an MLP width of 8192 and the longest row.
const BENCH_SHAPES: [(usize, usize, bool); 4] = [
    (16, 256, true),
    (262_144, 128, false),
    (8192, 8192, false),
    (2048, 32_768, false),
];

/// The bytes are x read and out written.
pub(crate) fn hadamard_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, quick) in BENCH_SHAPES {
            v.push(BenchCase {
                op: OP,
                kernel: "hadamard_kernel",
                dtype,
                shape: format!("rows={rows} n={n}"),
                bytes: (2 * rows * n * dtype.size_bytes()) as u64,
                flops: (rows * n * n.trailing_zeros() as usize) as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -1.0, 1.0)?;
                    let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
                    let scale = 1.0 / (n as f64).sqrt();
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || hadamard(&c, &x, scale as f32, &o).map_err(err)),
                        output: out,
                        reference: reference::hadamard(&xv, n, scale),
                    })
                }),
            });
        }
    }
    v
}
