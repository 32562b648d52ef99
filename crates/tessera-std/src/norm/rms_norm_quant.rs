//! RMSNorm fused with the quantization of its output to fp8 (e4m3/e5m2) or int8 with one
//! f32 scale per row (per token), with or without the residual add before it: what the
//! linear layer after a norm reads when its activations are quantized (W8A8).
//!
//! The normalised row is `y = rms_norm(sum, w)` rounded once to x's dtype, exactly what
//! [`super::rms_norm`] writes (so the fused op equals the norm followed by a per-token
//! quantizer). With the residual, `sum = x + residual` is rounded to x's dtype, written,
//! and normalised as stored (the next residual stream and the normalised row agree).
//!
//! The scale of a row is `amax(|y|) / max` (448 for e4m3, 57344 for e5m2, 127 for int8)
//! in f32, or the caller's static scale for every row (a checkpoint's `input_scale`); it
//! is written per row either way. A code is `y / scale` in f32, rounded to the nearest
//! format value, ties to even: fp8 saturates at ±max (`fp8_quantize`'s encoder); int8
//! clamps to −128..=127. A row of zeros takes scale 1 (codes 0), as `fp8_quantize` does,
//! where vLLM's fused kernel clamps the scale below at a tiny minimum: the codes are the
//! same, only a zero row's scale differs. A NaN or ±inf in a row makes its scale NaN or
//! inf, so the row's dequantized values `code·scale` are NaN: never a finite value from
//! a non-finite input.
//!
//! One threadgroup per row. Rows that are whole 16-byte runs over 32 to 1024 threads (the
//! layouts of `rms_norm_vec`) are held in registers: one 16-byte load per run, two
//! threadgroup reductions (the sum of squares, the largest magnitude), one store of the
//! codes. Other rows take three strided passes (the sum of squares, writing the residual
//! sum; the largest magnitude; the codes), the second and third re-reading the row from
//! L1/L2.

use super::rms_inv::{rms_inv, tiny_square};
use super::rms_norm_residual::run_strided_rows;
use super::rms_norm_vec::{spread_offset, vec_layout, VecLayout};
use crate::error::{runtime, OpError};
use crate::float_range::f32_range;
use crate::quant::affine::round_half_even;
use crate::quant::fp8::fp8_encode;
use crate::quant::fp8_format::Fp8Format;
use crate::validate::{
    distinct_named, dtype_in, dtype_is, eps_ok, fits_u32, rows_of, shape_is, FLOAT_DTYPES,
};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// What the activations are quantized to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActQuant {
    Fp8(Fp8Format),
    Int8,
}

/// The accepted names of [`ActQuant`], in the order of the declarations' choice.
pub const ACT_QUANT_NAMES: [&str; 3] = ["e4m3", "e5m2", "int8"];

