//! Registered cases of the quantized GEMMs on `quant_gemm_kernel`: `fp8_qgemm` over both
//! formats and every scale layout, `gptq_qgemm` and `awq_qgemm` over every group size
//! (one group over K too), `gguf_qgemm` over every block format, in f16 and bf16, at M =
//! 33 and 65 with N not a multiple of any tile and K one 128-wide block, one group or one
//! 32-weight block past a multiple of the 64-wide tiles (two blocks for the 256-weight
//! formats), and past 256 rows (CUDA's 128-row tiles); rows of x holding NaN or inf; a rejection per
//! check the wrappers add; every specialisation; benches at M = N = K = 4096 in bf16 (and
//! 256³, quick).
//!
//! Each case compares against `x·Ŵᵀ` in f64 with `Ŵ` the format's reference
//! dequantization rounded once to x's dtype (what the kernel multiplies).

use super::awq_cases::random_words as awq_words;
use super::fp8_cases::{finite_codes, scaling_name, weight_scales};
use super::fp8_format::{Fp8Format, Fp8Scaling};
use super::fp8_qgemm::fp8_qgemm;
use super::gptq_cases::{group_of, random_words as gptq_words};
use super::int4_qgemm::{awq_qgemm, gptq_qgemm, int4_qgemm};
use super::qgemm::QGEMM_SHAPES;
use super::qgemm_formats::{quant_gemm_kernel, QgemmScheme};
use super::{awq_reference, fp8_reference, gptq_reference};
use crate::error::OpError;
use crate::gguf::cases::{random_blocks, rounded, upload_blocks, Scales};
use crate::gguf::format::{GgufFormat, FORMATS};
use crate::gguf::ops::gguf_qgemm;
use crate::gguf::reference as gguf_reference;
use crate::matmul::reference::matmul;
use crate::matmul::tiled::MATMUL_DTYPES;
use crate::registry::{BenchCase, Case, CaseKind, KernelUse, Outcome, PreparedBench};
use crate::testing::{
    accuracy, compare, err, random_tensor, rejection, upload, zeros, CaseRng, Refused, Tolerance,
};
use std::sync::Arc;
use tessera_ir::{Literal, Specialization};
use tessera_runtime::{Context, DType, Tensor};

/// One weight format and its parameters.
#[derive(Clone, Copy, Debug)]
enum Format {
    Fp8(Fp8Format, Fp8Scaling),
    /// GPTQ with this `group_size` (0: one group over K).
    Gptq(u32),
    /// AWQ with this `group_size`.
    Awq(u32),
    Gguf(GgufFormat),
}

/// The call of a prepared case on `(x, y)`.
type Call = Arc<dyn Fn(&Context, &Tensor, &Tensor) -> Result<(), OpError> + Send + Sync>;

/// A format's weights on the device: the call, and `Ŵ` `[N, K]` rounded to x's dtype.
struct Prepared {
    call: Call,
    w: Vec<f64>,
}

