//! Cases of `rms_norm_quant` and `rms_norm_residual_quant`: every float dtype and format,
//! dynamic and static scales, rows of mixed magnitude (a row of zeros among them) and odd
//! lengths, compared with the reference (codes within one step, scales within one unit of
//! x's dtype) and, independently of how the reference rounds, the dequantized rows against
//! the f64 normalised rows within half a code step; NaN and inf rows; a rejection per
//! invariant; the specialisations; benches at Llama-3 widths.

use super::*;
use crate::norm::quant_reference;
use crate::norm::rms_norm_quant::{
    rms_norm_quant, rms_norm_quant_kernel, rms_norm_quant_vec_kernel, rms_norm_residual_quant,
    rms_norm_residual_quant_kernel, rms_norm_residual_quant_vec_kernel, ActQuant,
};
use crate::norm::rms_norm_vec::{vec_layout, VecLayout};
use crate::quant::fp8_format::Fp8Format;
use crate::quant::fp8_reference;
use crate::registry::Outcome;
use crate::testing::upload;

const QUANT: &str = "rms_norm_quant";
const RESIDUAL_QUANT: &str = "rms_norm_residual_quant";
const FORMATS: [ActQuant; 3] = [
    ActQuant::Fp8(Fp8Format::E4m3),
    ActQuant::Fp8(Fp8Format::E5m2),
    ActQuant::Int8,
];
/// Rows in registers at 8, 16 and 32 elements per thread (2-byte dtypes), strided rows.
const SHAPES: [(usize, usize); 5] = [(6, 4096), (2, 8192), (3, 1536), (3, 100), (2, 33)];
/// The row lengths of the cases and benches, for the register kernels' specialisations.
const VEC_LENGTHS: [u32; 4] = [256, 1536, 4096, 8192];

/// The value of a code (an fp8 byte or an int8 value read as f64) times its scale.
fn dequantized(format: ActQuant, code: f64, scale: f64) -> f64 {
    match format {
        ActQuant::Fp8(f) => fp8_reference::decode(f, code as u8) * scale,
        ActQuant::Int8 => code * scale,
    }
}

/// The largest error of one code, relative to the row's scale: half a step of the
/// format at the value's magnitude (fp8: 2^-m of the value; int8: half a unit), plus the
/// rounding of the normalised value to x's dtype (relative, or the dtype's subnormal step
/// where the value is subnormal in it: f16 below 6.1e-5).
fn step_bound(format: ActQuant, dtype: DType, v: f64, scale: f64) -> f64 {
    let (unit, subnormal_step) = match dtype {
        DType::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        DType::BF16 => (2f64.powi(-8), 2f64.powi(-133)),
        _ => (2f64.powi(-24), 2f64.powi(-149)),
    };
    let code_step = match format {
        ActQuant::Fp8(Fp8Format::E4m3) => (v.abs() * 2f64.powi(-4)).max(scale * 2f64.powi(-10)),
        ActQuant::Fp8(Fp8Format::E5m2) => (v.abs() * 2f64.powi(-3)).max(scale * 2f64.powi(-17)),
        ActQuant::Int8 => 0.5 * scale,
    };
    code_step * 1.01 + (v.abs() * 2.0 * unit).max(subnormal_step)
}

/// Codes of `shape` in `format`'s dtype, every byte 0xA5 (what no correct call leaves
/// everywhere).
fn poisoned_codes(ctx: &Context, format: ActQuant, shape: &[usize]) -> Result<Tensor, String> {
    let len = shape.iter().product();
    match format {
        ActQuant::Int8 => ctx.tensor(&vec![0xA5u8 as i8; len], shape),
        ActQuant::Fp8(_) => ctx.tensor(&vec![0xA5u8; len], shape),
    }
    .map_err(err)
}

/// Rows `uniform(-1, 1)·2^e`, e from −12 to 8 per row, row 1 all zeros (when there are two
/// rows or more).
fn mixed_rows(rng: &mut CaseRng, rows: usize, n: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(rows * n);
    for r in 0..rows {
        let e = rng.int(0, 21) as i32 - 12;
        for _ in 0..n {
            v.push(if r == 1 {
                0.0
            } else {
                rng.uniform(-1.0, 1.0) * 2f64.powi(e)
            });
        }
    }
    v
}

