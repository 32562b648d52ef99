//! Registered cases of the fp8 ops: quantization of every input dtype, format and scale
//! layout on rows of mixed magnitude (all-zero and partial blocks included) byte for byte
//! against the reference, and every finite code quantized back to itself; dequantization
//! of all 256 codes of each format (NaN and inf codes too) in every output dtype; the GEMV
//! over every activation dtype, format and layout at M = 1, 3, 16 with N not a multiple of
//! the four columns a threadgroup takes and K not a multiple of the 128-wide blocks;
//! specialisations; Llama-3 projection benches at M = 1 and 16.

use super::fp8::{fp8_dequantize, fp8_dequantize_kernel, fp8_quantize, fp8_quantize_kernel};
use super::fp8_format::{Fp8Format, Fp8Scaling};
use super::fp8_qgemv::{fp8_qgemv, fp8_qgemv_kernel};
use super::fp8_reference as reference;
use crate::matmul::gemv::{row_tile, GEMV_TILES};
use crate::matmul::gemv_cases::GEMV_BENCH_SHAPES;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{
    accuracy, compare, err, kernel_use, merge, random_tensor, rejection, upload, zeros, CaseRng,
    Refused,
};
use crate::validate::FLOAT_DTYPES;
use tessera_runtime::{Context, DType, Tensor};

const QUANTIZE: &str = "fp8_quantize";
const DEQUANTIZE: &str = "fp8_dequantize";
const QGEMV: &str = "fp8_qgemv";

const FORMATS: [Fp8Format; 2] = [Fp8Format::E4m3, Fp8Format::E5m2];
const SCALINGS: [Fp8Scaling; 3] = [Fp8Scaling::Tensor, Fp8Scaling::Row128, Fp8Scaling::Tile128];

pub(super) fn scaling_name(s: Fp8Scaling) -> &'static str {
    match s {
        Fp8Scaling::Tensor => "tensor",
        Fp8Scaling::Row128 => "1x128",
        Fp8Scaling::Tile128 => "128x128",
    }
}

/// A shape whose blocks are partial in both directions where the layout has blocks.
fn shape_for(s: Fp8Scaling) -> (usize, usize) {
    match s {
        Fp8Scaling::Tile128 => (130, 272),
        _ => (5, 272),
    }
}

/// Rows of mixed magnitude (each row `uniform(-1, 1)·2^e`, e from −20 to 12, clamped to
/// `dtype`'s range), one row all zeros.
fn mixed_rows(rng: &mut CaseRng, dtype: DType, (n, k): (usize, usize)) -> Vec<f64> {
    let top = if dtype == DType::F16 { 10 } else { 12 };
    let mut v = Vec::with_capacity(n * k);
    for r in 0..n {
        let e = rng.int(0, (top + 21) as u32) as i32 - 20;
        for _ in 0..k {
            v.push(if r == 1 {
                0.0
            } else {
                rng.uniform(-1.0, 1.0) * 2f64.powi(e)
            });
        }
    }
    v
}

