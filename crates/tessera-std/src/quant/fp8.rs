//! `fp8_quantize` and `fp8_dequantize` over the formats of [`super::fp8_format`], and the
//! two `#[func]`s every fp8 kernel codes and decodes a byte with.
//!
//! Decoding is bit arithmetic: the byte's exponent and mantissa are moved to f32's places
//! and the bias changed by one integer add (exact for a normal code); a subnormal code,
//! read so as `2^-bias·(1 + f)`, is `2v − 2^(1−bias)` (exact: the difference is a whole
//! number of the format's smallest steps), so no table and no conversion instruction.
//!
//! Quantizing is what DeepSeek-V3's `act_quant` / `weight_quant` and vLLM's
//! per-token-group quantizer do: a block's scale is `amax / max` in f32 (448 for e4m3,
//! 57344 for e5m2), and each value is `x / scale` in f32, rounded to the nearest fp8
//! value, ties to even mantissa. A value past the largest finite one (which `x / scale`
//! can only be by a rounding of the division, or for a non-finite x) saturates to ±max,
//! as quantizers do, rather than becoming NaN (e4m3's cast) or inf (e5m2's cast): a
//! `torch`/`ml_dtypes` cast of `clip(x / scale, −max, max)` gives the same bytes. An
//! all-zero block takes scale 1 (its codes are zeros whatever the scale). NaN in a block
//! makes its scale NaN and every code of the block NaN (`0x7F`); ±inf makes the scale inf,
//! the block's finite values ±0 and the infinite ones NaN.

use super::affine::round_half_even;
use super::fp8_format::{matrix, Fp8Format, Fp8Scaling};
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// Threads per threadgroup of both kernels.
const GROUP: u32 = 128;

/// The f32 value of the fp8 byte `code` (`format` 0: e4m3, 1: e5m2), exact, subnormals,
/// ±0, inf and NaN included.
#[func]
pub fn fp8_decode(code: u32, format: u32) -> f32 {
    let e5m2 = format == 1;
    let m = select(e5m2, 2u32, 3u32);
    let bias = select(e5m2, 15u32, 7u32);
    let mag = code & 0x7Fu32;
    let exponent = mag >> m;
    let v = ((mag << (23u32 - m)) + ((127u32 - bias) << 23u32)).bitcast::<f32>();
    let min_normal = select(e5m2, 0.00006103515625f32, 0.015625f32);
    let finite = select(exponent == 0u32, v + v - min_normal, v);
    let special = select(e5m2, exponent == 31u32, mag == 0x7Fu32);
    let special_bits = select(
        e5m2,
        0x7F80_0000u32 | ((code & 3u32) << 21u32),
        0x7FC0_0000u32,
    );
    let value = select(special, special_bits.bitcast::<f32>(), finite);
    (value.bitcast::<u32>() | ((code & 0x80u32) << 24u32)).bitcast::<f32>()
}

/// The fp8 byte nearest `v` (ties to even mantissa), ±max past the largest finite value
/// (saturating), `0x7F` for NaN.
#[func]
pub fn fp8_encode(v: f32, format: u32) -> u32 {
    let e5m2 = format == 1;
    let m = select(e5m2, 2u32, 3u32);
    let bias = select(e5m2, 15u32, 7u32);
    let largest = select(e5m2, 57344.0f32, 448.0f32);
    let min_normal = select(e5m2, 0.00006103515625f32, 0.015625f32);
    // 1 / the smallest subnormal step: 2^16, 2^9.
    let steps = select(e5m2, 65536.0f32, 512.0f32);
    let sign = (v.bitcast::<u32>() >> 24u32) & 0x80u32;
    let a = select(abs(v) > largest, largest, abs(v));
    let bits = a.bitcast::<u32>();
    let drop = 23u32 - m;
    // Round to nearest even on the mantissa bits kept; a carry moves into the exponent.
    let rounded = (bits + ((1u32 << (drop - 1u32)) - 1u32) + ((bits >> drop) & 1u32)) >> drop;
    let normal = rounded - ((127u32 - bias) << m);
    // Below the smallest normal every value is a whole number of subnormal steps away:
    // the step count, rounded, is the code (2^m, the smallest normal, included).
    let subnormal = round_half_even(a * steps).cast::<u32>();
    let magnitude = select(a < min_normal, subnormal, normal);
    select(v != v, 0x7Fu32, sign | magnitude)
}

