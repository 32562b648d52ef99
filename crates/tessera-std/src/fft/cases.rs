//! Cases of `fft`: every power of two from 1 to 8192 (each pass structure and the rows
//! that share a threadgroup) and Bluestein lengths from 3 to 4095 (transforms of 8 to
//! 8192), forward and inverse under every norm, a 3-D x, inverse-of-forward round trips,
//! rows holding NaN and ±∞; rejections; benches at 32–128 MiB.

use super::decl::ACCURACY;
use super::kernels::{fft_bluestein_kernel, fft_pow2_kernel, layout};
use super::ops::OP;
use super::plan::{bluestein_size, FftNorm, FftPlan};
use super::reference;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{err, random_tensor, rejection, upload, zeros, Refused};
use tessera_ir::{Literal, Specialization};
use tessera_runtime::DType;

/// Compares rows of `n` complex numbers with the reference: each part within the declared
/// f32 tolerance relative to the rms of its reference row (an FFT's rounding scales with
/// the row, not with each output). NaN never passes.
fn compare_rows(got: &[f64], want: &[f64], n: usize) -> Result<Outcome, String> {
    if got.len() != want.len() || got.is_empty() {
        return Err(format!("{} outputs, want {}", got.len(), want.len()));
    }
    let tol = ACCURACY.f32;
    let mut o = Outcome::default();
    for (r, (g, w)) in got.chunks(2 * n).zip(want.chunks(2 * n)).enumerate() {
        let rms = (w.iter().map(|v| v * v).sum::<f64>() / n as f64).sqrt();
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            let e = (a - b).abs();
            if e.is_nan() || e > tol.atol + tol.rtol * rms {
                return Err(format!(
                    "row {r}, element {} ({}): {a}, expected {b} (error {e:.3e} > {:.0e} + \
                     {:.0e}·{rms:.3e}, the row's rms)",
                    i / 2,
                    if i % 2 == 0 { "re" } else { "im" },
                    tol.atol,
                    tol.rtol
                ));
            }
            o.max_abs_err = o.max_abs_err.max(e);
            o.max_rel_err = o.max_rel_err.max(e / rms.max(f64::MIN_POSITIVE));
            o.checked += 1;
        }
    }
    Ok(o)
}

fn norm_name(norm: FftNorm) -> &'static str {
    match norm {
        FftNorm::Backward => "backward",
        FftNorm::Ortho => "ortho",
        FftNorm::Forward => "forward",
    }
}

fn correctness(shape: Vec<usize>, inverse: bool, norm: FftNorm) -> Case {
    let n = shape[shape.len() - 2];
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(DType::F32),
        name: format!(
            "x={shape:?}{} norm={}",
            if inverse { " inverse" } else { "" },
            norm_name(norm)
        ),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, DType::F32, &shape, -1.0, 1.0)?;
            let out = ctx.full_nan(DType::F32, &shape).map_err(err)?;
            let plan = FftPlan::new(ctx, n).map_err(err)?;
            super::fft(ctx, &x, &plan, inverse, norm, &out).map_err(err)?;
            let want = reference::fft(&xv, n, inverse, norm.scale(n, inverse));
            compare_rows(&out.to_f64_vec().map_err(err)?, &want, n)
        }),
    }
}

/// The inverse of the forward transform (norm backward) gives x back, within the
/// tolerance relative to x's rms.
fn round_trip(rows: usize, n: usize) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(DType::F32),
        name: format!("ifft(fft(x)) = x, x=[{rows}, {n}, 2]"),
        run: Box::new(move |ctx, rng| {
            let shape = [rows, n, 2];
            let (x, xv) = random_tensor(ctx, rng, DType::F32, &shape, -1.0, 1.0)?;
            let spectrum = ctx.full_nan(DType::F32, &shape).map_err(err)?;
            let back = ctx.full_nan(DType::F32, &shape).map_err(err)?;
            let plan = FftPlan::new(ctx, n).map_err(err)?;
            super::fft(ctx, &x, &plan, false, FftNorm::Backward, &spectrum).map_err(err)?;
            super::fft(ctx, &spectrum, &plan, true, FftNorm::Backward, &back).map_err(err)?;
            compare_rows(&back.to_f64_vec().map_err(err)?, &xv, n)
        }),
    }
}

