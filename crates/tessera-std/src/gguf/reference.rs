//! References written from llama.cpp's `dequantize_row_*` (ggml-quants.c), block by
//! block in its order and with its f32 operations, so that a dequantized value is the one
//! llama.cpp computes to the bit; the GEMV reference sums those values times the
//! activations in f64.

use super::format::GgufFormat;
use half::f16;

/// The f16 at byte `i` of `b` (little-endian), widened to f32.
fn half_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// llama.cpp's `get_scale_min_k4`: the 6-bit scale and min of group `j` of `q[12]`.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// One block's weights, appended to `y`.
fn block(format: GgufFormat, x: &[u8], y: &mut Vec<f32>) {
    match format {
        GgufFormat::Q4_0 => {
            let d = half_at(x, 0);
            let qs = &x[2..18];
            let mut out = [0f32; 32];
            for j in 0..16 {
                let x0 = (qs[j] & 0x0F) as i32 - 8;
                let x1 = (qs[j] >> 4) as i32 - 8;
                out[j] = x0 as f32 * d;
                out[j + 16] = x1 as f32 * d;
            }
            y.extend_from_slice(&out);
        }
        GgufFormat::Q8_0 => {
            let d = half_at(x, 0);
            y.extend(x[2..34].iter().map(|&q| (q as i8) as f32 * d));
        }
        GgufFormat::Q4K | GgufFormat::Q5K => {
            let d = half_at(x, 0);
            let min = half_at(x, 2);
            let scales = &x[4..16];
            let five = format == GgufFormat::Q5K;
            let (qh, ql) = if five {
                (&x[16..48], &x[48..176])
            } else {
                (&x[0..0], &x[16..144])
            };
            let (mut u1, mut u2) = (1u8, 2u8);
            for (is, q) in (0..8).step_by(2).zip(ql.chunks(32)) {
                let (sc, m) = scale_min_k4(is, scales);
                let (d1, m1) = (d * sc as f32, min * m as f32);
                let (sc, m) = scale_min_k4(is + 1, scales);
                let (d2, m2) = (d * sc as f32, min * m as f32);
                let high = |l: usize, u: u8| if five && qh[l] & u != 0 { 16 } else { 0 };
                for (l, &b) in q.iter().enumerate() {
                    y.push(d1 * ((b & 0xF) + high(l, u1)) as f32 - m1);
                }
                for (l, &b) in q.iter().enumerate() {
                    y.push(d2 * ((b >> 4) + high(l, u2)) as f32 - m2);
                }
                u1 <<= 2;
                u2 <<= 2;
            }
        }
        GgufFormat::Q6K => {
            let d = half_at(x, 208);
            for half_block in 0..2 {
                let ql = &x[64 * half_block..];
                let qh = &x[128 + 32 * half_block..];
                let sc = &x[192 + 8 * half_block..];
                let mut out = [0f32; 128];
                for l in 0..32 {
                    let is = l / 16;
                    let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i32 - 32;
                    let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
                    let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
                    let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
                    let s = |i: usize| d * (sc[i] as i8) as f32;
                    out[l] = s(is) * q1 as f32;
                    out[l + 32] = s(is + 2) * q2 as f32;
                    out[l + 64] = s(is + 4) * q3 as f32;
                    out[l + 96] = s(is + 6) * q4 as f32;
                }
                y.extend_from_slice(&out);
            }
        }
    }
}

/// The weights of `n` rows of `k` in `format`, stored as `bytes` (`[n, row_bytes]`), as
/// llama.cpp computes them in f32.
pub fn dequantize(format: GgufFormat, bytes: &[u8], n: usize, k: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(n * k);
    for b in bytes
        .chunks(format.block_bytes())
        .take(n * k / format.block_elems())
    {
        block(format, b, &mut y);
    }
    y
}

/// `y[i, r] = Σ_e x[i, e] · w[r, e]` in f64 over the dequantized weights `w` (`[n, k]`).
pub fn qgemv(x: &[f64], w: &[f32], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for r in 0..n {
            y[i * n + r] = (0..k).map(|e| x[i * k + e] * w[r * k + e] as f64).sum();
        }
    }
    y
}

/// The f16 bits of `v` as a block stores its scale (a NaN as 0x7e00).
fn half_bits(v: f32) -> [u8; 2] {
    let h = f16::from_f32(v);
    let bits = if h.is_nan() { 0x7e00 } else { h.to_bits() };
    bits.to_le_bytes()
}

/// `x` (`n` rows of `k`, `k` a multiple of 32) in Q4_0 or Q8_0 blocks, as llama.cpp's
/// `quantize_row_q4_0_ref` / `quantize_row_q8_0_ref` compute them in f32. Float → int
/// conversions saturate and send NaN to 0 (Rust's `as`, the IR's rule; C leaves them
/// undefined out of range).
pub fn quantize(format: GgufFormat, x: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for xs in x.chunks(32) {
        match format {
            GgufFormat::Q4_0 => {
                let (mut amax, mut max) = (0f32, 0f32);
                for &v in xs {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&half_bits(d));
                for j in 0..16 {
                    let xi0 = ((xs[j] * id + 8.5) as i8).min(15) as u8;
                    let xi1 = ((xs[j + 16] * id + 8.5) as i8).min(15) as u8;
                    out.push(xi0 | (xi1 << 4));
                }
            }
            _ => {
                let mut amax = 0f32;
                for &v in xs {
                    // llama.cpp's MAX(a, b): `a > b ? a : b`.
                    amax = if amax > v.abs() { amax } else { v.abs() };
                }
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&half_bits(d));
                out.extend(xs.iter().map(|&v| (v * id).round() as i8 as u8));
            }
        }
    }
    out
}