impl ActQuant {
    pub fn parse(op: &'static str, name: &str) -> Result<Self, OpError> {
        match name {
            "int8" => Ok(ActQuant::Int8),
            _ => Fp8Format::parse(op, name).map(ActQuant::Fp8).map_err(|_| {
                OpError::invalid(op, format!("`format` is `{name}`; one of e4m3, e5m2, int8"))
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ActQuant::Fp8(f) => f.name(),
            ActQuant::Int8 => "int8",
        }
    }

    /// The kernels' constant: 0 e4m3, 1 e5m2, 2 int8.
    pub fn code(self) -> u32 {
        match self {
            ActQuant::Fp8(f) => f.code(),
            ActQuant::Int8 => 2,
        }
    }

    /// The largest code magnitude a scale maps a row's amax to.
    pub fn max(self) -> f32 {
        match self {
            ActQuant::Fp8(f) => f.max(),
            ActQuant::Int8 => 127.0,
        }
    }

    /// The codes' dtype: u8 for fp8 bytes, i8 for int8.
    pub fn dtype(self) -> DType {
        match self {
            ActQuant::Fp8(_) => DType::U8,
            ActQuant::Int8 => DType::I8,
        }
    }
}

/// The code of `v / scale` in `format`: 0 e4m3, 1 e5m2: the byte (0..=255); 2: the
/// int8 value (−128..=127, 0 for NaN).
#[func]
pub fn act_code(v: f32, scale: f32, format: u32) -> i32 {
    let s = v / scale;
    let int8 = round_half_even(min(max(s, -128.0f32), 127.0f32));
    let int8 = select(s != s, 0.0f32, int8).cast::<i32>();
    select(format == 2u32, int8, fp8_encode(s, format).cast::<i32>())
}

/// The scale of a row from each thread's largest magnitude and NaN flag (1.0 when it saw
/// one): `given` when > 0, else the row's `amax / max` (1 for a row of zeros); NaN for a
/// row holding a NaN. Every thread of the threadgroup must call it.
#[func]
pub fn row_scale(amax: f32, nan: f32, given: f32, format: u32) -> f32 {
    let amax = group_max(amax);
    let any_nan = group_max(nan);
    let largest = select(
        format == 2u32,
        127.0f32,
        select(format == 1u32, 57344.0f32, 448.0f32),
    );
    let dynamic = select(amax > 0.0f32, amax / largest, 1.0f32);
    select(
        any_nan > 0.0f32,
        0x7FC0_0000u32.bitcast::<f32>(),
        select(given > 0.0f32, given, dynamic),
    )
}

/// Normalises row `row` of `src` (`n` values, already summed with the residual where there
/// is one) and writes its codes and scale; `given` > 0 is a static scale. Every thread of
/// the threadgroup must call it.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn norm_quant_row<T, Q>(
    src: Mem<T>,
    w: Mem<T>,
    mut q: Mem<Q>,
    mut scale: Mem<f32>,
    row: u32,
    n: u32,
    eps: f32,
    given: f32,
    format: u32,
) {
    let base = row * n;
    let mut ssq = 0.0f32;
    let mut tiny = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let s = load(src[base + i]).cast::<f32>();
        ssq += s * s;
        tiny += tiny_square(s);
    }
    let inv = rms_inv(ssq, tiny, f32_range(src), eps, n);
    let mut amax = 0.0f32;
    let mut nan = 0.0f32;
    for i in range(thread_id(), n, group_size()) {
        let y = (load(src[base + i]).cast::<f32>() * inv * load(w[i]).cast::<f32>())
            .cast::<T>()
            .cast::<f32>();
        nan = select(y != y, 1.0f32, nan);
        amax = max(amax, abs(y));
    }
    let s = row_scale(amax, nan, given, format);
    if thread_id() == 0 {
        store(scale[row], s);
    }
    for i in range(thread_id(), n, group_size()) {
        let y = (load(src[base + i]).cast::<f32>() * inv * load(w[i]).cast::<f32>())
            .cast::<T>()
            .cast::<f32>();
        store(q[base + i], act_code(y, s, format).cast::<Q>());
    }
}

/// `q, scale = quant(rms_norm(x, w))`, one threadgroup per row.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn rms_norm_quant_kernel<T, Q>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut q: Tensor<Q>,
    mut scale: Tensor<f32>,
    eps: f32,
    n: u32,
    given: f32,
    #[constexpr] format: u32,
) {
    norm_quant_row(x, w, q, scale, group_id_x(), n, eps, given, format);
}

/// `sum = x + residual` (rounded to `T`, written), then `q, scale = quant(rms_norm(sum,
/// w))` from the stored sum, one threadgroup per row; each thread re-reads only the sums
/// it wrote itself.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn rms_norm_residual_quant_kernel<T, Q>(
    x: Tensor<T>,
    residual: Tensor<T>,
    w: Tensor<T>,
    mut sum: Tensor<T>,
    mut q: Tensor<Q>,
    mut scale: Tensor<f32>,
    eps: f32,
    n: u32,
    given: f32,
    #[constexpr] format: u32,
) {
    let base = group_id_x() * n;
    for i in range(thread_id(), n, group_size()) {
        let s = load(x[base + i]).cast::<f32>() + load(residual[base + i]).cast::<f32>();
        store(sum[base + i], s.cast::<T>());
    }
    norm_quant_row(sum, w, q, scale, group_id_x(), n, eps, given, format);
}

