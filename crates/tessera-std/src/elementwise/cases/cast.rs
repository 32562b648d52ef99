//! Cases of `cast`: every pair of float dtypes, bit-exact against IEEE rounding from the
//! `half` crate, over values from subnormal to beyond every range, ties, NaN and ±inf;
//! shapes with a partial 16-byte run; specialisations and benches.

use super::*;
use crate::elementwise::cast::{cast, cast_kernel, cast_width, OP};

/// Values that probe a conversion: ties of f16 and bf16 rounding, the edges of f16's range
/// (65504 is its largest, 65520 the first to round to inf), subnormals of every dtype,
/// f32's largest, a value 6 f32 ulps above a bf16 halfway point (f32 bits 0x3d208006,
/// which rounds up), and NaN and ±inf.
const SPECIALS: [f64; 21] = [
    0.039_184_593_2,
    0.0,
    -0.0,
    1.0 + 1.0 / 256.0,
    1.0 + 3.0 / 256.0,
    1.0 + 1.0 / 2048.0,
    1.0 + 3.0 / 2048.0,
    65504.0,
    65519.0,
    65520.0,
    -1.0e6,
    3.0e38,
    -3.4028234663852886e38,
    5.960464477539063e-8,
    2.0e-8,
    1.0e-39,
    -9.2e-41,
    1.0e-45,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

/// Random values over many binades (`±2^k`, k in −30..30) around the specials.
fn values(rng: &mut crate::testing::CaseRng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if i % 7 == 3 {
                SPECIALS[(i / 7) % SPECIALS.len()]
            } else {
                rng.uniform(-1.0, 1.0) * 2f64.powi(rng.int(0, 60) as i32 - 30)
            }
        })
        .collect()
}

/// Equal values with equal signs (−0 is not +0), NaN where NaN is expected.
fn exact(got: &[f64], want: &[f64]) -> Result<Outcome, String> {
    if got.len() != want.len() || got.is_empty() {
        return Err(format!("{} values, expected {}", got.len(), want.len()));
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same = if w.is_nan() {
            g.is_nan()
        } else {
            g.to_bits() == w.to_bits()
        };
        if !same {
            return Err(format!("out[{i}] = {g:e}, expected {w:e}"));
        }
    }
    Ok(Outcome {
        checked: got.len(),
        ..Outcome::default()
    })
}

fn correctness(from: DType, to: DType, n: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(from),
        name: format!("to {to} n={n}"),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = upload(ctx, from, &values(rng, n), &[n])?;
            let out = ctx.full_nan(to, &[n]).map_err(err)?;
            cast(ctx, &x, &out).map_err(err)?;
            exact(&out.to_f64_vec().map_err(err)?, &reference::cast(to, &xv))
        }),
    }
}

pub(crate) fn cast_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for from in FLOAT_DTYPES {
        for to in FLOAT_DTYPES {
            for n in [1, 7, 141, 4099] {
                v.push(correctness(from, to, n));
            }
        }
    }
    v.push(rejection(
        OP,
        "another shape",
        "`out` must have shape",
        |ctx| {
            let (x, out) = (
                zeros(ctx, DType::F32, &[2, 3])?,
                zeros(ctx, DType::F16, &[3, 2])?,
            );
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || cast(&c, &x, &o)) as Refused))
        },
    ));
    v.push(rejection(
        OP,
        "integer output",
        "`out` must be one of",
        |ctx| {
            let (x, out) = (zeros(ctx, DType::F32, &[5])?, zeros(ctx, DType::I32, &[5])?);
            let (c, o) = (ctx.clone(), out.clone());
            Ok((out, Box::new(move || cast(&c, &x, &o)) as Refused))
        },
    ));
    v
}

pub(crate) fn cast_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for from in FLOAT_DTYPES {
        for to in FLOAT_DTYPES {
            v.push(KernelUse {
                def: &cast_kernel::DEF,
                spec: Specialization::new(vec![from, to], vec![Literal::U32(cast_width(from, to))]),
            });
        }
    }
    v
}

/// 2^25 elements: 64 MiB of f16/bf16 or 128 MiB of f32 on either side.
pub(crate) fn cast_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for (from, to) in [
        (DType::F32, DType::BF16),
        (DType::BF16, DType::F32),
        (DType::F16, DType::BF16),
    ] {
        for (n, quick) in [(1usize << 16, true), (1 << 25, false)] {
            v.push(BenchCase {
                op: OP,
                kernel: "cast_kernel",
                dtype: from,
                shape: format!("to {to} n={n}"),
                bytes: (n * (from.size_bytes() + to.size_bytes())) as u64,
                flops: 0,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, from, &[n], -4.0, 4.0)?;
                    let out = ctx.full_nan(to, &[n]).map_err(err)?;
                    let (c, o) = (ctx.clone(), out.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || cast(&c, &x, &o).map_err(err)),
                        output: out,
                        reference: reference::cast(to, &xv),
                    })
                }),
            });
        }
    }
    v
}
