//! Registered cases of the AWQ ops: random words (every code and zero point) with scales of
//! either sign, dequantized exactly in every dtype and every group size (one group over K
//! too); the GEMV over every activation dtype and group size at M = 1, 3 and 16 with N not
//! a multiple of the 256 columns a threadgroup takes; specialisations; Llama-3 projection
//! benches at M = 1 and 16.

use super::awq::{awq_dequantize, awq_dequantize_kernel, awq_qgemv, awq_qgemv_kernel};
use super::awq_reference as reference;
use super::gptq_cases::Words;
use crate::matmul::gemv::{row_tile, GEMV_TILES};
use crate::matmul::gemv_cases::GEMV_BENCH_SHAPES;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{
    accuracy, compare, err, kernel_use, random_tensor, rejection, upload, zeros, CaseRng, Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::{Context, DType};

const DEQUANTIZE: &str = "awq_dequantize";
const QGEMV: &str = "awq_qgemv";

/// Random words for `[k, n]` in groups of `group` (scales of either sign, about 1/16).
pub(super) fn random_words(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    (k, n): (usize, usize),
    group: usize,
) -> Result<Words, String> {
    let mut word = |count: usize| -> Vec<f64> {
        (0..count)
            .map(|_| f64::from(rng.int(0, u32::MAX) as i32))
            .collect()
    };
    let (qw, qz) = (word(k * n / 8), word(k / group * n / 8));
    let (qweight, qw) = upload(ctx, DType::I32, &qw, &[k, n / 8])?;
    let (qzeros, qz) = upload(ctx, DType::I32, &qz, &[k / group, n / 8])?;
    let (scales, sv) = random_tensor(ctx, rng, dtype, &[k / group, n], -0.0625, 0.0625)?;
    Ok(Words {
        qweight,
        qzeros,
        scales,
        qw,
        qz,
        sv,
    })
}

/// The group a `group_size` stands for over `k`.
pub(super) fn group_of(group_size: u32, k: usize) -> usize {
    if group_size == 0 {
        k
    } else {
        group_size as usize
    }
}

fn dequantize_case(dtype: DType, group_size: u32, (k, n): (usize, usize)) -> Case {
    Case {
        op: DEQUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("group_size={group_size} K={k} N={n}"),
        run: Box::new(move |ctx, rng| {
            let g = group_of(group_size, k);
            let w = random_words(ctx, rng, dtype, (k, n), g)?;
            let out = ctx.full_nan(dtype, &[k, n]).map_err(err)?;
            awq_dequantize(ctx, &w.qweight, &w.qzeros, &w.scales, &out, group_size).map_err(err)?;
            let want = reference::dequantize(&w.qw, &w.qz, &w.sv, (k, n), g, dtype);
            compare(
                &out.to_f64_vec().map_err(err)?,
                &want,
                accuracy(DEQUANTIZE, dtype)?,
            )
        }),
    }
}

pub(super) fn dequantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for group_size in [32, 64, 128, 0] {
            v.push(dequantize_case(dtype, group_size, (384, 40)));
        }
    }
    v.push(rejection(
        DEQUANTIZE,
        "out of the wrong shape",
        "`out` must have shape [128, 16]",
        |ctx| {
            let qw = zeros(ctx, DType::I32, &[128, 2])?;
            let qz = zeros(ctx, DType::I32, &[1, 2])?;
            let s = zeros(ctx, DType::F16, &[1, 16])?;
            let out = zeros(ctx, DType::F16, &[16, 128])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || awq_dequantize(&c, &qw, &qz, &s, &o, 128)) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn dequantize_kernels() -> Vec<KernelUse> {
    FLOAT_DTYPES
        .into_iter()
        .map(|dt| kernel_use(&awq_dequantize_kernel::DEF, dt, &[]))
        .collect()
}

pub(super) fn dequantize_benches() -> Vec<BenchCase> {
    let dtype = DType::F16;
    let mut v = Vec::new();
    for (k, n, quick) in [(512, 256, true), (4096, 14336, false)] {
        v.push(BenchCase {
            op: DEQUANTIZE,
            kernel: "awq_dequantize_kernel",
            dtype,
            shape: format!("group_size=128 K={k} N={n}"),
            bytes: (k * n / 2 + k * n * dtype.size_bytes()) as u64,
            flops: 0,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let w = random_words(ctx, rng, dtype, (k, n), 128)?;
                let out = ctx.full_nan(dtype, &[k, n]).map_err(err)?;
                let reference = reference::dequantize(&w.qw, &w.qz, &w.sv, (k, n), 128, dtype);
                let (c, o) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        awq_dequantize(&c, &w.qweight, &w.qzeros, &w.scales, &o, 128).map_err(err)
                    }),
                    output: out,
                    reference,
                })
            }),
        });
    }
    v
}