impl Format {
    fn op(self) -> &'static str {
        match self {
            Format::Fp8(..) => "fp8_qgemm",
            Format::Gptq(_) => "gptq_qgemm",
            Format::Awq(_) => "awq_qgemm",
            Format::Gguf(_) => "gguf_qgemm",
        }
    }

    fn name(self) -> String {
        match self {
            Format::Fp8(f, s) => format!("format={} scaling={}", f.name(), scaling_name(s)),
            Format::Gptq(g) | Format::Awq(g) => format!("group_size={g}"),
            Format::Gguf(f) => format!("format={}", f.name()),
        }
    }

    /// Random weights `[n, k]` (finite fp8 codes with a quantizer's scales; any int4
    /// words with scales of either sign; random GGUF blocks with scales around 2^-8, some
    /// zero or subnormal).
    fn prepare(
        self,
        ctx: &Context,
        rng: &mut CaseRng,
        dtype: DType,
        (n, k): (usize, usize),
    ) -> Result<Prepared, String> {
        match self {
            Format::Gguf(format) => {
                let bytes = random_blocks(rng, format, n, k, Scales::Moderate);
                let w = upload_blocks(ctx, &bytes, n)?;
                let rounded = gguf_reference::dequantize(format, &bytes, n, k)
                    .into_iter()
                    .map(|v| rounded(dtype, v))
                    .collect();
                Ok(Prepared {
                    call: Arc::new(move |c, x, y| gguf_qgemm(c, x, &w, format, y)),
                    w: rounded,
                })
            }
            Format::Fp8(format, scaling) => {
                let (w, wv) = finite_codes(ctx, rng, format, (n, k))?;
                let shape = scaling.scale_shape((n, k));
                let scales = weight_scales(rng, format, shape[0] * shape[1]);
                let (scale, sv) = upload(ctx, DType::F32, &scales, &shape)?;
                let rounded = fp8_reference::dequantize(&wv, &sv, (n, k), format, scaling, dtype);
                Ok(Prepared {
                    call: Arc::new(move |c, x, y| fp8_qgemm(c, x, &w, &scale, y, format, scaling)),
                    w: rounded,
                })
            }
            Format::Gptq(group_size) | Format::Awq(group_size) => {
                let g = group_of(group_size, k);
                let gptq = matches!(self, Format::Gptq(_));
                let (tensors, kn) = if gptq {
                    let w = gptq_words(ctx, rng, dtype, (k, n), g)?;
                    let kn = gptq_reference::dequantize(&w.qw, &w.qz, &w.sv, (k, n), g, dtype);
                    ((w.qweight, w.qzeros, w.scales), kn)
                } else {
                    let w = awq_words(ctx, rng, dtype, (k, n), g)?;
                    let kn = awq_reference::dequantize(&w.qw, &w.qz, &w.sv, (k, n), g, dtype);
                    ((w.qweight, w.qzeros, w.scales), kn)
                };
                let scheme = if gptq {
                    QgemmScheme::Gptq
                } else {
                    QgemmScheme::Awq
                };
                let (qw, qz, s) = tensors;
                Ok(Prepared {
                    call: Arc::new(move |c, x, y| {
                        int4_qgemm(c, scheme, (x, &qw, &qz, &s, y), group_size)
                    }),
                    w: (0..n * k).map(|i| kn[(i % k) * n + i / k]).collect(),
                })
            }
        }
    }
}

fn correct(format: Format, dtype: DType, (m, n, k): (usize, usize, usize)) -> Case {
    Case {
        op: format.op(),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("{} M={m} N={n} K={k}", format.name()),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let p = format.prepare(ctx, rng, dtype, (n, k))?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            (p.call)(ctx, &x, &y).map_err(err)?;
            let want = matmul(&xv, &p.w, (m, n, k), true);
            compare(
                &y.to_f64_vec().map_err(err)?,
                &want,
                accuracy(format.op(), dtype)?,
            )
        }),
    }
}

/// Rows of x [`non_finite_x`] poisons: one NaN, one infinity.
const NON_FINITE_ROWS: [usize; 2] = [3, 29];

