//! The GGUF kernels: a block decoder shared by all of them (`scale`, `min`, `quant` of a
//! weight, so that `weight = scale · quant − min` with llama.cpp's f32 operations and
//! order), the dequantizer and the GEMV.
//!
//! Weights are decoded eight at a time: eight consecutive weights starting at a multiple
//! of eight share one block and one scale group in every format, so their scale and min
//! are read once.

use tessera_macros::{func, kernel};

/// Weights each thread decodes at a time (a divisor of every scale group).
pub const CHUNK: u32 = 8;
/// Threads per threadgroup of the dequantizer, and simdgroups (rows) per threadgroup of
/// the GEMV.
pub const GROUP: u32 = 256;
pub const ROWS_PER_GROUP: u32 = 4;

/// A byte of `w` as u32. (The decoders take memory of any element type, so that a kernel
/// generic over its weights' type can call them; they read u8 tensors.)
#[func]
fn byte<Q>(w: Mem<Q>, i: u32) -> u32 {
    load(w[i]).cast::<u32>()
}

/// A byte of `w` read as an i8 (two's complement), widened to i32.
#[func]
fn signed_byte<Q>(w: Mem<Q>, i: u32) -> i32 {
    (byte(w, i) ^ 128).cast::<i32>() - 128
}

/// The f16 stored little-endian at byte `i` of `w`, widened exactly to f32 as llama.cpp's
/// `GGML_FP16_TO_FP32` does: sign, exponent and mantissa moved to f32's places, a
/// subnormal half as its mantissa times 2^-24 (exact in f32), ±inf and NaN kept.
#[func]
fn half_at<Q>(w: Mem<Q>, i: u32) -> f32 {
    let h = byte(w, i) | (byte(w, i + 1) << 8);
    let sign = (h >> 15) << 31;
    let exp = (h >> 10) & 31;
    let mant = h & 1023;
    let normal = (sign | ((exp + 112) << 23) | (mant << 13)).bitcast::<f32>();
    let special = (sign | 0x7f80_0000 | (mant << 13)).bitcast::<f32>();
    let tiny = mant.cast::<f32>() * 5.960_464_5e-8;
    let subnormal = select(sign != 0, -tiny, tiny);
    select(exp == 31, special, select(exp == 0, subnormal, normal))
}

/// The 6-bit scale (`want_min` 0) or min (1) of group `j` (0..8) of a K-format block
/// whose `scales[12]` start at byte `s`: llama.cpp's `get_scale_min_k4`.
#[func]
fn scale_min_k4<Q>(w: Mem<Q>, s: u32, j: u32, want_min: u32) -> f32 {
    let mut v = 0u32;
    if j < 4 {
        v = byte(w, s + j + 4 * want_min) & 63;
    } else {
        let low = byte(w, s + j + 4);
        let high = byte(w, s + j - 4 + 4 * want_min) >> 6;
        v = select(want_min == 0, low & 15, low >> 4) | (high << 4);
    }
    v.cast::<f32>()
}

/// Byte offset of the block holding weight `e` of the row starting at byte `row`.
#[func]
fn block_at(row: u32, e: u32, format: u32) -> u32 {
    let mut b = 0u32;
    if format == 0 {
        b = row + (e / 32) * 18;
    } else if format == 1 {
        b = row + (e / 32) * 34;
    } else if format == 2 {
        b = row + (e / 256) * 144;
    } else if format == 3 {
        b = row + (e / 256) * 176;
    } else {
        b = row + (e / 256) * 210;
    }
    b
}

/// The scale of weight `e` (`d`, `d·sc` for the K formats) in the block at byte `b`.
#[func]
fn scale<Q>(w: Mem<Q>, b: u32, e: u32, format: u32) -> f32 {
    let mut s = 0.0f32;
    if format < 2 {
        s = half_at(w, b);
    } else if format < 4 {
        let i = e % 256;
        s = half_at(w, b) * scale_min_k4(w, b + 4, i / 32, 0);
    } else {
        let i = e % 256;
        let r = i % 128;
        let sc = signed_byte(w, b + 192 + (i / 128) * 8 + (r % 32) / 16 + 2 * (r / 32));
        s = half_at(w, b + 208) * sc.cast::<f32>();
    }
    s
}

/// The offset subtracted from weight `e` (`dmin·m` for Q4_K and Q5_K, else 0).
#[func]
fn offset<Q>(w: Mem<Q>, b: u32, e: u32, format: u32) -> f32 {
    let mut m = 0.0f32;
    if format == 2 || format == 3 {
        m = half_at(w, b + 2) * scale_min_k4(w, b + 4, (e % 256) / 32, 1);
    }
    m
}