/// One call's setup: the shapes, format, dtype and scale mode.
#[derive(Clone, Copy)]
struct QuantCall {
    dtype: DType,
    format: ActQuant,
    rows: usize,
    n: usize,
    residual: bool,
    static_scale: Option<f32>,
}

/// Codes and scales against the reference, the dequantized rows against the f64 rows.
fn check_codes(
    call: QuantCall,
    want: &quant_reference::NormQuant,
    q: &Tensor,
    scale: &Tensor,
    exact_rows: &[f64],
) -> Result<Outcome, String> {
    let op = if call.residual { RESIDUAL_QUANT } else { QUANT };
    let codes = q.to_f64_vec().map_err(err)?;
    let scales = scale.to_f64_vec().map_err(err)?;
    let tolerance = crate::registry::ops()
        .into_iter()
        .find(|o| o.name == op)
        .map(|o| o.accuracy.codes)
        .ok_or("no declaration")?;
    let mut outcome = merge(
        compare(&codes, &want.codes, tolerance)?,
        compare(&scales, &want.scales, accuracy(op, call.dtype)?)?,
    );
    for (i, (&c, &v)) in codes.iter().zip(exact_rows).enumerate() {
        let s = scales[i / call.n];
        let got = dequantized(call.format, c, s);
        // Codes saturate: the value a static scale can reach at most.
        let (low, high) = match call.format {
            ActQuant::Int8 => (-128.0 * s, 127.0 * s),
            f => (-f64::from(f.max()) * s, f64::from(f.max()) * s),
        };
        let v = v.clamp(low, high);
        let bound = step_bound(call.format, call.dtype, v, s);
        if (got - v).abs() > bound {
            return Err(format!(
                "row {} [{}]: code {c} · scale {s} = {got}, the f64 row {v} (bound {bound:.3e})",
                i / call.n,
                i % call.n
            ));
        }
    }
    outcome.checked += codes.len();
    Ok(outcome)
}

/// Runs one call on random rows and checks every output.
fn quant_run(ctx: &Context, rng: &mut CaseRng, call: QuantCall) -> Result<Outcome, String> {
    let QuantCall {
        dtype,
        format,
        rows,
        n,
        ..
    } = call;
    let (x, xv) = upload(ctx, dtype, &mixed_rows(rng, rows, n), &[rows, n])?;
    let (w, wv) = random_tensor(ctx, rng, dtype, &[n], -1.5, 1.5)?;
    let q = poisoned_codes(ctx, format, &[rows, n])?;
    let scale = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
    let static_scale = call.static_scale.map(f64::from);
    let (want, exact_rows, sum_check) = if call.residual {
        let (r, rv) = upload(ctx, dtype, &mixed_rows(rng, rows, n), &[rows, n])?;
        let sum = ctx.full_nan(dtype, &[rows, n]).map_err(err)?;
        rms_norm_residual_quant(
            ctx,
            &x,
            &r,
            &w,
            &sum,
            &q,
            &scale,
            EPS,
            format,
            call.static_scale,
        )
        .map_err(err)?;
        let want = quant_reference::rms_norm_quant(
            &xv,
            Some(&rv),
            &wv,
            n,
            EPS as f64,
            dtype,
            format,
            static_scale,
        );
        let exact = reference::rms_norm(&want.sum, &wv, n, EPS as f64);
        let sum_check = compare(
            &sum.to_f64_vec().map_err(err)?,
            &want.sum,
            accuracy(RESIDUAL_QUANT, dtype)?,
        )?;
        (want, exact, Some(sum_check))
    } else {
        rms_norm_quant(ctx, &x, &w, &q, &scale, EPS, format, call.static_scale).map_err(err)?;
        let want = quant_reference::rms_norm_quant(
            &xv,
            None,
            &wv,
            n,
            EPS as f64,
            dtype,
            format,
            static_scale,
        );
        let exact = reference::rms_norm(&xv, &wv, n, EPS as f64);
        (want, exact, None)
    };
    let codes = check_codes(call, &want, &q, &scale, &exact_rows)?;
    Ok(match sum_check {
        Some(s) => merge(codes, s),
        None => codes,
    })
}