/// Random x `[m, k]` (`m` > 29, `k` > 90) of `dtype` with a NaN in row 3 and an infinity
/// in row 29.
pub(super) fn non_finite_x(
    ctx: &Context,
    rng: &mut CaseRng,
    dtype: DType,
    (m, k): (usize, usize),
) -> Result<(Tensor, Vec<f64>), String> {
    let (_, mut xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
    xv[NON_FINITE_ROWS[0] * k + 17] = f64::NAN;
    xv[NON_FINITE_ROWS[1] * k + 90] = f64::INFINITY;
    let (x, _) = upload(ctx, dtype, &xv, &[m, k])?;
    Ok((x, xv))
}

/// `got` `[m, n]` from [`non_finite_x`]'s `xv`: the poisoned rows are non-finite (the NaN
/// propagates; inf meets weights of both signs or zero), and every other row matches
/// `reference` run on x with those rows zeroed.
pub(super) fn check_non_finite_rows(
    got: &[f64],
    mut xv: Vec<f64>,
    (m, n, k): (usize, usize, usize),
    reference: impl Fn(&[f64]) -> Vec<f64>,
    tol: Tolerance,
) -> Result<Outcome, String> {
    for r in NON_FINITE_ROWS {
        if let Some(c) = (0..n).find(|&c| got[r * n + c].is_finite()) {
            return Err(format!(
                "y[{r}, {c}] = {} is finite, but row {r} of x holds a non-finite value",
                got[r * n + c]
            ));
        }
        xv[r * k..(r + 1) * k].fill(0.0);
    }
    let want = reference(&xv);
    let rows = |v: &[f64]| -> Vec<f64> {
        (0..m)
            .filter(|r| !NON_FINITE_ROWS.contains(r))
            .flat_map(|r| v[r * n..(r + 1) * n].to_vec())
            .collect()
    };
    compare(&rows(got), &rows(&want), tol)
}

fn non_finite_rows(format: Format, dtype: DType) -> Case {
    let (m, n, k) = (40, 72, 256);
    Case {
        op: format.op(),
        kind: CaseKind::Correctness,
        dtype: Some(dtype),
        name: format!("NaN and inf rows {} M={m} N={n} K={k}", format.name()),
        run: Box::new(move |ctx, rng| {
            let (x, xv) = non_finite_x(ctx, rng, dtype, (m, k))?;
            let p = format.prepare(ctx, rng, dtype, (n, k))?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            (p.call)(ctx, &x, &y).map_err(err)?;
            check_non_finite_rows(
                &y.to_f64_vec().map_err(err)?,
                xv,
                (m, n, k),
                |xv| matmul(xv, &p.w, (m, n, k), true),
                accuracy(format.op(), dtype)?,
            )
        }),
    }
}

/// Cases of one op: `formats` at the shapes `shapes` gives each (by its index), a NaN and
/// inf case per dtype.
fn cases_of(
    formats: &[Format],
    shapes: impl Fn(usize, Format) -> (usize, usize, usize),
) -> Vec<Case> {
    let mut v = Vec::new();
    for dtype in MATMUL_DTYPES {
        v.push(non_finite_rows(formats[0], dtype));
        for (i, &format) in formats.iter().enumerate() {
            v.push(correct(format, dtype, shapes(i, format)));
        }
    }
    v
}

const FP8_FORMATS: [Fp8Format; 2] = [Fp8Format::E4m3, Fp8Format::E5m2];
const FP8_SCALINGS: [Fp8Scaling; 3] = [Fp8Scaling::Tile128, Fp8Scaling::Tensor, Fp8Scaling::Row128];
const INT4_GROUP_SIZES: [u32; 4] = [32, 64, 128, 0];
const GGUF_FORMATS: [GgufFormat; 5] = FORMATS;

pub(super) fn fp8_cases() -> Vec<Case> {
    let formats: Vec<Format> = FP8_FORMATS
        .into_iter()
        .flat_map(|f| FP8_SCALINGS.into_iter().map(move |s| Format::Fp8(f, s)))
        .collect();
    // K = 192: one 128-wide block past a 64-wide tile; N = 136: a partial 128-row block
    // and a partial column tile.
    let mut v = cases_of(&formats, |i, _| ([33, 65][i % 2], 136, 192));
    // Past 256 rows, K = 264 (the last tile holds one chunk a row, the rest zeros).
    v.push(correct(formats[0], DType::BF16, (300, 200, 264)));
    v.push(rejection(
        "fp8_qgemm",
        "w of another K",
        "`w` must be [N, 64]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[40, 64])?;
            let w = zeros(ctx, DType::U8, &[8, 72])?;
            let s = zeros(ctx, DType::F32, &[1, 1])?;
            let y = zeros(ctx, DType::BF16, &[40, 8])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || fp8_qgemm(&c, &x, &w, &s, &o, Fp8Format::E4m3, Fp8Scaling::Tensor))
                    as Refused,
            ))
        },
    ));
    v
}

