//! Cases of `hadamard`: every float dtype at every power of two from 1 to 32768 (each
//! register / lane / threadgroup-memory split of the index bits, the long-row column
//! layout with several rows a threadgroup and a part-empty last one) and at every 12·2^k,
//! 20·2^k and 28·2^k up to 32768, a 3-D x, scale 1 and 1/√n, a NaN and an infinity in a
//! row; rejections; benches at 64 MiB and more.

use super::columns::{
    columns_layout, hadamard_columns_kernel, hadamard_columns_wide_kernel, WIDE_N,
};
use super::fwht::{hadamard, hadamard_kernel, layout, OP};
use super::kron::{hadamard_kron_kernel, kron_layout, max_sub_row, BASES};
use super::kron_columns::{
    hadamard_kron_columns_kernel, hadamard_kron_columns_wide_kernel, kron_columns_layout,
};
use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, kernel_use, random_tensor, rejection, upload, zeros, Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::DType;

/// The reference, for the lengths it knows.
fn want(x: &[f64], n: usize, scale: f64) -> Result<Vec<f64>, String> {
    reference::hadamard(x, n, scale).ok_or_else(|| format!("no reference for n = {n}"))
}

/// Rows for a case of length `n`: short rows share a threadgroup, and an odd count leaves
/// part of the last one empty; long ones a few.
fn rows_for(n: usize) -> usize {
    if n < 256 {
        37
    } else {
        ((1 << 16) / n).clamp(1, 5)
    }
}

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
            compare(&got, &want(&xv, n, scale)?, accuracy(OP, dtype)?)
        }),
    }
}

/// A NaN in row 0 and +∞ in row 1 of three rows of `n` (64, 8192, 12·8 or 12·256: lane
/// shuffles on each path): the whole of row 0 is NaN, row 1 is ±∞ everywhere, row 2
/// matches the reference.
fn non_finite(dtype: DType, n: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("rows of {n} with NaN, +inf"),
        run: Box::new(move |ctx, rng| {
            let mut xv: Vec<f64> = (0..3 * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            xv[9] = f64::NAN;
            xv[n + 40] = f64::INFINITY;
            let (x, xv) = upload(ctx, dtype, &xv, &[3, n])?;
            let out = ctx.full_nan(dtype, &[3, n]).map_err(err)?;
            hadamard(ctx, &x, 0.125, &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            let want = want(&xv, n, 0.125)?;
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
            v.push(correctness(dtype, vec![rows_for(n), n], None));
        }
        for (m, _) in BASES {
            for k in 0..=max_sub_row(m).trailing_zeros() {
                let n = (m as usize) << k;
                v.push(correctness(dtype, vec![rows_for(n), n], None));
            }
        }
        v.push(correctness(dtype, vec![2, 3, 128], Some(1.0)));
        v.push(correctness(dtype, vec![3, 2, 20 * 64], Some(1.0)));
        v.push(non_finite(dtype, 64));
        v.push(non_finite(dtype, 8192));
        v.push(non_finite(dtype, 12 * 8));
        v.push(non_finite(dtype, 12 * 256));
    }
    v.push(rejection(
        OP,
        "n = 3",
        "must be 2^k, 12·2^k, 20·2^k or 28·2^k",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[2, 3])?;
            let out = ctx.full_nan(DType::F32, &[2, 3]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || hadamard(&c, &x, 1.0, &o)) as Refused))
        },
    ));
    v.push(rejection(
        OP,
        "n = 12·4096",
        "must be 2^k, 12·2^k, 20·2^k or 28·2^k up to 32768",
        |ctx| {
            let x = zeros(ctx, DType::F32, &[1, 12 * 4096])?;
            let out = ctx.full_nan(DType::F32, &[1, 12 * 4096]).map_err(err)?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || hadamard(&c, &x, 1.0, &o)) as Refused))
        },
    ));
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
            // The long-row layout under CUDA's threadgroup memory and under Metal's.
            let mut seen = Vec::new();
            for limit in [227 * 1024, 32 * 1024] {
                if let Some(c) =
                    columns_layout(1 << k, dtype.size_bytes(), limit).filter(|c| !seen.contains(c))
                {
                    seen.push(c);
                    let def = if c.n == WIDE_N {
                        &hadamard_columns_wide_kernel::DEF
                    } else {
                        &hadamard_columns_kernel::DEF
                    };
                    v.push(kernel_use(def, dtype, &c.consts()));
                }
            }
        }
        for (m, _) in BASES {
            for k in 0..=max_sub_row(m).trailing_zeros() {
                if let Some(l) = kron_layout(m << k) {
                    v.push(kernel_use(&hadamard_kron_kernel::DEF, dtype, &l.consts()));
                    if let Some(c) = kron_columns_layout(l, 227 * 1024) {
                        let def = if c.wide() {
                            &hadamard_kron_columns_wide_kernel::DEF
                        } else {
                            &hadamard_kron_columns_kernel::DEF
                        };
                        v.push(kernel_use(def, dtype, &c.consts()));
                    }
                }
            }
        }
    }
    v
}

/// (rows, n, quick): quick shapes, then 64–128 MiB at the head dimension 128 of QuaRot's
/// rotations, an MLP width of 8192, the longest row, and the widths of m·2^k: the hidden
/// size 5120 = 20·256 (Llama-2-13B, Qwen2.5-14B) and the MLP widths 12288 = 12·1024
/// (Qwen3-8B) and 14336 = 28·512 (Llama-3-8B).
const BENCH_SHAPES: [(usize, usize, bool); 8] = [
    (16, 256, true),
    (16, 12 * 64, true),
    (262_144, 128, false),
    (8192, 8192, false),
    (2048, 32_768, false),
    (8192, 5120, false),
    (4096, 12_288, false),
    (4096, 14_336, false),
];

/// The base order m of n = m·2^k, 0 for a power of two.
fn base_order(n: usize) -> usize {
    reference::factor(n).map_or(0, |(m, _)| if m == 1 { 0 } else { m })
}

/// The bytes are x read and out written.
pub(crate) fn hadamard_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dtype in [DType::BF16, DType::F32] {
        for (rows, n, quick) in BENCH_SHAPES {
            v.push(BenchCase {
                op: OP,
                kernel: if n.is_power_of_two() {
                    "hadamard_kernel"
                } else {
                    "hadamard_kron_kernel"
                },
                dtype,
                shape: format!("rows={rows} n={n}"),
                bytes: (2 * rows * n * dtype.size_bytes()) as u64,
                // Adds: log2 of the power-of-two factor, and m for the base matrix.
                flops: (rows * n * (n.trailing_zeros() as usize + base_order(n))) as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[rows, n], -1.0, 1.0)?;
                    let out = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
                    let scale = 1.0 / (n as f64).sqrt();
                    let reference = want(&xv, n, scale)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || hadamard(&c, &x, scale as f32, &o).map_err(err)),
                        output: out,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