/// The register form of [`norm_quant_row`]: `xs` holds this thread's `epl` values of row
/// `row` (summed with the residual and rounded to `T` where there is one), in runs of
/// `vec` one threadgroup-width apart; writes the row's codes and scale. Every thread of
/// the threadgroup must call it.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn norm_quant_regs<T, Q>(
    mut xs: Mem<f32>,
    w: Mem<T>,
    mut q: Mem<Q>,
    mut scale: Mem<f32>,
    row: u32,
    n: u32,
    eps: f32,
    given: f32,
    wide: bool,
    format: u32,
    epl: u32,
    vec: u32,
) {
    let col = thread_id() * vec;
    let mut ssq = 0.0f32;
    let mut tiny = 0.0f32;
    for e in 0..epl {
        let v = load(xs[e]);
        ssq += v * v;
        tiny += tiny_square(v);
    }
    let inv = rms_inv(ssq, tiny, wide, eps, n);
    let mut amax = 0.0f32;
    let mut nan = 0.0f32;
    for e in 0..epl {
        let off = spread_offset(e, n, epl, vec);
        let y = (load(xs[e]) * inv * load(w[col + off]).cast::<f32>())
            .cast::<T>()
            .cast::<f32>();
        store(xs[e], y);
        nan = select(y != y, 1.0f32, nan);
        amax = max(amax, abs(y));
    }
    let s = row_scale(amax, nan, given, format);
    if thread_id() == 0 {
        store(scale[row], s);
    }
    for e in 0..epl {
        let off = spread_offset(e, n, epl, vec);
        store(
            q[row * n + col + off],
            act_code(load(xs[e]), s, format).cast::<Q>(),
        );
    }
}

/// [`rms_norm_quant_kernel`] with the row in registers: `n / epl` threads, each loading its
/// `epl` values once in 16-byte runs of `vec` and storing its codes once.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn rms_norm_quant_vec_kernel<T, Q>(
    x: Tensor<T>,
    w: Tensor<T>,
    mut q: Tensor<Q>,
    mut scale: Tensor<f32>,
    eps: f32,
    given: f32,
    #[constexpr] n: u32,
    #[constexpr] format: u32,
    #[constexpr] epl: u32,
    #[constexpr] vec: u32,
) {
    let base = group_id_x() * n + thread_id() * vec;
    let xs = stack_array::<f32>(epl);
    for e in 0..epl {
        store(
            xs[e],
            load(x[base + spread_offset(e, n, epl, vec)]).cast::<f32>(),
        );
    }
    norm_quant_regs(
        xs,
        w,
        q,
        scale,
        group_id_x(),
        n,
        eps,
        given,
        f32_range(x),
        format,
        epl,
        vec,
    );
}

/// [`rms_norm_residual_quant_kernel`] with the row in registers: the sums are rounded to
/// `T`, stored, and normalised from the registers.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn rms_norm_residual_quant_vec_kernel<T, Q>(
    x: Tensor<T>,
    residual: Tensor<T>,
    w: Tensor<T>,
    mut sum: Tensor<T>,
    mut q: Tensor<Q>,
    mut scale: Tensor<f32>,
    eps: f32,
    given: f32,
    #[constexpr] n: u32,
    #[constexpr] format: u32,
    #[constexpr] epl: u32,
    #[constexpr] vec: u32,
) {
    let base = group_id_x() * n + thread_id() * vec;
    let xs = stack_array::<f32>(epl);
    for e in 0..epl {
        let at = base + spread_offset(e, n, epl, vec);
        let s = (load(x[at]).cast::<f32>() + load(residual[at]).cast::<f32>()).cast::<T>();
        store(sum[at], s);
        store(xs[e], s.cast::<f32>());
    }
    norm_quant_regs(
        xs,
        w,
        q,
        scale,
        group_id_x(),
        n,
        eps,
        given,
        f32_range(x),
        format,
        epl,
        vec,
    );
}

/// The checks both forms share; returns `(rows, n)`.
#[allow(clippy::too_many_arguments)]
fn check_norm_quant(
    op: &'static str,
    x: &Tensor,
    w: &Tensor,
    q: &Tensor,
    scale: &Tensor,
    eps: f32,
    format: ActQuant,
    static_scale: Option<f32>,
) -> Result<(u32, u32), OpError> {
    dtype_in(op, "x", x, &FLOAT_DTYPES)?;
    distinct_named(op, "q", q, &[("x", x), ("w", w), ("scale", scale)])?;
    distinct_named(op, "scale", scale, &[("x", x), ("w", w)])?;
    dtype_is(op, "w", w, x.dtype())?;
    dtype_is(op, "q", q, format.dtype())?;
    dtype_is(op, "scale", scale, DType::F32)?;
    let (rows, n) = rows_of(op, "x", x)?;
    shape_is(op, "w", w, &[n])?;
    shape_is(op, "q", q, x.shape())?;
    shape_is(op, "scale", scale, &x.shape()[..x.shape().len() - 1])?;
    eps_ok(op, eps)?;
    if let Some(s) = static_scale {
        if !(s.is_finite() && s > 0.0) {
            return Err(OpError::invalid(
                op,
                format!("`static_scale` is {s}; a static scale must be finite and > 0"),
            ));
        }
    }
    let rows = fits_u32(op, "the row count", rows)?;
    let n = fits_u32(op, "the row length", n)?;
    fits_u32(op, "the element count", x.len())?;
    Ok((rows, n))
}