/// K one group past a multiple of 64 (for one group over K: 200, no multiple of 64).
fn int4_shape(i: usize, format: Format) -> (usize, usize, usize) {
    let k = match format {
        Format::Gptq(0) | Format::Awq(0) => 200,
        Format::Gptq(g) | Format::Awq(g) => 128 + g as usize,
        Format::Fp8(..) | Format::Gguf(_) => 192,
    };
    ([33, 65][i % 2], 72, k)
}

pub(super) fn gptq_cases() -> Vec<Case> {
    let formats = INT4_GROUP_SIZES.map(Format::Gptq);
    let mut v = cases_of(&formats, int4_shape);
    v.push(correct(Format::Gptq(128), DType::F16, (300, 136, 256)));
    v.push(rejection(
        "gptq_qgemm",
        "qweight of another K",
        "holds K = 128 inputs, but `x` has K = 64",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[40, 64])?;
            let qw = zeros(ctx, DType::I32, &[16, 16])?;
            let qz = zeros(ctx, DType::I32, &[2, 2])?;
            let s = zeros(ctx, DType::F16, &[2, 16])?;
            let y = zeros(ctx, DType::F16, &[40, 16])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || gptq_qgemm(&c, &x, &qw, &qz, &s, &o, 64)) as Refused,
            ))
        },
    ));
    v
}

pub(super) fn awq_cases() -> Vec<Case> {
    let formats = INT4_GROUP_SIZES.map(Format::Awq);
    let mut v = cases_of(&formats, int4_shape);
    v.push(correct(Format::Awq(128), DType::BF16, (300, 136, 256)));
    v.push(rejection(
        "awq_qgemm",
        "y of the wrong shape",
        "`y` must have shape [40, 16]",
        |ctx| {
            let x = zeros(ctx, DType::BF16, &[40, 128])?;
            let qw = zeros(ctx, DType::I32, &[128, 2])?;
            let qz = zeros(ctx, DType::I32, &[1, 2])?;
            let s = zeros(ctx, DType::BF16, &[1, 16])?;
            let y = zeros(ctx, DType::BF16, &[16, 40])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || awq_qgemm(&c, &x, &qw, &qz, &s, &o, 128)) as Refused,
            ))
        },
    ));
    v
}

/// Blocks of 32 weights: K = 96, one block past a tile; of 256: K = 512, two blocks.
fn gguf_shape(i: usize, format: Format) -> (usize, usize, usize) {
    let k = match format {
        Format::Gguf(f) if f.block_elems() == 32 => 96,
        _ => 512,
    };
    ([33, 65][i % 2], 72, k)
}

pub(crate) fn gguf_cases() -> Vec<Case> {
    let formats = GGUF_FORMATS.map(Format::Gguf);
    let mut v = cases_of(&formats, gguf_shape);
    v.push(correct(
        Format::Gguf(GgufFormat::Q4K),
        DType::BF16,
        (300, 136, 256),
    ));
    v.push(rejection(
        "gguf_qgemm",
        "y of the wrong shape",
        "`y` must have shape [40, 8]",
        |ctx| {
            let x = zeros(ctx, DType::F16, &[40, 256])?;
            let w = zeros(ctx, DType::U8, &[8, 144])?;
            let y = zeros(ctx, DType::F16, &[40, 9])?;
            let (c, o) = (ctx.clone(), y.clone());
            Ok((
                y,
                Box::new(move || gguf_qgemm(&c, &x, &w, GgufFormat::Q4K, &o)) as Refused,
            ))
        },
    ));
    v
}

/// `quant_gemm_kernel` for `schemes` at every dtype and tile shape.
fn kernels_of(schemes: &[QgemmScheme]) -> Vec<KernelUse> {
    let mut v = Vec::new();
    for dt in MATMUL_DTYPES {
        for &scheme in schemes {
            let (q, s) = match scheme {
                QgemmScheme::Fp8E4m3 | QgemmScheme::Fp8E5m2 => (DType::U8, DType::F32),
                QgemmScheme::Gptq | QgemmScheme::Awq => (DType::I32, dt),
                QgemmScheme::Gguf(_) => (DType::U8, dt),
            };
            for (wg, nb, stages) in QGEMM_SHAPES {
                let consts = [wg, nb, stages, scheme.code()];
                v.push(KernelUse {
                    def: &quant_gemm_kernel::DEF,
                    spec: Specialization::new(
                        vec![dt, q, s],
                        consts.iter().map(|&c| Literal::U32(c)).collect(),
                    ),
                });
            }
        }
    }
    v
}