fn quant_case(call: QuantCall) -> Case {
    let op = if call.residual { RESIDUAL_QUANT } else { QUANT };
    let mode = match call.static_scale {
        Some(s) => format!("static scale {s}"),
        None => "dynamic".to_string(),
    };
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(call.dtype),
        name: format!(
            "format={} {mode} rows={} n={}",
            call.format.name(),
            call.rows,
            call.n
        ),
        run: Box::new(move |ctx, rng| quant_run(ctx, rng, call)),
    }
}

/// A NaN in one row and an inf in another: those rows' scales are NaN (their dequantized
/// values NaN), every other row is untouched.
fn non_finite_case(dtype: DType, format: ActQuant, residual: bool) -> Case {
    let op = if residual { RESIDUAL_QUANT } else { QUANT };
    Case {
        op,
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("format={} NaN and inf rows", format.name()),
        run: Box::new(move |ctx, rng| {
            let (rows, n) = (4, 96);
            let mut values = mixed_rows(rng, rows, n);
            values[n + 5] = f64::NAN;
            values[3 * n + 7] = f64::INFINITY;
            let (x, _) = upload(ctx, dtype, &values, &[rows, n])?;
            let (w, _) = random_tensor(ctx, rng, dtype, &[n], 0.5, 1.5)?;
            let q = poisoned_codes(ctx, format, &[rows, n])?;
            let scale = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
            if residual {
                let r = zeros(ctx, dtype, &[rows, n])?;
                let sum = zeros(ctx, dtype, &[rows, n])?;
                rms_norm_residual_quant(ctx, &x, &r, &w, &sum, &q, &scale, EPS, format, None)
                    .map_err(err)?;
            } else {
                rms_norm_quant(ctx, &x, &w, &q, &scale, EPS, format, None).map_err(err)?;
            }
            let s = scale.to_f64_vec().map_err(err)?;
            for (r, &v) in s.iter().enumerate() {
                let poisoned = r == 1 || r == 3;
                let clean = v > 0.0 && v.is_finite();
                if poisoned != v.is_nan() || !(poisoned || clean) {
                    return Err(format!("row {r}: scale {v}"));
                }
            }
            Ok(Outcome {
                checked: rows,
                ..Outcome::default()
            })
        }),
    }
}

fn good_call(ctx: &Context) -> Result<[Tensor; 4], String> {
    Ok([
        zeros(ctx, F16, &[2, 64])?,
        zeros(ctx, F16, &[64])?,
        zeros(ctx, DType::U8, &[2, 64])?,
        zeros(ctx, F32, &[2])?,
    ])
}

type Spoiled = fn([Tensor; 4], &Context) -> Result<([Tensor; 4], Option<f32>, ActQuant), String>;

