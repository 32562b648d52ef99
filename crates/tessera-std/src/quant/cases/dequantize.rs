//! Cases of `affine_dequantize`: every dtype × bits × group size, on weights our reference
//! quantized and on random words (every code, scales of either sign); compared exactly.

use super::*;
use crate::quant::affine::{affine_dequantize, affine_dequantize_kernel};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, kernel_use, rejection, zeros};
use crate::validate::FLOAT_DTYPES;

const OP: &str = "affine_dequantize";

type Make =
    fn(&Context, &mut CaseRng, DType, (usize, usize), (u32, u32)) -> Result<Quantized, String>;

fn correct(
    dtype: DType,
    (n, k): (usize, usize),
    (bits, group): (u32, u32),
    random_words: bool,
) -> Case {
    let make: Make = if random_words {
        random_quantized
    } else {
        quantized
    };
    let source = if random_words {
        "random words"
    } else {
        "quantized"
    };
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{source} bits={bits} group_size={group} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let q = make(ctx, rng, dtype, (n, k), (bits, group))?;
            let out = poisoned(ctx, dtype, &[n, k])?;
            affine_dequantize(ctx, &q.packed, &q.scales, &q.biases, &out, bits, group)
                .map_err(err)?;
            let want = reference::dequantize(
                &q.host.packed,
                &q.host.scales,
                &q.host.biases,
                (n, k),
                bits,
                group as usize,
                dtype,
            );
            compare(&out.to_f64_vec().map_err(err)?, &want, accuracy(OP, dtype)?)
        }),
    }
}

pub(crate) fn dequantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for format in formats() {
            let k = 2 * format.1 as usize;
            v.push(correct(dtype, (3, k), format, false));
            v.push(correct(dtype, (2, k), format, true));
        }
        v.push(correct(dtype, (1, 384), (6, 128), false));
    }
    v.push(rejection(
        OP,
        "K not a multiple of the group",
        "multiple of the group size 64",
        |ctx| {
            // 3 words of 4-bit values: K = 24.
            let packed = zeros(ctx, DType::U32, &[2, 3])?;
            let (s, b) = (
                zeros(ctx, DType::F32, &[2, 1])?,
                zeros(ctx, DType::F32, &[2, 1])?,
            );
            let out = zeros(ctx, DType::F32, &[2, 24])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || affine_dequantize(&c, &packed, &s, &b, &o, 4, 64))
                    as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "words holding no whole value",
        "no whole number of 3-bit values",
        |ctx| {
            let packed = zeros(ctx, DType::U32, &[2, 4])?;
            let (s, b) = (
                zeros(ctx, DType::F32, &[2, 1])?,
                zeros(ctx, DType::F32, &[2, 1])?,
            );
            let out = zeros(ctx, DType::F32, &[2, 42])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || affine_dequantize(&c, &packed, &s, &b, &o, 3, 32))
                    as crate::testing::Refused,
            ))
        },
    ));
    v
}

pub(crate) fn dequantize_kernels() -> Vec<KernelUse> {
    FLOAT_DTYPES
        .into_iter()
        .flat_map(|dt| {
            formats().map(move |(bits, group)| {
                kernel_use(&affine_dequantize_kernel::DEF, dt, &[bits, group])
            })
        })
        .collect()
}

pub(crate) fn dequantize_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    [(64, 512, true), (4096, 14336, false)]
        .into_iter()
        .map(|(n, k, quick)| BenchCase {
            op: OP,
            kernel: "affine_dequantize_kernel",
            dtype,
            shape: format!("bits=4 group_size=64 N={n} K={k}"),
            bytes: (n * k / 2 + 2 * (n * k / 64) * 2 + n * k * 2) as u64,
            flops: 0,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let q = random_quantized(ctx, rng, dtype, (n, k), (4, 64))?;
                let out = poisoned(ctx, dtype, &[n, k])?;
                let reference = reference::dequantize(
                    &q.host.packed,
                    &q.host.scales,
                    &q.host.biases,
                    (n, k),
                    4,
                    64,
                    dtype,
                );
                let (c, o) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        affine_dequantize(&c, &q.packed, &q.scales, &q.biases, &o, 4, 64)
                            .map_err(err)
                    }),
                    output: out,
                    reference,
                })
            }),
        })
        .collect()
}