/// Equal values with NaN where the reference has NaN: exact comparison of outputs that
/// may be non-finite by design (NaN and inf codes).
fn identical(got: &[f64], want: &[f64]) -> Result<Outcome, String> {
    if got.len() != want.len() || got.is_empty() {
        return Err(format!(
            "{} values, the reference {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same =
            (g.is_nan() && w.is_nan()) || (g == w && g.is_sign_negative() == w.is_sign_negative());
        if !same {
            return Err(format!("[{i}] = {g}, expected {w}"));
        }
    }
    Ok(Outcome {
        checked: got.len(),
        ..Outcome::default()
    })
}

// ── fp8_quantize ─────────────────────────────────────────────────────────────────────

fn quantize_case(dtype: DType, format: Fp8Format, scaling: Fp8Scaling) -> Case {
    let (n, k) = shape_for(scaling);
    Case {
        op: QUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "format={} scaling={} N={n} K={k}",
            format.name(),
            scaling_name(scaling)
        ),
        run: Box::new(move |ctx, rng| {
            let values = mixed_rows(rng, dtype, (n, k));
            let (x, xv) = upload(ctx, dtype, &values, &[n, k])?;
            let q = ctx.tensor(&vec![0xA5u8; n * k], &[n, k]).map_err(err)?;
            let scale = ctx
                .full_nan(DType::F32, &scaling.scale_shape((n, k)))
                .map_err(err)?;
            fp8_quantize(ctx, &x, &q, &scale, format, scaling).map_err(err)?;
            let (want_q, want_s) = reference::quantize(&xv, (n, k), format, scaling);
            let exact = accuracy(QUANTIZE, dtype)?;
            Ok(merge(
                compare(&q.to_f64_vec().map_err(err)?, &want_q, exact)?,
                compare(&scale.to_f64_vec().map_err(err)?, &want_s, exact)?,
            ))
        }),
    }
}

/// Every finite value of `format` beside ±max (so the tensor's scale is exactly 1) comes
/// back as its own byte.
fn every_code_case(dtype: DType, format: Fp8Format) -> Case {
    Case {
        op: QUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("every finite {} code round trips", format.name()),
        run: Box::new(move |ctx, _rng| {
            let max_code = reference::encode(format, f64::from(format.max()));
            let codes: Vec<u8> = (0u8..=255)
                .map(|c| {
                    if reference::decode(format, c).is_finite() {
                        c
                    } else {
                        max_code | (c & 0x80)
                    }
                })
                .collect();
            let values: Vec<f64> = codes
                .iter()
                .map(|&c| reference::decode(format, c))
                .collect();
            // Every fp8 value is an f16 and a bf16 value (at most 4 significant bits,
            // magnitudes 2^-16 to 57344); checked, not assumed.
            let (x, xv) = upload(ctx, dtype, &values, &[2, 128])?;
            if xv != values {
                return Err(format!(
                    "{dtype} does not hold every {} value",
                    format.name()
                ));
            }
            let q = zeros(ctx, DType::U8, &[2, 128])?;
            let scale = zeros(ctx, DType::F32, &[1, 1])?;
            fp8_quantize(ctx, &x, &q, &scale, format, Fp8Scaling::Tensor).map_err(err)?;
            let want: Vec<f64> = codes.iter().map(|&c| f64::from(c)).collect();
            let s = scale.to_f64_vec().map_err(err)?;
            if s != [1.0] {
                return Err(format!("scale {s:?}, expected [1.0]"));
            }
            identical(&q.to_f64_vec().map_err(err)?, &want)
        }),
    }
}

pub(super) fn quantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for format in FORMATS {
            for scaling in SCALINGS {
                v.push(quantize_case(dtype, format, scaling));
            }
            v.push(every_code_case(dtype, format));
        }
    }
    v.push(rejection(
        QUANTIZE,
        "a 128x128 scale of the wrong shape",
        "`scale` must have shape [2, 3]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[130, 272])?;
            let q = zeros(ctx, DType::U8, &[130, 272])?;
            let s = zeros(ctx, DType::F32, &[130, 3])?;
            let c = ctx.clone();
            Ok((
                q.clone(),
                Box::new(move || fp8_quantize(&c, &x, &q, &s, Fp8Format::E4m3, Fp8Scaling::Tile128))
                    as Refused,
            ))
        },
    ));
    v
}

pub(super) fn quantize_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for format in FORMATS {
            v.push(kernel_use(&fp8_quantize_kernel::DEF, dt, &[format.code()]));
        }
    }
    v
}

pub(super) fn quantize_benches() -> Vec<BenchCase> {
    // DeepSeek-V3's activations: 1×128 groups of a 7168-wide hidden state.
    let (dtype, format, scaling) = (DType::BF16, Fp8Format::E4m3, Fp8Scaling::Row128);
    let mut v = Vec::new();
    for (n, k, quick) in [(16, 1024, true), (16, 7168, false), (4096, 7168, false)] {
        v.push(BenchCase {
            op: QUANTIZE,
            kernel: "fp8_quantize_kernel",
            dtype,
            shape: format!("format=e4m3 scaling=1x128 N={n} K={k}"),
            bytes: (n * k * (dtype.size_bytes() + 1) + n * k.div_ceil(128) * 4) as u64,
            flops: 0,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (x, xv) = random_tensor(ctx, rng, dtype, &[n, k], -4.0, 4.0)?;
                let q = zeros(ctx, DType::U8, &[n, k])?;
                let scale = zeros(ctx, DType::F32, &scaling.scale_shape((n, k)))?;
                let (reference, _) = reference::quantize(&xv, (n, k), format, scaling);
                let (c, out) = (ctx.clone(), q.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        fp8_quantize(&c, &x, &out, &scale, format, scaling).map_err(err)
                    }),
                    output: q,
                    reference,
                })
            }),
        });
    }
    v
}

// ── fp8_dequantize ───────────────────────────────────────────────────────────────────