fn qgemv_case(dtype: DType, group_size: u32, (m, n, k): (usize, usize, usize)) -> Case {
    Case {
        op: QGEMV,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("group_size={group_size} M={m} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let g = group_of(group_size, k);
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let w = random_words(ctx, rng, dtype, (k, n), g)?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            awq_qgemv(ctx, &x, &w.qweight, &w.qzeros, &w.scales, &y, group_size).map_err(err)?;
            let want = reference::qgemv(&xv, &w.qw, &w.qz, &w.sv, (m, n, k), g);
            compare(
                &y.to_f64_vec().map_err(err)?,
                &want,
                accuracy(QGEMV, dtype)?,
            )
        }),
    }
}

pub(super) fn qgemv_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for (i, group_size) in [32u32, 64, 128, 0].into_iter().enumerate() {
            for m in [1, 3, 16] {
                // N = 264: 33 words, a partial last threadgroup of 4 (or 2) words; N = 40:
                // 5 words, threadgroups of 2.
                let k = if i % 2 == 0 { 384 } else { 1152 };
                v.push(qgemv_case(
                    dtype,
                    group_size,
                    (m, if m == 1 { 40 } else { 264 }, k),
                ));
            }
        }
        v.push(qgemv_case(dtype, 128, (5, 72, 2048)));
    }
    v.push(rejection(
        QGEMV,
        "y of the wrong shape",
        "`y` must have shape [2, 16]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 128])?;
            let qw = zeros(ctx, DType::I32, &[128, 2])?;
            let qz = zeros(ctx, DType::I32, &[4, 2])?;
            let s = zeros(ctx, DType::BF16, &[4, 16])?;
            let y = zeros(ctx, DType::BF16, &[16, 2])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || awq_qgemv(&c, &x, &qw, &qz, &s, &o, 32)) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn qgemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for tile in GEMV_TILES {
            for wpg in [2, 4] {
                v.push(kernel_use(&awq_qgemv_kernel::DEF, dt, &[tile, wpg]));
            }
        }
    }
    v
}

pub(super) fn qgemv_benches() -> Vec<BenchCase> {
    let (dtype, group) = (DType::F16, 128usize);
    let mut v = Vec::new();
    // The shapes list a linear layer as [N, K]; AWQ stores its transpose.
    for (m, n, k, quick) in GEMV_BENCH_SHAPES {
        // Codes, scales and the zeros' nibbles.
        let weights = k * n / 2 + (k / group) * n * dtype.size_bytes() + (k / group) * n / 2;
        v.push(BenchCase {
            op: QGEMV,
            kernel: "awq_qgemv_kernel",
            dtype,
            shape: format!("group_size={group} M={m} N={n} K={k} tile={}", row_tile(m)),
            bytes: (weights + (m * k + m * n) * dtype.size_bytes()) as u64,
            flops: (2 * m * n * k) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
                let w = random_words(ctx, rng, dtype, (k, n), group)?;
                let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
                let reference = reference::qgemv(&xv, &w.qw, &w.qz, &w.sv, (m, n, k), group);
                let (c, o) = (ctx.clone(), y.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        awq_qgemv(&c, &x, &w.qweight, &w.qzeros, &w.scales, &o, group as u32)
                            .map_err(err)
                    }),
                    output: y,
                    reference,
                })
            }),
        });
    }
    v
}