/// Three rows: a NaN in row 0 (in one part), +∞ in row 1, none in row 2. Both parts of
/// every output of row 0 are NaN, of row 1 non-finite, and row 2 matches the reference.
fn non_finite(n: usize, inverse: bool) -> Case {
    Case {
        op: OP,
        kind: CaseKind::Correctness,
        dtype: Some(DType::F32),
        name: format!("rows with NaN, +inf, n={n}"),
        run: Box::new(move |ctx, rng| {
            let mut xv: Vec<f64> = (0..6 * n).map(|_| rng.uniform(-1.0, 1.0)).collect();
            let at = rng.int(0, n as u32) as usize;
            xv[2 * at + 1] = f64::NAN;
            xv[2 * n + 2 * at] = f64::INFINITY;
            let (x, xv) = upload(ctx, DType::F32, &xv, &[3, n, 2])?;
            let out = ctx.full_nan(DType::F32, &[3, n, 2]).map_err(err)?;
            let plan = FftPlan::new(ctx, n).map_err(err)?;
            super::fft(ctx, &x, &plan, inverse, FftNorm::Ortho, &out).map_err(err)?;
            let got = out.to_f64_vec().map_err(err)?;
            if let Some(i) = (0..2 * n).find(|&i| !got[i].is_nan()) {
                return Err(format!(
                    "row 0 holds a NaN, but out[0][{}] is {}",
                    i / 2,
                    got[i]
                ));
            }
            if let Some(i) = (2 * n..4 * n).find(|&i| got[i].is_finite()) {
                return Err(format!(
                    "row 1 holds +inf, but out[1][{}] is {}",
                    i / 2 - n,
                    got[i]
                ));
            }
            let scale = FftNorm::Ortho.scale(n, inverse);
            let want = reference::fft(&xv[4 * n..], n, inverse, scale);
            let mut o = compare_rows(&got[4 * n..], &want, n)?;
            o.checked += 4 * n;
            Ok(o)
        }),
    }
}

/// A refused call on f32 tensors of these shapes with the plan of `plan_n`.
fn refused(
    what: &str,
    reason: &'static str,
    x_shape: &'static [usize],
    out_shape: &'static [usize],
    plan_n: usize,
) -> Case {
    rejection(OP, what, reason, move |ctx| {
        let x = zeros(ctx, DType::F32, x_shape)?;
        let out = ctx.full_nan(DType::F32, out_shape).map_err(err)?;
        let plan = FftPlan::new(ctx, plan_n).map_err(err)?;
        let (c, o) = (ctx.clone(), out.clone());
        Ok((
            out,
            Box::new(move || super::fft(&c, &x, &plan, false, FftNorm::Backward, &o)) as Refused,
        ))
    })
}