/// One threadgroup per scale block `b` (block row `b / scale_cols`, column `b %
/// scale_cols`) of `x` `[n, k]`: the block's largest magnitude, its scale, its codes.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn fp8_quantize_kernel<T>(
    x: Tensor<T>,
    mut q: Tensor<u8>,
    mut scale: Tensor<f32>,
    n: u32,
    k: u32,
    block_rows: u32,
    block_cols: u32,
    scale_cols: u32,
    #[constexpr] format: u32,
) {
    let b = group_id_x();
    let r0 = (b / scale_cols) * block_rows;
    let c0 = (b % scale_cols) * block_cols;
    let cols = min(block_cols, k - c0);
    let count = min(block_rows, n - r0) * cols;
    let mut amax = 0.0f32;
    let mut nan = 0.0f32;
    for i in range(thread_id(), count, 128) {
        let v = abs(load(x[(r0 + i / cols) * k + c0 + i % cols]).cast::<f32>());
        nan = select(v != v, 1.0f32, nan);
        amax = select(v > amax, v, amax);
    }
    let amax = group_max(amax);
    let any_nan = group_max(nan);
    let largest = select(format == 1, 57344.0f32, 448.0f32);
    let s = select(
        any_nan > 0.0f32,
        0x7FC0_0000u32.bitcast::<f32>(),
        select(amax > 0.0f32, amax / largest, 1.0f32),
    );
    if thread_id() == 0 {
        store(scale[b], s);
    }
    for i in range(thread_id(), count, 128) {
        let at = (r0 + i / cols) * k + c0 + i % cols;
        let v = load(x[at]).cast::<f32>();
        store(q[at], fp8_encode(v / s, format).cast::<u8>());
    }
}

/// One thread per element `i < total` of `out` `[·, k]`: `fp8 · scale` in f32, rounded
/// once to `T`.
#[allow(clippy::too_many_arguments)]
#[kernel]
pub fn fp8_dequantize_kernel<T>(
    q: Tensor<u8>,
    scale: Tensor<f32>,
    mut out: Tensor<T>,
    total: u32,
    k: u32,
    block_rows: u32,
    block_cols: u32,
    scale_cols: u32,
    #[constexpr] format: u32,
) {
    let i = global_id();
    if i < total {
        let r = i / k;
        let c = i % k;
        let s = load(scale[(r / block_rows) * scale_cols + c / block_cols]);
        let v = fp8_decode(load(q[i]).cast::<u32>(), format) * s;
        store(out[i], v.cast::<T>());
    }
}

/// Quantizes `x` `[N, K]` (f32, f16 or bf16) to fp8 bytes `q` `[N, K]` u8 and f32 scales
/// `scale` (`[1, 1]`, `[N, ceil(K/128)]` or `[ceil(N/128), ceil(K/128)]` as `scaling`
/// says), `x ≈ fp8(q) · scale`: each block's scale maps its largest magnitude to the
/// format's largest value.
pub fn fp8_quantize(
    ctx: &Context,
    x: &Tensor,
    q: &Tensor,
    scale: &Tensor,
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> Result<(), OpError> {
    const OP: &str = "fp8_quantize";
    dtype_in(OP, "x", x, &FLOAT_DTYPES)?;
    distinct_named(OP, "q", q, &[("x", x), ("scale", scale)])?;
    distinct_named(OP, "scale", scale, &[("x", x)])?;
    dtype_is(OP, "q", q, DType::U8)?;
    let (n, k) = matrix(OP, "x", x)?;
    shape_is(OP, "q", q, &[n, k])?;
    scaling.check_scale(OP, scale, (n, k))?;
    fits_u32(OP, "the element count of `x`", x.len())?;
    let blocks = fits_u32(OP, "the scale count", scale.len())?;
    let (bn, bk) = scaling.block((n, k));
    fp8_quantize_kernel::launch(
        ctx,
        fp8_quantize_kernel::Args {
            x,
            q,
            scale,
            n: n as u32,
            k: k as u32,
            block_rows: bn as u32,
            block_cols: bk as u32,
            scale_cols: scale.shape()[1] as u32,
        },
        fp8_quantize_kernel::Consts {
            format: format.code(),
        },
    )
    .grid([blocks, 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}

/// `out[n, k] = fp8(q[n, k]) · scale[block of (n, k)]`, computed in f32 and rounded once to
/// `out`'s dtype (f32, f16 or bf16): DeepSeek-V3's `weight_dequant` for `128x128`.
pub fn fp8_dequantize(
    ctx: &Context,
    q: &Tensor,
    scale: &Tensor,
    out: &Tensor,
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> Result<(), OpError> {
    const OP: &str = "fp8_dequantize";
    dtype_is(OP, "q", q, DType::U8)?;
    dtype_in(OP, "out", out, &FLOAT_DTYPES)?;
    distinct_named(OP, "out", out, &[("q", q), ("scale", scale)])?;
    let (n, k) = matrix(OP, "q", q)?;
    scaling.check_scale(OP, scale, (n, k))?;
    shape_is(OP, "out", out, &[n, k])?;
    let total = fits_u32(OP, "the element count of `q`", q.len())?;
    let (bn, bk) = scaling.block((n, k));
    fp8_dequantize_kernel::launch(
        ctx,
        fp8_dequantize_kernel::Args {
            q,
            scale,
            out,
            total,
            k: k as u32,
            block_rows: bn as u32,
            block_cols: bk as u32,
            scale_cols: scale.shape()[1] as u32,
        },
        fp8_dequantize_kernel::Consts {
            format: format.code(),
        },
    )
    .grid([total.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
