//! References for the fp8 formats, written from their definitions (the OCP 8-bit floating
//! point specification's E4M3 and E5M2, as `torch.float8_e4m3fn` and `torch.float8_e5m2`
//! implement them), not from our kernels: a byte's value from its sign, exponent and
//! mantissa fields; the nearest byte to a value by searching all 256 (ties to the even
//! mantissa), with quantization's f32 arithmetic (`amax / max`, `x / scale`) one IEEE
//! operation at a time. The GEMV reference is the exact product in f64.

use super::fp8_format::{Fp8Format, Fp8Scaling};
use crate::elementwise::reference::round_to;
use tessera_runtime::DType;

/// (exponent bits, mantissa bits, bias) of a format.
fn fields(format: Fp8Format) -> (u32, u32, i32) {
    match format {
        Fp8Format::E4m3 => (4, 3, 7),
        Fp8Format::E5m2 => (5, 2, 15),
    }
}

/// The value of byte `code`.
pub fn decode(format: Fp8Format, code: u8) -> f64 {
    let (e_bits, m_bits, bias) = fields(format);
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((code >> m_bits) & ((1 << e_bits) - 1) as u8) as i32;
    let m = (code & ((1 << m_bits) - 1) as u8) as f64;
    let top = (1 << e_bits) - 1;
    let frac = m / f64::from(1u32 << m_bits);
    match format {
        Fp8Format::E4m3 if e == top && m as u32 == 7 => f64::NAN,
        Fp8Format::E5m2 if e == top && m == 0.0 => sign * f64::INFINITY,
        Fp8Format::E5m2 if e == top => f64::NAN,
        _ if e == 0 => sign * frac * 2f64.powi(1 - bias),
        _ => sign * (1.0 + frac) * 2f64.powi(e - bias),
    }
}

/// The byte nearest `v`: the finite code of least distance (ties to the even code, whose
/// mantissa is even), ±max past the range, `0x7F` for NaN; the sign of `v` kept (−0 is
/// `0x80`).
pub fn encode(format: Fp8Format, v: f64) -> u8 {
    if v.is_nan() {
        return 0x7F;
    }
    let sign = if v.is_sign_negative() { 0x80 } else { 0 };
    let a = v.abs().min(f64::from(format.max()));
    let mut best = 0u8;
    let mut best_d = f64::INFINITY;
    for code in 0u8..0x80 {
        let c = decode(format, code);
        if !c.is_finite() {
            continue;
        }
        let d = (c - a).abs();
        if d < best_d || (d == best_d && code % 2 == 0) {
            best = code;
            best_d = d;
        }
    }
    sign | best
}

/// Scale blocks: (rows, columns) each covers, and the scale's shape.
fn blocks(scaling: Fp8Scaling, (n, k): (usize, usize)) -> ((usize, usize), [usize; 2]) {
    (scaling.block((n, k)), scaling.scale_shape((n, k)))
}

/// The index of the scale of element `(r, c)`.
fn scale_index(scaling: Fp8Scaling, (n, k): (usize, usize), r: usize, c: usize) -> usize {
    let ((bn, bk), [_, sk]) = blocks(scaling, (n, k));
    (r / bn) * sk + c / bk
}