/// Random scales across a wide range (`2^-24 .. 2^8`), positive.
fn random_scales(rng: &mut CaseRng, count: usize) -> Vec<f64> {
    (0..count)
        .map(|_| rng.uniform(1.0, 2.0) * 2f64.powi(rng.int(0, 33) as i32 - 24))
        .collect()
}

fn dequantize_case(dtype: DType, format: Fp8Format, scaling: Fp8Scaling) -> Case {
    let (n, k) = shape_for(scaling);
    Case {
        op: DEQUANTIZE,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "all codes format={} scaling={} N={n} K={k}",
            format.name(),
            scaling_name(scaling)
        ),
        run: Box::new(move |ctx, rng| {
            // Every code in the first 256 bytes, then random ones.
            let codes: Vec<f64> = (0..n * k)
                .map(|i| {
                    if i < 256 {
                        i as f64
                    } else {
                        f64::from(rng.int(0, 256))
                    }
                })
                .collect();
            let (q, qv) = upload(ctx, DType::U8, &codes, &[n, k])?;
            let shape = scaling.scale_shape((n, k));
            let (scale, sv) = upload(
                ctx,
                DType::F32,
                &random_scales(rng, shape[0] * shape[1]),
                &shape,
            )?;
            let out = ctx.full_nan(dtype, &[n, k]).map_err(err)?;
            fp8_dequantize(ctx, &q, &scale, &out, format, scaling).map_err(err)?;
            let want = reference::dequantize(&qv, &sv, (n, k), format, scaling, dtype);
            identical(&out.to_f64_vec().map_err(err)?, &want)
        }),
    }
}

pub(super) fn dequantize_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for format in FORMATS {
            for scaling in SCALINGS {
                v.push(dequantize_case(dtype, format, scaling));
            }
        }
    }
    v.push(rejection(
        DEQUANTIZE,
        "out of the wrong shape",
        "`out` must have shape [5, 272]",
        |ctx| {
            let q = zeros(ctx, DType::U8, &[5, 272])?;
            let s = zeros(ctx, DType::F32, &[1, 1])?;
            let out = zeros(ctx, DType::F16, &[5, 256])?;
            let (c, o) = (ctx.clone(), out.clone());
            Ok((
                out,
                Box::new(move || {
                    fp8_dequantize(&c, &q, &s, &o, Fp8Format::E5m2, Fp8Scaling::Tensor)
                }) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn dequantize_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for format in FORMATS {
            v.push(kernel_use(
                &fp8_dequantize_kernel::DEF,
                dt,
                &[format.code()],
            ));
        }
    }
    v
}

pub(super) fn dequantize_benches() -> Vec<BenchCase> {
    let (dtype, format, scaling) = (DType::BF16, Fp8Format::E4m3, Fp8Scaling::Tile128);
    let mut v = Vec::new();
    for (n, k, quick) in [(256, 512, true), (14336, 4096, false)] {
        v.push(BenchCase {
            op: DEQUANTIZE,
            kernel: "fp8_dequantize_kernel",
            dtype,
            shape: format!("format=e4m3 scaling=128x128 N={n} K={k}"),
            bytes: (n * k * (1 + dtype.size_bytes())) as u64,
            flops: 0,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let (q, qv) = finite_codes(ctx, rng, format, (n, k))?;
                let shape = scaling.scale_shape((n, k));
                let (scale, sv) = upload(
                    ctx,
                    DType::F32,
                    &weight_scales(rng, format, shape[0] * shape[1]),
                    &shape,
                )?;
                let out = ctx.full_nan(dtype, &[n, k]).map_err(err)?;
                let reference = reference::dequantize(&qv, &sv, (n, k), format, scaling, dtype);
                let (c, o) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        fp8_dequantize(&c, &q, &scale, &o, format, scaling).map_err(err)
                    }),
                    output: out,
                    reference,
                })
            }),
        });
    }
    v
}

// ── fp8_qgemv ────────────────────────────────────────────────────────────────────────

/// Random bytes of finite codes of `format` (a NaN or inf code is redrawn).
pub(super) fn finite_codes(
    ctx: &Context,
    rng: &mut CaseRng,
    format: Fp8Format,
    (n, k): (usize, usize),
) -> Result<(Tensor, Vec<f64>), String> {
    let codes: Vec<f64> = (0..n * k)
        .map(|_| loop {
            let c = rng.int(0, 256) as u8;
            if reference::decode(format, c).is_finite() {
                break f64::from(c);
            }
        })
        .collect();
    upload(ctx, DType::U8, &codes, &[n, k])
}