/// The codes of `rms_norm(x, w)` in `q` (x's shape; u8 fp8 bytes or i8) and one f32
/// scale per row in `scale` (x's shape without its last dimension): `y ≈ q · scale`.
/// `static_scale` (finite, > 0) quantizes every row with that scale instead of the row's
/// own `amax / max`, and is written to `scale` per row. Any row length.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_quant(
    ctx: &Context,
    x: &Tensor,
    w: &Tensor,
    q: &Tensor,
    scale: &Tensor,
    eps: f32,
    format: ActQuant,
    static_scale: Option<f32>,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_quant";
    let (rows, n) = check_norm_quant(OP, x, w, q, scale, eps, format, static_scale)?;
    if rows == 0 {
        return Ok(());
    }
    let given = static_scale.unwrap_or(0.0);
    if let Some(VecLayout::Row { epl, vec, threads }) = vec_layout(x.dtype(), n) {
        return rms_norm_quant_vec_kernel::launch(
            ctx,
            rms_norm_quant_vec_kernel::Args {
                x,
                w,
                q,
                scale,
                eps,
                given,
            },
            rms_norm_quant_vec_kernel::Consts {
                n,
                format: format.code(),
                epl,
                vec,
            },
        )
        .grid([rows, 1, 1])
        .group_size(threads)
        .run()
        .map_err(runtime(OP));
    }
    let launch = rms_norm_quant_kernel::launch(
        ctx,
        rms_norm_quant_kernel::Args {
            x,
            w,
            q,
            scale,
            eps,
            n,
            given,
        },
        rms_norm_quant_kernel::Consts {
            format: format.code(),
        },
    );
    run_strided_rows(OP, launch, rows, n)
}

/// `sum = x + residual` (x's dtype, written) and the codes and per-row scales of
/// `rms_norm(sum, w)` as [`rms_norm_quant`] gives them, in one pass.
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_residual_quant(
    ctx: &Context,
    x: &Tensor,
    residual: &Tensor,
    w: &Tensor,
    sum: &Tensor,
    q: &Tensor,
    scale: &Tensor,
    eps: f32,
    format: ActQuant,
    static_scale: Option<f32>,
) -> Result<(), OpError> {
    const OP: &str = "rms_norm_residual_quant";
    let (rows, n) = check_norm_quant(OP, x, w, q, scale, eps, format, static_scale)?;
    dtype_is(OP, "residual", residual, x.dtype())?;
    dtype_is(OP, "sum", sum, x.dtype())?;
    shape_is(OP, "residual", residual, x.shape())?;
    shape_is(OP, "sum", sum, x.shape())?;
    distinct_named(
        OP,
        "sum",
        sum,
        &[
            ("x", x),
            ("residual", residual),
            ("w", w),
            ("q", q),
            ("scale", scale),
        ],
    )?;
    distinct_named(OP, "q", q, &[("residual", residual)])?;
    distinct_named(OP, "scale", scale, &[("residual", residual)])?;
    if rows == 0 {
        return Ok(());
    }
    let given = static_scale.unwrap_or(0.0);
    if let Some(VecLayout::Row { epl, vec, threads }) = vec_layout(x.dtype(), n) {
        return rms_norm_residual_quant_vec_kernel::launch(
            ctx,
            rms_norm_residual_quant_vec_kernel::Args {
                x,
                residual,
                w,
                sum,
                q,
                scale,
                eps,
                given,
            },
            rms_norm_residual_quant_vec_kernel::Consts {
                n,
                format: format.code(),
                epl,
                vec,
            },
        )
        .grid([rows, 1, 1])
        .group_size(threads)
        .run()
        .map_err(runtime(OP));
    }
    let launch = rms_norm_residual_quant_kernel::launch(
        ctx,
        rms_norm_residual_quant_kernel::Args {
            x,
            residual,
            w,
            sum,
            q,
            scale,
            eps,
            n,
            given,
        },
        rms_norm_residual_quant_kernel::Consts {
            format: format.code(),
        },
    );
    run_strided_rows(OP, launch, rows, n)
}