/// The bytes and scales of `x` `[n, k]`: per block `scale = amax / max` in f32 (NaN if the
/// block holds a NaN, 1 for an all-zero block), each value the byte nearest `x / scale`
/// (f32 division).
pub fn quantize(
    x: &[f64],
    (n, k): (usize, usize),
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> (Vec<f64>, Vec<f64>) {
    let (_, [sn, sk]) = blocks(scaling, (n, k));
    let mut amax = vec![0f32; sn * sk];
    let mut nan = vec![false; sn * sk];
    for r in 0..n {
        for c in 0..k {
            let b = scale_index(scaling, (n, k), r, c);
            let v = (x[r * k + c] as f32).abs();
            nan[b] |= v.is_nan();
            if v > amax[b] {
                amax[b] = v;
            }
        }
    }
    let scales: Vec<f32> = (0..sn * sk)
        .map(|b| match (nan[b], amax[b]) {
            (true, _) => f32::NAN,
            (false, a) if a > 0.0 => a / format.max(),
            _ => 1.0,
        })
        .collect();
    let codes = (0..n * k)
        .map(|i| {
            let s = scales[scale_index(scaling, (n, k), i / k, i % k)];
            f64::from(encode(format, f64::from(x[i] as f32 / s)))
        })
        .collect();
    (codes, scales.into_iter().map(f64::from).collect())
}

/// `fp8(q)·scale` in f32, rounded to `dtype`.
pub fn dequantize(
    q: &[f64],
    scales: &[f64],
    (n, k): (usize, usize),
    format: Fp8Format,
    scaling: Fp8Scaling,
    dtype: DType,
) -> Vec<f64> {
    (0..n * k)
        .map(|i| {
            let s = scales[scale_index(scaling, (n, k), i / k, i % k)] as f32;
            let v = decode(format, q[i] as u8) as f32 * s;
            round_to(dtype, f64::from(v))
        })
        .collect()
}

/// `y[m, n] = Σ_k x[m, k]·fp8(w[n, k])·scale` in f64.
pub fn qgemv(
    x: &[f64],
    w: &[f64],
    scales: &[f64],
    (m, n, k): (usize, usize, usize),
    format: Fp8Format,
    scaling: Fp8Scaling,
) -> Vec<f64> {
    let weights: Vec<f64> = (0..n * k)
        .map(|i| decode(format, w[i] as u8) * scales[scale_index(scaling, (n, k), i / k, i % k)])
        .collect();
    crate::matmul::reference::matmul(x, &weights, (m, n, k), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values the formats' definitions give for landmark bytes.
    #[test]
    fn landmark_bytes_decode_to_the_published_values() {
        let e4 = Fp8Format::E4m3;
        assert_eq!(decode(e4, 0x7E), 448.0);
        assert_eq!(decode(e4, 0xFE), -448.0);
        assert_eq!(decode(e4, 0x01), 2f64.powi(-9));
        assert_eq!(decode(e4, 0x08), 2f64.powi(-6));
        assert_eq!(decode(e4, 0x38), 1.0);
        assert!(decode(e4, 0x7F).is_nan() && decode(e4, 0xFF).is_nan());
        assert!(decode(e4, 0x80) == 0.0 && decode(e4, 0x80).is_sign_negative());
        let e5 = Fp8Format::E5m2;
        assert_eq!(decode(e5, 0x7B), 57344.0);
        assert_eq!(decode(e5, 0x01), 2f64.powi(-16));
        assert_eq!(decode(e5, 0x3C), 1.0);
        assert_eq!(decode(e5, 0x7C), f64::INFINITY);
        assert_eq!(decode(e5, 0xFC), f64::NEG_INFINITY);
        assert!(decode(e5, 0x7D).is_nan());
    }

    /// Every finite byte encodes back to itself; halfway points go to the even byte;
    /// values past the range saturate.
    #[test]
    fn encoding_inverts_decoding_and_rounds_ties_to_even() {
        for format in [Fp8Format::E4m3, Fp8Format::E5m2] {
            for code in 0u8..=255 {
                let v = decode(format, code);
                if v.is_finite() {
                    assert_eq!(encode(format, v), code, "{format:?} {code:#x}");
                }
            }
            // 1 + half a step is a tie between 1 (even) and the next byte (odd).
            let one = encode(format, 1.0);
            let next = decode(format, one + 1);
            assert_eq!(encode(format, (1.0 + next) / 2.0), one);
            assert_eq!(encode(format, 1e9), encode(format, f64::from(format.max())));
            assert_eq!(
                encode(format, f64::NEG_INFINITY) & 0x7F,
                encode(format, 1e9)
            );
        }
    }
}