/// Scales that bring the format's largest value near 1, as a quantizer's would.
pub(super) fn weight_scales(rng: &mut CaseRng, format: Fp8Format, count: usize) -> Vec<f64> {
    (0..count)
        .map(|_| rng.uniform(0.5, 2.0) / f64::from(format.max()))
        .collect()
}

fn qgemv_case(
    dtype: DType,
    format: Fp8Format,
    scaling: Fp8Scaling,
    (m, n, k): (usize, usize, usize),
) -> Case {
    Case {
        op: QGEMV,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!(
            "format={} scaling={} M={m} N={n} K={k}",
            format.name(),
            scaling_name(scaling)
        ),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let (w, wv) = finite_codes(ctx, rng, format, (n, k))?;
            let shape = scaling.scale_shape((n, k));
            let (scale, sv) = upload(
                ctx,
                DType::F32,
                &weight_scales(rng, format, shape[0] * shape[1]),
                &shape,
            )?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            fp8_qgemv(ctx, &x, &w, &scale, &y, format, scaling).map_err(err)?;
            let want = reference::qgemv(&xv, &wv, &sv, (m, n, k), format, scaling);
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
        for format in FORMATS {
            for (i, scaling) in SCALINGS.into_iter().enumerate() {
                for m in [1, 3, 16] {
                    // 17 units: K is no multiple of the 128-wide blocks.
                    let n = if scaling == Fp8Scaling::Tile128 && i + m > 3 {
                        131
                    } else {
                        7
                    };
                    v.push(qgemv_case(dtype, format, scaling, (m, n, 272)));
                }
            }
        }
        // 129 units: a row that ends in the second unit of a lane's last step.
        v.push(qgemv_case(
            dtype,
            Fp8Format::E4m3,
            Fp8Scaling::Tile128,
            (5, 9, 2064),
        ));
    }
    v.push(rejection(
        QGEMV,
        "y of the wrong shape",
        "`y` must have shape [2, 4]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[2, 64])?;
            let w = zeros(ctx, DType::U8, &[4, 64])?;
            let s = zeros(ctx, DType::F32, &[1, 1])?;
            let y = zeros(ctx, DType::BF16, &[4, 2])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || fp8_qgemv(&c, &x, &w, &s, &o, Fp8Format::E4m3, Fp8Scaling::Tensor))
                    as Refused,
            ))
        },
    ));
    v
}

pub(super) fn qgemv_kernels() -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for format in FORMATS {
            for tile in GEMV_TILES {
                for units_per_block in [0, 8] {
                    v.push(kernel_use(
                        &fp8_qgemv_kernel::DEF,
                        dt,
                        &[tile, format.code(), units_per_block],
                    ));
                }
            }
        }
    }
    v
}

pub(super) fn qgemv_benches() -> Vec<BenchCase> {
    let (dtype, format) = (DType::BF16, Fp8Format::E4m3);
    let mut v = Vec::new();
    for scaling in [Fp8Scaling::Tile128, Fp8Scaling::Tensor] {
        for (m, n, k, quick) in GEMV_BENCH_SHAPES {
            let scales = scaling.scale_shape((n, k));
            let weights = n * k + scales[0] * scales[1] * 4;
            v.push(BenchCase {
                op: QGEMV,
                kernel: "fp8_qgemv_kernel",
                dtype,
                shape: format!(
                    "format=e4m3 scaling={} M={m} N={n} K={k} tile={}",
                    scaling_name(scaling),
                    row_tile(m)
                ),
                bytes: (weights + (m * k + m * n) * dtype.size_bytes()) as u64,
                flops: (2 * m * n * k) as u64,
                quick,
                prepare: Box::new(move |ctx, rng| {
                    let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
                    let (w, wv) = finite_codes(ctx, rng, format, (n, k))?;
                    let (scale, sv) = upload(
                        ctx,
                        DType::F32,
                        &weight_scales(rng, format, scales[0] * scales[1]),
                        &scales,
                    )?;
                    let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
                    let reference = reference::qgemv(&xv, &wv, &sv, (m, n, k), format, scaling);
                    let (c, o) = (ctx.clone(), y.clone());
                    Ok(PreparedBench {
                        launch: Box::new(move || {
                            fp8_qgemv(&c, &x, &w, &scale, &o, format, scaling).map_err(err)
                        }),
                        output: y,
                        reference,
                    })
                }),
            });
        }
    }
    v
}
