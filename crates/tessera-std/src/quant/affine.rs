//! `affine_quantize` and `affine_dequantize`: MLX's affine format ([`super::format`]) written
//! and read back with MLX's arithmetic, so the packed words, scales and biases are the
//! bytes `mx.quantize` gives and the dequantized weights `mx.dequantize`'s values.
//!
//! Quantizing follows MLX's CPU kernel step by step in f32: the group's min and max (NaN
//! ignored), `scale = max((max − min) / (2^bits − 1), 1e-7)`, negated unless |min| > |max|;
//! the edge (min or max, whichever is larger in magnitude) must be a whole number of
//! steps, so `q0 = rint(edge / scale)` and, when `q0 ≠ 0`, `scale = edge / q0` and `bias =
//! edge` (a group whose edge rounds to step 0 keeps its scale and a zero bias). Values are
//! quantized with the f32 scale and bias; only the stored ones are rounded to `w`'s dtype.
//! A thread takes one group. Dequantizing (a thread per unit of 32 values) is MLX's `q·scale + bias` in the scales' dtype:
//! the product rounded to it, then the sum (computed in f32, as MLX's half types do).

use super::format::AffineFormat;
use crate::error::{runtime, OpError};
use crate::validate::{distinct_named, dtype_in, dtype_is, fits_u32, shape_is, FLOAT_DTYPES};
use tessera_macros::{func, kernel};
use tessera_runtime::{Context, DType, Tensor};

/// Threads per threadgroup of both kernels.
const GROUP: u32 = 128;

/// `x` rounded to the nearest integer, ties to even (C's `rint` in the default rounding
/// mode): exact for every f32, since `x − floor(x)` is.
#[func]
pub fn round_half_even(x: f32) -> f32 {
    let r = floor(x);
    let f = x - r;
    let odd = r - 2.0f32 * floor(r * 0.5f32) == 1.0f32;
    select(f > 0.5f32 || (f == 0.5f32 && odd), r + 1.0f32, r)
}

/// One thread per group `g < groups`: its scale and bias, and its `group·bits / 32` words.
#[kernel]
pub fn affine_quantize_kernel<T>(
    w: Tensor<T>,
    mut packed: Tensor<u32>,
    mut scales: Tensor<T>,
    mut biases: Tensor<T>,
    groups: u32,
    #[constexpr] bits: u32,
    #[constexpr] group: u32,
) {
    let g = global_id();
    if g < groups {
        let base = g * group;
        let n_bins = ((1u32 << bits) - 1u32).cast::<f32>();
        let mut w_min = infinity();
        let mut w_max = neg_infinity();
        for j in range(0, group, 1) {
            let v = load(w[base + j]).cast::<f32>();
            w_min = min(w_min, v);
            w_max = max(w_max, v);
        }
        let below = abs(w_min) > abs(w_max);
        let step = max((w_max - w_min) / n_bins, 1e-7f32);
        let step = select(below, step, -step);
        let edge = select(below, w_min, w_max);
        let q0 = round_half_even(edge / step);
        let scale = select(q0 != 0.0f32, edge / q0, step);
        let bias = select(q0 != 0.0f32, edge, 0.0f32);
        store(scales[g], scale.cast::<T>());
        store(biases[g], bias.cast::<T>());
        let mut word = g * (group * bits / 32);
        let mut acc = 0u32;
        for j in range(0, group, 1) {
            let v = load(w[base + j]).cast::<f32>();
            let q = min(max(round_half_even((v - bias) / scale), 0.0f32), n_bins).cast::<u32>();
            let at = (j * bits) % 32;
            acc = acc | (q << at);
            if at + bits >= 32 {
                store(packed[word], acc);
                word += 1;
                // The bits of q that did not fit start the next word (none when q ended
                // exactly at the boundary; two shifts, as a shift by 32 is undefined).
                acc = (q >> 1u32) >> (31u32 - at);
            }
        }
    }
}