fn quant_rejections() -> Vec<Case> {
    let table: [(&str, &'static str, Spoiled); 6] = [
        ("int8 codes in u8", "`q` must be i8", |t, _| {
            Ok((t, None, ActQuant::Int8))
        }),
        (
            "scale per element",
            "`scale` must have shape [2]",
            |[x, w, q, _], c| {
                Ok((
                    [x, w, q, zeros(c, F32, &[2, 64])?],
                    None,
                    ActQuant::Fp8(Fp8Format::E4m3),
                ))
            },
        ),
        ("q aliases x", "`q` aliases `x`", |[x, w, _, s], _| {
            Ok(([x.clone(), w, x, s], None, ActQuant::Fp8(Fp8Format::E4m3)))
        }),
        ("zero static scale", "must be finite and > 0", |t, _| {
            Ok((t, Some(0.0), ActQuant::Fp8(Fp8Format::E4m3)))
        }),
        ("NaN static scale", "must be finite and > 0", |t, _| {
            Ok((t, Some(f32::NAN), ActQuant::Fp8(Fp8Format::E4m3)))
        }),
        (
            "w of the wrong length",
            "`w` must have shape [64]",
            |[x, _, q, s], c| {
                Ok((
                    [x, zeros(c, F16, &[32])?, q, s],
                    None,
                    ActQuant::Fp8(Fp8Format::E4m3),
                ))
            },
        ),
    ];
    table
        .into_iter()
        .map(|(what, reason, spoil)| {
            rejection(QUANT, what, reason, move |ctx| {
                let (t, static_scale, format) = spoil(good_call(ctx)?, ctx)?;
                let [x, w, q, s] = t;
                let c = ctx.clone();
                Ok((
                    s.clone(),
                    Box::new(move || rms_norm_quant(&c, &x, &w, &q, &s, EPS, format, static_scale))
                        as crate::testing::Refused,
                ))
            })
        })
        .collect()
}

fn residual_quant_rejections() -> Vec<Case> {
    let e4m3 = ActQuant::Fp8(Fp8Format::E4m3);
    let mut v = Vec::new();
    v.push(rejection(
        RESIDUAL_QUANT,
        "sum aliases residual",
        "`sum` aliases `residual`",
        move |ctx| {
            let [x, w, q, s] = good_call(ctx)?;
            let r = zeros(ctx, F16, &[2, 64])?;
            let c = ctx.clone();
            let watched = q.clone();
            Ok((
                watched,
                Box::new(move || {
                    rms_norm_residual_quant(&c, &x, &r, &w, &r, &q, &s, EPS, e4m3, None)
                }) as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        RESIDUAL_QUANT,
        "residual of another dtype",
        "`residual` must be f16",
        move |ctx| {
            let [x, w, q, s] = good_call(ctx)?;
            let r = zeros(ctx, F32, &[2, 64])?;
            let sum = zeros(ctx, F16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                sum.clone(),
                Box::new(move || {
                    rms_norm_residual_quant(&c, &x, &r, &w, &sum, &q, &s, EPS, e4m3, None)
                }) as crate::testing::Refused,
            ))
        },
    ));
    v.push(rejection(
        RESIDUAL_QUANT,
        "negative eps",
        "`eps` must be finite",
        move |ctx| {
            let [x, w, q, s] = good_call(ctx)?;
            let r = zeros(ctx, F16, &[2, 64])?;
            let sum = zeros(ctx, F16, &[2, 64])?;
            let c = ctx.clone();
            Ok((
                sum.clone(),
                Box::new(move || {
                    rms_norm_residual_quant(&c, &x, &r, &w, &sum, &q, &s, -1.0, e4m3, None)
                }) as crate::testing::Refused,
            ))
        },
    ));
    v
}

fn all_cases(residual: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in FLOAT_DTYPES {
        for format in FORMATS {
            for &(rows, n) in &SHAPES {
                v.push(quant_case(QuantCall {
                    dtype,
                    format,
                    rows,
                    n,
                    residual,
                    static_scale: None,
                }));
            }
            // A static scale small enough that the largest rows saturate.
            v.push(quant_case(QuantCall {
                dtype,
                format,
                rows: 4,
                n: 256,
                residual,
                static_scale: Some(0.004),
            }));
            v.push(non_finite_case(dtype, format, residual));
        }
    }
    v
}

pub(crate) fn norm_quant_cases() -> Vec<Case> {
    let mut v = all_cases(false);
    v.extend(quant_rejections());
    v
}

pub(crate) fn residual_quant_cases() -> Vec<Case> {
    let mut v = all_cases(true);
    v.extend(residual_quant_rejections());
    v
}

fn quant_uses(def: &'static KernelDef) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for format in FORMATS {
            v.push(KernelUse {
                def,
                spec: tessera_ir::Specialization::new(
                    vec![dt, format.dtype()],
                    vec![tessera_ir::Literal::U32(format.code())],
                ),
            });
        }
    }
    v
}

/// The register kernel's specialisations at the row lengths of the cases and benches.
fn vec_uses(def: &'static KernelDef) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in FLOAT_DTYPES {
        for n in VEC_LENGTHS {
            let Some(VecLayout::Row { epl, vec, .. }) = vec_layout(dt, n) else {
                continue;
            };
            for format in FORMATS {
                v.push(KernelUse {
                    def,
                    spec: tessera_ir::Specialization::new(
                        vec![dt, format.dtype()],
                        [n, format.code(), epl, vec]
                            .map(tessera_ir::Literal::U32)
                            .into(),
                    ),
                });
            }
        }
    }
    v
}

