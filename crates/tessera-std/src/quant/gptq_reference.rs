//! References for GPTQ's int4 words, written from the format's description (AutoGPTQ's
//! `gptq` checkpoint format, act-order off; see [`super::gptq`]), not from our kernels:
//! a code is its nibble, the zero point the stored nibble plus one, the weight the exact
//! `scale·(q − zero)`; the GEMV is the exact product in f64.

use crate::elementwise::reference::round_to;
use tessera_runtime::DType;

/// Nibble `j` (0–7) of the 32-bit word `word` (an i32 as f64).
fn nibble(word: f64, j: usize) -> u32 {
    ((word as i64 as u32) >> (4 * j)) & 15
}

/// `w[k, n]` `[k, n]` in f64, exact.
pub fn weights(
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (k, n): (usize, usize),
    group: usize,
) -> Vec<f64> {
    let mut w = Vec::with_capacity(k * n);
    for kk in 0..k {
        for col in 0..n {
            let q = nibble(qweight[(kk / 8) * n + col], kk % 8);
            let g = kk / group;
            let zero = nibble(qzeros[g * (n / 8) + col / 8], col % 8) + 1;
            w.push(scales[g * n + col] * (f64::from(q) - f64::from(zero)));
        }
    }
    w
}

/// The weights rounded once to `dtype`.
pub fn dequantize(
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (k, n): (usize, usize),
    group: usize,
    dtype: DType,
) -> Vec<f64> {
    weights(qweight, qzeros, scales, (k, n), group)
        .into_iter()
        .map(|v| round_to(dtype, v))
        .collect()
}

/// `y[m, n] = Σ_k x[m, k]·w[k, n]` in f64.
pub fn qgemv(
    x: &[f64],
    qweight: &[f64],
    qzeros: &[f64],
    scales: &[f64],
    (m, n, k): (usize, usize, usize),
    group: usize,
) -> Vec<f64> {
    let w = weights(qweight, qzeros, scales, (k, n), group);
    crate::matmul::reference::matmul(x, &w, (m, n, k), false)
}