pub(crate) fn fft_cases() -> Vec<Case> {
    let norms = [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward];
    let mut v = Vec::new();
    for (i, log_n) in (0..=13).enumerate() {
        let n = 1usize << log_n;
        // Short rows share a threadgroup: an odd count leaves part of the last one empty.
        let rows = if n < 1024 { 37 } else { (16_384 / n).max(2) };
        v.push(correctness(vec![rows, n, 2], i % 2 == 1, norms[i % 3]));
    }
    for (i, n) in [3, 5, 7, 12, 100, 1000, 1025, 2047, 2049, 4095]
        .into_iter()
        .enumerate()
    {
        let rows = if n < 100 { 19 } else { 3 };
        v.push(correctness(vec![rows, n, 2], i % 2 == 1, norms[i % 3]));
    }
    v.push(correctness(vec![2, 3, 12, 2], true, FftNorm::Backward));
    v.push(correctness(vec![2, 3, 64, 2], false, FftNorm::Ortho));
    for (rows, n) in [(5, 32), (3, 4096), (7, 7), (2, 1000)] {
        v.push(round_trip(rows, n));
    }
    v.push(non_finite(64, false));
    v.push(non_finite(100, true));
    v.push(refused(
        "a last dimension of 3",
        "`x` must be [rows…, n, 2]",
        &[4, 8, 3],
        &[4, 8, 3],
        8,
    ));
    v.push(refused(
        "out of another shape",
        "`out` must have shape [4, 8, 2]",
        &[4, 8, 2],
        &[4, 16, 2],
        8,
    ));
    v.push(refused(
        "a plan for another n",
        "the plan is for rows of n = 16",
        &[4, 8, 2],
        &[4, 8, 2],
        16,
    ));
    v.push(rejection(OP, "n = 0", "must be from 1 to 4096", |ctx| {
        let out = ctx.full_nan(DType::F32, &[2, 1, 2]).map_err(err)?;
        let o = out.clone();
        let c = ctx.clone();
        Ok((
            out,
            Box::new(move || {
                let plan = FftPlan::new(&c, 0)?;
                super::fft(&c, &o, &plan, false, FftNorm::Backward, &o)
            }) as Refused,
        ))
    }));
    v
}

/// Every transform length's kernel: the power-of-two one for m = 1 … 8192, Bluestein's
/// for m = 8 … 8192.
pub(crate) fn fft_kernels() -> Vec<KernelUse> {
    let spec = |log_m: u32| {
        let consts = layout(log_m).consts().map(Literal::U32).to_vec();
        Specialization::new(vec![], consts)
    };
    let mut v: Vec<KernelUse> = (0..=13)
        .map(|log_m| KernelUse {
            def: &fft_pow2_kernel::DEF,
            spec: spec(log_m),
        })
        .collect();
    v.extend((3..=13).map(|log_m| KernelUse {
        def: &fft_bluestein_kernel::DEF,
        spec: spec(log_m),
    }));
    v
}

/// (rows, n, quick): a quick shape, then 32–128 MiB: rows of 1024 and 4096 (powers of two)
/// and of 1000 (Bluestein over 2048).
const BENCH_SHAPES: [(usize, usize, bool); 4] = [
    (16, 1000, true),
    (4096, 1024, false),
    (1024, 4096, false),
    (4096, 1000, false),
];

/// Forward, norm ortho (outputs of the inputs' size). The bytes are x read and out
/// written; the flops 5·n·log2 n a row, the usual count for a complex FFT of n.
pub(crate) fn fft_benches() -> Vec<BenchCase> {
    BENCH_SHAPES
        .into_iter()
        .map(|(rows, n, quick)| BenchCase {
            op: OP,
            kernel: if n.is_power_of_two() {
                "fft_pow2_kernel"
            } else {
                "fft_bluestein_kernel"
            },
            dtype: DType::F32,
            shape: format!(
                "rows={rows} n={n}{}",
                if n.is_power_of_two() {
                    String::new()
                } else {
                    format!(" m={}", bluestein_size(n))
                }
            ),
            bytes: (2 * rows * n * 8) as u64,
            flops: (5.0 * (rows * n) as f64 * (n as f64).log2()) as u64,
            quick,
            prepare: Box::new(move |ctx, rng| {
                let shape = [rows, n, 2];
                let (x, xv) = random_tensor(ctx, rng, DType::F32, &shape, -1.0, 1.0)?;
                let out = ctx.full_nan(DType::F32, &shape).map_err(err)?;
                let plan = FftPlan::new(ctx, n).map_err(err)?;
                let (c, o) = (ctx.clone(), out.clone());
                Ok(PreparedBench {
                    launch: Box::new(move || {
                        super::fft(&c, &x, &plan, false, FftNorm::Ortho, &o).map_err(err)
                    }),
                    output: out,
                    reference: reference::fft(&xv, n, false, FftNorm::Ortho.scale(n, false)),
                })
            }),
        })
        .collect()
}