/// One thread per unit `u < units` of 32 consecutive values of `out` (`bits` whole words,
/// one 16-byte load at 4 bits; a row holds whole units and whole groups, so the unit's
/// words start at `u·bits`, its values at `u·32` and its group is `u / (group / 32)`):
/// `out = q·scale + bias`, rounded to `T` after the product and after the sum. Adjacent
/// threads read adjacent words and write adjacent 64-byte runs (at 16-bit `T`).
#[kernel]
pub fn affine_dequantize_kernel<T>(
    packed: Tensor<u32>,
    scales: Tensor<T>,
    biases: Tensor<T>,
    mut out: Tensor<T>,
    units: u32,
    #[constexpr] bits: u32,
    #[constexpr] group: u32,
) {
    let u = global_id();
    if u < units {
        let words = stack_array::<u32>(bits);
        for i in 0..bits {
            store(words[i], load(packed[u * bits + i]));
        }
        let gi = u / (group / 32);
        let scale = load(scales[gi]).cast::<f32>();
        let bias = load(biases[gi]).cast::<f32>();
        let mask = (1u32 << bits) - 1u32;
        for j in 0..32 {
            let bit = j * bits;
            let at = bit % 32;
            let lo = load(words[bit / 32]) >> at;
            // A value straddling two words takes its high bits from the next one (the
            // last word never starts one: a unit ends on a word boundary).
            let next = load(words[min(bit / 32 + 1, bits - 1)]);
            let hi = select(at + bits > 32, (next << 1u32) << (31u32 - at), 0u32);
            let q = (lo | hi) & mask;
            let product = (q.cast::<f32>() * scale).cast::<T>().cast::<f32>();
            store(out[u * 32 + j], (product + bias).cast::<T>());
        }
    }
}

/// Quantizes `w` `[N, K]` (f32, f16 or bf16) into `packed` `[N, K·bits/32]` u32 and
/// `scales`, `biases` `[N, K/group_size]` in `w`'s dtype, exactly as MLX's
/// `mx.quantize(w, group_size, bits)` does. K must be a multiple of `group_size`.
pub fn affine_quantize(
    ctx: &Context,
    w: &Tensor,
    packed: &Tensor,
    scales: &Tensor,
    biases: &Tensor,
    bits: u32,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "affine_quantize";
    let format = AffineFormat::new(OP, bits, group_size)?;
    dtype_in(OP, "w", w, &FLOAT_DTYPES)?;
    dtype_is(OP, "packed", packed, DType::U32)?;
    dtype_is(OP, "scales", scales, w.dtype())?;
    dtype_is(OP, "biases", biases, w.dtype())?;
    distinct_named(OP, "scales", scales, &[("w", w), ("biases", biases)])?;
    distinct_named(OP, "biases", biases, &[("w", w)])?;
    let (n, k) = match *w.shape() {
        [n, k] if n > 0 && k > 0 => (n, k),
        ref s => {
            return Err(OpError::invalid(
                OP,
                format!("`w` must be a non-empty matrix [N, K], got shape {s:?}"),
            ))
        }
    };
    format.check_row(OP, k)?;
    shape_is(OP, "packed", packed, &[n, format.words(k)])?;
    shape_is(OP, "scales", scales, &[n, format.groups(k)])?;
    shape_is(OP, "biases", biases, &[n, format.groups(k)])?;
    fits_u32(OP, "the element count of `w`", w.len())?;
    let groups = fits_u32(OP, "the group count", scales.len())?;
    affine_quantize_kernel::launch(
        ctx,
        affine_quantize_kernel::Args {
            w,
            packed,
            scales,
            biases,
            groups,
        },
        affine_quantize_kernel::Consts {
            bits,
            group: group_size,
        },
    )
    .grid([groups.div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}

/// `out[n, k] = scales[n, g]·q[n, k] + biases[n, g]` (g = k / group_size) from MLX's
/// `packed` words, in the scales' dtype: `mx.dequantize`'s values, bit for bit.
pub fn affine_dequantize(
    ctx: &Context,
    packed: &Tensor,
    scales: &Tensor,
    biases: &Tensor,
    out: &Tensor,
    bits: u32,
    group_size: u32,
) -> Result<(), OpError> {
    const OP: &str = "affine_dequantize";
    let format = AffineFormat::new(OP, bits, group_size)?;
    dtype_is(OP, "out", out, scales.dtype())?;
    distinct_named(
        OP,
        "out",
        out,
        &[("packed", packed), ("scales", scales), ("biases", biases)],
    )?;
    let (n, k) = format.check_quantized(OP, packed, scales, biases)?;
    shape_is(OP, "out", out, &[n, k])?;
    let total = fits_u32(OP, "the element count of `out`", out.len())?;
    affine_dequantize_kernel::launch(
        ctx,
        affine_dequantize_kernel::Args {
            packed,
            scales,
            biases,
            out,
            units: total / 32,
        },
        affine_dequantize_kernel::Consts {
            bits,
            group: group_size,
        },
    )
    .grid([(total / 32).div_ceil(GROUP), 1, 1])
    .group_size(GROUP)
    .run()
    .map_err(runtime(OP))
}