pub(super) fn fp8_kernels() -> Vec<KernelUse> {
    kernels_of(&[QgemmScheme::Fp8E4m3, QgemmScheme::Fp8E5m2])
}

pub(super) fn gptq_kernels() -> Vec<KernelUse> {
    kernels_of(&[QgemmScheme::Gptq])
}

pub(super) fn awq_kernels() -> Vec<KernelUse> {
    kernels_of(&[QgemmScheme::Awq])
}

pub(crate) fn gguf_kernels() -> Vec<KernelUse> {
    kernels_of(&GGUF_FORMATS.map(QgemmScheme::Gguf))
}

/// bf16 activations at `(m, n, k)` on the tile shape `qgemm_shape` picks; `weight_bytes`
/// what the format stores for `[n, k]`.
fn bench(
    format: Format,
    (m, n, k): (usize, usize, usize),
    quick: bool,
    weight_bytes: usize,
) -> BenchCase {
    let dtype = DType::BF16;
    BenchCase {
        op: format.op(),
        kernel: "quant_gemm_kernel",
        dtype,
        shape: format!("{} M={m} N={n} K={k}", format.name()),
        bytes: (weight_bytes + (m * k + m * n) * dtype.size_bytes()) as u64,
        flops: (2 * m * n * k) as u64,
        quick,
        prepare: Box::new(move |ctx, rng| {
            let (x, xv) = random_tensor(ctx, rng, dtype, &[m, k], -1.0, 1.0)?;
            let p = format.prepare(ctx, rng, dtype, (n, k))?;
            let y = ctx.full_nan(dtype, &[m, n]).map_err(err)?;
            // The f64 reference of the large shapes takes minutes; the cases check the
            // kernel at smaller ones.
            let reference = if m * n * k <= 1 << 31 {
                matmul(&xv, &p.w, (m, n, k), true)
            } else {
                Vec::new()
            };
            let (c, o, call) = (ctx.clone(), y.clone(), p.call.clone());
            Ok(PreparedBench {
                launch: Box::new(move || call(&c, &x, &o).map_err(err)),
                output: y,
                reference,
            })
        }),
    }
}

/// The quick shape and M = N = K = 4096.
fn benches_of(format: Format, weight_bytes: impl Fn(usize, usize) -> usize) -> Vec<BenchCase> {
    [(256, true), (4096, false)]
        .into_iter()
        .map(|(s, quick)| bench(format, (s, s, s), quick, weight_bytes(s, s)))
        .collect()
}

pub(super) fn fp8_benches() -> Vec<BenchCase> {
    let mut v = Vec::new();
    for scaling in [Fp8Scaling::Tile128, Fp8Scaling::Tensor] {
        let format = Format::Fp8(Fp8Format::E4m3, scaling);
        v.extend(benches_of(format, move |n, k| {
            let s = scaling.scale_shape((n, k));
            n * k + 4 * s[0] * s[1]
        }));
    }
    v
}

/// int4 codes, a zero nibble and a bf16 scale per group of 128 and column.
fn int4_bytes(n: usize, k: usize) -> usize {
    n * k / 2 + (k / 128) * (n / 2 + 2 * n)
}

pub(super) fn gptq_benches() -> Vec<BenchCase> {
    benches_of(Format::Gptq(128), int4_bytes)
}

pub(super) fn awq_benches() -> Vec<BenchCase> {
    benches_of(Format::Awq(128), int4_bytes)
}

pub(crate) fn gguf_benches() -> Vec<BenchCase> {
    [
        GgufFormat::Q4_0,
        GgufFormat::Q8_0,
        GgufFormat::Q4K,
        GgufFormat::Q6K,
    ]
    .into_iter()
    .flat_map(|f| benches_of(Format::Gguf(f), move |n, k| n * f.row_bytes(k)))
    .collect()
}