/// The integer of weight `e` in the block at byte `b`, offsets included (Q4_0's −8,
/// Q6_K's −32), as f32.
#[func]
fn quant<Q>(w: Mem<Q>, b: u32, e: u32, format: u32) -> f32 {
    let mut q = 0i32;
    if format == 0 {
        let j = e % 32;
        q = ((byte(w, b + 2 + j % 16) >> (4 * (j / 16))) & 15).cast::<i32>() - 8;
    } else if format == 1 {
        q = signed_byte(w, b + 2 + e % 32);
    } else if format == 2 {
        let i = e % 256;
        q = ((byte(w, b + 16 + (i / 64) * 32 + i % 32) >> (4 * ((i % 64) / 32))) & 15)
            .cast::<i32>();
    } else if format == 3 {
        let i = e % 256;
        let hi = (i % 64) / 32;
        let low = (byte(w, b + 48 + (i / 64) * 32 + i % 32) >> (4 * hi)) & 15;
        let fifth = (byte(w, b + 16 + i % 32) >> (2 * (i / 64) + hi)) & 1;
        q = (low | (fifth << 4)).cast::<i32>();
    } else {
        let i = e % 256;
        let r = i % 128;
        let quarter = r / 32;
        let l = r % 32;
        let low =
            (byte(w, b + (i / 128) * 64 + l + 32 * (quarter % 2)) >> (4 * (quarter / 2))) & 15;
        let high = (byte(w, b + 128 + (i / 128) * 32 + l) >> (2 * quarter)) & 3;
        q = (low | (high << 4)).cast::<i32>() - 32;
    }
    q.cast::<f32>()
}

/// The chunk of eight weights `k … k + 8` of row `n` (rows of `row_bytes` bytes) of the
/// GEMM's B tile: its scale and offset into factors `2i`, `2i + 1`, its eight integers
/// (each biased by 128 into a byte) into words `3i`, `3i + 1`.
#[allow(clippy::too_many_arguments)]
#[func]
pub fn gguf_chunk_load<Q>(
    mut words: Mem<u32>,
    mut factors: Mem<f32>,
    i: u32,
    w: Mem<Q>,
    n: u32,
    k: u32,
    row_bytes: u32,
    format: u32,
) {
    let b = block_at(n * row_bytes, k, format);
    store(factors[2 * i], scale(w, b, k, format));
    store(factors[2 * i + 1], offset(w, b, k, format));
    for h in 0..2 {
        let mut word = 0u32;
        for j in 0..4 {
            let q = quant(w, b, k + h * 4 + j, format).cast::<i32>() + 128;
            word = word | (q.cast::<u32>() << (8 * j));
        }
        store(words[3 * i + h], word);
    }
}

/// The eight weights of chunk `i`, `scale · quant − offset` (the dequantizer's f32
/// operations), rounded to `T` into `sb[at …]`; zeros where `inside` is false.
#[func]
pub fn gguf_chunk_dequantize<T>(
    mut sb: Mem<T>,
    at: u32,
    words: Mem<u32>,
    factors: Mem<f32>,
    i: u32,
    inside: bool,
) {
    let s = load(factors[2 * i]);
    let m = load(factors[2 * i + 1]);
    for j in 0..8 {
        let q = ((load(words[3 * i + j / 4]) >> ((j % 4) * 8)) & 255u32).cast::<f32>() - 128.0;
        store(sb[at + j], select(inside, s * q - m, 0.0f32).cast::<T>());
    }
}

/// `out[r, e] = scale · quant − offset` for `n` rows of `k` weights: each thread one
/// chunk of `CHUNK` weights of one row.
#[kernel]
pub fn gguf_dequantize_kernel<T>(
    w: Tensor<u8>,
    mut out: Tensor<T>,
    n: u32,
    k: u32,
    row_bytes: u32,
    #[constexpr] format: u32,
) {
    let chunk = global_id();
    let per_row = k / 8;
    if chunk < n * per_row {
        let r = chunk / per_row;
        let e0 = (chunk % per_row) * 8;
        let b = block_at(r * row_bytes, e0, format);
        let s = scale(w, b, e0, format);
        let m = offset(w, b, e0, format);
        for j in 0..8 {
            let v = s * quant(w, b, e0 + j, format) - m;
            store(out[r * k + e0 + j], v.cast::<T>());
        }
    }
}

