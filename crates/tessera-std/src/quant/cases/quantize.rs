//! Cases of `affine_quantize`: every dtype × bits × group size; groups of every kind the
//! algorithm branches on (mixed signs, all positive, all negative, constant, a range below
//! the 1e-7 step floor, zeros, codes that are exact ties); the words, scales and biases
//! compared exactly.

use super::*;
use crate::quant::affine::{affine_quantize, affine_quantize_kernel};
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, PreparedBench};
use crate::testing::{accuracy, compare, kernel_use, merge, rejection, zeros};
use crate::validate::FLOAT_DTYPES;

const OP: &str = "affine_quantize";

/// Values of group `g`: one of seven kinds in turn, the last halves from 0 to 3 (2-bit
/// steps of 1 from the edge 3: codes that are exact ties, which round to even).
fn group_values(rng: &mut CaseRng, g: usize, len: usize) -> Vec<f64> {
    let c = rng.uniform(-2.0, 2.0);
    (0..len)
        .map(|i| match g % 7 {
            0 => rng.uniform(-1.0, 1.0),
            1 => rng.uniform(0.25, 3.0),
            2 => rng.uniform(-5.0, -0.5),
            3 => c,
            4 => c + rng.uniform(0.0, 1e-6),
            5 => 0.0,
            _ => (i % 7) as f64 * 0.5,
        })
        .collect()
}

fn correct(dtype: DType, (n, k): (usize, usize), (bits, group): (u32, u32)) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("bits={bits} group_size={group} N={n} K={k}"),
        run: Box::new(move |ctx, rng| {
            let values: Vec<f64> = (0..n * k / group as usize)
                .flat_map(|g| group_values(rng, g, group as usize))
                .collect();
            let (w, wv) = upload(ctx, dtype, &values, &[n, k])?;
            let groups = k / group as usize;
            let packed = poisoned(ctx, DType::U32, &[n, k * bits as usize / 32])?;
            let scales = poisoned(ctx, dtype, &[n, groups])?;
            let biases = poisoned(ctx, dtype, &[n, groups])?;
            affine_quantize(ctx, &w, &packed, &scales, &biases, bits, group).map_err(err)?;
            let want = reference::quantize(&wv, bits, group as usize, dtype);
            let exact = accuracy(OP, dtype)?;
            let words = compare(&packed.to_f64_vec().map_err(err)?, &want.packed, exact)
                .map_err(|e| format!("packed: {e}"))?;
            let s = compare(&scales.to_f64_vec().map_err(err)?, &want.scales, exact)
                .map_err(|e| format!("scales: {e}"))?;
            let b = compare(&biases.to_f64_vec().map_err(err)?, &want.biases, exact)
                .map_err(|e| format!("biases: {e}"))?;
            Ok(merge(merge(words, s), b))
        }),
    }
}

pub(crate) fn quantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for format in formats() {
            v.push(correct(dtype, (3, 2 * format.1 as usize), format));
        }
        v.push(correct(dtype, (1, 384), (3, 128)));
        v.push(correct(dtype, (7, 96), (5, 32)));
        v.push(correct(dtype, (7, 64), (2, 32)));
    }
    v.push(rejection(
        OP,
        "packed of the wrong width",
        "`packed` must have shape [2, 8]",
        |ctx| {
            let w = zeros(ctx, DType::F16, &[2, 64])?;
            let packed = zeros(ctx, DType::U32, &[2, 9])?;
            let (s, b) = (
                zeros(ctx, DType::F16, &[2, 1])?,
                zeros(ctx, DType::F16, &[2, 1])?,
            );
            let (c, out) = (ctx.clone(), s.clone());
            Ok((
                out,
                Box::new(move || affine_quantize(&c, &w, &packed, &s, &b, 4, 64))
                    as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        OP,
        "scales in another dtype",
        "`scales` must be bf16",
        |ctx| {
            let w = zeros(ctx, DType::BF16, &[2, 64])?;
            let packed = zeros(ctx, DType::U32, &[2, 16])?;
            let (s, b) = (
                zeros(ctx, DType::F32, &[2, 2])?,
                zeros(ctx, DType::BF16, &[2, 2])?,
            );
            let (c, out) = (ctx.clone(), s.clone());
            Ok((
                out,
                Box::new(move || affine_quantize(&c, &w, &packed, &s, &b, 8, 32))
                    as crate::testing::Refused,
            ))
        },
    ));
    v
}

pub(crate) fn quantize_kernels() -> Vec<KernelUse> {
    FLOAT_DTYPES
        .into_iter()
        .flat_map(|dt| {
            formats().map(move |(bits, group)| {
                kernel_use(&affine_quantize_kernel::DEF, dt, &[bits, group])
            })
        })
        .collect()
}

pub(crate) fn quantize_benches() -> Vec<BenchCase> {
    let dtype = DType::BF16;
    [(64, 512, true), (4096, 14336, false)]
        .into_iter()
        .map(|(n, k, quick)| BenchCase {
            op: OP,
            kernel: "affine_quantize_kernel",
            dtype,
            shape: format!("bits=4 group_size=64 N={n} K={k}"),
            bytes: (n * k * 2 + n * k / 2 + 2 * (n * k / 64) * 2) as u64,
            flops: 0,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (w, wv) = random_tensor(ctx, rng, dtype, &[n, k], -1.0, 1.0)?;
                let packed = poisoned(ctx, DType::U32, &[n, k / 8])?;
                let scales = poisoned(ctx, dtype, &[n, k / 64])?;
                let biases = poisoned(ctx, dtype, &[n, k / 64])?;
                // The bench compares one output: the scales, where a wrong group shows.
                let (c, out) = (ctx.clone(), scales.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        affine_quantize(&c, &w, &packed, &scales, &biases, 4, 64).map_err(err)
                    }),
                    output: out,
                    reference: reference::quantize(&wv, 4, 64, dtype).scales,
                })
            }),
        })
        .collect()
}