pub(crate) fn norm_quant_kernels() -> Vec<KernelUse> {
    let mut v = quant_uses(&rms_norm_quant_kernel::DEF);
    v.extend(vec_uses(&rms_norm_quant_vec_kernel::DEF));
    v
}

pub(crate) fn residual_quant_kernels() -> Vec<KernelUse> {
    let mut v = quant_uses(&rms_norm_residual_quant_kernel::DEF);
    v.extend(vec_uses(&rms_norm_residual_quant_vec_kernel::DEF));
    v
}

/// A bench of one form at `[rows, n]` in `dtype`: its scales are the output checked.
fn quant_bench(
    residual: bool,
    dt: DType,
    format: ActQuant,
    rows: usize,
    n: usize,
    quick: bool,
) -> BenchCase {
    let (op, kernel) = if residual {
        (RESIDUAL_QUANT, "rms_norm_residual_quant_vec_kernel")
    } else {
        (QUANT, "rms_norm_quant_vec_kernel")
    };
    // x (and residual, and sum) in the dtype, codes one byte each, a scale per row.
    let streams = if residual { 3 } else { 1 };
    BenchCase {
        op,
        kernel,
        dtype: dt,
        shape: format!("rows={rows} n={n} format={}", format.name()),
        bytes: (rows * n * (streams * dt.size_bytes() + 1) + 4 * rows) as u64,
        flops: 0,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
            let (w, wv) = random_tensor(ctx, rng, dt, &[n], 0.5, 1.5)?;
            let q = poisoned_codes(ctx, format, &[rows, n])?;
            let scale = ctx.full_nan(DType::F32, &[rows]).map_err(err)?;
            let c = ctx.clone();
            let output = scale.clone();
            let (launch, want): (Box<dyn FnMut() -> Result<(), String>>, _) = if residual {
                let (r, rv) = random_tensor(ctx, rng, dt, &[rows, n], -2.0, 2.0)?;
                let sum = ctx.full_nan(dt, &[rows, n]).map_err(err)?;
                let want = quant_reference::rms_norm_quant(
                    &xv,
                    Some(&rv),
                    &wv,
                    n,
                    EPS as f64,
                    dt,
                    format,
                    None,
                );
                (
                    Box::new(move || {
                        rms_norm_residual_quant(&c, &x, &r, &w, &sum, &q, &scale, EPS, format, None)
                            .map_err(err)
                    }),
                    want,
                )
            } else {
                let want = quant_reference::rms_norm_quant(
                    &xv, None, &wv, n, EPS as f64, dt, format, None,
                );
                (
                    Box::new(move || {
                        rms_norm_quant(&c, &x, &w, &q, &scale, EPS, format, None).map_err(err)
                    }),
                    want,
                )
            };
            Ok(PreparedBench {
                launch,
                output,
                reference: want.scales,
            })
        }),
    }
}

fn benches(residual: bool) -> Vec<BenchCase> {
    let mut v = Vec::new();
    for dt in [DType::BF16, DType::F16] {
        for format in [ActQuant::Fp8(Fp8Format::E4m3), ActQuant::Int8] {
            v.push(quant_bench(residual, dt, format, 16, 4096, true));
            v.push(quant_bench(residual, dt, format, 4096, 4096, false));
            v.push(quant_bench(residual, dt, format, 8192, 8192, false));
        }
    }
    v
}

pub(crate) fn norm_quant_benches() -> Vec<BenchCase> {
    benches(false)
}

pub(crate) fn residual_quant_benches() -> Vec<BenchCase> {
    benches(true)
}