/// `y[i, r] = Σ_e x[i, e] · weight(r, e)` for `m` activation rows: each simdgroup one
/// weight row, its lanes striding over the row by chunks of `CHUNK` weights (a whole
/// Q4_K block per step of the simdgroup), f32 accumulators, one `simd_sum` per output.
#[kernel]
pub fn gguf_qgemv_kernel<T>(
    x: Tensor<T>,
    w: Tensor<u8>,
    mut y: Tensor<T>,
    n: u32,
    k: u32,
    row_bytes: u32,
    #[constexpr] format: u32,
    #[constexpr] m: u32,
) {
    let r = group_id_x() * 4 + simd_id();
    if r < n {
        let acc = stack_array::<f32>(m);
        for i in 0..m {
            store(acc[i], 0.0f32);
        }
        let row = r * row_bytes;
        for c in range(simd_lane(), k / 8, 32) {
            let e0 = c * 8;
            let b = block_at(row, e0, format);
            let s = scale(w, b, e0, format);
            let o = offset(w, b, e0, format);
            for j in 0..8 {
                let v = s * quant(w, b, e0 + j, format) - o;
                for i in 0..m {
                    let xv = load(x[i * k + e0 + j]).cast::<f32>();
                    store(acc[i], load(acc[i]) + xv * v);
                }
            }
        }
        for i in 0..m {
            let total = simd_sum(load(acc[i]));
            if simd_lane() == 0 {
                store(y[i * n + r], total.cast::<T>());
            }
        }
    }
}

/// The bits of the f16 nearest `v` (ties to even), as llama.cpp's `GGML_FP32_TO_FP16`
/// stores a block's scale; a NaN is stored as the quiet NaN 0x7e00 whatever its payload.
/// The rounding is the hardware's f32 → f16 conversion; the bits come from the exact f32
/// of that f16: exponent rebased for a normal half, the mantissa times 2^24 for a
/// subnormal one.
#[func]
fn half_bits(v: f32) -> u32 {
    let h = v.cast::<f16>().cast::<f32>();
    let u = h.bitcast::<u32>();
    let sign = (u >> 31) << 15;
    let e = (u >> 23) & 255;
    let normal = sign | ((e - 112) << 10) | ((u >> 13) & 1023);
    let subnormal = sign | (h.abs() * 16_777_216.0).cast::<u32>();
    let finite = select(e >= 113, normal, subnormal);
    select(h.is_nan(), 0x7e00, select(e == 255, sign | 0x7c00, finite))
}

/// One block of 32 values of `x` per thread into Q4_0 (`format` 0) or Q8_0 (1), as
/// llama.cpp's `quantize_row_q4_0_ref` / `quantize_row_q8_0_ref` do: Q4_0's scale is the
/// first value of largest magnitude over −8 and each weight `min(15, trunc(x/d + 8.5))`;
/// Q8_0's scale is the largest magnitude over 127 and each weight `x/d` rounded half away
/// from zero. Both multiply by the f32 reciprocal of the unrounded scale.
#[kernel]
pub fn gguf_quantize_kernel<T>(
    x: Tensor<T>,
    mut w: Tensor<u8>,
    blocks: u32,
    #[constexpr] format: u32,
) {
    let b = global_id();
    if b < blocks {
        let base = b * 32;
        let mut amax = 0.0f32;
        let mut peak = 0.0f32;
        for j in 0..32 {
            let v = load(x[base + j]).cast::<f32>();
            if format == 0 {
                if amax < v.abs() {
                    amax = v.abs();
                    peak = v;
                }
            } else {
                amax = select(amax > v.abs(), amax, v.abs());
            }
        }
        let d = if format == 0 {
            peak / -8.0
        } else {
            amax / 127.0
        };
        let id = select(d != 0.0, 1.0 / d, 0.0);
        let at = b * (18 + 16 * format);
        let bits = half_bits(d);
        store(w[at], (bits & 255).cast::<u8>());
        store(w[at + 1], (bits >> 8).cast::<u8>());
        if format == 0 {
            for j in 0..16 {
                let x0 = load(x[base + j]).cast::<f32>() * id;
                let x1 = load(x[base + 16 + j]).cast::<f32>() * id;
                let q0 = min((x0 + 8.5).cast::<i8>(), 15)
                    .bitcast::<u8>()
                    .cast::<u32>();
                let q1 = min((x1 + 8.5).cast::<i8>(), 15)
                    .bitcast::<u8>()
                    .cast::<u32>();
                store(w[at + 2 + j], ((q0 | (q1 << 4)) & 255).cast::<u8>());
            }
        } else {
            for j in 0..32 {
                let x0 = load(x[base + j]).cast::<f32>() * id;
                let a = x0.abs();
                let t = a.floor();
                let r = t + select(a - t >= 0.5, 1.0, 0.0);
                let q = select(x0 < 0.0, -r, r);
                store(w[at + 2 + j], q.cast::<i8>().bitcast::<u8>());
            }
        }
    }
}
